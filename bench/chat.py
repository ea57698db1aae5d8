"""Chat with your graph: question-to-answer time on CPU, for a small graph and for the full MetaQA KB.

    python bench/chat.py   ->  outputs/bench/chat.json

Graphs: the first complete WebQSP subgraph (``webqsp_full:0``, searched whole, as in the paper) and the whole MetaQA
KB (133,582 triples, 43,234 entities: searched in the 2-hop neighbourhood of the linked entities). Questions: the
graph's own WebQSP question; 60 official MetaQA test questions (20 per hop count, seeded sample) asked as a user
would write them (the ``[topic]`` brackets removed), each on its own (no history).

Measured per graph:
- ``index_seconds``: building the index from the parsed graph with an empty cache (every text through the sentence
  encoder), in a subprocess; ``index_cached_seconds``: loading it again from its cache;
- ``retrieval_median_s`` (p90, min): linking + question embedding + neighbourhood + PCST, per question;
- ``answer_median_s``: generation + answer check with the embedded SmolLM2-135M (fp32, 2 threads), zero-shot and,
  when ``outputs/`` holds one, the trained G-Retriever checkpoint ``model="auto"`` picks; each with and without the
  citation request, with the Hit of the 12 answers (a small sample: an indication, not a score);
- quality beside speed (MetaQA): how often the topic entity is linked, how often a gold answer is in the evidence,
  the evidence size in nodes and LLM tokens, for the default setting (the paper's KGQA rule: k = 3, k_e = 5,
  C_e = 0.5, in the 2-hop neighbourhood), three variants (edge tie-break, k = 10, 3 hops) and, when notebook 04 has
  saved a reasoner, GNN-RAG's reasoning paths; the share of MetaQA questions the relevance rule calls unrelated, and of 30 off-topic questions
  (listed below).

Side by side: G-Retriever's retrieval run on the *whole* KB (``whole_kb_pcst``: what the reference code does with one
graph; a few questions), against our neighbourhood-first search. There is no chat in the peers (the official code and
PyG's port answer stored benchmark questions only), so no peer column.
Target (issue 8): retrieval under 50 ms on the full KB after indexing; an answer in a few seconds.

Answer modes (``answer_modes``; ``python bench/chat.py --answer-modes`` reruns this part alone and keeps the rest of
``chat.json``): each question asked alone, the embedded SmolLM2-135M zero-shot (fp32, 2 threads), per answer mode
(:attr:`gr_core.chat.ChatConfig.answer_mode`) and evidence format: Hit (a gold answer anywhere in the answer, the
papers' metric) with its 95% Wilson interval, Hit@1 (in the first answer), answer-in-evidence (a gold answer is a
node of the evidence: the ceiling of a constrained answer), the share of answers that name a node of the graph, the
median seconds of a whole turn (retrieval + answer + check). The variants (calibration, length normalization,
evidence format, the margin) are chosen on the 60 MetaQA questions; the WebQSP graphs (the 18 complete graphs with
their questions, and 60 test mini-graphs, seeded sample) are never used to choose anything. Paired exact McNemar on
Hit between the free and the chosen ranked mode on the same questions.

GNN-RAG modes (``python bench/chat.py --reasoner-modes`` adds or replaces their records and keeps the rest): the
reasoner's candidates as the answer, and the LLM ranking the node names of the reasoner's paths, on the same 60
MetaQA questions with the chat's own reasoner (``python -m gr_core.gnn_rag --chat``), and on the 60 WebQSP test
mini-graphs with a reasoner trained on the WebQSP re-split's training part (:data:`WEBQSP_REASONER`); each paired
with the default ranked mode on the same questions. ``--reasoner FILE`` measures another MetaQA reasoner on the 60
MetaQA questions alone (the quick preset's, ``outputs/quick/09_chat/reasoner/metaqa-chat.pt``).

Follow-ups (``python bench/chat.py --follow-ups --label COMMIT``, merged into ``follow_ups``): 30 two-turn
conversations (:func:`follow_up_pairs`), Hit of the follow-up with and without the chat's reasoner, the reasoner's
record paired with every other one (a record of another commit: run this file from a worktree of that commit with
``--out`` naming this checkout's ``outputs/bench/chat.json``).
"""
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from common import machine, package_versions, summarize, write_result  # noqa: I001

