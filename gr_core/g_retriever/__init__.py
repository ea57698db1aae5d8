"""G-Retriever (He et al., NeurIPS 2024): retrieval-augmented generation over textual graphs, one paper step per
module (GR paper §5; docs/method.md §1; §5.1's indexing is the shared :mod:`gr_core.text_encoder` and
:mod:`gr_core.graphqa`):

- :mod:`~gr_core.g_retriever.retrieval`: §5.2 retrieval (top-k node and edge prizes) and §5.3 subgraph construction
  (prize-collecting Steiner tree, PCST);
- :mod:`~gr_core.g_retriever.textualize`: the graph's text (GraphQA's CSV form) read by the LLM;
- :mod:`~gr_core.g_retriever.graph_encoder`: §5.4 the graph encoder (Graph Transformer, GAT, GCN) and its pooling;
- :mod:`~gr_core.g_retriever.model`: §5.4 answer generation: :class:`GraphLLM`, the frozen LLM with the projected
  graph token (soft prompt) and optional LoRA; every Table 3 method as a configuration;
- :mod:`~gr_core.g_retriever.baselines`: the retrieval baselines (KAPING, k-hop, no retrieval);
- :mod:`~gr_core.g_retriever.run_config`, :mod:`~gr_core.g_retriever.examples`, :mod:`~gr_core.g_retriever.train`,
  :mod:`~gr_core.g_retriever.distributed`: a run's configuration, its examples, its training and evaluation,
  data-parallel processes;
- :mod:`~gr_core.g_retriever.experiments`: the notebooks' runs and ``python -m gr_core.g_retriever``.
"""
