"""The chat's relevance gate on every family, leave one family out (docs/chat.md, step 1; issue 58 item 4):

    python bench/chat_gate.py                     ->  outputs/bench/chat_gate.json  (~6 min)
    python bench/chat_gate.py --path-scores       ->  .../chat_gate-path_scores.json: a floor on the best path's score

A question that names no entity of the graph and is no follow-up is taken as about the graph when its best node
cosine is at least ``relevance_threshold`` and its best relation cosine at least ``relation_threshold`` (the
``similar`` rule). This bench measures, on each graph family, what the gate lets through:

- **positives**: the family's own questions (bench/chat_families.py's families; every one is about its graph), which
  the gate should never turn away;
- **negatives**: questions written for other data, asked on the family's graphs: WebQSP's on the MetaQA KB and its
  slices, MetaQA's on WebQSP's mini-graphs and unions (a question whose topic names a node of the graph asked is
  dropped: it may be about it), and CLEVR's scene questions on every KG. A negative the gate lets through is answered
  with some node of a graph that does not hold its topic.

Each question's gate features (the rules other than ``similar``, with and without ``link.CAPITALIZED_NAMES``, whether
it holds a content word, its best node and relation cosines) are computed once, so every pair of thresholds is scored
without asking again. A pair is chosen on each family's val (dev) questions in turn: the fewest negatives let through
among the pairs that turn away no more positives than the shipped pair, ties to the shipped pair, then to the lower
thresholds; every gate is reported on every family's questions, paired with the shipped gate (exact McNemar on
positives kept and on negatives refused).
"""
from __future__ import annotations

import argparse

import numpy as np

from chat_families import family_of, metaqa_sample, webqsp_mini_family
from common import write_result

import gr_core.chat.link as linking
from gr_core.chat import GraphChat
from gr_core.chat.config import KIND_RELATION_THRESHOLD, ChatConfig
from gr_core.chat.link import about, has_content, link_question, similar
from gr_core.evaluate import kgqa_scores
from gr_core.runs import progress
from gr_core.stats import compare, wilson_interval

FAMILIES = ("metaqa", "metaqa_slice", "webqsp_mini", "webqsp_union")
SPLITS = {"metaqa": ("dev", "test"), "metaqa_slice": ("dev", "test"), "webqsp_mini": ("val", "test"),
          "webqsp_union": ("val", "test")}
SIZES = {"metaqa": 100, "metaqa_slice": 60, "webqsp_mini": 300, "webqsp_union": 300}  # chat_families.family_of's
NODE_GRID = np.round(np.arange(0.20, 0.701, 0.025), 3)
RELATION_GRID = np.round(np.arange(0.0, 0.401, 0.01), 3)
SHIPPED = (ChatConfig.relevance_threshold, KIND_RELATION_THRESHOLD["kg"], True)  # (node, relation, capitalized)
BEFORE = SHIPPED[:2] + (False,)  # without link.CAPITALIZED_NAMES


def clevr_questions(n: int, seed: int) -> list[str]:
    """``n`` CLEVR questions (scene questions: about no KG), a seeded sample of all splits."""
    from gr_core.graphqa import load_dataset  # noqa: PLC0415 deferred: the dataset, for this bench only

    ds = load_dataset("clevr")
    pick = np.random.default_rng(seed).choice(len(ds), min(n, len(ds)), replace=False)
    return [ds.records[int(i)].question for i in pick]


def headline(text: str) -> str:
    """``text`` in headline case: each word capitalized but the short function words after the first."""
    short = {"a", "an", "the", "of", "in", "on", "at", "to", "for", "by", "and", "or", "with", "from", "as", "is"}
    words = text.split(" ")
    return " ".join(w if k and w.lower() in short else w[:1].upper() + w[1:] for k, w in enumerate(words))


