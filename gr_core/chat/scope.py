"""Step 2, **scope**: the part of the graph a turn searches (:func:`search_scope`: the whole graph, as G-Retriever's
PCST searches each question's graph, or the linked entities' neighbourhood, GNN-RAG's question subgraphs), and the
reasoner's input on it (:func:`question_graph`, :func:`read_question`), in training as in serving.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..gnn_rag import QuestionGraph
from ..kg import NeighbourhoodConfig
from .index import ChatIndex, WordVectors
from .paths import SAMENESS, STOPWORDS, read_words, tokens

# A word names a relation for a reasoner where its fit (paths.read_words) is above NAMED: the path ranker's TAU (0.05)
# lets "film" name a MetaQA relation at 0.06-0.09, where the naming words fit at 0.2-0.5 (CHANGELOG.md); fixed so that
# a turn reads as training did
NAMED = 0.15


def search_scope(index: ChatIndex, seeds, whole_graph_edges: int, scope: NeighbourhoodConfig
                 ) -> tuple[np.ndarray, np.ndarray]:
    """The searched part of ``index``'s graph for the node rows ``seeds``: ``(node rows, edge rows)``, everything when
    the graph has at most ``whole_graph_edges`` edges, else the seeds' neighbourhood (seeds first)."""
    if index.num_edges <= whole_graph_edges:
        return np.arange(index.num_nodes), np.arange(index.num_edges)
    return index.kg.neighbourhood(np.asarray(seeds, np.int64), scope)


@dataclass(frozen=True)
class QuestionReading:
    """What a reasoner with ``relation_match`` / ``relation_words_only`` reads of a question besides its vector.

    Attributes:
        text: the question (entities written "it") kept to its function words, words of sameness and the words that
            name a relation ("which film did it write" -> "which did it write").
        match: ``rel_match (R,)`` in [0, 1]: per relation of the graph, its best word's fit where above :data:`NAMED`.
        steps: ``q_steps (2,)``: whether a word asks for "the same", and how many relations are named (a third each).
    """

    text: str
    match: np.ndarray
    steps: np.ndarray


def read_question(vectors: WordVectors, masked: str, phrases: list[str], twins: dict[str, int] | None
                  ) -> QuestionReading:
    """:class:`QuestionReading` of ``masked`` on a graph whose relations read ``phrases`` (one per relation), by
    :func:`~gr_core.chat.paths.read_words` against every relation of the graph."""
    distinct = list(dict.fromkeys(phrases))
    words = read_words(vectors, masked, distinct, twins, ranker=False)  # as the reasoners were trained
    fit = np.stack([words.fit[p] for p in distinct]) if distinct else np.zeros((0, len(words.words)))  # (P, W)
    best = dict(zip(distinct, fit.max(axis=1, initial=0.0)))
    named = np.array([best[p] for p in phrases])
    per_mention = fit.max(axis=0, initial=0.0)
    naming = {i for run, f in zip(words.runs, per_mention) if f > NAMED for i in run}
    kept = [t for i, t in enumerate(tokens(masked)) if t in STOPWORDS or t in SAMENESS or not t or i in naming]
    return QuestionReading(" ".join(kept), np.where(named > NAMED, np.minimum(named, 1.0), 0.0).astype(np.float32),
                           np.array([min(words.sameness, 1), min(int((named > NAMED).sum()), 3) / 3], np.float32))


def scope_tensors(index: ChatIndex, nodes: np.ndarray, edges: np.ndarray) -> dict:
    """``edge_index (2, E)`` over positions in ``nodes``, ``rel_table (R, dim)``, ``rel_id (E,)``."""
    kg = index.kg
    pos = np.full(index.num_nodes, -1, np.int64)
    pos[nodes] = np.arange(len(nodes))
    return {"edge_index": torch.from_numpy(np.stack([pos[kg.heads[edges]], pos[kg.tails[edges]]])).view(2, -1),
            "rel_table": torch.from_numpy(index.rel_emb), "rel_id": torch.from_numpy(kg.rels[edges]).long()}


def question_graph(index: ChatIndex, nodes: np.ndarray, edges: np.ndarray, seeds: np.ndarray, q: np.ndarray,
                   q_masked: np.ndarray | None = None, answers: np.ndarray | None = None, shared: dict | None = None,
                   reading: QuestionReading | None = None) -> QuestionGraph:
    """The reasoner's input for one question on a scope of ``index``'s graph: a :class:`~gr_core.gnn_rag.QuestionGraph`
    over ``N`` nodes.

    Args:
        nodes, edges: node rows ``(N,)`` and edge rows ``(E,)`` (:func:`search_scope`).
        seeds: positions in ``nodes`` of the question's entities; ``answers``: positions of its answers (None: none).
        q, q_masked: the question's sentence vector ``(dim,)`` as asked and with its entities masked (None: absent).
        shared: :func:`scope_tensors` of ``(nodes, edges)`` when already built.
        reading: :func:`read_question` for a reasoner with ``relation_match``.
    """
    shared = shared if shared is not None else scope_tensors(index, nodes, edges)
    seed = torch.zeros(len(nodes), dtype=torch.bool)
    seed[torch.as_tensor(np.asarray(seeds, np.int64))] = True
    answer = torch.zeros(len(nodes), dtype=torch.bool)
    if answers is not None and len(answers):
        answer[torch.as_tensor(np.asarray(answers, np.int64))] = True
    extra = {} if q_masked is None else {"q_masked": torch.from_numpy(np.asarray(q_masked, np.float32)).view(1, -1)}
    if reading is not None:
        extra["rel_match"] = torch.from_numpy(reading.match)
        extra["q_steps"] = torch.from_numpy(reading.steps).view(1, -1)
    return QuestionGraph(seed=seed, answer=answer, q_emb=torch.from_numpy(np.asarray(q, np.float32)).view(1, -1),
                         num_nodes=len(nodes), **shared, **extra)
