"""The suite's plan (``./gr suite --dry-run``): estimates built from measured runs, checked by hand."""
import json

import pytest

from gr_core.plan import SPLIT_SIZES, estimate_run, plan, render
from gr_core.speeds import measured_runs, profiles


def _write(path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


@pytest.fixture
def outputs(tmp_path):
    """An outputs/ tree with one measured fp32 run and the bf16/fp32 speedups of a bench."""
    run = tmp_path / "quick" / "runs" / "explagraphs-g_retriever-seed0"
    _write(run / "metrics.json", {"dataset": "explagraphs", "method": "g_retriever", "num_train": 100, "num_val": 50,
                                  "num_test": 10, "inference_seconds": 20.0, "mean_prompt_tokens": 150.0})
    _write(run / "config.json", {"model": {"llm": {"model": "embedded:smollm2-135m-instruct"}}})
    # 160 tokens per example, 160 tokens/s, 0.2 s per validation question
    _write(run / "history.json", [{"train_tokens": 16000, "train_seconds": 100.0, "val_seconds": 10.0}] * 2)
    _write(tmp_path / "bench" / "precision.json", {"speedups_bf16_vs_fp32": {
        "g_retriever_step": 2.0, "g_retriever_lora_step": 1.5, "answers": 4.0}})
    return tmp_path


def test_a_run_is_estimated_from_the_measured_run_scaled_to_the_target(outputs):
    measured = measured_runs(outputs)
    assert len(measured) == 1 and measured.iloc[0].tokens_per_example == 160.0 and measured.iloc[0].train_tps == 160.0
    from gr_core.speeds import PROFILE_NAMES

    assert tuple(profiles(outputs)) == PROFILE_NAMES  # the command lines' --profile choices are the profiles there are
    bf16 = profiles(outputs)["cpu-bf16"]
    r = estimate_run("explagraphs", "g_retriever", 3, 2, (1659, 553, 554), True, measured, bf16)
    # per seed: training 1659 x 160 x 2 tokens at 160 x 2 tokens/s = 1659 s; validation 2 x 553 x 0.2 / 2 = 110.6 s;
    # answers 554 x 2 s / 4 = 277 s; three seeds
    assert r["seconds"] == round(3 * (1659 + 110.6 + 277)) and r["tokens"] == 3 * 1659 * 160 * 2
    assert r["basis"] == "quick/explagraphs-g_retriever-seed0"
    # the stand-in for a method never run (prompt tuning: the same inputs as G-Retriever), and the fp32 profile
    fp32 = estimate_run("explagraphs", "prompt_tuning", 1, 2, (1659, 553, 554), True, measured,
                        profiles(outputs)["cpu-fp32"])
    assert fp32["seconds"] == round(2 * 1659 + 2 * 553 * 0.2 + 554 * 2)
    # nothing measured on another dataset, and no GPU throughput: unknown, never guessed
    assert estimate_run("webqsp", "g_retriever", 1, 2, (976, 326, 326), True, measured, bf16)["seconds"] is None
    gpu = estimate_run("explagraphs", "g_retriever", 1, 2, (1659, 553, 554), True, measured, profiles(outputs)["h100"])
    assert gpu["seconds"] is None and gpu["tokens"] == 1659 * 160 * 2 and "no h100 throughput" in gpu["basis"]


def test_a_cpu_without_avx512_scales_the_runs_by_the_throughput_bench_measured_on_one(outputs):
    measured = measured_runs(outputs)
    assert profiles(outputs)["cpu-avx2"].train is None  # no bench on such a CPU: its rows are unknown
    assert estimate_run("explagraphs", "g_retriever", 1, 2, (1659, 553, 554), True, measured,
                        profiles(outputs)["cpu-avx2"])["seconds"] is None
    _write(outputs / "bench" / "train_infer_throughput-float32.json",
           {"ours_train_tokens_per_s": 200.0, "ours_infer_answers_per_s": 1.0})
    _write(outputs / "bench" / "train_infer_throughput-float32-avx2.json",
           {"ours_train_tokens_per_s": 100.0, "ours_infer_answers_per_s": 0.8})
    avx2 = profiles(outputs)["cpu-avx2"]
    assert (avx2.train, avx2.lora, avx2.answer) == (0.5, 0.5, 0.8)
    r = estimate_run("explagraphs", "g_retriever", 1, 2, (1659, 553, 554), True, measured, avx2)
    assert r["seconds"] == round(2 * 1659 / 0.5 + 2 * 553 * 0.2 / 0.5 + 554 * 2 / 0.8)


def test_split_sizes_are_the_loaders():
    from gr_core.graphqa import DatasetConfig, load_dataset

    ds = load_dataset(DatasetConfig("explagraphs"))
    assert tuple(len(ds.split[s]) for s in ("train", "val", "test")) == SPLIT_SIZES["explagraphs"]


def test_the_plan_lists_every_notebook_and_the_presets_runs():
    runs, notebooks = plan("cpu", "cpu-bf16")
    assert list(notebooks.notebook)[:4] == ["00_quickstart", "01_datasets", "02_retrieval", "03_training"]
    g = runs[runs.name == "explagraphs-g_retriever"].iloc[0]
    assert (g.seeds, g.epochs, g.train, g.test) == (3, 3, 1659, 554)
    assert runs[runs.name == "explagraphs-zero_shot"].iloc[0].seeds == 1  # untrained: one run for every seed
    assert "explagraphs-gr_wo_projector" in set(runs.name)  # Table 6 on ExplaGraphs in the cpu preset
    # --only picks as the suite does: "3" is notebook 03, whose runs stay 03's beside 07
    for only in (["3", "7"], ["03_training.ipynb", "07"]):
        picked = plan("cpu", "cpu-bf16", only=only)[0]
        assert (picked[picked.name == "explagraphs-g_retriever"].notebook == "03_training").all(), only
        assert set(picked.notebook) == {"03_training", "07_ablations"}
    text = render("full", "h100")
    assert "03_training" in text and "LLM training tokens in all" in text and "  this machine: " in text


def test_a_notebook_stopped_part_way_gives_the_plan_no_time(monkeypatch):
    import gr_core.plan as plan_module

    real = plan_module.bench_json

    def stopped(path):  # quick's suite.json with 00's last run interrupted after 3 s
        data = real(path)
        if path.name == "suite.json":
            data = {**data, "notebooks": [{**n, "status": "interrupted", "seconds": 3.0}
                                          if n["notebook"] == "00_quickstart.ipynb" else n for n in data["notebooks"]]}
        return data

    _, before = plan("quick", "cpu-bf16", only=["00"])
    monkeypatch.setattr(plan_module, "bench_json", stopped)
    _, after = plan("quick", "cpu-bf16", only=["00"])
    assert before.last_measured_seconds.iloc[0] > 3 and after.last_measured_seconds.isna().iloc[0]


@pytest.mark.data
def test_the_plan_says_when_the_data_is_missing(monkeypatch, tmp_path):
    # notebook 05's datasets (-p applies to every notebook) plan where 04, whose reasoner refuses them, is left out
    assert "05_hallucination" in render("quick", "cpu-bf16", overrides={"datasets": ["clevr"]}, only=["05"])
    assert "data: MISSING" not in render("smoke", "cpu-fp32", only=["00"])
    monkeypatch.setenv("GR_DATA_DIR", str(tmp_path / "nowhere"))
    assert "  data: MISSING, every notebook reads it: raw benchmark data not found" in render("smoke", "cpu-fp32",
                                                                                             only=["00"])


def test_suite_dry_run_prints_the_plan_and_runs_nothing(capsys, tmp_path, monkeypatch):
    from gr_core import suite

    monkeypatch.setattr(suite, "run_suite", lambda *a, **k: pytest.fail("a dry run must not run the suite"))
    assert suite.main(["--preset", "quick", "--dry-run", "--profile", "cpu-fp32"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("plan of preset 'quick' on cpu-fp32") and "04_gnn_rag" in out and "\nestimated" in out
    assert suite.main(["--preset", "quick", "--dry-run", "--profile", "cpu-fp32", "--only", "07"]) == 0
    out = capsys.readouterr().out  # --only plans only the notebooks the suite would run
    assert "07_ablations:" in out and "03_training" not in out and "04_gnn_rag" not in out
    # 07's rows shared with 03 (the full model, prompt tuning) are 07's to train when 03 is left out
    runs, _ = plan("cpu", "cpu-bf16", only=["07"])
    assert {"explagraphs-g_retriever", "explagraphs-prompt_tuning"} <= set(runs[runs.notebook == "07_ablations"].name)
    # outputs of one's own elsewhere: their progress from there, the speeds still the committed ones; nothing created
    monkeypatch.setenv("GR_OUTPUTS_DIR", str(tmp_path / "mine"))
    runs, notebooks = plan("quick", "cpu-bf16", only=["03"])
    assert runs.seconds.sum() > 60 and notebooks.estimate_seconds.sum() > 60 and not (tmp_path / "mine").exists()


def test_gnn_rag_answers_add_the_relation_paths_measured_by_the_bench(outputs):
    import pandas as pd

    from gr_core.plan import gnn_rag_rows

    keys = ["webqsp", "metaqa-1hop", "metaqa-2hop", "metaqa-3hop"]
    table = pd.DataFrame([{"dataset": k, "retriever": r, "questions": 100, "s / answer": s}
                          for k in keys for r, s in (("none", 0.2), ("gnn", 0.4), ("gnn+rog", 0.6))])
    (outputs / "quick" / "04_gnn_rag").mkdir(parents=True)
    table.to_csv(outputs / "quick" / "04_gnn_rag" / "retrievers.csv", index=False)
    _write(outputs / "bench" / "relation_paths.json", {"questions": 64, "seconds_per_question": 0.25,
                                                       "dtype": "bfloat16"})
    rows = {r["name"]: r for r in gnn_rag_rows("quick", profiles(outputs)["cpu-bf16"], outputs)}
    a = rows["metaqa-3hop-answers"]
    # 200 questions x (0.2 + 0.4 + 0.6) fp32 s / 4 (bf16 answers) + 200 x 0.25 bf16 s (0.25 x 4 in fp32, / 4)
    assert a["test"] == 200 and a["seconds"] == round(200 * 1.2 / 4 + 200 * 0.25)
    assert "relation paths" in a["basis"] and "bench/relation_paths.json" in a["basis"]


def _ckpt(run_dir):
    (run_dir / "ckpt").mkdir(parents=True)
    return run_dir / "ckpt" / "last.pt"


def test_finished_seeds_cost_nothing_and_an_interrupted_one_only_its_epochs_left(tmp_path):
    import torch

    from gr_core.plan import with_progress
    from gr_core.runs import seed_progress

    runs = tmp_path / "runs"
    _write(runs / "x-g_retriever-seed0" / "metrics.json", {"config_hash": "h0"})  # finished, this configuration
    _write(runs / "x-g_retriever-seed1" / "metrics.json", {"config_hash": "old"})  # finished, another configuration
    (runs / "x-g_retriever-seed2" / "ckpt").mkdir(parents=True)
    torch.save({"config_hash": "h2", "epoch": 0}, runs / "x-g_retriever-seed2" / "ckpt" / "last.pt")  # 1 of 3 epochs
    assert seed_progress(runs / "x-g_retriever-seed0", "h0") == ("done", 0)
    assert seed_progress(runs / "x-g_retriever-seed1", "h1") == ("conflict", 0)
    assert seed_progress(runs / "x-g_retriever-seed2", "h2") == ("partial", 1)
    assert seed_progress(runs / "x-g_retriever-seed2", "other") == ("new", 0)  # the suite starts it over
    assert seed_progress(runs / "x-g_retriever-seed3", "h3") == ("new", 0)
    torch.save({"config_hash": "h4", "epoch": 1, "llm_dtype": "float32"}, _ckpt(runs / "x-g_retriever-seed4"))
    assert seed_progress(runs / "x-g_retriever-seed4", "h4", "float32") == ("partial", 2)
    assert seed_progress(runs / "x-g_retriever-seed4", "h4", "bfloat16") == ("new", 0)  # fit starts over in bf16
    # an interrupted run made from other data: fit starts it over, so it is new (it had said "partial")
    torch.save({"config_hash": "h6", "epoch": 0, "inputs": {"data": "a"}}, _ckpt(runs / "x-g_retriever-seed6"))
    assert seed_progress(runs / "x-g_retriever-seed6", "h6", inputs={"data": "a"}) == ("partial", 1)
    assert seed_progress(runs / "x-g_retriever-seed6", "h6", inputs={"data": "b"}) == ("new", 0)
    # a finished run made from other data is refused by run() (check_run_identity), so not "done" here either
    _write(runs / "x-g_retriever-seed9" / "metrics.json", {"config_hash": "h5", "inputs": {"data": "a", "llm": "m"}})
    assert seed_progress(runs / "x-g_retriever-seed9", "h5", inputs={"data": "a", "llm": "m"}) == ("done", 0)
    assert seed_progress(runs / "x-g_retriever-seed9", "h5", inputs={"data": "b", "llm": "m"}) == ("conflict", 0)
    assert seed_progress(runs / "x-g_retriever-seed0", "h0", inputs={"data": "b"}) == ("done", 0)  # recorded none
    row9 = {"name": "x-g_retriever", "seconds": 100, "epochs": 3}  # the dry run passes the inputs through
    assert with_progress(row9, runs, [9], ["h5"], lambda e: 0, inputs={"data": "a", "llm": "m"})["seconds"] == 0
    assert "other inputs is in the way" in with_progress(row9, runs, [9], ["h5"], lambda e: 0,
                                                         inputs={"data": "b", "llm": "m"})["done"]

    row = {"name": "x-g_retriever", "seconds": 400, "epochs": 3}  # 4 seeds of 100 s, 30 s an epoch + 10 s answers
    out = with_progress(row, runs, [0, 1, 2, 3], ["h0", "h1", "h2", "h3"], lambda epochs: 30 * epochs + 10)
    # seed 0 done, seed 1 in the way (trained again once cleared), seed 2: 2 epochs left, seed 3: a whole seed
    assert out["seconds"] == 100 + 100 + (30 * 2 + 10)
    assert out["done"] == ("1/4 seeds done; seed2 resumes after epoch 1; "
                           "seed1: a finished run of another configuration or other inputs is in the way")
    assert with_progress(row, runs, [5], ["h5"], lambda e: 0) == {**row, "done": ""}  # nothing there yet
    unmeasured = {**row, "seconds": None}  # every seed finished: nothing left, measured speed or not
    assert with_progress(unmeasured, runs, [0], ["h0"], lambda e: None)["seconds"] == 0
