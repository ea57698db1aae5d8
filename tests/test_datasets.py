"""The builders on the real raw files (no encoding), and their handling of bad input."""
import json

import pytest

from gr_core import datasets as D
from gr_core.data import GraphFormatError, load_split


@pytest.mark.data
def test_graphqa_split_reproduces_the_reference_explagraphs_split():
    assert D.graphqa_split(2766, seed=42) == load_split("explagraphs")


@pytest.fixture(scope="module")
def webqsp():
    return D.build_webqsp()


@pytest.mark.data
def test_webqsp_minigraphs_are_all_1628_questions_lowercased(webqsp):
    records, graphs, _, notes = webqsp
    assert len(records) == len(graphs) == 1628 and notes["empty_graphs"] == 0
    g = graphs[0]
    assert records[0].graph_id == "WebQTest-0" and records[0].q_entities == ["jamaica"]
    assert g.nodes.node_attr.tolist()[:2] == ["jamaica", "jamaican english"]
    assert g.edges.edge_attr.iloc[0] == "language.human_language.countries_spoken_in"  # relations keep case
    assert all(name == name.lower() for gr in graphs for name in gr.nodes.node_attr)


@pytest.mark.data
def test_webqsp_answer_coverage_matches_the_data_readme(webqsp):
    records, graphs, _, _ = webqsp
    covered = sum(bool(set(r.answers) & set(g.nodes.node_attr)) for r, g in zip(records, graphs))
    assert covered == 1540  # "an answer is in the graph for 1,540 of 1,628"


def test_webqsp_resplit_is_seeded_disjoint_and_6_2_2():
    split = D.graphqa_split(1628, seed=42)
    assert {k: len(v) for k, v in split.items()} == {"train": 976, "val": 326, "test": 326}
    assert len(set(split["train"]) | set(split["val"]) | set(split["test"])) == 1628
    assert D.graphqa_split(1628, seed=42) == split and D.graphqa_split(1628, seed=1) != split


@pytest.mark.data
def test_webqsp_full_subgraphs_are_retrieval_scale():
    records, graphs, _, _ = D.build_webqsp("full_subgraphs.jsonl")
    assert len(graphs) == 18
    assert sum(g.num_edges for g in graphs) / 18 == pytest.approx(4044.0)
    assert 1300 < sum(g.num_nodes for g in graphs) / 18 < 1500


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.data
def test_webqsp_bad_rows_are_named_by_file_and_line(tmp_path, monkeypatch):
    monkeypatch.setenv("GR_DATA_DIR", str(tmp_path))
    (tmp_path / "webqsp").mkdir()
    good = {"id": "q", "question": "?", "answer": ["A"], "q_entity": ["E"], "graph": [["E", "r", "A"]]}
    _write_jsonl(tmp_path / "webqsp" / "minigraphs.jsonl", [good, {**good, "id": "q2", "graph": [["E", "r"]]}])
    with pytest.raises(GraphFormatError, match=r"minigraphs.jsonl:2: field 'graph', triple 0"):
        D.build_webqsp()
    (tmp_path / "webqsp" / "minigraphs.jsonl").write_text(json.dumps(good) + "\n{not json\n")
    with pytest.raises(GraphFormatError, match=r"minigraphs.jsonl:2: not valid JSON"):
        D.build_webqsp()
    _write_jsonl(tmp_path / "webqsp" / "minigraphs.jsonl", [{k: v for k, v in good.items() if k != "q_entity"}])
    with pytest.raises(GraphFormatError, match=r"minigraphs.jsonl:1: field 'q_entity' is None, expected a list"):
        D.build_webqsp()
    # a string where a list belongs (it would read as one answer per letter), a repeated id (its graph would be the
    # first one's), a bad byte, and a blank line, which the line numbers count
    bad = [({**good, "id": "q2", "answer": "A"}, r":2: field 'answer' is 'A', expected a list of one or more"),
           ({**good, "id": "q2", "answer": []}, r":2: field 'answer' is \[\], expected a list of one or more non-"),
           (good, r":2: field 'id' 'q' repeats line 1")]
    for row, message in bad:
        _write_jsonl(tmp_path / "webqsp" / "minigraphs.jsonl", [good, row])
        with pytest.raises(GraphFormatError, match=message):
            D.build_webqsp()
    (tmp_path / "webqsp" / "minigraphs.jsonl").write_bytes(json.dumps(good).encode() + b"\n\n{\"id\": \"\xff\"}\n")
    with pytest.raises(GraphFormatError, match=r"minigraphs.jsonl:3: byte 0xff is not UTF-8 text"):
        D.build_webqsp()


