"""A GNN-RAG reasoner trained from the graph alone: on questions generated from its facts (:mod:`.generate`).

:func:`train_graph_reasoner` generates the questions, cuts each one's neighbourhood as a chat turn on a large graph
does (:attr:`ChatConfig.neighbourhood <gr_core.chat.ChatConfig.neighbourhood>`; a turn on a small graph searches it
whole, which costs one forward but would make every training step as large as the graph), trains ReaRev with the
existing code (:func:`gr_core.gnn_rag.train_reasoner`, the epoch kept by H@1 on held-out generated questions) and saves
it under ``.cache/chat/reasoners/`` keyed by the graphs' content hashes and every setting: a second call with the same
graph and settings loads it (no training).
:func:`question_graph` builds the reasoner's input for a turn and for a generated question alike.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from ..config import EMBEDDED_TEXT_ENCODER, TextEncoderConfig
from ..gnn_rag import QuestionGraph, ReasonerTrainConfig, save_reasoner, train_reasoner
from ..gnn_rag.model import ReasonerConfig
from ..paths import cache_root
from ..runs import config_hash, progress
from ..text_encoder import EmbeddingStore, encoder_identity
from .config import ChatConfig
from .generate import (KIND_PROTOTYPES, GeneratedQuestion, GenerationConfig, answer_kinds, generate_questions,
                       generation_summary, graph_phrase_twins, relation_phrase)
from .index import ChatIndex
from .models import reasoner_meta
from .path_ranker import SAMENESS, STOPWORDS, WORDS, PathScorer

# bump when the saved reasoner's meaning changes (keys the cache; 2: trained on neighbourhoods; 3: relation_match's
# reading with NAMED)
FORMAT_VERSION = 3
# How the reasoner's reading of a question (read_question) decides that a word names a relation:
# a shared stem counts as the path ranker's default similarity, and the word's fit must exceed NAMED. The path
# ranker's own threshold (0.05) lets "film", "movies", "listed" name a relation of MetaQA's at 0.06-0.09, where the
# words that name one fit at 0.2-0.5 (exploratory runs on MetaQA dev questions, docs/chat.md); fixed so that a turn
# reads as training did.
LEXICAL, NAMED = ChatConfig().path_lexical_match, 0.15
ASKING = frozenset(("where", "when"))  # question words the path ranker reads as content words (who, what: function)
MIN_QUESTIONS = 20  # fewer generated questions than this train no reasoner (a graph too small: TooFewQuestions)


# How a reasoner trained on generated questions reads a question (docs/chat.md "How that reasoner reads a
# question"): the words that name relations (read_question), on top of ReaRev's defaults; a relation's twins (the same
# facts under another name) set aside when a word's fit is taken (docs/chat.md "Relations stored twice": WebQSP val
# 67.8 against 65.7 over 3 seeds, p = 0.07; the same on a graph without twins, as MetaQA's KB).
GENERATED_READING = ReasonerConfig(relation_match=True, relation_words_only=True, twin_relations=True)


class TooFewQuestions(ValueError):
    """The graph is too small (or too uniform) to generate enough questions to train a reasoner from."""


@dataclass(frozen=True)
class GraphReasonerConfig:
    """Training a reasoner on generated questions (defaults: the chat's budget, issue targets in docs/chat.md).

    Attributes:
        generation: how many questions, of which shape (:class:`~gr_core.chat.generate.GenerationConfig`).
        reasoner: ReaRev's settings (GNN-RAG's, :class:`~gr_core.gnn_rag.ReasonerConfig`, reading the question through
            the words that name relations: :data:`GENERATED_READING`).
        num_epochs: at most this many epochs; the best on the held-out generated questions is kept. 3: held-out
            generated H@1 still rises after 3 epochs, but real questions are answered worse (the templates are
            learned, not the relations; docs/chat.md "How long to train, and several reasoners as one").
        time_budget_s: no epoch starts that would end past this (0: none); the data building is not counted. A cap:
            3 epochs take 60-141 s on 2 cores for the graphs measured, so the count no longer depends on the machine.
        val_fraction: generated questions held out to choose the epoch.
        lr, batch_size: GNN-RAG's (:class:`~gr_core.gnn_rag.ReasonerTrainConfig`).
        seed: the training seed (the generator has its own).
        members: reasoners trained and read as one (:class:`~gr_core.gnn_rag.ReasonerEnsemble`, the mean of their node
            distributions): member ``k`` is this configuration with ``seed + k`` and its questions generated with
            ``generation.seed + k`` (:func:`member_configs`), each with its own ``time_budget_s``, each cached alone
            (member 0 is the one reasoner of ``members=1``).
    """

    generation: GenerationConfig = field(default_factory=GenerationConfig)
    reasoner: ReasonerConfig = field(default_factory=lambda: GENERATED_READING)
    num_epochs: int = 3  # chosen on WebQSP val and MetaQA dev among 1, 2, 3, 5, 10 (docs/chat.md)
    time_budget_s: float = 240.0  # with the data building, within the 5 minutes a 10k-triple graph may take
    val_fraction: float = 0.1
    lr: float = 5e-4
    batch_size: int = 8
    seed: int = 0
    members: int = 1

    def __post_init__(self) -> None:
        # 600 and 600.0 are one budget: the cache key hashes the JSON of these fields
        object.__setattr__(self, "time_budget_s", float(self.time_budget_s))
        object.__setattr__(self, "lr", float(self.lr))
        if not 0.0 < self.val_fraction < 1.0 or self.num_epochs < 1 or self.members < 1:
            raise ValueError("GraphReasonerConfig: 0 < val_fraction < 1, num_epochs >= 1 and members >= 1 required")


def member_configs(cfg: GraphReasonerConfig) -> list[GraphReasonerConfig]:
    """The single reasoners of ``cfg.members``: member ``k`` seeded ``seed + k``, its generator ``generation.seed + k``
    (as the seeds studies seed their runs: other questions, another initialization and order)."""
    return [replace(cfg, members=1, seed=cfg.seed + k, generation=replace(cfg.generation, seed=cfg.generation.seed + k))
            for k in range(cfg.members)]


@dataclass(frozen=True)
class QuestionReading:
    """What a reasoner with :class:`~gr_core.gnn_rag.ReasonerConfig` ``relation_match`` / ``relation_words_only``
    reads of a question besides its sentence vector (:func:`read_question`).

    Attributes:
        text: the question (entities written "it") kept to its function words, words of sameness and the words that
            name a relation ("which film did it write" -> "which did it write"); unchanged when not ``words_only``.
        match: ``rel_match (R,)`` float32 in [0, 1]: per relation of the graph, the best
            :func:`~gr_core.chat.path_ranker.word_relation_fit` of any of the question's words, where above
            :data:`NAMED` (else 0).
        steps: ``q_steps (2,)``: whether a word asks for "the same" (co-starred) and how many relations are named (a
            third each, at most 1): how many steps the question asks for.
    """

    text: str
    match: np.ndarray
    steps: np.ndarray


def read_question(scorer: PathScorer, masked: str, relations: list[str], words_only: bool = True,
                  asking: bool = False, twins: dict[str, int] | None = None) -> QuestionReading:
    """:class:`QuestionReading` of the question ``masked`` (its entities written "it") on a graph with ``relations``,
    its words read as the path ranker reads them (one word fit per word and relation, computed once); ``asking``
    keeps :data:`ASKING` words in the text too (``ReasonerConfig.asking_words``); ``twins``: relation phrase -> twin
    group (:func:`reading_twins`), a word's fit not lowered by a relation's twins."""
    phrases = list(dict.fromkeys(relation_phrase(r) for r in relations))
    words = scorer.question_words(masked, phrases, LEXICAL, twins)
    fit = np.stack([words.fit[p] for p in phrases]) if phrases else np.zeros((0, len(words.vectors)))  # (P, W)
    best = dict(zip(phrases, fit.max(axis=1, initial=0.0)))  # per phrase: its best word
    named = np.array([best[relation_phrase(r)] for r in relations])
    text = masked
    if words_only:  # tokens in the order content_words reads them: word j is the j-th token not a function word
        per_word, kept, j = fit.max(axis=0, initial=0.0), [], 0
        for t in WORDS.findall(masked.lower()):
            if t in STOPWORDS or t in SAMENESS:
                kept.append(t)
                continue
            kept += [t] if per_word[j] > NAMED or (asking and t in ASKING) else []
            j += 1
        text = " ".join(kept)
    return QuestionReading(text, np.where(named > NAMED, np.minimum(named, 1.0), 0.0).astype(np.float32),
                           np.array([min(words.sameness, 1), min(int((named > NAMED).sum()), 3) / 3], np.float32))


def reading_twins(kg, reasoner: ReasonerConfig) -> dict[str, int] | None:
    """The relation phrases' twin groups where ``reasoner`` reads them (``twin_relations``), else None."""
    return graph_phrase_twins(kg) if reasoner.twin_relations else None


