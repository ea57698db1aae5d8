import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from gr_core.config import LLMConfig
from gr_core.g_retriever.examples import build_examples, length_batches, split_indices
from gr_core.g_retriever.graph_encoder import GNNConfig
from gr_core.g_retriever.model import GraphLLM, method_config
from gr_core.g_retriever.train import RunConfig, TrainConfig, lr_at, make_run_config, run


@pytest.fixture(scope="module")
def explagraphs():
    from gr_core.graphqa import load_dataset

    return load_dataset("explagraphs")


def _cfg(tiny_llm_dir, method="g_retriever", norm="batch", **train) -> RunConfig:
    t = dict(num_epochs=2, batch_size=4, eval_batch_size=4, lr=1e-2, min_lr=1e-3) | train
    return make_run_config("explagraphs", method, llm=LLMConfig(model=tiny_llm_dir, max_new_tokens=4),
                           gnn=GNNConfig(hidden=16, num_layers=2, heads=2, norm=norm), train=TrainConfig(**t),
                           max_train=8, max_val=4, max_test=3)


def test_lr_schedule_warms_up_for_one_epoch_then_decays_by_half_cosine_to_min_lr():
    cfg = TrainConfig(lr=1e-5, min_lr=5e-6, num_epochs=4, warmup_epochs=1)
    lrs = [lr_at(s, 10, cfg) for s in range(40)]
    assert lrs[0] == pytest.approx(1e-6) and lrs[9] == pytest.approx(1e-5)
    assert all(a < b for a, b in zip(lrs[:9], lrs[1:10]))
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:]))
    assert lrs[-1] == pytest.approx(5e-6)


def test_length_batches_cover_every_example_once_group_similar_lengths_and_follow_the_seed():
    lengths = [5, 100, 6, 98, 7, 99, 8, 97]
    batches = length_batches(lengths, 2, seed=0)
    assert sorted(i for b in batches for i in b) == list(range(8))
    assert all(abs(lengths[b[0]] - lengths[b[-1]]) <= 3 for b in batches)
    assert batches == length_batches(lengths, 2, seed=0) and batches != length_batches(lengths, 2, seed=5)


def test_the_command_line_names_a_config_it_cannot_read(tmp_path, capsys):
    from gr_core.g_retriever.experiments import main

    for text, problem in (("{not json", ""), ("[1, 2]", ""),
                          ('{"dataset": "explagraphs", "method": "g_retriever", "colour": 1}', "colour"),
                          ('{"dataset": "explagraphs", "method": "g_retreiver"}', "RunConfig.method='g_retreiver'"),
                          ('{"dataset": "webqsb", "method": "zero_shot"}', "RunConfig.dataset='webqsb'"),
                          ('{"dataset": "webqsp", "method": "zero_shot", "max_test": "twenty"}',
                           "RunConfig.max_test='twenty' must be int | None"),
                          ('{"dataset": "webqsp", "method": "zero_shot", "train": {"num_epochs": "two"}}',
                           "TrainConfig.num_epochs='two' must be int"),
                          ('{"dataset": "webqsp", "method": "zero_shot", "model": {"llm": {"device": "gpu"}}}',
                           "LLMConfig.device='gpu' is not")):
        (tmp_path / "cfg.json").write_text(text)
        with pytest.raises(SystemExit) as stop:
            main(["--config", str(tmp_path / "cfg.json"), "--run-dir", str(tmp_path / "r")])
        err = capsys.readouterr().err
        assert stop.value.code == 2 and "cannot read --config" in err and problem in err, text
    (tmp_path / "afile").write_text("x")
    for args, problem in ((["--dataset", "bogus", "--method", "g_retriever"], "RunConfig.dataset='bogus'"),
                          (["--dataset", "explagraphs", "--method", "zero_shot", "--seed", "-1"], "RunConfig.seed=-1"),
                          (["--dataset", "explagraphs", "--method", "zero_shot", "--run-dir", str(tmp_path / "afile")],
                           "is a file")):
        with pytest.raises(SystemExit) as stop:  # before anything loads or trains
            main(["--preset", "smoke", *args])
        assert stop.value.code == 2 and problem in capsys.readouterr().err, args
    from gr_core.runs import seed_everything

    with pytest.raises(ValueError, match="seed=-1: seeds are integers from 0"):
        seed_everything(-1)
    assert not (tmp_path / "r").exists()  # nothing ran
    assert RunConfig("webqsp", "zero_shot", max_test=np.int64(3)).max_test == 3  # numpy's integers are integers


