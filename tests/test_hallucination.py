"""The hallucination checker: citation parsing, the three match levels, Table 5 metrics with intervals, agreement."""
import numpy as np
import pandas as pd
import pytest

from gr_core.citations import CitationMatcher, check_response, parse_citations
from gr_core.data import TextualGraph
from gr_core.prompts import CITE_FORMAT_INSTRUCTION, CITE_INSTRUCTION, cite_question
from gr_core.stats import wilson_interval
from gr_core.studies import hallucination
from gr_core.studies.hallucination import (TABLE1_RESPONSES, agreement, is_echo, ratio_ci, summarize, table1_scene,
                                           table5)

TABLE1_BASELINE = TABLE1_RESPONSES["graph prompt tuning"]
TABLE1_G_RETRIEVER = TABLE1_RESPONSES["g_retriever"]


def graph(nodes, edges):
    return TextualGraph(nodes=pd.DataFrame({"node_id": list(range(len(nodes))), "node_attr": nodes}),
                        edges=pd.DataFrame(edges, columns=["src", "edge_attr", "dst"]))


SCENE = table1_scene()
CLEVR = graph(["name: cube; attribute: large, yellow, metal; (x,y): (76, 128)",
               "name: sphere; attribute: small, gray, rubber; (x,y): (286, 103)"],
              [(0, "to the left of", 1), (1, "to the right of", 0)])
KG = graph(["tom landry", "new york giants", "quarterback"],
           [(0, "sports.pro_athlete.teams", 1), (0, "american_football.football_player.position_s", 2)])


def test_cite_prompt_places_the_request_before_the_answer_cue():
    q = cite_question("webqsp", "who did tom landry play for")
    assert q == f"Question: who did tom landry play for {CITE_INSTRUCTION}\n\nAnswer: "  # WebQSP's cue keeps its space
    assert CITE_INSTRUCTION in q and q.index(CITE_INSTRUCTION) < q.rindex("Answer:")
    e = cite_question("explagraphs", "Argument 1: a\nArgument 2: b\nQuestion: x?\n\nAnswer:")
    assert e.endswith(f"{CITE_INSTRUCTION}\n\nAnswer:")
    f = cite_question("clevr", "What color is the cube?", "format")
    assert f.endswith(f"{CITE_FORMAT_INSTRUCTION}\n\nAnswer:") and "Nodes: <node>" in f
    with pytest.raises(ValueError, match="request='apa' is not one of"):
        cite_question("clevr", "x", "apa")


def test_the_format_request_asks_for_forms_the_parser_reads():
    """A response written as the format request asks is read as the nodes and edge it names, and all valid."""
    response = ("2\nNodes: large yellow cube, small gray sphere\n"
                "Edges: (large yellow cube, to the left of, small gray sphere)")
    verdict = check_response(response, CLEVR)
    assert (verdict["cited_nodes"], verdict["cited_edges"]) == (2, 1) and verdict["fully_valid_normalized"]


def test_a_copied_prompt_graph_is_an_echo():
    assert is_echo("node_id,node_attr\n0,cube") and is_echo("1\nsrc, edge_attr, dst\n0,left of,1")
    assert is_echo("2\nNodes: <node>, <node>")  # the format request's template, copied
    assert not is_echo("Nodes: cube\nEdges: (cube, left of, sphere)")


@pytest.mark.data
def test_citing_rates_rows_per_llm_and_request_and_a_missing_llm_says_why(tiny_llm_dir, tmp_path, monkeypatch):
    from gr_core.g_retriever.experiments import RunSettings
    from gr_core.studies.hallucination import citing_rates

    monkeypatch.setenv("GR_CACHE_DIR", str(tmp_path / "cache"))
    settings = RunSettings.from_parameters({"llm_model": tiny_llm_dir, "max_txt_len": 64}).keywords()
    rows, table = citing_rates(["clevr"], [tiny_llm_dir, "embedded:not-a-model"], [], ["paper", "format"],
                               tmp_path / "runs", settings, questions=2, max_new_tokens=4, batch_size=2)
    assert list(zip(table.llm == tiny_llm_dir, table.request)) == [(True, "paper"), (True, "format"),
                                                                     (False, "paper"), (False, "format")]
    ran = table[table.responses > 0]
    assert list(ran.responses) == [2, 2] and ran["citing_%"].between(0, 100).all() and not (tmp_path / "runs").exists()
    assert table[table.responses == 0].note.str.contains("unknown embedded LLM").all()
    assert len(rows) == 4 and set(rows.request) == {"paper", "format"} and "echo" in rows
    cached = sorted((tmp_path / "cache" / "hallucination").glob("*.json"))
    assert len(cached) == 2  # one file per request; a second call reads them and generates nothing
    monkeypatch.setattr(hallucination, "cite_responses", lambda *a, **k: pytest.fail("regenerated a cached response"))
    again, _ = citing_rates(["clevr"], [tiny_llm_dir], [], ["paper", "format"], tmp_path / "runs", settings,
                            questions=2, max_new_tokens=4, batch_size=2)
    assert list(again.response) == list(rows.response)


