"""Notebook 04's LLM half (GNN-RAG Tables 2-4, 6, 12): every retriever's evidence
(:mod:`gr_core.gnn_rag.evidence`) answered by one fine-tuned generator (:mod:`gr_core.gnn_rag.generation`) on the
same questions, and the tables that compare them row by row."""
from __future__ import annotations

import hashlib
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from ..config import LLMConfig, llm_identity, resolve_device
from ..evaluate import kgqa_scores, normalize
from ..g_retriever.model import GraphLLM
from ..g_retriever.train import TrainConfig
from ..gnn_rag import gold_ids, seed_positions
from ..gnn_rag.evidence import LLM_CALLS, RETRIEVERS, Evidence, GNNRAGConfig, answer_hops, collect_evidence
from ..gnn_rag.generation import (answer_examples, answer_kind, fit_lines, generate_relation_paths, ground_reply,
                                  name_index, rag_example, train_lora_llm, training_examples)
from ..gnn_rag.reasoning_paths import select_candidates
from ..graphqa import cache_key
from ..llm import load_tokenizer, release_memory, weights_identity
from ..precision import dtype_name, resolve_dtype
from ..published import PAPER_COLUMN, PAPER_GNN_RAG, PAPER_HOPS_F1
from ..report.results import GROUNDED
from ..runs import config_hash, frame_value, progress, read_keyed, value_frame, write_keyed
from ..stats import compare, percent_interval, signed_rank, verdict


def answer_with_evidence(key: str, ds, indices: list[int], probs: list[np.ndarray] | None, generator: GraphLLM,
                        relation_paths: list[list[tuple[str, ...]]] | None = None,
                        retrievers: tuple[str, ...] = RETRIEVERS, cfg: GNNRAGConfig = GNNRAGConfig(),
                        batch_size: int = 16) -> "pd.DataFrame":
    """Answer ``indices`` of ``ds`` with every retriever's evidence; one row per (question, retriever).

    Columns: ``dataset, retriever, index, question, prediction, answers, hops`` (shortest question-entity ->
    answer distance), the :func:`~gr_core.evaluate.kgqa_scores` fields, ``coverage`` (a gold answer is an entity of
    the evidence shown), ``input_tokens`` (chat template included), ``evidence_lines``, ``lines_dropped`` (over the
    token budget), the bad-input counts, the grounded reply and ``answer_seconds`` (the question's share of its
    batch's seconds).
    """
    unknown = set(retrievers) - set(RETRIEVERS)
    if unknown:
        raise ValueError(f"unknown retrievers {sorted(unknown)}; choose from {RETRIEVERS}")
    tok, t = generator.tokenizer, generator.template
    per_q = []
    for k, i in enumerate(progress(indices, desc=f"{key} evidence")):
        g = ds.graph(i)
        seeds, seed_pos = seed_positions(g)
        ev = collect_evidence(ds, i, probs[k] if probs is not None else None,
                              relation_paths[k] if relation_paths is not None else None, retrievers, cfg, g)
        names = g.nodes.node_attr.astype(str).tolist()
        cands = [names[c] for c, _ in select_candidates(probs[k], seed_pos, cfg.eps)] if probs is not None else []
        per_q.append((ev, answer_hops(g, seeds, gold_ids(g, ds.records[i].answers, seeds)), name_index(names), cands,
                      name_index(cands), {names[s] for s in seed_pos}))  # names indexed once per question
    examples, info = [], []
    for r in retrievers:
        for i, (ev, hops, names, cands, cand_index, seed_names) in zip(indices, per_q):
            rec = ds.records[i]
            e = ev[r]
            kept, dropped = fit_lines(e.lines, cfg.evidence_tokens, tok)
            examples.append(rag_example(str(rec.graph_id), rec.question, None if r == "none" else kept, rec.answers))
            gold = {normalize(a) for a in rec.answers}
            shown = Evidence(kept).names()
            info.append({"dataset": key, "retriever": r, "index": int(i), "question": rec.question, "hops": hops,
                         "coverage": float(bool(gold & {normalize(n) for n in shown})), "evidence_lines": len(kept),
                         "lines_dropped": dropped, "missing_seed": e.missing_seed, "no_path": e.no_path,
                         "empty_candidates": bool(e.empty_candidates), "ungrounded": bool(e.ungrounded),
                         "gnn_top": cands[0] if cands else None,
                         "gold_in_candidates": bool(gold & {normalize(c) for c in cands}),
                         "_names": (names, cand_index, [n for n in shown if n not in seed_names])})
    generator.tokenize(examples)
    answers, seconds = [""] * len(examples), [0.0] * len(examples)
    for adapters in (False, True):  # the retrievers' prompts in one length-sorted pass; "none" without the adapters
        part = [k for k, row in enumerate(info) if (row["retriever"] != "none") == adapters]
        if part:
            got, secs = answer_examples(generator, [examples[k] for k in part], batch_size, adapters=adapters,
                                        desc=f"{key} {'evidence' if adapters else 'none'}")
            for k, a, sec in zip(part, got, secs):
                answers[k], seconds[k] = a, sec
    rows = []
    for ex, a, sec, row in zip(examples, answers, seconds, info):
        names, cands, shown = row.pop("_names")
        grounded, fell_back = ground_reply(a, shown, row["gnn_top"])
        row.update(prediction=a, answers=ex.answers, answer_seconds=sec,
                   input_tokens=len(t.prefix) + ex.num_prompt_tokens + len(t.suffix),
                   answer_kind=answer_kind(a, ex.answers, cands, shown, names), grounded=grounded,
                   grounded_fallback=fell_back, **kgqa_scores(a, ex.answers))
        rows.append(row)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------- the whole LLM half
