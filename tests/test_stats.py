"""The statistics behind every interval and verdict, on hand-computed cases."""
import math

import numpy as np
import pytest

from gr_core.stats import (bootstrap_p, compare, compare_seeds, mcnemar_cmh, mcnemar_exact, mcnemar_n_for_power,
                           over_seeds, paired_bootstrap, seed_bootstrap, signed_rank, signflip_p, verdict,
                           wilson_interval)


def test_wilson_matches_hand_computed_intervals():
    # 5/10: centre (0.5 + z^2/20) / (1 + z^2/10) = 0.5; half-width 1.96 * sqrt(0.025 + z^2/400) / 1.38415 = 0.2634
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    # 0/10: the lower end is exactly 0 and the upper end is z^2/n / (1 + z^2/n) = 0.2775
    low, high = wilson_interval(0, 10)
    assert low == pytest.approx(0.0, abs=1e-12) and high == pytest.approx(0.2775, abs=1e-4)
    # 326 of 554 (the majority-class rate 0.588): centre 0.5878, half-width 1.96 * 0.020983 / 1.006934 = 0.0408
    low, high = wilson_interval(326, 554)
    assert (low, high) == pytest.approx((0.5470, 0.6287), abs=1e-4)
    assert all(math.isnan(v) for v in wilson_interval(0, 0))
    assert all(math.isnan(v) for v in wilson_interval(float("nan"), 10))  # not (0, 1): no count is no interval


def test_mcnemar_exact_hand_computed_p_values():
    # discordant 0 vs 5: p = 2 * (1/2)^5
    a, b = [0] * 5 + [1] * 10, [1] * 5 + [1] * 10
    assert mcnemar_exact(a, b) == {"n": 15, "a_only": 0, "b_only": 5, "p": 0.0625}
    # discordant 1 vs 9: p = 2 * (C(10,0) + C(10,1)) / 2^10
    a = [1] + [0] * 9 + [1, 0]
    b = [0] + [1] * 9 + [1, 0]
    r = mcnemar_exact(a, b)
    assert (r["a_only"], r["b_only"]) == (1, 9) and r["p"] == pytest.approx(22 / 1024)
    # balanced discordance or none at all: p = 1
    assert mcnemar_exact([1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 1])["p"] == 1.0
    assert mcnemar_exact([1, 0, 1], [1, 0, 1])["p"] == 1.0


def test_mcnemar_agrees_with_scipy_binomial_test():
    from scipy.stats import binomtest

    rng = np.random.default_rng(0)
    for _ in range(20):
        a, b = rng.integers(0, 2, 60), rng.integers(0, 2, 60)
        r = mcnemar_exact(a, b)
        m = r["a_only"] + r["b_only"]
        assert r["p"] == pytest.approx(binomtest(r["a_only"], m, 0.5).pvalue if m else 1.0)


def test_mcnemar_refuses_unaligned_systems():
    with pytest.raises(ValueError, match="different numbers of questions"):
        mcnemar_exact([1, 0], [1, 0, 1])


def test_paired_bootstrap_extremes():
    same = paired_bootstrap([0.5, 0.2, 1.0], [0.5, 0.2, 1.0])
    assert same["diff"] == 0 and same["p"] == 1.0
    apart = paired_bootstrap(np.ones(50), np.zeros(50))
    # 50 questions all won: no random sign pattern reaches it; p is the resolution of 10,000 of them, never 0
    assert apart["diff"] == 1.0 and apart["p"] == 1 / 10_001 and apart["ci_low"] == apart["ci_high"] == 1.0
    # a small mixed difference is not significant
    rng = np.random.default_rng(1)
    x = rng.random(40)
    assert paired_bootstrap(x + rng.normal(0, 0.3, 40), x)["p"] > 0.05


