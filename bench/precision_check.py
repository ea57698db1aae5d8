"""Does bf16 change the answers? G-Retriever on ExplaGraphs' whole split in bf16 against fp32, same machine, same seeds.

The configuration is the quick preset's ExplaGraphs G-Retriever run (notebook 03: 1,659 training graphs, 2 epochs,
the epoch kept on 200 validation questions, scored on all 554 test graphs) with the LLM's dtype set explicitly, so
the two runs of a seed differ in precision alone.

Two trained models differ in their answers whatever made them differ: the same fp32 configuration and seed trained on
two CPUs (float rounding alone) disagree on about a third of the test questions. So an exact McNemar test of one
seed's pair says whether *those two models* answer differently, not whether bf16 is worse; the report gives it per
seed and beside it the **noise floor**, the same test between two fp32 runs of one seed that differ only
in where they ran (the committed quick run, another CPU, against this machine's fp32 run). Whether bf16 is worse is
read over seeds: each dtype's mean and spread, the per-seed differences, a paired t-test over seeds, and the pooled
McNemar test (discordant pairs summed over seeds, the Mantel-Haenszel test for 1:1 matched pairs).

    # one run (resumable; reused when finished)
    python bench/precision_check.py run --dtype bfloat16 --seed 0
    # each run's weights answering in the other dtype
    python bench/precision_check.py cross --seed 0
    # every finished pair -> precision_check.json
    python bench/precision_check.py report

Runs go to ``outputs/studies/precision_check/runs/<name>`` (``--out`` changes the folder). A run trains with the
threads torch is given (``OMP_NUM_THREADS``); its timings are recorded with them and with its CPU (runs made side by
side time each other's contention: their timings are not speed measurements, ``bench/precision.py`` is).
"""
from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from gr_core.evaluate import task_scores
from gr_core.g_retriever.examples import build_examples, split_indices
from gr_core.g_retriever.train import RunConfig, load_run_model, predict, run
from gr_core.graphqa import DatasetConfig, load_dataset
from gr_core.paths import outputs_root, repo_root
from gr_core.runs import atomic_write_bytes, read_json, write_json
from gr_core.stats import compare, mcnemar_cmh, over_seeds, wilson_interval

DTYPES = ("float32", "bfloat16")
DEFAULT_OUT = "precision_check"  # under outputs/studies/


def run_config(dtype: str, seed: int, preset: str = "quick") -> RunConfig:
    """The study's configuration with the LLM in ``dtype``: the quick preset's ExplaGraphs G-Retriever run as it
    was when the study ran (2 epochs, the epoch kept on 200 validation questions; :data:`REFERENCE_RUN`'s
    ``config.json``), so the committed runs stay reproducible after the preset moved on. ``preset`` is kept for
    callers; the configuration no longer follows it."""

    cfg = RunConfig.read(repo_root() / REFERENCE_RUN)
    return replace(cfg, seed=seed, variant=dtype, model=replace(cfg.model, llm=replace(cfg.model.llm, dtype=dtype)))


def out_folder(out: str | Path | None = None) -> Path:
    return Path(out) if out else outputs_root("studies") / DEFAULT_OUT


def run_one(dtype: str, seed: int, out: str | Path | None = None, preset: str = "quick") -> dict:
    """Train and score one (dtype, seed) run; a finished run of the same configuration is reused."""
    cfg = run_config(dtype, seed, preset)
    return run(cfg, out_folder(out) / "runs" / cfg.name)


