"""Uncertainty and paired comparisons for every reported score (docs/method.md).

Intervals: :func:`wilson_interval` (accuracy, Hit). Two systems on the same questions: :func:`compare` (exact
McNemar on 0/1 scores, a sign-flip permutation test on graded ones) and :func:`verdict`. Over seeds:
:func:`compare_seeds` (:func:`seed_bootstrap` for the verdict, :func:`mcnemar_cmh` beside it). Power:
:func:`mcnemar_n_for_power`.
"""
from __future__ import annotations

import math
from math import erfc, sqrt
from statistics import NormalDist
from typing import Sequence

import numpy as np

ALPHA = 0.05
Z95 = 1.959963984540054  # the standard normal's 97.5% quantile
NAN = float("nan")


def wilson_interval(successes: int | float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of ``successes / n`` (fractions); ``(nan, nan)`` when ``n == 0``.

    >>> [round(v, 4) for v in wilson_interval(5, 10)]
    [0.2366, 0.7634]
    """
    if n <= 0 or not math.isfinite(successes):  # a NaN count is no count: (0, 1) would pass for "anything"
        return NAN, NAN
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # exactly 0 with no success and 1 with all (the formula leaves rounding residue of ~1e-16 there)
    return (0.0 if successes <= 0 else max(0.0, centre - half)), (1.0 if successes >= n else min(1.0, centre + half))


def percent_interval(successes: int | float, n: int, digits: int = 1) -> tuple[float, float]:
    """:func:`wilson_interval` in percent, rounded to ``digits`` (how the KGQA tables print Hit).

    >>> percent_interval(5, 10)
    (23.7, 76.3)
    """
    low, high = wilson_interval(successes, n)
    return round(100 * low, digits), round(100 * high, digits)


def _mcnemar_p(a_only: int, b_only: int) -> float:
    """Two-sided exact binomial test of the discordant counts with p = 1/2: twice the smaller tail, capped at 1."""
    k, m = min(a_only, b_only), a_only + b_only
    return 1.0 if m == 0 else min(1.0, 2 * sum(math.comb(m, i) for i in range(k + 1)) / 2 ** m)


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
        raise ValueError("mcnemar_exact: the two systems answered different numbers of questions "
                         f"({a.size} vs {b.size})")
    a_only, b_only = int(np.sum(a & ~b)), int(np.sum(~a & b))
    return {"n": int(a.size), "a_only": a_only, "b_only": b_only, "p": _mcnemar_p(a_only, b_only)}


def bootstrap_p(means: np.ndarray) -> float:
    """Two-sided bootstrap p of "the difference is 0": twice the share of resamples on the far side of zero, each
    share ``(k + 1) / (B + 1)`` (Davison & Hinkley 1997, §4.4: never 0), capped at 1.

    >>> bootstrap_p(np.ones(9999))  # every resample on one side: the smallest p 9,999 resamples can give
    0.0002
    """
    b = len(means)
    return float(min(1.0, 2 * (min(np.sum(means <= 0), np.sum(means >= 0)) + 1) / (b + 1)))


def total_reduction(before: Sequence[float], after: Sequence[float], num_samples: int = 10_000, seed: int = 0
                    ) -> dict:
    """How much smaller ``after``'s total is than ``before``'s, in % (an epoch's step seconds with and without
    retrieval), with a 95% bootstrap interval and p of "no reduction". Each side is resampled on its own (the two
    sides batch the same questions differently: no pairs); the caller sets a minimum of items a side.

    Returns:
        ``{"reduction_%", "ci_low", "ci_high", "p", "n_before", "n_after"}``; NaN but the counts with an empty side,
        a non-finite or negative item, or a ``before`` total of 0.
    """
    b, a = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    out = {"reduction_%": NAN, "ci_low": NAN, "ci_high": NAN, "p": NAN, "n_before": int(b.size), "n_after": int(a.size)}
    valid = b.size and a.size and np.isfinite(b).all() and np.isfinite(a).all() and (b >= 0).all() and (a >= 0).all()
    if not valid or (b > 0).sum() == 0:
        return out
    rng = np.random.default_rng(seed)
    totals_b = b[rng.integers(0, b.size, (num_samples, b.size))].sum(axis=1)
    totals_a = a[rng.integers(0, a.size, (num_samples, a.size))].sum(axis=1)
    keep = totals_b > 0  # a resample of only 0-second steps has no ratio
    reductions = 100 * (1 - totals_a[keep] / totals_b[keep])
    low, high = np.quantile(reductions, [0.025, 0.975])
    return {**out, "reduction_%": float(100 * (1 - a.sum() / b.sum())), "ci_low": float(low), "ci_high": float(high),
            "p": bootstrap_p(reductions)}


def signflip_p(d, num_samples: int = 10_000, seed: int = 0, exact_upto: int = 16) -> float:
    """Two-sided sign-flip permutation p of "a and b are exchangeable on every question" (paired differences).

    Args:
        d: ``(N,)`` per-question differences ``a - b``, or ``(S, N)`` per seed and question: a question's seeds are
            flipped together, so a question asked in S seeds is one unit, not S.
    Returns:
        The share of sign patterns whose ``|sum|`` reaches the observed one, exact over the ``2^m`` patterns of the
        ``m`` non-zero differences up to ``exact_upto``, else of ``num_samples`` random ones (never below
        ``2^(1 - m)``); 1 when no question differs, NaN for non-finite input.

    >>> signflip_p([1.0, 1.0]), signflip_p([0.9] * 5 + [-0.1] * 40) > 0.5
    (0.5, True)
    """
    t = np.asarray(d, dtype=float)
    t = t.sum(axis=0) if t.ndim == 2 else t.ravel()
    if not np.all(np.isfinite(t)):
        return NAN
    t = t[t != 0]
    m = t.size
    if m == 0:
        return 1.0
    # reordered float sums differ in the last bits: a pattern within rounding of the observed |sum| is a tie
    observed = abs(t.sum()) - 1e-9 * np.abs(t).sum()
    if m <= exact_upto:
        signs = 1.0 - 2 * ((np.arange(2 ** m)[:, None] >> np.arange(m)) & 1)  # (2^m, m): every pattern
        return float(np.mean(np.abs(signs @ t) >= observed))
    rng = np.random.default_rng(seed)
    k = 0
    for start in range(0, num_samples, 1000):  # chunks keep the (chunk, m) sign draw small
        signs = np.where(rng.random((min(1000, num_samples - start), m)) < 0.5, -1.0, 1.0)
        k += int(np.sum(np.abs(signs @ t) >= observed))
    return float(max((k + 1) / (num_samples + 1), 2.0 ** (1 - m)))


def paired_bootstrap(a: Sequence[float], b: Sequence[float], num_samples: int = 10_000, seed: int = 0) -> dict:
    """Paired bootstrap over questions of ``mean(a) - mean(b)`` (graded scores such as F1).

    Args:
        a, b: ``(N,)`` per-question scores, aligned.
    Returns:
        ``{"n", "diff", "ci_low", "ci_high", "p"}``: the observed difference, its 95% percentile interval, and the
        two-sided p of :func:`signflip_p` (a bootstrap p has the floor ``2 / (B + 1)`` whatever n: two questions both
        won read as p = 0.0002, where the sign flip, like McNemar, says 0.5).
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape:
        raise ValueError("paired_bootstrap: the two systems answered different numbers of questions "
                         f"({a.size} vs {b.size})")
    d = a - b
    if d.size == 0:
        return {"n": 0, "diff": NAN, "ci_low": NAN, "ci_high": NAN, "p": NAN}
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, d.size, size=(num_samples, d.size))].mean(axis=1)
    p = signflip_p(d, num_samples, seed)
    low, high = np.quantile(means, [0.025, 0.975])
    return {"n": int(d.size), "diff": float(d.mean()), "ci_low": float(low), "ci_high": float(high), "p": float(p)}


