"""The chat's index of one graph: KB arrays, CSR adjacency, embeddings, a name table; linking, scope, subgraphs."""
from __future__ import annotations

import hashlib
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
from ..kg import KnowledgeGraph, NeighbourhoodConfig
from ..paths import cache_root
from ..runs import atomic_write_bytes, config_hash

FORMAT_VERSION = 3  # bump when the cached index layout changes (2: the class moved into gr_core.chat.index; 3: name
#                    keys without accents and end punctuation, name_key)
# Words that never make a one-word entity name on their own (linking) and that do not count as content words
# (whether a question names an entity of the graph)
STOP_WORDS = {"a", "an", "the", "of", "in", "on", "at", "to", "for", "by", "with", "and", "or", "is", "are", "was",
              "were", "be", "do", "does", "did", "what", "which", "who", "whom", "whose", "when", "where", "why", "how",
              "that", "this", "it", "its", "from", "as", "me", "i", "you", "he", "she", "they", "them", "his", "her",
              "their", "star", "movie", "movies", "film", "films", "also", "about", "any", "some", "all", "there",
              "other", "same"}
WORD = re.compile(r"[\w'’.-]+", re.U)
BRACKET = re.compile(r"\[([^\]]+)\]")


def word_key(word: str) -> str:
    """How one word of a name or of a question is compared: lowercase, accents dropped ("Chávez" = "chavez"), leading
    and trailing periods and apostrophes stripped ("W." = "w", "Shays'" = "shays")."""
    folded = unicodedata.normalize("NFKD", word.lower())
    return "".join(c for c in folded if not unicodedata.combining(c)).strip(".'’")


def name_key(text: str) -> str:
    """A node name as the linker looks it up: its words' :func:`word_key` ("George W. Bush" and "george w bush" are
    the same name; questions are often typed without accents or the abbreviation's period)."""
    return " ".join(k for k in map(word_key, WORD.findall(text)) if k)


def _word_spans(text: str) -> list[tuple[int, int, str]]:
    """``(start, end, word_key)`` of each word of ``text``, the span without a possessive "'s" or the leading and
    trailing periods and apostrophes :func:`word_key` drops (so that masking keeps them)."""
    out = []
    for m in WORD.finditer(text):
        word = m.group()
        core = word[:-2] if word.lower().endswith(("'s", "’s")) and len(word) > 2 else word
        lead = len(core) - len(core.lstrip(".'’"))
        core = core.strip(".'’")
        if core:
            out.append((m.start() + lead, m.start() + lead + len(core), word_key(core)))
    return out


