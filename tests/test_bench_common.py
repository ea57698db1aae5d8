"""The benchmarks' shared measurement code (bench/common.py) and the chat families' records
(bench/chat_families.py), on hand-computed cases."""
import json

import pytest



@pytest.fixture
def common(bench):
    return bench("common")


def test_summarize_takes_median_nearest_rank_p90_and_min(common):
    s = common.summarize([0.5, 0.1, 0.3, 0.2, 0.4, 0.9, 0.8, 0.7, 0.6, 1.0])
    assert s == {"median_s": pytest.approx(0.55), "p90_s": 1.0, "min_s": 0.1, "n": 10}
    assert common.summarize([2.0]) == {"median_s": 2.0, "p90_s": 2.0, "min_s": 2.0, "n": 1}
    with pytest.raises(ValueError, match="no timings"):
        common.summarize([])


@pytest.mark.parametrize("tied", [True, False])
def test_llm_flops_leaves_out_both_embeddings_tied_or_not(common, tied):
    """A decode step reads ``n + vocab`` weights: the output projection once, whether it is the input embedding."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=tied)
    llm = LlamaForCausalLM(cfg)
    n, vocab = common.llm_flops(llm)
    layers = sum(p.numel() for p in llm.model.layers.parameters()) + llm.model.norm.weight.numel()
    assert (n, vocab) == (layers, 50 * 16)


def test_timed_returns_the_value_and_seconds(common):
    value, seconds = common.timed(sum, [1, 2, 3])
    assert value == 6 and 0 <= seconds < 5


def test_write_result_records_machine_versions_and_command(common, tmp_path, monkeypatch):
    monkeypatch.setenv("GR_OUTPUTS_DIR", str(tmp_path))
    path = common.write_result("chat/this_commit", {"x": 1},
                               argv=["/any/where/chat_families.py", "run", "--label", "a b"])
    assert path == common.result_path("chat/this_commit") == tmp_path / "bench" / "chat" / "this_commit.json"
    record = json.loads(path.read_text())
    assert record["x"] == 1 and record["command"] == "python bench/chat_families.py run --label 'a b'"
    assert {"torch", "numpy"} <= set(record["versions"]) and "auto_dtype" in record["machine"]


def _rows(hits):
    return [{"question": f"q{i}", "hit": h, "hit1": h, "turn_s": 0.1 * (i + 1)} for i, h in enumerate(hits)]


@pytest.fixture
def families(bench):
    return bench("chat_families")


def test_hit_record_scores_with_a_wilson_interval(families):
    rec = families.hit_record("paths", _rows([1, 1, 0, 0]))
    assert (rec["n"], rec["hit"], rec["hit1"]) == (4, 50.0, 50.0)
    assert (rec["ci_low"], rec["ci_high"]) == (15.0, 85.0)  # Wilson 95% for 2/4, hand-computed: 0.5 -+ 0.35
    assert rec["turn_median_s"] == pytest.approx(0.25)


def test_paired_is_exact_mcnemar_on_the_same_questions(families):
    a, b = _rows([1] * 8 + [0, 1]), _rows([0] * 8 + [0, 1])
    test = families.paired("a", a, "b", b)
    assert (test["score_a"], test["score_b"]) == (0.9, 0.1)
    assert test["p"] == pytest.approx(2 * 0.5 ** 8)  # 8 discordant pairs, all one way
    with pytest.raises(ValueError, match="different questions"):
        families.paired("a", a, "b", b[:-1] + [{**b[-1], "question": "other"}])


def test_the_families_table_and_the_results_summary_read_the_chat_files(families, tmp_path):
    from gr_core.report.results import families_table
    from gr_core.report.summary import benchmarks
    from gr_core.runs import write_json

    hit_record, paired = families.hit_record, families.paired

    rows = {"default": _rows([1, 1, 0, 0]), "train_reasoner": _rows([1, 1, 1, 0])}
    before = _rows([1, 0, 0, 0])
    write_json(tmp_path / "chat" / "metaqa_test.json", {
        "family": "metaqa", "split": "test", "records": [hit_record(k, v) for k, v in rows.items()],
        "pairs": [paired("train_reasoner", rows["train_reasoner"], "default", rows["default"]),
                  paired("default", rows["default"], "default (before: abc)", before),
                  paired("default", rows["default"], "train_reasoner (before: abc)", rows["default"]),  # not shown
                  paired("default", rows["default"], "default (before: def)", rows["default"])],
        "decisions": {"metaqa": {"served": "paths"}}})
    table = families_table(tmp_path / "chat")
    assert table.iloc[0].to_dict() == {"family": "metaqa", "split": "test", "n": 4, "default": "50.0 [15.0, 85.0]",
                                       "train_reasoner": "75.0 [30.1, 95.4]", "served": "paths", "turn s": 0.25,
                                       "train_reasoner vs default, p": 1.0,
                                       "default before": "25.0 at abc (p 1); 50.0 at def (p 1)"}
    summary = benchmarks(tmp_path)
    assert summary.file.tolist() == ["bench/chat/metaqa_test.json"]
    assert summary.ours[0] == "50% [15, 85] / 75% [30.1, 95.4]" and "version before: 50%" in summary.target[0]  # latest
