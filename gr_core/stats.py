"""Uncertainty and paired comparisons for every reported score.

- :func:`wilson_interval`: the 95% interval of an accuracy / Hit rate (Wilson score interval; it stays inside
  [0, 1] and is honest at small n, unlike the normal approximation).
- :func:`mcnemar_exact`: two systems scored right/wrong on the *same* questions; the exact two-sided McNemar
  test (a binomial test on the discordant questions).
- :func:`paired_bootstrap`: the same for a graded score (F1): a bootstrap over questions of the mean difference.
- :func:`verdict`: ``reproduced`` only when the difference goes the paper's way and is significant at 5%,
  ``contradicted`` when significant the other way, ``not significant`` otherwise.
- :func:`compare`: both scores, n, the difference and p for two aligned per-question score lists.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

ALPHA = 0.05
Z95 = 1.959963984540054  # the standard normal's 97.5% quantile


def wilson_interval(successes: int | float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of ``successes / n`` (fractions); ``(nan, nan)`` when ``n == 0``.

    >>> [round(v, 4) for v in wilson_interval(5, 10)]
    [0.2366, 0.7634]
    """
    if n <= 0:
        return float("nan"), float("nan")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def mcnemar_exact(a: Sequence[float], b: Sequence[float]) -> dict:
    """Exact two-sided McNemar test of two systems' right (1) / wrong (0) answers to the same questions.

    Args:
        a, b: per-question correctness, aligned (question i of ``a`` is question i of ``b``).
    Returns:
        ``{"n", "a_only", "b_only", "p"}``: questions only ``a`` got right, only ``b`` got right, and the p-value
        (1.0 when no question is discordant).
    """
    a, b = np.asarray(a, dtype=float) > 0.5, np.asarray(b, dtype=float) > 0.5
    if a.shape != b.shape:
        raise ValueError(f"mcnemar_exact: the two systems answered different numbers of questions ({a.size} vs {b.size})")
    a_only, b_only = int(np.sum(a & ~b)), int(np.sum(~a & b))
    k, m = min(a_only, b_only), a_only + b_only
    # two-sided exact binomial test with p = 1/2: twice the smaller tail, capped at 1
    p = 1.0 if m == 0 else min(1.0, 2 * sum(math.comb(m, i) for i in range(k + 1)) / 2 ** m)
    return {"n": int(a.size), "a_only": a_only, "b_only": b_only, "p": p}


def paired_bootstrap(a: Sequence[float], b: Sequence[float], num_samples: int = 10_000, seed: int = 0) -> dict:
    """Paired bootstrap over questions of ``mean(a) - mean(b)`` (graded scores such as F1).

    Returns:
        ``{"n", "diff", "ci_low", "ci_high", "p"}``: the observed difference, its 95% percentile interval, and
        the two-sided p-value (twice the share of resampled differences on the far side of zero, capped at 1).
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise ValueError(f"paired_bootstrap: the two systems answered different numbers of questions ({a.size} vs {b.size})")
    d = a - b
    if d.size == 0:
        return {"n": 0, "diff": float("nan"), "ci_low": float("nan"), "ci_high": float("nan"), "p": float("nan")}
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, d.size, size=(num_samples, d.size))].mean(axis=1)
    if np.all(d == 0):
        p = 1.0
    else:
        p = min(1.0, 2 * min(np.mean(means <= 0), np.mean(means >= 0)))
    low, high = np.quantile(means, [0.025, 0.975])
    return {"n": int(d.size), "diff": float(d.mean()), "ci_low": float(low), "ci_high": float(high), "p": float(p)}


def verdict(diff: float, p: float, alpha: float = ALPHA) -> str:
    """A paper claim "A beats B" judged on ``diff = score(A) - score(B)`` and its paired p-value."""
    if p is None or not np.isfinite(p) or not np.isfinite(diff):
        return "not testable here"
    if p < alpha and diff > 0:
        return "reproduced"
    if p < alpha and diff < 0:
        return "contradicted"
    return "not significant"


def compare(a: Sequence[float], b: Sequence[float], binary: bool = True) -> dict:
    """Both mean scores, n, the difference and the paired p-value (exact McNemar when ``binary``, else bootstrap);
    with McNemar also the discordant counts ``a_only`` / ``b_only`` (questions only ``a`` / only ``b`` got right).

    Scores are returned on the lists' own scale (pass fractions or 0/1 values).
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    test = mcnemar_exact(a, b) if binary else paired_bootstrap(a, b)
    counts = {k: test[k] for k in ("a_only", "b_only")} if binary else {}
    return {"score_a": float(a.mean()) if a.size else float("nan"), "score_b": float(b.mean()) if b.size else float("nan"),
            "n": int(a.size), "diff": float(a.mean() - b.mean()) if a.size else float("nan"), "p": test["p"],
            "test": "exact McNemar" if binary else "paired bootstrap", **counts}
