"""Studies: measurements of the methods (each imports what it measures; the methods never import a study).

- :mod:`~gr_core.studies.retrieval_eval`: PCST against KAPING, k-hop and no retrieval (GR Tables 4, 10, 11);
- :mod:`~gr_core.studies.efficiency`: the cost of whole graph vs PCST vs GNN paths against graph size (GR Tables 4, 12);
- :mod:`~gr_core.studies.hallucination`, :mod:`~gr_core.studies.checker_validation`: citations checked against the
  graph (GR Table 5), and the checker against citations of known truth;
- :mod:`~gr_core.studies.graph_baselines`: the no-LLM reference rows (majority class, negation parity, GNN-only);
- :mod:`~gr_core.studies.recipe`: one training configuration over seeds (``python -m gr_core.studies.recipe``);
- :mod:`~gr_core.studies.precision_check`: bf16 against fp32, paired (``python -m gr_core.studies.precision_check``);
- :mod:`~gr_core.studies.gnn_rag`, :mod:`~gr_core.studies.gnn_rag_llm`: notebook 04's reasoner studies and the LLM
  half's tables (``python -m gr_core.gnn_rag``);
- :mod:`~gr_core.studies.chat_speed`, :mod:`~gr_core.studies.chat_answers`: the chat's speed, answer modes and
  follow-ups (``python bench/chat.py``);
- :mod:`~gr_core.studies.chat_without_questions`: the chat on a graph that comes without questions: a reasoner trained
  on questions generated from the graph, the training-free path ranker, two-entity questions, where they fail;
  :mod:`~gr_core.studies.generated_reasoner_seeds`: that reasoner over seeds and by how it reads a question;
  :mod:`~gr_core.studies.relation_twins`: relations stored twice (Freebase's inverses) read as one.
"""