def test_run_config_round_trips_through_json(tiny_llm_dir):
    cfg = _cfg(tiny_llm_dir, "g_retriever_lora")
    assert RunConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    from dataclasses import replace as replaced

    with pytest.raises(ValueError, match=r"max_train=0 must be >= 1, or None for the whole split"):
        replaced(cfg, max_train=0)  # an empty split, not the whole one (RunSettings' 0)


@pytest.mark.data
def test_a_run_writes_its_directory_and_a_finished_run_is_reused(tiny_llm_dir, explagraphs, tmp_path):
    cfg = _cfg(tiny_llm_dir, num_epochs=1)
    metrics = run(cfg, tmp_path / "r", ds=explagraphs)
    for name in ("config.json", "env.json", "history.json", "predictions.jsonl", "metrics.json", "ckpt/best.pt"):
        assert (tmp_path / "r" / name).is_file(), name
    assert metrics["num_test"] == 3 and metrics["num_train"] == 8 and metrics["epochs_run"] == 1
    assert 0.0 <= metrics["score"] <= 1.0 and metrics["trainable_params"] > 0
    lines = (tmp_path / "r" / "predictions.jsonl").read_text().splitlines()
    assert len(lines) == 3 and {"id", "prediction", "answers", "score"} <= set(json.loads(lines[0]))
    stamp = (tmp_path / "r" / "metrics.json").stat().st_mtime_ns
    assert run(cfg, tmp_path / "r", ds=explagraphs) == metrics
    assert (tmp_path / "r" / "metrics.json").stat().st_mtime_ns == stamp
    # the kept checkpoint, loaded back, gives the run's own test predictions
    from gr_core.g_retriever.train import load_run_model, predict, trained_model

    model = load_run_model(tmp_path / "r", int(explagraphs.text_emb.shape[1]))
    test = model.tokenize(build_examples(explagraphs, split_indices(explagraphs, cfg)["test"], cfg.model))
    assert predict(model, test, cfg.train.eval_batch_size)[0] == [json.loads(x)["prediction"] for x in lines]
    # the chat loads the same run as its answerer (config and checkpoint read by the one loader); a graph indexed with
    # another sentence encoder's width is refused by name
    from gr_core.chat.models import load_answerer

    dim = int(explagraphs.text_emb.shape[1])
    net, about, where = load_answerer(str(tmp_path / "r"), "kg", str(tiny_llm_dir), "cpu", 64, dim)
    assert where == tmp_path / "r" and about.startswith("trained g_retriever")
    mine, theirs = net.state_dict(), trained_model(cfg, tmp_path / "r", ds=explagraphs).state_dict()
    assert all(torch.equal(mine[k], theirs[k]) for k in theirs if k.startswith(("gnn.", "projector.")))
    # a checkpoint saved before an input was recorded (here: how the dataset was built) is taken as it is, not retrained
    best = tmp_path / "r" / "ckpt" / "best.pt"
    state = torch.load(best, map_location="cpu", weights_only=True)
    torch.save({**state, "inputs": {k: v for k, v in state["inputs"].items() if k != "dataset"}}, best)
    import gr_core.g_retriever.train as train_module

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(train_module, "run", lambda *a, **k: pytest.fail("a checkpoint of the same inputs was retrained"))
        trained_model(cfg, tmp_path / "r", ds=explagraphs)
    with pytest.raises(ValueError, match=f"reads {dim}-d text embeddings"):
        load_answerer(str(tmp_path / "r"), "kg", str(tiny_llm_dir), "cpu", 64, dim + 1)
    # what the run read is recorded; a finished run made from other inputs is refused by name, not reused
    assert set(metrics["inputs"]) == {"data", "encoder", "dataset", "llm", "llm_content"}
    assert str(tiny_llm_dir) in metrics["inputs"]["llm"]
    # a local LLM's content: weights rewritten in place keep names and sizes, which alone had identified the folder
    from gr_core.runs import folder_content, folder_identity

    copy_dir = tmp_path / "llm_copy"
    shutil.copytree(tiny_llm_dir, copy_dir)
    weights = max(copy_dir.iterdir(), key=lambda f: f.stat().st_size)
    before = (folder_identity(copy_dir), folder_content(copy_dir))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    assert folder_identity(copy_dir) == before[0] and folder_content(copy_dir) != before[1]
    # another split of the same data is other questions: refused by name; another dataset than cfg's is refused first
    import copy
    from dataclasses import replace as replaced

    from gr_core.runs import RunConflictError

    other = copy.copy(explagraphs)
    other.config = replaced(explagraphs.config, split_seed=explagraphs.config.split_seed + 1)
    with pytest.raises(RunConflictError, match="made from other inputs \\(dataset: "):
        run(cfg, tmp_path / "r", ds=other)
    other.config = replaced(explagraphs.config, name="webqsp")
    with pytest.raises(ValueError, match="ds is webqsp \\(hops=2\\) but the RunConfig names explagraphs"):
        run(cfg, tmp_path / "r", ds=other)
    done = tmp_path / "r" / "metrics.json"
    changed = json.loads(done.read_text()) | {"inputs": metrics["inputs"] | {"data": "an older release"}}
    done.write_text(json.dumps(changed))
    with pytest.raises(RunConflictError, match="made from other inputs \\(data: an older release -> "):
        run(cfg, tmp_path / "r", ds=explagraphs)
    # force reruns it from its first epoch (not on from its last checkpoint); a training that has not finished
    # (no metrics.json) is no answerer
    epochs = []
    forced = run(cfg, tmp_path / "r", ds=explagraphs, force=True, on_epoch_end=lambda e, row: epochs.append(e))
    assert epochs == [0] and forced["inputs"] == metrics["inputs"]
    done.unlink()
    with pytest.raises(FileNotFoundError, match="metrics.json of the same config"):
        load_answerer(str(tmp_path / "r"), "kg", str(tiny_llm_dir), "cpu", 64, dim)


