"""Chat with your graph: ask questions about any textual graph, get answers with their evidence (GR paper §1, Fig. 1).

:class:`GraphChat` takes a graph (a benchmark graph, a ``node_id,node_attr`` / ``src,edge_attr,dst`` CSV pair, or a
file of ``head, relation, tail`` triples up to a MetaQA-sized KB), indexes it once (:class:`ChatIndex`), and answers
each turn in five steps, one module each: **link** (:mod:`~gr_core.chat.link`), **scope** (:mod:`~gr_core.chat.scope`),
**candidates** (the relation paths, :mod:`~gr_core.chat.paths`, by default; GNN-RAG's reasoner,
:mod:`~gr_core.chat.graph_reasoner`; or G-Retriever's PCST), **answer** (:mod:`~gr_core.chat.answer`) and **check**
(:mod:`~gr_core.chat.check`). A turn is a :class:`Turn`; ``python -m gr_core.chat`` is the command line. How it works
and what it scores: docs/chat.md.
"""
from .config import ANSWER_MODES, CHECKPOINT_PRESETS, KIND_DATASETS, KINDS, ChatConfig
from .conversation import GraphChat
from .generate import GenerationConfig, generate_questions
from .graph_reasoner import GraphReasonerConfig, TooFewQuestions, train_graph_reasoner, training_record
from .graphs import graph_from_triple_list, load_graph, read_graph_csv, read_triples, write_triples
from .index import ChatIndex
from .models import checkpoint_in_dim, find_checkpoint, load_answerer
from .turns import Turn, candidates_table, save_turns, show_turns, turns_table, write_evidence

__all__ = ["ANSWER_MODES", "CHECKPOINT_PRESETS", "KINDS", "KIND_DATASETS", "ChatConfig", "ChatIndex",
           "GenerationConfig", "GraphChat", "GraphReasonerConfig", "TooFewQuestions", "Turn", "candidates_table",
           "checkpoint_in_dim", "find_checkpoint", "generate_questions", "graph_from_triple_list", "load_answerer",
           "load_graph", "read_graph_csv", "read_triples", "save_turns", "show_turns", "train_graph_reasoner",
           "training_record", "turns_table", "write_evidence", "write_triples"]
