r"""Does a training recipe learn every time? One configuration over seeds, judged seed by seed and over seeds.

A recipe "learns" on a classification set when every seed's test interval lies above the majority class and the
mean over seeds reaches the GNN-only classifier's (the graph alone, same seeds): one seed on one CPU is an anecdote,
since a float-level change moves these models by several points (docs/explagraphs_learning.md).

    # one seed (resumable)
    python -m gr_core.g_retriever --preset cpu --dataset explagraphs --method g_retriever --seed 1
    python bench/recipe.py --runs outputs/cpu/runs --method g_retriever \
        --out outputs/studies/explagraphs_recipe
    # other schedule
    python bench/recipe.py ... --compare outputs/studies/precision_check/runs:g_retriever-bfloat16

The report gives per seed the validation curve (greedy accuracy and loss per epoch), the epoch kept, the test score
with its Wilson interval and whether it clears the majority class; over seeds the mean, std and the paired tests
(:func:`gr_core.stats.compare_seeds`) against each reference row; and, for every ``--compare`` series, the same
numbers and a paired test against the recipe, seed k with seed k on the same questions.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from gr_core.precision import run_precision
from gr_core.report.claims import SEEDLESS
from gr_core.report.results import run_question_scores
from gr_core.runs import environment_record, read_json, seed_run_dirs, write_json
from gr_core.stats import compare_seeds, verdict, wilson_interval

REFERENCES = ("majority", "gnn_classifier", "negation_parity")


def seed_runs(runs_dir: str | Path, dataset: str, method: str) -> list[Path]:
    """The finished run directories ``<dataset>-<method>-seed<k>`` under ``runs_dir``, by seed."""

    return [d for _, d in seed_run_dirs(runs_dir, dataset, method)]


def _scores(run_dir: Path) -> tuple[list[str], np.ndarray]:
    s = run_question_scores(run_dir.parent, run_dir.name)
    return list(s.index), s.to_numpy()


def describe_seeds(runs: list[Path], majority: float | None = None) -> dict:
    """Per seed: the validation curve, the epoch kept, the test score and its interval; over seeds: mean and std."""

    seeds = []
    for d in runs:
        m = read_json(d / "metrics.json")
        hist = read_json(d / "history.json") if (d / "history.json").is_file() else []
        _, right = _scores(d)
        low, high = wilson_interval(float(right.sum()), len(right))
        seeds.append({"run": d.name, "seed": m.get("seed"), "test": round(float(right.mean()), 4), "n": len(right),
                      "ci": [round(low, 4), round(high, 4)],
                      "above_majority": None if majority is None else bool(low > majority),
                      "epoch_kept": m.get("best_epoch"), "config_hash": m.get("config_hash"),
                      "dtype": run_precision(m).get("dtype"), "cpu": run_precision(m).get("cpu_model"),
                      "val_match": [round(h.get("val_match", float("nan")), 4) for h in hist],
                      "val_loss": [round(h["val_loss"], 4) for h in hist],
                      "train_seconds": m.get("train_seconds"), "seconds_per_epoch": m.get("seconds_per_epoch")})
    tests = np.array([s["test"] for s in seeds])
    return {"seeds": seeds, "mean": round(float(tests.mean()), 4) if len(tests) else None,
            "std": round(float(tests.std(ddof=1)), 4) if len(tests) > 1 else None,
            "all_above_majority": None if majority is None or not seeds else all(s["above_majority"] for s in seeds)}


def _matrix(runs: list[Path]) -> tuple[list[str], np.ndarray]:
    ids, rows = None, []
    for d in runs:
        q, right = _scores(d)
        if ids is not None and q != ids:
            raise ValueError(f"{d}: other test questions than {runs[0]}")
        ids = q
        rows.append(right)
    return ids or [], np.stack(rows) if rows else np.zeros((0, 0))


def _seed(run_dir: Path) -> int:
    return int(run_dir.name.rsplit("-seed", 1)[1])  # <dataset>-<method>-seed<k> (gr_core.runs.seed_run_dirs)


def paired_over_seeds(a: list[Path], b: list[Path], seedless_b: bool = False) -> dict:
    """:func:`gr_core.stats.compare_seeds` of two seed series, seed k of ``a`` with seed k of ``b``: the seeds both
    have (``paired_seeds``), the others named in ``unpaired`` (``{"a": [...], "b": [...]}``). With ``seedless_b`` (a
    deterministic reference row, :data:`gr_core.report.claims.SEEDLESS`) b's one run is paired with every seed of a.

    Raises:
        ValueError: no seed in common, or the two series answered other test questions.
    """
    if seedless_b and len(b) == 1:
        pairs = [(x, b[0]) for x in a]
    else:  # by seed number, not by position: {0, 1, 2} against {1, 2} pairs 1-1 and 2-2 and leaves 0 out
        by_seed = {_seed(d): d for d in b}
        pairs = [(x, by_seed[_seed(x)]) for x in a if _seed(x) in by_seed]
    if not pairs:
        raise ValueError(f"no seed in common: {[d.name for d in a]} against {[d.name for d in b]}")
    ids_a, ma = _matrix([x for x, _ in pairs])
    ids_b, mb = _matrix([y for _, y in pairs])
    if ids_a != ids_b:
        raise ValueError("the two series answered other test questions")
    r = compare_seeds(ma, mb)
    keep = ("score_a", "score_b", "n", "diff", "p", "test", "seeds", "scores_a", "scores_b", "p_cmh", "p_seeds",
            "a_only", "b_only")
    used_a, used_b = {x for x, _ in pairs}, {y for _, y in pairs}
    # four significant digits: a p-value of 1.6e-8 must not round to 0
    return {**{key: (float(f"{v:.4g}") if isinstance(v, float) else v) for key, v in r.items() if key in keep},
            "paired_seeds": [_seed(x) for x, _ in pairs],
            "unpaired": {"a": [_seed(d) for d in a if d not in used_a], "b": [_seed(d) for d in b if d not in used_b]}}


def report(runs_dir: str | Path, method: str, dataset: str = "explagraphs", compare: list[tuple[str, Path, str]] = (),
           out: str | Path | None = None) -> dict:
    """The recipe's seeds, their comparison with the reference rows and with other schedules; written to
    ``out/recipe.json`` when ``out`` is given.

    Args:
        compare: ``(label, runs_dir, method)`` series to set beside the recipe (e.g. the 2-epoch runs).
    """

    runs_dir = Path(runs_dir)
    majority_runs = seed_runs(runs_dir, dataset, "majority")
    majority = float(_scores(majority_runs[0])[1].mean()) if majority_runs else None
    mine = seed_runs(runs_dir, dataset, method)
    if not mine:
        raise FileNotFoundError(f"no finished {dataset}-{method}-seed<k> run under {runs_dir}")
    result = {"dataset": dataset, "method": method, "runs_dir": str(runs_dir), "majority": majority,
              "recipe": describe_seeds(mine, majority), "references": {}, "schedules": {},
              "env": environment_record()}
    for ref in REFERENCES:
        theirs = seed_runs(runs_dir, dataset, ref)
        if theirs:
            r = paired_over_seeds(mine, theirs, seedless_b=ref in SEEDLESS)
            result["references"][ref] = {**r, "verdict": verdict(r["diff"], r["p"]),
                                         "reference": describe_seeds(theirs)}
    for label, other_dir, other_method in compare:
        theirs = seed_runs(other_dir, dataset, other_method)
        if theirs:
            r = paired_over_seeds(mine, theirs)
            result["schedules"][label] = {"runs_dir": str(other_dir), "method": other_method,
                                          **describe_seeds(theirs, majority), "against_recipe": r,
                                          "verdict": verdict(r["diff"], r["p"])}
    if out is not None:
        write_json(Path(out) / "recipe.json", result)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/recipe.py", description=__doc__.split("\n")[0])
    parser.add_argument("--runs", required=True, help="the runs folder holding <dataset>-<method>-seed<k>")
    parser.add_argument("--method", default="g_retriever")
    parser.add_argument("--dataset", default="explagraphs")
    parser.add_argument("--compare", nargs="*", default=[],
                        help="LABEL=RUNS_DIR:METHOD series to compare with (e.g. 2ep-bf16=outputs/studies/"
                             "precision_check/runs:g_retriever-bfloat16)")
    parser.add_argument("--out", help="folder for recipe.json")
    args = parser.parse_args(argv)
    compare = []
    for spec in args.compare:
        label, _, rest = spec.partition("=")
        folder, _, method = rest.rpartition(":")
        if not (label and folder and method):
            parser.error(f"--compare {spec!r}: expected LABEL=RUNS_DIR:METHOD")
        compare.append((label, Path(folder), method))
    r = report(args.runs, args.method, args.dataset, compare, args.out)
    rec = r["recipe"]
    print(f"{args.dataset} {args.method}: " + " / ".join(
        f"seed {s['seed']} {s['test']:.3f} [{s['ci'][0]:.3f}, {s['ci'][1]:.3f}]" for s in rec["seeds"])
          + f"; mean {rec['mean']} ± {rec['std']}; every seed above the majority class {r['majority']}: "
          f"{rec['all_above_majority']}")
    for name, ref in r["references"].items():
        print(f"  against {name}: {ref['score_a']:.4f} vs {ref['score_b']:.4f}, p {ref['p']:.3g} ({ref['test']}): "
              f"{ref['verdict']}")
    for name, sch in r["schedules"].items():
        print(f"  {name}: " + " / ".join(f"{s['test']:.3f}" for s in sch["seeds"]) + f"; mean {sch['mean']}; "
              f"recipe minus it {sch['against_recipe']['diff']:+.4f}, p {sch['against_recipe']['p']:.3g} "
              f"(over seeds alone, t-test: p {sch['against_recipe'].get('p_seeds', float('nan')):.3g}; seeds paired "
              f"{sch['against_recipe']['paired_seeds']}, left out {sch['against_recipe']['unpaired']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
