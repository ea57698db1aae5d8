"""RoG-webqsp / RoG-cwq read from parquet shards written here in the hub's own format and layout."""
import json
import os
import pickle

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gr_core import rog
from gr_core.data import GraphFormatError
from gr_core.graphqa import DatasetConfig, cache_key, dataset_source, load_dataset, retrieve
from gr_core.paths import DataNotFoundError, papers_data_here

SCHEMA = pa.schema([("id", pa.string()), ("question", pa.string()), ("answer", pa.list_(pa.string())),
                    ("q_entity", pa.list_(pa.string())), ("a_entity", pa.list_(pa.string())),
                    ("graph", pa.list_(pa.list_(pa.string()))), ("choices", pa.list_(pa.string()))])
HEX = "0123456789abcdef"


def write_shard(path, rows, schema=SCHEMA, row_group_size=2):
    """``rows`` (dicts with id, question, answer, q_entity, graph) as one hub shard; small row groups so that
    reading streams across them."""
    rows = [{"a_entity": r["answer"], "choices": [], **r} for r in rows]
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path, row_group_size=row_group_size)


def write_rog(folder, rows, counts=(("train", 2), ("validation", 1), ("test", 2))):
    """Split ``rows`` in order over hub-named shards ``<split>-NNNNN-of-NNNNN-<hex>.parquet``, about evenly."""
    files = [f"{split}-{k:05d}-of-{n:05d}-{HEX}.parquet" for split, n in counts for k in range(n)]
    bounds = np.linspace(0, len(rows), len(files) + 1).round().astype(int)
    for name, a, b in zip(files, bounds[:-1], bounds[1:]):
        write_shard(folder / name, rows[a:b])
    return files


def toy_rows(n=10):
    """``n`` small questions: A -r-> B chains with a repeated triple and mixed case (lowercased into one node)."""
    return [{"id": f"WebQTest-{i}", "question": f"what does entity {i} lead to?", "answer": [f"B{i}"],
             "q_entity": [f"A{i}"],
             "graph": [[f"A{i}", "people.person.sibling", f"B{i}"], [f"B{i}", "location.location.contains", "C"],
                       [f"a{i}", "people.person.sibling", f"b{i}"], [" C ", "common.topic.notable_for", "D"]]}
            for i in range(n)]


