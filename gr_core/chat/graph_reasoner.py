"""GNN-RAG's reasoner for a graph that comes without questions (docs/chat.md, "A reasoner for a graph without
questions"): :func:`train_graph_reasoner` trains ReaRev on questions generated from its facts (:mod:`.generate`), each
on the scope a turn would search (:func:`~gr_core.chat.scope.search_scope`), with held-out questions on which the chat
serves it only where it beats the path ranker (:func:`gr_core.chat.conversation.decide`); :func:`reasoner_candidates`
is its answer step.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from ..config import EMBEDDED_TEXT_ENCODER, TextEncoderConfig
from ..gnn_rag import (ReasonerTrainConfig, named_beyond, node_probabilities, reasoner_meta, save_reasoner,
                       select_candidates, train_reasoner)
from ..gnn_rag.model import ReasonerConfig
from ..paths import cache_root
from ..runs import config_hash, progress
from ..stats import percent_interval
from ..text_encoder import EmbeddingStore, encoder_identity
from .config import ChatConfig
from .generate import (GenerationConfig, generate_questions, generation_summary, graph_phrase_twins, relation_phrases,
                       topic_pool)
from .index import ChatIndex, WordVectors
from .link import link_question, most_similar
from .link import rules as link_rules
from .scope import question_graph, read_question, scope_tensors, search_scope

FORMAT_VERSION = 13  # keys the cache: bump when the generated questions (training, decision) or their reading change
MIN_QUESTIONS = 20  # fewer generated questions than this train no reasoner (a graph too small: TooFewQuestions)
DECISION_QUESTIONS = 300  # questions generated to decide between the reasoner and the path ranker (at most)
DECISION_TOPICS = 5  # one topic in this many is the decision's, never a training question's
# How a reasoner trained on generated questions reads a question: the words that name relations (scope.read_question)
GENERATED_READING = ReasonerConfig(relation_match=True, relation_words_only=True, twin_relations=True)


class TooFewQuestions(ValueError):
    """The graph is too small (or too uniform) to generate enough questions to train a reasoner from."""


@dataclass(frozen=True)
class GraphReasonerConfig:
    """Training a reasoner on generated questions (defaults: the chat's budget, docs/chat.md).

    Attributes:
        generation: how many questions, of which forms (:class:`~gr_core.chat.generate.GenerationConfig`).
        reasoner: ReaRev's settings (GNN-RAG's, reading the question's relation words: :data:`GENERATED_READING`).
        num_epochs: at most this many epochs; the best on the held-out generated questions is kept (3: real questions
            were answered worse after more, the templates being learned rather than the relations; CHANGELOG.md).
        time_budget_s: no epoch starts that would end past this (0: none); building the data is not counted.
        val_fraction: generated questions held out to choose the epoch.
        lr, batch_size: GNN-RAG's (:class:`~gr_core.gnn_rag.ReasonerTrainConfig`).
        seed: the training seed (the generator has its own).
    """

    generation: GenerationConfig = field(default_factory=GenerationConfig)
    reasoner: ReasonerConfig = field(default_factory=lambda: GENERATED_READING)
    num_epochs: int = 3
    time_budget_s: float = 240.0
    val_fraction: float = 0.1
    lr: float = 5e-4
    batch_size: int = 8
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "time_budget_s", float(self.time_budget_s))  # 600 and 600.0: one cache key
        object.__setattr__(self, "lr", float(self.lr))
        if not 0.0 < self.val_fraction < 1.0 or self.num_epochs < 1:
            raise ValueError("GraphReasonerConfig: 0 < val_fraction < 1 and num_epochs >= 1 required")


def read_for(index: ChatIndex, vectors: WordVectors, masked: str, reasoner: ReasonerConfig):
    """How ``reasoner`` reads the masked question on ``index``'s graph: ``(text it encodes, reading or None)``."""
    if not (reasoner.relation_match or reasoner.relation_words_only):
        return masked, None
    twins = graph_phrase_twins(index.kg) if reasoner.twin_relations else None
    reading = read_question(vectors, masked, relation_phrases(index.kg), twins)
    return (reading.text if reasoner.relation_words_only else masked), (reading if reasoner.relation_match else None)


def generated_dataset(indexes: list[ChatIndex], cfg: GraphReasonerConfig, scope: dict, store: EmbeddingStore
                      ) -> tuple[list, list, list, dict]:
    """Generate every graph's questions (the budget split evenly; graph ``k`` seeded ``generation.seed + k``) and the
    decision's apart (another seed, :data:`~gr_core.chat.generate.HELD_OUT_FRAMES`, 1-3 hops, a fifth of the topics),
    and build the training questions' reasoner inputs as a turn builds them (linked from the text, on its scope).

    Returns:
        ``(question graphs, their ``(graph, question)``, the decision questions as records, counts)``; cycles (the
        answer a question entity, which the reasoner never answers) are not trained on.
    """
    made, decision = [], []
    for k, index in enumerate(indexes):
        if not index.num_edges:
            continue
        gen = replace(cfg.generation, num_questions=max(1, cfg.generation.num_questions // len(indexes)),
                      seed=cfg.generation.seed + k)
        wanted = min(DECISION_QUESTIONS, max(40, cfg.generation.num_questions // 4))  # a small budget: fewer
        held = replace(gen, num_questions=max(2, -(-wanted // len(indexes))), seed=gen.seed + 10_000,
                       max_hops=max(gen.max_hops, 3))  # judged on 1-3 hops, as users ask, whatever the scope
        # the decision asks about a fifth of the topics, training about the rest: held out by topic, the decision keeps
        # every hop count (held out by topic and path, a small graph's 1- and 2-hop questions were all trained on)
        pool = topic_pool(index.kg, gen)
        asked = np.random.default_rng(held.seed).choice(pool, max(1, len(pool) // DECISION_TOPICS), replace=False
                                                        ) if len(pool) else pool  # none: generate_questions says why
        judged = generate_questions(index.kg, held, held_out=True, avoid=np.setdiff1d(pool, asked).tolist())
        mine = generate_questions(index.kg, gen, avoid=asked.tolist())
        decision += [{"graph": k, "question": q.text, "topics": list(q.topics), "answers": q.answers, "form": q.form,
                      "hops": q.hops} for q in judged]
        made += [(k, q) for q in mine if q.form != "cycle"]
    vectors = WordVectors(lambda words: store.encode(words, desc="encode question words")[0])
    links = [link_question(indexes[k], q.text) for k, q in made]  # read as a turn reads it: linked from its text
    read = [read_for(indexes[k], vectors, link.masked, cfg.reasoner) for (k, _), link in zip(made, links)]
    texts = list(dict.fromkeys([q.text for _, q in made] + [t for t, _ in read]))
    emb = store.encode(texts, desc="encode generated questions")[0] if texts else np.zeros((0, 1), np.float32)
    row = {t: i for i, t in enumerate(texts)}
    data, kept, outside = [], [], 0
    for (k, q), link, (text, reading) in progress(list(zip(made, links, read)), desc="generated question graphs"):
        seeds = link.seeds or most_similar(indexes[k].similarities(emb[row[q.text]])[0], scope["link_k"]).tolist()
        nodes, edges = search_scope(indexes[k], seeds, scope["whole_graph_edges"], scope["scope"])
        local = {int(n): i for i, n in enumerate(nodes)}
        answers = np.array([local[a] for a in q.answers if a in local and a not in seeds], np.int64)
        if len(answers) == 0:
            outside += 1
            continue
        data.append(question_graph(indexes[k], nodes, edges, np.array([local[t] for t in seeds]),
                                   emb[row[q.text]], emb[row[text]], answers, reading=reading))
        kept.append((k, q))
    if len(data) < MIN_QUESTIONS:
        raise TooFewQuestions(f"only {len(data)} questions could be generated from this graph "
                              f"({sum(ix.num_edges for ix in indexes)} edges; at least {MIN_QUESTIONS} are needed to "
                              "train a reasoner): the chat answers with the path ranker, which needs no training")
    return data, kept, decision, {"generated": len(made) + len(decision), "answers_outside_scope": outside}


def train_graph_reasoner(indexes: ChatIndex | list[ChatIndex], cfg: GraphReasonerConfig = GraphReasonerConfig(),
                         scope: dict | None = None, encoder: str | None = None, verbose: bool = True) -> Path:
    """Train (or load from the cache) a reasoner on questions generated from ``indexes``' graphs.

    Args:
        indexes: the chat's index of one graph, or several (one reasoner for them all).
        scope: ``{"whole_graph_edges", "scope", "link_k"}`` of :class:`~gr_core.chat.ChatConfig` (default: its
            defaults): each question is trained on the graph a turn asking it would search.
        encoder: the sentence encoder the indexes were built with (default: the embedded MiniLM).
    Returns:
        the saved reasoner's path; its ``meta`` records the relations, the generation counts, the history, the
        held-out H@1 and its questions, the seconds and the decision questions.
    Raises:
        TooFewQuestions: fewer than :data:`MIN_QUESTIONS` questions could be generated.
    """
    indexes = [indexes] if isinstance(indexes, ChatIndex) else list(indexes)
    default = ChatConfig()
    scope = scope or {"whole_graph_edges": default.whole_graph_edges, "scope": default.scope, "link_k": default.link_k}
    enc = TextEncoderConfig(model=encoder or EMBEDDED_TEXT_ENCODER)
    # saved keyed by the graphs, the settings, the scope rule and the encoder; its questions are linked as a turn links
    identity = {"graphs": [ix.digest for ix in indexes], "config": asdict(cfg),
                "scope": {**scope, "scope": asdict(scope["scope"])}, "encoder": encoder_identity(enc),
                "format": FORMAT_VERSION, "link": link_rules()}
    key = config_hash(identity)
    path = cache_root() / "chat" / "reasoners" / f"{key}.pt"
    if path.is_file():
        try:
            reasoner_meta(path)  # a file cut short (an interrupted save, a full disk) is trained again
            if verbose:
                print(f"graph reasoner: reusing {path} (same graph and settings)", flush=True)
            return path
        except ValueError:
            path.unlink(missing_ok=True)
    t0 = time.perf_counter()
    data, questions, decision, counts = generated_dataset(indexes, cfg, scope, EmbeddingStore(enc))
    build_s = time.perf_counter() - t0
    order = np.random.default_rng(cfg.seed).permutation(len(data))
    n_val = max(1, int(round(cfg.val_fraction * len(data))))
    val, train = [data[i] for i in order[:n_val]], [data[i] for i in order[n_val:]]
    if verbose:
        print(f"graph reasoner: {len(data)} generated training questions ({counts['answers_outside_scope']} dropped: "
              f"answers outside their scope), {len(train)} train / {len(val)} to choose the epoch; "
              f"{len(decision)} more held out to decide; data in {build_s:.0f} s", flush=True)
    start = time.perf_counter()

    def on_epoch(row):
        if verbose:
            print(f"  epoch {row['epoch'] + 1}/{cfg.num_epochs}: loss {row['train_loss']:.3f}, held-out H@1 "
                  f"{row['val_h1']:.1f}, {time.perf_counter() - start:.0f} s elapsed", flush=True)

    tcfg = ReasonerTrainConfig(lr=cfg.lr, batch_size=cfg.batch_size, num_epochs=cfg.num_epochs, seed=cfg.seed,
                               time_budget_s=cfg.time_budget_s)
    model, history = train_reasoner(train, val, int(indexes[0].node_emb.shape[1]), cfg.reasoner, tcfg, on_epoch)
    meta = {"key": f"generated-{key}", "config_hash": key, "identity": identity,
            "relations": sorted({r for ix in indexes for r in ix.kg.relations}),
            "generated": {**generation_summary([q for _, q in questions]), **counts}, "history": history,
            "val_h1": max((h["val_h1"] for h in history), default=None), "num_train": len(train), "num_val": len(val),
            "build_seconds": round(build_s, 1), "train_seconds": round(time.perf_counter() - start, 1),
            "val_questions": [{"question": questions[i][1].text, "answers": questions[i][1].answers,
                               "graph": questions[i][0]} for i in order[:n_val]],
            "decision_questions": decision}
    save_reasoner(model, path, meta)
    if verbose:
        print(f"graph reasoner: trained in {meta['train_seconds']:.0f} s ({len(history)} epochs), saved {path}",
              flush=True)
    return path


def training_record(path) -> dict:
    """What a saved generated-question reasoner's ``meta`` says about its training: counts, forms, seconds, and its
    held-out H@1 (%, the epoch kept) with a Wilson 95% interval over its ``num_val`` questions."""
    meta = reasoner_meta(path)
    gen = meta.get("generated", {})
    h1, n = meta.get("val_h1"), meta.get("num_val")
    ci = list(percent_interval(h1 / 100 * n, n)) if h1 is not None and n else None
    return {"num_generated": gen.get("generated"), "num_train": meta.get("num_train"), "num_val": n,
            "by_hops": gen.get("by_hops"), "by_form": gen.get("by_form"),
            "answers_outside_scope": gen.get("answers_outside_scope"), "held_out_h1": h1, "held_out_h1_ci": ci,
            "epochs_run": len(meta.get("history", [])), "build_seconds": meta.get("build_seconds"),
            "train_seconds": meta.get("train_seconds")}


def reasoner_candidates(index: ChatIndex, reasoner, nodes: np.ndarray, edges: np.ndarray, seed_options, q, q_masked,
                        reading, max_candidates: int = 5) -> tuple[list[tuple[int, float]], np.ndarray, np.ndarray]:
    """GNN-RAG's answer step on a scope: the reasoner's node distribution from each seed set in ``seed_options``
    (positions in ``nodes``; the set whose best non-seed node is most probable kept), its 0.95-mass candidates
    (identifier-named nodes never answer: where it stops on them, the named nodes beyond them,
    :func:`~gr_core.gnn_rag.named_beyond`).

    Returns:
        ``(candidates as (node row, probability) best first, the seeds used (positions), the distribution (N,))``.
    """
    options = [np.asarray(o, np.int64) for o in seed_options if len(o)]
    shared = scope_tensors(index, nodes, edges)
    datas = [question_graph(index, nodes, edges, o, q, q_masked, shared=shared, reading=reading) for o in options]
    probs_all = node_probabilities(reasoner, datas)
    best = int(np.argmax([float(np.delete(p, o).max(initial=0.0)) for p, o in zip(probs_all, options)]))
    probs, seeds = probs_all[best], set(options[best].tolist())
    unnamed = set(np.flatnonzero(~index.kg.named[nodes]).tolist())
    ranked = select_candidates(probs, seeds | unnamed)
    if not ranked:
        mids = select_candidates(probs, seeds)
        ranked = named_beyond(probs, mids, shared["edge_index"].numpy(), seeds | unnamed) or mids
    return [(int(nodes[c]), p) for c, p in ranked[:max_candidates]], options[best], probs
