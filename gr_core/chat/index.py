"""The chat's index of one graph, built once and cached: KB arrays, CSR adjacency, embeddings, a name table; each
node's kind and the question words' vectors read beside it."""
from __future__ import annotations

import functools
import hashlib
import json
import pickle
import re
import time
import unicodedata
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..config import EMBEDDED_TEXT_ENCODER, TextEncoderConfig
from ..data import EDGE_COLUMNS, NODE_COLUMNS, GraphFormatError, TextualGraph
from ..g_retriever.retrieval import similarities
from ..kg import IDENTIFIER, KnowledgeGraph, is_identifier
from ..paths import cache_root
from ..runs import atomic_write_bytes, config_hash
from ..text_encoder import EmbeddingStore, encoder_identity
from .generate import relation_phrase

FORMAT_VERSION = 8  # bump when the cached index layout or its name keys change
# the longest name (in words) looked up whole: MetaQA's titles run to 16 words ("Don't Be a Menace to South Central
# While Drinking Your Juice in the Hood"); a question's n-grams up to this length are tried, longest first
MAX_NAME_WORDS = 40
# The chat's one list of function words: never an entity name on their own, and, but for the words that ask
# (paths.STOPWORDS), no relation's name (the auxiliary "have" would name every "has ...") ...
FUNCTION_WORDS = frozenset(
    "a an the of in on at to for by with and or is are was were be do does did have has had what which who whom whose "
    "when where why how that this it its from as me i you he she they them his her their also about any some all there "
    "other same".split())
# ... and with the words questions about films are full of, the words that are no content words of a name ("the films
# of ..." names no entity "Films")
STOP_WORDS = FUNCTION_WORDS | {"star", "movie", "movies", "film", "films"}
# A word: letters and digits, with apostrophes, periods and hyphens inside; an underscore separates words as a space
# does (KG dumps write "Lionel_Messi"); an identifier (``m.0b_x``, :data:`~gr_core.kg.IDENTIFIER`) is one word.
WORD = re.compile(rf"(?<![\w.])(?:{IDENTIFIER.pattern})(?![\w.])|(?:[^\W_]|['’.-])+", re.U)
# a node's kind: 0 a thing, 1 a person, 2 a place (the prototype text its name's vector is nearest), 3 a date (DATE)
KIND_PROTOTYPES = ("a thing", "a person's name", "a city, country or place")
DATE = re.compile(r"^(\d{4}|\d{4}-\d\d(-\d\d)?(t[\d:]+z?)?|\d{1,2} [a-z]+ \d{4}|[a-z]+ \d{1,2},? \d{4})$")


def word_key(word: str) -> str:
    """How one word of a name or of a question is compared: lowercase, accents dropped ("Chávez" = "chavez"), a
    possessive "'s" and leading and trailing periods and apostrophes stripped ("W." = "w", "Hanks's" = "hanks")."""
    folded = unicodedata.normalize("NFKD", word.lower())
    return re.sub(r"['’]s$", "", "".join(c for c in folded if not unicodedata.combining(c))).strip(".'’")


def name_key(text: str) -> str:
    """A node name as the linker looks it up: its words' :func:`word_key` ("George W. Bush" = "george w bush")."""
    return " ".join(k for k in map(word_key, WORD.findall(text)) if k)


def word_spans(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, word_key)`` of each word of ``text``, the span without what :func:`word_key` drops (so that
    masking keeps it)."""
    out = []
    for m in WORD.finditer(text):
        word = m.group()
        core = word[:-2] if word.lower().endswith(("'s", "’s")) and len(word) > 2 else word
        lead = len(core) - len(core.lstrip(".'’"))
        core = core.strip(".'’")
        if core:
            out.append((m.start() + lead, m.start() + lead + len(core), word_key(core)))
    return out


def joined_spans(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` (in order) with neighbours merged where only spaces, punctuation and stop words lie between them."""
    out: list[tuple[int, int]] = []
    for a, b in spans:
        if out and all(word_key(w) in STOP_WORDS for w in WORD.findall(text[out[-1][1]:a])):
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def scene_name(text: str) -> str:
    m = re.match(r"\s*name:\s*([^;]*)", text)
    return m.group(1).strip() if m else text


