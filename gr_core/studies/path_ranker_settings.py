"""The chat's path ranker (:mod:`gr_core.chat.path_ranker`): how each of its settings was chosen on MetaQA's dev
questions (docs/chat.md, "Chat without training questions"), and the last of them, the word fit, measured once on test.

- :func:`choose_hop_penalty`, :func:`choose_same_bonus`, :func:`choose_reasoner_weight`: one setting swept at a time on
  the dev sample of the other studies (:func:`~gr_core.studies.chat_without_questions.metaqa_sample`, seed 1);
- :func:`choose_word_fit`: the coverage scorer's word fit (the graph's other relations, word stems, reading order)
  chosen together on that sample and checked on a second one (seed 2);
- :func:`word_fit_study`: the chosen fit against the first version once on test (MetaQA, two-entity questions,
  WebQSP), paired with each other and with the answers other systems committed to the same questions
  (:func:`~gr_core.studies.chat_without_questions.with_committed`).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..chat import GraphChat, load_graph
from ..runs import progress
from .chat_without_questions import (ask_alone, hit_record, hop_records, metaqa_sample, miss_breakdown, paired,
                                     run_systems, two_entity_questions, webqsp_sample, with_committed)


def dev_sweep(chat: GraphChat, questions: list[dict], field: str, values, **fixed) -> tuple[dict, dict]:
    """The paths-mode chat's Hit on ``questions`` (MetaQA dev) for each value of the ``ChatConfig`` ``field`` (the
    other settings ``fixed``): ``(Hit per value, Hit per value and hop count)``, keyed by ``str(value)``."""
    hits, by_hop = {}, {}
    for value in values:
        chat.config = replace(chat.config, answer_mode="paths", **fixed, **{field: value})
        rows = [ask_alone(chat, q) for q in questions]
        hits[str(value)] = hit_record(f"paths, {field} {value}", rows)["hit"]
        by_hop[str(value)] = {str(h): round(100 * float(np.mean([r["hit"] for r, q in zip(rows, questions)
                                                                 if q["hop"] == h])), 1)
                              for h in sorted({q["hop"] for q in questions})}
    return hits, by_hop


def choose_hop_penalty(chat: GraphChat, questions: list[dict], penalties=(0.0, 0.02, 0.05, 0.1, 0.15, 0.2)) -> dict:
    """The path ranker's Hit on ``questions`` (MetaQA dev) per hop penalty; the best is returned as ``chosen``."""
    results, _ = dev_sweep(chat, questions, "path_hop_penalty", penalties, path_scorer="sentence")
    best = max(penalties, key=lambda p: (results[str(p)], -p))
    return {"hit_by_penalty": results, "chosen": best, "n": len(questions)}


def choose_same_bonus(chat: GraphChat, questions: list[dict], bonuses=(0.0, 0.05, 0.1, 0.2, 0.3, 0.5)) -> dict:
    """The word-coverage path ranker's Hit on ``questions`` (MetaQA dev), overall and by hop count, per
    ``path_same_bonus`` (:meth:`~gr_core.chat.path_ranker.PathScorer.coverage_score`); the best is ``chosen``."""
    results, by_hop = dev_sweep(chat, questions, "path_same_bonus", bonuses, path_scorer="coverage")
    best = max(bonuses, key=lambda b: (results[str(b)], -b))
    return {"hit_by_bonus": results, "hit_by_bonus_and_hop": by_hop, "chosen": best, "n": len(questions)}


def choose_reasoner_weight(chat: GraphChat, questions: list[dict], weights=(0.0, 0.1, 0.2, 0.5, 1.0, 2.0)) -> dict:
    """The word-coverage path ranker helped by ``chat``'s reasoner (``retriever="gnn"``): Hit on ``questions`` (MetaQA
    dev), overall and by hop count, per ``path_reasoner_weight`` (0: the path ranker alone), beside the reasoner's own
    answers (``answer_mode="reasoner"``); the best weight is ``chosen``."""
    results, by_hop = dev_sweep(chat, questions, "path_reasoner_weight", weights, path_scorer="coverage")
    best = max(weights, key=lambda w: (results[str(w)], -w))
    chat.config = replace(chat.config, answer_mode="reasoner")
    alone = [ask_alone(chat, q) for q in questions]
    return {"hit_by_weight": results, "hit_by_weight_and_hop": by_hop, "chosen": best, "n": len(questions),
            "reasoner_alone": hop_records("reasoner alone", alone, questions) | {"all": hit_record("reasoner alone",
                                                                                                     alone)}}


# the coverage scorer before words were fitted against the graph's other relations (its defaults until then)
FIRST_COVERAGE = {"path_word_fit": "cosine", "path_coverage_tau": 0.55, "path_lexical_match": 0.0,
                  "path_order_bonus": 0.0}


def setting_label(setting: dict) -> str:
    """A word-fit setting as one key: ``contrast/lex 0.8/order 0.02/tau 0.05``."""
    return (f"{setting['path_word_fit']}/lex {setting['path_lexical_match']}/order {setting['path_order_bonus']}"
            f"/tau {setting['path_coverage_tau']}")


