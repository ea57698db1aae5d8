"""The chat's answers (``python bench/chat.py answer-modes`` -> ``outputs/bench/chat_answer_modes.json``): each question
asked alone, the embedded SmolLM2-135M zero-shot (fp32, 2 threads), per answer mode
(:attr:`gr_core.chat.ChatConfig.answer_mode`) and evidence format: Hit (a gold answer anywhere in the answer, the
papers' metric) with its 95% Wilson interval, Hit@1 (in the first answer), answer-in-evidence (a gold answer is a node
of the evidence: the ceiling of a constrained answer), the share of answers that name a node of the graph, the median
seconds of a whole turn (retrieval + answer + check). The variants (calibration, length normalization, evidence format,
the margin) are chosen on the 60 MetaQA questions; the WebQSP graphs (the 18 complete graphs with their questions, and
60 test mini-graphs, seeded sample) are never used to choose anything. Paired exact McNemar on Hit between the free and
the chosen ranked mode on the same questions.

GNN-RAG modes (``python bench/chat.py reasoner-modes`` -> ``outputs/bench/chat_reasoner_modes.json``): the
reasoner's candidates as the answer, and the LLM ranking the node names of the reasoner's paths, on the same 60
MetaQA questions with the chat's own reasoner (``python -m gr_core.gnn_rag chat``), and on the 60 WebQSP test
mini-graphs with a reasoner trained on the WebQSP re-split's training part (:data:`WEBQSP_REASONER`); each paired
with the default ranked mode on the same questions. ``reasoner-modes --reasoner FILE`` measures another MetaQA reasoner
on the 60 MetaQA questions alone (the quick preset's, ``outputs/quick/09_chat/reasoner/metaqa-chat.pt``).

Follow-ups (``python bench/chat.py follow-ups --label COMMIT`` -> ``outputs/bench/chat_follow_ups/<label>.json``): 30
two-turn conversations (:func:`follow_up_pairs`), Hit of the follow-up with and without the chat's reasoner, the
reasoner's record paired with every other label's file in that folder (another commit's: run the bench from a worktree
of that commit with ``--out-dir`` naming this checkout's folder).
"""
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..chat import GraphChat, find_reasoner, load_graph
from ..evaluate import kgqa_scores
from ..gnn_rag import load_reasoner
from ..graphqa import DatasetConfig, load_dataset
from ..measure import summarize
from ..paths import repo_root
from ..stats import wilson_interval
from .chat_without_questions import ask_alone, paired


def _mode(mode: str, fmt: str, prior: float = 0.0, **extra) -> dict:
    return {"retriever": "pcst", "answer_mode": mode, "evidence_format": fmt, "relation_prior": prior,
            "calibrate": False, "length_norm": False, **extra}


MODE_SETTINGS = {  # label: ChatConfig overrides (every scoring option explicit)
    "free, csv": _mode("free", "csv"),
    "free, triples": _mode("free", "triples"),
    "ranked, csv": _mode("ranked", "csv"),
    "ranked, triples": _mode("ranked", "triples"),
    "ranked, triples, calibrated": _mode("ranked", "triples", calibrate=True),
    "ranked, triples, length-normalized": _mode("ranked", "triples", length_norm=True),
    "ranked, triples, relation prior 10": _mode("ranked", "triples", 10.0),
    "ranked, triples, relation prior 20": _mode("ranked", "triples", 20.0),
}


CHOSEN = "ranked, triples, relation prior 20"  # the best Hit and Hit@1 on the MetaQA sample: the LLM-ranked default


HELD_OUT_MODES = ("free, csv", "ranked, triples", CHOSEN)  # measured on the graphs never used to choose


def mode_record(graph: str, mode: str, rows: list[dict]) -> dict:
    """One ``answer_modes`` record from per-question rows (``hit``, ``hit1``, ``in_evidence``, ``node_answer``,
    ``turn_s``)."""

    n = len(rows)
    hits = sum(r["hit"] for r in rows)
    lo, hi = wilson_interval(hits, n)
    in_ev = float(np.mean([r["in_evidence"] for r in rows]))
    return {"graph": graph, "mode": mode, "n": n, "hit": hits / n, "hit_ci": [round(lo, 4), round(hi, 4)],
            "hit1": float(np.mean([r["hit1"] for r in rows])), "in_evidence": in_ev,
            "hit_given_in_evidence": float(np.mean([r["hit"] for r in rows if r["in_evidence"]])) if in_ev else None,
            "node_answer_share": float(np.mean([r["node_answer"] for r in rows])),
            "turn_median_s": float(np.median([r["turn_s"] for r in rows])),
            "turn_p90_s": summarize([r["turn_s"] for r in rows])["p90_s"]}


