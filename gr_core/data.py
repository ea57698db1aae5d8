"""Textual graphs (GR paper §3): a node table ``node_id,node_attr`` and an edge table ``src,edge_attr,dst`` (GR
Table 9) plus the question and its answers; node ids survive retrieval unchanged (GR code keeps them in the prompt).
"""
from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .paths import data_file
from .prompts import explagraphs_question

NODE_COLUMNS = ["node_id", "node_attr"]
EDGE_COLUMNS = ["src", "edge_attr", "dst"]


class GraphFormatError(ValueError):
    """A raw graph record is malformed; the message names the file, line and field."""


def not_utf8(path: str | Path) -> GraphFormatError:
    """The error for ``path`` when it is not UTF-8 text, naming the line of its first bad byte (a text reader decodes
    in blocks, so the line it stopped at is not where the byte is)."""
    data = Path(path).read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        return GraphFormatError(f"{path}:{line}: byte {data[err.start]:#04x} is not UTF-8 text ({err.reason}); "
                                "re-save the file as UTF-8")
    return GraphFormatError(f"{path}: not UTF-8 text")


@dataclass
class TextualGraph:
    """One question over one textual graph.

    Attributes:
        nodes: DataFrame ``node_id:int, node_attr:str`` (``num_nodes`` rows).
        edges: DataFrame ``src:int, edge_attr:str, dst:int`` (``num_edges`` rows); src/dst are node ids.
        question: the question text (the dataset's prompt template is applied later).
        answers: the gold answers (one label for classification datasets).
        graph_id: a stable id (row index of the raw file, or the dataset's own id).
        q_entities: topic entity strings for KGQA, empty otherwise.
    """

    nodes: pd.DataFrame
    edges: pd.DataFrame
    question: str = ""
    answers: list[str] = field(default_factory=list)
    graph_id: str = ""
    q_entities: list[str] = field(default_factory=list)

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    @property
    def num_edges(self) -> int:
        return len(self.edges)

    def triples(self) -> list[tuple[str, str, str]]:
        """The edges as ``(head text, relation, tail text)``."""
        names = dict(zip(self.nodes.node_id, self.nodes.node_attr))
        return [(names[s], r, names[d]) for s, r, d in self.edges[EDGE_COLUMNS].itertuples(index=False)]


def graph_from_triples(triples: list[tuple[str, str, str]], lowercase: bool = True, **record) -> TextualGraph:
    """A textual graph from ``(head, relation, tail)`` strings: node ids by first appearance, head before tail (GR
    code); every string stripped (and lowercased when ``lowercase``), equal node strings one node; repeated triples
    stay multi-edges."""
    ids: dict[str, int] = {}
    src, rels, dst = [], [], []
    for head, rel, tail in triples:
        h, r, t = head.strip(), rel.strip(), tail.strip()
        if lowercase:
            h, r, t = h.lower(), r.lower(), t.lower()
        src.append(ids.setdefault(h, len(ids)))
        rels.append(r)
        dst.append(ids.setdefault(t, len(ids)))
    # columns built in their final dtypes: no astype copies (a dataset builds thousands of these graphs)
    nodes = pd.DataFrame({"node_id": np.arange(len(ids), dtype=np.int64), "node_attr": pd.array(list(ids), dtype=str)})
    edges = pd.DataFrame({"src": np.array(src, dtype=np.int64), "edge_attr": pd.array(rels, dtype=str),
                          "dst": np.array(dst, dtype=np.int64)})
    return TextualGraph(nodes=nodes, edges=edges, **record)


# ExplaGraphs writes a graph as "(head; relation; tail)(head; relation; tail)..." (GR code
# src/dataset/preprocess/expla_graphs.py finds the triples with this regex and splits on ';').
_TRIPLE = re.compile(r"\((.*?)\)")


def parse_explagraphs_graph(text: str, where: str = "") -> list[tuple[str, str, str]]:
    """The triples of one ExplaGraphs graph string; a :class:`GraphFormatError` naming ``where`` (file:line) for a
    triple without three ``;``-separated parts."""
    triples = []
    for raw in _TRIPLE.findall(text):
        parts = raw.split(";")
        if len(parts) != 3:
            raise GraphFormatError(f"{where}: field 'graph': triple ({raw}) has {len(parts)} ';'-separated parts, "
                                   "expected 3")
        triples.append((parts[0], parts[1], parts[2]))
    if not triples:
        raise GraphFormatError(f"{where}: field 'graph': no '(head; relation; tail)' triple in {text[:80]!r}")
    if rest := _TRIPLE.sub("", text).strip():  # a triple cut short is not silently one edge fewer
        raise GraphFormatError(f"{where}: field 'graph': text outside '(head; relation; tail)': {rest[:40]!r}")
    return triples