def choose_word_fit(chat: GraphChat, questions: list[dict], confirm: list[dict], lexicals=(0.0, 0.8),
                    orders=(0.0, 0.02, 0.05), taus=(0.0, 0.05, 0.1), more_lexicals=(0.7, 0.9)) -> dict:
    """The coverage scorer's word fit chosen on ``questions`` (MetaQA dev) and checked on ``confirm`` (another dev
    sample): Hit overall and by hop count for :data:`FIRST_COVERAGE` and for ``contrast`` on the grid of
    ``path_lexical_match`` x ``path_order_bonus`` x ``path_coverage_tau``, then ``more_lexicals`` at the best order and
    threshold; the best (``chosen``; ties: the first in grid order) and the first version on ``confirm``, paired."""
    base = replace(chat.config, answer_mode="paths", path_scorer="coverage")

    def run(setting: dict, qs: list[dict]) -> list[dict]:
        chat.config = replace(base, **setting)
        return [ask_alone(chat, q) for q in progress(qs, desc=setting_label(setting))]

    def record(rows: list[dict], qs: list[dict]) -> dict:
        return {"all": hit_record("", rows)["hit"],
                **{str(h): hit_record("", [r for r, q in zip(rows, qs) if q["hop"] == h])["hit"]
                   for h in sorted({q["hop"] for q in qs})}}

    grid = [FIRST_COVERAGE] + [{"path_word_fit": "contrast", "path_lexical_match": lex, "path_order_bonus": o,
                                "path_coverage_tau": t} for lex in lexicals for o in orders for t in taus]
    results = {setting_label(g): record(run(g, questions), questions) for g in grid}
    best = max(grid[1:], key=lambda g: results[setting_label(g)]["all"])
    for lex in more_lexicals:
        g = {**best, "path_lexical_match": lex}
        results[setting_label(g)] = record(run(g, questions), questions)
        grid.append(g)
    best = max(grid[1:], key=lambda g: results[setting_label(g)]["all"])
    first, chosen = run(FIRST_COVERAGE, confirm), run(best, confirm)
    chat.config = base
    return {"hit_by_setting": results, "chosen": best, "n": len(questions),
            "confirm": {"n": len(confirm), "first_version": record(first, confirm), "chosen": record(chosen, confirm),
                        "pair": paired(setting_label(best), chosen, setting_label(FIRST_COVERAGE), first)}}


WORD_FIT = "path ranker, word coverage, words fitted against the graph's relations (no training)"
FIRST = "path ranker, word coverage, first version (no training)"


def word_fit_study(metaqa_committed: dict, webqsp_committed: dict, per_hop: int = 300, seed: int = 0,
                   two_entity_n: int = 200, num_graphs: int = 300) -> dict:
    """The coverage scorer with the word fit chosen on dev (the chat's defaults) against its first version
    (:data:`FIRST_COVERAGE`), once on test: the MetaQA test questions of :func:`metaqa_study` (``per_hop`` a hop,
    ``seed``), the two-entity questions of :func:`two_entity_study` and the WebQSP graphs of :func:`webqsp_study`
    (``num_graphs``), each pair of versions on the same questions and, on MetaQA and WebQSP, paired with the other
    systems' answers committed by those studies (:func:`~gr_core.studies.chat_without_questions.with_committed`)."""

    kb, kind, _ = load_graph("metaqa")
    chat = GraphChat(kb, kind=kind, retriever="pcst", answer_mode="paths")
    systems = {WORD_FIT: chat, FIRST: GraphChat(kb, kind=kind, retriever="pcst", answer_mode="paths",
                                                **FIRST_COVERAGE)}
    questions = metaqa_sample("test", per_hop, seed)
    rows = with_committed(run_systems(systems, questions), questions, metaqa_committed)
    two = two_entity_questions(chat.index.kg, two_entity_n, seed)
    two_rows = run_systems(systems, two)
    web_questions, graphs = webqsp_sample(num_graphs, seed)
    web_systems = {WORD_FIT: lambda spec: GraphChat(graphs[spec], kind="kg", retriever="pcst", answer_mode="paths"),
                   FIRST: lambda spec: GraphChat(graphs[spec], kind="kg", retriever="pcst", answer_mode="paths",
                                                 **FIRST_COVERAGE)}
    web_rows = with_committed(run_systems(web_systems, web_questions, graph_of=lambda q: q["graph"]), web_questions,
                              webqsp_committed)

    def part(graph: str, rr: dict[str, list[dict]], qs: list[dict]) -> dict:
        return {"records": [hit_record(label, r, graph=graph) for label, r in rr.items() if "turn_s" in r[0]],
                "hit": {label: round(100 * float(np.mean([x["hit"] for x in r])), 2) for label, r in rr.items()},
                "pairs": [paired(WORD_FIT, rr[WORD_FIT], b, rr[b]) for b in rr if b != WORD_FIT],
                "per_question": {label: [{k: r[k] for k in ("question", "answer", "hit")} for r in rr[label]]
                                 for label in (WORD_FIT, FIRST)}}

    metaqa = part("metaqa", rows, questions)
    metaqa["by_hop"] = {label: {str(h): round(100 * float(np.mean([x["hit"] for x, q in zip(r, questions)
                                                                   if q["hop"] == h])), 2) for h in (1, 2, 3)}
                        for label, r in rows.items()}
    metaqa["misses"] = miss_breakdown(questions, rows[WORD_FIT], chat.index.kg, chat.index, chat.config.path_hops)
    return {"metaqa": metaqa, "two_entity": part("metaqa two-entity (constructed)", two_rows, two),
            "webqsp": part("webqsp", web_rows, web_questions),
            "settings": {"chosen": {k: getattr(chat.config, k) for k in FIRST_COVERAGE},
                         "first_version": FIRST_COVERAGE},
            "questions": {"split": "test", "per_hop": per_hop, "seed": seed, "two_entity": two_entity_n,
                          "webqsp_graphs": num_graphs}}