@pytest.mark.data
def test_webqsp_empty_graphs_duplicates_self_loops_and_nan_names_are_kept_and_counted(tmp_path, monkeypatch):
    # Documented handling: an empty graph stays empty (retrieval returns it whole) and is counted;
    # repeated triples stay multi-edges and self-loops stay (as the GR code keeps them);
    # names like "nan" or "None" stay strings (the reference's pandas round trip loses them).
    monkeypatch.setenv("GR_DATA_DIR", str(tmp_path))
    (tmp_path / "webqsp").mkdir()
    rows = [{"id": "a", "question": "?", "answer": ["NaN"], "q_entity": ["None"],
             "graph": [["None", "r", "NaN"], ["None", "r", "NaN"], ["null", "self", "null"]]},
            {"id": "b", "question": "?", "answer": ["x"], "q_entity": ["y"], "graph": []}]
    _write_jsonl(tmp_path / "webqsp" / "minigraphs.jsonl", rows)
    records, graphs, _, notes = D.build_webqsp()
    assert notes["empty_graphs"] == 1 and graphs[1].num_nodes == 0
    assert graphs[0].nodes.node_attr.tolist() == ["none", "nan", "null"]
    assert graphs[0].edges.values.tolist() == [[0, "r", 1], [0, "r", 1], [2, "self", 2]]
    assert records[0].answers == ["nan"]


@pytest.fixture(scope="module")
def metaqa_kb():
    return D.load_metaqa_kb()


@pytest.mark.data
def test_metaqa_kb_has_the_published_size(metaqa_kb):
    assert (metaqa_kb.num_edges, metaqa_kb.num_entities, len(metaqa_kb.relations)) == (133582, 43234, 9)


@pytest.mark.data
def test_metaqa_questions_link_the_bracketed_topic_exactly(metaqa_kb):
    from gr_core.paths import data_file

    records, notes = D.read_metaqa_questions(data_file("metaqa", "1-hop", "qa_dev.txt"), metaqa_kb)
    assert len(records) == 9992 and notes == {"unknown_topic_skipped": 0, "answers_not_in_kb": 0}
    first = records[0]
    assert first.question == "what movies did Temuera Morrison act in"
    assert (first.q_entities == ["Temuera Morrison"]
            and first.answers == ["Once Were Warriors", "Tracker", "River Queen"])
    assert first.extra["qtype"] == "actor_to_movie"


@pytest.mark.data
def test_metaqa_split_trains_on_dev_and_tests_on_official_test():
    records, _, _, notes = D.build_metaqa(hops=2)
    split = notes["split"]
    assert len(split["test"]) == 14872 and len(split["train"]) + len(split["val"]) == 14872
    assert len(split["val"]) == 1487 and not set(split["train"]) & set(split["val"])
    assert all(records[i].graph_id.startswith("2-hop/qa_test") for i in split["test"])
    assert sorted(split["test"]) == list(range(14872, 2 * 14872))


@pytest.mark.data
def test_metaqa_first_questions_of_every_split_mix_question_types():
    """The files are grouped by type: the first 326 questions in file order are all actor_to_movie (1-hop)."""
    records, _, _, notes = D.build_metaqa(hops=1)
    for name, idx in notes["split"].items():
        types = {records[i].extra["qtype"] for i in idx[:326]}
        assert len(types) >= 8, (name, types)  # MetaQA 1-hop has 13 types


@pytest.mark.data
def test_metaqa_unknown_topic_entity_is_named_or_skipped_and_counted(metaqa_kb, tmp_path):
    path = tmp_path / "qa_dev.txt"
    path.write_text("who directed [Kismet]\tWilliam Dieterle\nwho directed [No Such Film]\tX\n")
    with pytest.raises(GraphFormatError,
                       match=r"qa_dev.txt:2: topic entity \[No Such Film\] is not in the knowledge base"):
        D.read_metaqa_questions(path, metaqa_kb)
    records, notes = D.read_metaqa_questions(path, metaqa_kb, on_unknown="skip")
    assert len(records) == 1 and notes["unknown_topic_skipped"] == 1