@pytest.mark.data
def test_the_papers_request_keeps_the_cache_key_it_had_before_requests_could_change(tiny_llm_dir):
    """Responses cached before the format request existed are still found: the paper's request hashes as it did."""
    from gr_core.g_retriever.experiments import RunSettings
    from gr_core.g_retriever.train import make_run_config
    from gr_core.graphqa import DatasetConfig, load_dataset
    from gr_core.runs import config_hash

    ds = load_dataset(DatasetConfig("clevr"))
    settings = RunSettings.from_parameters({"llm_model": tiny_llm_dir}).keywords()
    cfg = make_run_config("clevr", "zero_shot", 0, **settings)
    idx = list(ds.split["test"])[:3]
    path = hallucination.response_cache(cfg, ds, idx, 32, 4, 0)
    assert path == hallucination.response_cache(cfg, ds, idx, 32, 4, 0, request="paper")
    old_spec = {"run": config_hash(cfg.to_dict()), "questions": [str(ds.records[i].graph_id) for i in idx],
                "max_new_tokens": 32, "request": CITE_INSTRUCTION, "batch_size": 4, "seed": 0}
    # the key adds the LLM's dtype only when it is not fp32 (the tiny model's modules pin fp32)
    assert path.name == f"{cfg.name}-{config_hash(old_spec)}.json"
    assert hallucination.response_cache(cfg, ds, idx, 32, 4, 0, request="format") != path


def test_paper_table1_baseline_is_caught():
    cites = parse_citations(TABLE1_BASELINE)
    assert [(c.kind, c.head, c.tail) for c in cites] == [
        ("node", "Deer", None), ("node", "Bushes", None),
        ("edge", "Deer", "Bushes"), ("edge", "Deer", "Grass"), ("edge", "Bushes", "Grass")]
    r = check_response(TABLE1_BASELINE, SCENE)
    for lv in ("exact", "normalized", "fuzzy"):
        assert r[f"valid_nodes_{lv}"] == 1  # "Bushes" exists, "Deer" does not
        assert r[f"valid_edges_{lv}"] == 0 and not r[f"fully_valid_{lv}"]


def test_paper_table1_g_retriever_is_valid():
    r = check_response(TABLE1_G_RETRIEVER, SCENE)
    assert (r["cited_nodes"], r["cited_edges"]) == (1, 1)
    assert r["fully_valid_normalized"]  # node 1 exists; the worded edge names elephant, bushes and "in"


def test_edge_forms_and_direction():
    text = "Edges:\n0,in,1\n(bushes, next to, tree)\ntree -> bushes\nelephant --in--> bushes\nelephant -> in -> bushes"
    cites = parse_citations(text)
    assert [c.kind for c in cites] == ["edge"] * 5
    assert (cites[0].head_id, cites[0].relation, cites[0].tail_id) == (0, "in", 1)
    assert (cites[3].head, cites[3].relation, cites[3].tail) == ("elephant", "in", "bushes")
    assert (cites[4].head, cites[4].relation, cites[4].tail) == ("elephant", "in", "bushes")
    index = CitationMatcher(SCENE)
    assert [index.valid(c, "exact") for c in cites] == [True, True, False, True, True]
    assert index.valid(cites[2], "fuzzy")  # reversed direction only counts at the fuzzy level
    assert not index.valid(parse_citations("Edges:\n0,next to,1")[0], "exact")  # wrong relation
    # the chat's own evidence lines on a knowledge graph, copied back by its LLM: cited nowhere before
    piped = parse_citations("The answer is the bushes.\nelephant | in | bushes")
    assert [(c.kind, c.head, c.relation, c.tail) for c in piped] == [("edge", "elephant", "in", "bushes")]
    assert index.valid(piped[0], "exact") and parse_citations("| a | b |") == []
    # but the chat lists three answers so on its first line, and a node list may be written with bars
    assert parse_citations("Larry Crowne | Philadelphia | Big") == []
    assert [c.kind for c in parse_citations("Edges:\nelephant | in | bushes")] == ["edge"]
    assert [c.kind for c in parse_citations("Nodes: cube | sphere | cylinder")] == ["node"]


