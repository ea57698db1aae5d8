import numpy as np
import pytest

from gr_core.g_retriever import retrieval
from gr_core.g_retriever.retrieval import PCSTSolverError, check_pcst_solver, solve_pcst


def test_installed_pcst_solver_passes_the_known_instance():
    check_pcst_solver()


def test_guard_fires_on_a_solver_that_repeats_vertex_ids():
    # What pcst_fast 1.0.10 does under numpy 2: right length, repeated ids.
    def broken(edges, prizes, costs, root, num_clusters, pruning, verbosity):
        return np.array([1, 1]), np.array([1])

    with pytest.raises(PCSTSolverError, match="numpy>=2") as err:
        check_pcst_solver(broken)
    assert "pcst-fast2" in str(err.value)


def test_solve_pcst_refuses_to_run_a_broken_solver(monkeypatch):
    import pcst_fast

    monkeypatch.setattr(retrieval, "_solver_checked", False)
    monkeypatch.setattr(pcst_fast, "pcst_fast", lambda *a: (np.array([0, 0]), np.array([0])))
    with pytest.raises(PCSTSolverError):
        solve_pcst(np.array([[0, 1]]), np.array([1.0, 1.0]), np.array([0.5]))


def test_solve_pcst_on_a_path_keeps_the_profitable_end():
    vertices, edges = solve_pcst(np.array([[0, 1], [1, 2]]), np.array([0.0, 5.0, 6.0]), np.array([3.0, 4.0]))
    assert sorted(vertices.tolist()) == [1, 2] and edges.tolist() == [1]


def test_broken_pcst_fast_distribution_is_not_installed():
    from importlib import metadata

    with pytest.raises(metadata.PackageNotFoundError):
        metadata.version("pcst-fast")


# ------------------------------------------------------------------ top-k prizes + PCST
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from gr_core.data import graph_from_triples  # noqa: E402
from gr_core.g_retriever.retrieval import RetrievalConfig, edge_prizes, node_prizes, retrieve_subgraph  # noqa: E402


def test_node_prizes_are_ranks_k_to_1_of_similarity():
    sim = np.array([0.1, 0.9, 0.5, 0.7], np.float32)
    assert node_prizes(sim, 3).tolist() == [0, 3, 1, 2]
    assert node_prizes(sim, 10).tolist() == [1, 4, 2, 3]  # k larger than the graph: capped at |V|
    assert node_prizes(sim, 0).tolist() == [0, 0, 0, 0]


def test_edge_prizes_share_rank_value_within_a_tie_group_official_rule():
    # groups by similarity: {0.9: 2 edges}, {0.8: 1}, {0.5: 1}; k_e = 3, c = 0.01
    sim = np.array([0.9, 0.8, 0.9, 0.5, 0.1], np.float32)
    p = edge_prizes(sim, 3, 0.01, "official")
    assert p[0] == p[2] == np.float32(1.5)  # 3 / 2
    assert p[1] == np.float32(1.5 * 0.99)  # 2 / 1 capped by the decayed previous value
    assert p[3] == np.float32(1.0)  # 1 / 1, below its cap 1.485 * 0.99
    assert p[4] == 0


def test_pyg_rule_subtracts_c_from_the_cap_and_can_go_negative():
    # A large top tie group: the official rule stays positive, PyG's "previous - c" cap turns negative.
    sim = np.array([0.9] * 300 + [0.8, 0.7], np.float32)
    official = edge_prizes(sim, 3, 0.01, "official")
    pyg = edge_prizes(sim, 3, 0.01, "pyg")
    assert official[300] > 0 and official[301] > 0
    assert pyg[300] < 0 and pyg[301] < 0


def _toy():
    # A path a-b-c-d plus a pendant e on b; embeddings make the query match c and edge (c, d).
    g = graph_from_triples([("a", "r1", "b"), ("b", "r2", "c"), ("c", "r3", "d"), ("b", "r4", "e")])
    basis = np.eye(9, dtype=np.float32)
    return g, basis[:5], basis[5:]  # orthogonal texts: similarity 1 to the matched item, 0 elsewhere


