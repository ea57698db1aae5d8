"""Chat with your graph: ask questions about any textual graph, get answers with their evidence (GR paper §1, Fig. 1).

:class:`GraphChat` takes a graph (a benchmark graph, a ``node_id,node_attr`` / ``src,edge_attr,dst`` CSV pair, or a
file of ``head, relation, tail`` triples up to a MetaQA-sized KB), indexes it once, and answers each turn in four steps:

1. **link**: entity names written in the question (word n-grams equal to a node's name; ``[Name]`` forces one), or
   when none is written the ``link_k`` nodes most similar to the question; a follow-up ("and who directed it?": a
   pronoun, or a leading "and") also carries the previous turn's linked and answer nodes;
2. **retrieve**: G-Retriever's top-k prizes + PCST (:func:`gr_core.retrieval.retrieve_subgraph`) on the whole graph when
   it has at most ``whole_graph_edges`` edges (the paper's setting), otherwise on the ``hops``-hop neighbourhood of
   the linked nodes (GNN-RAG's way of cutting a question's subgraph out of a KB, :class:`gr_core.kg.KnowledgeGraph`);
   or GNN-RAG's reasoning paths when a trained reasoner is given (``retriever="gnn"``);
3. **answer**: the soft-prompted LLM (:class:`gr_core.model.GraphLLM`) reads the textualized evidence, for a follow-up
   the recent conversation (cut to ``history_tokens``), and the question; the model is a trained G-Retriever checkpoint from
   ``outputs/`` for this kind of graph when one exists, otherwise the frozen LLM zero-shot;
4. **check**: the response's cited nodes and edges are parsed and matched against the searched graph with the
   hallucination study's checker (:func:`gr_core.hallucination.check_response`), and the answer's own entity names
   are looked up in the graph.

Deviations from the paper, all documented in ``notebooks/00_chat.ipynb``: linking and the neighbourhood cut are ours
(G-Retriever runs PCST over each question's whole stored subgraph); linked entities get the top node prize so that the
question's own entity is never dropped by PCST; a question that names no entity and is not close to any node and
relation of the graph
(``relevance_threshold``, ``relation_threshold``) is answered "not in the graph" without calling the LLM.

Command line::

    python -m gr_core.chat --triples my_kg.tsv "who directed The Matrix?" "and who starred in it?"
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import io
import os
import pickle
import re
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from .data import EDGE_COLUMNS, NODE_COLUMNS, GraphFormatError, TextualGraph
from .kg import KnowledgeGraph, NeighbourhoodConfig
from .retrieval import DATASET_RETRIEVAL, RetrievalConfig

FORMAT_VERSION = 1  # bump when the cached index layout changes
KINDS = ("kg", "scene", "explanation")
# Which trained runs serve which kind of graph (first found wins), and whose question template and retrieval
# defaults a kind borrows (GR App. B.1: KGQA k = 3 nodes / 5 edges, C_e = 0.5; scene graphs 3 / 3, 0.5).
KIND_DATASETS = {"kg": ("metaqa", "webqsp", "webqsp_full"), "scene": ("clevr", "gqa_micro"),
                 "explanation": ("explagraphs",)}
KIND_TEMPLATE = {"kg": "webqsp", "scene": "clevr", "explanation": "webqsp"}
KIND_RETRIEVAL = {"kg": DATASET_RETRIEVAL["metaqa"], "scene": DATASET_RETRIEVAL["clevr"],
                  "explanation": DATASET_RETRIEVAL["explagraphs"]}
# Relation similarity below which a KG question asks nothing the graph relates (bench/chat.py); scene graphs'
# relations (left of, behind) and ExplaGraphs' (causes, capable of) are rarely named by the questions: not used.
KIND_RELATION_THRESHOLD = {"kg": 0.18, "scene": 0.0, "explanation": 0.0}
CHECKPOINT_PRESETS = ("full", "quick")  # smoke runs are CI-sized (one epoch on 8 questions): never served
_FOLLOW_UP = re.compile(r"^\s*(and|also|what about|how about)\b|\b(it|its|they|them|their|he|him|his|she|her|that|"
                        r"this|those|these|there|the same)\b", re.I)
_STOP = {"a", "an", "the", "of", "in", "on", "at", "to", "for", "by", "with", "and", "or", "is", "are", "was", "were",
         "be", "do", "does", "did", "what", "which", "who", "whom", "whose", "when", "where", "why", "how", "that",
         "this", "it", "its", "from", "as", "me", "i", "you", "he", "she", "they", "them", "his", "her", "their", "star",
         "movie", "movies", "film", "films", "also", "about", "any", "some", "all", "there", "other", "same"}
_WORD = re.compile(r"[\w'’.-]+", re.U)
_BRACKET = re.compile(r"\[([^\]]+)\]")


# ---------------------------------------------------------------------- reading graphs
def _open_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise GraphFormatError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise GraphFormatError(f"{path}: is a directory, expected a file") from None
    except OSError as err:
        raise GraphFormatError(f"{path}: cannot read: {err.strerror or err}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise GraphFormatError(f"{path}:{line}: not UTF-8 text (byte {err.start}); save the file as UTF-8") from None


_TRIPLE_HEADERS = {("head", "relation", "tail"), ("subject", "predicate", "object"), ("src", "edge_attr", "dst"),
                   ("source", "relation", "target"), ("h", "r", "t"), ("subject", "relation", "object")}


def read_triples(path: str | Path, delimiter: str | None = None) -> list[tuple[str, str, str]]:
    """``head, relation, tail`` per line from a text file.

    The delimiter is a tab, ``|`` (MetaQA's ``kb.txt``) or ``,`` (CSV quoting allowed), detected from the first data
    line unless given. Blank lines and lines starting with ``#`` are skipped; a header line naming the three columns
    (``head,relation,tail``, ``subject,predicate,object``, ``src,edge_attr,dst`` ...) is skipped.

    Raises:
        GraphFormatError: naming the file and line of an unreadable file, a line without exactly three fields, an
            empty field, or a file with no triple.
    """
    path = Path(path)
    text = _open_text(path)
    lines = text.splitlines()
    triples: list[tuple[str, str, str]] = []
    names = {"\t": "tabs", "|": "'|'", ",": "commas"}
    for lineno, raw in enumerate(lines, 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        if delimiter is None:
            delimiter = "\t" if "\t" in raw else "|" if "|" in raw else "," if "," in raw else None
            if delimiter is None:
                raise GraphFormatError(f"{path}:{lineno}: cannot tell the delimiter: expected 'head<TAB>relation<TAB>"
                                       f"tail' (or separated by '|' or ','), got {raw[:80]!r}")
        fields = next(csv.reader([raw], delimiter=",")) if delimiter == "," else raw.split(delimiter)
        fields = [f.strip() for f in fields]
        if len(fields) != 3:
            raise GraphFormatError(f"{path}:{lineno}: expected 3 fields (head, relation, tail) separated by "
                                   f"{names.get(delimiter, repr(delimiter))}, found {len(fields)}: {raw[:80]!r}")
        if not triples and tuple(f.lower() for f in fields) in _TRIPLE_HEADERS:
            continue
        for name, value in zip(("head", "relation", "tail"), fields):
            if not value:
                raise GraphFormatError(f"{path}:{lineno}: field '{name}' is empty: {raw[:80]!r}")
        triples.append((fields[0], fields[1], fields[2]))
    if not triples:
        raise GraphFormatError(f"{path}: no triple found (expected lines 'head<TAB>relation<TAB>tail')")
    return triples


def graph_from_triple_list(triples: list[tuple[str, str, str]]) -> TextualGraph:
    """A textual graph with one node per distinct entity string (case kept: the KB's own names, as MetaQA's)."""
    from .data import graph_from_triples

    return graph_from_triples(triples, lowercase=False)


def read_graph_csv(nodes_path: str | Path, edges_path: str | Path) -> TextualGraph:
    """The GraphQA table pair (GR Table 9): ``node_id,node_attr`` and ``src,edge_attr,dst`` CSV files.

    Raises:
        GraphFormatError: naming the file, line and field of a missing column, a non-integer or repeated node id, or
            an edge whose endpoint is not a node.
    """
    tables = {}
    for path, columns in ((Path(nodes_path), NODE_COLUMNS), (Path(edges_path), EDGE_COLUMNS)):
        reader = csv.DictReader(io.StringIO(_open_text(path)))
        missing = [c for c in columns if c not in (reader.fieldnames or [])]
        if missing:
            raise GraphFormatError(f"{path}:1: header lacks column(s) {missing} (found {reader.fieldnames})")
        rows = []
        for row in reader:
            line = reader.line_num
            values = []
            for c in columns:
                v = row.get(c)
                if v is None:
                    raise GraphFormatError(f"{path}:{line}: field '{c}' is missing")
                if c in ("node_id", "src", "dst"):
                    try:
                        v = int(v)
                    except ValueError:
                        raise GraphFormatError(f"{path}:{line}: field '{c}' must be an integer node id, "
                                               f"got {v!r}") from None
                values.append(v)
            rows.append((line, values))
        tables[path] = rows
    (npath, nrows), (epath, erows) = tables.items()
    seen: dict[int, int] = {}
    for line, (nid, _) in nrows:
        if nid in seen:
            raise GraphFormatError(f"{npath}:{line}: field 'node_id' repeats id {nid} (first on line {seen[nid]})")
        seen[nid] = line
    for line, (s, _, d) in erows:
        for name, v in (("src", s), ("dst", d)):
            if v not in seen:
                raise GraphFormatError(f"{epath}:{line}: field '{name}' names node {v}, which is not in {npath}")
    if not nrows:
        raise GraphFormatError(f"{npath}: no node")
    nodes = pd.DataFrame([v for _, v in nrows], columns=NODE_COLUMNS).astype({"node_id": np.int64, "node_attr": str})
    edges = pd.DataFrame([v for _, v in erows], columns=EDGE_COLUMNS).astype({"src": np.int64, "edge_attr": str,
                                                                              "dst": np.int64})
    return TextualGraph(nodes, edges)


def load_graph(spec: str) -> tuple[TextualGraph, str, str]:
    """A graph named by a short spec: ``metaqa`` (the MetaQA KB), ``webqsp_full:<i>``, ``webqsp:<i>``,
    ``explagraphs:<i>``, ``clevr:<i>`` (the i-th question's graph), a triples file path, or ``nodes.csv,edges.csv``.

    Returns:
        ``(graph, kind, source)``: the kind (``kg``, ``scene``, ``explanation``) serves checkpoint choice and
        templates; the source names where the graph came from (and keys the index cache).
    """
    from .paths import data_file

    name, _, arg = spec.partition(":")
    if spec == "metaqa":
        path = data_file("metaqa", "kb.txt")
        return graph_from_triple_list(read_triples(path, "|")), "kg", str(path)
    if name in ("webqsp_full", "webqsp", "explagraphs", "clevr", "gqa_micro") and arg.isdigit():
        from .graphqa import load_dataset

        ds = load_dataset(name)
        i = int(arg)
        if i >= len(ds):
            raise ValueError(f"graph spec {spec!r}: {name} has {len(ds)} graphs")
        g = ds.graph(i)
        kind = "kg" if name.startswith("webqsp") else "explanation" if name == "explagraphs" else "scene"
        return TextualGraph(g.nodes[NODE_COLUMNS], g.edges[EDGE_COLUMNS], graph_id=f"{name}:{i}"), kind, spec
    if "," in spec and not Path(spec).exists():
        nodes, edges = spec.split(",", 1)
        return read_graph_csv(nodes, edges), "kg", spec
    return graph_from_triple_list(read_triples(spec)), "kg", spec


# ---------------------------------------------------------------------- the index
def _scene_name(text: str) -> str:
    m = re.match(r"\s*name:\s*([^;]*)", text)
    return m.group(1).strip() if m else text


def _digest(graph: TextualGraph) -> str:
    h = hashlib.sha256()
    for col in NODE_COLUMNS:
        h.update("\x1f".join(map(str, graph.nodes[col].tolist())).encode())
    for col in EDGE_COLUMNS:
        h.update("\x1f".join(map(str, graph.edges[col].tolist())).encode())
    return h.hexdigest()


@dataclass
class ChatIndex:
    """One graph, indexed once: the KB arrays (entity id = node row), CSR adjacency, embeddings, a name table.

    Shapes:
        ``node_emb``: ``(num_nodes, dim)`` float32, L2-normalized; ``rel_emb``: ``(num_relations, dim)``;
        ``node_ids``: ``(num_nodes,)`` the graph's own node ids (shown in the prompt and the evidence).
    """

    kg: KnowledgeGraph
    node_ids: np.ndarray
    node_emb: np.ndarray
    rel_emb: np.ndarray
    names: dict[str, list[int]]
    max_name_words: int
    digest: str
    seconds: float = 0.0
    cached: bool = False

    @property
    def num_nodes(self) -> int:
        return self.kg.num_entities

    @property
    def num_edges(self) -> int:
        return self.kg.num_edges

    @classmethod
    def build(cls, graph: TextualGraph, encoder: str | None = None, cache: bool = True) -> "ChatIndex":
        """Index ``graph``: texts embedded once each (:class:`~gr_core.text_encoder.EmbeddingStore`, shared with the
        datasets), the whole index pickled under ``.cache/chat/`` keyed by the graph's content and the encoder."""
        from .config import EMBEDDED_TEXT_ENCODER, TextEncoderConfig
        from .paths import cache_root
        from .runs import atomic_write_bytes, config_hash
        from .text_encoder import EmbeddingStore, encoder_identity

        t0 = time.perf_counter()
        if graph.num_nodes == 0:
            raise GraphFormatError("the graph has no node: nothing to chat about")
        enc = TextEncoderConfig(model=encoder or EMBEDDED_TEXT_ENCODER)
        digest = _digest(graph)
        key = config_hash({"graph": digest, "encoder": encoder_identity(enc), "format": FORMAT_VERSION})
        path = cache_root() / "chat" / f"index-{key}.pkl"
        if cache and path.is_file():
            try:
                index = pickle.loads(path.read_bytes())
                index.seconds, index.cached = time.perf_counter() - t0, True
                return index
            except Exception:  # a truncated file: rebuild it
                path.unlink(missing_ok=True)
        node_ids = graph.nodes.node_id.to_numpy(np.int64)
        texts = graph.nodes.node_attr.astype(str).tolist()
        pos = pd.Series(np.arange(len(node_ids)), index=node_ids)
        if pos.index.has_duplicates:
            raise GraphFormatError(f"node id {int(pos.index[pos.index.duplicated()][0])} appears twice in the node table")
        rel_names, rel_ids = np.unique(graph.edges.edge_attr.astype(str).to_numpy(), return_inverse=True)
        heads, tails = pos.reindex(graph.edges.src).to_numpy(), pos.reindex(graph.edges.dst).to_numpy()
        if np.isnan(heads.astype(float)).any() or np.isnan(tails.astype(float)).any():
            raise GraphFormatError("an edge names a node id that is not in the node table")
        kg = KnowledgeGraph(texts, rel_names.tolist(), heads.astype(np.int64), rel_ids, tails.astype(np.int64))
        store = EmbeddingStore(enc)
        distinct = list(dict.fromkeys(texts + rel_names.tolist()))
        emb, _ = store.encode(distinct, desc="index graph")
        row = {t: k for k, t in enumerate(distinct)}
        node_emb = emb[[row[t] for t in texts]]
        rel_emb = emb[[row[t] for t in rel_names.tolist()]] if len(rel_names) else np.zeros((0, emb.shape[1]), np.float32)
        names: dict[str, list[int]] = {}
        longest = 1
        for k, t in enumerate(texts):
            name = " ".join(_WORD.findall(_scene_name(t).lower()))
            if len(name) >= 2:
                names.setdefault(name, []).append(k)
                longest = max(longest, len(name.split()))
        index = cls(kg, node_ids, node_emb.astype(np.float32), rel_emb.astype(np.float32), names, min(longest, 12),
                    digest)
        if cache:
            atomic_write_bytes(path, pickle.dumps(index, protocol=pickle.HIGHEST_PROTOCOL))
        index.seconds = time.perf_counter() - t0
        return index

    # ------------------------------------------------------------------ linking
    def link(self, question: str) -> list[int]:
        """Node rows whose name the question writes: ``[Name]`` spans, else the longest word n-grams equal to a node
        name (not overlapping; a one-word name only when it is not a common word, or written capitalized).

        Returns node rows, in the order they appear in the question.
        """
        found: list[int] = []
        for span in _BRACKET.findall(question):
            found += self.names.get(" ".join(_WORD.findall(span.lower())), [])
        if found:
            return list(dict.fromkeys(found))
        words = _WORD.findall(_BRACKET.sub(r"\1", question))
        low = [w.lower().strip(".'’") for w in words]
        taken = [False] * len(words)
        hits: list[tuple[int, list[int]]] = []
        for n in range(min(self.max_name_words, len(words)), 0, -1):
            for s in range(len(words) - n + 1):
                if any(taken[s:s + n]):
                    continue
                gram = " ".join(low[s:s + n])
                rows = self.names.get(gram)
                if not rows or all(w in _STOP for w in low[s:s + n]):
                    continue
                if n == 1 and (low[s] in _STOP or not words[s][:1].isupper() or s == 0):
                    continue  # one-word names (titles such as "Up", tags such as "drama") only capitalized mid-sentence
                hits.append((s, rows))
                taken[s:s + n] = [True] * n
        return list(dict.fromkeys(r for _, rows in sorted(hits) for r in rows))

    def rows_of(self, node_ids) -> list[int]:
        """Index rows of the graph's node ids (ids that are not in the graph are dropped)."""
        if "_pos" not in self.__dict__:
            self.__dict__["_pos"] = pd.Index(self.node_ids)
        rows = self.__dict__["_pos"].get_indexer(list(node_ids))
        return [int(r) for r in rows if r >= 0]

    # ------------------------------------------------------------------ scope and retrieval
    def similarities(self, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Cosine similarity of the question to every node ``(num_nodes,)`` and every relation ``(num_relations,)``."""
        from .retrieval import similarities

        return similarities(query, self.node_emb), similarities(query, self.rel_emb)

    def scope(self, seeds: np.ndarray, hops: int, max_nodes: int, max_expand_degree: int, whole_graph_edges: int
              ) -> tuple[np.ndarray, np.ndarray]:
        """The part of the graph a turn searches: everything when the graph is small, else the seeds' neighbourhood.

        Returns:
            ``(node rows, edge rows)`` of the index.
        """
        if self.num_edges <= whole_graph_edges:
            return np.arange(self.num_nodes), np.arange(self.num_edges)
        return self.kg.neighbourhood(seeds, NeighbourhoodConfig(hops, max_expand_degree, max_nodes))

    def subgraph(self, nodes: np.ndarray, edges: np.ndarray) -> TextualGraph:
        """Node rows / edge rows as a textual graph with the graph's own node ids (``row``, ``kb_edge`` kept)."""
        ents = np.asarray(self.kg.entities, dtype=object)
        rels = np.asarray(self.kg.relations, dtype=object)
        node_df = pd.DataFrame({"node_id": self.node_ids[nodes], "node_attr": ents[nodes], "row": nodes})
        edge_df = pd.DataFrame({"src": self.node_ids[self.kg.heads[edges]], "edge_attr": rels[self.kg.rels[edges]],
                                "dst": self.node_ids[self.kg.tails[edges]], "kb_edge": edges})
        return TextualGraph(node_df, edge_df)


# ---------------------------------------------------------------------- configuration and results
@dataclass(frozen=True)
class ChatConfig:
    """How :class:`GraphChat` retrieves and answers.

    Attributes:
        kind: ``kg``, ``scene`` or ``explanation``: picks the checkpoint family, the question template and retrieval
            defaults (``KIND_RETRIEVAL``: GR App. B.1).
        retriever: ``pcst`` (G-Retriever) or ``gnn`` (GNN-RAG's reasoning paths; needs a trained reasoner).
        top_k_nodes, top_k_edges, edge_cost: override the kind's PCST settings (None keeps them).
        link_k: most similar nodes that seed the neighbourhood of a large graph when the question links no entity.
        hops, max_nodes, max_expand_degree: the neighbourhood cut for large graphs
            (see :class:`~gr_core.kg.NeighbourhoodConfig`).
        whole_graph_edges: graphs with at most this many edges are searched whole (the paper's setting).
        edge_tiebreak: weight of the endpoints' similarity added to each edge's relation similarity, which breaks the
            relation tie groups of KBs with few relations (0 = the paper's rule; see :meth:`GraphChat.retrieve`).
        relevance_threshold, relation_threshold: a question that names no entity of the graph (a linked name of two or
            more content words, or a ``[Name]``) and is not a follow-up is "not about this graph" when its best node
            similarity is below ``relevance_threshold`` or its best relation similarity below ``relation_threshold``
            (None: :data:`KIND_RELATION_THRESHOLD`). The KG value separates MetaQA questions from off-topic ones in
            ``bench/chat.py`` (relation similarity 5th percentile 0.21 vs 95th percentile 0.16 there; calibrated on
            that sample, so another graph may need its own).
        history_turns, history_tokens: earlier turns kept in the prompt, most recent first, within this many tokens.
        max_txt_len: token budget of the textualized evidence (GR code: 512).
        max_new_tokens: answer budget (GR code 32; citations need more).
        cite: also ask the model to list the supporting nodes and edges (GR App. F's request). The answer is checked
            either way (its entity names and any citation it writes); off by default because the embedded 135M
            models then echo CSV rows instead of answering (``bench/chat.py`` measures Hit with and without it).
    """

    kind: str = "kg"
    retriever: str = "pcst"
    top_k_nodes: int | None = None
    top_k_edges: int | None = None
    edge_cost: float | None = None
    link_k: int = 3
    hops: int = 2  # MetaQA questions reach 3 hops; 2 keeps neighbourhoods of hub-rich KBs small
    max_nodes: int = 2000  # GNN-RAG's dense subgraphs keep 2,000 entities
    max_expand_degree: int = 200  # see NeighbourhoodConfig
    whole_graph_edges: int = 20_000
    relevance_threshold: float = 0.3
    relation_threshold: float | None = None
    edge_tiebreak: float = 0.0  # the paper's rule; bench/chat.py measures 1e-3 beside it
    history_turns: int = 3
    history_tokens: int = 160
    max_txt_len: int = 512  # GR code src/config.py
    max_new_tokens: int = 48
    cite: bool = False  # measured: the 135M models answer worse when asked to cite (bench/chat.py)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"ChatConfig.kind={self.kind!r} is not one of {KINDS}")
        if self.retriever not in ("pcst", "gnn"):
            raise ValueError(f"ChatConfig.retriever={self.retriever!r} is not 'pcst' or 'gnn'")
        if self.link_k < 0 or self.hops < 0 or self.max_nodes < 1 or self.history_turns < 0 or self.max_new_tokens < 1:
            raise ValueError("ChatConfig: link_k, hops, history_turns >= 0; max_nodes, max_new_tokens >= 1 required")

    @property
    def retrieval(self) -> RetrievalConfig:
        cfg = KIND_RETRIEVAL[self.kind]
        over = {k: v for k, v in (("top_k_nodes", self.top_k_nodes), ("top_k_edges", self.top_k_edges),
                                  ("edge_cost", self.edge_cost)) if v is not None}
        return replace(cfg, **over)


STATUSES = ("answered", "empty_question", "unrelated", "no_edges")


@dataclass
class Turn:
    """One question and its answer, with the evidence behind it.

    Attributes:
        status: ``answered``; ``empty_question`` (nothing asked, no model call); ``unrelated`` (the graph holds
            nothing close to the question: no model call); ``no_edges`` (a graph without edges: the evidence is the
            most similar nodes).
        evidence: the retrieved subgraph (the graph's own node ids); ``desc`` its text as the LLM read it (cut).
        linked: node ids of the entities linked in the question (and carried from the previous turn).
        answer_nodes: node ids of the searched graph the answer names (a part matched at the checker's ``normalized``
            level, or a node name written in a sentence), the question's own entities excluded.
        citations: each parsed citation with its verdict per match level (see :mod:`gr_core.hallucination`).
        cited_nodes, cited_edges: node ids and evidence edge rows the valid citations point at (for highlighting).
        paths: GNN-RAG's reasoning paths (``retriever="gnn"``).
        timings: seconds per step (``encode``, ``link``, ``scope``, ``pcst``/``gnn``, ``retrieval``, ``answer``, ``check``).
    """

    question: str
    answer: str = ""
    status: str = "answered"
    note: str = ""
    evidence: TextualGraph | None = None
    desc: str = ""
    linked: list[int] = field(default_factory=list)
    answer_nodes: list[int] = field(default_factory=list)
    citations: list[dict] = field(default_factory=list)
    cited_nodes: list[int] = field(default_factory=list)
    cited_edges: list[int] = field(default_factory=list)
    fully_valid: bool | None = None
    paths: list[str] = field(default_factory=list)
    follow_up: bool = False
    model: str = ""
    best_similarity: float | None = None
    best_relation_similarity: float | None = None
    searched_nodes: int = 0
    searched_edges: int = 0
    timings: dict = field(default_factory=dict)
    scope: TextualGraph | None = field(default=None, repr=False)  # the searched graph (citations are checked on it)

    def triples(self) -> list[tuple[str, str, str]]:
        """The evidence as ``(head, relation, tail)`` strings."""
        return self.evidence.triples() if self.evidence is not None else []

    def to_dict(self) -> dict:
        """A JSON-ready record (evidence as node and triple lists)."""
        from dataclasses import fields

        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("evidence", "scope")}
        ev = self.evidence
        d["evidence_nodes"] = [] if ev is None else [
            {"node_id": int(n), "text": str(t)} for n, t in zip(ev.nodes.node_id, ev.nodes.node_attr)]
        d["evidence_triples"] = [list(t) for t in self.triples()]
        return d

    def show(self, out_html: str | Path | None = None, height: int = 420) -> str:
        """The evidence as an offline pyvis view: question entities green, answer and cited nodes red, cited edges red."""
        from .viz import show_graph

        if self.evidence is None or self.evidence.num_nodes == 0:
            print(f"(no evidence: {self.note or self.status})")
            return ""
        colors = {n: "#2ca02c" for n in self.linked}
        colors.update({n: "#d62728" for n in set(self.answer_nodes) | set(self.cited_nodes)})
        return show_graph(self.evidence, out_html=out_html, height=height, node_colors=colors,
                          highlight_edges=self.cited_edges)

    def __str__(self) -> str:
        lines = [f"Q: {self.question}", f"A: {self.answer}" if self.answer else f"A: ({self.status}) {self.note}"]
        if self.evidence is not None and self.evidence.num_edges:
            lines.append(f"evidence ({self.evidence.num_nodes} nodes, {self.evidence.num_edges} edges):")
            lines += [f"  ({h} | {r} | {t})" for h, r, t in self.triples()[:20]]
            if self.evidence.num_edges > 20:
                lines.append(f"  ... {self.evidence.num_edges - 20} more")
        if self.citations:
            ok = sum(bool(c.get("normalized")) for c in self.citations)
            lines.append(f"citations: {ok} of {len(self.citations)} found in the graph")
        if self.note and self.answer:
            lines.append(f"note: {self.note}")
        return "\n".join(lines)


# ---------------------------------------------------------------------- models
def find_checkpoint(kind: str, outputs: str | Path | None = None, llm_model: str | None = None,
                    presets=CHECKPOINT_PRESETS) -> Path | None:
    """The run directory of a trained G-Retriever for ``kind`` (``outputs/<preset>/runs/<dataset>-g_retriever-seed*``),
    best preset first, then dataset order of :data:`KIND_DATASETS`; only runs whose ``ckpt/best.pt`` carries the
    hash of their ``config.json`` (and, when ``llm_model`` is given, were trained on that LLM)."""
    import torch

    from .paths import OUTPUTS_ENV, repo_root
    from .runs import config_hash, read_json
    from .train import RunConfig

    root = Path(outputs or os.environ.get(OUTPUTS_ENV) or repo_root() / "outputs")
    for preset in presets:
        for dataset in KIND_DATASETS[kind]:
            for run_dir in sorted((root / preset / "runs").glob(f"{dataset}-g_retriever-seed*")):
                cfg_path, best = run_dir / "config.json", run_dir / "ckpt" / "best.pt"
                if not (cfg_path.is_file() and best.is_file()):
                    continue
                raw = {k: v for k, v in read_json(cfg_path).items() if k not in ("name", "config_hash")}
                cfg = RunConfig.from_dict(raw)
                if llm_model and cfg.model.llm.model != llm_model:
                    continue
                state = torch.load(best, map_location="cpu", weights_only=False)
                if state.get("config_hash") == config_hash(cfg.to_dict()):
                    return run_dir
    return None


# Saved reasoners (notebook 04) that serve a KG chat, first found wins: MetaQA's multi-hop ones, then WebQSP's.
REASONER_KEYS = ("metaqa-2hop", "metaqa-3hop", "metaqa-1hop", "webqsp")


def find_reasoner(outputs: str | Path | None = None, presets=CHECKPOINT_PRESETS) -> Path | None:
    """A GNN-RAG reasoner saved by notebook 04 (``outputs/<preset>/04_gnn_rag/reasoners/<key>.pt``), best preset
    first, in :data:`REASONER_KEYS` order; None when there is none."""
    from .paths import OUTPUTS_ENV, repo_root

    root = Path(outputs or os.environ.get(OUTPUTS_ENV) or repo_root() / "outputs")
    for preset in presets:
        for key in REASONER_KEYS:
            path = root / preset / "04_gnn_rag" / "reasoners" / f"{key}.pt"
            if path.is_file():
                return path
    return None


def load_answerer(model: str, kind: str, llm_model: str, device: str, max_txt_len: int, in_dim: int):
    """The GraphLLM that answers: ``auto`` (a trained checkpoint for ``kind``, else zero-shot), ``zero_shot``, or a
    run directory. Returns ``(GraphLLM, description, run_dir or None)``."""
    import torch

    from .config import LLMConfig
    from .model import GraphLLM, method_config
    from .runs import read_json
    from .train import RunConfig

    run_dir = None
    if model == "auto":
        run_dir = find_checkpoint(kind, llm_model=llm_model)
    elif model != "zero_shot":
        run_dir = Path(model)
        if not (run_dir / "config.json").is_file() or not (run_dir / "ckpt" / "best.pt").is_file():
            raise FileNotFoundError(f"{run_dir}: not a finished training run (needs config.json and ckpt/best.pt)")
    if run_dir is None:
        cfg = method_config("zero_shot", llm=LLMConfig(model=llm_model, device=device), max_txt_len=max_txt_len)
        presets = ",".join(CHECKPOINT_PRESETS)
        why = f" (no trained {kind} checkpoint in outputs/{{{presets}}}/runs)" if model == "auto" else ""
        return GraphLLM(cfg).eval(), f"zero-shot {llm_model}{why}", None
    raw = {k: v for k, v in read_json(run_dir / "config.json").items() if k not in ("name", "config_hash")}
    cfg = RunConfig.from_dict(raw)
    mcfg = replace(cfg.model, llm=replace(cfg.model.llm, device=device))
    state = torch.load(run_dir / "ckpt" / "best.pt", map_location="cpu", weights_only=False)["model"]  # read once
    if mcfg.gnn is not None and in_dim != checkpoint_in_dim(state, run_dir):
        raise ValueError(f"{run_dir}: its graph encoder reads {checkpoint_in_dim(state, run_dir)}-d text embeddings; "
                         f"this graph is indexed with {in_dim}-d ones (a different sentence encoder)")
    net = GraphLLM(mcfg, in_dim=in_dim)
    net.load_trainable_state(state)
    return net.eval(), f"trained {cfg.method} ({run_dir.parent.parent.name}/{run_dir.name})", run_dir


def checkpoint_in_dim(state: dict, run_dir: Path | str = "") -> int:
    """The text-embedding width a checkpoint's graph encoder was trained on (its first layer's input), from the
    checkpoint's ``model`` state dict."""
    for name, value in state.items():
        if name.startswith("gnn.") and name.endswith("weight") and value.dim() == 2:
            return int(value.shape[1])
    raise ValueError(f"{run_dir}: no graph encoder weight in the checkpoint")


# ---------------------------------------------------------------------- the conversation
class GraphChat:
    """A conversation with one graph.

    Args:
        graph: a :class:`~gr_core.data.TextualGraph`, a spec for :func:`load_graph` (``"metaqa"``, a triples file,
            ``"nodes.csv,edges.csv"``, ``"webqsp_full:0"``), or a list of ``(head, relation, tail)`` tuples.
        model: ``"auto"`` (a trained G-Retriever for this kind of graph from ``outputs/``, else zero-shot),
            ``"zero_shot"``, or a run directory.
        llm_model: the LLM (the embedded SmolLM2-135M-Instruct, or any Hugging Face path).
        reasoner: a trained GNN-RAG reasoner (:class:`~gr_core.gnn_rag.ReaRev`) or its saved file, for
            ``retriever="gnn"``; when not given, the one :func:`find_reasoner` finds in ``outputs/``.
        config: a :class:`ChatConfig`; keyword arguments override its fields.

    >>> chat = GraphChat("my_kg.tsv")                          # doctest: +SKIP
    >>> print(chat.ask("who directed The Matrix?"))            # doctest: +SKIP
    """

    def __init__(self, graph, model: str = "auto", llm_model: str = "embedded:smollm2-135m-instruct",
                 device: str = "auto", encoder: str | None = None, reasoner=None, config: ChatConfig | None = None,
                 **overrides):
        kind = overrides.pop("kind", None)
        source = "graph"
        if isinstance(graph, (str, Path)):
            graph, spec_kind, source = load_graph(str(graph))
            kind = kind or spec_kind
        elif isinstance(graph, list):
            graph, source = graph_from_triple_list(graph), "triples"
        self.config = replace(config or ChatConfig(), **({"kind": kind} if kind else {}), **overrides)
        self.source = source
        self.graph = graph
        self.index = ChatIndex.build(graph, encoder)
        self.encoder_name = encoder
        self._encoder = None
        self.model_spec, self.llm_model, self.device = model, llm_model, device
        self._llm = None
        self.model_name = ""
        if reasoner is None and self.config.retriever == "gnn":
            reasoner = find_reasoner()
        self.reasoner_path = str(reasoner) if isinstance(reasoner, (str, Path)) else None
        self.reasoner = self._load_reasoner(reasoner) if reasoner is not None else None
        dim = int(self.index.node_emb.shape[1])
        if self.reasoner is not None and getattr(self.reasoner, "text_dim", dim) != dim:
            raise ValueError(f"the reasoner reads {self.reasoner.text_dim}-d text embeddings; this graph is indexed with "
                             f"{dim}-d ones (a different sentence encoder)")
        if self.config.retriever == "gnn" and self.reasoner is None:
            raise ValueError("retriever='gnn' needs a trained reasoner and none was found in outputs/{full,quick}/"
                             "04_gnn_rag/reasoners/ (notebook 04 saves them there): pass reasoner=<ReaRev or its .pt>")
        self.history: list[Turn] = []

    # ------------------------------------------------------------------ lazy parts
    @staticmethod
    def _load_reasoner(reasoner):
        if isinstance(reasoner, (str, Path)):
            from .gnn_rag import load_reasoner

            return load_reasoner(reasoner)
        return reasoner

    @property
    def encoder(self):
        if self._encoder is None:
            from .config import EMBEDDED_TEXT_ENCODER, TextEncoderConfig
            from .text_encoder import load_text_encoder

            self._encoder = load_text_encoder(TextEncoderConfig(model=self.encoder_name or EMBEDDED_TEXT_ENCODER))
        return self._encoder

    @property
    def llm(self):
        """The answering GraphLLM, loaded on first use."""
        if self._llm is None:
            self._llm, self.model_name, _ = load_answerer(self.model_spec, self.config.kind, self.llm_model, self.device,
                                                          self.config.max_txt_len, int(self.index.node_emb.shape[1]))
        return self._llm

    def reuse_model(self, other: "GraphChat") -> None:
        """Answer with ``other``'s already loaded model (no second load); it must suit this graph's kind."""
        self._llm, self.model_name = other.llm, other.model_name

    def reset(self) -> None:
        """Forget the conversation (the index and models stay loaded)."""
        self.history = []

    def embed(self, text: str) -> np.ndarray:
        """The question's sentence embedding ``(dim,)``, L2-normalized."""
        return np.asarray(self.encoder.encode([text], normalize_embeddings=True, convert_to_numpy=True)[0], np.float32)

    # ------------------------------------------------------------------ retrieval
    def retrieve(self, question: str) -> Turn:
        """Steps 1-2 for ``question`` in the current conversation: a :class:`Turn` with its evidence, not answered."""
        cfg, index = self.config, self.index
        turn = Turn(question=question)
        t0 = time.perf_counter()
        prev = self.history[-1] if self.history else None
        linked = index.link(question)
        turn.follow_up = prev is not None and prev.status == "answered" and bool(_FOLLOW_UP.search(question))
        query_text = f"{prev.question} {question}" if turn.follow_up else question
        t = time.perf_counter()
        q = self.embed(query_text)
        turn.timings["encode"] = time.perf_counter() - t
        t = time.perf_counter()
        node_sim, rel_sim = index.similarities(q)
        carried = []
        if turn.follow_up:
            carried = index.rows_of(prev.linked + prev.answer_nodes)
        seeds = list(dict.fromkeys(linked + carried))
        k = min(cfg.link_k, index.num_nodes)
        top = np.argpartition(-node_sim, k - 1)[:k] if k else np.zeros(0, np.int64)
        turn.best_similarity = float(node_sim.max())
        turn.linked = [int(index.node_ids[r]) for r in seeds]
        turn.timings["link"] = time.perf_counter() - t
        turn.best_relation_similarity = float(rel_sim.max()) if len(rel_sim) else None
        rel_threshold = cfg.relation_threshold if cfg.relation_threshold is not None else KIND_RELATION_THRESHOLD[cfg.kind]
        named = bool(_BRACKET.search(question) and linked) or any(
            sum(w not in _STOP for w in _WORD.findall(index.kg.entities[r].lower())) >= 2 for r in linked)
        asks_relation = turn.best_relation_similarity is None or turn.best_relation_similarity >= rel_threshold
        if not (turn.follow_up or named or (turn.best_similarity >= cfg.relevance_threshold and asks_relation)):
            turn.status = "unrelated"
            best = index.kg.entities[int(np.argmax(node_sim))]
            why = (f"the closest node, {best!r}, has similarity {turn.best_similarity:.2f} < {cfg.relevance_threshold}"
                   if turn.best_similarity < cfg.relevance_threshold else
                   f"the closest relation, {index.kg.relations[int(np.argmax(rel_sim))]!r}, has similarity "
                   f"{turn.best_relation_similarity:.2f} < {rel_threshold}")
            turn.note = f"nothing in this graph seems to be about the question: it names no entity of the graph and {why}"
            turn.timings["retrieval"] = time.perf_counter() - t0
            return turn
        t = time.perf_counter()
        # The neighbourhood grows from the linked entities (GNN-RAG: entity linking, then k hops); the most similar
        # nodes seed it only when nothing is linked, since a similar hub (a genre, a tag) would fill the node cap.
        nodes, edges = index.scope(np.asarray(seeds, np.int64) if seeds else top, cfg.hops,
                                   cfg.max_nodes, cfg.max_expand_degree, cfg.whole_graph_edges)
        scope = index.subgraph(nodes, edges)
        turn.searched_nodes, turn.searched_edges = len(nodes), len(edges)
        turn.timings["scope"] = time.perf_counter() - t
        t = time.perf_counter()
        local_seeds = np.flatnonzero(np.isin(nodes, seeds))
        if len(edges) == 0:
            similar = np.argsort(-node_sim[nodes])[:max(cfg.retrieval.top_k_nodes, 1)]
            keep = np.unique(np.concatenate([local_seeds, similar]))
            turn.evidence = TextualGraph(scope.nodes.iloc[keep], scope.edges.iloc[:0])
            turn.status = "no_edges"
            turn.note = "the graph has no edges here: the evidence is the most similar nodes"
        elif cfg.retriever == "gnn":
            turn.evidence, turn.paths = self._gnn_evidence(scope, nodes, edges, q, local_seeds, node_sim)
            turn.timings["gnn"] = time.perf_counter() - t
        else:
            from .retrieval import retrieve_subgraph

            extra = np.zeros(len(nodes), np.float32)
            extra[local_seeds] = max(cfg.retrieval.top_k_nodes, 1)  # linked entities: the top node prize
            edge_sim = rel_sim[index.kg.rels[edges]]
            if cfg.edge_tiebreak:
                # Edges carry their relation's similarity (GR Eq. 4), so a KB with few relations has tie groups of
                # hundreds of edges whose shared prize is tiny, and the "at least one edge" clamp lowers C_e to it.
                # Ordering each tie group by how close the edge's endpoints are to the question keeps the relation
                # order and gives the top k_e edges real prizes (bench/chat.py: smaller evidence, less coverage).
                ends = node_sim[index.kg.heads[edges]] + node_sim[index.kg.tails[edges]]
                edge_sim = edge_sim + np.float32(cfg.edge_tiebreak) * ends
            res = retrieve_subgraph(scope, None, None, None, cfg.retrieval, node_sim=node_sim[nodes],
                                    edge_sim=edge_sim, extra_node_prizes=extra)
            turn.evidence = res.graph
            turn.timings["pcst"] = time.perf_counter() - t
        from .textualize import textualize

        turn.desc = textualize(TextualGraph(turn.evidence.nodes[NODE_COLUMNS], turn.evidence.edges[EDGE_COLUMNS]))
        turn.scope = scope
        turn.timings["retrieval"] = time.perf_counter() - t0
        return turn

    def _gnn_evidence(self, scope: TextualGraph, nodes: np.ndarray, edges: np.ndarray, q: np.ndarray,
                      local_seeds: np.ndarray, node_sim: np.ndarray) -> tuple[TextualGraph, list[str]]:
        """GNN-RAG on the searched graph: node probabilities, the 0.95 candidate set, shortest paths from the linked
        nodes (the most similar node when none is linked); the evidence is the subgraph the paths run through."""
        import torch
        from torch_geometric.data import Data

        from .data import induced_subgraph
        from .gnn_rag import node_probabilities, reasoning_paths, select_candidates

        if len(local_seeds) == 0:
            local_seeds = np.array([int(np.argmax(node_sim[nodes]))])
        seed = np.zeros(len(nodes), bool)
        seed[local_seeds] = True
        pos = np.full(self.index.num_nodes, -1, np.int64)
        pos[nodes] = np.arange(len(nodes))
        kg = self.index.kg
        data = Data(edge_index=torch.from_numpy(np.stack([pos[kg.heads[edges]], pos[kg.tails[edges]]])).view(2, -1),
                    rel_emb=torch.from_numpy(self.index.rel_emb[kg.rels[edges]]), seed=torch.from_numpy(seed),
                    answer=torch.zeros(len(nodes), dtype=torch.bool), q_emb=torch.from_numpy(q).view(1, -1),
                    num_nodes=len(nodes))
        probs = node_probabilities(self.reasoner, [data])[0]
        ids = scope.nodes.node_id.to_numpy()
        cands = [int(ids[c]) for c, _ in select_candidates(probs, set(local_seeds.tolist()))][:5]
        report = reasoning_paths(scope, [int(ids[s]) for s in local_seeds], cands)
        keep = set(int(ids[s]) for s in local_seeds) | set(report.nodes)
        sub = induced_subgraph(scope, keep)
        return TextualGraph(sub.nodes, sub.edges), report.lines

    # ------------------------------------------------------------------ answering
    def history_text(self) -> str:
        """Earlier answered turns, most recent kept first, within ``history_turns`` and ``history_tokens``."""
        from .llm import count_tokens

        cfg = self.config
        kept: list[str] = []
        used = 0
        answered = [t for t in self.history if t.status == "answered"]
        for turn in reversed(answered[-cfg.history_turns:] if cfg.history_turns else []):
            text = f"Q: {turn.question}\nA: {turn.answer}\n"
            n = count_tokens(self.llm.tokenizer, [text])[0]
            if used + n > cfg.history_tokens:
                break
            kept.insert(0, text)
            used += n
        return "Earlier in this conversation:\n" + "".join(kept) + "\n" if kept else ""

    def prompt_question(self, question: str, follow_up: bool = True) -> str:
        """The question string the LLM reads after the evidence: the recent conversation (for a follow-up only: a new
        question stands alone, as its retrieval does), then the kind's template (with the citation request when
        ``cite``)."""
        from .prompts import cite_question, question_for

        dataset = KIND_TEMPLATE[self.config.kind]
        q = cite_question(dataset, question) if self.config.cite else question_for(dataset, question)
        return (self.history_text() if follow_up else "") + q

    def answer(self, turn: Turn) -> Turn:
        """Step 3-4: generate the answer from the turn's evidence, then check it against the searched graph."""
        import torch
        from torch_geometric.data import Data

        from .hallucination import GraphIndex, check_response, parse_citations
        from .model import Example

        net = self.llm
        t = time.perf_counter()
        ev = turn.evidence
        data = None
        if net.gnn is not None:
            rows = ev.nodes.row.to_numpy()
            pos = {int(n): k for k, n in enumerate(ev.nodes.node_id.tolist())}
            kb_edges = ev.edges.kb_edge.to_numpy() if "kb_edge" in ev.edges else np.zeros(0, np.int64)
            ei = np.array([[pos[int(s)] for s in ev.edges.src], [pos[int(d)] for d in ev.edges.dst]], np.int64)
            data = Data(x=torch.from_numpy(np.ascontiguousarray(self.index.node_emb[rows])),
                        edge_index=torch.from_numpy(ei).view(2, -1),
                        edge_attr=torch.from_numpy(np.ascontiguousarray(self.index.rel_emb[self.index.kg.rels[kb_edges]])),
                        num_nodes=len(rows))
        ex = Example(uid="chat", question=self.prompt_question(turn.question, turn.follow_up), desc=turn.desc, label="",
                     answers=[], data=data)
        batch = net.collate(net.tokenize([ex]), with_label=False).to(net.device)
        turn.answer = net.generate(batch, self.config.max_new_tokens)[0]
        turn.model = self.model_name
        turn.timings["answer"] = time.perf_counter() - t
        t = time.perf_counter()
        scope = TextualGraph(turn.scope.nodes[NODE_COLUMNS], turn.scope.edges[EDGE_COLUMNS])
        scope_index = GraphIndex(scope)  # one matcher for the citations and the answer's names
        check = check_response(turn.answer, scope, index=scope_index)
        turn.citations = check["citations"]
        turn.fully_valid = check["fully_valid_normalized"] if turn.citations else None
        evidence = TextualGraph(ev.nodes[NODE_COLUMNS], ev.edges[EDGE_COLUMNS])
        nodes, edge_rows = GraphIndex(evidence).evidence(parse_citations(turn.answer))
        turn.cited_nodes, turn.cited_edges = sorted(nodes), sorted(edge_rows)
        turn.answer_nodes = self.answer_nodes(turn.answer, turn.question, scope, scope_index)
        turn.timings["check"] = time.perf_counter() - t
        if not turn.answer_nodes and turn.status == "answered":
            turn.note = "the answer names no node of the graph (it may not be grounded in it)"
        return turn

    def answer_nodes(self, answer: str, question: str, graph: TextualGraph, graph_index=None) -> list[int]:
        """Node ids of ``graph`` the answer names: the parts of its first line (split on ``|``, ``,``, ``;``, " and ")
        matched at the checker's ``normalized`` level, and node names written inside a sentence ("... was designed by
        Charles Babbage"); the entities the question itself names are not answers. ``graph_index``: ``graph``'s
        :class:`~gr_core.hallucination.GraphIndex` when already built."""
        from .hallucination import GraphIndex

        head = answer.strip().splitlines()[0] if answer.strip() else ""
        parts = [p.strip(" .") for p in re.split(r"\||,|;|\band\b", head) if p.strip(" .")]
        found: list[int] = []
        if parts:
            index = graph_index if graph_index is not None else GraphIndex(graph)
            for p in parts[:10]:
                found += sorted(index.matching_nodes(p, "normalized"))
        found += [int(self.index.node_ids[r]) for r in self.index.link(answer)]
        asked = {int(self.index.node_ids[r]) for r in self.index.link(question)}
        inside = set(graph.nodes.node_id.tolist())
        return [n for n in dict.fromkeys(found) if n in inside and n not in asked]

    def ask(self, question: str) -> Turn:
        """One turn: retrieve, answer, check; the turn joins the history (empty and unrelated questions do not)."""
        question = (question or "").strip()
        if not question:
            return Turn(question="", status="empty_question", note="the question is empty: ask something about the graph")
        t0 = time.perf_counter()
        turn = self.retrieve(question)
        if turn.status in ("answered", "no_edges"):
            self.answer(turn)
        else:
            turn.answer = "I could not find anything about this in the graph."
        turn.timings["total"] = time.perf_counter() - t0
        turn.timings = {k: round(v, 4) for k, v in turn.timings.items()}
        if turn.status != "unrelated":
            self.history.append(turn)
        return turn

    def ask_many(self, questions: list[str], conversation: bool = True) -> list[Turn]:
        """Each question in turn; ``conversation=False`` resets the history before each one (independent questions)."""
        out = []
        for q in questions:
            if not conversation:
                self.reset()
            out.append(self.ask(q))
        return out


def show_turns(turns: list[Turn], out_dir: str | Path, height: int = 420) -> None:
    """Each turn's evidence inline (offline pyvis) with its PNG twin, written as ``out_dir/turn<k>.html`` / ``.png``;
    a turn without evidence prints why."""
    from .viz import draw_graph, save_figure

    for k, turn in enumerate(turns):
        if turn.evidence is None:
            print(f"turn {k}: {turn.status}: {turn.note}")
            continue
        print(f"turn {k}: {turn.question}  ->  {turn.answer!r}")
        turn.show(out_html=Path(out_dir) / f"turn{k}.html", height=height)
        marked = set(turn.answer_nodes) | set(turn.cited_nodes) | set(turn.linked)
        save_figure(draw_graph(turn.evidence, highlight_nodes=marked, highlight_edges=turn.cited_edges,
                               title=turn.question), out_dir, f"turn{k}")


def save_turns(turns: list[Turn], path: str | Path, meta: dict | None = None) -> Path:
    """The turns as one JSON file (atomic): ``{"meta": ..., "turns": [Turn.to_dict(), ...]}``."""
    from .runs import write_json

    return write_json(path, {"meta": meta or {}, "turns": [t.to_dict() for t in turns]})


def turns_table(turns: list[Turn]) -> pd.DataFrame:
    """One row per turn: status, answer, evidence size, whether the answer names a node of the evidence, the
    citations found in the graph, and the time of each step."""
    rows = []
    for t in turns:
        ev_ids = set(t.evidence.nodes.node_id.tolist()) if t.evidence is not None else set()
        rows.append({"question": t.question, "status": t.status, "answer": t.answer, "follow_up": t.follow_up,
                     "evidence nodes": t.evidence.num_nodes if t.evidence is not None else 0,
                     "evidence edges": t.evidence.num_edges if t.evidence is not None else 0,
                     "answer in evidence": bool(set(t.answer_nodes) & ev_ids),
                     "citations valid": f"{sum(bool(c.get('normalized')) for c in t.citations)}/{len(t.citations)}",
                     "retrieval ms": round(1000 * t.timings.get("retrieval", 0.0), 1),
                     "answer s": round(t.timings.get("answer", 0.0), 2)})
    return pd.DataFrame(rows)


def write_triples(triples, path: str | Path) -> Path:
    """Write ``(head, relation, tail)`` triples as a tab-separated file with a header (atomic), the format
    :func:`read_triples` and the command line read."""
    from .runs import atomic_write_text

    for h, r, t in triples:
        if any("\t" in x or "\n" in x for x in (h, r, t)):
            raise ValueError(f"a triple field contains a tab or newline: {(h, r, t)!r}")
    return atomic_write_text(path, "head\trelation\ttail\n" + "".join(f"{h}\t{r}\t{t}\n" for h, r, t in triples))


# ---------------------------------------------------------------------- command line
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gr_core.chat",
                                     description="Ask questions about a graph; prints each answer and its evidence.")
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--triples", help="a file of head<TAB>relation<TAB>tail lines ('|' or ',' also accepted)")
    src.add_argument("--csv", nargs=2, metavar=("NODES", "EDGES"), help="node_id,node_attr and src,edge_attr,dst files")
    src.add_argument("--graph", help="metaqa, webqsp_full:<i>, explagraphs:<i>, clevr:<i>")
    parser.add_argument("questions", nargs="+", help="one or more questions, asked in order as one conversation")
    parser.add_argument("--model", default="auto", help="auto | zero_shot | a training run directory (default auto)")
    parser.add_argument("--llm", default="embedded:smollm2-135m-instruct", help="LLM (embedded or a HF path)")
    parser.add_argument("--kind", choices=KINDS, help="kind of graph (default: kg for files)")
    parser.add_argument("--retriever", choices=("pcst", "gnn"), default="pcst")
    parser.add_argument("--reasoner", help="a GNN-RAG reasoner file (for --retriever gnn)")
    parser.add_argument("--cite", action="store_true", help="also ask the model to list the supporting nodes and edges")
    parser.add_argument("--max-new-tokens", type=int, default=ChatConfig.max_new_tokens)
    parser.add_argument("--independent", action="store_true", help="answer each question on its own (no history)")
    parser.add_argument("--json", help="also write the turns to this JSON file")
    args = parser.parse_args(argv)
    graph = args.triples or (",".join(args.csv) if args.csv else args.graph)
    try:
        if args.triples:
            graph = graph_from_triple_list(read_triples(args.triples))
        elif args.csv:
            graph = read_graph_csv(*args.csv)
        overrides = {"kind": args.kind} if args.kind else {}
        chat = GraphChat(graph, model=args.model, llm_model=args.llm, reasoner=args.reasoner,
                         retriever=args.retriever, cite=args.cite, max_new_tokens=args.max_new_tokens, **overrides)
    except (GraphFormatError, FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"graph: {chat.index.num_nodes} nodes, {chat.index.num_edges} edges (indexed in {chat.index.seconds:.1f} s"
          f"{', cached' if chat.index.cached else ''})", flush=True)
    turns = chat.ask_many(args.questions, conversation=not args.independent)
    for turn in turns:
        print()
        print(turn)
        print(f"[{turn.status}; model: {turn.model or '-'}; retrieval {turn.timings.get('retrieval', 0) * 1000:.0f} ms, "
              f"answer {turn.timings.get('answer', 0):.1f} s]")
    if args.json:
        save_turns(turns, args.json, {"graph": args.triples or args.csv or args.graph, "model": chat.model_name})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