def _digest(arrays) -> str | None:
    """A digest of the reasoner's node probabilities (one array per question), or None."""
    if arrays is None:
        return None
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a, dtype=np.float32).tobytes() + b"|")
    return h.hexdigest()[:16]


def run_gnn_rag(results: dict, run_dir: str | Path, llm: LLMConfig = LLMConfig(), train: TrainConfig = TrainConfig(),
                cfg: GNNRAGConfig = GNNRAGConfig(), max_train: int | None = None, max_val: int | None = None,
                max_test: int | None = None, retrievers: tuple[str, ...] = RETRIEVERS, seed: int = 0,
                rog_train: TrainConfig | None = None, train_evidence: dict | None = None) -> dict:
    """Train the answer generator and the relation-path generator per dataset family, then answer every test
    question of every ``results`` entry (from :func:`gr_core.studies.gnn_rag.run_reasoner`) with every retriever.

    Args:
        results: dataset key -> reasoner result; keys of one dataset name share one generator.
        max_train, max_val: questions per dataset key for the LLM fine-tunes; max_test: test questions answered.
        train, rog_train: optimization of the answer and relation-path generators (default: the same).
        train_evidence: dataset key -> {question index: evidence lines} the answer generator trains on instead of
            the gold paths (:func:`gr_core.studies.gnn_rag.crossfit_evidence`; None: the paper's gold paths).
    A key's answers are kept as they finish, with the generators' training record; a family whose every key is
    answered loads no LLM.

    Returns:
        ``{"rows": per (question, retriever) DataFrame, "training": per family dict of histories and counts,
        "relation_paths": key -> {"indices", "paths"}}``.
    """
    run_dir = Path(run_dir)
    families: dict[str, list[str]] = {}
    for key, r in results.items():
        families.setdefault(r["ds"].name, []).append(key)
    frames, training, rel_paths_out = [], {}, {}
    needs_rog = any("rog" in r for r in retrievers)
    dtype = dtype_name(resolve_dtype(llm.dtype, resolve_device(llm.device)))  # answers in bf16 are not fp32's
    for family, keys in families.items():
        dss = [results[k]["ds"] for k in keys]
        t0 = time.perf_counter()
        tokenizer = load_tokenizer(llm)
        ev = [train_evidence[k] for k in keys] if train_evidence else None
        tr_ans, tr_rel, tr_counts = training_examples(dss, max_train, "train", tokenizer, cfg, ev)
        va_ans, va_rel, va_counts = training_examples(dss, max_val, "val", tokenizer, cfg, ev)
        build_seconds = time.perf_counter() - t0
        max_txt = cfg.evidence_tokens + 64  # instruction + "Reasoning Paths:" on top of the line budget
        tests, done = {}, {}
        for key in keys:
            r = results[key]
            n = len(r["test_indices"][:max_test or None])
            tests[key] = (r["test_indices"][:n], r["probs"][:n])
            # a key's answers are kept as they finish (keyed by everything they depend on, the reasoner's node
            # probabilities included), so a stopped notebook resumes after the last finished key
            ident = {"rows": 2, "llm": llm_identity(asdict(llm)), "weights": weights_identity(llm.model),
                     "train": asdict(train), "rog_train": asdict(rog_train or train), "cfg": asdict(cfg),
                     "max_train": max_train, "max_val": max_val, "seed": seed, "retrievers": list(retrievers),
                     "data": [cache_key(d.config) for d in dss], "indices": [int(i) for i in tests[key][0]],
                     "probs": _digest(tests[key][1]),
                     "train_evidence": config_hash(train_evidence) if train_evidence else None}
            if dtype != "float32":  # the LLM's precision here ("auto"); fp32 keeps the keys made before it mattered
                ident["llm_dtype"] = dtype
            done[key] = (ident, read_keyed(run_dir / f"{key}-answers.json", ident))
        finished = [done[key][1] for key in keys]
        if all(f is not None and f.get("training") for f in finished):  # nothing left to answer: no LLM is loaded
            # the generators as recorded (this run spent no seconds on them), each key's own relation-path time
            training[family] = {name: ({**v, "seconds": 0.0} if isinstance(v, dict) and "history" in v else v)
                                for name, v in finished[0]["training"].items() if name != "relation_path_seconds"}
            times = {k: f["relation_path_seconds"] for k, f in zip(keys, finished)
                     if f.get("relation_path_seconds") is not None}
            if times:
                training[family]["relation_path_seconds"] = times
            for key, f in zip(keys, finished):
                print(f"{key}: answers reloaded from {run_dir / f'{key}-answers.json'}", flush=True)
                frames.append(value_frame(f))
                if f["relation_paths"] is not None:
                    rel_paths_out[key] = f["relation_paths"]
            continue
        rel_info, path_seconds = {}, {}
        if needs_rog:  # the relation-path generator first, its paths for every key, then freed: one LLM at a time
            t0 = time.perf_counter()
            rog, rog_hist = train_lora_llm(tr_rel, va_rel, run_dir / f"{family}-relation-generator", llm,
                                           rog_train or train, max_txt, seed)
            rel_info = {"relation_generator": {"history": rog_hist, "train_examples": len(tr_rel),
                                               "val_examples": len(va_rel),
                                               "seconds": round(time.perf_counter() - t0, 1)}}
            for key in keys:
                finished = done[key][1]
                if finished is not None:
                    if finished["relation_paths"] is not None:
                        rel_paths_out[key] = finished["relation_paths"]
                        path_seconds[key] = finished["relation_path_seconds"]
                    continue
                t0 = time.perf_counter()
                indices = tests[key][0]
                paths = generate_relation_paths(rog, [results[key]["ds"].records[i].question for i in indices],
                                                cfg.rog_beams, train.eval_batch_size, desc=f"{key} relation paths")
                path_seconds[key] = round(time.perf_counter() - t0, 2)
                rel_paths_out[key] = {"indices": [int(i) for i in indices], "paths": paths}
            del rog
            release_memory()
        t0 = time.perf_counter()
        generator, gen_hist = train_lora_llm(tr_ans, va_ans, run_dir / f"{family}-answer-generator", llm, train,
                                             max_txt, seed)
        info = {"answer_generator": {"history": gen_hist, "train_examples": len(tr_ans), "val_examples": len(va_ans),
                                     "train_counts": tr_counts, "val_counts": va_counts,
                                     "seconds": round(build_seconds + time.perf_counter() - t0, 1)}} | rel_info
        if path_seconds:
            info["relation_path_seconds"] = path_seconds
        training[family] = info
        for key in keys:
            r, (ident, finished) = results[key], done[key]
            if finished is not None:
                print(f"{key}: answers reloaded from {run_dir / f'{key}-answers.json'}", flush=True)
                frames.append(value_frame(finished))
                continue
            rel_paths = rel_paths_out[key]["paths"] if key in rel_paths_out else None
            frame = answer_with_evidence(key, r["ds"], *tests[key], generator, rel_paths, retrievers, cfg,
                                         train.eval_batch_size)
            if "scores" in r:  # the GNN alone on the same questions (run_reasoner), for the paired claim
                alone = {int(i): sc for i, sc in zip(r["test_indices"], r["scores"])}
                frame["gnn_h1"] = [alone[i]["h1"] for i in frame["index"]]
                frame["gnn_f1"] = [alone[i]["f1"] for i in frame["index"]]
            frames.append(frame)
            write_keyed(run_dir / f"{key}-answers.json", ident, frame_value(frames[-1]) | {
                "relation_paths": rel_paths_out.get(key), "relation_path_seconds": path_seconds.get(key),
                "training": info})  # the generators' record, so a rerun with every key answered loads no LLM
        del generator
        release_memory()
    return {"rows": pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(), "training": training,
            "relation_paths": rel_paths_out}