def test_verdict_needs_significance_in_the_papers_direction():
    assert verdict(0.05, 0.01) == "reproduced"
    assert verdict(-0.05, 0.01) == "contradicted"
    assert verdict(0.01, 0.60) == "not significant"
    assert verdict(0.0, 1.0) == "not significant"
    assert verdict(float("nan"), float("nan")) == "not testable here"


def test_compare_reports_both_scores_n_and_p():
    r = compare([1, 1, 1, 0], [0, 0, 1, 0])
    assert (r["score_a"], r["score_b"], r["n"], r["diff"], r["test"]) == (0.75, 0.25, 4, 0.5, "exact McNemar")
    assert r["p"] == pytest.approx(0.5)  # discordant 2 vs 0


def _fake_run(runs_dir, name, scores, ids=None, dataset="explagraphs"):
    import json

    d = runs_dir / name
    d.mkdir(parents=True)
    ids = ids or [f"q{i}" for i in range(len(scores))]
    (d / "predictions.jsonl").write_text("".join(json.dumps({"id": i, "score": s}) + "\n" for i, s in zip(ids, scores)))
    mean = sum(scores) / len(scores) * (100 if dataset == "webqsp" else 1)
    (d / "metrics.json").write_text(json.dumps({"score": mean, "num_test": len(scores)}))


def test_table8_pairs_every_llm_with_the_first_on_the_same_questions(tmp_path):
    from scipy.stats import binomtest

    from gr_core.report.results import table8

    a = [1] * 30 + [0] * 10
    b = [1] * 20 + [0] * 20  # b loses 10 questions a got right, gains none
    _fake_run(tmp_path, "small", a)
    _fake_run(tmp_path, "large", b)
    _fake_run(tmp_path, "other-questions", b, ids=[f"x{i}" for i in range(40)])
    t = table8(tmp_path, [("s", "small"), ("l", "large"), ("o", "other-questions"), ("g", None)], "explagraphs")
    assert list(t["score"][:2]) == [0.75, 0.5] and list(t["n_test"][:2]) == [40, 40]
    low, high = wilson_interval(30, 40)
    assert t["ci_low"][0] == pytest.approx(low, abs=1e-4) and t["ci_high"][0] == pytest.approx(high, abs=1e-4)
    assert t["diff"][1] == pytest.approx(-0.25)
    assert t["p_vs_first"][1] == pytest.approx(binomtest(0, 10, 0.5).pvalue, rel=1e-3)
    assert "different test questions" in t["note"][2] and t["p_vs_first"].isna()[2]
    assert t["note"][3] == "not run" and t["score"].isna()[3]


def test_cmh_sums_the_seeds_discordant_pairs():
    # seed 0: a alone right on q0, b alone on q3; seed 1: a alone right on q0 and q2 -> 3 vs 1 discordant
    a = [[1, 1, 0, 0], [1, 0, 1, 0]]
    b = [[0, 1, 0, 1], [0, 0, 0, 0]]
    r = mcnemar_cmh(a, b)
    assert (r["seeds"], r["n"], r["a_only"], r["b_only"]) == (2, 4, 3, 1)
    assert r["p"] == pytest.approx(2 * (1 + 4) / 16)  # exact: twice P(X <= 1), X ~ Bin(4, 1/2)
    assert r["p_chi2"] == pytest.approx(0.3173105, abs=1e-6)  # (3 - 1)^2 / 4 = 1 on one degree of freedom
    # one seed: the plain exact McNemar test
    one = mcnemar_cmh([a[1]], [b[1]])
    assert one["p"] == mcnemar_exact(a[1], b[1])["p"] == 0.5
    with pytest.raises(ValueError, match="shapes differ"):
        mcnemar_cmh(a, [b[0]])


