"""RoG-webqsp and RoG-cwq from their published parquet shards: the papers' questions with their 2-hop graphs.

G-Retriever (GR §4, WebQSP) and GNN-RAG (Table 2, WebQSP and CWQ) use RoG's release, ``rmanluo/RoG-webqsp`` and
``rmanluo/RoG-cwq`` on the hub: parquet shards ``data/{train,validation,test}-NNNNN-of-NNNNN-<hex>.parquet``
with columns ``id``, ``question``, ``answer``, ``q_entity``, ``a_entity``, ``graph`` (``[head, relation, tail]``
strings) and ``choices``. :func:`build_rog` streams them a record batch at a time (CWQ is ~2 GB of parquet, ~11 GB as
a Hugging Face dataset) into :class:`PackedGraphs`: one table of distinct texts and int arrays per question, from
which a question's :class:`~gr_core.data.TextualGraph` is built on demand: the graph ``datasets.build_webqsp`` builds
from the same row (entities lowercased and stripped, relations stripped, nodes numbered by first appearance, head
before tail, repeated triples kept as multi-edges).
"""
from __future__ import annotations

import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .data import GraphFormatError, TextualGraph
from .datasets import QARecord
from .paths import PAPERS_DATA, DataNotFoundError, data_root, hub_snapshot

HUB_REPOS = {name: PAPERS_DATA[f"rog_{name}"][0] for name in ("webqsp", "cwq")}
SPLITS = {"train": "train", "validation": "val", "test": "test"}  # shard prefix -> our split name (RoG's, no re-split)
# the hub's shard names; newer uploads drop the 16-hex suffix
SHARD_NAME = re.compile(r"(train|validation|test)-(\d{5})-of-(\d{5})(?:-[0-9a-f]{16})?\.parquet")
COLUMNS = ("id", "question", "answer", "q_entity", "graph")  # what is read; a_entity and choices are not
FETCH_HINT = "./gr data --fetch {root} --papers"


# ---------------------------------------------------------------- the shards
def shard_folder(name: str) -> Path:
    """The folder of ``name``'s shards (``webqsp`` or ``cwq``): ``<data folder>/rog/<name>/data``, else a hub cache
    snapshot; a DataNotFoundError names both places and the command that downloads them."""
    try:
        root = data_root()
    except DataNotFoundError:
        root = None
    local = root / PAPERS_DATA[f"rog_{name}"][1] / "data" if root else None
    if local is not None and any(local.glob("*.parquet")):
        return local
    hub = hub_snapshot(HUB_REPOS[name])
    if any(hub.glob("*.parquet")):
        return hub
    raise DataNotFoundError(
        f"RoG-{name} ({HUB_REPOS[name]}) not found: no parquet shards in "
        f"{local if local else 'the data folder (none found)'} nor in the Hugging Face cache {hub}; download them "
        f"with {FETCH_HINT.format(root=root or 'DIR')} (docs/data.md)")


def find_shards(name: str) -> dict[str, list[Path]]:
    """``{"train": [...], "val": [...], "test": [...]}``: each split's shards in order, checked complete (else a
    DataNotFoundError: an unfinished download); a ``.parquet`` file not named as a shard is a GraphFormatError."""
    folder = shard_folder(name)
    found: dict[str, dict[int, Path]] = {s: {} for s in SPLITS.values()}
    totals: dict[str, set[int]] = {s: set() for s in SPLITS.values()}
    for path in sorted(folder.glob("*.parquet")):
        m = SHARD_NAME.fullmatch(path.name)
        if m is None:
            raise GraphFormatError(f"{path}: not a shard name '<train|validation|test>-NNNNN-of-NNNNN[-<hex>].parquet'")
        split, index = SPLITS[m.group(1)], int(m.group(2))
        if index in found[split]:
            raise GraphFormatError(f"{path}: shard {index} of {m.group(1)} also in {found[split][index].name} "
                                   "(two revisions in one folder)")
        found[split][index] = path
        totals[split].add(int(m.group(3)))
    for split, shards in found.items():
        expected = set(range(max(totals[split], default=1)))
        if len(totals[split]) > 1 or set(shards) != expected:
            missing = sorted(expected - set(shards))
            raise DataNotFoundError(f"{folder}: split {split!r} has shards {sorted(shards)} of "
                                    f"{sorted(totals[split]) or '?'} (missing {missing}); download them with "
                                    f"{FETCH_HINT.format(root='DIR')} (docs/data.md)")
    return {split: [shards[i] for i in sorted(shards)] for split, shards in found.items()}


# ---------------------------------------------------------------- packed graphs
class CSRRows(Sequence):
    """Rows ``values[offsets[i]:offsets[i + 1]]`` as int64 arrays, e.g. each question's node text ids."""

    def __init__(self, values: np.ndarray, offsets: np.ndarray):
        self.values, self.offsets = values, offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        i = range(len(self))[i]  # negative indices; IndexError ends iteration
        return self.values[self.offsets[i]:self.offsets[i + 1]].astype(np.int64)