# ---------------------------------------------------------------------- grounded answers and why the LLM loses
def with_grounded(rows: "pd.DataFrame", retrievers: tuple[str, ...] = ("gnn", "gnn+rog")) -> "pd.DataFrame":
    """``rows`` plus, named ``"<retriever> grounded"``, each of ``retrievers``' rows answered by the grounded rule
    (beyond the papers; :func:`~gr_core.gnn_rag.generation.ground_reply`), which costs no LLM call more."""
    if "grounded" not in rows:
        return rows
    extra = rows[rows.retriever.isin(retrievers)].copy()
    if not len(extra):
        return rows
    extra["retriever"] = extra.retriever + GROUNDED
    extra["prediction"] = extra.grounded.fillna("")
    scores = pd.DataFrame([kgqa_scores(p, a) for p, a in zip(extra.prediction, extra.answers)], index=extra.index)
    extra[scores.columns] = scores
    extra["answer_kind"] = None  # the free-text reply's kind; not recomputed for the grounded one
    return pd.concat([rows, extra], ignore_index=True)


def failure_table(rows: "pd.DataFrame") -> "pd.DataFrame":
    """Why the LLM half loses to its GNN: per dataset and free-text retriever, the questions with a gold answer among
    the GNN's candidates and a first reply line not gold, split (%) by what that line is
    (:func:`~gr_core.gnn_rag.generation.answer_kind`); ``gold later``: gold on a later line; ``GNN right``: the
    GNN's own top candidate answers."""
    out = []
    base = rows[~rows.retriever.str.endswith(GROUNDED) & (rows.retriever != "none")]
    for (key, r), g in base.groupby(["dataset", "retriever"], sort=False):
        lost = g[g.gold_in_candidates & (g.hit1 == 0)]
        among = int(g.gold_in_candidates.sum())
        rec = {"dataset": key, "retriever": r, "questions": len(g), "gold among candidates": among,
               "first line not gold": len(lost), "% of those": round(100 * len(lost) / max(among, 1), 1)}
        for kind in ANSWER_KINDS:
            rec[kind] = round(100 * float((lost.answer_kind == kind).mean()), 1) if len(lost) else None
        rec["gold later"] = round(100 * float(lost.hit.mean()), 1) if len(lost) else None
        if "gnn_h1" in lost:
            rec["GNN right"] = round(100 * float(lost.gnn_h1.mean()), 1) if len(lost) else None
        out.append(rec)
    return pd.DataFrame(out)