from gr_core.chat import ChatIndex, GraphChat, find_checkpoint, find_reasoner, load_graph
from gr_core.retrieval import retrieve_subgraph
from gr_core.studies.chat_without_questions import ask_alone, metaqa_sample, paired

PER_HOP = 20
ANSWERED = 12  # questions per model for the answer timing
WHOLE_KB = 5  # questions for whole-KB PCST
OFF_TOPIC = [
    "what is the boiling point of water at sea level", "how do I reset my wifi router", "what is the capital of France",
    "how many legs does a spider have", "what is the square root of 144", "who won the world cup in 2018",
    "how do you bake sourdough bread", "what is the speed of light", "which planet is closest to the sun",
    "how do I renew my passport", "what is the chemical symbol for gold", "how tall is mount everest",
    "what time zone is tokyo in", "how do I change a flat tire", "what is photosynthesis",
    "how much does a blue whale weigh", "what is the population of canada", "how do vaccines work",
    "what is the best way to learn python", "when was the printing press invented", "what causes earthquakes",
    "how do I cook rice in a pan", "what is the tallest building in the world", "how many bones are in the human body",
    "what is the freezing point of salt water", "who invented the telephone", "what is the largest ocean",
    "how do airplanes stay in the air", "what is inflation in economics", "how far is the moon from earth",
]


def metaqa_questions(seed: int = 0) -> list[dict]:
    """:data:`PER_HOP` official MetaQA test questions per hop count (seeded sample), asked as a user writes them."""
    return metaqa_sample("test", PER_HOP, seed)


def cold_index_seconds(spec: str) -> float:
    """Index ``spec`` in a subprocess whose cache folder is empty when the index is built (every text encoded); the
    graph itself is loaded before, from the usual cache, and its parsing is not timed."""
    with tempfile.TemporaryDirectory() as tmp:
        code = ("import os,time,json;from gr_core.chat import ChatIndex,load_graph;g=load_graph(%r)[0];"
                "os.environ['GR_CACHE_DIR']=%r;t=time.perf_counter();i=ChatIndex.build(g);"
                "print(json.dumps({'s':time.perf_counter()-t,'cached':i.cached}))" % (spec, tmp))
        res = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, GR_PROGRESS="off"), capture_output=True,
                             text=True, timeout=3000)
        if res.returncode != 0:
            raise RuntimeError(res.stderr[-2000:])
        rec = json.loads(res.stdout.strip().splitlines()[-1])
        assert not rec["cached"]
        return rec["s"]


def answer_timing(chat: GraphChat, questions: list[dict]) -> dict:
    """Generation + check time per answer over ``questions`` (each asked alone), and the answers' Hit."""
    from gr_core.evaluate import kgqa_scores

    chat.llm  # load first: the load is not part of a turn
    chat.ask(questions[0]["question"])  # warm-up
    secs, lengths, hits, grounded = [], [], [], []
    for q in questions:
        chat.reset()
        turn = chat.retrieve(q["question"])
        if turn.status == "unrelated":
            continue
        t = time.perf_counter()
        chat.answer(turn)
        secs.append(time.perf_counter() - t)
        lengths.append(len(chat.llm.tokenizer(turn.answer, add_special_tokens=False)["input_ids"]))
        hits.append(kgqa_scores(turn.answer, q["answers"])["hit"])
        grounded.append(bool(turn.answer_nodes))
    return {"model": chat.model_name, "cite": chat.config.cite, **{f"answer_{k}": v for k, v in summarize(secs).items()},
            "hit": float(np.mean(hits)), "answer_names_a_node": float(np.mean(grounded)), "questions": len(secs),
            "mean_answer_tokens": float(np.mean(lengths)), "max_new_tokens": chat.config.max_new_tokens}