def test_retrieval_on_a_hand_checked_toy_graph():
    g, x, e = _toy()
    q = x[2] + e[2]  # node c and edge c-r3-d
    res = retrieve_subgraph(g, x, e, q, RetrievalConfig(top_k_nodes=1, top_k_edges=1, edge_cost=0.5))
    # c has prize 1; edge c-d prize 1 > C_e 0.5 becomes a virtual node of prize 0.5 joined to c and d at cost 0;
    # every other edge costs 0.5 and brings nothing, so the tree is c -(c,d)- d.
    assert res.node_prizes.tolist() == [0, 0, 1, 0, 0]
    assert res.edge_prizes.tolist() == [0, 0, 1, 0]
    assert res.graph.triples() == [("c", "r3", "d")]
    assert res.graph.nodes.node_id.tolist() == [2, 3]  # original ids kept


def test_retrieval_settings_are_checked_when_made():
    for k in (2.5, True, "3", -1):  # a count: anything else reached torch.topk, or compared str with int
        with pytest.raises(ValueError, match=r"RetrievalConfig.top_k_nodes=.* must be an integer >= 0"):
            RetrievalConfig(top_k_nodes=k)
    assert RetrievalConfig(np.int64(2), 0).top_k_nodes == 2


def test_whole_graph_setting_and_edgeless_graphs_return_the_input():
    g, x, e = _toy()
    assert retrieve_subgraph(g, x, e, x[0], RetrievalConfig(whole_graph=True)).graph is g
    single = graph_from_triples([])
    assert retrieve_subgraph(single, x[:0], e[:0], x[0]).graph is single


def test_retrieval_is_deterministic():
    g, x, e = _toy()
    a = retrieve_subgraph(g, x, e, x[1] + x[3])
    b = retrieve_subgraph(g, x, e, x[1] + x[3])
    assert a.node_rows.tolist() == b.node_rows.tolist() and a.edge_rows.tolist() == b.edge_rows.tolist()


def _is_connected(nodes, edges):
    if len(nodes) <= 1:
        return True
    adj = {n: set() for n in nodes}
    for s, d in edges:
        adj[s].add(d)
        adj[d].add(s)
    seen, stack = {nodes[0]}, [nodes[0]]
    while stack:
        for v in adj[stack.pop()] - seen:
            seen.add(v)
            stack.append(v)
    return seen == set(nodes)


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 30).flatmap(lambda n: st.tuples(
    st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, 5), st.integers(0, n - 1)),
                         min_size=1, max_size=80),
    st.integers(0, 2**31 - 1))), st.integers(0, 6), st.integers(0, 6), st.floats(0.0, 2.0),
       st.sampled_from(["official", "pyg"]))
def test_pcst_subgraph_is_a_connected_subgraph_with_selected_edge_endpoints(graph, k, k_e, cost, mode):
    # Random multigraphs with self-loops, repeated relations (tie groups) and disconnected parts.
    n, triples, seed = graph
    g = graph_from_triples([(f"n{h}", f"r{r}", f"n{t}") for h, r, t in triples])
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(g.num_nodes, 6)).astype(np.float32)
    rel_emb = rng.normal(size=(6, 6)).astype(np.float32)
    e = rel_emb[[int(r[1:]) for r in g.edges.edge_attr]]  # shared relation text -> tied similarities
    q = rng.normal(size=6).astype(np.float32)
    res = retrieve_subgraph(g, x, e, q, RetrievalConfig(k, k_e, cost, prize_mode=mode))
    sub = res.graph
    node_ids = sub.nodes.node_id.tolist()
    assert set(node_ids) <= set(g.nodes.node_id) and len(set(node_ids)) == len(node_ids)
    assert (set(res.edge_rows.tolist()) <= set(range(g.num_edges))
            and len(set(res.edge_rows.tolist())) == len(res.edge_rows))
    assert set(sub.edges.src) | set(sub.edges.dst) <= set(node_ids)
    assert _is_connected(node_ids, list(zip(sub.edges.src, sub.edges.dst)))
    sims = x @ q  # prizes follow similarity rank: a higher prize never goes to a less similar node
    order = np.argsort(-res.node_prizes, kind="stable")
    prized = order[res.node_prizes[order] > 0]
    assert len(prized) == min(k, g.num_nodes)
    assert all(sims[a] >= sims[b] for a, b in zip(prized, prized[1:]))
    assert (all(sims[prized[-1]] >= sims[i] for i in range(g.num_nodes) if res.node_prizes[i] == 0)
            if len(prized) else True)


