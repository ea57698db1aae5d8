"""GraphQA datasets with embeddings, built once per config and cached (GR paper §4, §5.1).

:func:`load_dataset` returns a :class:`GraphQADataset`: questions, split, textual graphs, and the sentence
embeddings of every distinct node, edge and question text, each encoded once when first read. The object is cached
under ``.cache/datasets/``, keyed by the builder config, the encoder and the raw files' sha256.
"""
from __future__ import annotations

import hashlib
import os
import pickle
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache

import numpy as np
import pandas as pd
import torch
from torch_geometric.data import Data

from . import datasets as builders
from . import rog
from .config import EMBEDDED_TEXT_ENCODER, TextEncoderConfig, check_choice
from .data import TextualGraph, load_split
from .g_retriever.retrieval import DATASET_RETRIEVAL, retrieve_subgraph, text_similarities
from .g_retriever.textualize import textualize
from .kg import KnowledgeGraph, NeighbourhoodConfig
from .paths import GQA_FILES
from .paths import PAPERS_DATA as PAPERS_FOLDERS
from .paths import DataNotFoundError, cache_root, data_root
from .prompts import KGQA_DATASETS
from .published import DATASET_SOURCE, PAPER_STATS
from .runs import (atomic_write_bytes, config_hash, file_stamp, read_json, sha256_file, sha256_memo,
                   unpickle_verified, write_json)
from .text_encoder import EmbeddingStore, encoder_identity

FORMAT_VERSION = 4  # bump when the cached layout or a builder's output changes (4: embeddings encoded lazily)
DATASETS = ("explagraphs", "webqsp", "webqsp_full", "metaqa", "gqa_micro", "clevr", "rog_webqsp", "rog_cwq", "gqa")
ROG_DATASETS = {"rog_webqsp": "webqsp", "rog_cwq": "cwq"}  # read from parquet shards (gr_core.rog), not RAW_FILES

# Raw files (relative to the data root) that each dataset is built from; their checksums key the cache.
RAW_FILES = {
    "explagraphs": ["explagraphs/train_dev.tsv", "explagraphs/split/train_indices.txt",
                    "explagraphs/split/val_indices.txt", "explagraphs/split/test_indices.txt"],
    "webqsp": ["webqsp/minigraphs.jsonl"],
    "webqsp_full": ["webqsp/full_subgraphs.jsonl"],
    "metaqa": ["metaqa/kb.txt"] + [f"metaqa/{h}-hop/qa_{s}{t}.txt" for h in (1, 2, 3) for s in ("dev", "test")
                                   for t in ("", "_qtype")],
    "gqa_micro": ["scene_graphs/gqa_micro/train_sceneGraphs.json", "scene_graphs/gqa_micro/questions.csv"],
    "clevr": ["scene_graphs/clevr/CLEVR_train_scenes_1000.json", "scene_graphs/clevr/CLEVR_val_scenes_500.json"]
             + [f"scene_graphs/clevr/questions/{name}" for name in builders.CLEVR_QUESTIONS],
    "gqa": [f"{PAPERS_FOLDERS['gqa'][1]}/{f}" for pair in GQA_FILES for f in pair],
}
PAPERS_DATA = tuple(PAPERS_FOLDERS)  # optional, large (docs/data.md): a persistent sha256 memo


@dataclass(frozen=True)
class DatasetConfig:
    """Which dataset to build and how.

    Attributes:
        name: one of ``DATASETS``.
        max_questions: keep the first N questions of each split (smoke/quick subsets); None keeps all.
        split_seed: seed of every re-split (GR code ``random_state=42``).
        hops, max_expand_degree, max_nodes: MetaQA neighbourhoods (see :class:`NeighbourhoodConfig`).
        encoder: the sentence encoder (paper: all-roberta-large-v1; here the embedded MiniLM).
    """

    name: str
    max_questions: int | None = None
    split_seed: int = 42  # GR code src/dataset/preprocess/*.py
    hops: int = 2
    max_expand_degree: int = 200
    max_nodes: int = 2000  # GNN-RAG dense subgraphs keep 2,000 entities
    encoder: str = EMBEDDED_TEXT_ENCODER

    def __post_init__(self) -> None:
        check_choice("DatasetConfig", "name", self.name, DATASETS)
        if self.max_questions is not None and self.max_questions < 1:
            raise ValueError(f"DatasetConfig.max_questions={self.max_questions} must be >= 1 or None")

    @property
    def neighbourhood(self) -> NeighbourhoodConfig:
        return NeighbourhoodConfig(self.hops, self.max_expand_degree, self.max_nodes)