def retrieval_study(chat: GraphChat, qs: list[dict], tokenizer) -> tuple[dict, list[dict]]:
    """Retrieval time, linking, answer coverage and evidence size for each question, asked alone."""
    rows = []
    for q in qs:
        chat.reset()
        turn = chat.retrieve(q["question"])
        ev = set(turn.evidence.nodes.node_attr) if turn.evidence is not None else set()
        linked = {chat.index.kg.entities[r] for r in chat.index.rows_of(turn.linked)}
        rows.append({**{k: q[k] for k in ("hop", "line", "question")}, "status": turn.status,
                     "retrieval_s": turn.timings["retrieval"], "encode_s": turn.timings["encode"],
                     "pcst_s": turn.timings.get("pcst"), "scope_s": turn.timings.get("scope"),
                     "topic_linked": q["topic"] in linked, "answer_in_evidence": bool(ev & set(q["answers"])),
                     "answer_in_searched": bool(set(q["answers"]) & set(turn.scope.nodes.node_attr))
                     if turn.scope is not None else False,
                     "evidence_nodes": len(ev), "evidence_tokens": len(tokenizer(turn.desc, add_special_tokens=False)["input_ids"]),
                     "searched_nodes": turn.searched_nodes, "searched_edges": turn.searched_edges})
    rt = [r["retrieval_s"] for r in rows]
    summary = {"retrieval_median_s": float(np.median(rt)), "retrieval": summarize(rt),
               "under_50ms_fraction": float(np.mean([s < 0.05 for s in rt])),
               "encode_median_s": float(np.median([r["encode_s"] for r in rows])),
               "pcst_median_s": float(np.median([r["pcst_s"] for r in rows if r["pcst_s"] is not None]))
        if any(r["pcst_s"] is not None for r in rows) else None,
               "topic_linked": float(np.mean([r["topic_linked"] for r in rows])),
               "answer_in_evidence": float(np.mean([r["answer_in_evidence"] for r in rows])),
               "answer_in_searched": float(np.mean([r["answer_in_searched"] for r in rows])),
               "evidence_nodes_median": float(np.median([r["evidence_nodes"] for r in rows])),
               "evidence_tokens_median": float(np.median([r["evidence_tokens"] for r in rows])),
               "evidence_over_512_tokens": float(np.mean([r["evidence_tokens"] > 512 for r in rows])),
               "called_unrelated": float(np.mean([r["status"] == "unrelated" for r in rows])),
               "by_hop": {f"{h}-hop": {k: float(np.mean([r[k] for r in rows if r["hop"] == h]))
                                       for k in ("topic_linked", "answer_in_evidence", "evidence_nodes", "evidence_tokens")}
                          for h in (1, 2, 3)}}
    return summary, rows


def _mode(mode: str, fmt: str, prior: float = 0.0, **extra) -> dict:
    return {"retriever": "pcst", "answer_mode": mode, "evidence_format": fmt, "relation_prior": prior, "calibrate": False,
            "length_norm": False, **extra}


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
CHOSEN = "ranked, triples, relation prior 20"  # the best Hit and Hit@1 on the MetaQA sample: ChatConfig's KG default
HELD_OUT_MODES = ("free, csv", "ranked, triples", CHOSEN)  # measured on the graphs never used to choose


def mode_record(graph: str, mode: str, rows: list[dict]) -> dict:
    """One ``answer_modes`` record from per-question rows (``hit``, ``hit1``, ``in_evidence``, ``node_answer``,
    ``turn_s``)."""
    from gr_core.stats import wilson_interval

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
# A reasoner trained on the WebQSP re-split's training questions (python -m gr_core.gnn_rag --test --keys webqsp
# --max-train 0 --max-val 200 --max-test 0 --epochs 100 --budget-minutes 8 --out outputs/studies/chat_reasoner)
WEBQSP_REASONER = Path("outputs", "studies", "chat_reasoner", "webqsp", "webqsp.pt")


