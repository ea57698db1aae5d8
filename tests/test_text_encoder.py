import numpy as np
import pytest

from gr_core.text_encoder import EmbeddingStore


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv("GR_CACHE_DIR", str(tmp_path / "cache"))
    return EmbeddingStore()


def test_repeated_texts_are_encoded_once_and_scattered_back(store):
    texts = ["film.actor", "paris", "film.actor", "film.actor", "paris"]
    emb, new = store.encode(texts)
    assert emb.shape == (5, 384) and emb.dtype == np.float32 and new == 2
    np.testing.assert_array_equal(emb[0], emb[2])
    np.testing.assert_array_equal(emb[1], emb[4])


def test_embeddings_are_unit_length_and_rank_related_text_higher(store):
    emb, _ = store.encode(["What is the capital of France?", "Paris is the capital of France.",
                           "A recipe for banana bread."])
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    assert emb[0] @ emb[1] > emb[0] @ emb[2] + 0.3


def test_empty_input_gives_an_empty_matrix(store):
    emb, new = store.encode([])
    assert emb.shape[0] == 0 and new == 0