@dataclass
class PackedGraphs(Sequence):
    """Many questions' textual graphs in CSR arrays over one table of distinct texts; ``self[i]`` builds graph i.

    Stored per edge: 12 bytes (two local node ids and a text id, int32), per node 4 bytes; each distinct text once.

    Shapes:
        node_offsets, edge_offsets: ``(num_graphs + 1,)`` int64, graph i's nodes are ``node_text[node_offsets[i]:
        node_offsets[i + 1]]`` (row k is local node id k).
        node_text: ``(total_nodes,)`` int32 rows of ``texts``.
        edge_src, edge_dst: ``(total_edges,)`` int32 local node ids; edge_text: ``(total_edges,)`` int32 rows of texts.
    """

    texts: list[str]
    node_offsets: np.ndarray
    node_text: np.ndarray
    edge_offsets: np.ndarray
    edge_src: np.ndarray
    edge_dst: np.ndarray
    edge_text: np.ndarray
    referenced: int = 0  # node + edge texts over all graphs (what a per-graph encoder would embed)

    def __len__(self) -> int:
        return len(self.node_offsets) - 1

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        i = range(len(self))[i]
        a, b = self.node_offsets[i], self.node_offsets[i + 1]
        c, d = self.edge_offsets[i], self.edge_offsets[i + 1]
        texts = self.texts
        # the columns and dtypes of data.graph_from_triples, so both routes give equal frames
        nodes = pd.DataFrame({"node_id": np.arange(b - a), "node_attr": [texts[t] for t in self.node_text[a:b]]})
        edges = pd.DataFrame({"src": self.edge_src[c:d], "edge_attr": [texts[t] for t in self.edge_text[c:d]],
                              "dst": self.edge_dst[c:d]})
        return TextualGraph(nodes.astype({"node_id": int, "node_attr": str}),
                            edges.astype({"src": int, "edge_attr": str, "dst": int}))

    @property
    def node_text_ids(self) -> CSRRows:
        return CSRRows(self.node_text, self.node_offsets)

    @property
    def edge_text_ids(self) -> CSRRows:
        return CSRRows(self.edge_text, self.edge_offsets)

    @property
    def num_edges(self) -> int:
        return len(self.edge_text)


def _entity(text: str) -> str:
    return text.lower().strip()  # datasets.build_webqsp lowercases, then graph_from_triples strips


def _is_list_of(t: pa.DataType, inner: Callable[[pa.DataType], bool]) -> bool:
    return (pa.types.is_list(t) or pa.types.is_large_list(t)) and inner(t.value_type)


