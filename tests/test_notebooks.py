"""The real notebooks at the smoke preset, each executed once per test session (by nbval under ``./gr test``, else by
the suite runner); assertions on what they record."""
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytestmark = [pytest.mark.notebooks, pytest.mark.data]


def _notebook_stems() -> list[str]:
    from gr_core.paths import repo_root

    return sorted(nb.stem for nb in (repo_root() / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _ran_to_the_end(smoke: Path, stem: str, since: float) -> bool:
    """Every notebook writes ``<stem>/env.json`` in its last cell: a copy written since ``since`` ran to the end."""
    marker = smoke / stem / "env.json"
    return marker.is_file() and marker.stat().st_mtime >= since


@pytest.fixture(scope="module")
def smoke_run(session_start):
    """The smoke outputs of every notebook, each notebook executed once per test session.

    ``./gr test`` runs nbval over ``notebooks/`` before ``tests/``: nbval executes each notebook at its stored
    defaults, which equal the smoke preset (tests/test_config.py), and the notebooks write to ``outputs/smoke``. When
    every notebook ran to its end in this session, the tests below read what it wrote; otherwise (``pytest tests``
    alone, or nbval stopped in a notebook) the suite runner executes them at the smoke preset.
    """
    from gr_core.paths import repo_root

    out = Path(os.environ.get("GR_OUTPUTS_DIR") or repo_root() / "outputs")
    smoke = out / "smoke"
    if all(_ran_to_the_end(smoke, stem, session_start) for stem in _notebook_stems()):
        return {"dir": smoke, "runner": "nbval"}
    env = dict(os.environ, GR_OUTPUTS_DIR=str(out))
    res = subprocess.run([sys.executable, "-m", "gr_core.suite", "--preset", "smoke"], capture_output=True,
                         text=True, env=env, timeout=1800)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return {"dir": smoke, "runner": "suite"}


@pytest.fixture(scope="module")
def smoke_outputs(smoke_run):
    return smoke_run["dir"]


def test_every_notebook_ran_to_its_end_at_smoke_in_this_session(smoke_run, session_start):
    smoke = smoke_run["dir"]
    for stem in _notebook_stems():
        assert _ran_to_the_end(smoke, stem, session_start), f"{stem} did not run to its end in this session"
    if smoke_run["runner"] == "suite":
        summary = json.loads((smoke / "suite.json").read_text())
        assert summary["counts"]["failed"] == 0 and summary["counts"]["passed"] == len(_notebook_stems())
        for record in summary["notebooks"]:
            assert (smoke / "notebooks" / record["notebook"]).is_file()


def test_chat_notebook_answers_the_conversation_with_evidence_on_a_metaqa_neighbourhood(smoke_outputs):
    record = json.loads((smoke_outputs / "09_chat" / "answers.json").read_text())
    assert record["meta"]["parameters"]["graph"] == "metaqa:Forrest Gump"
    assert (record["meta"]["graph_nodes"], record["meta"]["graph_edges"]) == (458, 835)  # its 2-hop neighbourhood
    turns = record["turns"]
    assert [t["question"] for t in turns] == ["Who directed Forrest Gump?", "and who starred in it?",
                                             "When was it released?", "How do I reset my wifi router?"]
    assert [t["status"] for t in turns] == ["answered", "answered", "answered", "unrelated"]
    assert [t["follow_up"] for t in turns] == [False, True, True, False]
    for t in turns[:3]:
        assert t["evidence_triples"] and t["linked"] and isinstance(t["answer"], str) and t["answer"]
        assert any(h == "Forrest Gump" or tail == "Forrest Gump" for h, _, tail in t["evidence_triples"])
    assert not turns[3]["evidence_triples"] and "nothing in this graph" in turns[3]["note"]
    mine = (smoke_outputs / "09_chat" / "my_kg.tsv").read_text().splitlines()
    assert mine[0] == "head\trelation\ttail" and len(mine) == len(turns[0]["evidence_triples"]) + 1
    html = (smoke_outputs / "09_chat" / "turn0.html").read_text()
    assert "vis-network" in html and "cdn.jsdelivr" not in html
    assert (smoke_outputs / "09_chat" / "turn0.png").stat().st_size > 10_000


def test_quickstart_records_the_textualized_graph_and_a_scored_answer(smoke_outputs):
    summary = json.loads((smoke_outputs / "00_quickstart" / "summary.json").read_text())
    assert (summary["num_nodes"], summary["num_edges"]) == (5, 4)
    assert summary["desc"].startswith("node_id,node_attr\n0,cannabis\n1,marijuana\n")
    assert summary["num_questions"] == 2 and len(summary["answers"]) == 2
    assert 0.0 <= summary["zero_shot_accuracy"] <= 1.0
    assert (smoke_outputs / "00_quickstart" / "graph.png").stat().st_size > 10_000
    html = (smoke_outputs / "00_quickstart" / "graph.html").read_text()
    assert "vis-network" in html and "cdn.jsdelivr" not in html and "cdnjs" not in html
    assert (smoke_outputs / "00_quickstart" / "env.json").is_file()


def _smoke_test_questions(notebook: str) -> int:
    from gr_core.config import notebook_parameters

    return notebook_parameters("smoke", notebook)["max_test"]  # the notebooks' default


def test_training_notebook_writes_run_directories_and_table3_from_them(smoke_outputs):
    n_test = _smoke_test_questions("03_training")
    summary = json.loads((smoke_outputs / "03_training" / "summary.json").read_text())
    names = {r["name"] for r in summary["runs"]}
    references = {"explagraphs-majority-seed0", "explagraphs-negation_parity-seed0", "explagraphs-gnn_classifier-seed0"}
    assert names == {"explagraphs-zero_shot-seed0", "explagraphs-g_retriever-seed0",
                     "explagraphs-g_retriever_lora-seed0", "webqsp-g_retriever-seed0"} | references
    for name in names:
        run_dir = smoke_outputs / "runs" / name
        metrics = json.loads((run_dir / "metrics.json").read_text())
        assert metrics["num_test"] == n_test
        assert (run_dir / "config.json").is_file() and (run_dir / "env.json").is_file()
        assert len((run_dir / "predictions.jsonl").read_text().splitlines()) == n_test
        trained = name not in references and metrics["method"] != "zero_shot"
        assert (run_dir / "history.json").is_file() == trained
        if name not in references:  # the precision record; a KGQA run keeps its answers' precision score beside it
            assert metrics["precision"]["dtype"] in ("float32", "bfloat16")
            assert isinstance(metrics.get("answer_precision", 0.0), float)
            assert ("answer_precision" in metrics) == name.startswith("webqsp")
    rows = {(r["dataset"], r["method"]): r for r in summary["table3"]}
    gr = rows[("explagraphs", "g_retriever")]
    assert gr["n_test"] == n_test and gr["ci_low"] <= gr["ours_mean"] <= gr["ci_high"]
    assert 0 <= gr["p_vs_zero_shot"] <= 1
    assert rows[("explagraphs", "majority")]["setting"] == "no LLM (reference)"
    assert (smoke_outputs / "03_training" / "confusion.csv").is_file()
    assert rows[("explagraphs", "g_retriever")]["paper_mean"] == 0.8516
    assert rows[("webqsp", "g_retriever")]["paper_mean"] == 70.49
    assert (smoke_outputs / "03_training" / "table3.csv").is_file()
    assert (smoke_outputs / "03_training" / "learning_curves.png").stat().st_size > 5_000


def test_gnn_rag_notebook_trains_the_reasoner_and_counts_path_failures(smoke_outputs):
    summary = json.loads((smoke_outputs / "04_gnn_rag" / "summary.json").read_text())
    rows = {r["dataset"]: r for r in summary["gnn_only"]}
    assert set(rows) == {"webqsp", "metaqa-1hop"}
    for r in rows.values():
        assert r["n"] == 16 and 0.0 <= r["h1"] <= 100.0 and 0.0 <= r["f1"] <= 100.0
    study = {r["dataset"]: r for r in summary["path_study"]}
    assert study["webqsp"]["questions"] == 16 and "candidates without a path" in study["webqsp"]
    from gr_core.studies.gnn_rag import REASONER_CHANGES

    changes = summary["reasoner_changes"]  # metaqa-1hop at smoke: one row per cumulative change, on validation
    assert [c["change"] for c in changes] == [name for name, _ in REASONER_CHANGES]
    assert all(c["dataset"] == "metaqa-1hop" and c["n"] == 16 and c["ci_low"] <= c["val H@1"] <= c["ci_high"]
               for c in changes)
    types = {t["qtype"] for t in summary["reasoner_changes_by_type"]}
    assert types and "all" not in types  # MetaQA's own question types (movie_to_director, ...)
    assert (smoke_outputs / "04_gnn_rag" / "evidence.png").stat().st_size > 10_000


def test_gnn_rag_notebook_answers_with_every_retriever_and_records_metrics(smoke_outputs):
    from gr_core.config import notebook_parameters
    from gr_core.gnn_rag.evidence import RETRIEVERS

    n_test = notebook_parameters("smoke", "04_gnn_rag")["llm_max_test"]  # the notebook's default
    out = smoke_outputs / "04_gnn_rag"
    summary = json.loads((out / "summary.json").read_text())
    rows = {(r["dataset"], r["retriever"]): r for r in summary["retrievers"]}
    grounded = ("gnn grounded", "gnn+rog grounded")  # beside the free-text rows, never instead of them
    assert set(rows) == {(d, r) for d in ("webqsp", "metaqa-1hop") for r in RETRIEVERS + grounded}
    for r in rows.values():
        assert r["questions"] == n_test and 0.0 <= r["Hit"] <= 100.0 and r["median tokens"] > 0
    assert rows[("webqsp", "gnn+rog")]["paper Hit"] == 90.7 and rows[("webqsp", "gnn grounded")]["paper source"] == ""
    metrics = json.loads((out / "metrics.json").read_text())
    assert {"Hit", "Hit@1", "F1"} <= set(metrics["webqsp"]["gnn"]) and "gnn_only" in metrics["metaqa-1hop"]
    with gzip.open(out / "predictions.jsonl.gz", "rt") as fh:  # gzipped: the cpu preset's is 6.6 MB as text
        preds = [json.loads(line) for line in fh.read().splitlines()]
    assert len(preds) == 2 * n_test * (len(RETRIEVERS) + len(grounded))
    assert all(p["gnn_h1"] in (0.0, 1.0) for p in preds)  # the GNN alone on every answered question: the claim's pair
    versus = {(r["dataset"], r["retriever"]) for r in summary["against_gnn"]}
    assert {("webqsp", "gnn"), ("metaqa-1hop", "gnn grounded")} <= versus
    assert {r["retriever"] for r in summary["failures"]} == set(RETRIEVERS) - {"none"}
    paths = json.loads((out / "relation_paths.json").read_text())
    assert set(paths) == {"webqsp", "metaqa-1hop"} and len(paths["webqsp"]["paths"]) == n_test
    for family in ("webqsp", "metaqa"):
        assert summary["llm_training"][family]["answer_generator"]["train_examples"] > 0
        assert (out / "runs" / f"{family}-relation-generator" / "history.json").is_file()


def test_hallucination_notebook_checks_every_response_with_intervals(smoke_outputs):
    from gr_core.config import notebook_parameters

    n_study = notebook_parameters("smoke", "05_hallucination")["study_questions"]["clevr"]  # the notebook's default
    out = smoke_outputs / "05_hallucination"
    rows = [json.loads(line) for line in (out / "responses.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * n_study and {r["system"] for r in rows} == {"graph_token", "g_retriever"}
    for r in rows:
        assert r["response"] is not None and r["valid_nodes_fuzzy"] <= r["cited_nodes"]
        assert r["valid_nodes_exact"] <= r["valid_nodes_normalized"] <= r["valid_nodes_fuzzy"]
        assert r["citing"] == (r["cited_nodes"] + r["cited_edges"] > 0)
    summary = json.loads((out / "summary.json").read_text())
    assert [t["metric"] for t in summary["table5"]] == ["Valid Nodes", "Valid Edges", "Fully Valid Graphs"]
    assert summary["table5"][2]["paper g_retriever"] == "62"
    assert {(s["system"], s["level"]) for s in summary["summary"]} == {
        (s, lv) for s in ("graph_token", "g_retriever") for lv in ("exact", "normalized", "fuzzy")}
    assert len((out / "to_label.jsonl").read_text().splitlines()) == 2 * n_study  # fewer responses than the 30 asked
    assert (out / "table5.png").stat().st_size > 5_000 and (out / "table5.pdf").is_file()
    checker = pd.read_csv(out / "checker_validation.csv").set_index(["dataset", "level"])
    assert checker.loc[("webqsp", "exact"), "precision_%"] == 100.0  # no false citation accepted exactly
    assert checker.loc[("webqsp", "normalized"), "recall_%"] >= 99.0
    assert summary["checker_validation"] and summary["parameters"]["validation_graphs"] == 100


def test_efficiency_notebook_measures_costs_and_tables_4_and_12(smoke_outputs):
    out = smoke_outputs / "06_efficiency"
    summary = json.loads((out / "summary.json").read_text())
    cells = {(r["key"], r["method"]) for r in summary["scaling"]}
    assert cells == {(k, m) for k in ("metaqa-1hop", "webqsp_full") for m in ("whole graph", "pcst", "gnn paths")}
    (t4,) = summary["table4"]
    assert t4["token_reduction_%"] > 90 and t4["min_epoch_before"] > 0 and t4["min_epoch_after"] > 0
    assert [r["name"] for r in summary["table12"]] == ["question_only", "zero_shot", "prompt_tuning", "g_retriever",
                                                       "lora", "g_retriever_lora"]
    assert (out / "scaling.png").stat().st_size > 10_000 and (out / "scaling.pdf").is_file()


def test_ablation_notebook_writes_tables_6_7_8_10(smoke_outputs):
    summary = json.loads((smoke_outputs / "07_ablations" / "summary.json").read_text())
    t6 = {r["method"]: r for r in summary["table6"]}
    assert all(0 <= t6[m]["ours"] <= 100 for m in ("g_retriever", "gr_wo_text"))  # run: a Hit (NaN fails this)
    assert t6["gr_wo_projector"]["ours"] != t6["gr_wo_projector"]["ours"]  # not run at smoke: NaN
    assert t6["gr_wo_text"]["paper"] == 56.96
    assert [r["encoder"] for r in summary["table7"]] == ["GCN", "GAT", "Graph Transformer"]
    (k3,) = summary["table10"]
    n_test = _smoke_test_questions("07_ablations")
    assert k3["k"] == 3 and k3["chosen"] and k3["n_test"] == n_test
    assert len(summary["table8"]) == 1 and summary["table11_k"][0]["questions"] == n_test


def test_report_notebook_judges_every_claim(smoke_outputs):
    out = smoke_outputs / "08_report"
    summary = json.loads((out / "summary.json").read_text())
    verdicts = {c["claim"]: c["verdict"] for c in summary["claims"]}
    assert len(verdicts) >= 8 and set(verdicts.values()) <= {"reproduced", "contradicted", "not significant", "partly",
                                                             "not reproduced", "not testable here"}
    # a paired test really ran on the runs' predictions: a claim scored on the smoke runs' own test questions
    n_test = _smoke_test_questions("03_training")
    tested = [c for c in summary["claims"] if c["n"] == n_test and c["p"] == c["p"] and c["p"] is not None]
    assert tested and all(0 <= c["p"] <= 1 and c["verdict"] != "not testable here" for c in tested)
    assert "03_training/table3" in summary["tables"] and "07_ablations/table6" in summary["tables"]
    report = (out / "report.md").read_text()
    assert report.startswith("# Results report: preset `smoke`") and "## GR Table 5: hallucination" in report
    results = (smoke_outputs / "RESULTS.md").read_text()  # the summary the README links
    assert results.startswith("# Results: preset `smoke`") and "## Headline numbers" in results
