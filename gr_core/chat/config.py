"""How the chat retrieves and answers: :class:`ChatConfig` and the defaults each kind of graph borrows."""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..retrieval import DATASET_RETRIEVAL, RetrievalConfig

KINDS = ("kg", "scene", "explanation")
# Which trained runs serve which kind of graph (first found wins), and whose question template and retrieval
# defaults a kind borrows (GR App. B.1: KGQA k = 3 nodes / 5 edges, C_e = 0.5; scene graphs 3 / 3, 0.5).
KIND_DATASETS = {"kg": ("metaqa", "webqsp", "webqsp_full"), "scene": ("clevr", "gqa_micro"),
                 "explanation": ("explagraphs",)}
KIND_TEMPLATE = {"kg": "webqsp", "scene": "clevr", "explanation": "webqsp"}
KIND_RETRIEVAL = {"kg": DATASET_RETRIEVAL["metaqa"], "scene": DATASET_RETRIEVAL["clevr"],
                  "explanation": DATASET_RETRIEVAL["explagraphs"]}
# Relation similarity below which a KG question asks nothing the graph relates (bench/chat.py); scene graphs'
# relations (left of, behind) and ExplaGraphs' (causes, capable of) are rarely named by the questions: not used.
KIND_RELATION_THRESHOLD = {"kg": 0.18, "scene": 0.0, "explanation": 0.0}
CHECKPOINT_PRESETS = ("full", "quick")  # smoke runs are CI-sized (one epoch on 8 questions): never served


@dataclass(frozen=True)
class ChatConfig:
    """How :class:`GraphChat` retrieves and answers.

    Attributes:
        kind: ``kg``, ``scene`` or ``explanation``: picks the checkpoint family, the question template and retrieval
            defaults (``KIND_RETRIEVAL``: GR App. B.1).
        retriever: ``pcst`` (G-Retriever) or ``gnn`` (GNN-RAG's reasoning paths; needs a trained reasoner).
        top_k_nodes, top_k_edges, edge_cost: override the kind's PCST settings (None keeps them).
        link_k: most similar nodes that seed the neighbourhood of a large graph when the question links no entity.
        hops, max_nodes, max_expand_degree: the neighbourhood cut for large graphs
            (see :class:`~gr_core.kg.NeighbourhoodConfig`).
        whole_graph_edges: graphs with at most this many edges are searched whole (the paper's setting).
        edge_tiebreak: weight of the endpoints' similarity added to each edge's relation similarity, which breaks the
            relation tie groups of KBs with few relations (0 = the paper's rule; see :meth:`GraphChat.retrieve`).
        relevance_threshold, relation_threshold: a question that names no entity of the graph (a linked name of two or
            more content words, or a ``[Name]``) and is not a follow-up is "not about this graph" when its best node
            similarity is below ``relevance_threshold`` or its best relation similarity below ``relation_threshold``
            (None: :data:`KIND_RELATION_THRESHOLD`). The KG value separates MetaQA questions from off-topic ones in
            ``bench/chat.py`` (relation similarity 5th percentile 0.21 vs 95th percentile 0.16 there; calibrated on
            that sample, so another graph may need its own).
        history_turns, history_tokens: earlier turns kept in the prompt, most recent first, within this many tokens.
        max_txt_len: token budget of the textualized evidence (GR code: 512).
        max_new_tokens: answer budget (GR code 32; citations need more).
        cite: also ask the model to list the supporting nodes and edges (GR App. F's request). The answer is checked
            either way (its entity names and any citation it writes); off by default because the embedded 135M
            models then echo CSV rows instead of answering (``bench/chat.py`` measures Hit with and without it).
    """

    kind: str = "kg"
    retriever: str = "pcst"
    top_k_nodes: int | None = None
    top_k_edges: int | None = None
    edge_cost: float | None = None
    link_k: int = 3
    hops: int = 2  # MetaQA questions reach 3 hops; 2 keeps neighbourhoods of hub-rich KBs small
    max_nodes: int = 2000  # GNN-RAG's dense subgraphs keep 2,000 entities
    max_expand_degree: int = 200  # see NeighbourhoodConfig
    whole_graph_edges: int = 20_000
    relevance_threshold: float = 0.3
    relation_threshold: float | None = None
    edge_tiebreak: float = 0.0  # the paper's rule; bench/chat.py measures 1e-3 beside it
    history_turns: int = 3
    history_tokens: int = 160
    max_txt_len: int = 512  # GR code src/config.py
    max_new_tokens: int = 48
    cite: bool = False  # measured: the 135M models answer worse when asked to cite (bench/chat.py)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"ChatConfig.kind={self.kind!r} is not one of {KINDS}")
        if self.retriever not in ("pcst", "gnn"):
            raise ValueError(f"ChatConfig.retriever={self.retriever!r} is not 'pcst' or 'gnn'")
        if self.link_k < 0 or self.hops < 0 or self.max_nodes < 1 or self.history_turns < 0 or self.max_new_tokens < 1:
            raise ValueError("ChatConfig: link_k, hops, history_turns >= 0; max_nodes, max_new_tokens >= 1 required")

    @property
    def retrieval(self) -> RetrievalConfig:
        cfg = KIND_RETRIEVAL[self.kind]
        over = {k: v for k, v in (("top_k_nodes", self.top_k_nodes), ("top_k_edges", self.top_k_edges),
                                  ("edge_cost", self.edge_cost)) if v is not None}
        return replace(cfg, **over)