def test_node_forms():
    text = "Nodes:\n* the Elephant\n- 2,tree\n1. giraffe\nAlso see node 7 and bushes (node 1)."
    cites = parse_citations(text)
    assert [(c.head, c.node_id) for c in cites] == [("the Elephant", None), ("tree", 2), ("giraffe", None),
                                                    (None, 7), ("bushes", 1)]
    index = CitationMatcher(SCENE)
    assert [index.valid(c, "normalized") for c in cites] == [True, True, False, False, True]
    assert not index.valid(cites[0], "exact")  # the article only goes at the normalized level
    assert parse_citations("The elephant is in the bushes.") == []  # prose is not a citation


def test_match_levels_are_nested_on_scene_graph_and_kg():
    ci = CitationMatcher(CLEVR)
    checks = {"cube": (True, True, True), "small gray sphere": (False, True, True), "gray cube": (False, False, True),
              "purple cylinder": (False, False, False), "spheres": (False, True, True)}
    for text, expected in checks.items():
        got = tuple(bool(ci.matching_nodes(text, lv)) for lv in ("exact", "normalized", "fuzzy"))
        assert got == expected, text
    ki = CitationMatcher(KG)
    assert ki.matching_nodes("New York Giants", "exact") == {1}
    assert not ki.matching_nodes("giants", "normalized") and ki.matching_nodes("giants", "fuzzy") == {1}
    assert ki.matching_nodes("new york giant", "fuzzy") == {1}
    edge = parse_citations("Edges:\n* tom landry -> teams -> new york giants")[0]
    assert not ki.valid(edge, "exact") and ki.valid(edge, "normalized")  # the relation's last Freebase segment
    with pytest.raises(ValueError, match="match level"):
        ki.valid(edge, "loose")


def test_intervals():
    lo, hi = wilson_interval(8, 100)
    assert lo < 0.08 < hi and 0.03 < lo and hi < 0.16
    assert np.isnan(wilson_interval(0, 0)[0])
    r, lo, hi = ratio_ci(np.array([1, 2, 0, 3]), np.array([2, 2, 1, 3]))
    assert r == pytest.approx(6 / 8) and lo <= r <= hi
    assert np.isnan(ratio_ci(np.zeros(3), np.zeros(3))[0])


def _rows():
    rows = []
    for system, text in (("graph_token", TABLE1_BASELINE), ("g_retriever", TABLE1_G_RETRIEVER),
                         ("g_retriever", "An elephant.")):
        rows.append({"key": f"{system}/{len(rows)}", "dataset": "toy", "system": system, "correct": 1.0,
                     **{k: v for k, v in check_response(text, SCENE).items() if k != "citations"}})
    return pd.DataFrame(rows)


def test_summary_and_table5():
    s = summarize(_rows())
    g = s[(s.system == "g_retriever") & (s.level == "normalized")].iloc[0]
    assert g.responses == 2 and g["citing_%"] == 50.0
    assert g["fully_valid_%"] == 50.0 and g["fully_valid_citing_%"] == 100.0  # a response citing nothing is not valid
    b = s[(s.system == "graph_token") & (s.level == "exact")].iloc[0]
    assert b["valid_nodes_%"] == 50.0 and b["valid_edges_%"] == 0.0
    t = table5(s)
    assert list(t.metric) == ["Valid Nodes", "Valid Edges", "Fully Valid Graphs"]
    assert t.loc[2, "paper g_retriever"] == "62" and t.loc[2, "toy g_retriever"].startswith("50.0 [")
    with pytest.raises(ValueError, match=r"table5.level='bogus' is not one of \('exact', 'normalized', 'fuzzy'\)"):
        table5(s, level="bogus")  # it had given the paper's columns alone