# the settings of a DatasetConfig that decide which questions and graphs it holds (its name and encoder are recorded
# apart): part of a training run's identity (gr_core.g_retriever.train.run_inputs)
DATASET_BUILD = ("max_questions", "split_seed", "hops", "max_expand_degree", "max_nodes")


class LazyEmbeddings:
    """Sentence embeddings of a list of texts, encoded on first use and indexed like an array ``(len(texts), dim)``.

    Encoded texts land in the shared :class:`~gr_core.text_encoder.EmbeddingStore`, so the vectors do not depend on
    the access order; :meth:`prefetch` encodes many rows in one batch.
    """

    def __init__(self, texts: Sequence[str], dim: int, encoder: str):
        self.texts = texts if isinstance(texts, Sequence) else list(texts)  # a lazy sequence stays lazy
        self.encoder = encoder
        self._rows = np.zeros((len(self.texts), dim), np.float32)
        self._done = np.zeros(len(self.texts), bool)

    @property
    def shape(self) -> tuple[int, int]:
        return self._rows.shape

    def __len__(self) -> int:
        return len(self.texts)

    def prefetch(self, indices) -> int:
        """Encode the rows at ``indices`` that are not encoded yet, in one batch; returns how many were missing."""
        idx = np.unique(np.asarray(list(indices) if not isinstance(indices, np.ndarray) else indices, dtype=np.int64))
        idx = idx[~self._done[idx]]
        if len(idx):
            store = EmbeddingStore.shared(TextEncoderConfig(model=self.encoder))
            emb, _ = store.encode([self.texts[i] for i in idx], desc="encode texts")
            self._rows[idx], self._done[idx] = emb, True
        return len(idx)

    def _encode(self, rows) -> None:
        if not self._done[rows].all():
            self.prefetch(np.atleast_1d(rows))

    def __getitem__(self, key):
        integer = isinstance(key, (int, np.integer)) or (isinstance(key, np.ndarray) and key.dtype.kind == "i")
        self._encode(key if integer else np.arange(len(self))[key])  # a slice or mask: its row numbers
        return self._rows[key]

    def encoded(self, rows: np.ndarray) -> np.ndarray:
        """The whole ``(len(self), dim)`` array with ``rows`` encoded (other rows may still be zeros), for a reader
        of most rows that would rather not copy them out: the table's own buffer, to read, never write."""
        self._encode(rows)
        return self._rows

    def __array__(self, dtype=None, copy=None):
        self.prefetch(range(len(self)))
        return self._rows if dtype is None else self._rows.astype(dtype)

    def __getstate__(self) -> dict:
        # only the encoded rows: a table of millions of texts (RoG) pickles small while few are encoded
        done = np.flatnonzero(self._done)
        return {"texts": self.texts, "encoder": self.encoder, "dim": self._rows.shape[1], "done": done,
                "rows": self._rows[done]}

    def __setstate__(self, state: dict) -> None:
        if "_rows" in state:  # a cache file written before the compact form
            self.__dict__.update(state)
            return
        self.texts, self.encoder = state["texts"], state["encoder"]
        self._rows = np.zeros((len(self.texts), state["dim"]), np.float32)  # untouched pages cost no memory
        self._done = np.zeros(len(self.texts), bool)
        self._rows[state["done"]], self._done[state["done"]] = state["rows"], True


