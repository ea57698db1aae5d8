"""Metrics exactly as the references compute them (GR code ``src/utils/evaluate.py``; GNN-RAG
``llm/src/qa_prediction/evaluate_results.py``; docs/method.md §1.6, §3.4), plus strict variants."""
from __future__ import annotations

import json
import re
import string

import numpy as np
import pandas as pd

from .paths import data_file
from .prompts import KGQA_DATASETS, SCENE_GRAPH_DATASETS

_STANCE = re.compile(r"support|Support|Counter|counter")


def explagraphs_correct(prediction: str, label: str) -> bool:
    """ExplaGraphs accuracy: the first ``support``/``counter`` match, lowercased, equals the label."""
    match = _STANCE.search(prediction)
    return bool(match) and match.group(0).lower() == label.strip().lower()


# ------------------------------------------------------------------ KGQA answers (WebQSP, MetaQA)
# GR code src/utils/evaluate.py and RoG / GNN-RAG llm/src/qa_prediction/evaluate_results.py share one
# normalization and a *substring* match: a gold answer "matches" when its normalized form occurs anywhere
# in the normalized prediction (no word boundary: "us" matches inside "business").
_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PAD = re.compile(r"\b(<pad>)\b")


def normalize(text: str) -> str:
    """Lowercase, drop punctuation, drop a/an/the, collapse whitespace (the references' normalization)."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCT)
    text = _PAD.sub(" ", _ARTICLES.sub(" ", text))
    return " ".join(text.split())


def answer_matches(prediction: str, gold: str) -> bool:
    """The references' match: normalized ``gold`` is a substring of normalized ``prediction``."""
    return normalize(gold) in normalize(prediction)


def kgqa_scores(prediction: str | list[str], answers: list[str]) -> dict[str, float]:
    """Per-question scores, exactly as GNN-RAG's evaluator, plus strict variants.

    The prediction is stripped and split into lines (a string; as the reference, so a trailing newline is not an
    empty answer) or taken as given (a list).

    Returns:
        ``hit`` (a gold anywhere), ``hit1`` (a gold in the first line), ``acc`` = ``recall`` (golds found / golds),
        ``precision`` (golds found / lines: *unbounded*, as the reference), ``f1`` (from those two);
        strict: ``exact_hit`` (some line equals some gold after normalization), ``precision_bounded``
        (lines matching a gold / lines) and ``f1_bounded``.
    """
    lines = prediction.strip().split("\n") if isinstance(prediction, str) else list(prediction)
    # each text normalized once (the references normalize inside every comparison: the same matches)
    golds = [normalize(a) for a in answers]
    norm_lines = [normalize(line) for line in lines]
    joined = normalize(" ".join(lines))
    found = sum(g in joined for g in golds)
    recall = found / len(answers) if answers else 0.0
    precision = found / len(lines) if lines else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    good_lines = sum(any(g in line for g in golds) for line in norm_lines)
    p_b = good_lines / len(lines) if lines else 0.0
    return {"hit": float(found > 0), "hit1": float(bool(lines) and any(g in norm_lines[0] for g in golds)),
            "acc": recall, "recall": recall, "precision": precision, "f1": f1,
            "exact_hit": float(bool(set(norm_lines) & set(golds))), "precision_bounded": p_b,
            "f1_bounded": 2 * p_b * recall / (p_b + recall) if p_b + recall else 0.0}


def kgqa_report(predictions: list, answers: list[list[str]]) -> dict[str, float]:
    """Mean of :func:`kgqa_scores` over questions, in percent (the papers' scale)."""
    rows = [kgqa_scores(p, a) for p, a in zip(predictions, answers)]
    return {k: 100 * float(np.mean([r[k] for r in rows])) for k in rows[0]} if rows else {}


# ------------------------------------------------------------------ scene graphs (GQA, CLEVR)
def scene_graph_correct(prediction: str, label: str) -> bool:
    """SceneGraphs accuracy as the GR code computes it: the raw label is a case-sensitive substring of the answer."""
    return label in prediction


def task_scores(dataset: str, prediction: str, answers: list[str]) -> dict[str, float]:
    """Per-question scores for any dataset; ``score`` is the dataset's Table 3 metric (ExplaGraphs: first-match
    accuracy; scene graphs: substring accuracy; KGQA: Hit), ``exact`` (not KGQA) the normalized answer equal to the
    label."""
    if dataset == "explagraphs":
        ok = explagraphs_correct(prediction, answers[0])
        # "valid": the answer parses as one label (a trained model should answer in the expected form)
        return {"score": float(ok), "accuracy": float(ok),
                "exact": float(normalize(prediction) == normalize(answers[0])),
                "valid": float(normalize(prediction) in ("support", "counter"))}
    if dataset in SCENE_GRAPH_DATASETS:
        ok = scene_graph_correct(prediction, answers[0])
        return {"score": float(ok), "accuracy": float(ok),
                "exact": float(normalize(prediction) == normalize(answers[0]))}
    if dataset in KGQA_DATASETS:
        # G-Retriever generates "a|b|c" on one line; GNN-RAG's evaluator splits lines. Split on both.
        s = kgqa_scores(prediction.replace("|", "\n").split("\n"), answers)
        return {"score": s["hit"], **s}
    raise ValueError(f"no metric for dataset {dataset!r}")


def task_report(dataset: str, predictions: list[str], answers: list[list[str]]) -> dict[str, float]:
    """Mean of :func:`task_scores` (fractions for accuracy datasets, percent for KGQA, as the papers print)."""
    rows = [task_scores(dataset, p, a) for p, a in zip(predictions, answers)]
    if not rows:
        return {}
    scale = 100.0 if dataset in KGQA_DATASETS else 1.0
    return {k: scale * float(np.mean([r[k] for r in rows])) for k in rows[0]} | {"n": len(rows)}


# GNN-RAG's published WebQSP scores (GNN-RAG paper Table 2; the committed *_eval_result.txt files).
REFERENCE_PREDICTIONS = {
    "GNN-RAG": ("kgqa-gnn-rag_rearev_sbert_predictions.jsonl", {"hit": 85.69, "hit1": 80.59, "f1": 71.28}),
    "GNN-RAG + RA": ("kgqa-gnn-rag-ra_rearev_sbert_detailed_eval_result.jsonl",
                     {"hit": 90.72, "hit1": 82.80, "f1": 73.49}),
}


def reference_metric_check():
    """Our KGQA metrics on GNN-RAG's published WebQSP predictions (``webqsp/reference_results``) beside the published
    scores, with the strict variants and what the unbounded precision does to F1: a DataFrame, a row per file."""
    rows = []
    for name, (file, paper) in REFERENCE_PREDICTIONS.items():
        with open(data_file("webqsp", "reference_results", file), encoding="utf-8") as fh:
            preds = [json.loads(line) for line in fh]
        scores = [kgqa_scores(p["prediction"], p["ground_truth"]) for p in preds]
        r = kgqa_report([p["prediction"] for p in preds], [p["ground_truth"] for p in preds])
        rows.append({"predictions": name, "n": len(preds), "Hit": round(r["hit"], 2), "paper Hit": paper["hit"],
                     "Hit@1": round(r["hit1"], 2), "paper Hit@1": paper["hit1"], "F1": round(r["f1"], 2),
                     "paper F1": paper["f1"], "strict exact Hit": round(r["exact_hit"], 2),
                     "F1 (bounded precision)": round(r["f1_bounded"], 2),
                     "rows with precision > 1": sum(s["precision"] > 1 for s in scores),
                     "max precision": round(max(s["precision"] for s in scores), 2)})
    return pd.DataFrame(rows)