def load_explagraphs(path: str | Path | None = None) -> list[TextualGraph]:
    """Every row of ExplaGraphs ``train_dev.tsv`` (2,766) as a textual graph: ``question`` the reference string from
    ``arg1`` and ``arg2``, ``answers`` ``[label]`` (``support`` or ``counter``)."""
    path = Path(path) if path else data_file("explagraphs", "train_dev.tsv")
    graphs = []
    reader = csv.DictReader(io.StringIO(utf8_text(path)), delimiter="\t")
    missing = {"arg1", "arg2", "label", "graph"} - set(reader.fieldnames or [])
    if missing:
        raise GraphFormatError(f"{path}:1: header lacks column(s) {sorted(missing)}")
    for i, row in enumerate(reader):
        where = f"{path}:{i + 2}"
        if None in row.values() or None in row:  # a row cut short, or one with a column too many
            fields = sum(v is not None for k, v in row.items() if k is not None) + len(row.get(None) or [])
            raise GraphFormatError(f"{where}: {fields} tab-separated fields, the header has "
                                   f"{len(reader.fieldnames)}")
        if row["label"] not in ("support", "counter"):
            raise GraphFormatError(f"{where}: field 'label' is {row['label']!r}, expected support or counter")
        graph = graph_from_triples(parse_explagraphs_graph(row["graph"], where), lowercase=True,
                                   question=explagraphs_question(row["arg1"], row["arg2"]), answers=[row["label"]],
                                   graph_id=str(i))
        graphs.append(graph)
    return graphs


def utf8_text(path: str | Path) -> str:
    """The text of ``path`` (universal newlines), or :func:`not_utf8`'s error."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise not_utf8(path) from None


def text_lines(text: str) -> list[str]:
    """``text``'s lines as a file reader gives them, split on newlines only (``str.splitlines`` also splits on form
    feeds and Unicode line separators, which a name may hold), without the last one's newline."""
    return text.removesuffix("\n").split("\n") if text else []


def utf8_rows(rows, path):
    """``rows`` (lines or parsed rows of the text file ``path``), a decoding error raised as :func:`not_utf8`'s."""
    try:
        yield from rows
    except UnicodeDecodeError:
        raise not_utf8(path) from None


def load_split(dataset: str, rows: int | None = None) -> dict[str, list[int]]:
    """The reference split of ``dataset`` (``explagraphs``: GR code's 6:2:2, 1,659 / 553 / 554), ``{"train": [...],
    "val": [...], "test": [...]}``; each index checked to be in one split only, and with ``rows``, every row in one."""
    if dataset != "explagraphs":
        raise ValueError(f"no stored split for dataset {dataset!r}")
    split = {}
    for name in ("train", "val", "test"):
        path = data_file("explagraphs", "split", f"{name}_indices.txt")
        lines = path.read_text().split()
        try:
            split[name] = [int(x) for x in lines]
        except ValueError as err:
            raise GraphFormatError(f"{path}: {err}") from None
        seen = {}
        for k, x in enumerate(split[name], 1):
            if x < 0 or x in seen:
                raise GraphFormatError(f"{path}: index {k} ({x}) is " + ("negative" if x < 0 else
                                       f"repeated (first as index {seen[x]})"))
            seen[x] = k
    for a, b in (("train", "val"), ("train", "test"), ("val", "test")):
        if both := sorted(set(split[a]) & set(split[b]))[:3]:  # a question in two splits would leak test into training
            raise GraphFormatError(f"{dataset} split: row(s) {both} in both {a} and {b}")
    covered = sorted(i for v in split.values() for i in v)
    if rows is not None and covered != list(range(rows)):  # a row added or lost would shift the labels against it
        raise GraphFormatError(f"{dataset} split: {len(covered)} indices up to {max(covered, default=-1)}, for "
                               f"{rows} rows, each in one split")
    return split


def induced_subgraph(graph: TextualGraph, node_ids) -> TextualGraph:
    """The nodes ``node_ids`` (the graph's own ids, kept) and every edge between two of them."""
    keep = set(int(n) for n in node_ids)
    nodes = graph.nodes[graph.nodes.node_id.isin(keep)]
    edges = graph.edges[graph.edges.src.isin(keep) & graph.edges.dst.isin(keep)]
    return TextualGraph(nodes, edges, graph.question, graph.answers, graph.graph_id, graph.q_entities)


def neighbourhood_preview(graph: TextualGraph, max_nodes: int = 60) -> TextualGraph:
    """At most ``max_nodes`` nodes around the question entities (breadth-first, undirected), for views
    of graphs too large to draw; graphs already small enough are returned unchanged."""
    if graph.num_nodes <= max_nodes:
        return graph
    seeds = question_nodes(graph) or [int(graph.nodes.node_id.iloc[0])]
    adj: dict[int, list[int]] = {}
    for s, d in zip(graph.edges.src.tolist(), graph.edges.dst.tolist()):
        adj.setdefault(s, []).append(d)
        adj.setdefault(d, []).append(s)
    order, seen, frontier = list(seeds), set(seeds), list(seeds)
    while frontier and len(order) < max_nodes:
        nxt = []
        for u in frontier:
            for v in adj.get(u, []):
                if v not in seen and len(order) < max_nodes:
                    seen.add(v)
                    order.append(v)
                    nxt.append(v)
        frontier = nxt
    return induced_subgraph(graph, order)


def question_nodes(graph: TextualGraph) -> list[int]:
    """Ids of the nodes whose text is exactly one of the graph's question entities (not case-insensitive: 6,164 of
    MetaQA's names collide when lower-cased, the tag ``drama`` and the genre ``Drama``; docs/method.md §3.1). Loaders
    that normalise case (WebQSP, as G-Retriever's code) do it on both sides."""
    wanted = set(graph.q_entities)
    return [int(n) for n, t in zip(graph.nodes.node_id, graph.nodes.node_attr) if str(t) in wanted]