def _is_str(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


class _Packer:
    """Accumulates record batches into records and CSR arrays; one global text table (entities and relations)."""

    def __init__(self):
        self.text_id: dict[str, int] = {}
        self.records: list[QARecord] = []
        self.parts: dict[str, list[np.ndarray]] = {k: [] for k in ("node_text", "src", "dst", "edge_text",
                                                                   "num_nodes", "num_edges")}

    def _ids(self, strings: pa.Array, norm: Callable[[str], str]) -> np.ndarray:
        """Text ids ``(len(strings),)`` of ``norm(s)``; each distinct string of the batch is normalized once."""
        enc = pc.dictionary_encode(strings)
        ids = self.text_id
        table = np.fromiter((ids.setdefault(norm(s), len(ids)) for s in enc.dictionary.to_pylist()), np.int64,
                            count=len(enc.dictionary))
        return table[enc.indices.to_numpy(zero_copy_only=False)]

    def add(self, batch: pa.RecordBatch, path: Path, row0: int) -> None:
        """Add ``batch`` (rows ``row0..`` of shard ``path``); errors name the file, row and field."""
        cols = {c: batch.column(c).to_pylist() for c in ("id", "question", "answer", "q_entity")}
        for r in range(batch.num_rows):
            for key, values in cols.items():
                value, text = values[r], key in ("id", "question")
                if not (isinstance(value, str) if text else
                        isinstance(value, list) and all(isinstance(x, str) for x in value)):
                    kind = "a string" if text else "a list of strings"
                    raise GraphFormatError(f"{path}: row {row0 + r}: field {key!r} is {value!r}, expected {kind}")
            self.records.append(QARecord(cols["question"][r], [a.lower() for a in cols["answer"][r]], cols["id"][r],
                                         [e.lower() for e in cols["q_entity"][r]]))
        graph = batch.column("graph")
        counts = pc.fill_null(pc.list_value_length(graph), -1).to_numpy(zero_copy_only=False)  # (B,) triples
        if (counts < 0).any():
            r = int(np.argmax(counts < 0))
            raise GraphFormatError(f"{path}: row {row0 + r} (id {cols['id'][r]!r}): field 'graph' is null")
        triples = pc.list_flatten(graph)  # (E,) lists
        flat = pc.list_flatten(triples)  # (3E,) strings when every triple has three
        bad = pc.fill_null(pc.list_value_length(triples), -1).to_numpy(zero_copy_only=False) != 3
        if not bad.any() and flat.null_count:
            bad = flat.is_null().to_numpy(zero_copy_only=False).reshape(-1, 3).any(axis=1)
        if bad.any():
            e = int(np.argmax(bad))
            r = int(np.searchsorted(np.cumsum(counts), e, side="right"))
            j = e - int(counts[:r].sum())
            raise GraphFormatError(f"{path}: row {row0 + r} (id {cols['id'][r]!r}): field 'graph', triple {j} is "
                                   f"{triples[e].as_py()!r}, expected [head, relation, tail] strings")
        num_edges = len(triples)
        base = np.arange(num_edges, dtype=np.int64) * 3
        ents = self._ids(flat.take(np.stack([base, base + 2], axis=1).ravel()), _entity)  # (2E,) h0, t0, h1, t1, ...
        rels = self._ids(flat.take(base + 1), str.strip)  # (E,)
        # Local node ids by first appearance per question, vectorized: key = (question, text); the unique keys
        # ordered by first position are the nodes, grouped by question since positions are.
        q = np.repeat(np.arange(batch.num_rows), 2 * counts)
        m = max(len(self.text_id), 1)
        uniq, first, inverse = np.unique(q * m + ents, return_index=True, return_inverse=True)
        order = np.argsort(first)
        rank = np.empty(len(uniq), np.int64)
        rank[order] = np.arange(len(uniq))
        num_nodes = np.bincount(uniq // m, minlength=batch.num_rows)  # (B,)
        local = rank[inverse.ravel()] - (np.cumsum(num_nodes) - num_nodes)[q]
        p = self.parts
        p["node_text"].append((uniq % m)[order].astype(np.int32))
        p["src"].append(local[0::2].astype(np.int32))
        p["dst"].append(local[1::2].astype(np.int32))
        p["edge_text"].append(rels.astype(np.int32))
        p["num_nodes"].append(num_nodes)
        p["num_edges"].append(counts.astype(np.int64))

    def packed(self) -> PackedGraphs:
        p = {k: np.concatenate(v) if v else np.zeros(0, np.int32) for k, v in self.parts.items()}
        offsets = {k: np.concatenate([[0], np.cumsum(p[k], dtype=np.int64)]) for k in ("num_nodes", "num_edges")}
        return PackedGraphs(list(self.text_id), offsets["num_nodes"], p["node_text"], offsets["num_edges"], p["src"],
                            p["dst"], p["edge_text"], referenced=len(p["node_text"]) + len(p["edge_text"]))


def _check_schema(path: Path, schema: pa.Schema) -> None:
    missing = [c for c in COLUMNS if c not in schema.names]
    if missing:
        raise GraphFormatError(f"{path}: missing column(s) {missing} (has {schema.names})")
    graph = schema.field("graph").type
    if not _is_list_of(graph, lambda t: _is_list_of(t, _is_str)):
        raise GraphFormatError(f"{path}: field 'graph' is {graph}, expected list<list<string>> "
                               "([head, relation, tail] triples)")


def build_rog(name: str, max_questions: int | None = None, batch_size: int = 64):
    """RoG-``name`` (``webqsp`` or ``cwq``) from its shards, streamed: ``(records, graphs, None, notes)``.

    Peak memory is one record batch of ``batch_size`` rows plus the packed arrays and the text table.
    ``max_questions`` keeps the first N rows of each split and reads no further. Returns a :class:`QARecord` per
    question (answers and topic entities lowercased, like the nodes), their :class:`PackedGraphs`, and notes:
    ``split`` (indices per split, RoG's), ``shards`` (files per split), ``empty_graphs``, ``folder``.
    """
    shards = find_shards(name)
    packer, split = _Packer(), {}
    for part, paths in shards.items():
        start = len(packer.records)
        for path in paths:
            # questions this split may still take (no limit: more than any file holds)
            left = sys.maxsize if max_questions is None else max_questions - (len(packer.records) - start)
            if left == 0:
                break  # the rest of this split is never opened
            try:
                pf = pq.ParquetFile(path)
            except (pa.ArrowInvalid, OSError) as err:  # a truncated or empty download: Arrow's message names no file
                raise GraphFormatError(f"{path}: not a readable parquet file ({err}); fetch it again with "
                                       f"{FETCH_HINT.format(root='DIR')}") from None
            with pf:
                _check_schema(path, pf.schema_arrow)
                row = 0
                for batch in pf.iter_batches(batch_size=min(batch_size, left), columns=list(COLUMNS)):
                    batch = batch.slice(0, left - row)
                    packer.add(batch, path, row)
                    row += batch.num_rows
                    if row >= left:
                        break
        split[part] = list(range(start, len(packer.records)))
    graphs = packer.packed()
    notes = {"split": split, "shards": {k: [p.name for p in v] for k, v in shards.items()},
             "empty_graphs": int((np.diff(graphs.edge_offsets) == 0).sum()),
             "folder": str(next(iter(shards.values()))[0].parent)}
    return packer.records, graphs, None, notes