@pytest.mark.data
def test_a_run_records_its_precision_and_its_reuse_says_when_this_machine_resolves_another(
        tiny_llm_dir, explagraphs, tmp_path, monkeypatch, capsys):
    from gr_core.precision import cpu_info

    cfg = _cfg(tiny_llm_dir, num_epochs=1)  # dtype "auto", resolved to fp32 for the tiny model (conftest)
    metrics = run(cfg, tmp_path / "r", ds=explagraphs)
    assert metrics["precision"]["dtype"] == "float32" and metrics["precision"]["cpu_model"] == cpu_info().model
    assert {"amx", "avx512_bf16", "device"} <= set(metrics["precision"])
    assert "precision_note" not in run(cfg, tmp_path / "r", ds=explagraphs)
    monkeypatch.setenv("GR_DTYPE", "bfloat16")  # as on a machine where "auto" means bf16
    stamp = (tmp_path / "r" / "metrics.json").stat().st_mtime_ns
    reused = run(cfg, tmp_path / "r", ds=explagraphs)
    assert reused["score"] == metrics["score"] and reused["precision"] == metrics["precision"]
    assert reused["precision_here"]["dtype"] == "bfloat16" and "computed in float32" in reused["precision_note"]
    assert "this machine resolves 'auto' to bfloat16" in capsys.readouterr().out
    assert (tmp_path / "r" / "metrics.json").stat().st_mtime_ns == stamp  # the record itself is untouched


@pytest.mark.data
def test_inference_only_methods_train_nothing(tiny_llm_dir, explagraphs, tmp_path):
    metrics = run(_cfg(tiny_llm_dir, "zero_shot"), tmp_path / "z", ds=explagraphs)
    assert metrics["epochs_run"] == 0 and metrics["trainable_params"] == 0
    assert not (tmp_path / "z" / "history.json").exists()