def test_seed_bootstrap_keeps_a_questions_seeds_together():
    # a beats b on every question in seed 0 and loses on every question in seed 1: the mean difference is 0, and
    # drawing seeds moves it anywhere between -1 and +1: no evidence either way
    a = np.array([[1.0] * 30, [0.0] * 30])
    b = np.array([[0.0] * 30, [1.0] * 30])
    r = seed_bootstrap(a, b, num_samples=2000)
    assert (r["seeds"], r["n"], r["diff"], r["p"]) == (2, 30, 0.0, 1.0)
    assert (r["ci_low"], r["ci_high"]) == (-1.0, 1.0)
    # a right everywhere, b nowhere, in every seed: every resample has difference 1 -> p = 2 (0 + 1) / (500 + 1)
    r = seed_bootstrap(np.ones((3, 20)), np.zeros((3, 20)), num_samples=500)
    assert (r["diff"], r["p"], r["ci_low"]) == (1.0, 2 / 501, 1.0)  # the bootstrap's, above the sign flip's 1 / 501
    # one seed: exactly the paired bootstrap over questions
    x, y = np.random.default_rng(1).integers(0, 2, (2, 50)).astype(float)
    assert seed_bootstrap(x, y, num_samples=800) == {"seeds": 1, **paired_bootstrap(x, y, num_samples=800)}


def test_seed_bootstrap_is_wider_than_counting_repeated_questions_as_new_ones():
    # three seeds that agree question by question carry the information of one seed, not three: the two-level
    # bootstrap gives the one-seed p, while CMH (seeds as independent strata) is far smaller
    rng = np.random.default_rng(0)
    a1 = (rng.random(200) < 0.62).astype(float)
    b1 = (rng.random(200) < 0.55).astype(float)
    a, b = np.tile(a1, (3, 1)), np.tile(b1, (3, 1))
    clustered = seed_bootstrap(a, b, num_samples=4000)["p"]
    assert clustered == pytest.approx(paired_bootstrap(a1, b1, num_samples=4000)["p"], abs=0.02)
    assert mcnemar_cmh(a, b)["p"] < mcnemar_exact(a1, b1)["p"] / 3


def test_seed_bootstrap_counts_the_seeds_spread():
    # the same per-question noise, but seeds that disagree (+10, -2, +1 points): wider than seeds that agree
    rng = np.random.default_rng(2)
    base = (rng.random((3, 400)) < 0.6).astype(float)
    shift = np.zeros((3, 400))
    for s, k in enumerate((40, -8, 4)):  # seed s: a gains (or loses) k questions over b
        idx = rng.choice(400, abs(k), replace=False)
        shift[s, idx] = np.sign(k)
    spread = seed_bootstrap(base + shift, base, num_samples=3000)
    agree = seed_bootstrap(base + np.tile(shift.mean(axis=0, keepdims=True), (3, 1)), base, num_samples=3000)
    assert spread["diff"] == pytest.approx(agree["diff"])
    assert spread["ci_high"] - spread["ci_low"] > 2 * (agree["ci_high"] - agree["ci_low"])


def test_compare_seeds_reports_each_seed_and_the_spread():
    a = [[1, 1, 1, 0], [1, 1, 0, 0], [1, 0, 0, 0]]
    b = [[0, 0, 0, 0]] * 3
    r = compare_seeds(a, b)
    assert r["seeds"] == 3 and r["n"] == 4
    assert r["scores_a"] == [0.75, 0.5, 0.25] and r["scores_b"] == [0.0] * 3
    assert r["score_a"] == pytest.approx(0.5) and r["std_a"] == pytest.approx(0.25)  # sample std of .75/.5/.25
    assert (r["a_only"], r["b_only"]) == (6, 0) and r["p_cmh"] == pytest.approx(2 / 64)
    assert r["test"].startswith("paired bootstrap over seeds and questions, 3 seeds")
    one = compare_seeds([a[0]], [b[0]])
    assert one["test"] == "exact McNemar" and one["p"] == mcnemar_exact(a[0], b[0])["p"] and math.isnan(one["std_a"])
    with pytest.raises(ValueError, match="different"):
        compare_seeds(a, b[:2])


