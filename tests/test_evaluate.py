"""The metric code reproduces the published scores on the published predictions."""
import json

import pytest

from gr_core.evaluate import answer_matches, explagraphs_correct, kgqa_report, kgqa_scores, normalize
from gr_core.paths import data_file


def _rows(name):
    with open(data_file("webqsp", "reference_results", name)) as fh:
        return [json.loads(line) for line in fh]


@pytest.mark.data
def test_gnn_rag_webqsp_scores_are_reproduced_from_its_predictions():
    rows = _rows("kgqa-gnn-rag_rearev_sbert_predictions.jsonl")
    report = kgqa_report([r["prediction"] for r in rows], [r["ground_truth"] for r in rows])
    # kgqa-gnn-rag_rearev_sbert_eval_result.txt: Hit 85.688 Hit1 80.590 F1 71.283 Precision 77.185 Recall 73.767
    assert report["hit"] == pytest.approx(85.68796068796068)
    assert report["hit1"] == pytest.approx(80.58968058968058)
    assert report["f1"] == pytest.approx(71.28257365406769)
    assert report["precision"] == pytest.approx(77.18506449319466)
    assert report["recall"] == pytest.approx(73.76651533728501)
    assert report["exact_hit"] == pytest.approx(85.20, abs=0.005)  # docs/peers.md 7


@pytest.mark.data
def test_gnn_rag_ra_scores_are_reproduced_and_match_row_by_row():
    rows = _rows("kgqa-gnn-rag-ra_rearev_sbert_detailed_eval_result.jsonl")
    report = kgqa_report([r["prediction"] for r in rows], [r["ground_truth"] for r in rows])
    assert (round(report["hit"], 2), round(report["hit1"], 2), round(report["f1"], 2)) == (90.72, 82.80, 73.49)
    for r in rows:
        s = kgqa_scores(r["prediction"], r["ground_truth"])
        assert (s["hit"], s["hit1"]) == (r["hit"], r["hit1"]) and s["f1"] == pytest.approx(r["f1"]), r["id"]


@pytest.mark.data
def test_unbounded_reference_precision_exceeds_one_and_the_bounded_variant_does_not():
    rows = _rows("kgqa-gnn-rag_rearev_sbert_predictions.jsonl")
    scores = [kgqa_scores(r["prediction"], r["ground_truth"]) for r in rows]
    over = [s["precision"] for s in scores if s["precision"] > 1]
    assert len(over) == 26 and max(over) == pytest.approx(10.78, abs=0.01)  # docs/peers.md 6
    assert max(s["precision_bounded"] for s in scores) <= 1


def test_match_is_a_normalized_substring_as_in_the_references():
    assert normalize("The  U.S. Army!") == "us army"
    assert answer_matches("He works in business.", "US")  # no word boundary, as the references
    assert not answer_matches("Paris", "London")
    s = kgqa_scores("london\nparis", ["Paris"])
    assert (s["hit"], s["hit1"], s["exact_hit"], s["precision"], s["f1"]) == (1.0, 0.0, 1.0, 0.5, pytest.approx(2 / 3))
    s = kgqa_scores("\nParis\n", ["Paris"])  # stripped first, as the reference: no empty lines at its ends
    assert (s["hit1"], s["precision"], s["f1"]) == (1.0, 1.0, 1.0)


def test_explagraphs_accuracy_uses_the_first_stance_word():
    assert explagraphs_correct("Support. They counter nothing.", "support")
    assert not explagraphs_correct("counter, not support", "support")
    assert not explagraphs_correct("No", "counter")


def test_scene_graph_accuracy_is_a_case_sensitive_raw_substring_as_in_the_gr_code():
    from gr_core.evaluate import scene_graph_correct, task_scores

    assert scene_graph_correct("The answer is yes.", "yes")
    assert not scene_graph_correct("Yes", "yes")
    assert scene_graph_correct("eyes", "yes")  # no word boundary, like the reference
    s = task_scores("clevr", "There are 2 cubes", ["2"])
    assert s["score"] == 1.0 and s["exact"] == 0.0


def test_task_scores_split_g_retriever_pipes_for_kgqa_and_keep_the_explagraphs_rule():
    from gr_core.evaluate import task_report, task_scores

    s = task_scores("webqsp", "jamaican english|jamaican creole",
                    ["Jamaican Creole English Language", "jamaican english"])
    assert s["score"] == 1.0 and s["hit1"] == 1.0 and s["precision_bounded"] == 0.5
    assert task_scores("explagraphs", "Counter. They support", ["counter"])["score"] == 1.0
    report = task_report("webqsp", ["a", "b"], [["a"], ["c"]])
    assert report["score"] == 50.0 and report["n"] == 2
    with pytest.raises(ValueError, match="no metric"):
        task_scores("nope", "x", ["x"])


@pytest.mark.data
def test_reference_metric_check_table_reproduces_both_published_rows():
    from gr_core.evaluate import reference_metric_check

    table = reference_metric_check()
    for _, row in table.iterrows():
        assert (row["Hit"], row["Hit@1"], row["F1"]) == (row["paper Hit"], row["paper Hit@1"], row["paper F1"])
    assert table.loc[0, "rows with precision > 1"] == 26 and table.loc[0, "F1 (bounded precision)"] == 71.71