@pytest.mark.data
def test_trained_model_of_an_inference_only_method_runs_nothing(tiny_llm_dir, explagraphs, tmp_path, monkeypatch):
    from gr_core.g_retriever import train

    monkeypatch.setattr(train, "run", lambda *a, **k: pytest.fail("an untrained model needs no run"))
    model = train.trained_model(_cfg(tiny_llm_dir, "zero_shot"), tmp_path / "z", ds=explagraphs)
    assert not model.training and not (tmp_path / "z").exists()


@pytest.mark.data
def test_an_interrupted_run_resumes_from_its_last_checkpoint_to_the_same_result(tiny_llm_dir, explagraphs, tmp_path):
    cfg = _cfg(tiny_llm_dir, num_epochs=3, patience=5)
    straight = run(cfg, tmp_path / "a", ds=explagraphs)

    seen = []

    def crash(epoch, row):
        seen.append(row)
        if epoch == 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(cfg, tmp_path / "b", ds=explagraphs, on_epoch_end=crash)
    assert (tmp_path / "b" / "ckpt" / "last.pt").is_file() and not (tmp_path / "b" / "metrics.json").exists()
    resumed = run(cfg, tmp_path / "b", ds=explagraphs)
    ha = json.loads((tmp_path / "a" / "history.json").read_text())
    hb = json.loads((tmp_path / "b" / "history.json").read_text())
    assert [h["epoch"] for h in hb] == [0, 1, 2]
    assert hb[0] == seen[0]  # epoch 0 was restored from the checkpoint, not trained again
    for x, y in zip(ha, hb):
        assert x["train_loss"] == pytest.approx(y["train_loss"], rel=1e-5)
        assert x["val_loss"] == pytest.approx(y["val_loss"], rel=1e-5)
    a = torch.load(tmp_path / "a" / "ckpt" / "best.pt", weights_only=False)["model"]
    b = torch.load(tmp_path / "b" / "ckpt" / "best.pt", weights_only=False)["model"]
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)
    assert straight["score"] == resumed["score"]


@pytest.mark.data
def test_a_checkpoint_of_another_precision_is_not_resumed(tiny_llm_dir, explagraphs, tmp_path, monkeypatch, capsys):
    cfg = _cfg(tiny_llm_dir, num_epochs=2, patience=5)

    def crash(epoch, row):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(cfg, tmp_path / "b", ds=explagraphs, on_epoch_end=crash)  # fp32 (conftest), stopped after epoch 0
    assert torch.load(tmp_path / "b" / "ckpt" / "last.pt", weights_only=False)["llm_dtype"] == "float32"
    monkeypatch.setenv("GR_DTYPE", "bfloat16")  # the same configuration where "auto" means bf16
    metrics = run(cfg, tmp_path / "b", ds=explagraphs)
    assert "training starts over instead of resuming" in capsys.readouterr().out
    history = json.loads((tmp_path / "b" / "history.json").read_text())
    assert [h["epoch"] for h in history] == [0, 1] and metrics["precision"]["dtype"] == "bfloat16"
    # a checkpoint cut short (a full disk): training starts over with a note, as the dry run counts it
    with pytest.raises(KeyboardInterrupt):
        run(cfg, tmp_path / "c", ds=explagraphs, on_epoch_end=crash)
    last = tmp_path / "c" / "ckpt" / "last.pt"
    last.write_bytes(last.read_bytes()[:1000])
    run(cfg, tmp_path / "c", ds=explagraphs)
    assert f"note: {last} is unreadable" in capsys.readouterr().out
    assert [h["epoch"] for h in json.loads((tmp_path / "c" / "history.json").read_text())] == [0, 1]