def _joined(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` (in order) with neighbours merged where only spaces, punctuation and stop words lie between them."""
    out: list[tuple[int, int]] = []
    for a, b in spans:
        if out and all(word_key(w) in STOP_WORDS for w in WORD.findall(text[out[-1][1]:a])):
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


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
        from ..text_encoder import EmbeddingStore, encoder_identity  # noqa: PLC0415 deferred: loads torch (~1.5 s at start-up) through gr_core.text_encoder; this module stays torch-free

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
            raise GraphFormatError(f"node id {int(pos.index[pos.index.duplicated()][0])} appears twice in the "
                                   "node table")
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
        rel_emb = (emb[[row[t] for t in rel_names.tolist()]] if len(rel_names)
                   else np.zeros((0, emb.shape[1]), np.float32))
        names: dict[str, list[int]] = {}
        longest = 1
        for k, t in enumerate(texts):
            name = name_key(_scene_name(t))
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
    def link(self, question: str, uncased: bool = True, partial: bool = False) -> list[int]:
        """Node rows whose name the question writes: ``[Name]`` spans, else the longest word n-grams equal to a node
        name (:func:`name_key`; not overlapping; a one-word name only when it is not a stop word and is capitalized
        mid-sentence; in a question without any capital letter, one-word names only when no longer name links, and
        only with ``uncased``). With ``partial``, where no name links: :meth:`partial_link`.

        Returns node rows, in the order they appear in the question.
        """
        found: list[int] = []
        for span in BRACKET.findall(question):
            found += self.names.get(name_key(span), [])
        if found:
            return list(dict.fromkeys(found))
        words = WORD.findall(BRACKET.sub(r"\1", question))
        low = [word_key(w) for w in words]
        # A question typed without any capital letter ("in which continent is germany", as WebQSP's are) says nothing
        # about which words are names: there its one-word names link when no longer name does (half of WebQSP's
        # questions linked nothing before; docs/chat.md "Lowercase questions").
        cased = any(c.isupper() for c in question)
        taken = [False] * len(words)
        hits: list[tuple[int, list[int]]] = []
        uncased_words: list[tuple[int, list[int]]] = []
        for n in range(min(self.max_name_words, len(words)), 0, -1):
            for s in range(len(words) - n + 1):
                if any(taken[s:s + n]):
                    continue
                gram = " ".join(low[s:s + n])
                rows = self.names.get(gram)
                if not rows or all(w in STOP_WORDS for w in low[s:s + n]):
                    continue
                if n == 1 and not cased and uncased:
                    uncased_words.append((s, rows))
                    continue
                if n == 1 and (not words[s][:1].isupper() or s == 0):
                    continue  # one-word names (titles such as "Up", tags such as "drama") only capitalized mid-sentence
                hits.append((s, rows))
                taken[s:s + n] = [True] * n
        found = list(dict.fromkeys(r for _, rows in sorted(hits or uncased_words) for r in rows))
        return found if found or not partial else self.partial_link(question)

    def masked(self, question: str, rows, written=None) -> str:
        """``question`` with the mentions of the nodes ``rows`` written "it": what a reasoner with ``mask_topic`` and
        the path ranker read. First every name as :func:`~gr_core.gnn_rag.topic_masked` matches it (without case,
        word-bounded, brackets included: the question-trained reasoner's questions were masked so); then, for the
        nodes the linker found in this question (``written``, default all ``rows``: a follow-up's carried entities and
        a fallback start are not written in it), every run of words that is the name written another way
        (:func:`name_key`: "hugo chavez" for "Hugo Chávez"); then, for a name still not found, its content words in the
        question (:meth:`partial_link`'s: "Heskey" for "Emile Heskey"; in a question with capitals only capitalized
        ones), neighbours joined by stop words made one "it" ("lord of the rings" for "The Lord of the Rings"). A
        possessive keeps its "'s" and a sentence its final period."""
        from ..gnn_rag.training import TOPIC_WORD, topic_masked  # noqa: PLC0415 deferred: torch, for chats only

        names = sorted({_scene_name(self.kg.entities[r]) for r in rows}, key=lambda n: (-len(n), n))
        loose = {_scene_name(self.kg.entities[r]) for r in (rows if written is None else written)}
        out, left = question, []
        for name in names:
            literal = topic_masked(out, [name])
            if literal != out:
                out = literal
            elif name in loose:
                left.append(name)
        cased = any(c.isupper() for c in question)
        for whole in (True, False):
            for name in list(left):
                keys = [k for k in map(word_key, WORD.findall(name)) if k]
                spans = _word_spans(out)
                if whole:
                    cut, s = [], 0
                    while keys and s + len(keys) <= len(spans):
                        hit = [k for *_, k in spans[s:s + len(keys)]] == keys
                        cut += [(spans[s][0], spans[s + len(keys) - 1][1])] if hit else []
                        s += len(keys) if hit else 1
                else:
                    own = {k for k in keys if len(k) >= 3 and k not in STOP_WORDS}
                    cut = _joined(out, [(a, b) for i, (a, b, k) in enumerate(spans)
                                        if k in own and (not cased or (i > 0 and out[a].isupper()))])
                if cut:
                    left.remove(name)
                    for a, b in reversed(cut):
                        a, b = (a - 1, b + 1) if out[a - 1:a] == "[" and out[b:b + 1] == "]" else (a, b)
                        out = out[:a] + TOPIC_WORD + out[b:]
        return out

    def partial_link(self, question: str) -> list[int]:
        """Where :meth:`link` finds no name: the nodes whose name shares the most content words with the question
        (words of 3 letters or more, not stop words, and in a question with capitals only those capitalized
        mid-sentence: "heskey" -> "Emile Heskey", "knicks" -> "New York Knicks"); ties
        go to the name the question covers most of, then to the node of highest degree (a mini-graph's topic is its
        hub). All nodes of the chosen name, or [] when no word is shared."""
        return self.partial_match(question)[0]

    def partial_match(self, question: str) -> tuple[list[int], int, int]:
        """:meth:`partial_link`'s nodes, with how many content words of the question their name shares and how many
        words the name has, all of them, stop words included (``([], 0, 0)`` when none is shared)."""
        raw = WORD.findall(BRACKET.sub(r"\1", question))
        cased = any(c.isupper() for c in question)  # then only capitalized words mid-sentence, as in link
        words = {k for i, w in enumerate(raw) if not cased or (i > 0 and w[:1].isupper())
                 if len(k := word_key(w)) >= 3 and k not in STOP_WORDS}
        if "_name_words" not in self.__dict__:  # word -> the names holding it, built on first use
            inverted: dict[str, list[str]] = {}
            for key in self.names:
                for w in set(key.split()):
                    inverted.setdefault(w, []).append(key)
            self.__dict__["_name_words"] = inverted
        shared: dict[str, int] = {}
        for w in words:
            for key in self.__dict__["_name_words"].get(w, ()):
                shared[key] = shared.get(key, 0) + 1
        if not shared:
            return [], 0, 0
        degree = self.kg.degree
        best = max(shared, key=lambda k: (shared[k], shared[k] / len(k.split()),
                                          max(int(degree[r]) for r in self.names[k])))
        return list(self.names[best]), shared[best], len(best.split())

    def names_the_graph(self, rows, hub: bool = True) -> bool:
        """Whether a question that writes the names of the nodes ``rows`` whole is about this graph: one of them has a
        name of two or more content words, or is the graph's hub (the node of highest degree, every one where several
        tie: a WebQSP mini-graph's topic, "arizona" in "what is the state flower of arizona"). Another one-word name
        ("up", "speed" in a film KG) does not make it so: such words are common in questions about anything.
        ``hub=False``: names of two or more content words only (the rule before the hub's). A graph without edges
        has no hub."""
        degree = self.kg.degree
        top = int(degree.max()) if len(degree) and hub else 0
        return any(top and degree[r] == top or sum(w not in STOP_WORDS for w in WORD.findall(
            self.kg.entities[r].lower())) >= 2 for r in rows)

    def rows_of(self, node_ids) -> list[int]:
        """Index rows of the graph's node ids (ids that are not in the graph are dropped)."""
        if "_pos" not in self.__dict__:
            self.__dict__["_pos"] = pd.Index(self.node_ids)
        rows = self.__dict__["_pos"].get_indexer(list(node_ids))
        return [int(r) for r in rows if r >= 0]

    # ------------------------------------------------------------------ scope and retrieval
    def similarities(self, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Cosine similarity of the question to every node ``(num_nodes,)`` and every relation ``(num_relations,)``."""

        return similarities(query, self.node_emb), similarities(query, self.rel_emb)

    def scope(self, seeds: np.ndarray, neighbourhood: NeighbourhoodConfig, whole_graph_edges: int
              ) -> tuple[np.ndarray, np.ndarray]:
        """The part of the graph a turn searches: everything when the graph has at most ``whole_graph_edges`` edges,
        else the seeds' ``neighbourhood`` (:attr:`ChatConfig.neighbourhood`).

        Returns:
            ``(node rows, edge rows)`` of the index.
        """
        if self.num_edges <= whole_graph_edges:
            return np.arange(self.num_nodes), np.arange(self.num_edges)
        return self.kg.neighbourhood(seeds, neighbourhood)

    def subgraph(self, nodes: np.ndarray, edges: np.ndarray) -> TextualGraph:
        """Node rows / edge rows as a textual graph with the graph's own node ids (``row``, ``kb_edge`` kept)."""
        ents = np.asarray(self.kg.entities, dtype=object)
        rels = np.asarray(self.kg.relations, dtype=object)
        node_df = pd.DataFrame({"node_id": self.node_ids[nodes], "node_attr": ents[nodes], "row": nodes})
        edge_df = pd.DataFrame({"src": self.node_ids[self.kg.heads[edges]], "edge_attr": rels[self.kg.rels[edges]],
                                "dst": self.node_ids[self.kg.tails[edges]], "kb_edge": edges})
        return TextualGraph(node_df, edge_df)
