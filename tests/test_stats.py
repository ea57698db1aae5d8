"""The statistics behind every interval and verdict, on hand-computed cases."""
import math

import numpy as np
import pytest

from gr_core.stats import compare, mcnemar_exact, paired_bootstrap, verdict, wilson_interval


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
    assert apart["diff"] == 1.0 and apart["p"] == 0.0 and apart["ci_low"] == apart["ci_high"] == 1.0
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

    from gr_core.results import table8

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
