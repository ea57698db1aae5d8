"""The reasoner trained on generated questions over seeds, how it reads a question and how its questions are generated,
on MetaQA and WebQSP (docs/chat.md).

:func:`seeds_study` trains the library's generated-question reasoner once per seed (the generator's and the
training's seed both set to it: other questions, another initialization and order) on the MetaQA KB and asks each one
the same real test questions, each alone: a trained result is a spread, not one run.
:func:`reading_study` trains one reasoner per way of reading the question (:data:`READINGS`) on the same generated
questions and asks them the same questions (on dev, where the reading was chosen; once on test).
:func:`generation_study` does the same per way of generating the questions (:func:`generations`: how topics are
drawn, whether identifier-named nodes are asked about), on MetaQA dev and WebQSP validation graphs, where it was
chosen; :func:`webqsp_seeds_study` repeats :func:`seeds_study` on WebQSP's test mini-graphs, each reasoner trained on
questions generated from those graphs (never their questions). :func:`ensemble_study` asks each seed alone and the
seeds as one (:attr:`~gr_core.chat.graph_reasoner.GraphReasonerConfig.members`), for a given number of epochs;
:func:`pair_runs` pairs such a run with the committed one made without a change; :func:`answer_kind_check` counts
how the answers' kinds are read.
"""
from __future__ import annotations

from dataclasses import asdict, replace

import numpy as np

from ..chat import GraphChat, load_graph
from ..chat.generate import ASK_KINDS, KIND_PROTOTYPES, answer_kinds
from ..chat.graph_reasoner import (GENERATED_READING, GraphReasonerConfig, member_configs, train_graph_reasoner,
                                   training_record)
from ..gnn_rag import ReasonerConfig, load_reasoner
from ..config import EMBEDDED_TEXT_ENCODER, TextEncoderConfig
from ..stats import compare, mcnemar_cmh
from ..text_encoder import EmbeddingStore
from .chat_without_questions import ask_alone, hit_record, hop_records, metaqa_sample, run_systems, webqsp_sample

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
    out = variant_study({label: replace(cfg, reasoner=r) for label, r in readings.items()}, split, per_hop, hops)
    return {"questions": out["questions"], "config": asdict(cfg), "by_reading": out["by_config"],
            "pairs": out["pairs"], "readings": {k: asdict(v) for k, v in readings.items()}}


def variant_study(configs: dict[str, GraphReasonerConfig], split: str = "dev", per_hop: int = 300, hops=(1, 2)
                  ) -> dict:
    """One reasoner per configuration (label -> :class:`GraphReasonerConfig`) on the MetaQA KB, asked the same
    ``per_hop`` MetaQA ``split`` questions per hop count; each paired with the first, per hop count."""
    kb, kind, index, questions = _metaqa(split, per_hop, hops)
    runs = {}
    for label, cfg in configs.items():
        path = train_graph_reasoner(index, cfg)
        runs[label] = _summary(label, _ask(path, kb, kind, questions), questions, path)
    base = next(iter(runs))
    pairs = []
    for label in list(runs)[1:]:
        for h in hops:
            on = [q["hop"] == h for q in questions]
            a = [r["hit"] for r, k in zip(runs[label]["per_question"], on) if k]
            b = [r["hit"] for r, k in zip(runs[base]["per_question"], on) if k]
            pairs.append({"a": label, "b": base, "hop": h, **compare(a, b)})
    return {"questions": {"split": split, "per_hop": per_hop, "seed": 0},
            "configs": {k: asdict(v) for k, v in configs.items()}, "by_config": runs, "pairs": pairs}


def webqsp_variant_study(configs: dict[str, GraphReasonerConfig], split: str = "val", num_graphs: int = 200,
                         seed: int = 0) -> dict:
    """One reasoner per configuration (label -> :class:`GraphReasonerConfig`) trained on questions generated from
    ``num_graphs`` WebQSP ``split`` mini-graphs (seeded sample) and asked those graphs' real questions (the generated
    reasoner alone: :func:`~.chat_without_questions.webqsp_study` adds the other systems); each paired with the
    first. Seeds are configurations too (``replace(cfg, seed=s, generation=replace(cfg.generation, seed=s))``)."""
    questions, graphs = webqsp_sample(num_graphs, seed, split)
    indexes = {spec: GraphChat(g, kind="kg", retriever="pcst", answer_mode="paths").index for spec, g in graphs.items()}
    runs = {}
    for label, cfg in configs.items():
        path = train_graph_reasoner(list(indexes.values()), cfg)
        reasoner = load_reasoner(path)
        rows = run_systems({label: lambda spec: GraphChat(graphs[spec], kind="kg", reasoner=reasoner, retriever="gnn")},
                           questions, graph_of=lambda q: q["graph"])[label]
        runs[label] = _summary(label, rows, questions, path)
    first = [r["hit"] for r in next(iter(runs.values()))["per_question"]]
    pairs = [{"a": label, "b": next(iter(runs)), **compare([r["hit"] for r in run["per_question"]], first)}
             for label, run in list(runs.items())[1:]]
    return {"questions": {"graphs": f"webqsp {split} mini-graphs", "num_graphs": len(graphs), "seed": seed},
            "configs": {k: asdict(v) for k, v in configs.items()}, "by_config": runs, "pairs": pairs}


# How questions are generated (GenerationConfig): name -> (label, the fields set). The first rule (the default:
# topics drawn uniformly, identifier-named nodes asked about and answered), each change alone, and both.
RULES = {"first": ("topics uniform, identifier nodes asked (the first rule, the default)",
                   {"topic_weight": "uniform", "unnamed": True}),
         "topics": ("topics by their facts", {"topic_weight": "degree", "unnamed": True}),
         "named": ("identifier nodes left out", {"topic_weight": "uniform", "unnamed": False}),
         "both": ("topics by their facts, identifier nodes left out", {"topic_weight": "degree", "unnamed": False})}


