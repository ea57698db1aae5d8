"""Chat with your graph: ask questions about any textual graph, get answers with their evidence (GR paper §1, Fig. 1).

:class:`GraphChat` takes a graph (a benchmark graph, a ``node_id,node_attr`` / ``src,edge_attr,dst`` CSV pair, or a
file of ``head, relation, tail`` triples up to a MetaQA-sized KB), indexes it once, and answers each turn in four steps:

1. **link**: entity names written in the question (word n-grams equal to a node's name; ``[Name]`` forces one), or
   when none is written the ``link_k`` nodes most similar to the question; a follow-up ("and who directed it?": a
   pronoun, or a leading "and") also carries the previous turn's linked and answer nodes;
2. **retrieve**: G-Retriever's top-k prizes + PCST (:func:`gr_core.g_retriever.retrieval.retrieve_subgraph`) on the
   whole graph when it has at most ``whole_graph_edges`` edges (the paper's setting), otherwise on the ``hops``-hop
   neighbourhood of the linked nodes (GNN-RAG's way of cutting a question's subgraph out of a KB,
   :class:`gr_core.kg.KnowledgeGraph`); or GNN-RAG's reasoning paths when a trained reasoner is given
   (``retriever="gnn"``);
3. **answer**: the soft-prompted LLM (:class:`gr_core.g_retriever.model.GraphLLM`) reads the textualized evidence, for a
   follow-up the recent conversation (cut to ``history_tokens``), and the question; the model is a trained G-Retriever
   checkpoint from ``outputs/`` for this kind of graph when one exists, otherwise the frozen LLM zero-shot;
4. **check**: the response's cited nodes and edges are parsed and matched against the searched graph with the
   hallucination study's checker (:func:`gr_core.citations.check_response`), and the answer's own entity names
   are looked up in the graph.

Deviations from the paper, all documented in ``notebooks/09_chat.ipynb``: linking and the neighbourhood cut are ours
(G-Retriever runs PCST over each question's whole stored subgraph); linked entities get the top node prize so that the
question's own entity is never dropped by PCST; a question that names no entity and is not close to any node and
relation of the graph
(``relevance_threshold``, ``relation_threshold``) is answered "not in the graph" without calling the LLM.

Command line::

    python -m gr_core.chat --triples my_kg.tsv "who directed The Matrix?" "and who starred in it?"

A graph that comes without questions (docs/chat.md, "Chat without training questions"):
``GraphChat(graph, train_reasoner=True)`` trains GNN-RAG's reasoner on questions generated from the graph's own facts
(:mod:`~gr_core.chat.generate`, :mod:`~gr_core.chat.graph_reasoner`), and ``answer_mode="paths"`` answers with the
relation path that reads most like the question, no model at all (:mod:`~gr_core.chat.path_ranker`).

The package, one step per module: :mod:`~gr_core.chat.graphs` (reading graphs), :mod:`~gr_core.chat.index` (the
index: embeddings, name table, linking, neighbourhood scope), :mod:`~gr_core.chat.config` (:class:`ChatConfig` and
the per-kind defaults), :mod:`~gr_core.chat.models` (checkpoints and reasoners found in ``outputs/``),
:mod:`~gr_core.chat.generate` (questions from a graph's facts), :mod:`~gr_core.chat.graph_reasoner` (a reasoner
trained on them), :mod:`~gr_core.chat.path_ranker` (the training-free ranker), :mod:`~gr_core.chat.ranking` (LLM
scoring of node names), :mod:`~gr_core.chat.conversation` (:class:`GraphChat`), :mod:`~gr_core.chat.turns`
(:class:`Turn` and its views) and :mod:`~gr_core.chat.cli`.
"""
from .config import (CHECKPOINT_PRESETS, KIND_DATASETS, KIND_RELATION_THRESHOLD, KIND_RETRIEVAL, KIND_TEMPLATE, KINDS,
                     ChatConfig)
from .conversation import GraphChat
from .generate import GenerationConfig, generate_questions
from .graph_reasoner import GraphReasonerConfig, TooFewQuestions, train_graph_reasoner
from .graphs import graph_from_triple_list, load_graph, read_graph_csv, read_triples, write_triples
from .index import ChatIndex
from .models import (PRESET_CHAT_REASONER, REASONER_KEYS, checkpoint_in_dim, find_checkpoint, find_reasoner,
                     load_answerer)
from .turns import STATUSES, Turn, candidates_table, save_turns, show_turns, turns_table

__all__ = ["CHECKPOINT_PRESETS", "KINDS", "KIND_DATASETS", "KIND_RELATION_THRESHOLD", "KIND_RETRIEVAL", "KIND_TEMPLATE",
           "PRESET_CHAT_REASONER", "REASONER_KEYS", "STATUSES", "ChatConfig", "ChatIndex", "GraphChat", "Turn",
           "checkpoint_in_dim", "find_checkpoint", "find_reasoner", "graph_from_triple_list", "load_answerer",
           "load_graph", "read_graph_csv", "read_triples", "save_turns", "show_turns", "turns_table", "write_triples",
           "candidates_table", "GenerationConfig", "generate_questions", "GraphReasonerConfig", "TooFewQuestions",
           "train_graph_reasoner"]