@pytest.mark.data
def test_metaqa_malformed_lines_are_named(tmp_path, metaqa_kb):
    kb = tmp_path / "kb.txt"
    kb.write_text("a|r|b\na|r\n")
    with pytest.raises(GraphFormatError, match=r"kb.txt:2: expected 'subject\|relation\|object'"):
        D.load_metaqa_kb(kb)
    qa = tmp_path / "qa.txt"
    qa.write_text("no topic here\tX\n")
    with pytest.raises(GraphFormatError, match=r"qa.txt:1: field 'question' has no \[topic entity\]"):
        D.read_metaqa_questions(qa, metaqa_kb)
    qa.write_text("who directed [Forrest Gump]\tRobert Zemeckis|\n")
    with pytest.raises(GraphFormatError, match=r"qa.txt:1: field 'answers' has an empty answer"):
        D.read_metaqa_questions(qa, metaqa_kb)
    qa.write_text("who directed [Forrest Gump]\tRobert Zemeckis\n" * 2)
    (tmp_path / "qa_qtype.txt").write_text("movie_to_director\n")  # a type file one line short: every type shifted
    with pytest.raises(GraphFormatError, match=r"qa_qtype.txt: 1 lines, qa.txt 2; the two must be line-aligned"):
        D.read_metaqa_questions(qa, metaqa_kb)


@pytest.mark.data
def test_explagraphs_rows_and_split_files_are_checked(tmp_path, monkeypatch):
    from gr_core.data import load_explagraphs, load_split

    tsv = tmp_path / "train_dev.tsv"
    head = "arg1\targ2\tlabel\tgraph\n"
    for row, message in (("a\tb\tsuport\t(x; r; y)", r":2: field 'label' is 'suport'"),
                         ("a\tb\tsupport\t(x; r; y)(money; cre", r":2: field 'graph': text outside"),
                         ("a\tb\tsupport", r":2: 3 tab-separated fields, the header has 4")):
        tsv.write_text(head + row + "\n")
        with pytest.raises(GraphFormatError, match=message):
            load_explagraphs(tsv)
    monkeypatch.setenv("GR_DATA_DIR", str(tmp_path))
    (tmp_path / "explagraphs" / "split").mkdir(parents=True)
    for name, rows in (("train", "0 1 1"), ("val", "2"), ("test", "3")):
        (tmp_path / "explagraphs" / "split" / f"{name}_indices.txt").write_text(rows)
    with pytest.raises(GraphFormatError, match=r"train_indices.txt: index 3 \(1\) is repeated \(first as index 2\)"):
        load_split("explagraphs")
    (tmp_path / "explagraphs" / "split" / "train_indices.txt").write_text("0 1 3")
    with pytest.raises(GraphFormatError, match=r"row\(s\) \[3\] in both train and test"):
        load_split("explagraphs")


@pytest.mark.data
def test_gqa_micro_reads_the_real_scene_graph_format():
    records, graphs, _, notes = D.build_gqa()
    assert len(records) == 33 and notes["scenes"] == 14
    g = (graphs[[r.graph_id for r in records].index("2331146")] if "2331146" in [r.graph_id for r in records]
         else graphs[0])
    assert g.nodes.node_attr.str.match(r"^name: [^;]+(; attribute: [^;]+)?; \(x,y,w,h\): \(\d+, \d+, \d+, \d+\)$").all()
    split = notes["split"]
    images = {k: {records[i].graph_id for i in v} for k, v in split.items()}
    assert not (images["train"] & images["val"] or images["train"] & images["test"] or images["val"] & images["test"])


def test_gqa_node_text_matches_the_reference_format():
    obj = {"name": "zebra", "x": 10, "y": 88, "w": 234, "h": 189, "attributes": ["black", "white"]}
    assert D.gqa_node_text(obj) == "name: zebra; attribute: black, white; (x,y,w,h): (10, 88, 234, 189)"
    assert D.gqa_node_text({**obj, "attributes": []}) == "name: zebra; (x,y,w,h): (10, 88, 234, 189)"


def test_clevr_relationships_name_objects_of_their_scene():
    scene = {"objects": [{"shape": "cube", "size": "large", "color": "red", "material": "rubber",
                          "pixel_coords": [1, 2, 3]}]}
    assert len(D.clevr_scene_graph({**scene, "relationships": {"left": [[]]}}, "s").edges) == 0
    with pytest.raises(GraphFormatError, match=r"s: relationships 'left'\[0\] = \[9\] names no object of 1"):
        D.clevr_scene_graph({**scene, "relationships": {"left": [[9]]}}, "s")
    with pytest.raises(GraphFormatError, match=r"unknown key\(s\) \['lefft'\]"):
        D.clevr_scene_graph({**scene, "relationships": {"lefft": [[]]}}, "s")