WEBQSP_MINI = "webqsp (60 test mini-graphs)"


# A reasoner trained on the WebQSP re-split's training questions (python -m gr_core.gnn_rag test --keys webqsp
# --max-train 0 --max-val 200 --max-test 0 --epochs 100 --budget-minutes 8 --out outputs/studies/chat_reasoner)
WEBQSP_REASONER = Path("outputs", "studies", "chat_reasoner", "webqsp", "webqsp.pt")


def webqsp_mini_sample() -> list[tuple[str, dict]]:
    """60 WebQSP test questions (seeded sample of the re-split's test part) as ``(graph spec, question)``."""

    mini = load_dataset("webqsp")
    test = mini.split["test"]
    pick = sorted(np.random.default_rng(0).choice(len(test), 60, replace=False).tolist())
    return [(f"webqsp:{test[i]}",
             {"question": mini.records[test[i]].question, "answers": mini.records[test[i]].answers})
            for i in pick]


def paired_hit(graph: str, a: str, rows_a: list[dict], b: str, rows_b: list[dict]) -> dict | None:
    """Exact McNemar on Hit between two modes' rows for the same questions (None when the questions differ)."""
    try:
        test = paired(a, rows_a, b, rows_b)
    except ValueError:
        return None
    return {"graph": graph, "hit_a": test["score_a"], "hit_b": test["score_b"], **test}


def answer_mode_study(qs: list[dict]) -> tuple[list[dict], list[dict], dict]:
    """The ``answer_modes`` records (module docstring) and per-question rows, with the paired test per graph."""

    records, per_question = [], {}
    kb, kind, _ = load_graph("metaqa")
    chat = GraphChat(kb, model="zero_shot", kind=kind, retriever="pcst", answer_mode="ranked")  # the LLM loads
    base = chat.config
    chat.ask(qs[0]["question"])  # warm-up: the encoder and the LLM load outside the timed turns
    for label, over in MODE_SETTINGS.items():
        chat.config = replace(base, **over)
        rows = [ask_alone(chat, q) for q in qs]
        records.append(mode_record("metaqa", label, rows))
        per_question[("metaqa", label)] = rows
        print(f"  metaqa {label}: Hit {records[-1]['hit']:.3f} Hit@1 {records[-1]['hit1']:.3f} "
              f"in evidence {records[-1]['in_evidence']:.3f} turn {records[-1]['turn_median_s']:.2f} s", flush=True)
    held_out = {}
    full = load_dataset("webqsp_full")
    held_out["webqsp_full (18 complete graphs)"] = [
        (f"webqsp_full:{i}", {"question": full.records[i].question, "answers": full.records[i].answers})
        for i in range(len(full))]
    held_out[WEBQSP_MINI] = webqsp_mini_sample()
    for graph_name, items in held_out.items():
        rows = {label: [] for label in HELD_OUT_MODES}
        for spec, q in items:
            g, k, _ = load_graph(spec)
            c = GraphChat(g, model="zero_shot", kind=k, retriever="pcst", answer_mode="ranked")
            c.reuse_model(chat)
            base_c = c.config
            for label in HELD_OUT_MODES:
                c.config = replace(base_c, **MODE_SETTINGS[label])
                rows[label].append(ask_alone(c, q))
        for label in HELD_OUT_MODES:
            records.append(mode_record(graph_name, label, rows[label]))
            per_question[(graph_name, label)] = rows[label]
            print(f"  {graph_name} {label}: Hit {records[-1]['hit']:.3f} in evidence {records[-1]['in_evidence']:.3f}"
                  f" turn {records[-1]['turn_median_s']:.2f} s", flush=True)
    tests = []
    for graph_name in ["metaqa", *held_out]:
        for label in ("ranked, triples", CHOSEN):
            tests.append(paired_hit(graph_name, label, per_question[(graph_name, label)], "free, csv",
                                    per_question[(graph_name, "free, csv")]))
    return records, tests, {f"{g} / {m}": rows for (g, m), rows in per_question.items()}


REASONER_MODES = {  # label suffix: ChatConfig overrides with retriever="gnn"
    "reasoner": {"retriever": "gnn", "answer_mode": "reasoner"},
    "ranked over its paths": {**MODE_SETTINGS[CHOSEN], "retriever": "gnn"},
}