def test_agreement_with_hand_labels():
    rows = _rows()
    labels = pd.DataFrame([
        {"key": rows.key[0], "cited_nodes": 2, "valid_nodes": 1, "cited_edges": 3, "valid_edges": 0,
         "fully_valid": False},
        {"key": rows.key[1], "cited_nodes": 1, "valid_nodes": 1, "cited_edges": 1, "valid_edges": 1,
         "fully_valid": True},
        {"key": "not/a/response", "cited_nodes": 0, "valid_nodes": 0, "cited_edges": 0, "valid_edges": 0,
         "fully_valid": False}])
    a = agreement(rows, labels).set_index("level")
    assert a.loc["normalized", "labelled"] == 3 and a.loc["normalized", "matched"] == 2
    assert a.loc["normalized", "fully_valid_agreement_%"] == 100.0 and a.loc["normalized", "cited_abs_diff"] == 0.0
    assert a.loc["exact", "fully_valid_agreement_%"] == 100.0


def test_evidence_points_at_the_cited_parts():
    index = CitationMatcher(SCENE)
    nodes, edges = index.evidence(parse_citations("Nodes:\n* elephant\n* deer\nEdges:\n* elephant -> bushes"))
    assert nodes == {0, 1} and edges == {0}


def test_label_template_and_loader(tmp_path):
    import json

    from gr_core.studies.hallucination import label_template, load_labels

    rows = _rows().assign(graph_id="g", question="q?", response=["a", "b", "c"])
    sample = label_template(rows, k=2)
    assert len(sample) == 2 and all(s["fully_valid"] is None for s in sample)
    assert sum(rows.set_index("key").loc[s["key"], "cited_nodes"] > 0 for s in sample) == 1
    good = {"key": "k", "cited_nodes": 1, "valid_nodes": 1, "cited_edges": 0, "valid_edges": 0, "fully_valid": True}
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps(good) + "\n\n" + json.dumps({**good, "valid_nodes": 2}) + "\n")
    with pytest.raises(ValueError, match=r"labels.jsonl:3: more valid than cited"):
        load_labels(path)
    path.write_text(json.dumps(good) + "\n{oops\n")
    with pytest.raises(ValueError, match=r"labels.jsonl:2: not JSON"):
        load_labels(path)
    path.write_text(json.dumps({**good, "fully_valid": None}) + "\n")
    with pytest.raises(ValueError, match=r"labels.jsonl:1: hand label lacks \['fully_valid'\]"):
        load_labels(path)
    path.write_text(json.dumps(good) + "\n")
    assert load_labels(path).key.tolist() == ["k"]
    # notebook 05's step: a fresh sample to label, and the agreement where labels exist
    from gr_core.studies.hallucination import check_against_labels

    out = tmp_path / "out"
    out.mkdir()
    assert check_against_labels(rows, out, tmp_path / "absent.jsonl", k=2) is None
    assert len((out / "to_label.jsonl").read_text().splitlines()) == 2 and not (out / "agreement.csv").exists()
    path.write_text(json.dumps({**good, "key": rows.key[0]}) + "\n")
    agree = check_against_labels(rows, out, path, k=2)
    assert agree.matched.tolist() == [1, 1, 1] and (out / "agreement.csv").is_file()


def test_an_echoed_textualized_graph_is_read_as_citations_and_hyphens_are_not_arrows():
    text = ("node_id,node_attr\n0,elephant\n5,lion\n\nsrc,edge_attr,dst\n0,in,1\n\n"
            "A well-known -> fact? no: Tom-Landry -> x")
    cites = parse_citations(text)
    assert ([(c.kind, c.node_id, c.head_id) for c in cites[:3]]
            == [("node", 0, None), ("node", 5, None), ("edge", None, 0)])
    r = check_response(text, SCENE)
    assert r["valid_nodes_exact"] == 1 and r["valid_edges_exact"] == 1
    assert all(c.relation != "Landry" for c in cites)