def _mean(x: np.ndarray) -> float:
    return float(x.mean()) if x.size else NAN


def signed_rank(a: Sequence[float], b: Sequence[float]) -> dict:
    """Wilcoxon's signed-rank test of paired graded scores (F1 per question), exact for small n.

    Args:
        a, b: ``(N,)`` per-question scores, aligned (on the lists' own scale).
    Returns:
        ``{"n", "score_a", "score_b", "diff", "rank_biserial", "p", "test"}``: ``diff`` is the mean of ``a - b``;
        ``rank_biserial`` is ``(R+ - R-) / (R+ + R-)`` over the non-zero differences' ranks, in [-1, 1]: the test's
        own direction, which a verdict must take, since the mean can point the other way (5 gains of 0.9 against 40
        losses of 0.1: mean +0.011, yet the test finds ``a`` lower). p = 1 when every pair is equal, NaN when n = 0.
    """
    from scipy.stats import rankdata, wilcoxon  # noqa: PLC0415 deferred: importing scipy.stats takes ~1.3 s (measured here)

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"signed_rank: expected two aligned per-question lists, got shapes {a.shape} and {b.shape}")
    d = a - b
    nz = d[d != 0]  # Wilcoxon drops zero differences (zero_method="wilcox"); the rank sums follow it
    ranks = rankdata(np.abs(nz))
    rb = float((ranks[nz > 0].sum() - ranks[nz < 0].sum()) / ranks.sum()) if nz.size else 0.0
    p = float(wilcoxon(d).pvalue) if nz.size else (1.0 if d.size else NAN)
    return {"n": int(d.size), "score_a": _mean(a), "score_b": _mean(b), "diff": _mean(d),
            "rank_biserial": rb if d.size else NAN, "p": p, "test": "Wilcoxon signed-rank"}


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
    """Both mean scores (on the lists' own scale), n, the difference and the paired p (exact McNemar when
    ``binary``, with the discordant counts ``a_only`` / ``b_only``; else a sign flip)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    test = mcnemar_exact(a, b) if binary else paired_bootstrap(a, b)
    counts = {k: test[k] for k in ("a_only", "b_only")} if binary else {}
    return {"score_a": _mean(a), "score_b": _mean(b), "n": int(a.size),
            "diff": float(a.mean() - b.mean()) if a.size else NAN, "p": test["p"],
            "test": "exact McNemar" if binary else "paired sign-flip", **counts}


# ---------------------------------------------------------------------- over seeds
def _as_matrices(a, b, name: str) -> tuple[np.ndarray, np.ndarray]:
    """``a`` and ``b`` as ``(seeds, questions)`` float matrices of one shape (a 1-d list is one seed)."""
    out = []
    for x, side in ((a, "a"), (b, "b")):
        m = np.asarray(x, dtype=float)
        m = m[None, :] if m.ndim == 1 else m
        if m.ndim != 2:
            raise ValueError(f"{name} {side}: expected (seeds, questions) scores, got shape {m.shape}")
        out.append(m)
    if out[0].shape != out[1].shape:
        raise ValueError(f"{name}: shapes differ ({out[0].shape} vs {out[1].shape}): the two systems scored different "
                         "seeds or questions")
    return out[0], out[1]


def mcnemar_cmh(a, b) -> dict:
    """Per-seed McNemar tables combined into one test (Cochran-Mantel-Haenszel for 1:1 matched pairs: McNemar's on
    the discordant counts summed over seeds), exact, with the continuity-free chi-square p beside it.

    Args:
        a, b: ``(S, N)`` right (1) / wrong (0) per seed and question, seed s of ``a`` paired with seed s of ``b``.
    Returns:
        ``{"seeds", "n", "a_only", "b_only", "p", "p_chi2"}`` with the counts summed over seeds.
    """
    a, b = (m > 0.5 for m in _as_matrices(a, b, "mcnemar_cmh"))
    a_only, b_only = int(np.sum(a & ~b)), int(np.sum(~a & b))
    m = a_only + b_only
    chi2 = (a_only - b_only) ** 2 / m if m else 0.0
    return {"seeds": int(a.shape[0]), "n": int(a.shape[1]), "a_only": a_only, "b_only": b_only,
            "p": _mcnemar_p(a_only, b_only), "p_chi2": float(erfc(sqrt(chi2 / 2))) if m else 1.0}


def seed_bootstrap(a, b, num_samples: int = 10_000, seed: int = 0) -> dict:
    """Two-level paired bootstrap over seeds and questions of the difference in mean score (method.md).

    Each resample draws S seed pairs and N questions with replacement, the same questions for every drawn seed; ``p``
    is the larger of the bootstrap's and :func:`signflip_p`'s. With one seed this is :func:`paired_bootstrap`.

    Args:
        a, b: ``(S, N)`` per-seed, per-question scores (0/1 or graded), seed s of ``a`` paired with seed s of ``b``.
    Returns:
        ``{"seeds", "n", "diff", "ci_low", "ci_high", "p"}``.
    """
    a, b = _as_matrices(a, b, "seed_bootstrap")
    num_seeds, n = a.shape
    if num_seeds == 1:
        return {"seeds": 1, **paired_bootstrap(a[0], b[0], num_samples=num_samples, seed=seed)}
    d = (a - b).astype(np.float32)
    if n == 0:
        return {"seeds": num_seeds, "n": 0, "diff": NAN, "ci_low": NAN, "ci_high": NAN, "p": NAN}
    rng = np.random.default_rng(seed)
    means = np.empty(num_samples)
    for start in range(0, num_samples, 1000):  # chunks keep the (S, chunk, N) draw small
        k = min(1000, num_samples - start)
        per_seed = d[:, rng.integers(0, n, size=(k, n))].mean(axis=2)          # (S, k): each seed, same questions
        pick = rng.integers(0, num_seeds, size=(k, num_seeds))                  # (k, S): seeds drawn
        means[start:start + k] = per_seed[pick, np.arange(k)[:, None]].mean(axis=1)
    p = 1.0 if np.all(d == 0) else max(bootstrap_p(means), signflip_p(a - b, num_samples, seed))
    low, high = np.quantile(means, [0.025, 0.975])
    return {"seeds": num_seeds, "n": int(n), "diff": float(d.mean()), "ci_low": float(low), "ci_high": float(high),
            "p": float(p)}


def compare_seeds(a, b, binary: bool = True) -> dict:
    """Two systems over seeds on the same questions: per-seed and mean scores, the per-seed spread, and the test.

    The verdict's p is :func:`seed_bootstrap`'s (with one seed :func:`compare`'s); beside it ``p_cmh``
    (:func:`mcnemar_cmh`, 0/1 scores only) and ``p_seeds`` (:func:`over_seeds`).
    """
    a, b = _as_matrices(a, b, "compare_seeds")
    seeds = a.shape[0]
    if seeds == 1:
        out = compare(a[0], b[0], binary=binary)
    else:
        boot = seed_bootstrap(a, b)
        out = {"score_a": float(a.mean()), "score_b": float(b.mean()), "n": int(a.shape[1]), "diff": boot["diff"],
               "p": boot["p"], "test": f"paired bootstrap over seeds and questions, {seeds} seeds, sign-flip floor",
               "ci_low": boot["ci_low"], "ci_high": boot["ci_high"]}
    per_a, per_b = a.mean(axis=1), b.mean(axis=1)
    if seeds > 1:
        out["p_seeds"] = over_seeds(per_a, per_b)["p"]
    out.update(seeds=seeds, scores_a=[float(v) for v in per_a], scores_b=[float(v) for v in per_b],
               std_a=float(per_a.std(ddof=1)) if seeds > 1 else NAN,
               std_b=float(per_b.std(ddof=1)) if seeds > 1 else NAN)
    if binary and np.isin(a, (0.0, 1.0)).all() and np.isin(b, (0.0, 1.0)).all():
        cmh = mcnemar_cmh(a, b)
        out.update(p_cmh=cmh["p"], a_only=cmh["a_only"], b_only=cmh["b_only"])
    return out


def over_seeds(first, second) -> dict:
    """Paired t-test of per-seed scores (``(S,)`` each, ``first`` minus ``second``): mean difference, its 95%
    t-interval and p (None with fewer than two seeds or a non-finite score). The unit is the seed: it asks whether
    the *training recipe* differs."""
    from scipy import stats as st  # noqa: PLC0415 deferred: scipy.stats (~0.8 s at start-up), needed only here

    first, second = np.asarray(first, float), np.asarray(second, float)
    if first.shape != second.shape or first.ndim != 1:  # broadcasting would pair seeds that do not exist
        raise ValueError(f"over_seeds: expected one score per seed on both sides, got shapes {first.shape} and "
                         f"{second.shape}")
    d = first - second
    finite = bool(np.all(np.isfinite(d)))  # a NaN seed would fall through to "no spread" and read as p = 0
    out = {"n_seeds": int(len(d)), "mean_difference": round(float(d.mean()), 4) if len(d) and finite else None,
           "ci_low": None, "ci_high": None, "p": None}
    if len(d) > 1 and finite:
        half = float(st.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d)))
        if d.std(ddof=1) > 0:
            p = float(st.ttest_rel(first, second).pvalue)
        else:  # no spread in the differences: 1 when they are all zero, 0 when all alike
            p = 1.0 if d.mean() == 0 else 0.0
        out.update(ci_low=round(float(d.mean()) - half, 4), ci_high=round(float(d.mean()) + half, 4), p=p)
    return out


# ---------------------------------------------------------------------- power
def mcnemar_n_for_power(delta: float, discordance: float, alpha: float = ALPHA, power: float = 0.8) -> int | None:
    """Paired questions that detect ``delta = P(a right) - P(b right)`` at ``power`` with a two-sided McNemar test.

    Connor (1987), Biometrics 43: ``n = (z_{1-alpha/2} sqrt(psi) + z_power sqrt(psi - delta^2))^2 / delta^2`` with
    ``psi`` the share of discordant questions, raised to ``|delta|`` when smaller.

    >>> mcnemar_n_for_power(0.1, 0.2)
    155
    """
    if not 0 < power < 1 or not 0 < alpha < 1:
        raise ValueError("mcnemar_n_for_power: alpha and power must lie in (0, 1)")
    delta = abs(float(delta))
    if delta == 0 or not np.isfinite(delta):
        return None  # no number of questions detects no difference
    psi = min(1.0, max(float(discordance), delta))
    za, zb = NormalDist().inv_cdf(1 - alpha / 2), NormalDist().inv_cdf(power)
    return int(math.ceil((za * math.sqrt(psi) + zb * math.sqrt(max(psi - delta * delta, 0.0))) ** 2 / delta ** 2))
