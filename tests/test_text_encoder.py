import numpy as np
import pytest

from gr_core.text_encoder import encode_texts, load_text_encoder


@pytest.fixture(scope="module")
def encoder():
    return load_text_encoder()


def test_repeated_texts_are_encoded_once_and_scattered_back(encoder):
    texts = ["film.actor", "paris", "film.actor", "film.actor", "paris"]
    emb, stats = encode_texts(encoder, texts)
    assert emb.shape == (5, 384) and emb.dtype == np.float32
    assert (stats.texts_referenced, stats.texts_encoded) == (5, 2)
    assert stats.dedup_factor == pytest.approx(2.5)
    np.testing.assert_array_equal(emb[0], emb[2])
    np.testing.assert_array_equal(emb[1], emb[4])


def test_embeddings_are_unit_length_and_rank_related_text_higher(encoder):
    emb, _ = encode_texts(encoder, ["What is the capital of France?", "Paris is the capital of France.",
                                    "A recipe for banana bread."])
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    assert emb[0] @ emb[1] > emb[0] @ emb[2] + 0.3


def test_empty_input_gives_an_empty_matrix(encoder):
    emb, stats = encode_texts(encoder, [])
    assert emb.shape == (0, 384) and stats.texts_encoded == 0