ANSWER_KINDS = ("another candidate", "evidence node", "outside the evidence", "no node", "empty")


def against_gnn(rows: "pd.DataFrame") -> "pd.DataFrame":
    """GNN-RAG's Table 2 claim per dataset and retriever built on the GNN: the LLM's Hit@1 against the GNN alone's
    H@1 on the same questions (exact McNemar), F1 against its F1 (Wilcoxon signed-rank), each with n."""
    out = []
    if "gnn_h1" not in rows:
        return pd.DataFrame(out)
    for (key, r), g in rows[rows.retriever.str.startswith("gnn")].groupby(["dataset", "retriever"], sort=False):
        h, f = compare(g.hit1.to_numpy(), g.gnn_h1.to_numpy()), signed_rank(g.f1.to_numpy(), g.gnn_f1.to_numpy())
        out.append({"dataset": key, "retriever": r, "questions": len(g), "Hit@1": round(100 * h["score_a"], 1),
                    "GNN H@1": round(100 * h["score_b"], 1), "LLM only right": h["a_only"],
                    "GNN only right": h["b_only"], "p (Hit@1)": float(f"{h['p']:.3g}"),
                    "F1": round(100 * f["score_a"], 1), "GNN F1": round(100 * f["score_b"], 1),
                    "p (F1)": float(f"{f['p']:.3g}"), "verdict (Hit@1)": verdict(h["diff"], h["p"])})
    return pd.DataFrame(out)


# ---------------------------------------------------------------------- tables
def training_table(training: dict) -> "pd.DataFrame":
    """One row per LoRA fine-tune of :func:`run_gnn_rag`'s ``training``: examples, epochs, final val loss, the
    epochs' own seconds (from the history: a resumed run still states what training cost), and the seconds this run
    spent."""
    return pd.DataFrame([{"family": family, "model": name, "train examples": v["train_examples"],
                          "val examples": v["val_examples"], "epochs": len(v["history"]),
                          "final val loss": round(v["history"][-1]["val_loss"], 3) if v["history"] else None,
                          "epoch seconds": round(sum(e["train_seconds"] + e["val_seconds"] for e in v["history"]), 1),
                          "seconds": v["seconds"]}
                         for family, info in training.items() for name, v in info.items()
                         if isinstance(v, dict) and "history" in v])


