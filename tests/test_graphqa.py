"""Cached, deduplicated datasets: built once per config and raw data, rebuilt when either changes."""
import shutil
from pathlib import Path

import numpy as np
import pytest

from gr_core.graphqa import DatasetConfig, cache_key, describe, load_dataset
from gr_core.paths import data_root
from gr_core.text_encoder import EmbeddingStore


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GR_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.data
def test_second_load_is_a_cache_hit_with_identical_embeddings(private_cache):
    first = load_dataset("gqa_micro")
    second = load_dataset("gqa_micro")
    assert first.meta["cache"]["hit"] is False and second.meta["cache"]["hit"] is True
    np.testing.assert_array_equal(first.text_emb, second.text_emb)
    assert load_dataset("gqa_micro") is second  # unpickled once per process and state of the file
    rebuilt = load_dataset("gqa_micro", force=True)
    third = load_dataset("gqa_micro")  # the file was rewritten: read again
    assert third is not second and third is not rebuilt and third.meta["cache"]["hit"] is True


@pytest.mark.data
def test_truncated_cache_file_is_detected_and_rebuilt(private_cache):
    load_dataset("gqa_micro")
    ds = load_dataset("gqa_micro")  # read from the file: the process keeps it
    assert ds.meta["cache"]["hit"] is True
    blob = ds.meta["cache"]["file"]
    with open(blob, "r+b") as fh:
        fh.truncate(100)
    again = load_dataset("gqa_micro")
    assert again.meta["cache"]["hit"] is False and len(again) == 33
    manifest = Path(again.meta["cache"]["file"]).with_suffix(".json")  # its manifest cut short: a miss too
    manifest.write_text(manifest.read_text()[:40])
    assert load_dataset("gqa_micro").meta["cache"]["hit"] is False  # it had raised a bare JSONDecodeError
    from gr_core.runs import read_json  # noqa: PLC0415

    manifest.write_text("{")
    with pytest.raises(ValueError, match=f"{manifest}: not valid JSON"):  # every JSON file read says which it is
        read_json(manifest)


@pytest.mark.data
def test_changed_config_or_raw_file_changes_the_cache_key(tmp_path, monkeypatch):
    base = cache_key(DatasetConfig("gqa_micro"))
    assert cache_key(DatasetConfig("gqa_micro", split_seed=1)) != base
    copy = tmp_path / "data"
    shutil.copytree(data_root() / "scene_graphs" / "gqa_micro", copy / "scene_graphs" / "gqa_micro")
    monkeypatch.setenv("GR_DATA_DIR", str(copy))
    assert cache_key(DatasetConfig("gqa_micro")) == base
    with open(copy / "scene_graphs" / "gqa_micro" / "questions.csv", "a") as fh:
        fh.write("\n")
    assert cache_key(DatasetConfig("gqa_micro")) != base


@pytest.mark.data
def test_each_distinct_text_is_encoded_once_and_rows_match(private_cache):
    ds = load_dataset("gqa_micro")
    assert ds.meta["texts_encoded"] == len(set(ds.texts)) == len(ds.texts) < ds.meta["texts_referenced"]
    x, edge_attr = ds.embeddings(0)
    g = ds.graph(0)
    assert x.shape == (g.num_nodes, 384) and edge_attr.shape == (g.num_edges, 384)
    row = ds.texts.index(g.nodes.node_attr.iloc[0])
    np.testing.assert_array_equal(x[0], ds.text_emb[row])


def test_embedding_store_is_shared_across_datasets_and_survives_a_truncated_shard(private_cache):
    store = EmbeddingStore()
    emb, new = store.encode(["alpha", "beta"])
    assert new == 2 and emb.shape == (2, 384)
    again, new = EmbeddingStore().encode(["beta", "gamma"])
    assert new == 1
    np.testing.assert_array_equal(again[0], emb[1])
    for shard in store.folder.glob("shard-*.pkl"):
        shard.write_bytes(shard.read_bytes()[:50])
    _, new = EmbeddingStore().encode(["alpha", "beta", "gamma"])
    assert new == 3


@pytest.mark.data
def test_metaqa_subset_cuts_neighbourhoods_from_the_kb_with_answers_inside(private_cache):
    ds = load_dataset(DatasetConfig("metaqa", hops=1, max_questions=4))
    assert len(ds) == 12
    g = ds.graph(0)
    assert set(ds.records[0].answers) <= set(g.nodes.node_attr)
    x, edge_attr = ds.embeddings(0, g)
    assert x.shape == (g.num_nodes, 384) and edge_attr.shape == (g.num_edges, 384)
    data = ds.to_pyg(0)
    assert data.num_nodes == g.num_nodes and data.edge_index.shape == (2, g.num_edges)
    stats = describe(ds)
    assert stats["coverage_any"] == 1.0 and stats["questions"] == 12