def rule_config(name: str, cfg: GraphReasonerConfig = GraphReasonerConfig()) -> GraphReasonerConfig:
    """``cfg`` with its questions generated by the rule ``name`` of :data:`RULES`."""
    return replace(cfg, generation=replace(cfg.generation, **RULES[name][1]))


def generations() -> dict[str, GraphReasonerConfig]:
    """Every rule of :data:`RULES` by its label, the first rule first."""
    return {label: rule_config(name) for name, (label, _) in RULES.items()}


def generation_study(graph: str = "webqsp", split: str = "val", per_hop: int = 300, num_graphs: int = 200) -> dict:
    """The generated-question reasoner by how its questions are generated (:func:`generations`), on the same real
    questions, each paired with the first rule: MetaQA (``split`` dev or test; its KB names no node by an identifier,
    so only the first rule and both changes are trained) or WebQSP mini-graphs (``split`` val or test)."""
    configs = generations()
    if graph == "metaqa":
        kept = [RULES[name][0] for name in ("first", "both")]
        return variant_study({k: configs[k] for k in kept}, split, per_hop, (1, 2))
    return webqsp_variant_study(configs, split, num_graphs)


def webqsp_seeds_study(seeds=(0, 1, 2), split: str = "test", num_graphs: int = 300,
                       cfg: GraphReasonerConfig = GraphReasonerConfig()) -> dict:
    """The generated-question reasoner per seed (the generator's and the training's) on the same WebQSP mini-graphs
    and their real questions: mean, spread, each seed paired with the first."""
    out = webqsp_variant_study({f"seed {s}": replace(cfg, seed=s, generation=replace(cfg.generation, seed=s))
                                for s in seeds}, split, num_graphs)
    hits = np.array([run["record"]["hit"] for run in out["by_config"].values()])
    out["spread"] = {"mean": round(float(hits.mean()), 2), "std": round(float(hits.std(ddof=1)), 2)
                     if len(hits) > 1 else None, "min": float(hits.min()), "max": float(hits.max())}
    return out


def ensemble_study(graph: str = "webqsp", split: str = "val", members: int = 3, per_hop: int = 300,
                   num_graphs: int = 200, cfg: GraphReasonerConfig = GraphReasonerConfig()) -> dict:
    """Several reasoners as one (:attr:`GraphReasonerConfig.members`): each member alone (member 0 first: the one
    reasoner of ``members=1``), then their ensemble, on the same real questions (MetaQA ``split`` dev or test, 1- and
    2-hop; WebQSP mini-graphs, ``split`` val or test), each paired with member 0. The members are trained once and
    cached; the ensemble reads their files."""
    together = replace(cfg, members=members)
    configs = {f"member {k} alone (seed {c.seed})": c for k, c in enumerate(member_configs(together))}
    configs[f"{members} reasoners as one"] = together
    if graph == "metaqa":
        return variant_study(configs, split, per_hop, (1, 2))
    return webqsp_variant_study(configs, split, num_graphs)


def pair_runs(result: dict, plain: dict) -> list[dict]:
    """Each configuration of ``result`` paired (exact McNemar, by question text) with the one of the same label in
    ``plain``, a run of the same study on the same questions without the change measured (its committed file); the
    single reasoners' pairs (every configuration of one member) also pooled over seeds
    (:func:`~gr_core.stats.mcnemar_cmh`)."""
    pairs, mine, theirs = [], [], []
    for label, run in result["by_config"].items():
        other = {r["question"]: r["hit"] for r in plain.get("by_config", {}).get(label, {}).get("per_question", [])}
        rows = run["per_question"]
        if not rows or any(r["question"] not in other for r in rows):
            continue
        a, b = [r["hit"] for r in rows], [other[r["question"]] for r in rows]
        pairs.append({"a": label, "b": f"{label}, without the change", **compare(a, b)})
        if result["configs"][label].get("members", 1) == 1:
            mine, theirs = mine + [a], theirs + [b]
    if len(mine) > 1:
        pairs.append({"a": "the single reasoners, pooled over seeds", "b": "the same, without the change",
                      **mcnemar_cmh(mine, theirs)})
    return pairs


def answer_kind_check(split: str = "val", num_graphs: int = 200, seed: int = 0, per_question: int = 3) -> dict:
    """How :func:`~gr_core.chat.generate.answer_kinds` reads the gold answers (the first ``per_question`` of each) of
    the real WebQSP questions that :func:`ensemble_study` asks, by the question's first word: ``{"who" | "where" |
    "when" | "other": {kind: count}}``. The question word says what a real question asks for; the kinds are read from
    the names alone."""
    questions, _ = webqsp_sample(num_graphs, seed, split)
    rows = [(q["question"].split()[0] if q["question"].split()[0] in ("who", "where", "when") else "other", a)
            for q in questions for a in q["answers"][:per_question]]
    names = sorted({a for _, a in rows})
    store = EmbeddingStore(TextEncoderConfig(model=EMBEDDED_TEXT_ENCODER))
    kinds = dict(zip(names, answer_kinds(names, store.encode(names)[0], store.encode(list(KIND_PROTOTYPES))[0])))
    out = {w: dict.fromkeys(ASK_KINDS, 0) for w in ("who", "where", "when", "other")}
    for word, name in rows:
        out[word][ASK_KINDS[kinds[name]]] += 1
    return out