def question_graph(index: ChatIndex, nodes: np.ndarray, edges: np.ndarray, seeds: np.ndarray, q: np.ndarray,
                   q_masked: np.ndarray | None = None, answers: np.ndarray | None = None, shared: dict | None = None,
                   reading: QuestionReading | None = None):
    """The reasoner's input for one question on the searched part of ``index``'s graph.

    Args:
        nodes, edges: node rows ``(N,)`` and edge rows ``(E,)`` of the index (:meth:`ChatIndex.scope`).
        seeds: positions in ``nodes`` of the question's entities; ``answers``: positions of its answers (None: none).
        q, q_masked: the question's sentence vector ``(dim,)`` as asked and with its topic masked (None: absent).
        shared: :func:`scope_tensors` of ``(nodes, edges)`` when already built (a whole graph searched by every
            question shares them).
        reading: :func:`read_question` for a reasoner with ``relation_match`` (its ``rel_match`` and ``q_steps``).
    Returns:
        a :class:`~gr_core.gnn_rag.QuestionGraph` over ``N`` nodes (``rel_table`` = every relation of the graph).
    """


    shared = shared if shared is not None else scope_tensors(index, nodes, edges)
    n = len(nodes)
    seed = torch.zeros(n, dtype=torch.bool)
    seed[torch.as_tensor(np.asarray(seeds, np.int64))] = True
    answer = torch.zeros(n, dtype=torch.bool)
    if answers is not None and len(answers):
        answer[torch.as_tensor(np.asarray(answers, np.int64))] = True
    extra = {} if q_masked is None else {"q_masked": torch.from_numpy(np.asarray(q_masked, np.float32)).view(1, -1)}
    if reading is not None:
        extra["rel_match"] = torch.from_numpy(reading.match)
        extra["q_steps"] = torch.from_numpy(reading.steps).view(1, -1)
    return QuestionGraph(seed=seed, answer=answer, q_emb=torch.from_numpy(np.asarray(q, np.float32)).view(1, -1),
                         num_nodes=n, **shared, **extra)


