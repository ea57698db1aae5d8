"""GNN-RAG retrieval: a question-conditioned GNN reasoner, answer candidates, reasoning paths
(GNN-RAG paper §4.1-4.2, App. C; GNN-RAG code ``gnn/models/ReaRev``, ``gnn/evaluate.py``,
``llm/src/utils/graph_utils.py``; docs/method.md §3.1-3.2).

The reasoner follows ReaRev (its layers computed per relation, not per fact: :class:`RelationHops`):

- ``num_ins`` instructions from the question's sentence embedding (ReaRev pools LM token states by attention;
  we cache sentence embeddings only, so each instruction is a learned projection of it: a deviation);
- relation features from the relation text's sentence embedding, one projection per direction (facts are used
  both ways);
- entities have no text features: their initial state is ReLU of the summed projected incident relations;
- ``num_iter`` iterations of ``num_gnn`` layers; each layer sends ``ReLU(W_r r ⊙ instruction_k) · p(head)`` along
  every fact, aggregates per instruction, updates the node state and re-normalizes the node distribution ``p`` with
  a softmax over the graph's nodes; after each iteration the instructions are re-formed from the seed-weighted node
  states (``QueryReform``) and reasoning restarts from the seeds;
- loss: KL(uniform over the gold answers in the graph ‖ p); questions with no answer in the graph are masked.

Five switches of :class:`ReasonerConfig` (``SWITCH_NAMES``, on by default) bring this package's first version to
ReaRev as released; notebook 04's change table measures each.

Candidates (docs/method.md §3.2): softmax probabilities, question entities excluded, sorted, added until the
cumulative probability first exceeds 0.95. Paths (§5.4): shortest paths from question entities to candidates
that keep **edge direction** (a reversed hop is written with ``<-``) and **every relation** between a pair
(GNN-RAG's ``nx.Graph`` keeps one and drops direction, docs/peers.md 5).

The package, one step per module: ``model`` (the configuration and the network), ``training`` (question graphs,
training, scoring, saved reasoners), ``reasoning_paths`` (candidates and reasoning paths, GNN-RAG's own path code for
comparison), ``evidence`` (every retriever's verbalized evidence, retrieval augmentation), ``generation`` (the LoRA
answer generator and RoG-style relation paths). Notebook 04's studies and the command line (``python -m
gr_core.gnn_rag``) live in :mod:`gr_core.studies.gnn_rag` and :mod:`gr_core.studies.gnn_rag_llm`.
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