def webqsp_mini_sample() -> list[tuple[str, dict]]:
    """60 WebQSP test questions (seeded sample of the re-split's test part) as ``(graph spec, question)``."""
    from gr_core.graphqa import load_dataset

    mini = load_dataset("webqsp")
    test = mini.split["test"]
    pick = sorted(np.random.default_rng(0).choice(len(test), 60, replace=False).tolist())
    return [(f"webqsp:{test[i]}", {"question": mini.records[test[i]].question, "answers": mini.records[test[i]].answers})
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
    from dataclasses import replace

    from gr_core.graphqa import load_dataset

    records, per_question = [], {}
    kb, kind, _ = load_graph("metaqa")
    chat = GraphChat(kb, model="zero_shot", kind=kind, retriever="pcst")
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
            c = GraphChat(g, model="zero_shot", kind=k, retriever="pcst")
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


def reasoner_mode_study(qs: list[dict], result: dict, reasoner: Path | None = None
                        ) -> tuple[list[dict], list[dict], dict]:
    """The GNN-RAG modes on the MetaQA sample with ``reasoner``, else the one :func:`find_reasoner` finds (the chat's
    own, ``python -m gr_core.gnn_rag --chat``, when it exists): its candidates as the answer, and the LLM ranking the
    nodes of its paths; each paired (exact McNemar on Hit) with the default mode's rows already in ``result``. Without
    ``reasoner``, the same on the 60 WebQSP test mini-graphs when :data:`WEBQSP_REASONER` exists (trained on the
    re-split's training part)."""
    from dataclasses import replace

    from gr_core.paths import repo_root

    named, reasoner = reasoner is not None, reasoner or find_reasoner()
    if reasoner is None:
        raise SystemExit("no saved reasoner: run python -m gr_core.gnn_rag --chat ... first (docs/chat.md)")
    reasoner = Path(reasoner)
    if reasoner.parent.name == "reasoner":  # a preset's notebook 09: outputs/<preset>/09_chat/reasoner/metaqa-chat.pt
        name = f"{reasoner.parents[2].name}/{reasoner.parents[1].name}"
    elif reasoner.stem == "metaqa-chat":
        name = f"{reasoner.parent.parent.name}/{reasoner.stem}"
    else:
        name = f"{reasoner.parent.parent.parent.name}/{reasoner.stem}"
    kb, kind, _ = load_graph("metaqa")
    chat = GraphChat(kb, model="zero_shot", kind=kind, retriever="gnn", reasoner=reasoner)
    base = chat.config
    chat.ask(qs[0]["question"])  # warm-up
    records, rows_by_label, tests = [], {}, []
    default_rows = result.get("answer_mode_questions", {}).get(f"metaqa / {CHOSEN}")
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
    if webqsp.is_file() and not named:  # the held-out graphs: WebQSP test mini-graphs with a reasoner trained on WebQSP's training part
        from gr_core.gnn_rag import load_reasoner

        model = load_reasoner(webqsp)
        default_rows = result.get("answer_mode_questions", {}).get(f"{WEBQSP_MINI} / {CHOSEN}")
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


# Follow-ups about the same film: the second turn's pronoun points at the first turn's topic (bench --follow-ups).
FOLLOW_UP_TEMPLATES = {"directed_by": "and who directed it?", "written_by": "and who wrote it?",
                       "starred_actors": "and who starred in it?", "release_year": "and when was it released?",
                       "in_language": "and what language is it in?", "has_genre": "and what genre is it?"}


def follow_up_pairs(n: int = 30, seed: int = 0) -> list[dict]:
    """``n`` two-turn conversations: an official MetaQA 1-hop test question about a film (``movie_to_*``), then a
    templated follow-up about the same film with another relation (:data:`FOLLOW_UP_TEMPLATES`, seeded choice among
    the relations the film has); the follow-up's gold answers are the KB's tails for that film and relation."""
    from gr_core.graphqa import DatasetConfig, load_dataset

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
    from gr_core.evaluate import kgqa_scores
    from gr_core.stats import wilson_interval

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


def main() -> None:
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    if "--follow-ups" in sys.argv[1:]:  # two-turn conversations: records labelled --label, merged into follow_ups
        from gr_core.paths import repo_root
        from gr_core.runs import read_json, write_json

        label = sys.argv[sys.argv.index("--label") + 1] if "--label" in sys.argv else "this commit"
        path = Path(sys.argv[sys.argv.index("--out") + 1]) if "--out" in sys.argv else \
            repo_root() / "outputs" / "bench" / "chat.json"  # --out: another checkout's chat.json, to merge into
        result = read_json(path)
        section = result.setdefault("follow_ups", {})
        records = section.setdefault("records", {})
        kb, kind, _ = load_graph("metaqa")
        pairs = follow_up_pairs()
        for retriever, what in (("pcst", "the chat without a reasoner"), ("gnn", "the chat's reasoner")):
            rec = follow_up_study(GraphChat(kb, model="zero_shot", kind=kind, retriever=retriever), pairs)
            records[f"{retriever} ({what}), {label}"] = rec
            print(f"  follow-ups {retriever} ({label}): first Hit {rec['first_hit']:.3f}, follow-up Hit "
                  f"{rec['follow_up_hit']:.3f} {rec['follow_up_hit_ci']} n {rec['n']}", flush=True)
        mine = f"gnn (the chat's reasoner), {label}"  # this run's reasoner against every other record
        section["tests"] = [t for other, rec in records.items() if other != mine
                            if (t := paired_hit("metaqa follow-ups", mine, records[mine]["rows"], other, rec["rows"]))]
        section["what"] = ("30 two-turn conversations: an official MetaQA 1-hop test question about a film, then a "
                           "templated follow-up about the same film with another relation ('and who directed it?'); "
                           "Hit of the follow-up's answer against the KB's tails for that film and relation")
        section["provenance"] = {"machine": machine(), "versions": package_versions(),
                                 "command": f"python bench/chat.py --follow-ups --label {label!r}"}
        write_json(path, result)
        return
    if "--reasoner-modes" in sys.argv[1:]:  # the GNN-RAG modes alone, replacing their earlier records
        from gr_core.paths import repo_root
        from gr_core.runs import read_json

        path = repo_root() / "outputs" / "bench" / "chat.json"
        result = read_json(path)
        named = Path(sys.argv[sys.argv.index("--reasoner") + 1]) if "--reasoner" in sys.argv else None
        records, tests, rows = reasoner_mode_study(metaqa_questions(), result, named)
        labels = {r["mode"] for r in records}
        result["answer_modes"] = [r for r in result["answer_modes"] if r["mode"] not in labels] + records
        result["answer_mode_tests"] = [t for t in result["answer_mode_tests"] if t["a"] not in labels] + tests
        result["answer_mode_questions"] = result["answer_mode_questions"] | rows
        # the other records keep the provenance (machine, versions, command) of the run that measured them
        from gr_core.runs import write_json

        command = "python bench/chat.py --reasoner-modes" + (f" --reasoner {named}" if named else "")
        result.setdefault("reasoner_modes_provenance", {})[command] = {"machine": machine(), "versions": package_versions(),
                                                        "command": command}
        write_json(path, result)
        print("wrote", path)
        return
    if "--answer-modes" in sys.argv[1:]:
        from gr_core.runs import read_json
        from gr_core.paths import repo_root

        path = repo_root() / "outputs" / "bench" / "chat.json"
        result = read_json(path) if path.is_file() else {}
        # the other sections keep the provenance of the run that measured them
        earlier = {key: result.pop(key) for key in ("machine", "versions", "command") if key in result}
        if earlier:
            result["provenance_of_other_sections"] = result.get("provenance_of_other_sections", earlier)
        records, tests, rows = answer_mode_study(metaqa_questions())
        result.update({"answer_modes": records, "answer_mode_tests": tests, "answer_mode_questions": rows})
        print("wrote", write_result("chat", result))
        return
    result = {"graphs": {}}

    # ---------------------------------------------------------------- small graph
    spec = "webqsp_full:0"
    graph, kind, _ = load_graph(spec)
    from gr_core.graphqa import load_dataset

    rec = load_dataset("webqsp_full").records[0]
    cold = cold_index_seconds(spec)
    small = GraphChat(graph, model="zero_shot", kind=kind, retriever="pcst")
    t = time.perf_counter()
    ChatIndex.build(graph)
    cached = time.perf_counter() - t
    small.ask(rec.question)  # warm-up (loads the LLM)
    rt = []
    for _ in range(20):
        small.reset()
        rt.append(small.retrieve(rec.question).timings["retrieval"])
    turn = small.retrieve(rec.question)
    hit = bool({a.lower() for a in rec.answers} & set(turn.evidence.nodes.node_attr.str.lower()))
    timing = answer_timing(small, [{"question": rec.question, "answers": rec.answers}] * 5)
    result["graphs"]["small"] = {
        "graph": spec, "nodes": small.index.num_nodes, "edges": small.index.num_edges, "index_seconds": round(cold, 3),
        "index_cached_seconds": round(cached, 3), "retrieval_median_s": round(summarize(rt)["median_s"], 5),
        "retrieval": summarize(rt), "question": rec.question, "evidence_nodes": turn.evidence.num_nodes,
        "evidence_edges": turn.evidence.num_edges, "answer_in_evidence": hit, "searched": "whole graph",
        "answer_median_s": round(timing["answer_median_s"], 3), "answer": [timing]}
    print(f"small graph {spec}: {small.index.num_nodes} nodes / {small.index.num_edges} edges; index {cold:.1f} s cold, "
          f"{cached:.2f} s cached; retrieval median {summarize(rt)['median_s'] * 1000:.1f} ms; answer median "
          f"{timing['answer_median_s']:.2f} s", flush=True)
    del small

    # ---------------------------------------------------------------- the full MetaQA KB
    from dataclasses import replace

    from gr_core.llm import load_tokenizer

    cold = cold_index_seconds("metaqa")
    t = time.perf_counter()
    kb, kind, _ = load_graph("metaqa")
    parse = time.perf_counter() - t
    chat = GraphChat(kb, model="zero_shot", kind=kind, retriever="pcst")
    cached = chat.index.seconds
    tok = load_tokenizer()
    qs = metaqa_questions()
    chat.retrieve(qs[0]["question"])  # warm-up (loads the sentence encoder)
    default_cfg = chat.config
    studies = {}
    settings = {
        "default (paper rule: k = 3, k_e = 5, 2 hops)": default_cfg,
        "edge tie-break 1e-3": replace(default_cfg, edge_tiebreak=1e-3),
        "k = k_e = 10 (GR Table 10's best)": replace(default_cfg, top_k_nodes=10, top_k_edges=10),
        "3-hop neighbourhood": replace(default_cfg, hops=3),
    }
    for label, cfg in settings.items():
        chat.config = cfg
        summary, rows = retrieval_study(chat, qs, tok)
        studies[label] = {**summary, "per_question": rows}
    chat.config = default_cfg
    reasoner = find_reasoner()
    if reasoner is not None:  # GNN-RAG's paths, when notebook 04 has saved a reasoner
        gnn = GraphChat(kb, model="zero_shot", kind=kind, retriever="gnn", reasoner=reasoner)
        gnn.retrieve(qs[0]["question"])
        summary, rows = retrieval_study(gnn, qs, tok)
        studies[f"GNN-RAG paths ({Path(reasoner).parent.parent.parent.name}/{Path(reasoner).name})"] = {
            **summary, "per_question": rows}
        del gnn
    main_study = studies["default (paper rule: k = 3, k_e = 5, 2 hops)"]
    off = []
    for q in OFF_TOPIC:
        chat.reset()
        turn = chat.retrieve(q)
        off.append({"question": q, "status": turn.status, "best_similarity": round(turn.best_similarity, 4),
                    "linked": [chat.index.kg.entities[r] for r in chat.index.rows_of(turn.linked)]})
    # side by side: G-Retriever's PCST (paper rule) on the whole KB, no neighbourhood cut, for a few questions
    whole = []
    idx = chat.index
    full = idx.subgraph(np.arange(idx.num_nodes), np.arange(idx.num_edges))
    paper_rule = default_cfg.retrieval
    for q in qs[:: len(qs) // WHOLE_KB][:WHOLE_KB]:
        emb = chat.embed(q["question"])
        t = time.perf_counter()
        node_sim, rel_sim = idx.similarities(emb)
        res = retrieve_subgraph(full, None, None, None, paper_rule, node_sim=node_sim, edge_sim=rel_sim[idx.kg.rels])
        _ = res.graph
        whole.append({"question": q["question"], "seconds": time.perf_counter() - t,
                      "answer_in_evidence": bool(set(q["answers"]) & set(res.graph.nodes.node_attr)),
                      "evidence_nodes": int(len(res.node_rows))})
    answer_qs = qs[::5][:ANSWERED]
    answers = []
    for cite in (False, True):
        chat.config = replace(default_cfg, cite=cite)
        answers.append(answer_timing(chat, answer_qs))
    ckpt = find_checkpoint("kg", llm_model="embedded:smollm2-135m-instruct")
    if ckpt is not None:
        trained = GraphChat(kb, model=str(ckpt), kind="kg", retriever="pcst")
        for cite in (False, True):
            trained.config = replace(trained.config, cite=cite)
            answers.append(answer_timing(trained, answer_qs))
    m = {"graph": "metaqa", "nodes": idx.num_nodes, "edges": idx.num_edges, "parse_seconds": round(parse, 3),
         "index_seconds": round(cold, 3), "index_cached_seconds": round(cached, 3),
         "retrieval_median_s": round(main_study["retrieval_median_s"], 5),
         "answer_median_s": round(answers[0]["answer_median_s"], 3), "answer": answers, "questions": len(qs),
         "retrieval_settings": studies,
         "off_topic_called_unrelated": float(np.mean([o["status"] == "unrelated" for o in off])),
         "relevance_threshold": default_cfg.relevance_threshold, "off_topic": off,
         "whole_kb_pcst": {"median_s": float(np.median([w["seconds"] for w in whole])), "runs": whole}}
    result["graphs"]["metaqa_kb"] = m
    result["summary"] = {
        "small_retrieval_median_ms": round(result["graphs"]["small"]["retrieval_median_s"] * 1000, 2),
        "kb_retrieval_median_ms": round(m["retrieval_median_s"] * 1000, 2),
        "kb_whole_graph_pcst_median_ms": round(m["whole_kb_pcst"]["median_s"] * 1000, 1),
        "kb_speedup_vs_whole_graph_pcst": round(m["whole_kb_pcst"]["median_s"] / m["retrieval_median_s"], 1),
        "kb_answer_median_s": {f"{a['model']}, cite={a['cite']}": round(a["answer_median_s"], 2) for a in answers},
        "kb_answer_hit": {f"{a['model']}, cite={a['cite']}": round(a["hit"], 3) for a in answers},
        "kb_answer_in_evidence": {k: round(v["answer_in_evidence"], 3) for k, v in studies.items()},
        "kb_evidence_tokens_median": {k: v["evidence_tokens_median"] for k, v in studies.items()},
        "off_topic_called_unrelated": m["off_topic_called_unrelated"],
        "metaqa_called_unrelated": main_study["called_unrelated"],
        "retrieval_target_50ms_met": m["retrieval_median_s"] < 0.05}
    print(f"MetaQA KB: {idx.num_nodes} nodes / {idx.num_edges} edges; index {cold:.1f} s cold, {cached:.2f} s cached; "
          f"retrieval median {m['retrieval_median_s'] * 1000:.1f} ms (whole-KB PCST {m['whole_kb_pcst']['median_s'] * 1000:.0f} ms)")
    for label, st in studies.items():
        print(f"  {label}: answer in evidence {st['answer_in_evidence']:.2f}, topic linked {st['topic_linked']:.2f}, "
              f"evidence {st['evidence_nodes_median']:.0f} nodes / {st['evidence_tokens_median']:.0f} tokens (median), "
              f"retrieval {st['retrieval_median_s'] * 1000:.1f} ms")
    print(f"  off-topic called unrelated {m['off_topic_called_unrelated']:.2f}; MetaQA called unrelated "
          f"{main_study['called_unrelated']:.2f}")
    for a in answers:
        print(f"  answer median {a['answer_median_s']:.2f} s, Hit {a['hit']:.2f} on {a['questions']} ({a['model']}, cite={a['cite']})")
    records, tests, rows = answer_mode_study(qs)
    result.update({"answer_modes": records, "answer_mode_tests": tests, "answer_mode_questions": rows})
    path = write_result("chat", result)
    print("wrote", path)


if __name__ == "__main__":
    main()