def reasoner_name(reasoner: str | Path) -> str:
    """How a reasoner is named in the records' labels: ``<preset>/09_chat`` for a preset's notebook 09
    (``outputs/<preset>/09_chat/reasoner/metaqa-chat.pt``), ``<study>/metaqa-chat`` for the chat study's, else
    ``<folder>/<stem>``."""
    reasoner = Path(reasoner)
    if reasoner.parent.name == "reasoner":
        return f"{reasoner.parents[2].name}/{reasoner.parents[1].name}"
    if reasoner.stem == "metaqa-chat":
        return f"{reasoner.parent.parent.name}/{reasoner.stem}"
    return f"{reasoner.parent.parent.parent.name}/{reasoner.stem}"


def reasoner_mode_study(qs: list[dict], answer_rows: dict[str, list[dict]], reasoner: Path | None = None
                        ) -> tuple[list[dict], list[dict], dict]:
    """The GNN-RAG modes on the MetaQA sample with ``reasoner``, else the one :func:`find_reasoner` finds (the chat's
    own, ``python -m gr_core.gnn_rag chat``, when it exists): its candidates as the answer, and the LLM ranking the
    nodes of its paths; each paired (exact McNemar on Hit) with the default mode's rows in ``answer_rows``
    (``answer_mode_questions`` of :func:`answer_mode_study`'s result file). Without ``reasoner``, the same on the 60
    WebQSP test mini-graphs when :data:`WEBQSP_REASONER` exists (trained on the re-split's training part)."""

    named, reasoner = reasoner is not None, reasoner or find_reasoner()
    if reasoner is None:
        raise SystemExit("no saved reasoner: run python -m gr_core.gnn_rag chat ... first (docs/chat.md)")
    reasoner = Path(reasoner)
    name = reasoner_name(reasoner)
    kb, kind, _ = load_graph("metaqa")
    chat = GraphChat(kb, model="zero_shot", kind=kind, retriever="gnn", reasoner=reasoner)
    base = chat.config
    chat.ask(qs[0]["question"])  # warm-up
    records, rows_by_label, tests = [], {}, []
    default_rows = answer_rows.get(f"metaqa / {CHOSEN}")
    for suffix, over in REASONER_MODES.items():
        chat.config = replace(base, **over)
        rows = [ask_alone(chat, q) for q in qs]
        label = f"GNN-RAG reasoner ({name}), {suffix}"
        rec = mode_record("metaqa", label, rows)
        rec["hit_by_hop"] = {f"{h}-hop": float(np.mean([r["hit"] for r, q in zip(rows, qs) if q["hop"] == h]))
                             for h in (1, 2, 3)}
        records.append(rec)
        rows_by_label[f"metaqa / {label}"] = rows
        print(f"  metaqa {label}: Hit {rec['hit']:.3f} Hit@1 {rec['hit1']:.3f} in evidence {rec['in_evidence']:.3f} "
              f"by hop {rec['hit_by_hop']} turn {rec['turn_median_s']:.2f} s", flush=True)
        if default_rows and (test := paired_hit("metaqa", label, rows, CHOSEN, default_rows)):
            tests.append(test)
    webqsp = repo_root() / WEBQSP_REASONER
    # the held-out graphs: WebQSP test mini-graphs with a reasoner trained on WebQSP's training part
    if webqsp.is_file() and not named:

        model = load_reasoner(webqsp)
        default_rows = answer_rows.get(f"{WEBQSP_MINI} / {CHOSEN}")
        items = webqsp_mini_sample()
        rows = {suffix: [] for suffix in REASONER_MODES}
        for spec, q in items:
            g, k, _ = load_graph(spec)
            c = GraphChat(g, model="zero_shot", kind=k, retriever="gnn", reasoner=model)
            c.reuse_model(chat)
            base_c = c.config
            for suffix, over in REASONER_MODES.items():
                c.config = replace(base_c, **over)
                rows[suffix].append(ask_alone(c, q))
        for suffix, r in rows.items():
            label = f"GNN-RAG reasoner (studies/webqsp), {suffix}"
            rec = mode_record(WEBQSP_MINI, label, r)
            records.append(rec)
            rows_by_label[f"{WEBQSP_MINI} / {label}"] = r
            print(f"  {WEBQSP_MINI} {label}: Hit {rec['hit']:.3f} Hit@1 {rec['hit1']:.3f} in evidence "
                  f"{rec['in_evidence']:.3f} turn {rec['turn_median_s']:.2f} s", flush=True)
            if default_rows and (test := paired_hit(WEBQSP_MINI, label, r, CHOSEN, default_rows)):
                tests.append(test)
    return records, tests, rows_by_label


