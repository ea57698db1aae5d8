import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gr_core.kg import KnowledgeGraph, NeighbourhoodConfig


def _kg(triples, n=None):
    names = sorted({x for h, _, t in triples for x in (h, t)}) if n is None else [str(i) for i in range(n)]
    eid = {x: i for i, x in enumerate(names)}
    rels = sorted({r for _, r, _ in triples})
    rid = {r: i for i, r in enumerate(rels)}
    return KnowledgeGraph(names, rels, np.array([eid[h] for h, _, _ in triples], dtype=np.int64),
                          np.array([rid[r] for _, r, _ in triples], dtype=np.int64),
                          np.array([eid[t] for _, _, t in triples], dtype=np.int64))


def test_csr_index_covers_both_directions():
    kg = _kg([("a", "r", "b"), ("b", "r", "c"), ("a", "s", "c")])
    assert kg.degree.tolist() == [2, 2, 2]
    assert kg.indptr[-1] == 2 * kg.num_edges


def test_one_hop_is_followed_along_a_relation_and_against_it():
    # a -r-> b, c -r-> b, b -s-> d, a -s-> a (a self-loop)
    kg = _kg([("a", "r", "b"), ("c", "r", "b"), ("b", "s", "d"), ("a", "s", "a")])
    ids, r, s = kg.entity_id, 0, 1
    names = lambda rows: [kg.entities[i] for i in rows]  # noqa: E731
    assert names(kg.follow([ids["a"]], r)) == ["b"] and names(kg.follow([ids["b"]], r)) == []
    assert names(kg.follow([ids["b"]], r, inverse=True)) == ["a", "c"]
    assert names(kg.follow([ids["a"], ids["c"]], r)) == ["b"] and names(kg.follow([ids["a"]], s)) == ["a"]
    assert kg.hop_edges([ids["b"]], r, inverse=True).tolist() == [0, 1] and kg.hop_edges([ids["b"]], s).tolist() == [2]
    assert kg.follow(np.zeros(0, np.int64), r).tolist() == []


def test_what_a_graph_derives_is_computed_once():
    kg, calls = _kg([("a", "r", "b")]), []
    assert kg.derived("x", lambda: calls.append(1) or 7) == 7 and kg.derived("x", lambda: calls.append(1) or 8) == 7
    assert calls == [1] and kg.twin_relations() is kg.twin_relations() and kg.derived(("twins", 0.9), list) is not None


def test_two_hop_neighbourhood_follows_edges_in_both_directions():
    # a -> b <- c -> d ; e isolated from a within 2 hops
    kg = _kg([("a", "r", "b"), ("c", "r", "b"), ("c", "r", "d"), ("d", "r", "e")])
    ids = kg.entity_id
    nodes, edges = kg.neighbourhood([ids["a"]], NeighbourhoodConfig(hops=2))
    assert [kg.entities[i] for i in nodes] == ["a", "b", "c"]  # seed first, then hop by hop
    assert sorted(edges.tolist()) == [0, 1]  # induced edges only


def test_hubs_are_kept_but_not_expanded():
    triples = [("q", "r", "hub")] + [("hub", "r", f"m{i}") for i in range(5)]
    kg = _kg(triples)
    nodes, _ = kg.neighbourhood([kg.entity_id["q"]], NeighbourhoodConfig(hops=2, max_expand_degree=3))
    assert [kg.entities[i] for i in nodes] == ["q", "hub"]


def test_seeds_are_always_expanded_even_when_they_are_hubs():
    kg = _kg([("hub", "r", f"m{i}") for i in range(5)])
    nodes, _ = kg.neighbourhood([kg.entity_id["hub"]], NeighbourhoodConfig(hops=1, max_expand_degree=1))
    assert len(nodes) == 6


def test_node_cap_truncates_the_last_hop():
    kg = _kg([("s", "r", f"m{i}") for i in range(10)])
    nodes, edges = kg.neighbourhood([kg.entity_id["s"]], NeighbourhoodConfig(hops=1, max_nodes=4))
    assert len(nodes) == 4 and len(edges) == 3


def test_subgraph_keeps_kb_ids_and_relation_text():
    kg = _kg([("a", "r", "b"), ("b", "s", "c")])
    nodes, edges = kg.neighbourhood([kg.entity_id["c"]], NeighbourhoodConfig(hops=1))
    g = kg.subgraph(nodes, edges, question="?")
    assert g.nodes.node_attr.tolist() == ["c", "b"] and g.nodes.kb_id.tolist() == nodes.tolist()
    assert g.triples() == [("b", "s", "c")]


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 25).flatmap(lambda n: st.tuples(st.just(n), st.lists(
    st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), min_size=1, max_size=60))), st.integers(0, 3))
def test_neighbourhood_equals_a_plain_breadth_first_search(graph, hops):
    n, pairs = graph
    kg = KnowledgeGraph([str(i) for i in range(n)], ["r"], np.array([p[0] for p in pairs]),
                        np.zeros(len(pairs), dtype=np.int64), np.array([p[1] for p in pairs]))
    nodes, edges = kg.neighbourhood([0], NeighbourhoodConfig(hops=hops, max_expand_degree=10**9, max_nodes=10**9))
    dist = {0: 0}
    frontier = [0]
    for h in range(hops):
        nxt = []
        for u in frontier:
            for a, b in pairs:
                for x, y in ((a, b), (b, a)):
                    if x == u and y not in dist:
                        dist[y] = h + 1
                        nxt.append(y)
        frontier = nxt
    assert set(nodes.tolist()) == set(dist)
    assert sorted(edges.tolist()) == [k for k, (a, b) in enumerate(pairs) if a in dist and b in dist]
    assert len(set(nodes.tolist())) == len(nodes)


def test_negative_hops_are_rejected():
    with pytest.raises(ValueError, match="hops"):
        NeighbourhoodConfig(hops=-1)