def cross_score(seed: int, out: str | Path | None = None, preset: str = "quick") -> dict:
    """Answer the test questions with each dtype's trained weights in the *other* dtype: which of the two differs,
    the precision the model was trained in or the one it answers in? (The trainable parts are fp32 in both runs, so
    the weights load unchanged.) Writes ``cross-<answered in>.jsonl`` beside each run's own predictions.

    Returns:
        per trained dtype: the dtype answered in, accuracy, the share of answers identical to the run's own.
    """



    result = {}
    ds = load_dataset(DatasetConfig("explagraphs"))
    for trained, answered in zip(DTYPES, DTYPES[::-1]):
        cfg = run_config(trained, seed, preset)
        run_dir = out_folder(out) / "runs" / cfg.name
        target = run_dir / f"cross-{answered}.jsonl"
        if not target.is_file():
            other = replace(cfg.model, llm=replace(cfg.model.llm, dtype=answered))
            model = load_run_model(run_dir, int(ds.text_emb.shape[1]), cfg=replace(cfg, model=other))
            examples = model.tokenize(build_examples(ds, split_indices(ds, cfg)["test"], other, desc="test"))
            answers, _ = predict(model.eval(), examples, cfg.train.eval_batch_size, desc=f"{cfg.name} in {answered}")
            lines = [json.dumps({"id": ex.uid, "prediction": a, "answers": ex.answers,
                                 **task_scores("explagraphs", a, ex.answers)}) for ex, a in zip(examples, answers)]
            atomic_write_bytes(target, ("\n".join(lines) + "\n").encode())
        ids_own, own, ans_own = _predictions(run_dir)
        ids_x, cross, ans_x = _predictions(run_dir, target.name)
        if ids_own != ids_x:
            raise ValueError(f"{target}: other test questions than {run_dir / 'predictions.jsonl'}")
        result[trained] = {"answered_in": answered, "accuracy": round(float(cross.mean()), 4),
                           "own_accuracy": round(float(own.mean()), 4),
                           "same_answer": round(float(np.mean([x == y for x, y in zip(ans_own, ans_x)])), 4),
                           "test": compare(cross, own)}
    return result