def test_power_sample_sizes_match_hand_computation():
    # Connor (1987): delta 0.1, psi 0.2 -> (1.95996 * 0.44721 + 0.84162 * 0.43589)^2 / 0.01 = 154.6 -> 155
    assert mcnemar_n_for_power(0.1, 0.2) == 155
    assert mcnemar_n_for_power(-0.1, 0.2) == 155  # two-sided: the sign does not matter
    # psi below |delta| is impossible and raised to it: psi = delta = 0.1
    # -> (1.95996 * 0.31623 + 0.84162 * 0.3)^2 / 0.01
    assert mcnemar_n_for_power(0.1, 0.01) == math.ceil((1.959964 * 0.1 ** 0.5 + 0.841621 * 0.09 ** 0.5) ** 2 / 0.01)
    assert mcnemar_n_for_power(0.0, 0.3) is None
    # the paper's G-Retriever vs GraphToken on ExplaGraphs (0.8516 vs 0.8508) needs far more than 554 questions
    assert mcnemar_n_for_power(0.8516 - 0.8508, 0.2) > 100_000


def test_signed_rank_is_exact_on_a_handful_of_questions_where_a_bootstrap_is_certain():
    one = signed_rank([0.0], [0.5])
    assert one["p"] == 1.0 and paired_bootstrap([0.0], [0.5])["p"] == 1.0  # one question decides nothing
    assert signed_rank([0.2, 0.4], [0.2, 0.4])["p"] == 1.0
    worse = signed_rank([0.0] * 25 + [1.0] * 50, [0.5] * 25 + [1.0] * 50)
    assert worse["p"] < 1e-5 and worse["diff"] == pytest.approx(-1 / 6) and worse["test"] == "Wilcoxon signed-rank"


def test_a_handful_of_questions_never_reads_as_certain():
    # two questions, both won: a bootstrap drew only +1 (p = 2 / (B + 1)); the sign flip, like McNemar, says 0.5
    r = compare([1, 1], [0, 0], binary=False)
    assert r["p"] == 0.5 == compare([1, 1], [0, 0])["p"] and verdict(r["diff"], r["p"]) == "not significant"
    assert r["test"] == "paired sign-flip"
    # exact enumeration: never below 2^(1 - m) for m questions that differ, and McNemar itself on 0/1 scores
    assert signflip_p(np.full(10, 0.3)) == 2 ** -9 and signflip_p(np.zeros(4)) == 1.0
    a, b = np.r_[1, [0] * 6, 1, 1], np.r_[0, [1] * 6, 1, 1]  # discordant 1 vs 6: 2 * (1 + 7) / 2^7
    assert signflip_p(a - b) == pytest.approx(mcnemar_exact(a, b)["p"]) == 0.125
    # over seeds a question's seeds flip together: 2 questions won in 3 seeds are still 2 questions
    assert seed_bootstrap(np.ones((3, 2)), np.zeros((3, 2)), num_samples=500)["p"] == 0.5
    assert compare_seeds(np.ones((3, 2)), np.zeros((3, 2)))["p"] == 0.5
    assert math.isnan(signflip_p([1.0, float("nan")]))


def test_the_sign_flip_keeps_large_samples_as_the_bootstrap_had_them():
    # 300 questions, a real graded effect: p within a few thousandths of the bootstrap's on the same differences
    rng = np.random.default_rng(3)
    x = rng.random(300)
    a, b = x + 0.03 + rng.normal(0, 0.25, 300), x + rng.normal(0, 0.25, 300)
    d = a - b
    boot = bootstrap_p(d[np.random.default_rng(0).integers(0, 300, (10_000, 300))].mean(axis=1))
    assert 0.001 < boot < 0.05 and paired_bootstrap(a, b)["p"] == pytest.approx(boot, abs=0.005)


