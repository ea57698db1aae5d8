"""Studies: measurements of the methods (each imports what it measures; the methods never import a study).

- :mod:`~gr_core.studies.retrieval_eval`: PCST against KAPING, k-hop and no retrieval (GR Tables 4, 10, 11);
- :mod:`~gr_core.studies.efficiency`: the cost of whole graph vs PCST vs GNN paths against graph size (GR Tables 4, 12);
- :mod:`~gr_core.studies.hallucination`, :mod:`~gr_core.studies.checker_validation`: citations checked against the
  graph (GR Table 5), and the checker against citations of known truth;
- :mod:`~gr_core.studies.graph_baselines`: the no-LLM reference rows (majority class, negation parity, GNN-only);
- :mod:`~gr_core.studies.gnn_rag`, :mod:`~gr_core.studies.gnn_rag_llm`: notebook 04's reasoner studies and the LLM
  half's tables (``python -m gr_core.gnn_rag``).
"""