def scope_tensors(index: ChatIndex, nodes: np.ndarray, edges: np.ndarray) -> dict:
    """``edge_index (2, E)`` over positions in ``nodes``, ``rel_table (R, dim)``, ``rel_id (E,)``."""

    kg = index.kg
    pos = np.full(index.num_nodes, -1, np.int64)
    pos[nodes] = np.arange(len(nodes))
    return {"edge_index": torch.from_numpy(np.stack([pos[kg.heads[edges]], pos[kg.tails[edges]]])).view(2, -1),
            "rel_table": torch.from_numpy(index.rel_emb), "rel_id": torch.from_numpy(kg.rels[edges]).long()}


def reasoner_cache_path(indexes: list[ChatIndex], cfg: GraphReasonerConfig, neighbourhood, encoder: str
                        ) -> tuple[Path, str, dict]:
    """Where the reasoner of these graphs and settings is saved: ``(path, key, identity)``."""

    # one file is one reasoner: "members" is left out of its key, and fields added later while they are off (a key made
    # before the field existed stays valid)
    config = {k: v for k, v in asdict(cfg).items() if k != "members"}
    for part, name in (("generation", "ask_kind"), ("reasoner", "asking_words"), ("reasoner", "twin_relations")):
        if not config[part][name]:
            config[part] = {k: v for k, v in config[part].items() if k != name}
    identity = {"graphs": [ix.digest for ix in indexes], "config": config, "scope": asdict(neighbourhood),
                "encoder": encoder, "format": FORMAT_VERSION}
    key = config_hash(identity)
    return cache_root() / "chat" / "reasoners" / f"{key}.pt", key, identity