def family(name: str, split: str, seed: int = 0) -> tuple[list[dict], dict]:
    """``(questions, graphs)``: the family's own questions (``positive``) and the negatives (module docstring), each
    with its ``graph`` spec; the negatives of split ``split`` come from the other data's split of the same role."""
    other = "dev" if split in ("val", "dev") else "test"
    webqsp_split = "val" if split in ("val", "dev") else "test"
    pos, graphs = family_of(name, split, SIZES[name], seed)
    if name.startswith("metaqa"):
        foreign = webqsp_mini_family(webqsp_split, 300, seed + 1)[0]
    else:
        foreign = metaqa_sample(other, 100, seed + 1)
    specs = sorted({q["graph"] for q in pos})
    neg = [{"question": q["question"], "topic": q.get("topic", ""), "graph": specs[k % len(specs)], "source": "kgqa"}
           for k, q in enumerate(foreign)]
    neg += [{"question": text, "topic": "", "graph": specs[k % len(specs)], "source": "clevr"}
            for k, text in enumerate(clevr_questions(150, seed + 2))]
    # typed with every word capitalized, as a headline (short function words lowercase) and in capitals, as some do
    neg += [{**q, "question": retype(q["question"]), "source": f"{q['source']} {case}"}
            for case, retype in (("title", str.title), ("headline", headline), ("upper", str.upper)) for q in neg[:150]]
    rows = [{**q, "positive": True} for q in pos] + [{**q, "positive": False} for q in neg]
    return sorted(rows, key=lambda q: q["graph"]), graphs  # one graph's chat open at a time


def features(questions: list[dict], graphs: dict) -> list[dict]:
    """Each question's gate features on its graph: ``other`` (the first rule other than ``similar`` that holds, or
    ""), ``content``, ``node`` and ``relation`` (best cosines); negatives whose topic names a node are marked
    ``topic_in_graph`` (left out of the scores)."""
    out, chat, spec = [], None, None
    for q in progress(questions, desc="gate features"):
        if spec != q["graph"]:
            chat, spec = GraphChat(graphs[q["graph"]], model="zero_shot"), q["graph"]
            names = {n.lower() for n in chat.index.kg.entities}
        index = chat.index
        link = link_question(index, q["question"], None)
        node_sim, rel_sim = index.similarities(chat.embed(q["question"]))
        rel = float(rel_sim.max()) if len(rel_sim) else None
        other, shipped = {}, linking.CAPITALIZED_NAMES
        try:
            for rule in (True, False):  # with and without linking.CAPITALIZED_NAMES; `similar` cannot hold here
                linking.CAPITALIZED_NAMES = rule
                other[rule] = about(index, q["question"], link, -np.inf, -np.inf, np.inf, np.inf)
        finally:
            linking.CAPITALIZED_NAMES = shipped
        out.append({"question": q["question"], "graph": q["graph"], "positive": q["positive"],
                    "source": q.get("source", "own"), "other": other[True],
                    "other_without_capitalized": other[False], "content": has_content(q["question"]),
                    "node": float(node_sim.max()), "relation": rel,
                    "topic_in_graph": bool(not q["positive"] and q.get("topic") and q["topic"].lower() in names)})
    return out


def accepted(rows: list[dict], node_t: float, rel_t: float, capitalized: bool = True) -> np.ndarray:
    """Whether the gate at ``(node_t, rel_t)`` takes each row as about its graph (``capitalized``: with
    ``link.CAPITALIZED_NAMES``): :func:`gr_core.chat.link.about`, its ``similar`` rule at these thresholds."""
    key = "other" if capitalized else "other_without_capitalized"
    return np.array([bool(r[key]) or similar(r["content"], r["node"], r["relation"], node_t, rel_t) for r in rows])