def test_desc_written_from_rows_equals_textualizing_the_subgraph():
    from gr_core.g_retriever.textualize import textualize

    g = graph_from_triples([("a, inc", "r1", "b"), ('say "hi"', "r2", "c"), ("c", "r3", "a, inc"), ("b", "r1", "c")])
    x = np.eye(4, 8, dtype=np.float32)
    e = np.eye(4, 8, k=4, dtype=np.float32)
    res = retrieve_subgraph(g, x, e, x[0] + e[2], RetrievalConfig(2, 2, 0.3))
    assert res.desc == textualize(res.graph)
    assert len(res.node_rows) >= 2


def test_all_prizes_zero_still_returns_a_valid_subgraph():
    g, x, e = _toy()
    res = retrieve_subgraph(g, x, e, x[0], RetrievalConfig(top_k_nodes=0, top_k_edges=0))
    assert (res.node_prizes == 0).all() and (res.edge_prizes == 0).all()
    assert len(res.edge_rows) == 0 and len(res.node_rows) <= 1


def test_single_node_with_a_self_loop():
    g = graph_from_triples([("a", "r", "a")])
    x, e = np.ones((1, 4), np.float32), np.ones((1, 4), np.float32)
    res = retrieve_subgraph(g, x, e, np.ones(4, np.float32))
    assert res.graph.nodes.node_id.tolist() == [0]
    assert res.desc.startswith("node_id,node_attr\n0,a\n")


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(3, 40), st.integers(2, 120))
def test_pyg_setting_gives_the_same_subgraph_and_desc_as_torch_geometric(seed, n, m):
    import torch
    from torch_geometric.data import Data
    from torch_geometric.llm.utils.backend_utils import retrieval_via_pcst

    rng = np.random.default_rng(seed)
    triples = [(f"n{rng.integers(n)}, x", f"r{rng.integers(4)}", f'n{rng.integers(n)} "q"') for _ in range(m)]
    g = graph_from_triples(triples)
    x = rng.normal(size=(g.num_nodes, 8)).astype(np.float32)
    e = rng.normal(size=(4, 8)).astype(np.float32)[[int(r[1:]) for r in g.edges.edge_attr]]
    q = rng.normal(size=8).astype(np.float32)
    data = Data(x=torch.from_numpy(x), edge_index=torch.tensor(np.stack([g.edges.src, g.edges.dst])),
                edge_attr=torch.from_numpy(e), num_nodes=g.num_nodes, node_idx=np.arange(g.num_nodes),
                edge_idx=np.arange(g.num_edges))
    peer, peer_desc = retrieval_via_pcst(data, torch.from_numpy(q), g.nodes, g.edges, 3, 5, 0.5)
    ours = retrieve_subgraph(g, x, e, q, RetrievalConfig(prize_mode="pyg", similarity="cosine"))
    assert ours.node_rows.tolist() == np.asarray(peer.node_idx).tolist()
    assert ours.edge_rows.tolist() == np.asarray(peer.edge_idx).tolist()
    assert ours.desc == peer_desc