def _predictions(run_dir: Path, name: str = "predictions.jsonl") -> tuple[list[str], np.ndarray, list[str]]:
    """``(question ids, right (1) / wrong (0), answers)`` of a run's test questions, in file order."""
    with open(run_dir / name, encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return ([str(r["id"]) for r in rows], np.array([float(r["score"]) for r in rows]),
            [str(r["prediction"]) for r in rows])


def pooled_mcnemar(pairs: list[tuple[np.ndarray, np.ndarray]]) -> dict:
    """Exact McNemar test on discordant pairs summed over strata (seeds): :func:`gr_core.stats.mcnemar_cmh`.

    Returns:
        ``{"b", "c", "n", "p"}``: b = pairs right in the first system only, c = right in the second only.
    """

    if not pairs:
        return {"b": 0, "c": 0, "n": 0, "p": 1.0}
    a = np.concatenate([x for x, _ in pairs])[None, :]  # one stratum of all pairs: the summed counts are the same
    b = np.concatenate([y for _, y in pairs])[None, :]
    r = mcnemar_cmh(a, b)
    return {"b": r["a_only"], "c": r["b_only"], "n": r["n"], "p": r["p"]}


# the quick preset's run of this configuration in fp32 on another CPU (moved from outputs/quick/runs/ when the quick
# preset adopted the 3-epoch recipe)
REFERENCE_RUN = "outputs/studies/explagraphs_quick_2epochs/runs/explagraphs-g_retriever-seed0"


def noise_floor(fp32_here: Path, reference: str | Path = REFERENCE_RUN) -> dict | None:
    """The McNemar test between two fp32 runs of one configuration and seed made on different machines: how much two
    trained models differ when nothing but float rounding separates them. None when the reference is absent."""

    ref = Path(reference) if Path(reference).is_absolute() else repo_root() / reference
    if not (ref / "predictions.jsonl").is_file() or not (fp32_here / "predictions.jsonl").is_file():
        return None
    (ids_a, a, ans_a), (ids_b, b, ans_b) = _predictions(fp32_here), _predictions(ref)
    if ids_a != ids_b:
        return None
    env = read_json(ref / "env.json") if (ref / "env.json").is_file() else {}
    return {"runs": [str(fp32_here.name), str(reference)], "reference_machine": env.get("machine"),
            "reference_threads": env.get("torch_threads"), "accuracy_here": round(float(a.mean()), 4),
            "accuracy_reference": round(float(b.mean()), 4),
            "same_answer": round(float(np.mean([x == y for x, y in zip(ans_a, ans_b)])), 4), "test": compare(a, b)}


def report(out: str | Path | None = None, preset: str = "quick") -> dict:
    """Compare every seed that has both runs finished; write ``precision_check.json`` beside the runs.

    Returns:
        per seed: each dtype's accuracy with its Wilson interval, the share of questions answered alike, the exact
        McNemar test (bf16 against fp32); the noise floor (:func:`noise_floor`); over seeds: mean and std per dtype,
        the paired comparison of per-seed accuracies (:func:`over_seeds`) and the pooled McNemar test.
    """
    folder = out_folder(out)
    seeds, per_seed, pairs = [], [], []
    for path in sorted((folder / "runs").glob("explagraphs-g_retriever-float32-seed*/metrics.json")):
        seed = int(path.parent.name.rsplit("seed", 1)[1])
        names = {d: run_config(d, seed, preset).name for d in DTYPES}
        dirs = {d: folder / "runs" / names[d] for d in DTYPES}
        if not all((dirs[d] / "metrics.json").is_file() for d in DTYPES):
            continue
        (ids32, fp32, ans32), (ids16, bf16, ans16) = _predictions(dirs["float32"]), _predictions(dirs["bfloat16"])
        if ids32 != ids16:
            raise ValueError(f"seed {seed}: the two runs scored different test questions")
        row = {"seed": seed, "n": len(fp32), "runs": names,
               "same_answer": round(float(np.mean([x == y for x, y in zip(ans32, ans16)])), 4),
               "test": compare(bf16, fp32)}
        for d, hits in (("float32", fp32), ("bfloat16", bf16)):
            low, high = wilson_interval(hits.sum(), len(hits))
            m = read_json(dirs[d] / "metrics.json")
            row[d] = {"accuracy": round(float(hits.mean()), 4), "ci_low": round(low, 4), "ci_high": round(high, 4),
                      "best_epoch": m.get("best_epoch"), "train_seconds": m.get("train_seconds"),
                      "seconds_per_epoch": m.get("seconds_per_epoch"), "inference_seconds": m.get("inference_seconds"),
                      "train_tokens_per_s": m.get("train_tokens_per_s"), "precision": m.get("precision")}
            if (dirs[d] / "history.json").is_file():
                row[d]["val_match"] = [round(e["val_match"], 4) for e in read_json(dirs[d] / "history.json")]
        crossed = {d: dirs[d] / f"cross-{o}.jsonl" for d, o in zip(DTYPES, DTYPES[::-1])}
        if all(f.is_file() for f in crossed.values()):
            row["cross_scored"] = cross_score(seed, out, preset)  # reads the files, computes nothing new
        per_seed.append(row)
        seeds.append(seed)
        pairs.append((bf16, fp32))
    summary: dict = {"preset": preset, "seeds": seeds, "per_seed": per_seed,
                     "noise_floor": noise_floor(folder / "runs" / run_config("float32", 0, preset).name)}
    if per_seed:
        acc = {d: np.array([r[d]["accuracy"] for r in per_seed]) for d in DTYPES}
        summary["over_seeds"] = {
            **{d: {"mean": round(float(acc[d].mean()), 4),
                   "std": round(float(acc[d].std(ddof=1)), 4) if len(acc[d]) > 1 else None,
                   "accuracies": [float(x) for x in acc[d]]} for d in DTYPES},
            "paired_over_seeds": over_seeds(acc["bfloat16"], acc["float32"]),
            "pooled_mcnemar": pooled_mcnemar(pairs)}
    write_json(folder / "precision_check.json", summary)
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/precision_check.py",
                                     description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("run", help="train and score one (dtype, seed) run")
    one.add_argument("--dtype", choices=DTYPES, required=True)
    one.add_argument("--seed", type=int, required=True)
    cross = sub.add_parser("cross", help="answer with each run's weights in the other dtype")
    cross.add_argument("--seed", type=int, required=True)
    rep = sub.add_parser("report", help="compare the finished pairs")
    for p in (one, cross, rep):
        p.add_argument("--out", default=None, help=f"study folder (default outputs/studies/{DEFAULT_OUT})")
        p.add_argument("--preset", default="quick", help="whose ExplaGraphs G-Retriever configuration (default quick)")
    args = parser.parse_args(argv)
    if args.command == "run":
        m = run_one(args.dtype, args.seed, args.out, args.preset)
        print(json.dumps({k: m.get(k) for k in ("name", "score", "num_test", "epochs_run", "train_seconds")}))
    elif args.command == "cross":
        print(json.dumps(cross_score(args.seed, args.out, args.preset), indent=1))
    else:
        s = report(args.out, args.preset)
        print(json.dumps({k: s.get(k) for k in ("over_seeds", "noise_floor")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
