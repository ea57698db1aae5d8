"""GNN-RAG retrieval (GNN-RAG paper §4.1-4.2, App. C; docs/method.md §3.1-3.2), one step per module: ``model``
(ReaRev's configuration and network), ``training`` (question graphs, training, scoring, saved reasoners),
``reasoning_paths`` (the 0.95 candidates and shortest paths that keep edge direction and every relation, and GNN-RAG's
own path code for comparison), ``evidence`` (every retriever's verbalized evidence, retrieval augmentation),
``generation`` (the LoRA answer generator and RoG-style relation paths). Notebook 04's studies live in
:mod:`gr_core.studies.gnn_rag` and :mod:`gr_core.studies.gnn_rag_llm`, whole-split runs in
``bench/reasoner_studies.py``.
"""
from .model import SWITCH_NAMES, ReaRev, ReasonerConfig, RelationHops
from .reasoning_paths import (compare_path_styles, evidence_view, gold_ids, missing_entities, named_beyond, path_study,
                              reasoning_paths, reference_paths, seed_positions, select_candidates, summarize_path_study)
from .training import (QuestionGraph, ReasonerTrainConfig, evaluate_reasoner, load_reasoner, node_probabilities,
                       question_data, reasoner_dataset, reasoner_meta, save_reasoner, score_questions, topic_masked,
                       train_reasoner)

__all__ = [
    "ReasonerConfig", "SWITCH_NAMES", "ReaRev", "RelationHops",
    "QuestionGraph", "question_data", "topic_masked", "ReasonerTrainConfig", "train_reasoner", "node_probabilities",
    "score_questions", "evaluate_reasoner", "reasoner_dataset", "save_reasoner", "reasoner_meta", "load_reasoner",
    "select_candidates", "named_beyond", "seed_positions", "gold_ids", "missing_entities",
    "reasoning_paths", "reference_paths", "compare_path_styles", "path_study", "evidence_view", "summarize_path_study",
]
