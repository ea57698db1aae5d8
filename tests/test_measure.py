"""The benchmarks' shared measurement code (gr_core.measure) and the chat studies' record builders
(gr_core.studies.chat_answers), on hand-computed cases."""
import json

import pytest

from gr_core.measure import result_path, summarize, timed, write_result
from gr_core.studies.chat_answers import mode_record, paired_hit


def test_summarize_takes_median_nearest_rank_p90_and_min():
    s = summarize([0.5, 0.1, 0.3, 0.2, 0.4, 0.9, 0.8, 0.7, 0.6, 1.0])
    assert s == {"median_s": pytest.approx(0.55), "p90_s": 1.0, "min_s": 0.1, "n": 10}
    assert summarize([2.0]) == {"median_s": 2.0, "p90_s": 2.0, "min_s": 2.0, "n": 1}
    with pytest.raises(ValueError, match="no timings"):
        summarize([])


def test_timed_returns_the_value_and_seconds():
    value, seconds = timed(sum, [1, 2, 3])
    assert value == 6 and 0 <= seconds < 5


def test_write_result_records_machine_versions_and_command(tmp_path, monkeypatch):
    monkeypatch.setenv("GR_OUTPUTS_DIR", str(tmp_path))
    path = write_result("chat_follow_ups/this_commit", {"x": 1}, argv=["/any/where/chat.py", "follow-ups", "--label",
                                                                       "a b"])
    assert path == result_path("chat_follow_ups/this_commit") == tmp_path / "bench" / "chat_follow_ups" / \
        "this_commit.json"
    record = json.loads(path.read_text())
    assert record["x"] == 1 and record["command"] == "python bench/chat.py follow-ups --label 'a b'"
    assert {"torch", "numpy"} <= set(record["versions"]) and "auto_dtype" in record["machine"]


def _rows(hits, in_evidence=None):
    in_evidence = in_evidence or [True] * len(hits)
    return [{"question": f"q{i}", "hit": h, "hit1": h, "in_evidence": e, "node_answer": True, "turn_s": 0.1 * (i + 1)}
            for i, (h, e) in enumerate(zip(hits, in_evidence))]


def test_mode_record_scores_with_a_wilson_interval():
    rec = mode_record("metaqa", "ranked", _rows([1, 1, 0, 0], [True, True, True, False]))
    assert (rec["n"], rec["hit"], rec["in_evidence"]) == (4, 0.5, 0.75)
    assert rec["hit_given_in_evidence"] == pytest.approx(2 / 3)
    assert rec["hit_ci"] == [0.1500, 0.8500]  # Wilson 95% for 2/4, hand-computed: 0.5 -+ 0.35
    assert rec["turn_median_s"] == pytest.approx(0.25)


def test_paired_hit_is_exact_mcnemar_on_the_same_questions():
    a, b = _rows([1] * 8 + [0, 1]), _rows([0] * 8 + [0, 1])
    test = paired_hit("metaqa", "a", a, "b", b)
    assert (test["hit_a"], test["hit_b"]) == (0.9, 0.1)
    assert test["p"] == pytest.approx(2 * 0.5 ** 8)  # 8 discordant pairs, all one way
    assert paired_hit("metaqa", "a", a, "b", b[:-1] + [{**b[-1], "question": "other"}]) is None