# Follow-ups about the same film: the second turn's pronoun points at the first turn's topic (bench/chat.py follow-ups).
FOLLOW_UP_TEMPLATES = {"directed_by": "and who directed it?", "written_by": "and who wrote it?",
                       "starred_actors": "and who starred in it?", "release_year": "and when was it released?",
                       "in_language": "and what language is it in?", "has_genre": "and what genre is it?"}


def follow_up_pairs(n: int = 30, seed: int = 0) -> list[dict]:
    """``n`` two-turn conversations: an official MetaQA 1-hop test question about a film (``movie_to_*``), then a
    templated follow-up about the same film with another relation (:data:`FOLLOW_UP_TEMPLATES`, seeded choice among
    the relations the film has); the follow-up's gold answers are the KB's tails for that film and relation."""

    ds = load_dataset(DatasetConfig("metaqa", hops=1))
    kg, rng = ds.kg, np.random.default_rng(seed)
    films = [i for i in ds.split["test"] if (ds.records[i].extra or {}).get("qtype", "").startswith("movie_to_")]
    rel_id = {r: k for k, r in enumerate(kg.relations)}
    pairs = []
    for i in rng.permutation(films):
        rec = ds.records[int(i)]
        movie = kg.entity_id[rec.q_entities[0]]
        out = {}
        for e in np.flatnonzero(kg.heads == movie):
            out.setdefault(kg.relations[int(kg.rels[e])], []).append(kg.entities[int(kg.tails[e])])
        asked = {a for a in rec.answers}
        options = [r for r in FOLLOW_UP_TEMPLATES if r in out and not asked & set(out[r]) and r in rel_id]
        if not options:
            continue
        rel = options[int(rng.integers(len(options)))]
        pairs.append({"first": rec.question, "first_answers": rec.answers, "topic": rec.q_entities[0],
                      "follow_up": FOLLOW_UP_TEMPLATES[rel], "relation": rel, "answers": sorted(set(out[rel]))})
        if len(pairs) == n:
            break
    return pairs


def follow_up_study(chat: GraphChat, pairs: list[dict]) -> dict:
    """Hit of the first turn and of its follow-up (asked in the same conversation) over ``pairs``."""

    rows = []
    for pr in pairs:
        chat.reset()
        first = chat.ask(pr["first"])
        second = chat.ask(pr["follow_up"])
        split = [(t.answer.split(" | ") if t.mode in ("ranked", "reasoner") else t.answer) for t in (first, second)]
        rows.append({"first_hit": kgqa_scores(split[0], pr["first_answers"])["hit"],
                     "hit": kgqa_scores(split[1], pr["answers"])["hit"], "follow_up": second.follow_up,
                     "answer": second.answer, "question": pr["follow_up"], "topic": pr["topic"]})
    hits = sum(r["hit"] for r in rows)
    lo, hi = wilson_interval(int(hits), len(rows))
    return {"n": len(rows), "follow_up_hit": hits / len(rows), "follow_up_hit_ci": [round(lo, 4), round(hi, 4)],
            "first_hit": float(np.mean([r["first_hit"] for r in rows])),
            "read_as_follow_up": float(np.mean([r["follow_up"] for r in rows])), "rows": rows}


def follow_up_records(label: str, pairs: list[dict] | None = None) -> dict[str, dict]:
    """This checkout's follow-up records (:func:`follow_up_study`) with and without the chat's reasoner, keyed
    ``"<retriever> (<what>), <label>"``."""
    kb, kind, _ = load_graph("metaqa")
    pairs = pairs or follow_up_pairs()
    records = {}
    for retriever, what in (("pcst", "the chat without a reasoner"), ("gnn", "the chat's reasoner")):
        rec = follow_up_study(GraphChat(kb, model="zero_shot", kind=kind, retriever=retriever,  # as measured: the
                                        answer_mode="ranked" if retriever == "pcst" else None), pairs)  # LLM ranks
        records[f"{retriever} ({what}), {label}"] = rec
        print(f"  follow-ups {retriever} ({label}): first Hit {rec['first_hit']:.3f}, follow-up Hit "
              f"{rec['follow_up_hit']:.3f} {rec['follow_up_hit_ci']} n {rec['n']}", flush=True)
    return records


FOLLOW_UPS_WHAT = ("30 two-turn conversations: an official MetaQA 1-hop test question about a film, then a templated "
                   "follow-up about the same film with another relation ('and who directed it?'); Hit of the "
                   "follow-up's answer against the KB's tails for that film and relation")
