import tarfile

import pytest

from gr_core.data import GraphFormatError, graph_from_triples, load_explagraphs, load_split, parse_explagraphs_graph
from gr_core.g_retriever.textualize import textualize
from gr_core.paths import data_file


@pytest.fixture(scope="module")
def explagraphs():
    return load_explagraphs()


@pytest.mark.data
def test_explagraphs_has_every_row_and_the_reference_split(explagraphs):
    split = load_split("explagraphs")
    assert len(explagraphs) == 2766
    assert {k: len(v) for k, v in split.items()} == {"train": 1659, "val": 553, "test": 554}
    assert sorted(split["train"] + split["val"] + split["test"]) == list(range(2766))


@pytest.mark.data
def test_explagraphs_reproduces_the_reference_csvs_byte_for_byte(explagraphs):
    ref = {}
    with tarfile.open(data_file("explagraphs", "reference_nodes_edges_split.tar.gz")) as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")
            if member.isfile() and parts[-2] in ("nodes", "edges"):
                ref[(parts[-2], int(parts[-1][:-4]))] = tar.extractfile(member).read().decode()
    assert len(ref) == 2 * 2766
    # The whole desc as the GR code builds it from those files: nodes CSV, blank line, edges CSV.
    mismatches = [i for i, g in enumerate(explagraphs) if textualize(g) != ref[("nodes", i)] + "\n" + ref[("edges", i)]]
    assert mismatches == []


def test_explagraphs_mean_sizes_match_table_2(explagraphs):
    assert sum(g.num_nodes for g in explagraphs) / 2766 == pytest.approx(5.17, abs=0.005)
    assert sum(g.num_edges for g in explagraphs) / 2766 == pytest.approx(4.25, abs=0.005)


def test_malformed_triple_error_names_file_line_and_field():
    with pytest.raises(GraphFormatError, match=r"train.tsv:7: field 'graph'.*2 ';'-separated parts"):
        parse_explagraphs_graph("(a; b)(c; d; e)", where="train.tsv:7")


def test_graph_without_triples_is_an_error():
    with pytest.raises(GraphFormatError, match="no '\\(head; relation; tail\\)' triple"):
        parse_explagraphs_graph("no triples here", where="x.tsv:2")


def test_node_ids_follow_first_appearance_and_equal_strings_share_a_node():
    g = graph_from_triples([("B", "r", "a"), (" a ", "R2", "c"), ("b", "r", "a")])
    assert g.nodes.node_attr.tolist() == ["b", "a", "c"]
    assert g.edges.values.tolist() == [[0, "r", 1], [1, "r2", 2], [0, "r", 1]]  # repeated triple kept
    assert g.triples()[1] == ("a", "r2", "c")


def test_graph_columns_have_one_dtype_also_when_empty():
    import pandas as pd

    for g in (graph_from_triples([("A", "r", "b")], lowercase=False), graph_from_triples([])):
        assert g.nodes.node_id.dtype == g.edges.src.dtype == g.edges.dst.dtype == "int64"
        assert g.nodes.node_attr.dtype == g.edges.edge_attr.dtype == pd.StringDtype(na_value=float("nan"))
        assert isinstance(g.nodes.index, pd.RangeIndex) and isinstance(g.edges.index, pd.RangeIndex)
    assert graph_from_triples([("A", "r", "b")], lowercase=False).triples() == [("A", "r", "b")]


def test_entity_names_that_look_like_missing_values_stay_strings():
    g = graph_from_triples([("nan", "r", "NA"), ("null", "r", "None")])
    assert g.nodes.node_attr.tolist() == ["nan", "na", "null", "none"]
    assert all(isinstance(x, str) for x in g.nodes.node_attr)
