"""Metrics exactly as the references compute them (GR code ``src/utils/evaluate.py``; GNN-RAG
``llm/src/qa_prediction/evaluate_results.py``; SPEC.md §1.11, §5.8), plus strict variants."""
from __future__ import annotations

import re
import string

import numpy as np

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

    The prediction is split into lines (a string) or taken as given (a list).

    Returns:
        ``hit`` (a gold anywhere), ``hit1`` (a gold in the first line), ``acc`` = ``recall`` (golds found / golds),
        ``precision`` (golds found / lines: *unbounded*, as the reference), ``f1`` (from those two);
        strict: ``exact_hit`` (some line equals some gold after normalization), ``precision_bounded``
        (lines matching a gold / lines) and ``f1_bounded``.
    """
    lines = prediction.split("\n") if isinstance(prediction, str) else list(prediction)
    joined = " ".join(lines)
    found = sum(answer_matches(joined, a) for a in answers)
    recall = found / len(answers) if answers else 0.0
    precision = found / len(lines) if lines else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    gold_norm = {normalize(a) for a in answers}
    good_lines = sum(any(answer_matches(line, a) for a in answers) for line in lines)
    p_b = good_lines / len(lines) if lines else 0.0
    return {"hit": float(found > 0), "hit1": float(bool(lines) and any(answer_matches(lines[0], a) for a in answers)),
            "acc": recall, "recall": recall, "precision": precision, "f1": f1,
            "exact_hit": float(any(normalize(line) in gold_norm for line in lines)), "precision_bounded": p_b,
            "f1_bounded": 2 * p_b * recall / (p_b + recall) if p_b + recall else 0.0}


def kgqa_report(predictions: list, answers: list[list[str]]) -> dict[str, float]:
    """Mean of :func:`kgqa_scores` over questions, in percent (the papers' scale)."""
    rows = [kgqa_scores(p, a) for p, a in zip(predictions, answers)]
    return {k: 100 * float(np.mean([r[k] for r in rows])) for k in rows[0]} if rows else {}