@pytest.mark.data
def test_early_stopping_stops_patience_epochs_after_the_best_and_keeps_its_checkpoint(tiny_llm_dir, explagraphs,
                                                                                      tmp_path, monkeypatch):
    import gr_core.g_retriever.train as train_module

    scripted = iter([3.0, 2.0, 2.5, 2.6, 1.0, 0.5])  # validation losses: best at epoch 1, then two worse ones
    monkeypatch.setattr(train_module, "evaluate_validation", lambda *a, **k: (next(scripted), float("nan")))
    seen = {}
    run(_cfg(tiny_llm_dir, num_epochs=6, patience=1), tmp_path / "e", ds=explagraphs,
        on_epoch_end=lambda e, row: seen.setdefault(e, torch.load(tmp_path / "e" / "ckpt" / "last.pt",
                                                                  weights_only=False)["model"]))
    history = json.loads((tmp_path / "e" / "history.json").read_text())
    assert [h["val_loss"] for h in history] == [3.0, 2.0, 2.5]  # epoch 2 is patience 1 past the best: then stop
    best = torch.load(tmp_path / "e" / "ckpt" / "best.pt", weights_only=False)
    assert best["epoch"] == 1 and all(torch.equal(best["model"][k], seen[1][k]) for k in seen[1])
    assert any(not torch.equal(seen[2][k], seen[1][k]) for k in seen[1])  # epoch 2 trained on, and was not kept


@pytest.mark.data
@pytest.mark.slow
def test_ddp_on_two_gloo_processes_follows_the_single_process_trajectory(tiny_llm_dir, explagraphs, tmp_path):
    """torchrun --nproc_per_node 2 (gloo, CPU) vs one process on the same global batch of 4."""
    cfg = _cfg(tiny_llm_dir, norm="layer", num_epochs=2)  # graph-wise LayerNorm: independent of the sharding
    (tmp_path / "cfg.json").write_text(json.dumps(cfg.to_dict()))
    env = dict(os.environ, OMP_NUM_THREADS="1", GR_PROGRESS="off")
    common = ["-m", "gr_core.g_retriever", "--config", str(tmp_path / "cfg.json")]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the workers' thread count: the same float sums
    first = {}  # the trainable weights after the first epoch: how far one epoch moves them
    try:
        run(cfg, tmp_path / "one", ds=explagraphs,  # the single process, here
            on_epoch_end=lambda e, row: first.setdefault(e, torch.load(tmp_path / "one" / "ckpt" / "last.pt",
                                                                       weights_only=False)["model"]))
    finally:
        torch.set_num_threads(threads)
    two = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                          *common, "--run-dir", str(tmp_path / "two")], env=env, capture_output=True, text=True,
                         timeout=600)
    assert two.returncode == 0, two.stderr[-3000:]
    h1 = json.loads((tmp_path / "one" / "history.json").read_text())
    h2 = json.loads((tmp_path / "two" / "history.json").read_text())
    assert len(h1) == len(h2) == 2
    for a, b in zip(h1, h2):
        assert a["train_loss"] == pytest.approx(b["train_loss"], rel=1e-4)
        assert a["val_loss"] == pytest.approx(b["val_loss"], rel=1e-4)
        assert a["train_tokens"] == b["train_tokens"]
    # the weights: two ranks that averaged their gradients end where one process does; ranks that did not (each
    # on half the batch) would differ by about an epoch's update (the losses barely move at this size)
    one, two = (torch.load(tmp_path / d / "ckpt" / "last.pt", weights_only=False)["model"] for d in ("one", "two"))
    moved = max(float((one[k] - first[0][k]).abs().max()) for k in one)
    apart = max(float((one[k] - two[k]).abs().max()) for k in one)
    assert moved > 1e-3 and apart < 0.01 * moved, (moved, apart)
    m2 = json.loads((tmp_path / "two" / "metrics.json").read_text())
    assert m2["world_size"] == 2


@pytest.mark.data
def test_kaping_examples_hold_the_top_k_triples_as_desc(explagraphs):
    from gr_core.g_retriever.examples import build_examples
    from gr_core.g_retriever.model import method_config

    ex = build_examples(explagraphs, explagraphs.split["test"][:2], method_config("kaping", kaping_k=2))
    for e in ex:
        edges = e.desc.split("\n\n")[1].strip().splitlines()
        assert edges[0] == "src,edge_attr,dst" and len(edges) - 1 == 2