def _digest(graph: TextualGraph) -> str:
    """The graph's content, each column written as a JSON list: values that run on across a column's end ("0", "51"
    then "Bob" against "0", "5" then "1Bob") are other lists, so two graphs never share a cached index."""
    h = hashlib.sha256()
    for values in [graph.nodes[c] for c in NODE_COLUMNS] + [graph.edges[c] for c in EDGE_COLUMNS]:
        h.update(json.dumps(values.tolist(), ensure_ascii=False, default=str).encode())  # str: as build reads them
    return h.hexdigest()


@dataclass
class ChatIndex:
    """One graph, indexed once: the KB arrays (entity id = node row), CSR adjacency, embeddings, a name table.

    Shapes:
        ``node_emb``: ``(num_nodes, dim)`` float32, L2-normalized; ``rel_emb``: ``(num_relations, dim)``;
        ``phrase_emb``: ``{phrase: (dim,)}``, each relation phrase's vector; ``node_ids``: ``(num_nodes,)`` the
        graph's own node ids.
    """

    kg: KnowledgeGraph
    node_ids: np.ndarray
    node_emb: np.ndarray
    rel_emb: np.ndarray
    phrase_emb: dict[str, np.ndarray]
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
    def build(cls, graph: TextualGraph, encoder: str | None = None) -> "ChatIndex":
        """Index ``graph``: texts embedded once each (:class:`~gr_core.text_encoder.EmbeddingStore`, shared with the
        datasets), the whole index pickled under ``.cache/chat/`` keyed by the graph's content and the encoder."""
        t0 = time.perf_counter()
        if graph.num_nodes == 0:
            raise GraphFormatError("the graph has no node: nothing to chat about")
        enc = TextEncoderConfig(model=encoder or EMBEDDED_TEXT_ENCODER)
        digest = _digest(graph)
        key = config_hash({"graph": digest, "encoder": encoder_identity(enc), "format": FORMAT_VERSION})
        path = cache_root() / "chat" / f"index-{key}.pkl"
        if path.is_file():
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
            raise GraphFormatError(f"node id {int(pos.index[pos.index.duplicated()][0])} appears twice in the "
                                   "node table")
        rel_names, rel_ids = np.unique(graph.edges.edge_attr.astype(str).to_numpy(), return_inverse=True)
        heads, tails = pos.reindex(graph.edges.src).to_numpy(), pos.reindex(graph.edges.dst).to_numpy()
        if np.isnan(heads.astype(float)).any() or np.isnan(tails.astype(float)).any():
            raise GraphFormatError("an edge names a node id that is not in the node table")
        kg = KnowledgeGraph(texts, rel_names.tolist(), heads.astype(np.int64), rel_ids, tails.astype(np.int64))
        phrases = [relation_phrase(r) for r in rel_names.tolist()]
        distinct = list(dict.fromkeys(texts + rel_names.tolist() + phrases))
        emb, _ = EmbeddingStore(enc).encode(distinct, desc="index graph")
        row = {t: k for k, t in enumerate(distinct)}
        node_emb = emb[[row[t] for t in texts]]
        rel_emb = emb[[row[t] for t in rel_names.tolist()]]  # (R, dim); (0, dim) for a graph without edges
        names: dict[str, list[int]] = {}
        for k, t in enumerate(texts):
            if len(name := name_key(scene_name(t))) >= 2:
                names.setdefault(name, []).append(k)
        longest = max((len(name.split()) for name in names), default=1)
        index = cls(kg, node_ids, node_emb.astype(np.float32), rel_emb.astype(np.float32),
                    {p: emb[row[p]].astype(np.float32) for p in phrases}, names, min(longest, MAX_NAME_WORDS), digest)
        atomic_write_bytes(path, pickle.dumps(index, protocol=pickle.HIGHEST_PROTOCOL))
        index.seconds = time.perf_counter() - t0
        return index

    @functools.cached_property
    def name_words(self) -> dict[str, list[str]]:
        """Each word of a node name -> the names holding it (what a name written in part is looked up by)."""
        inverted: dict[str, list[str]] = {}
        for key in self.names:
            for w in set(key.split()):
                inverted.setdefault(w, []).append(key)
        return inverted

    @functools.cached_property
    def spaced_names(self) -> tuple[dict[str, list[int]], int]:
        """The names written with a hyphen, keyed with spaces for it ("vera ellen" -> "Vera-Ellen": a question typed
        without the hyphen names them too), and the most words such a key has."""
        out: dict[str, list[int]] = {}
        for key, rows in self.names.items():
            if "-" in key and (spaced := " ".join(key.replace("-", " ").split())) not in self.names:
                out.setdefault(spaced, []).extend(rows)
        return out, max((len(k.split()) for k in out), default=0)

    @functools.cached_property
    def _positions(self) -> pd.Index:
        return pd.Index(self.node_ids)

    def rows_of(self, node_ids) -> list[int]:
        """Index rows of the graph's node ids (ids that are not in the graph are dropped)."""
        rows = self._positions.get_indexer(list(node_ids))
        return [int(r) for r in rows if r >= 0]

    def similarities(self, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Cosine similarity of the question to every node ``(num_nodes,)`` and every relation ``(num_relations,)``."""
        return similarities(query, self.node_emb), similarities(query, self.rel_emb)

    def subgraph(self, nodes: np.ndarray, edges: np.ndarray) -> TextualGraph:
        """Node rows / edge rows as a textual graph with the graph's own node ids (``row``, ``kb_edge`` kept)."""
        ents = np.asarray(self.kg.entities, dtype=object)
        rels = np.asarray(self.kg.relations, dtype=object)
        node_df = pd.DataFrame({"node_id": self.node_ids[nodes], "node_attr": ents[nodes], "row": nodes})
        edge_df = pd.DataFrame({"src": self.node_ids[self.kg.heads[edges]], "edge_attr": rels[self.kg.rels[edges]],
                                "dst": self.node_ids[self.kg.tails[edges]], "kb_edge": edges})
        return TextualGraph(node_df, edge_df)


def answer_kinds(entities: list[str], node_emb: np.ndarray, prototypes: np.ndarray) -> np.ndarray:
    """Each node's kind (:data:`KIND_PROTOTYPES`; 3 for a name that is a date or a year; an identifier is a thing),
    from the graph alone.

    Args:
        entities: the node names ``(N,)``.
        node_emb: their L2-normalized vectors ``(N, dim)``.
        prototypes: the vectors of :data:`KIND_PROTOTYPES` ``(3, dim)``.
    Returns:
        ``(N,)`` int64.
    """
    kinds = np.argmax(node_emb @ prototypes.T, axis=1).astype(np.int64) if len(entities) else np.zeros(0, np.int64)
    for i, name in enumerate(entities):
        if DATE.match(str(name).strip().lower()):
            kinds[i] = 3
        elif is_identifier(name):
            kinds[i] = 0
    return kinds


class WordVectors:
    """Word and phrase vectors from a sentence encoder, each text encoded once (kept for the chat's life)."""

    def __init__(self, encode):
        """``encode(texts) -> (len(texts), dim)`` L2-normalized vectors."""
        self.encode, self.cache = encode, {}

    def __call__(self, texts) -> np.ndarray:
        new = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if new:
            self.cache.update(zip(new, np.asarray(self.encode(new), np.float32)))
        return np.stack([self.cache[t] for t in texts]) if len(texts) else np.zeros((0, 1), np.float32)
