"""Uncertainty and paired comparisons for every reported score.

- :func:`wilson_interval`: the 95% interval of an accuracy / Hit rate (Wilson score interval; it stays inside
  [0, 1] and is honest at small n, unlike the normal approximation).
- :func:`mcnemar_exact`: two systems scored right/wrong on the *same* questions; the exact two-sided McNemar
  test (a binomial test on the discordant questions).
- :func:`paired_bootstrap`: the same for a graded score (F1): a bootstrap interval over questions of the mean
  difference, its p from :func:`signflip_p` (a permutation test: a handful of questions can never read as certain).
- :func:`verdict`: ``reproduced`` only when the difference goes the paper's way and is significant at 5%,
  ``contradicted`` when significant the other way, ``not significant`` otherwise.
- :func:`compare`: both scores, n, the difference and p for two aligned per-question score lists.
- Over seeds (two systems trained with seeds 0..S-1, each scored on the same N questions):
  :func:`mcnemar_cmh` combines the per-seed McNemar tables (Cochran-Mantel-Haenszel for 1:1 matched pairs) and
  :func:`seed_bootstrap` resamples seeds and questions (a question's seeds kept together, so a question repeated in
  S seeds is not counted as S independent ones, and the seeds' own spread enters; its p is never below the sign
  flip's); :func:`compare_seeds` gives both and uses the bootstrap for the verdict (CMH treats seeds as independent
  strata of the same questions).
- Power: :func:`mcnemar_n_for_power` is the number of paired questions that detects a difference ``delta`` at 80%
  power (Connor 1987).
"""
from __future__ import annotations

import math
from math import erfc, sqrt
from statistics import NormalDist
from typing import Sequence

import numpy as np

ALPHA = 0.05
Z95 = 1.959963984540054  # the standard normal's 97.5% quantile