@pytest.mark.data
def test_the_gnn_reads_the_retrieved_subgraph_its_nodes_edges_and_their_vectors():
    """GR §5.4: the graph encoder runs on the PCST subgraph, its nodes renumbered 0..k-1 and each edge kept between the
    same two nodes, with those nodes' and edges' own text vectors."""
    from gr_core.graphqa import load_dataset, retrieve

    ds = load_dataset("gqa_micro")
    cfg = method_config("g_retriever")
    indices = list(ds.split["test"][:12])
    strict = 0
    for i, ex in zip(indices, build_examples(ds, indices, cfg)):
        g = ds.graph(i)
        res = retrieve(ds, i, cfg=cfg.retrieval(ds.name), graph=g)
        x, edge_attr = ds.embeddings(i, g)
        assert torch.equal(ex.data.x, torch.from_numpy(x[res.node_rows]))
        assert torch.equal(ex.data.edge_attr, torch.from_numpy(edge_attr[res.edge_rows]))
        kept = g.nodes.node_id.to_numpy()[res.node_rows]  # the subgraph's node k is the graph's node kept[k]
        pairs = [(int(kept[s]), int(kept[d])) for s, d in ex.data.edge_index.T.tolist()]
        assert pairs == [(int(s), int(d)) for s, d in zip(g.edges.src.to_numpy()[res.edge_rows],
                                                          g.edges.dst.to_numpy()[res.edge_rows])]
        strict += len(res.node_rows) < len(g.nodes)
    assert strict > 0  # the renumbering is exercised: some subgraphs leave nodes out


def test_warmup_fraction_and_graph_lr_scale_the_schedule(tiny_llm_dir):
    from gr_core.g_retriever.train import param_groups

    cfg = TrainConfig(lr=1e-3, num_epochs=2, warmup_fraction=0.1, min_lr=0.0)
    # 10 steps per epoch: the warm-up is the first 2 of 20 steps, then the half cosine
    assert lr_at(0, 10, cfg) == pytest.approx(1e-3 * 0.1 / 0.2)
    assert lr_at(1, 10, cfg) == pytest.approx(1e-3)
    assert lr_at(19, 10, cfg) == pytest.approx(0.0, abs=1e-12)
    model = GraphLLM(method_config("g_retriever_lora", llm=LLMConfig(model=tiny_llm_dir),
                                   gnn=GNNConfig(hidden=16, num_layers=2, heads=2)), in_dim=8)
    groups = param_groups(model, TrainConfig(lr=1e-4, graph_lr=1e-3))
    graph, lora = groups
    assert graph["lr_scale"] == pytest.approx(10.0) and lora["lr_scale"] == 1.0
    names = {id(p): n for n, p in model.named_parameters()}
    assert all(names[id(p)].startswith(("gnn.", "projector.")) for p in graph["params"])
    assert all("lora" in names[id(p)] for p in lora["params"])


def test_new_options_at_their_defaults_keep_old_config_hashes():
    cfg = make_run_config("explagraphs", "g_retriever")
    d = cfg.to_dict()
    assert "graph_token_norm" not in d["model"] and "system_prompt" not in d["model"]
    assert "graph_lr" not in d["train"] and "warmup_fraction" not in d["train"] and "select_on" not in d["train"]
    changed = make_run_config("explagraphs", "g_retriever", system_prompt="", train=TrainConfig(warmup_fraction=0.1))
    assert changed.to_dict()["model"]["system_prompt"] == "" and changed.to_dict()["train"]["warmup_fraction"] == 0.1
    assert RunConfig.from_dict(changed.to_dict()) == changed


@pytest.mark.data
def test_the_teacher_forced_match_is_greedy_decoding_starting_with_the_label(tiny_llm_dir, explagraphs):
    from gr_core.g_retriever.examples import build_examples

    cfg = _cfg(tiny_llm_dir, method="zero_shot")
    model = GraphLLM(cfg.model, in_dim=int(explagraphs.text_emb.shape[1]))
    examples = model.tokenize(build_examples(explagraphs, explagraphs.split["val"][:12], cfg.model))
    batch = model.collate(examples, with_label=False)
    with torch.inference_mode():  # greedy token ids, as GraphLLM.generate decodes them
        greedy = model.llm.generate(inputs_embeds=model.embed(batch), attention_mask=batch.attention_mask,
                                    max_new_tokens=2, do_sample=False, eos_token_id=model.template.eos_id,
                                    pad_token_id=model.template.pad_id).tolist()
    for k, ex in enumerate(examples):  # half of the labels are the greedy answer, half differ in their 2nd token
        ex.label_ids = greedy[k][:2] if k % 2 == 0 else [greedy[k][0], (greedy[k][1] + 1) % len(model.tokenizer)]
    _, _, match = model(model.collate(examples, with_label=True), with_match=True)
    assert match.tolist() == [k % 2 == 0 for k in range(len(examples))]


