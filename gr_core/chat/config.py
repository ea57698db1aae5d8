"""How the chat answers: :class:`ChatConfig` and the defaults each kind of graph borrows."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..config import check_choice, check_types
from ..g_retriever.retrieval import DATASET_RETRIEVAL, RetrievalConfig
from ..kg import NeighbourhoodConfig

KINDS = ("kg", "scene", "explanation")
# Which trained runs serve which kind of graph (first found wins), and whose question template and retrieval
# defaults a kind borrows (GR App. B.1: KGQA k = 3 nodes / 5 edges, C_e = 0.5; scene graphs 3 / 3, 0.5).
KIND_DATASETS = {"kg": ("metaqa", "webqsp", "webqsp_full"), "scene": ("clevr", "gqa_micro"),
                 "explanation": ("explagraphs",)}
KIND_TEMPLATE = {"kg": "webqsp", "scene": "clevr", "explanation": "webqsp"}
KIND_RETRIEVAL = {"kg": DATASET_RETRIEVAL["metaqa"], "scene": DATASET_RETRIEVAL["clevr"],
                  "explanation": DATASET_RETRIEVAL["explagraphs"]}
# Relation similarity below which a KG question asks nothing the graph relates (MetaQA against off-topic questions,
# CHANGELOG.md); scene graphs' relations (left of, behind) and ExplaGraphs' (causes) are rarely named: not used.
KIND_RELATION_THRESHOLD = {"kg": 0.18, "scene": 0.0, "explanation": 0.0}
# answer_mode: "paths" (the relation path the question's words name: no model), "reasoner" (GNN-RAG's), "ranked"
# (the LLM scores the evidence's node names), "free" (the LLM writes); "auto": the kind's default or a served reasoner
ANSWER_MODES = ("auto", "paths", "reasoner", "ranked", "free")
MODEL_FREE_MODES = ("paths", "reasoner")  # the others run the LLM
KIND_ANSWER_MODE = {"kg": "paths", "scene": "free", "explanation": "free"}
# How the LLM reads the evidence: KG facts as "head | relation | tail" lines, the others the paper's CSV tables
KIND_EVIDENCE_FORMAT = {"kg": "triples", "scene": "csv", "explanation": "csv"}
CHECKPOINT_PRESETS = ("full", "quick")  # smoke runs are CI-sized (one epoch on 4 questions): never served


@dataclass(frozen=True)
class ChatConfig:
    """How :class:`~gr_core.chat.GraphChat` links, searches and answers.

    Attributes:
        kind: ``kg``, ``scene`` or ``explanation``: the answer's default, the checkpoint family, the question
            template and PCST's settings (:data:`KIND_RETRIEVAL`, GR App. B.1).
        answer_mode: one of :data:`ANSWER_MODES`.
        retrieval: PCST's settings for the LLM modes (None: the kind's).
        whole_graph_edges: a graph of at most this many edges is searched whole, a larger one in ``scope`` around the
            linked entities (:func:`~gr_core.chat.scope.search_scope`).
        scope: the neighbourhood a turn searches in a larger graph (:class:`~gr_core.kg.NeighbourhoodConfig`).
        path_hops: the longest relation path the path ranker follows.
        link_k: the most similar nodes that seed the scope when the question names no entity.
        relevance_threshold, relation_threshold: a question that names no entity of the graph and is no follow-up is
            "not about this graph" when its best node similarity is below ``relevance_threshold`` or its best relation
            similarity below ``relation_threshold`` (None: :data:`KIND_RELATION_THRESHOLD`).
        max_answers: the most nodes a turn answers with.
        history_turns, history_tokens: earlier turns in an LLM's prompt, most recent first, within this many tokens.
        max_txt_len: the evidence's token budget in an LLM's prompt (GR code: 512).
        max_new_tokens: a free answer's budget (GR code 32; citations need more).
        cite: also ask the LLM to list the supporting nodes and edges (GR App. F). Answers are checked either way;
            off because the embedded 135M models then echo CSV rows instead of answering (CHANGELOG.md).
    """

    kind: str = "kg"
    answer_mode: str = "auto"
    retrieval: RetrievalConfig | None = None
    # a reasoner trains on a whole graph up to about this size in time (docs/chat.md); WebQSP's and scene graphs fit
    whole_graph_edges: int = 1_000
    # 2 hops, the reasoner's generated chains; 2,000 entities: GNN-RAG's dense subgraphs; hubs of more than 200 facts
    # not expanded (NeighbourhoodConfig)
    scope: NeighbourhoodConfig = field(default_factory=lambda: NeighbourhoodConfig(2, 200, 2000))
    path_hops: int = 3  # MetaQA's questions take 1 to 3 hops
    link_k: int = 3
    relevance_threshold: float = 0.3
    relation_threshold: float | None = None
    max_answers: int = 3
    history_turns: int = 3
    history_tokens: int = 160
    max_txt_len: int = 512  # GR code src/config.py
    max_new_tokens: int = 48
    cite: bool = False

    def __post_init__(self) -> None:
        check_types(self)  # a 2.0 from a JSON or YAML file would fail only at the first turn
        check_choice("ChatConfig", "kind", self.kind, KINDS)
        check_choice("ChatConfig", "answer_mode", self.answer_mode, ANSWER_MODES)
        for name in ("max_answers", "max_new_tokens", "path_hops"):
            if getattr(self, name) < 1:
                raise ValueError(f"ChatConfig.{name}={getattr(self, name)} must be >= 1")
        if min(self.link_k, self.history_turns, self.whole_graph_edges) < 0:
            raise ValueError("ChatConfig: link_k, history_turns and whole_graph_edges >= 0 required")

    @property
    def pcst(self) -> RetrievalConfig:
        """PCST's settings in effect (``retrieval``, else the kind's)."""
        return self.retrieval or KIND_RETRIEVAL[self.kind]

    @property
    def evidence_format(self) -> str:
        return KIND_EVIDENCE_FORMAT[self.kind]
