"""G-Retriever (He et al., NeurIPS 2024): retrieval-augmented generation over textual graphs, one paper step per
module (GR paper §5; docs/method.md §1; the module of each step: docs/architecture.md). §5.1's indexing is the shared
:mod:`gr_core.text_encoder` and :mod:`gr_core.graphqa`; :class:`~gr_core.g_retriever.model.GraphLLM` is the model."""