@pytest.mark.data
def test_select_on_val_match_keeps_the_epoch_with_the_most_validation_answers_right(tiny_llm_dir, explagraphs,
                                                                                   tmp_path):
    run(_cfg(tiny_llm_dir, num_epochs=3, patience=3, select_on="val_match"), tmp_path / "m", ds=explagraphs)
    history = json.loads((tmp_path / "m" / "history.json").read_text())
    assert all(0.0 <= h["val_match"] <= 1.0 for h in history)
    best = max(range(len(history)), key=lambda i: (history[i]["val_match"], -i))
    assert torch.load(tmp_path / "m" / "ckpt" / "best.pt", weights_only=False)["epoch"] == best
    assert json.loads((tmp_path / "m" / "metrics.json").read_text())["best_epoch"] == best
    with pytest.raises(ValueError, match="select_on"):
        TrainConfig(select_on="accuracy")


def test_per_method_settings_apply_to_one_method_of_one_dataset():
    from gr_core.g_retriever.experiments import dataset_settings

    s = dataset_settings({"max_train": 64, "num_epochs": 2}, {"explagraphs": {"max_train": 0},
                         "explagraphs/graph_token": {"num_epochs": 1, "batch_size": 4}}, ["explagraphs", "webqsp"])
    assert s["explagraphs"]["train"].num_epochs == 2 and s["explagraphs/graph_token"]["train"].num_epochs == 1
    assert s["explagraphs/graph_token"]["max_train"] is None and s["explagraphs/graph_token"]["train"].batch_size == 4
    assert s["webqsp"]["max_train"] == 64
    with pytest.raises(ValueError, match="clevr"):
        dataset_settings({}, {"clevr/g_retriever": {}}, ["explagraphs"])


def _torchrun_worker(tiny_llm_dir, device, out):
    """``torchrun --nproc_per_node 1`` with ``GR_DDP=1``: a process group of one, the model wrapped in DDP."""
    env = dict(os.environ, OMP_NUM_THREADS="1", GR_PROGRESS="off", GR_DDP="1")
    worker = Path(__file__).with_name("ddp_worker.py")
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "1",
                           str(worker), tiny_llm_dir, device, str(out)], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "history.json").read_text())


@pytest.mark.slow
def test_forced_ddp_on_one_process_follows_the_plain_trajectory(tiny_llm_dir, tmp_path):
    """The DDP code path (process group, wrapper, all-reduce) on one gloo process gives the plain run's losses;
    on a GPU the same test runs with NCCL (tests/test_gpu.py)."""
    from ddp_worker import train

    wrapped = _torchrun_worker(tiny_llm_dir, "cpu", tmp_path / "ddp")
    assert wrapped["ddp"] and wrapped["world"] == 1
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the worker's thread count: the same float sums
    try:
        plain = train(tiny_llm_dir, "cpu", tmp_path / "plain")
    finally:
        torch.set_num_threads(threads)
    assert [h["train_loss"] for h in wrapped["history"]] == pytest.approx([h["train_loss"] for h in plain], rel=1e-5)
    assert [h["val_loss"] for h in wrapped["history"]] == pytest.approx([h["val_loss"] for h in plain], rel=1e-5)