def test_gqa_relation_to_a_missing_object_is_named():
    scene = {"objects": {"1": {"name": "a", "x": 0, "y": 0, "w": 1, "h": 1,
                               "relations": [{"name": "on", "object": "9"}]}}}
    with pytest.raises(GraphFormatError,
                       match="scene.json: image 7: object 1 relation 'on' points to unknown object '9'"):
        D.gqa_scene_graph(scene, "scene.json: image 7")


@pytest.mark.data
def test_clevr_pairs_split_by_image_with_official_val_as_test():
    records, graphs, _, notes = D.build_clevr()
    split = notes["split"]
    assert len(records) == 850 and {k: len(v) for k, v in split.items()} == {"train": 459, "val": 131, "test": 260}
    train_images = {records[i].graph_id for i in split["train"]}
    assert not train_images & {records[i].graph_id for i in split["val"]}
    assert {a for r in records for a in r.answers} >= {"yes", "no", "0", "cube"}
    g = graphs[0]
    n = g.num_nodes
    assert g.num_edges == 2 * n * (n - 1)  # left/right and front/behind for every ordered pair
    assert g.nodes.node_attr.iloc[0].startswith("name: ")


def test_full_gqa_reads_the_official_files_and_skips_questions_without_a_scene(tmp_path, monkeypatch):
    """The official layout: {train,val}_sceneGraphs.json (image -> scene) and {train,val}_balanced_questions.json
    (question id -> question); a question on an image with no scene graph is counted, not an error."""
    from gr_core.graphqa import DatasetConfig, cache_key
    from gr_core.paths import papers_data_here

    monkeypatch.setenv("GR_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("GR_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "gqa").mkdir()
    obj = {"x": 1, "y": 2, "w": 3, "h": 4, "attributes": []}
    scenes = {"train": {"1": {"width": 9, "height": 9, "objects": {
                  "10": {**obj, "name": "cup", "relations": [{"name": "on", "object": "11"}]},
                  "11": {**obj, "name": "table", "attributes": ["wooden"], "relations": []}}}},
              "val": {"2": {"width": 9, "height": 9, "objects": {"20": {**obj, "name": "dog", "relations": []}}}}}
    questions = {"train": {"q1": {"imageId": "1", "question": "What is on the table?", "answer": "cup",
                                  "fullAnswer": "The cup is on the table.", "types": {}},
                           "q2": {"imageId": "3", "question": "Is it sunny?", "answer": "yes"}},
                 "val": {"q3": {"imageId": "2", "question": "What animal is this?", "answer": "dog"}}}
    assert not papers_data_here("gqa")
    for split in ("train", "val"):
        (tmp_path / "gqa" / f"{split}_sceneGraphs.json").write_text(json.dumps(scenes[split]))
        (tmp_path / "gqa" / f"{split}_balanced_questions.json").write_text(json.dumps(questions[split]))
    assert papers_data_here("gqa") and cache_key(DatasetConfig("gqa"))
    records, graphs, _, notes = D.build_gqa_full()
    assert [r.extra["q_id"] for r in records] == ["q1", "q3"] and notes["no_scene_skipped"] == 1
    assert notes["scenes"] == 2 and {k: len(v) for k, v in notes["split"].items()} == {"train": 2, "val": 0, "test": 0}
    g = graphs[0]
    assert g.nodes.node_attr.tolist() == ["name: cup; (x,y,w,h): (1, 2, 3, 4)",
                                          "name: table; attribute: wooden; (x,y,w,h): (1, 2, 3, 4)"]
    assert g.edges.values.tolist() == [[0, "on", 1]] and records[0].extra["full_answer"] == "The cup is on the table."
    assert len(D.build_gqa_full(sample=1)[0]) == 1 and len(D.build_gqa_full(max_questions=1)[0]) == 1
    del questions["val"]["q3"]["answer"]
    (tmp_path / "gqa" / "val_balanced_questions.json").write_text(json.dumps(questions["val"]))
    with pytest.raises(GraphFormatError,
                       match=r"val_balanced_questions.json: question q3: missing field\(s\) \['answer'\]"):
        D.build_gqa_full()