@dataclass
class GraphQADataset:
    """Questions over textual graphs, with embeddings.

    Shapes:
        ``text_emb``: ``(num_texts, dim)`` float32, L2-normalized, one row per distinct text.
        ``question_emb``: ``(num_questions, dim)``. Both are :class:`LazyEmbeddings`, encoded on first use.
        ``node_text_ids[i]`` / ``edge_text_ids[i]``: rows of ``text_emb`` for graph i's nodes / edges
        (stored graphs); for KB datasets ``entity_text_ids`` / ``relation_text_ids`` map KB ids instead.
        RoG datasets hold ``graphs`` and these as lazy sequences over packed arrays (``rog.PackedGraphs``).
    """

    config: DatasetConfig
    records: list[builders.QARecord]
    split: dict[str, list[int]]
    texts: list[str]
    text_emb: LazyEmbeddings
    question_emb: LazyEmbeddings
    graphs: Sequence[TextualGraph] | None = None
    node_text_ids: Sequence[np.ndarray] | None = None
    edge_text_ids: Sequence[np.ndarray] | None = None
    kg: KnowledgeGraph | None = None
    entity_text_ids: np.ndarray | None = None
    relation_text_ids: np.ndarray | None = None
    meta: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.config.name

    def __len__(self) -> int:
        return len(self.records)

    def graph(self, i: int, scope: NeighbourhoodConfig | None = None) -> TextualGraph:
        """The textual graph of question ``i`` (for KB datasets: its neighbourhood, cut on demand; ``scope`` cuts
        another one than the dataset's, e.g. a 1-hop question on the chat's 2-hop neighbourhood)."""
        rec = self.records[i]
        if self.graphs is not None:
            g = self.graphs[i]
            return TextualGraph(g.nodes, g.edges, rec.question, rec.answers, rec.graph_id, rec.q_entities)
        nodes, edges = self.neighbourhood(i, scope)
        return self.kg.subgraph(nodes, edges, question=rec.question, answers=rec.answers, graph_id=rec.graph_id,
                                q_entities=rec.q_entities)

    def neighbourhood(self, i: int, scope: NeighbourhoodConfig | None = None) -> tuple[np.ndarray, np.ndarray]:
        """KB datasets: question ``i``'s neighbourhood (``scope``, else the dataset's) as (entity ids, KB edge ids)."""
        seeds = [self.kg.entity_id[e] for e in self.records[i].q_entities]
        return self.kg.neighbourhood(seeds, scope or self.config.neighbourhood)

    def text_rows(self, i: int, graph: TextualGraph | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Rows of ``text_emb`` for question ``i``'s nodes ``(num_nodes,)`` and edges ``(num_edges,)``."""
        if self.graphs is not None:
            return self.node_text_ids[i], self.edge_text_ids[i]
        graph = graph if graph is not None else self.graph(i)
        return (self.entity_text_ids[graph.nodes.kb_id.to_numpy()],
                self.relation_text_ids[self.kg.rels[graph.edges.kb_edge.to_numpy()]])

    def embeddings(self, i: int, graph: TextualGraph | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(x, edge_attr)`` of question ``i``'s graph: ``(num_nodes, dim)`` and ``(num_edges, dim)``."""
        nodes, edges = self.text_rows(i, graph)
        return self.text_emb[nodes], self.text_emb[edges]

    def edge_embeddings(self, i: int, graph: TextualGraph | None = None) -> np.ndarray:
        """``(num_edges, dim)``: question ``i``'s edge texts alone (the reasoner reads no node text)."""
        return self.text_emb[self.text_rows(i, graph)[1]]

    def prefetch(self, indices, nodes: bool = True) -> int:
        """Encode, in one batch, every text that questions ``indices`` read (the question, its edge texts, and with
        ``nodes`` its node texts); the results are the same without it. Returns how many texts were encoded."""
        indices = [int(i) for i in indices]
        if not indices:
            return 0
        if self.graphs is not None:
            rows = ([self.edge_text_ids[i] for i in indices]
                    + ([self.node_text_ids[i] for i in indices] if nodes else []))
        else:
            rows = [self.relation_text_ids]
            for i in indices if nodes else []:
                ents, _ = self.neighbourhood(i)
                rows.append(self.entity_text_ids[np.asarray(ents, np.int64)])
        return self.question_emb.prefetch(indices) + self.text_emb.prefetch(np.concatenate(rows))

    def to_pyg(self, i: int):
        """Question ``i``'s graph as a PyG ``Data`` (``x``, ``edge_index`` over row positions, ``edge_attr``)."""
        g = self.graph(i)
        x, edge_attr = self.embeddings(i, g)
        pos = {nid: k for k, nid in enumerate(g.nodes.node_id.tolist())}
        edge_index = torch.tensor([[pos[s] for s in g.edges.src], [pos[d] for d in g.edges.dst]], dtype=torch.long)
        return Data(x=torch.from_numpy(x), edge_index=edge_index.view(2, -1), edge_attr=torch.from_numpy(edge_attr),
                    num_nodes=g.num_nodes)


class _TextTable:
    """Distinct strings in first-seen order; ``add`` returns their row ids and counts references."""

    def __init__(self):
        self.ids: dict[str, int] = {}
        self.referenced = 0

    def add(self, texts) -> np.ndarray:
        out = np.fromiter((self.ids.setdefault(t, len(self.ids)) for t in texts), dtype=np.int64)
        self.referenced += len(out)
        return out


@lru_cache(maxsize=64)
def _sha256_cached(path: str, size: int, mtime_ns: int) -> str:
    return sha256_file(path)


def raw_checksums(name: str) -> dict[str, str]:
    """sha256 of each raw file ``name`` is built from, keyed by its path under the data folder (RoG shards as
    ``rog/<name>/data/<shard>`` wherever they were found: the data folder or a hub cache)."""
    if name in ROG_DATASETS:
        return {f"rog/{ROG_DATASETS[name]}/data/{p.name}": sha256_memo(p)
                for paths in rog.find_shards(ROG_DATASETS[name]).values() for p in paths}
    root = data_root()
    out = {}
    for rel in RAW_FILES[name]:
        p = root / rel
        if not p.is_file():
            papers = " --papers" if name in PAPERS_DATA else ""
            raise DataNotFoundError(f"missing raw data file {p} needed by dataset {name!r}; ./gr data --check "
                                    f"lists what is missing and ./gr data --fetch {root}{papers} downloads it "
                                    "(docs/data.md)")
        out[rel] = sha256_memo(p) if name in PAPERS_DATA else _sha256_cached(str(p), *file_stamp(p))
    return out


def dataset_source(name: str) -> str:
    """Where ``name``'s questions and graphs come from, as tables name it: the papers' data, or which stand-in."""
    check_choice("dataset_source", "name", name, DATASETS)
    return DATASET_SOURCE[name]


def build_dataset(cfg: DatasetConfig, store: EmbeddingStore | None = None) -> GraphQADataset:
    """Build ``cfg``'s dataset from the raw files (no cache). No text is encoded here (:class:`LazyEmbeddings`);
    ``store`` only gives the embedding width."""
    start = time.perf_counter()
    if cfg.name == "explagraphs":
        records, graphs, kg, notes = builders.build_explagraphs()
        notes["split"] = load_split("explagraphs", rows=len(records))
    elif cfg.name in ("webqsp", "webqsp_full"):
        records, graphs, kg, notes = builders.build_webqsp("minigraphs.jsonl" if cfg.name == "webqsp"
                                                           else "full_subgraphs.jsonl")
        # No train/val graphs exist offline: a seeded 6:2:2 re-split of the test questions (deviation);
        # the 18 full subgraphs are a retrieval-scale evaluation set only.
        notes["split"] = (builders.graphqa_split(len(records), cfg.split_seed) if cfg.name == "webqsp"
                          else {"train": [], "val": [], "test": list(range(len(records)))})
    elif cfg.name == "metaqa":
        records, graphs, kg, notes = builders.build_metaqa(cfg.hops, seed=cfg.split_seed)
    elif cfg.name == "gqa_micro":
        records, graphs, kg, notes = builders.build_gqa(seed=cfg.split_seed)
    elif cfg.name == "gqa":  # builds only the graphs of the questions it keeps
        records, graphs, kg, notes = builders.build_gqa_full(seed=cfg.split_seed, max_questions=cfg.max_questions)
    elif cfg.name in ROG_DATASETS:  # keeps the first max_questions of each split while streaming
        records, graphs, kg, notes = rog.build_rog(ROG_DATASETS[cfg.name], cfg.max_questions)
    else:
        records, graphs, kg, notes = builders.build_clevr(seed=cfg.split_seed)
    split = {k: v[:cfg.max_questions] if cfg.max_questions else list(v) for k, v in notes.pop("split").items()}
    packed = isinstance(graphs, rog.PackedGraphs)  # one graph per question, its texts already in one table
    if not packed:
        keep = sorted(i for idx in split.values() for i in idx)
        remap = {old: new for new, old in enumerate(keep)}
        records = [records[i] for i in keep]
        graphs = [graphs[i] for i in keep] if graphs is not None else None
        split = {k: [remap[i] for i in v] for k, v in split.items()}

    table = _TextTable()
    ds = GraphQADataset(cfg, records, split, [], np.zeros((0, 0), np.float32), np.zeros((0, 0), np.float32),
                        graphs=graphs, kg=kg)
    if packed:
        ds.node_text_ids, ds.edge_text_ids = graphs.node_text_ids, graphs.edge_text_ids
        table.referenced, edges = graphs.referenced, graphs.num_edges
    elif graphs is not None:
        # Questions about one scene share its graph: its texts are referenced (and looked up) once.
        per_graph: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for rec, g in zip(records, graphs):
            if rec.graph_id not in per_graph:
                per_graph[rec.graph_id] = (table.add(g.nodes.node_attr), table.add(g.edges.edge_attr))
        ds.node_text_ids = [per_graph[r.graph_id][0] for r in records]
        ds.edge_text_ids = [per_graph[r.graph_id][1] for r in records]
        edges = sum(len(e) for _, e in per_graph.values())
    else:
        if cfg.max_questions:  # a subset encodes only the entities its neighbourhoods reach
            needed = np.unique(np.concatenate([ds.graph(i).nodes.kb_id.to_numpy() for i in range(len(records))]))
        else:
            needed = np.arange(kg.num_entities)
        ds.entity_text_ids = np.full(kg.num_entities, -1, dtype=np.int64)
        ds.entity_text_ids[needed] = table.add(kg.entities[e] for e in needed)
        ds.relation_text_ids = table.add(kg.relations)
        table.referenced += len(kg.heads) * 3 - len(needed) - len(kg.relations)  # each triple names 3 texts
        edges = kg.num_edges
    texts = graphs.texts if packed else list(table.ids)
    dim = (store or EmbeddingStore.shared(TextEncoderConfig(model=cfg.encoder))).dim
    ds.texts, ds.text_emb = texts, LazyEmbeddings(texts, dim, cfg.encoder)
    ds.question_emb = LazyEmbeddings([r.question for r in records], dim, cfg.encoder)
    # the preprocessing cost: graph texts only (the questions are encoded on their own), edges over distinct graphs
    ds.meta = {"source": dataset_source(cfg.name), "notes": notes, "questions": len(records), "edges": int(edges),
               "texts_referenced": table.referenced, "texts_encoded": len(texts),
               "dedup_factor": round(table.referenced / max(len(texts), 1), 3),
               "build_seconds": round(time.perf_counter() - start, 2),
               "split_sizes": {k: len(v) for k, v in split.items()}}
    return ds


def data_inputs(cfg: DatasetConfig | None) -> dict:
    """What results made from dataset ``cfg`` (None: none) depend on besides their settings, the same on every
    machine: its raw files' checksums and its encoder's identity (not :data:`FORMAT_VERSION`: code is not keyed)."""
    if cfg is None:
        return {}
    return {"data": config_hash({"raw": raw_checksums(cfg.name)}),
            "encoder": encoder_identity(TextEncoderConfig(model=cfg.encoder))}


def cache_key(cfg: DatasetConfig) -> str:
    return config_hash({"config": asdict(cfg), "raw": raw_checksums(cfg.name), "format": FORMAT_VERSION})


def load_dataset(cfg: DatasetConfig | str, force: bool = False, store: EmbeddingStore | None = None,
                 **overrides) -> GraphQADataset:
    """The cached dataset for ``cfg``, built (and cached) when missing, stale, or corrupted.

    The pickle sits beside a manifest holding its size and sha256: a mismatch means rebuild. A process reads each
    file once (:func:`~gr_core.runs.unpickle_verified`): later loads return the same object, not to be changed.
    """
    cfg = DatasetConfig(name=cfg, **overrides) if isinstance(cfg, str) else cfg
    key = cache_key(cfg)
    folder = cache_root() / "datasets"
    blob, manifest = folder / f"{cfg.name}-{key}.pkl", folder / f"{cfg.name}-{key}.json"
    if not force and blob.is_file() and manifest.is_file():
        try:
            info = read_json(manifest)
        except ValueError:  # a manifest cut short: the cache is rebuilt, as for a pickle that fails its checksum
            info = {}
        if (ds := unpickle_verified(blob, info.get("size"), info.get("sha256"))) is not None:
            ds.meta["source"] = dataset_source(cfg.name)  # today's label, also on caches written before it
            ds.meta["cache"] = {"hit": True, "file": str(blob)}
            return ds
    ds = build_dataset(cfg, store)
    data = pickle.dumps(ds, protocol=pickle.HIGHEST_PROTOCOL)
    atomic_write_bytes(blob, data)
    write_json(manifest, {"size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "config": asdict(cfg),
                          "raw": raw_checksums(cfg.name), "format": FORMAT_VERSION, "pid": os.getpid()})
    ds.meta["cache"] = {"hit": False, "file": str(blob)}
    return ds


def describe(ds: GraphQADataset, tokenizer=None, token_sample: int = 200, seed: int = 0) -> dict:
    """Table 2 statistics of ``ds``: questions, mean nodes and edges, answer coverage, and mean tokens
    of the textualized graph with ``tokenizer`` (over a seeded sample of ``token_sample`` graphs,
    because MetaQA-3 and full WebQSP graphs run to ~10^4-10^5 tokens each)."""
    n = len(ds)
    graphs = ds.graphs
    nodes, edges, cov_any, cov_all = [], [], [], []
    for i in range(n):
        answers = ds.records[i].answers
        if graphs is None:  # KB: count from the neighbourhood arrays, no tables (30k questions x 10^3 nodes)
            kb_nodes, kb_edges = ds.neighbourhood(i)
            inside = set(kb_nodes.tolist())
            hits = [ds.kg.entity_id.get(a, -1) in inside for a in answers]
            nodes.append(len(kb_nodes))
            edges.append(len(kb_edges))
        else:
            g = graphs[i]
            names = set(g.nodes.node_attr.astype(str))  # exact, like the KB branch above
            hits = [a in names for a in answers]
            nodes.append(g.num_nodes)
            edges.append(g.num_edges)
        cov_any.append(any(hits))
        cov_all.append(bool(hits) and all(hits))
    kgqa = ds.name in KGQA_DATASETS and n > 0  # answers are graph nodes: answer coverage is defined
    out = {"dataset": ds.name, "questions": n,
           "distinct_graphs": len({r.graph_id for r in ds.records}) if graphs else n,
           "mean_nodes": float(np.mean(nodes)) if n else 0.0, "mean_edges": float(np.mean(edges)) if n else 0.0,
           "max_nodes": int(max(nodes, default=0)), "coverage_any": float(np.mean(cov_any)) if kgqa else None,
           "coverage_all": float(np.mean(cov_all)) if kgqa else None,
           # the build record, less what a cache written before a key was added lacks (FORMAT_VERSION 4 caches)
           **{k: v for k, v in ds.meta.items() if k not in ("cache", "questions", "edges")}}
    if tokenizer is not None and n:
        idx = np.random.default_rng(seed).permutation(n)[:token_sample]
        texts = [textualize(ds.graph(int(i))) for i in idx]
        out["mean_tokens"] = float(np.mean([len(t) for t in tokenizer(texts, add_special_tokens=False)["input_ids"]]))
        out["token_sample"] = len(idx)
    return out


def compare_with_paper(stats: list[dict]):
    """Our Table 2 statistics beside the papers' (a DataFrame, one row per dataset)."""
    rows = []
    for s in stats:
        label = s.get("label", s["dataset"])
        paper = PAPER_STATS.get(label, PAPER_STATS.get(s["dataset"], {}))
        rows.append({"dataset": label, "questions": s["questions"],
                     "paper graphs": paper.get("graphs"), "mean nodes": round(s["mean_nodes"], 2),
                     "paper nodes": paper.get("mean_nodes"), "mean edges": round(s["mean_edges"], 2),
                     "paper edges": paper.get("mean_edges"),
                     "mean tokens": round(s["mean_tokens"], 1) if "mean_tokens" in s else None,
                     "paper tokens": paper.get("mean_tokens"),
                     "answer coverage": None if s["coverage_any"] is None else round(s["coverage_any"], 4),
                     "paper coverage": paper.get("coverage_any"), "paper source": paper.get("source", "")})
    return pd.DataFrame(rows)


def retrieve(ds: GraphQADataset, i: int, cfg=None, graph: TextualGraph | None = None, extra_node_prizes=None):
    """PCST retrieval for question ``i`` of ``ds``, by default with the dataset's config (``DATASET_RETRIEVAL``);
    ``extra_node_prizes`` ``(num_nodes,)`` are added to the text prizes (see
    :func:`~gr_core.g_retriever.retrieval.retrieve_subgraph`)."""
    graph = graph if graph is not None else ds.graph(i)
    cfg = cfg or DATASET_RETRIEVAL[ds.name]
    if cfg.whole_graph or graph.num_nodes == 0 or graph.num_edges == 0:  # returned whole: nothing to score
        return retrieve_subgraph(graph, None, None, None, cfg)
    node_sim, edge_sim = text_similarities(ds.question_emb[i], ds.text_emb, *ds.text_rows(i, graph), cfg.similarity)
    return retrieve_subgraph(graph, None, None, None, cfg, node_sim=node_sim, edge_sim=edge_sim,
                             extra_node_prizes=extra_node_prizes)