def test_signed_rank_gives_the_tests_own_direction_and_refuses_bad_input():
    # 5 gains of 0.9, 40 losses of 0.1: the mean says a is ahead, the signed-rank test that a is behind
    a, b = np.r_[np.full(5, 0.9), np.zeros(40)], np.r_[np.zeros(5), np.full(40, 0.1)]
    r = signed_rank(a, b)
    assert r["diff"] > 0 and r["p"] < 1e-3 and r["rank_biserial"] < -0.5
    assert verdict(r["rank_biserial"], r["p"]) == "contradicted"
    # ranks of |d|: 40 ties at 0.1 (mean rank 20.5), 5 at 0.9 (43): (5 * 43 - 40 * 20.5) / (45 * 46 / 2)
    assert r["rank_biserial"] == pytest.approx((215 - 820) / 1035)
    assert math.isnan(signed_rank([], [])["p"])
    with pytest.raises(ValueError, match="aligned"):
        signed_rank([1.0, 0.5, 0.2], [0.1])


def test_over_seeds_refuses_unaligned_seeds_and_gives_no_p_for_nan():
    assert over_seeds([0.7, float("nan"), 0.69], [0.65, 0.7, 0.66])["p"] is None  # was 0.0: "certain"
    with pytest.raises(ValueError, match="one score per seed"):
        over_seeds([0.7, 0.8, 0.9], [0.6])


def test_total_reduction_resamples_each_side_on_its_own_and_refuses_bad_steps():
    from gr_core.stats import total_reduction

    rng = np.random.default_rng(1)
    before, after = list(8 + 2 * rng.standard_normal(16)), list(4 + 1 * rng.standard_normal(12))  # unequal counts
    t = total_reduction(before, after)
    assert t["reduction_%"] == pytest.approx(100 * (1 - sum(after) / sum(before)))  # totals, not means
    assert t["ci_low"] < t["reduction_%"] < t["ci_high"] and t["p"] < 0.01 and (t["n_before"], t["n_after"]) == (16, 12)
    same = total_reduction(before, before)  # the same steps on both sides: no reduction
    assert same["ci_low"] < 0 < same["ci_high"] and same["p"] > 0.5
    for bad in ([8.0, float("nan")], [8.0, -1.0], []):
        out = total_reduction([8.0] * 4, bad)
        assert np.isnan(out["reduction_%"]) and np.isnan(out["p"]) and out["n_after"] == len(bad)
    assert np.isnan(total_reduction([0.0, 0.0], [1.0])["p"])  # a before total of 0: no ratio
    assert not np.isnan(total_reduction([0.0, 5.0], [1.0, 1.0])["ci_low"])  # resamples of only the 0 are dropped


def test_recipe_pairs_seed_series_by_seed_number(bench, tmp_path):
    import json

    recipe = bench("recipe")
    for name, right in {"x-a-seed0": 10, "x-a-seed1": 12, "x-a-seed2": 14, "x-b-seed1": 12, "x-b-seed2": 14}.items():
        d = tmp_path / name
        d.mkdir()
        rows = [json.dumps({"id": i, "score": float(i < right)}) for i in range(20)]
        (d / "predictions.jsonl").write_text("\n".join(rows) + "\n")
        (d / "metrics.json").write_text("{}")
    a, b = recipe.seed_runs(tmp_path, "x", "a"), recipe.seed_runs(tmp_path, "x", "b")
    r = recipe.paired_over_seeds(a, b)  # b's seeds 1 and 2 are a's seeds 1 and 2, answer for answer
    assert r["paired_seeds"] == [1, 2] and r["unpaired"] == {"a": [0], "b": []}
    assert r["scores_a"] == r["scores_b"] == [0.6, 0.7] and r["p"] == 1.0
    with pytest.raises(ValueError, match="no seed in common"):
        recipe.paired_over_seeds(a[:1], b)
    # a deterministic reference row's one run stands for every seed
    assert recipe.paired_over_seeds(a, b[:1], seedless_b=True)["paired_seeds"] == [0, 1, 2]
