from gr_core.data import graph_from_triples
from gr_core.g_retriever.textualize import textualize


def test_textualize_matches_the_paper_explagraphs_example():
    # docs/method.md §1.2 / GR paper Table 9, checked by hand.
    g = graph_from_triples([("entrapment", "capable of", "being abused"), ("being abused", "created by", "police"),
                            ("police", "capable of", "harm"), ("harm", "used for", "people"),
                            ("people", "part of", "citizens")])
    assert textualize(g) == (
        "node_id,node_attr\n0,entrapment\n1,being abused\n2,police\n3,harm\n4,people\n5,citizens\n"
        "\n"
        "src,edge_attr,dst\n0,capable of,1\n1,created by,2\n2,capable of,3\n3,used for,4\n4,part of,5\n"
    )


def test_textualize_quotes_fields_with_commas_like_pandas():
    g = graph_from_triples([("name: banana; attribute: small, yellow", "on", "table")], lowercase=False)
    assert textualize(g).splitlines()[1] == '0,"name: banana; attribute: small, yellow"'


def test_textualize_keeps_the_graphs_own_node_ids():
    g = graph_from_triples([("a", "r", "b"), ("b", "r", "c")])
    g.nodes = g.nodes.iloc[[1, 2]]  # a retrieved subgraph keeps ids 1 and 2
    g.edges = g.edges.iloc[[1]]
    assert textualize(g) == "node_id,node_attr\n1,b\n2,c\n\nsrc,edge_attr,dst\n1,r,2\n"


def test_an_empty_graph_textualizes_to_the_two_headers():
    g = graph_from_triples([])
    assert textualize(g) == "node_id,node_attr\n\nsrc,edge_attr,dst\n"


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_TEXT = st.text(alphabet=st.sampled_from(list('ab ,;"\'\n\r\t:()é漢-1')), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_TEXT, _TEXT, _TEXT), min_size=1, max_size=8))
def test_textualize_is_byte_identical_to_pandas_to_csv(triples):
    g = graph_from_triples(triples, lowercase=False)
    expected = g.nodes.to_csv(index=False) + "\n" + g.edges.to_csv(index=False, columns=["src", "edge_attr", "dst"])
    assert textualize(g) == expected


def test_column_rows_equals_to_numpy_for_every_string_storage():
    import numpy as np
    import pandas as pd

    from gr_core.g_retriever.textualize import column_rows

    for values in (pd.array(["a", "b,c", 'd"e', "f"], dtype=str), pd.array(["a", None, "c", "d"], dtype=str),
                   pd.array(["a", None, "c", "d"], dtype="string[pyarrow]"), np.array(["a", "b", "c", "d"], object),
                   np.arange(4)):
        frame = pd.DataFrame({"x": values})
        for rows in (np.array([3, 0, 3, 1]), np.array([3, 0, 2])):  # with the missing row (1) and without it
            want, got = frame["x"].to_numpy()[rows].tolist(), column_rows(frame, "x", rows)
            assert [type(v) for v in got] == [type(v) for v in want]
            assert [str(v) for v in got] == [str(v) for v in want]