@pytest.fixture
def rog_data(tmp_path, monkeypatch):
    """An empty data folder, a private cache and an empty hub cache: nothing of the machine's leaks in."""
    monkeypatch.setenv("GR_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("GR_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    (tmp_path / "data").mkdir()
    return tmp_path / "data" / "rog" / "webqsp" / "data"


def test_splits_come_from_the_shard_names_and_graphs_are_numbered_by_first_appearance(rog_data):
    write_rog(rog_data, toy_rows(10))
    records, graphs, _, notes = rog.build_rog("webqsp", batch_size=3)
    assert {k: len(v) for k, v in notes["split"].items()} == {"train": 4, "val": 2, "test": 4}
    assert notes["shards"]["val"] == [f"validation-00000-of-00001-{HEX}.parquet"]
    g = graphs[3]
    assert g.nodes.node_attr.tolist() == ["a3", "b3", "c", "d"]  # lowercased and stripped: "A3" and "a3" one node
    assert g.edges.values.tolist() == [[0, "people.person.sibling", 1], [1, "location.location.contains", 2],
                                       [0, "people.person.sibling", 1], [2, "common.topic.notable_for", 3]]
    assert records[3].answers == ["b3"] and records[3].q_entities == ["a3"] and records[3].graph_id == "WebQTest-3"
    assert len(graphs.texts) == len(set(graphs.texts)) and graphs.referenced == 10 * (4 + 4)


def test_max_questions_keeps_the_first_of_each_split_and_opens_no_later_shard(rog_data):
    write_rog(rog_data, toy_rows(10))
    (rog_data / f"train-00001-of-00002-{HEX}.parquet").write_bytes(b"not parquet")  # reading it would fail
    records, graphs, _, notes = rog.build_rog("webqsp", max_questions=1)
    assert notes["split"] == {"train": [0], "val": [1], "test": [2]} and len(graphs) == 3
    assert [r.graph_id for r in records] == ["WebQTest-0", "WebQTest-4", "WebQTest-6"]
    with pytest.raises(Exception, match="arquet"):
        rog.build_rog("webqsp")


def test_a_missing_column_is_named_with_its_file(rog_data):
    write_rog(rog_data, toy_rows(5))
    bad = rog_data / f"test-00001-of-00002-{HEX}.parquet"
    table = pq.read_table(bad).drop_columns(["q_entity"])
    pq.write_table(table, bad)
    with pytest.raises(GraphFormatError,
                       match=rf"test-00001-of-00002-{HEX}.parquet: missing column\(s\) \['q_entity'\]"):
        rog.build_rog("webqsp")
    bad.write_bytes(bad.read_bytes()[:100])  # a download cut short: Arrow's own error names no file
    with pytest.raises(GraphFormatError, match=rf"{HEX}.parquet: not a readable parquet file"):
        rog.build_rog("webqsp")


def test_a_triple_that_is_not_three_strings_is_named_by_file_row_and_field(rog_data):
    rows = toy_rows(3)
    rows[1]["graph"][2] = ["A1", "people.person.sibling"]
    write_shard(rog_data / f"train-00000-of-00001-{HEX}.parquet", rows)
    for split in ("validation", "test"):
        write_shard(rog_data / f"{split}-00000-of-00001-{HEX}.parquet", toy_rows(1))
    with pytest.raises(GraphFormatError, match=r"train-00000-of-00001-0123456789abcdef.parquet: row 1 \(id "
                                               r"'WebQTest-1'\): field 'graph', triple 2 is \['A1', 'people"):
        rog.build_rog("webqsp")
    rows[1]["graph"][2] = ["A1", None, "B1"]
    write_shard(rog_data / f"train-00000-of-00001-{HEX}.parquet", rows)
    with pytest.raises(GraphFormatError, match=r"row 1 \(id 'WebQTest-1'\): field 'graph', triple 2 is \['A1', None"):
        rog.build_rog("webqsp")


def test_absent_or_incomplete_shards_name_the_folder_and_the_fetch_command(rog_data):
    assert not papers_data_here("rog_webqsp") and not papers_data_here("rog_cwq")
    with pytest.raises(DataNotFoundError, match=r"rog/cwq/data nor in the Hugging Face cache .*hub/datasets--rmanluo"
                                                r"--RoG-cwq/snapshots.*\./gr data --fetch .* --papers"):
        load_dataset("rog_cwq")
    write_rog(rog_data, toy_rows(5))
    assert papers_data_here("rog_webqsp")
    (rog_data / f"train-00001-of-00002-{HEX}.parquet").unlink()  # an unfinished download: present, and named
    assert papers_data_here("rog_webqsp")
    with pytest.raises(DataNotFoundError, match=r"split 'train' has shards \[0\] of \[2\] \(missing \[1\]\)"):
        rog.find_shards("webqsp")


def test_a_hugging_face_hub_cache_snapshot_is_found_when_the_data_folder_has_none(rog_data, tmp_path):
    repo = tmp_path / "hub" / "datasets--rmanluo--RoG-webqsp"
    write_rog(repo / "snapshots" / "1111" / "data", toy_rows(5))
    write_rog(repo / "snapshots" / "2222" / "data", toy_rows(6))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("1111")
    assert rog.shard_folder("webqsp") == repo / "snapshots" / "1111" / "data"  # the revision main names
    records, *_ = rog.build_rog("webqsp")
    assert len(records) == 5 and papers_data_here("rog_webqsp")
    write_rog(rog_data, toy_rows(3))
    assert rog.shard_folder("webqsp") == rog_data  # the data folder first


def test_the_cache_key_follows_the_shards_bytes(rog_data):
    files = write_rog(rog_data, toy_rows(5))
    base = cache_key(DatasetConfig("rog_webqsp"))
    assert cache_key(DatasetConfig("rog_webqsp")) == base
    assert cache_key(DatasetConfig("rog_webqsp", max_questions=2)) != base
    rows = toy_rows(5)
    rows[-1]["question"] = "changed?"
    write_shard(rog_data / files[-1], rows[-1:])
    assert cache_key(DatasetConfig("rog_webqsp")) != base
    memo = json.loads((rog_data.parents[3] / "cache" / "datasets" / "sha256.json").read_text())
    assert len(memo) == 5  # hashed once per file and version, remembered across processes


def test_a_rog_dataset_caches_small_and_retrieves_with_pcst(rog_data):
    write_rog(rog_data, toy_rows(5))
    ds = load_dataset("rog_webqsp", max_questions=1)
    assert ds.meta["source"] == dataset_source("rog_webqsp") == "RoG-webqsp, 2-hop graphs (rmanluo/RoG-webqsp)"
    assert ds.meta["questions"] == 3 and ds.meta["edges"] == 12 and ds.meta["dedup_factor"] > 1
    assert os.path.getsize(ds.meta["cache"]["file"]) < 20_000  # arrays and texts, no frames, no empty vectors
    sub = retrieve(ds, 0)
    g = ds.graph(0)
    assert 0 < len(sub.node_rows) <= g.num_nodes and g.question == ds.records[0].question
    again = load_dataset("rog_webqsp", max_questions=1)
    assert again.meta["cache"]["hit"] and again.split == ds.split
    pd.testing.assert_frame_equal(again.graph(0).edges, g.edges)
    emb = pickle.loads(pickle.dumps(ds.text_emb))  # encoded rows survive the compact pickle
    np.testing.assert_array_equal(emb._done, ds.text_emb._done)
    np.testing.assert_array_equal(emb._rows[emb._done], ds.text_emb._rows[ds.text_emb._done])


@pytest.mark.data
def test_each_graph_equals_build_webqsp_on_the_18_full_rog_rows(rog_data, monkeypatch):
    from gr_core.datasets import build_webqsp
    from gr_core.paths import data_root

    monkeypatch.delenv("GR_DATA_DIR")  # the shared folder, for the rows and build_webqsp's graphs of them
    shared = data_root()
    rows = [json.loads(line) for line in (shared / "webqsp" / "full_subgraphs.jsonl").read_text().splitlines()]
    ref_records, ref_graphs, _, _ = build_webqsp("full_subgraphs.jsonl")
    monkeypatch.setenv("GR_DATA_DIR", str(rog_data.parents[2]))
    write_rog(rog_data, rows)
    records, graphs, _, notes = rog.build_rog("webqsp", batch_size=3)
    assert {k: len(v) for k, v in notes["split"].items()} == {"train": 7, "val": 4, "test": 7}
    for rec, ref, g, ref_g in zip(records, ref_records, graphs, ref_graphs):
        assert (rec.question, rec.answers, rec.graph_id, rec.q_entities) == \
               (ref.question, ref.answers, ref.graph_id, ref.q_entities)
        pd.testing.assert_frame_equal(g.nodes, ref_g.nodes)
        pd.testing.assert_frame_equal(g.edges, ref_g.edges)


# ---------------------------------------------------------------- the full preset on the papers' data
def full_rog_rows():
    from gr_core.paths import data_file

    rows = [json.loads(line) for line in open(data_file("webqsp", "full_subgraphs.jsonl"), encoding="utf-8")]
    return [{k: r[k] for k in ("id", "question", "answer", "q_entity", "graph")} for r in rows]


@pytest.fixture
def papers_data_folder(tmp_path, monkeypatch):
    """A data folder with the shared files (linked) and RoG-webqsp shards written from the 18 full RoG rows."""
    from gr_core.paths import data_root

    shared = data_root()
    folder = tmp_path / "data"
    folder.mkdir()
    for entry in shared.iterdir():
        (folder / entry.name).symlink_to(entry)
    write_rog(folder / "rog" / "webqsp" / "data", full_rog_rows(),
              counts=(("train", 2), ("validation", 1), ("test", 1)))
    monkeypatch.setenv("GR_DATA_DIR", str(folder))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    return folder


@pytest.mark.data
def test_the_full_preset_names_the_papers_data_where_it_is_here_and_its_stand_ins_where_not(papers_data_folder,
                                                                                          monkeypatch):
    from gr_core.config import notebook_parameters, papers_data_notes

    p4, p3 = notebook_parameters("full", "04_gnn_rag"), notebook_parameters("full", "03_training")
    assert p4["datasets"] == ["rog_webqsp", "metaqa"]  # RoG-cwq absent: its rows left out
    assert "rog_webqsp" in p3["plan"] and "gqa" not in p3["plan"] and "webqsp" not in p3["plan"]
    notes = papers_data_notes("full")
    assert notes[0].startswith("rog_webqsp: RoG-webqsp") and "rog_cwq: absent" in notes[1]
    assert "./gr data --fetch DIR --papers rog_cwq" in notes[1]
    # without the shards: the offline stand-in under the same parameters, and the other presets untouched
    monkeypatch.setenv("GR_DATA_DIR", str(papers_data_folder.parent / "elsewhere"))
    (papers_data_folder.parent / "elsewhere").mkdir()
    assert notebook_parameters("full", "04_gnn_rag")["datasets"] == ["webqsp", "metaqa"]
    assert notebook_parameters("full", "07_ablations")["ablation_dataset"] == "webqsp"
    assert notebook_parameters("quick", "04_gnn_rag")["datasets"] == ["webqsp", "metaqa"]
    with pytest.raises(ValueError, match=r"names \['rog_webqsp'\], absent here: ./gr data --fetch DIR --papers"):
        notebook_parameters("full", "04_gnn_rag", {"datasets": ["rog_webqsp"]})  # asked for by name: never swapped


def test_dataset_names_are_swapped_in_values_lists_and_keys():
    from gr_core.config import _with_datasets

    names = {"rog_webqsp": "webqsp", "rog_cwq": None}
    value = {"plan": {"rog_webqsp": ["g_retriever"], "rog_cwq": ["lora"], "explagraphs": ["lora"]},
             "by_key": {"rog_webqsp/g_retriever": {"num_epochs": 1}}, "datasets": ["rog_webqsp", "rog_cwq", "metaqa"],
             "ablation_dataset": "rog_webqsp", "questions": ["rog_webqsp is not a name here?"], "n": 3}
    assert _with_datasets(value, names) == {
        "plan": {"webqsp": ["g_retriever"], "explagraphs": ["lora"]},
        "by_key": {"webqsp/g_retriever": {"num_epochs": 1}},
        "datasets": ["webqsp", "metaqa"], "ablation_dataset": "webqsp", "questions": ["rog_webqsp is not a name here?"],
        "n": 3}
    with pytest.raises(ValueError, match="both become 'webqsp'"):
        _with_datasets({"rog_webqsp": 1, "webqsp": 2}, names)


@pytest.mark.slow
@pytest.mark.data
def test_rog_shards_train_through_the_full_presets_notebooks(papers_data_folder, tmp_path):
    """Notebooks 03 (G-Retriever) and 04 (the GNN reasoner and the LLM half) on RoG-webqsp shards in the published
    format, with the full preset's dataset names, at the smoke preset's sizes, through the suite as a user runs it."""
    import subprocess
    import sys

    from gr_core.config import notebook_parameters, repo_root

    datasets = [d for d in notebook_parameters("full", "04_gnn_rag")["datasets"] if d != "metaqa"]
    assert datasets == ["rog_webqsp"]
    env = {**os.environ, "GR_OUTPUTS_DIR": str(tmp_path / "out"), "OMP_NUM_THREADS": "1"}
    res = subprocess.run([sys.executable, "-m", "gr_core.suite", "--preset", "smoke", "--only", "03", "04",
                          "-p", 'plan={"rog_webqsp": ["zero_shot", "g_retriever"]}',
                          "-p", f"datasets={json.dumps(datasets)}"],
                         cwd=repo_root(), env=env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    out = tmp_path / "out" / "smoke"
    t3 = pd.read_csv(out / "03_training" / "table3.csv")
    assert set(t3.dataset) == {"rog_webqsp"} and set(t3.method) == {"zero_shot", "g_retriever"}
    assert (t3.paper_mean.notna()).all()  # compared with GR Table 3's WebQSP column
    gnn = pd.read_csv(out / "04_gnn_rag" / "gnn_only.csv")
    assert gnn.dataset.tolist() == ["rog_webqsp"] and gnn.n.iloc[0] > 0 and gnn["paper H@1"].iloc[0] == 76.4
    rows = pd.read_csv(out / "04_gnn_rag" / "retrievers.csv")
    assert set(rows.dataset) == {"rog_webqsp"}
    assert rows.set_index("retriever").loc["gnn", "paper Hit"] == 85.7  # GNN-RAG Table 2's WebQSP row