@pytest.mark.data
def test_dataset_retrieval_scores_each_text_once_and_ties_identical_texts_as_the_references_do():
    """graphqa.retrieve scores each distinct text once: identical texts tie exactly (one tie group of edge prizes), as
    under the references' per-row cosine; a per-row mat-vec can split such groups by rounding (13.8% of WebQSP
    mini-graphs retrieved a different subgraph that way). The full WebQSP graphs' own text rows (4,000 edges over a
    few hundred relations) with seeded vectors in place of the encoder's, each question near its graph's five most
    frequent relations (large tie groups at the top, where a split changes the prizes)."""
    import dataclasses

    from gr_core.graphqa import load_dataset, retrieve

    ds = load_dataset("webqsp_full")
    table = np.random.default_rng(0).normal(size=(len(ds.texts), 384)).astype(np.float32)
    table /= np.linalg.norm(table, axis=1, keepdims=True)
    questions = []
    for i in range(len(ds)):
        rows, counts = np.unique(ds.text_rows(i)[1], return_counts=True)
        q = table[rows[np.argsort(-counts)[:5]]].sum(0)
        questions.append(q / np.linalg.norm(q))
    ds = dataclasses.replace(ds, text_emb=table, question_emb=np.array(questions, np.float32))
    exact = RetrievalConfig(similarity="cosine")
    for i in range(len(ds)):
        g = ds.graph(i)
        reference = retrieve_subgraph(g, *ds.embeddings(i, g), ds.question_emb[i], exact)
        for cfg in (RetrievalConfig(), exact):
            ours = retrieve(ds, i, cfg, g)
            assert ours.node_rows.tolist() == reference.node_rows.tolist()
            assert ours.edge_rows.tolist() == reference.edge_rows.tolist()
            assert np.array_equal(ours.edge_prizes, reference.edge_prizes)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 60), max_size=80), st.integers(61, 3000))
def test_distinct_rows_equals_numpy_unique_by_mask_or_by_sort(rows, table_size):
    from gr_core.g_retriever.retrieval import distinct_rows

    rows = np.array(rows, np.int64)
    texts, inverse = distinct_rows(rows, table_size)  # a mask up to 16x the rows, a sort beyond
    want_texts, want_inverse = np.unique(rows, return_inverse=True)
    assert texts.tolist() == want_texts.tolist() and inverse.tolist() == want_inverse.tolist()


@pytest.mark.parametrize("table_rows", [6, 40])  # the graph reads most of the table (scored whole) / a few rows of it
def test_text_similarities_score_each_text_once_whether_the_table_is_read_whole_or_in_part(table_rows):
    from gr_core.g_retriever.retrieval import similarities, text_similarities

    rng = np.random.default_rng(table_rows)
    table = rng.normal(size=(table_rows, 16)).astype(np.float32)
    q = rng.normal(size=16).astype(np.float32)
    node_rows, edge_rows = np.array([0, 1, 2]), np.array([3, 4, 3, 3, 5, 4])
    node_sim, edge_sim = text_similarities(q, table, node_rows, edge_rows)
    np.testing.assert_allclose(node_sim, similarities(q, table[node_rows]), rtol=1e-5)
    np.testing.assert_allclose(edge_sim, similarities(q, table[edge_rows]), rtol=1e-5)
    assert edge_sim[0] == edge_sim[2] == edge_sim[3] and edge_sim[1] == edge_sim[5]  # one text, one exact value


def test_desc_keeps_the_graphs_own_node_ids_when_they_are_not_row_numbers():
    import pandas as pd

    from gr_core.data import TextualGraph
    from gr_core.g_retriever.textualize import textualize

    nodes = pd.DataFrame({"node_id": [40, 10, 30, 20], "node_attr": ["a", "b, inc", "c", "d"]})
    edges = pd.DataFrame({"src": [40, 10, 30, 20], "edge_attr": ["r1", "r2", "r3", "r1"], "dst": [10, 30, 20, 40]})
    g = TextualGraph(nodes, edges)
    x = np.eye(4, 8, dtype=np.float32)
    e = np.eye(4, 8, k=4, dtype=np.float32)
    res = retrieve_subgraph(g, x, e, x[1] + x[2] + e[1], RetrievalConfig(2, 2, 0.3))
    assert res.desc == textualize(res.graph)
    assert set(res.graph.nodes.node_id) >= {10, 30} and "10,r2,30" in res.desc
