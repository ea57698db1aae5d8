"""How the chat retrieves and answers: :class:`ChatConfig` and the defaults each kind of graph borrows."""
from __future__ import annotations

import re

from dataclasses import dataclass, replace

from ..g_retriever.retrieval import DATASET_RETRIEVAL, RetrievalConfig
from ..kg import NeighbourhoodConfig
from ..config import check_choice

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
# How each kind answers when ChatConfig.answer_mode is None. KG questions ask for entities, so the answer is ranked
# among the evidence's node names (bench/chat.py measures the modes); scene and ExplaGraphs questions ask for an
# attribute, a count or a stance that is no node: free text.
ANSWER_MODES = ("free", "ranked", "reasoner", "paths")
RETRIEVERS = ("auto", "pcst", "gnn")
KIND_ANSWER_MODE = {"kg": "ranked", "scene": "free", "explanation": "free"}
# A KG whose relation names read as words (directed_by, born in) is answered by the path ranker when no reasoner
# knows it: on MetaQA it beats the LLM ranking, on WebQSP's schema paths (people.person.nationality) it loses
# (docs/chat.md, "Which default"; :func:`relations_read_as_words`).
WORD_RELATIONS_ANSWER_MODE = "paths"


def relations_read_as_words(relations) -> bool:
    """Whether most of a KG's relation names are words (``directed_by``, ``born in``, ``capital of``) rather than
    schema paths (Freebase's ``people.person.nationality``, ``wdt:P31``) or identifiers (Wikidata's ``P31``,
    ``rel_1``).

    >>> relations_read_as_words(["directed_by", "starred_actors"]), relations_read_as_words(["people.person.gender"])
    (True, False)
    """
    names = [str(r) for r in relations if str(r).strip()]
    schema = sum(any(c in r for c in "./:") or bool(re.fullmatch(r"[A-Za-z_]{0,4}\d+", r)) for r in names)
    return bool(names) and schema < len(names) / 2
# How each kind writes its evidence when ChatConfig.evidence_format is None: KG names spelled out in lines
# (bench/chat.py); the others keep the paper's CSV tables (GR Table 9), not measured against lines.
EVIDENCE_FORMATS = ("csv", "triples")
PATH_SCORERS = ("sentence", "coverage")  # paths mode (gr_core.chat.path_ranker)
PATH_WORD_FITS = ("contrast", "cosine")  # coverage: how a question word fits a relation (path_ranker.word_relation_fit)
KIND_EVIDENCE_FORMAT = {"kg": "triples", "scene": "csv", "explanation": "csv"}
CHECKPOINT_PRESETS = ("full", "quick")  # smoke runs are CI-sized (one epoch on 8 questions): never served