def wilson_interval(successes: int | float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of ``successes / n`` (fractions); ``(nan, nan)`` when ``n == 0``.

    >>> [round(v, 4) for v in wilson_interval(5, 10)]
    [0.2366, 0.7634]
    """
    if n <= 0 or not math.isfinite(successes):  # a NaN count is no count: (0, 1) would pass for "anything"
        return float("nan"), float("nan")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # exactly 0 with no success and 1 with all (the formula leaves rounding residue of ~1e-16 there)
    return (0.0 if successes <= 0 else max(0.0, centre - half)), (1.0 if successes >= n else min(1.0, centre + half))


def percent_interval(successes: int | float, n: int, digits: int = 1) -> tuple[float, float]:
    """:func:`wilson_interval` in percent, rounded to ``digits`` (how the KGQA tables print Hit): ``(nan, nan)`` when
    ``n == 0``.

    >>> percent_interval(5, 10)
    (23.7, 76.3)
    """
    low, high = wilson_interval(successes, n)
    return round(100 * low, digits), round(100 * high, digits)


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
    k, m = min(a_only, b_only), a_only + b_only
    # two-sided exact binomial test with p = 1/2: twice the smaller tail, capped at 1
    p = 1.0 if m == 0 else min(1.0, 2 * sum(math.comb(m, i) for i in range(k + 1)) / 2 ** m)
    return {"n": int(a.size), "a_only": a_only, "b_only": b_only, "p": p}


def bootstrap_p(means: np.ndarray) -> float:
    """Two-sided bootstrap p-value of "the difference is 0" from resampled mean differences: twice the share on the
    far side of zero, each share counted as ``(k + 1) / (B + 1)`` (Davison & Hinkley 1997, §4.4), so a bootstrap of
    ``B`` resamples never reports p = 0, only its resolution ``2 / (B + 1)``; capped at 1.

    >>> bootstrap_p(np.ones(9999))  # every resample on one side: the smallest p 9,999 resamples can give
    0.0002
    """
    b = len(means)
    return float(min(1.0, 2 * (min(np.sum(means <= 0), np.sum(means >= 0)) + 1) / (b + 1)))


def total_reduction(before: Sequence[float], after: Sequence[float], num_samples: int = 10_000, seed: int = 0
                    ) -> dict:
    """How much smaller ``after``'s total is than ``before``'s (in %: an epoch's step seconds with and without
    retrieval), with a 95% bootstrap interval and p of "no reduction". Each side's items are resampled with
    replacement on their own (the two sides batch the same questions differently: no pairs), so the interval covers
    which batches an epoch holds, not only the clock's noise. With a handful of items a side the resamples repeat
    few values and the interval means little: the caller sets a minimum (notebook 08: 8 a side).

    Returns:
        ``{"reduction_%", "ci_low", "ci_high", "p", "n_before", "n_after"}``; NaN but the counts with an empty side,
        a non-finite or negative item, or a ``before`` total of 0.
    """
    b, a, nan = np.asarray(before, dtype=float), np.asarray(after, dtype=float), float("nan")
    out = {"reduction_%": nan, "ci_low": nan, "ci_high": nan, "p": nan, "n_before": int(b.size), "n_after": int(a.size)}
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
            flipped together (the statistic sums them), so a question asked in S seeds is one unit, not S.
    Returns:
        The share of sign patterns whose ``|sum|`` reaches the observed one: exact over the ``2^m`` patterns of the
        ``m`` questions that differ when ``m <= exact_upto``, else ``(k + 1) / (B + 1)`` of ``num_samples`` random
        ones; 1 when no question differs, NaN for non-finite input. Never below ``2^(1 - m)`` (the observed pattern
        and its mirror always reach it), so two questions both won give 0.5; on 0/1 scores of one seed this is the
        exact McNemar test.

    >>> signflip_p([1.0, 1.0]), signflip_p([0.9] * 5 + [-0.1] * 40) > 0.5
    (0.5, True)
    """
    t = np.asarray(d, dtype=float)
    t = t.sum(axis=0) if t.ndim == 2 else t.ravel()
    if not np.all(np.isfinite(t)):
        return float("nan")
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
        return {"n": 0, "diff": float("nan"), "ci_low": float("nan"), "ci_high": float("nan"), "p": float("nan")}
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, d.size, size=(num_samples, d.size))].mean(axis=1)
    p = signflip_p(d, num_samples, seed)
    low, high = np.quantile(means, [0.025, 0.975])
    return {"n": int(d.size), "diff": float(d.mean()), "ci_low": float(low), "ci_high": float(high), "p": float(p)}


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
    d, nan = a - b, float("nan")
    nz = d[d != 0]  # Wilcoxon drops zero differences (zero_method="wilcox"); the rank sums follow it
    ranks = rankdata(np.abs(nz))
    rb = float((ranks[nz > 0].sum() - ranks[nz < 0].sum()) / ranks.sum()) if nz.size else 0.0
    p = float(wilcoxon(d).pvalue) if nz.size else (1.0 if d.size else nan)
    return {"n": int(d.size), "score_a": float(a.mean()) if a.size else nan,
            "score_b": float(b.mean()) if b.size else nan, "diff": float(d.mean()) if d.size else nan,
            "rank_biserial": rb if d.size else nan, "p": p, "test": "Wilcoxon signed-rank"}


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
    """Both mean scores, n, the difference and the paired p-value (exact McNemar when ``binary``, else a sign flip);
    with McNemar also the discordant counts ``a_only`` / ``b_only`` (questions only ``a`` / only ``b`` got right).

    Scores are returned on the lists' own scale (pass fractions or 0/1 values).
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    test = mcnemar_exact(a, b) if binary else paired_bootstrap(a, b)
    counts = {k: test[k] for k in ("a_only", "b_only")} if binary else {}
    return {"score_a": float(a.mean()) if a.size else float("nan"),
            "score_b": float(b.mean()) if b.size else float("nan"),
            "n": int(a.size), "diff": float(a.mean() - b.mean()) if a.size else float("nan"), "p": test["p"],
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
    """Per-seed McNemar tables combined into one test (Cochran-Mantel-Haenszel for 1:1 matched pairs).

    For matched pairs the Mantel-Haenszel statistic over strata (seeds) reduces to McNemar's on the discordant
    counts summed over strata; this returns its exact form (binomial on the summed counts, as :func:`mcnemar_exact`)
    and the continuity-free chi-square p beside it.

    Args:
        a, b: ``(S, N)`` right (1) / wrong (0) per seed and question, seed s of ``a`` paired with seed s of ``b``.
    Returns:
        ``{"seeds", "n", "a_only", "b_only", "p", "p_chi2"}`` with the counts summed over seeds.
    """
    a, b = (m > 0.5 for m in _as_matrices(a, b, "mcnemar_cmh"))
    a_only, b_only = int(np.sum(a & ~b)), int(np.sum(~a & b))
    m = a_only + b_only
    exact = mcnemar_exact(np.r_[np.ones(a_only), np.zeros(b_only)], np.r_[np.zeros(a_only), np.ones(b_only)])["p"]
    chi2 = (a_only - b_only) ** 2 / m if m else 0.0
    return {"seeds": int(a.shape[0]), "n": int(a.shape[1]), "a_only": a_only, "b_only": b_only, "p": exact,
            "p_chi2": float(erfc(sqrt(chi2 / 2))) if m else 1.0}


def seed_bootstrap(a, b, num_samples: int = 10_000, seed: int = 0) -> dict:
    """Paired bootstrap over seeds and questions of the difference in mean score (a two-level bootstrap).

    Each resample draws S seed pairs with replacement and N questions with replacement, the same questions for every
    drawn seed, and takes the mean of ``a - b`` over them. Resampling questions, with a question's seeds kept
    together, covers which questions were asked (a question answered by three seeds is one question, not three);
    resampling seeds covers how much the training run itself moves the score. With one seed this is
    :func:`paired_bootstrap` over questions. With few seeds (3) the seed level is coarse: read ``p`` with the
    per-seed differences beside it. ``p`` is the larger of the bootstrap's and :func:`signflip_p`'s (a question's
    seeds flipped together): the bootstrap carries the seeds' spread, the sign flip keeps a handful of questions from
    reading as certain (the larger of two valid p-values is valid).

    Args:
        a, b: ``(S, N)`` per-seed, per-question scores (0/1 or graded), seed s of ``a`` paired with seed s of ``b``.
    Returns:
        ``{"seeds", "n", "diff", "ci_low", "ci_high", "p"}`` (p two-sided, as :func:`paired_bootstrap`).
    """
    a, b = _as_matrices(a, b, "seed_bootstrap")
    num_seeds, n = a.shape
    if num_seeds == 1:
        return {"seeds": 1, **paired_bootstrap(a[0], b[0], num_samples=num_samples, seed=seed)}
    d = (a - b).astype(np.float32)
    if n == 0:
        return {"seeds": num_seeds, "n": 0, "diff": float("nan"), "ci_low": float("nan"), "ci_high": float("nan"),
                "p": float("nan")}
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

    The verdict's p is :func:`seed_bootstrap`'s (``test`` names it); with one seed it is :func:`compare`'s (exact
    McNemar for 0/1 scores). Beside it: ``p_cmh`` (:func:`mcnemar_cmh`, 0/1 scores only) and ``p_seeds``, the paired
    t-test over the per-seed scores (:func:`over_seeds`).
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
               std_a=float(per_a.std(ddof=1)) if seeds > 1 else float("nan"),
               std_b=float(per_b.std(ddof=1)) if seeds > 1 else float("nan"))
    if binary and np.isin(a, (0.0, 1.0)).all() and np.isin(b, (0.0, 1.0)).all():
        cmh = mcnemar_cmh(a, b)
        out.update(p_cmh=cmh["p"], a_only=cmh["a_only"], b_only=cmh["b_only"])
    return out


def over_seeds(first, second) -> dict:
    """Paired comparison of per-seed scores (``first`` minus ``second``, ``(S,)`` each, seed s with seed s): mean
    difference, its 95% t-interval and the paired t-test's p (None with fewer than two seeds or a non-finite score).
    The seed is the unit here, so this asks whether the *training recipe* differs; with 3 seeds it has little power.
    """
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
    ``psi`` the share of discordant questions. ``psi`` is raised to ``|delta|`` when smaller (two systems that
    differ by ``delta`` disagree on at least that share).

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
