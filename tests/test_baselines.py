import numpy as np
import pytest

from gr_core.data import graph_from_triples
from gr_core.g_retriever.baselines import retrieve_kaping, retrieve_khop, retrieve_none, triple_texts
from gr_core.studies.retrieval_eval import answer_in, context_view, summarize_retrievers


def _graph():
    g = graph_from_triples([("paris", "capital of", "france"), ("france", "in", "europe"),
                            ("berlin", "capital of", "germany"), ("germany", "in", "europe"),
                            ("europe", "has", "alps")])
    g.q_entities = ["paris"]
    return g


def test_triples_are_verbalized_as_kaping_does():
    assert triple_texts(_graph())[0] == "(paris, capital of, france)"


def test_kaping_keeps_the_k_most_similar_triples_and_their_endpoints():
    g = _graph()
    emb = np.eye(5, dtype=np.float32)
    res = retrieve_kaping(g, emb, emb[2] * 2 + emb[3], k=2)
    assert res.edge_rows.tolist() == [2, 3]  # most similar first
    assert set(res.graph.nodes.node_attr) == {"berlin", "germany", "europe"}


def test_khop_starts_at_the_question_entities():
    g = _graph()
    one = retrieve_khop(g, hops=1)
    assert set(one.graph.nodes.node_attr) == {"paris", "france"}
    two = retrieve_khop(g, hops=2)
    assert set(two.graph.nodes.node_attr) == {"paris", "france", "europe"}
    assert len(two.edge_rows) == 2


def test_khop_without_question_entities_starts_at_the_most_similar_node():
    g = _graph()
    g.q_entities = []
    x = np.eye(6, dtype=np.float32)
    res = retrieve_khop(g, 1, x, x[5])  # node 5 = alps
    assert set(res.graph.nodes.node_attr) == {"alps", "europe"}


def test_no_retrieval_is_the_whole_graph_and_answers_are_found_by_exact_name():
    g = _graph()
    assert retrieve_none(g).graph is g
    assert answer_in(g, ["europe"]) and not answer_in(g, ["Europe"]) and not answer_in(g, ["asia"])


def test_context_view_highlights_exactly_the_retrieved_part():
    g = _graph()
    emb = np.eye(5, dtype=np.float32)
    res = retrieve_kaping(g, emb, emb[0], k=1)
    view, nodes, edges = context_view(res, max_nodes=4)
    assert nodes == [0, 1] and view.num_nodes == 3  # + europe, the only neighbour of the pair
    assert [tuple(view.edges.iloc[k]) for k in edges] == [(0, "capital of", 1)]


def test_summary_reports_reductions_and_the_answer_rate():
    import pandas as pd

    rows = pd.DataFrame([{"dataset": "d", "question": 0, "retriever": "pcst", "nodes_before": 10, "edges_before": 9,
                          "tokens_before": 100, "nodes_after": 2, "edges_after": 1, "tokens_after": 10,
                          "answer_in_subgraph": True, "seconds": 0.001}])
    out = summarize_retrievers(rows).iloc[0]
    assert out["node_reduction_%"] == 80 and out["token_reduction_%"] == 90 and out["answer_in_subgraph"] == 100
    assert (out["answer_ci_low"], out["answer_ci_high"]) == (20.65, 100.0)  # Wilson 95% for 1 of 1
    # paired on the same questions against PCST: KAPING misses 6 answers PCST finds, finds none it misses
    both = pd.DataFrame([{**rows.iloc[0].to_dict(), "question": q, "retriever": r, "answer_in_subgraph": hit}
                         for q in range(10) for r, hit in (("pcst", True), ("kaping", q >= 6))])
    table = summarize_retrievers(both).set_index("retriever")
    assert table.loc["kaping", "answer_p_vs_pcst"] == 2 * 0.5 ** 6 and np.isnan(table.loc["pcst", "answer_p_vs_pcst"])
    assert table.loc["kaping", "answer_in_subgraph"] == 40
    shuffled = summarize_retrievers(both.sample(frac=1, random_state=0)).set_index("retriever")  # aligned by question
    assert shuffled.loc["kaping", "answer_p_vs_pcst"] == 2 * 0.5 ** 6
    assert "answer_p_vs_pcst" not in summarize_retrievers(both[both.retriever == "kaping"])  # nothing to pair with


def test_studies_over_nothing_are_refused_by_name():
    from gr_core.g_retriever.baselines import zero_shot_whole_graphs
    from gr_core.studies.retrieval_eval import evaluate_datasets

    with pytest.raises(ValueError, match=r"no graph to ask \(num_questions must be at least 1\)"):
        zero_shot_whole_graphs(None, None, [])  # notebook 00's num_questions=0 had failed with an IndexError
    with pytest.raises(ValueError, match=r"no dataset named \(study_datasets=\[\]\)"):
        evaluate_datasets([])  # notebook 02's had failed in pandas' concat