@dataclass(frozen=True)
class ChatConfig:
    """How :class:`GraphChat` retrieves and answers.

    Attributes:
        kind: ``kg``, ``scene`` or ``explanation``: picks the checkpoint family, the question template and retrieval
            defaults (``KIND_RETRIEVAL``: GR App. B.1).
        retriever: ``pcst`` (G-Retriever), ``gnn`` (GNN-RAG's reasoning paths; needs a trained reasoner) or ``auto``
            (the default): ``gnn`` when a reasoner is given or a saved one was trained on this graph's relations
            (:func:`~gr_core.chat.find_reasoner`; ``python -m gr_core.gnn_rag chat`` trains MetaQA's), else
            ``pcst``. On the MetaQA sample of ``bench/chat.py`` the chat's reasoner lifts Hit from 45.0 to 68.3
            (docs/chat.md, "A reasoner for the chat").
        top_k_nodes, top_k_edges, edge_cost: override the kind's PCST settings (None keeps them).
        link_k: most similar nodes that seed the neighbourhood of a large graph when the question links no entity.
        link_uncased: in a question without any capital letter, link one-word names where no longer name links
            (:meth:`~gr_core.chat.ChatIndex.link`; False: one-word names only capitalized mid-sentence, as in a
            cased question).
        link_partial: where no name links, the nodes whose name shares the most content words with the question
            (:meth:`~gr_core.chat.ChatIndex.partial_link`: "heskey" -> "Emile Heskey"); such a link seeds retrieval
            and keeps that node out of the answers; it makes a question about the graph only with two or more words
            and at least half of the name's, stop words counted ("stanley matthews" for "Sir Stanley Matthews", not
            "heskey").
        hops, max_nodes, max_expand_degree: the neighbourhood cut for large graphs
            (see :class:`~gr_core.kg.NeighbourhoodConfig`).
        whole_graph_edges: graphs with at most this many edges are searched whole (the paper's setting).
        edge_tiebreak: weight of the endpoints' similarity added to each edge's relation similarity, which breaks the
            relation tie groups of KBs with few relations (0 = the paper's rule; see :meth:`GraphChat.retrieve`).
        relevance_threshold, relation_threshold: a question that names no entity of the graph (a linked name of two or
            more content words, a ``[Name]``, the graph's hub, or a name in part as ``link_partial`` says;
            :meth:`~gr_core.chat.ChatIndex.names_the_graph`) and is not a follow-up is
            "not about this graph" when its best node similarity is below ``relevance_threshold`` or its best relation
            similarity below ``relation_threshold`` (None: :data:`KIND_RELATION_THRESHOLD`). The KG value separates
            MetaQA questions from off-topic ones in ``bench/chat.py`` (relation similarity 5th percentile 0.21 vs 95th
            percentile 0.16 there; calibrated on that sample, so another graph may need its own).
        history_turns, history_tokens: earlier turns kept in the prompt, most recent first, within this many tokens.
        max_txt_len: token budget of the textualized evidence (GR code: 512).
        max_new_tokens: answer budget (GR code 32; citations need more).
        answer_mode: ``free`` (the LLM writes the answer; checked afterwards), ``ranked`` (the LLM scores every node
            name of the evidence as its reply and the best ones are the answer: a node by construction, see
            :mod:`gr_core.chat.ranking`), ``reasoner`` (GNN-RAG's reasoner ranks the candidates, no LLM; needs
            ``retriever="gnn"``), ``paths`` (no model: the relation path from the question's entity whose relation
            names read most like the question, :mod:`gr_core.chat.path_ranker`; two named entities: the intersection);
            None: ``reasoner`` when the retriever is ``gnn``, else the kind's default (:data:`KIND_ANSWER_MODE`),
            except that :class:`~gr_core.chat.GraphChat` answers a KG whose relation names read as words
            (:func:`relations_read_as_words`) with ``paths``.
        path_intersect: ``paths`` mode: a question naming two entities is answered by the intersection of what each
            one's paths reach (False: the best single path of either).
        path_hops, path_hop_penalty: ``paths`` mode: the longest relation path followed from the question's entity,
            and the score subtracted per hop beyond the first (:class:`~gr_core.chat.path_ranker.PathScorer`).
        path_scorer, path_coverage_tau: ``paths`` mode: how a path is scored: ``coverage`` (each relation step named
            by its own word of the question, each step's word fit less ``path_coverage_tau``; two entities' paths
            share the words; :meth:`~gr_core.chat.path_ranker.PathScorer.coverage_score`) or ``sentence`` (the
            question's sentence vector against the path's relation names). Under coverage: ``path_word_fit``, how a
            word fits a relation: ``contrast`` (its similarity to the relation less its best similarity to any other
            relation of the graph, :func:`~gr_core.chat.path_ranker.word_relation_fit`) or ``cosine`` (the first
            version, with ``path_coverage_tau=0.55``); ``path_lexical_match``, the similarity a shared word stem
            counts as (0: stems not read); ``path_order_bonus``, added when a path's named steps take words ever
            farther from the entity in the question, subtracted otherwise; ``path_same_bonus``, added for each step
            followed there and back that a word of sameness ("co-starred", "together", "same") names, subtracted for
            each one no such word names; ``path_twins``, a word's contrast not taken against a relation's twins (the
            same facts under another name, :meth:`~gr_core.kg.KnowledgeGraph.twin_relations`: Freebase's inverses).
        path_reasoner_weight: ``paths`` mode with ``retriever="gnn"``: each path's score gains this weight times the
            reasoner's probability mass on the nodes it reaches (:func:`~gr_core.chat.path_ranker.best_paths`; 0: off,
            as measured best with a reasoner trained on generated questions).
        answer_unnamed: also answer with nodes whose name is an identifier (:func:`~gr_core.kg.is_identifier`: a
            Freebase mid, a blank node), which ``ranked``, ``paths`` and ``reasoner`` answers otherwise leave out (paths
            through them are followed on to the named nodes beyond; where only such nodes are within reach, they
            come back rather than no answer, in every mode).
        max_answers, answer_margin: a ranked answer lists the best candidate and those whose score is within
            ``answer_margin`` of it, at most ``max_answers``.
        calibrate, length_norm: ranked-mode scoring options (see :func:`~gr_core.chat.ranking.rank_candidates`).
        relation_prior: ranked mode: this weight times the best question-relation similarity among a candidate's
            evidence edges is added to its log-likelihood (0: the LLM alone).
        evidence_format: how the evidence is written in the prompt: ``csv`` (the paper's node and edge tables,
            GR Table 9) or ``triples`` (``head | relation | tail`` lines, names spelled out); None: the kind's
            default (:data:`KIND_EVIDENCE_FORMAT`).
        cite: also ask the model to list the supporting nodes and edges (GR App. F's request). The answer is checked
            either way (its entity names and any citation it writes); off by default because the embedded 135M
            models then echo CSV rows instead of answering (``bench/chat.py`` measures Hit with and without it).
    """

    kind: str = "kg"
    retriever: str = "auto"
    top_k_nodes: int | None = None
    top_k_edges: int | None = None
    edge_cost: float | None = None
    link_k: int = 3
    # WebQSP's questions are lowercase: half of them linked nothing without it (docs/chat.md, "Lowercase questions")
    link_uncased: bool = True
    link_partial: bool = True  # chosen on WebQSP validation graphs (docs/chat.md, "Lowercase questions")
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
    answer_mode: str | None = None
    max_answers: int = 3
    answer_margin: float = 2.0
    calibrate: bool = False
    length_norm: bool = False
    relation_prior: float = 20.0  # bench/chat.py: 0, 10, 20 on the MetaQA sample (20: best Hit and Hit@1)
    path_hops: int = 3  # MetaQA's questions take 1 to 3 hops
    path_intersect: bool = True  # two named entities: the intersection of their paths (False: the best single path)
    path_hop_penalty: float = 0.1  # chosen on MetaQA's dev questions (docs/chat.md, "Chat without training questions")
    # "coverage" against "sentence": MetaQA test 58.7 vs 52.3 (p 0.0003), WebQSP 34.0 vs 34.3 (p 1.0), two-entity
    # MetaQA questions 96.5 vs 66.5 (p 2e-18; the pair's steps scored together) (docs/chat.md, "Other ways to score")
    path_scorer: str = "coverage"
    # coverage: the word fit, the step threshold, stems and reading order, chosen together on MetaQA's dev questions
    # (docs/chat.md, "Words that pick a relation out"); the first version: "cosine", 0.55, 0, 0
    path_word_fit: str = "contrast"
    path_coverage_tau: float = 0.05
    path_lexical_match: float = 0.8
    path_order_bonus: float = 0.02
    # a graph without twin relations (MetaQA's KB) reads the same either way (docs/chat.md, "Relations stored twice")
    path_twins: bool = True
    # coverage: per "same <relation>" step named (or not) by a word of sameness; chosen on MetaQA's dev questions
    # (0 / 0.05 / 0.1 / 0.2: Hit 55.0 / 65.7 / 67.0 / 66.0; docs/chat.md, "Other ways to score the paths")
    path_same_bonus: float = 0.1
    # paths mode with retriever "gnn"; MetaQA dev with the generated-question reasoner, weights 0 / 0.1 / 0.2 / 0.5:
    # Hit 83.0 / 82.3 / 78.3 / 60.3, so off (docs/chat.md, "The path ranker helped by a generated reasoner")
    path_reasoner_weight: float = 0.0
    # a node named by an identifier (a Freebase mid: WebQSP's mediator nodes) is never a ranked, path or reasoner answer
    # (docs/chat.md, "Nodes that name nothing")
    answer_unnamed: bool = False
    evidence_format: str | None = None

    def __post_init__(self) -> None:
        check_choice("ChatConfig", "kind", self.kind, KINDS)
        check_choice("ChatConfig", "retriever", self.retriever, RETRIEVERS)
        if self.answer_mode is not None and self.answer_mode not in ANSWER_MODES:
            raise ValueError(f"ChatConfig.answer_mode={self.answer_mode!r} is not one of {ANSWER_MODES} (or None)")
        if self.answer_mode == "reasoner" and self.retriever == "pcst":
            raise ValueError("ChatConfig.answer_mode='reasoner' ranks the GNN-RAG reasoner's candidates: it needs "
                             "retriever='gnn'")
        check_choice("ChatConfig", "path_scorer", self.path_scorer, PATH_SCORERS)
        check_choice("ChatConfig", "path_word_fit", self.path_word_fit, PATH_WORD_FITS)
        if self.evidence_format is not None and self.evidence_format not in EVIDENCE_FORMATS:
            raise ValueError(f"ChatConfig.evidence_format={self.evidence_format!r} is not one of {EVIDENCE_FORMATS}")
        if self.max_answers < 1 or self.answer_margin < 0:
            raise ValueError("ChatConfig: max_answers >= 1 and answer_margin >= 0 required")
        if self.link_k < 0 or self.hops < 0 or self.max_nodes < 1 or self.history_turns < 0 or self.max_new_tokens < 1:
            raise ValueError("ChatConfig: link_k, hops, history_turns >= 0; max_nodes, max_new_tokens >= 1 required")

    @property
    def mode(self) -> str:
        """The answer mode in effect: ``answer_mode``, else ``reasoner`` with GNN-RAG's retriever (bench/chat.py: Hit
        68.3 vs 68.3 for the LLM ranking the paths' nodes on MetaQA, 80.0 vs 55.0 on WebQSP test graphs; docs/chat.md),
        else the kind's default."""
        return self.answer_mode or ("reasoner" if self.retriever == "gnn" else KIND_ANSWER_MODE[self.kind])

    @property
    def desc_format(self) -> str:
        """The evidence format in effect (``evidence_format``, else the kind's default)."""
        return self.evidence_format or KIND_EVIDENCE_FORMAT[self.kind]

    @property
    def neighbourhood(self):
        """The neighbourhood a turn searches in a large graph, as a :class:`~gr_core.kg.NeighbourhoodConfig`."""

        return NeighbourhoodConfig(self.hops, self.max_expand_degree, self.max_nodes)

    @property
    def retrieval(self) -> RetrievalConfig:
        cfg = KIND_RETRIEVAL[self.kind]
        over = {k: v for k, v in (("top_k_nodes", self.top_k_nodes), ("top_k_edges", self.top_k_edges),
                                  ("edge_cost", self.edge_cost)) if v is not None}
        return replace(cfg, **over)