def one_question(rows: "pd.DataFrame", dataset: str, position: int = 0) -> "pd.DataFrame":
    """Every retriever's evidence size, coverage, prompt tokens and answer for one test question of ``dataset``."""
    sub = rows[rows.dataset == dataset]
    index = sub["index"].drop_duplicates().iloc[position]
    return sub[sub["index"] == index][["retriever", "evidence_lines", "coverage", "input_tokens", "prediction",
                                       "answers", "hit"]]


def _hits(g: "pd.DataFrame", digits: int) -> dict:
    """Hit, Hit@1 with its Wilson 95% interval, and F1 over the questions of ``g``, in %."""
    low, high = percent_interval(float(g.hit1.sum()), len(g))
    return {"Hit": round(100 * g.hit.mean(), digits), "Hit@1": round(100 * g.hit1.mean(), digits), "Hit@1 low": low,
            "Hit@1 high": high, "F1": round(100 * g.f1.mean(), digits)}


def retriever_table(rows: "pd.DataFrame") -> "pd.DataFrame":
    """One row per (dataset, retriever): Hit, Hit@1 (with its Wilson 95% interval), F1 and bounded F1, coverage (%),
    median input tokens, LLM calls, mean evidence lines, the bad-input counts, and the paper's numbers beside them."""
    out = []
    for (key, r), g in rows.groupby(["dataset", "retriever"], sort=False):
        paper = PAPER_GNN_RAG.get((key, r), {})  # none for the grounded rows: the papers have no such setting
        out.append({"dataset": key, "retriever": r, "questions": len(g), **_hits(g, 2),
                    "F1 bounded": round(100 * g.f1_bounded.mean(), 2), "coverage %": round(100 * g.coverage.mean(), 1),
                    "median tokens": float(g.input_tokens.median()), "LLM calls": LLM_CALLS[r.split()[0]],
                    "mean lines": round(g.evidence_lines.mean(), 1), "lines over budget": int(g.lines_dropped.sum()),
                    "missing question entities": int(g.missing_seed.sum()),
                    "candidates without path": int(g.no_path.sum()),
                    "empty candidate sets": int(g.empty_candidates.sum()), "ungrounded (RoG)": int(g.ungrounded.sum()),
                    "s / answer": round(g.answer_seconds.mean(), 3),
                    "paper Hit": paper.get("Hit"), "paper Hit@1": paper.get("Hit@1"), "paper F1": paper.get("F1"),
                    "paper tokens": paper.get("tokens"), "paper source": paper.get("source", "")})
    return pd.DataFrame(out)


def hop_table(rows: "pd.DataFrame") -> "pd.DataFrame":
    """Hit / Hit@1 (with its Wilson 95% interval) / F1 and coverage (%) by the question-entity -> answer distance
    (``unreachable``: no gold answer reachable), per dataset and retriever, with GNN-RAG Table 8's WebQSP F1."""
    df = rows.assign(hop=rows.hops.map(lambda h: "unreachable" if pd.isna(h) else str(int(h))))
    out = []
    for (key, hop, r), g in df.groupby(["dataset", "hop", "retriever"], sort=True):
        paper = PAPER_HOPS_F1.get((r, int(hop))) if PAPER_COLUMN.get(key) == "webqsp" and hop.isdigit() else None
        out.append({"dataset": key, "hops": hop, "retriever": r, "questions": len(g), **_hits(g, 1),
                    "coverage %": round(100 * g.coverage.mean(), 1), "paper F1": paper})
    return pd.DataFrame(out)


def metrics_record(rows: "pd.DataFrame", gnn_only: "pd.DataFrame | None" = None) -> dict:
    """``metrics.json``: per dataset and retriever :func:`retriever_table`'s headline numbers (and the GNN alone's)."""
    table = retriever_table(rows)
    out: dict = {}
    for rec in table.to_dict("records"):
        out.setdefault(rec["dataset"], {})[rec["retriever"]] = {
            k: rec[k] for k in ("questions", "Hit", "Hit@1", "F1", "F1 bounded", "coverage %", "median tokens",
                                "LLM calls", "missing question entities", "candidates without path",
                                "empty candidate sets", "ungrounded (RoG)")}
    if gnn_only is not None:
        for rec in gnn_only.to_dict("records"):
            out.setdefault(rec["dataset"], {})["gnn_only"] = {"Hit@1": rec["h1"], "F1": rec["f1"],
                                                              "questions": rec["n"]}
    return out