@pytest.mark.data
def test_describe_reports_table_2_statistics_without_coverage_for_classification(private_cache):
    ds = load_dataset(DatasetConfig("explagraphs", max_questions=10))
    stats = describe(ds)
    assert stats["questions"] == 30 and stats["coverage_any"] is None
    assert 3 <= stats["mean_nodes"] <= 9


def test_unknown_dataset_name_is_rejected():
    with pytest.raises(ValueError, match="DatasetConfig.name='webqsp2'"):
        DatasetConfig("webqsp2")


def test_missing_raw_file_is_named(tmp_path, monkeypatch):
    from gr_core.paths import DataNotFoundError

    (tmp_path / "scene_graphs" / "gqa_micro").mkdir(parents=True)
    (tmp_path / "scene_graphs" / "gqa_micro" / "questions.csv").write_text(
        "q_id,image_id,question,answer,full_answer\n")
    monkeypatch.setenv("GR_DATA_DIR", str(tmp_path))
    with pytest.raises(DataNotFoundError, match="train_sceneGraphs.json needed by dataset 'gqa_micro'"):
        load_dataset("gqa_micro")


def test_embeddings_are_encoded_on_first_use_and_equal_the_encoders(private_cache):
    import pickle

    from gr_core.config import EMBEDDED_TEXT_ENCODER, TextEncoderConfig
    from gr_core.graphqa import LazyEmbeddings
    from gr_core.text_encoder import load_text_encoder

    q = LazyEmbeddings(["who directed Big?", "what films did Tom Hanks star in?", "when was Heat released?"],
                       384, EMBEDDED_TEXT_ENCODER)
    assert not q._done.any()  # nothing encoded when built
    row = q[1]
    assert q._done.tolist() == [False, True, False] and row.shape == (384,)
    q.prefetch([0, 2])
    encoder = load_text_encoder(TextEncoderConfig(model=EMBEDDED_TEXT_ENCODER))
    direct = encoder.encode(q.texts, normalize_embeddings=True)
    assert np.allclose(np.asarray(q), direct, atol=1e-5) and q.shape == (3, 384)
    assert pickle.loads(pickle.dumps(q))._done.all()  # the store is not pickled, the vectors are


def test_scoring_a_lazy_table_whole_encodes_only_the_graphs_texts(private_cache):
    from gr_core.config import EMBEDDED_TEXT_ENCODER
    from gr_core.g_retriever.retrieval import text_similarities
    from gr_core.graphqa import LazyEmbeddings

    table = LazyEmbeddings(["paris", "france", "capital of", "berlin", "located in"], 384, EMBEDDED_TEXT_ENCODER)
    q = table[0] + table[1]  # encodes "paris" and "france"
    node_sim, edge_sim = text_similarities(q, table, np.array([0, 1]), np.array([2, 2]))  # 3 of 5 texts: whole table
    assert table._done.tolist() == [True, True, True, False, False]
    np.testing.assert_allclose(node_sim, [table[0] @ q, table[1] @ q], rtol=1e-5)
    np.testing.assert_allclose(edge_sim, [table[2] @ q] * 2, rtol=1e-5)


@pytest.mark.data
def test_a_dataset_encodes_only_the_graphs_that_are_read(private_cache):
    ds = load_dataset("gqa_micro")
    assert not ds.text_emb._done.any() and not ds.question_emb._done.any()  # building encodes nothing
    x, edge_attr = ds.embeddings(0)
    read = np.union1d(ds.node_text_ids[0], ds.edge_text_ids[0])
    assert set(np.flatnonzero(ds.text_emb._done)) == set(read.tolist())
    assert ds.prefetch([0]) == 1  # only the question was still missing
    assert ds.prefetch([0, 1]) > 0 and ds.prefetch([0, 1]) == 0
    again = load_dataset("gqa_micro")  # from the cache: the vectors come from the store, the same ones
    np.testing.assert_array_equal(again.embeddings(0)[0], x)
    np.testing.assert_array_equal(again.edge_embeddings(0), edge_attr)
    assert np.allclose(np.linalg.norm(np.asarray(again.text_emb), axis=1), 1, atol=1e-5)