def scored(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """``(positives, negatives)``, the negatives whose topic names a node of their graph left out."""
    return [r for r in rows if r["positive"]], [r for r in rows if not r["positive"] and not r["topic_in_graph"]]


def rates(rows: list[dict], gate: tuple) -> dict:
    """Positives turned away and negatives let through by ``gate`` = ``(node_t, rel_t, capitalized)`` (counts, percent
    with Wilson 95% intervals)."""
    pos, neg = scored(rows)
    away, through = int((~accepted(pos, *gate)).sum()), int(accepted(neg, *gate).sum())
    out = {"gate": list(gate), "positives": len(pos), "positives_turned_away": away, "negatives": len(neg),
           "negatives_let_through": through}
    for key, k, n in (("turned_away_pct", away, len(pos)), ("let_through_pct", through, len(neg))):
        lo, hi = wilson_interval(k, n)
        out[key] = [round(100 * k / max(n, 1), 1), round(100 * lo, 1), round(100 * hi, 1)]
    return out


def choose(rows: list[dict]) -> tuple:
    """The thresholds (with the capitalized-names rule) letting the fewest negatives through among those turning away
    no more positives than the shipped gate (ties: the shipped thresholds, then the lowest)."""
    limit = rates(rows, SHIPPED)["positives_turned_away"]
    best = (rates(rows, SHIPPED)["negatives_let_through"], 0, SHIPPED)
    for node_t in NODE_GRID:
        for rel_t in RELATION_GRID:
            gate = (float(node_t), float(rel_t), True)
            r = rates(rows, gate)
            if r["positives_turned_away"] <= limit:
                best = min(best, (r["negatives_let_through"], 1, gate))
    return best[2]


def paired_gate(rows: list[dict], a: tuple, b: tuple) -> dict:
    """Exact McNemar of gate ``a`` against gate ``b``, per question: positives kept, negatives refused."""
    pos, neg = scored(rows)
    return {label: compare((accepted(rs, *a) == want).astype(float), (accepted(rs, *b) == want).astype(float))
            for label, rs, want in (("positives kept", pos, True), ("negatives refused", neg, False))}


def path_scores(questions: list[dict], graphs: dict) -> dict:
    """The ``similar`` turns (no other rule holds; negatives whose topic names a node left out), each asked: the best
    candidate's score, and Hit for positives; with the hits lost and negatives refused by a floor on that score."""
    rows, chat, spec = [], None, None
    for q in progress(questions, desc="similar turns"):
        if spec != q["graph"]:
            chat, spec = GraphChat(graphs[q["graph"]], model="zero_shot"), q["graph"]
            names = {n.lower() for n in chat.index.kg.entities}
        link = link_question(chat.index, q["question"], None)
        if (not q["positive"] and q.get("topic") and q["topic"].lower() in names) or about(
                chat.index, q["question"], link, -np.inf, -np.inf, np.inf, np.inf):
            continue
        chat.reset()
        turn = chat.ask(q["question"])
        if turn.about == "similar":
            rows.append({"positive": q["positive"], "question": q["question"], "answer": turn.answer,
                         "score": turn.candidates[0]["score"] if turn.candidates else None,
                         "hit": bool(q["positive"] and kgqa_scores(turn.answer.split(" | "), q["answers"])["hit"])})
    scored_rows = [r for r in rows if r["score"] is not None]
    floors = {str(t): {"hits_lost": sum(r["hit"] and r["score"] < t for r in scored_rows),
                       "negatives_refused": sum(not r["positive"] and r["score"] < t for r in scored_rows)}
              for t in (0.0, 0.05, 0.1, 0.15, 0.2)}
    return {"positives": sum(r["positive"] for r in rows), "hits": sum(r["hit"] for r in rows),
            "negatives": sum(not r["positive"] for r in rows), "floors": floors,
            "positive_rows": [r for r in rows if r["positive"]],
            "negative_scores": [r["score"] for r in rows if not r["positive"]]}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python bench/chat_gate.py", description=__doc__.split("\n")[0])
    parser.add_argument("--families", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    parser.add_argument("--path-scores", action="store_true", help="instead: a floor on the best path's score for the "
                        "similar turns (-> outputs/bench/chat_gate-path_scores.json)")
    args = parser.parse_args()
    if args.path_scores:
        result = {f"{name} {split}": path_scores(*family(name, split)) for name in args.families
                  for split in SPLITS[name]}
        for key, r in result.items():
            print(key, r["positives"], "positives,", r["hits"], "hits,", r["negatives"], "negatives;", r["floors"])
        print("wrote", write_result("chat_gate-path_scores", result))
        return
    rows = {f"{name} {split}": features(*family(name, split)) for name in args.families for split in SPLITS[name]}
    gates = {"before": BEFORE, "shipped": SHIPPED} | {
        f"chosen on {name} {SPLITS[name][0]}": choose(rows[f"{name} {SPLITS[name][0]}"]) for name in args.families}
    report = {key: {"rates": {label: rates(r, g) for label, g in gates.items()},
                    "paired with shipped": {label: paired_gate(r, g, SHIPPED) for label, g in gates.items()
                                            if label != "shipped"}} for key, r in rows.items()}
    for key, rec in report.items():
        cells = ((label, g, rec["rates"][label]) for label, g in gates.items())
        print(key, " | ".join(f"{label} {g}: away {r['positives_turned_away']}/{r['positives']}, through "
                              f"{r['negatives_let_through']}/{r['negatives']}" for label, g, r in cells))
    mistakes = {key: {"positives turned away": [r for r, ok in zip(pos, accepted(pos, *SHIPPED)) if not ok],
                      "negatives let through (first 20)": [r for r, ok in zip(neg, accepted(neg, *SHIPPED)) if ok][:20]}
                for key, (pos, neg) in ((key, scored(r)) for key, r in rows.items())}
    print("wrote", write_result("chat_gate", {"gates": gates, "families": report, "shipped_gate_mistakes": mistakes}))


if __name__ == "__main__":
    main()
