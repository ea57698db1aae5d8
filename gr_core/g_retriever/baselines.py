"""Retrieval baselines on the same interface as PCST (GR paper App. B.2, Table 3 and Table 11).

- **KAPING** [Baek et al. 2023]: the top-k triples ``(head, relation, tail)`` most similar to the question (the
  paper's k is unspecified; KAPING's own default is 10).
- **k-hop**: the k-hop neighbourhood of the question entities (the most similar node when the graph has none).
- **none**: the whole graph, cut to the LLM's budget by the prompt builder (GR: 512 tokens).

:func:`zero_shot_whole_graphs`: the frozen LLM on whole textualized graphs (GR Table 3's zero-shot row, notebook 00).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..data import TextualGraph, question_nodes
from ..evaluate import explagraphs_correct
from ..graphqa import GraphQADataset
from ..llm import chat_prompt, count_tokens, generate_batched
from ..prompts import graph_prompt
from ..stats import wilson_interval
from ..text_encoder import EmbeddingStore
from .retrieval import RetrievedSubgraph, similarities
from .textualize import textualize


def triple_texts(graph: TextualGraph) -> list[str]:
    """KAPING's verbalization of each edge: ``(head, relation, tail)``."""
    names = dict(zip(graph.nodes.node_id.tolist(), graph.nodes.node_attr.tolist()))
    return [f"({names[s]}, {r}, {names[d]})"
            for s, r, d in zip(graph.edges.src, graph.edges.edge_attr, graph.edges.dst)]


def _subgraph(graph: TextualGraph, node_rows, edge_rows) -> RetrievedSubgraph:
    """A retrieval without prizes (the baselines score no node)."""
    z = np.zeros(0, np.float32)
    return RetrievedSubgraph(graph, np.asarray(node_rows, np.int64), np.asarray(edge_rows, np.int64), z, z, 0.0)


def retrieve_kaping(graph: TextualGraph, triple_emb: np.ndarray, query: np.ndarray, k: int = 10) -> RetrievedSubgraph:
    """The ``k`` triples most similar to the question, with their endpoints (most similar first).

    Shapes:
        triple_emb: ``(num_edges, dim)``, embeddings of :func:`triple_texts`; query: ``(dim,)``.
    """
    if graph.num_edges == 0:
        return _subgraph(graph, np.arange(graph.num_nodes), [])
    edge_rows = np.argsort(-similarities(query, triple_emb), kind="stable")[:k]
    ends = np.concatenate([graph.edges.src.to_numpy()[edge_rows], graph.edges.dst.to_numpy()[edge_rows]])
    return _subgraph(graph, np.flatnonzero(np.isin(graph.nodes.node_id.to_numpy(), ends)), edge_rows)


def retrieve_khop(graph: TextualGraph, hops: int = 1, x: np.ndarray | None = None,
                  query: np.ndarray | None = None) -> RetrievedSubgraph:
    """The ``hops``-hop neighbourhood (undirected) of the question entities, with every edge inside it."""
    seeds = question_nodes(graph)
    if not seeds and graph.num_nodes:
        best = int(np.argmax(similarities(query, x))) if x is not None and query is not None else 0
        seeds = [int(graph.nodes.node_id.iloc[best])]
    src, dst = graph.edges.src.to_numpy(), graph.edges.dst.to_numpy()
    inside = set(seeds)
    for _ in range(hops):
        touch = np.isin(src, list(inside)) | np.isin(dst, list(inside))
        inside |= set(src[touch].tolist()) | set(dst[touch].tolist())
    edge_rows = np.flatnonzero(np.isin(src, list(inside)) & np.isin(dst, list(inside)))
    return _subgraph(graph, np.flatnonzero(np.isin(graph.nodes.node_id.to_numpy(), list(inside))), edge_rows)


def retrieve_none(graph: TextualGraph) -> RetrievedSubgraph:
    """The whole graph (the "w/o retrieval" ablation and the zero-shot baseline's input)."""
    return _subgraph(graph, np.arange(graph.num_nodes), np.arange(graph.num_edges))


Retriever = Callable[[GraphQADataset, int, TextualGraph], RetrievedSubgraph]


def kaping_retriever(k: int = 10, store: EmbeddingStore | None = None) -> Retriever:
    """KAPING top-k triples; triple texts are embedded through the shared store (cached per machine). The retriever's
    ``prepare(ds, i, graph)`` embeds them ahead (an index of the graph's facts, as node and edge texts are), so a
    timing of the retrieval leaves that out."""
    store = store or EmbeddingStore.shared()

    def vectors(graph):
        return store.encode(triple_texts(graph), desc="encode triples")[0] if graph.num_edges else None

    def run(ds, i, graph):
        return retrieve_kaping(graph, vectors(graph), ds.question_emb[i], k)
    run.prepare = lambda ds, i, graph: vectors(graph)
    return run


def zero_shot_whole_graphs(model, tokenizer, graphs: list[TextualGraph], max_new_tokens: int = 32,
                           batch_size: int = 8) -> dict:
    """The frozen LLM answering each of ``graphs`` (ExplaGraphs records: ``question``, ``answers``) from its whole
    textualized graph, greedy: each answer and whether it is the gold stance, the accuracy with its Wilson 95% interval
    over the ``n`` questions, and the prompts' token counts.

    Returns:
        ``{"answers", "correct", "n", "accuracy", "ci_low", "ci_high", "mean_prompt_tokens", "max_prompt_tokens"}``.
    """
    if not graphs:  # an accuracy over no question is no number
        raise ValueError("zero_shot_whole_graphs: no graph to ask (num_questions must be at least 1)")
    prompts = [chat_prompt(tokenizer, graph_prompt(textualize(g), g.question)) for g in graphs]
    answers = generate_batched(model, tokenizer, prompts, max_new_tokens, batch_size, desc="zero-shot")
    correct = [bool(explagraphs_correct(a, g.answers[0])) for a, g in zip(answers, graphs)]
    tokens = count_tokens(tokenizer, prompts)
    n = len(graphs)
    low, high = wilson_interval(sum(correct), n)  # (nan, nan) without questions
    return {"answers": answers, "correct": correct, "n": n, "accuracy": sum(correct) / n if n else float("nan"),
            "ci_low": low, "ci_high": high, "mean_prompt_tokens": sum(tokens) / n if n else float("nan"),
            "max_prompt_tokens": max(tokens, default=0)}
