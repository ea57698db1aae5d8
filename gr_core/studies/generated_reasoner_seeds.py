"""The reasoner trained on generated questions over seeds, and how it reads a question, on MetaQA (docs/chat.md).

:func:`seeds_study` trains the library's generated-question reasoner once per seed (the generator's and the
training's seed both set to it: other questions, another initialization and order) on the MetaQA KB and asks each one
the same real test questions, each alone: a trained result is a spread, not one run.
:func:`reading_study` trains one reasoner per way of reading the question (:data:`READINGS`) on the same generated
questions and asks them the same questions (on dev, where the reading was chosen; once on test).
"""
from __future__ import annotations

from dataclasses import asdict, replace

import numpy as np

from ..chat import GraphChat, load_graph
from ..chat.graph_reasoner import GENERATED_READING, GraphReasonerConfig, train_graph_reasoner, training_record
from ..gnn_rag import ReasonerConfig
from ..stats import compare
from .chat_without_questions import ask_alone, hit_record, hop_records, metaqa_sample

# How the reasoner reads a question: ReaRev's masked sentence alone (the first version); plus the words that name each
# relation (rel_match, q_steps); and that with the sentence reduced to the function words and the relation words (the
# default, GENERATED_READING).
READINGS = {"sentence": ReasonerConfig(),
            "sentence + relation words": ReasonerConfig(relation_match=True),
            "relation words only (the default)": GENERATED_READING}


def _metaqa(split: str, per_hop: int, hops) -> tuple:
    """The MetaQA KB, its kind, its chat index (what the reasoners are trained on) and the questions asked."""
    kb, kind, _ = load_graph("metaqa")
    index = GraphChat(kb, kind=kind, retriever="pcst", answer_mode="paths").index
    return kb, kind, index, metaqa_sample(split, per_hop, 0, hops)


def _ask(path, kb, kind, questions: list[dict]) -> list[dict]:
    chat = GraphChat(kb, kind=kind, reasoner=path, retriever="gnn")
    return [ask_alone(chat, q) for q in questions]


def _summary(label: str, rows: list[dict], questions: list[dict], path) -> dict:
    return {"record": hit_record(label, rows), "by_hop": hop_records(label, rows, questions),
            "training": training_record(path),
            "per_question": [{k: r[k] for k in ("question", "answer", "hit")} for r in rows]}


def seeds_study(seeds=(0, 1, 2), split: str = "test", per_hop: int = 300, hops=(1, 2, 3),
                cfg: GraphReasonerConfig = GraphReasonerConfig()) -> dict:
    """Hit of the generated-question reasoner per seed on the same ``per_hop`` MetaQA questions per hop count, the mean
    and spread per hop count, and each seed paired with seed ``seeds[0]``."""
    kb, kind, index, questions = _metaqa(split, per_hop, hops)
    runs = {}
    for s in seeds:
        seeded = replace(cfg, seed=s, generation=replace(cfg.generation, seed=s))
        path = train_graph_reasoner(index, seeded)
        runs[s] = _summary(f"seed {s}", _ask(path, kb, kind, questions), questions, path)
    spread = {}
    for h in [str(h) for h in hops]:
        hits = np.array([runs[s]["by_hop"][h]["hit"] for s in seeds])
        spread[h] = {"mean": round(float(hits.mean()), 2), "std": round(float(hits.std(ddof=1)), 2)
                     if len(hits) > 1 else None, "min": float(hits.min()), "max": float(hits.max())}
    first = [r["hit"] for r in runs[seeds[0]]["per_question"]]
    pairs = [{"a": f"seed {s}", "b": f"seed {seeds[0]}", **compare([r["hit"] for r in runs[s]["per_question"]], first)}
             for s in seeds[1:]]
    return {"questions": {"split": split, "per_hop": per_hop, "seed": 0}, "config": asdict(cfg), "seeds": list(seeds),
            "by_seed": runs, "spread_by_hop": spread, "pairs": pairs}


def reading_study(split: str = "dev", per_hop: int = 300, hops=(1, 2), cfg: GraphReasonerConfig = GraphReasonerConfig(),
                  readings: dict | None = None) -> dict:
    """One reasoner per reading (:data:`READINGS`), trained on the same generated questions, on the same ``per_hop``
    MetaQA ``split`` questions per hop count; each reading paired with the first, per hop count."""
    readings = readings or READINGS
    kb, kind, index, questions = _metaqa(split, per_hop, hops)
    runs = {}
    for label, reading in readings.items():
        path = train_graph_reasoner(index, replace(cfg, reasoner=reading))
        runs[label] = _summary(label, _ask(path, kb, kind, questions), questions, path)
    base = next(iter(runs))
    pairs = []
    for label in list(runs)[1:]:
        for h in hops:
            on = [q["hop"] == h for q in questions]
            a = [r["hit"] for r, k in zip(runs[label]["per_question"], on) if k]
            b = [r["hit"] for r, k in zip(runs[base]["per_question"], on) if k]
            pairs.append({"a": label, "b": base, "hop": h, **compare(a, b)})
    return {"questions": {"split": split, "per_hop": per_hop, "seed": 0}, "config": asdict(cfg),
            "readings": {k: asdict(v) for k, v in readings.items()}, "by_reading": runs, "pairs": pairs}