def generated_dataset(indexes: list[ChatIndex], cfg: GraphReasonerConfig, neighbourhood, store
                      ) -> tuple[list, list[GeneratedQuestion], dict]:
    """Generate the questions of every graph (the question budget split evenly; graph ``k`` uses seed
    ``generation.seed + k``) and build their reasoner inputs on each topic's ``neighbourhood`` (the chat's).

    Returns:
        ``(question graphs, their generated questions, counts)``: questions whose answers all fall outside their
        scope (a hub not expanded) are dropped and counted; with ``relation_words_only`` a question's ``masked`` is
        the text the reasoner read (:func:`read_question`).
    """

    per_graph = max(1, cfg.generation.num_questions // len(indexes))
    made: list[tuple[int, GeneratedQuestion]] = []
    prototypes = store.encode(list(KIND_PROTOTYPES))[0] if cfg.generation.ask_kind else None
    for k, index in enumerate(indexes):
        if index.num_edges == 0:
            continue
        gen = replace(cfg.generation, num_questions=per_graph, seed=cfg.generation.seed + k)
        kinds = answer_kinds(index.kg.entities, index.node_emb, prototypes) if gen.ask_kind else None
        made += [(k, q) for q in generate_questions(index.kg, gen, kinds)]
    rcfg = cfg.reasoner
    readings = [None] * len(made)
    if rcfg.relation_match or rcfg.relation_words_only:  # read as a turn reads (GraphChat.retrieve)
        scorer = PathScorer(lambda words: store.encode(words, desc="encode question words")[0])
        twins = [reading_twins(ix.kg, rcfg) for ix in indexes]
        readings = [read_question(scorer, q.masked, indexes[k].kg.relations, rcfg.relation_words_only,
                                  rcfg.asking_words, twins[k]) for k, q in made]
        made = [(k, replace(q, masked=r.text)) for (k, q), r in zip(made, readings)]
    texts = list(dict.fromkeys([q.text for _, q in made] + [q.masked for _, q in made]))
    emb, _ = store.encode(texts, desc="encode generated questions") if texts else (np.zeros((0, 1), np.float32), 0)
    row = {t: i for i, t in enumerate(texts)}
    data, kept, out_of_scope = [], [], 0
    for (k, q), reading in progress(list(zip(made, readings)), desc="generated question graphs"):
        index = indexes[k]
        # Trained on the topic's neighbourhood even where a turn searches the whole graph
        # (ChatConfig.whole_graph_edges): a 5,214-triple graph searched whole took 325 s an epoch on 2 cores, and the
        # reasoner's layers reach no further than its hops from the seeds anyway (GNN-RAG also trains on each question's
        # own subgraph).
        nodes, edges = index.kg.neighbourhood(np.array([q.topic]), neighbourhood)
        local = {int(n): i for i, n in enumerate(nodes)}
        answers = np.array([local[a] for a in q.answers if a in local], np.int64)
        if len(answers) == 0:
            out_of_scope += 1
            continue
        data.append(question_graph(index, nodes, edges, np.array([local[q.topic]]), emb[row[q.text]],
                                   emb[row[q.masked]], answers, reading=reading if rcfg.relation_match else None))
        kept.append(q)
    if len(data) < MIN_QUESTIONS:
        edges = sum(ix.num_edges for ix in indexes)
        raise TooFewQuestions(f"only {len(data)} questions could be generated from this graph ({edges} edges; at least "
                              f"{MIN_QUESTIONS} are needed to train a reasoner): ask with answer_mode='paths', which "
                              "needs no training")
    return data, kept, {"generated": len(made), "answers_outside_scope": out_of_scope}


def train_graph_reasoner(indexes: ChatIndex | list[ChatIndex], cfg: GraphReasonerConfig = GraphReasonerConfig(),
                         neighbourhood=None, encoder: str | None = None,
                         force: bool = False, verbose: bool = True) -> Path | list[Path]:
    """Train (or load from the cache) a reasoner on questions generated from ``indexes``' graphs (``cfg.members`` of
    them: one after another, :func:`member_configs`).

    Args:
        indexes: the chat's index of one graph, or several (one reasoner for them all).
        neighbourhood: each question's training graph (default :class:`~gr_core.chat.ChatConfig`'s).
        encoder: the sentence encoder the indexes were built with (default: the embedded MiniLM).
        force: train again even when the cache holds this reasoner.
    Returns:
        the saved reasoner's path (:func:`~gr_core.gnn_rag.load_reasoner` reads it), a list of them with
        ``cfg.members > 1`` (``load_reasoner`` reads their ensemble); its ``meta`` records the relations, the
        generation counts, the history, the held-out H@1 and the seconds.
    Raises:
        TooFewQuestions: fewer than :data:`MIN_QUESTIONS` questions could be generated (a tiny graph).
    """

    if cfg.members > 1:
        return [train_graph_reasoner(indexes, member, neighbourhood, encoder, force, verbose)
                for member in member_configs(cfg)]
    indexes = [indexes] if isinstance(indexes, ChatIndex) else list(indexes)
    neighbourhood = neighbourhood or ChatConfig().neighbourhood
    enc = TextEncoderConfig(model=encoder or EMBEDDED_TEXT_ENCODER)
    path, key, identity = reasoner_cache_path(indexes, cfg, neighbourhood, encoder_identity(enc))
    if path.is_file() and not force:
        if verbose:
            print(f"graph reasoner: reusing {path} (same graph and settings)", flush=True)
        return path
    t0 = time.perf_counter()
    data, questions, counts = generated_dataset(indexes, cfg, neighbourhood, EmbeddingStore(enc))
    build_s = time.perf_counter() - t0
    rng = np.random.default_rng(cfg.seed)
    order = rng.permutation(len(data))
    n_val = max(1, int(round(cfg.val_fraction * len(data)))) if len(data) > 1 else 0
    val, train = [data[i] for i in order[:n_val]], [data[i] for i in order[n_val:]] or [data[i] for i in order]
    if verbose:
        print(f"graph reasoner: {len(data)} generated questions ({counts['answers_outside_scope']} dropped: answers "
              f"outside the searched scope), {len(train)} train / {len(val)} held out; data in {build_s:.0f} s",
              flush=True)
    start = time.perf_counter()

    def on_epoch(row):
        if not verbose:
            return
        done = row["epoch"] + 1
        elapsed = time.perf_counter() - start
        left = min((cfg.num_epochs - done) * elapsed / done, max(cfg.time_budget_s - elapsed, 0.0)
                   if cfg.time_budget_s else float("inf"))
        print(f"  epoch {done}/{cfg.num_epochs}: loss {row['train_loss']:.3f}, held-out H@1 {row['val_h1']:.1f}, "
              f"{elapsed:.0f} s elapsed, about {left:.0f} s left", flush=True)

    tcfg = ReasonerTrainConfig(lr=cfg.lr, batch_size=cfg.batch_size, num_epochs=cfg.num_epochs, seed=cfg.seed,
                               time_budget_s=cfg.time_budget_s)
    model, history = train_reasoner(train, val, int(indexes[0].node_emb.shape[1]), cfg.reasoner, tcfg, on_epoch)
    train_s = time.perf_counter() - start
    relations = sorted({r for ix in indexes for r in ix.kg.relations})
    meta = {"key": f"generated-{key}", "config_hash": key, "identity": identity, "relations": relations,
            "generated": {**generation_summary(questions), **counts}, "history": history,
            "val_h1": max((h["val_h1"] for h in history), default=None), "num_train": len(train), "num_val": len(val),
            "build_seconds": round(build_s, 1), "train_seconds": round(train_s, 1),
            "examples": [] if len(indexes) > 1 else [
                {"question": q.text, "answers": [indexes[0].kg.entities[a] for a in q.answers[:5]]}
                for q in questions[:5]]}
    save_reasoner(model, path, meta)
    if verbose:
        print(f"graph reasoner: trained in {train_s:.0f} s ({len(history)} epochs), saved {path}", flush=True)
    return path


def training_record(path) -> dict:
    """What a saved generated-question reasoner's ``meta`` says about its training: questions generated and kept,
    the held-out H@1, epochs and seconds (those of the run that trained it). For an ensemble's files (a list): the
    counts summed, the held-out H@1 averaged, each member's record under ``members``."""
    if isinstance(path, (list, tuple)):
        rows = [training_record(p) for p in path]
        summed = {k: sum(r[k] or 0 for r in rows) for k in ("num_generated", "num_train", "num_val",
                                                            "answers_outside_scope", "epochs_run")}
        seconds = {k: round(sum(r[k] or 0.0 for r in rows), 1) for k in ("build_seconds", "train_seconds")}
        h1 = [r["held_out_h1"] for r in rows if r["held_out_h1"] is not None]
        return {**summed, **seconds, "by_hops": None, "held_out_h1": sum(h1) / len(h1) if h1 else None,
                "members": rows}
    meta = reasoner_meta(path)
    gen = meta.get("generated", {})
    return {"num_generated": gen.get("generated"), "num_train": meta.get("num_train"), "num_val": meta.get("num_val"),
            "by_hops": gen.get("by_hops"), "answers_outside_scope": gen.get("answers_outside_scope"),
            "held_out_h1": meta.get("val_h1"), "epochs_run": len(meta.get("history", [])),
            "build_seconds": meta.get("build_seconds"), "train_seconds": meta.get("train_seconds")}