def test_a_preset_run_config_is_the_one_notebook_03_builds():
    """``python -m gr_core.g_retriever --preset ...`` trains the run notebook 03 would: same name, same config hash (so
    the notebook reuses it); checked against the committed cpu run and against a hand-built notebook configuration."""
    from gr_core.g_retriever.experiments import dataset_settings, preset_run_config
    from gr_core.runs import config_hash

    cfg = preset_run_config("cpu", "explagraphs", "g_retriever", 2)
    assert cfg.name == "explagraphs-g_retriever-seed2" and cfg.max_train is None and cfg.max_val is None
    assert (cfg.train.num_epochs, cfg.train.lr, cfg.train.warmup_fraction, cfg.train.select_on) == (3, 1e-3, 0.1,
                                                                                                    "val_match")
    assert cfg.model.system_prompt == "" and cfg.model.gnn.hidden == 256
    # the notebook's own route: its flat parameters (defaults of the parameters cell) under the preset's values
    from gr_core.config import notebook_parameters

    p = notebook_parameters("cpu", "03_training")
    flat = dict(llm_model="embedded:smollm2-135m-instruct", device="auto", max_new_tokens=p["max_new_tokens"],
                gnn_kind="gt", gnn_hidden=p["gnn_hidden"], gnn_layers=p["gnn_layers"], gnn_heads=4,
                num_epochs=p["num_epochs"], lr=p["lr"], batch_size=p["batch_size"], eval_batch_size=16,
                max_train=p["max_train"], max_val=p["max_val"], max_test=p["max_test"], max_txt_len=p["max_txt_len"],
                warmup_fraction=None, system_prompt=None)
    by = dataset_settings(flat, p["per_dataset"], p["plan"])
    assert config_hash(make_run_config("explagraphs", "g_retriever", 2, **by["explagraphs"]).to_dict()) == \
        config_hash(cfg.to_dict())
    assert config_hash(preset_run_config("quick", "explagraphs", "g_retriever").to_dict()) == \
        config_hash(make_run_config("explagraphs", "g_retriever", 0, **dataset_settings(
            {**flat, **{k: notebook_parameters("quick", "03_training")[k] for k in ("max_train", "max_val", "max_test",
                                                                                     "num_epochs")}},
            notebook_parameters("quick", "03_training")["per_dataset"], ["explagraphs"])["explagraphs"]).to_dict())


def test_run_settings_are_one_validated_config():
    """Notebooks pass their whole parameter dict: settings are picked from it, anything else is theirs; a bad value
    or an unknown per-dataset override is an error naming it, not a run with a default."""
    from gr_core.g_retriever.experiments import RunSettings, dataset_settings

    s = RunSettings.from_parameters({"gnn_hidden": 256, "plan": {"x": []}, "preset": "quick"}, {"num_epochs": 2})
    assert (s.gnn_hidden, s.num_epochs, s.lr) == (256, 2, 1e-5)
    kw = s.keywords()
    assert kw["gnn"].hidden == 256 and kw["train"].num_epochs == 2 and kw["max_train"] is None
    with pytest.raises(ValueError, match="unknown run settings \\['num_epoch'\\]"):
        dataset_settings({}, {"explagraphs": {"num_epoch": 3}}, ["explagraphs"])
    with pytest.raises(ValueError, match="RunSettings.batch_size must be a positive integer"):
        RunSettings(batch_size=0)
    with pytest.raises(ValueError, match="RunSettings.max_train must be an integer >= 0"):
        RunSettings(max_train=-1)
    with pytest.raises(ValueError, match="gnn_kind|kind"):
        RunSettings(gnn_kind="transformer")


def test_run_plan_runs_an_untrained_configuration_once_whatever_the_seeds(monkeypatch, tmp_path):
    import gr_core.g_retriever.experiments as experiments

    calls = []
    monkeypatch.setattr(experiments, "load_dataset", lambda cfg: None)
    monkeypatch.setattr(experiments, "run", lambda cfg, run_dir, ds=None, force=False: calls.append(cfg.name) or
                        {"name": cfg.name, "score": 0.5, "num_test": 1})
    settings = dict(llm=LLMConfig(model="x"), train=TrainConfig(num_epochs=1))
    experiments.run_plan({"explagraphs": ["zero_shot", "g_retriever"]}, [0, 1, 2], tmp_path, **settings)
    assert calls == ["explagraphs-zero_shot-seed0", "explagraphs-g_retriever-seed0", "explagraphs-g_retriever-seed1",
                     "explagraphs-g_retriever-seed2"]
