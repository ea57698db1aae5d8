"""A preset's plan before it runs: every notebook, every training run, and its estimated time (``--dry-run``).

``./gr suite --preset full --dry-run`` (or ``python -m gr_core.plan --preset full``) estimates each run from
**measured** throughputs (:mod:`gr_core.speeds`), never from a model of the hardware, scaled to ``--profile``; every
row names its basis, and a resumable preset's plan is of what is left in ``outputs/<preset>/runs``. What is measured
where: docs/notebooks.md ("Before running: the plan and its estimate").
"""
from __future__ import annotations

import argparse
import math
import os
from itertools import product
from pathlib import Path

import pandas as pd

from .config import EMBEDDED_LLM, PRESETS, notebook_parameters, papers_data_notes, resolve_device
from .gpu_plan import (FP32, PAPER_LLM, PUBLISHED, Shapes, Step, describe_lines, duration, llm_shapes, memory_lines,
                       step_from_run_config, train_flops_per_token)
from .llm import unavailable
from .paths import PACKAGE_PARENT, DataNotFoundError, data_root, find_notebooks, outputs_root
from .precision import cpu_info, dtype_name, resolve_dtype
from .runs import config_hash, seed_progress
from .published import PAPER_TABLE12
from .speeds import (LORA_METHODS, PROFILE_NAMES, Profile, bench_json, gnn_rag_measured, llm_training_rates,
                     measured_root, measured_runs, profiles)

# Split sizes (train, val, test) as the loaders build them (gr_core.graphqa.load_dataset; tested against it).
SPLIT_SIZES = {
    "explagraphs": (1659, 553, 554), "webqsp": (976, 326, 326), "webqsp_full": (0, 0, 18), "clevr": (459, 131, 260),
    "metaqa-1hop": (8993, 999, 9947), "metaqa-2hop": (13385, 1487, 14872), "metaqa-3hop": (12847, 1427, 14274),
    # the papers' data when fetched (paths.papers_data_here): RoG's published splits (dataset cards; GNN-RAG Table 7)
    # and GR's 100k GQA sample split 6:2:2 by image (about, since images hold different question counts)
    "rog_webqsp": (2826, 246, 1628), "rog_cwq": (27639, 3519, 3531), "gqa": (60000, 20000, 20000),
}

NOTEBOOKS = PACKAGE_PARENT / "notebooks"  # the repository's, which --only picks from


# the measured method that stands in for one without a committed run: the same inputs (graph token, text, LoRA),
# so the same tokens per example and speed (the prompt vectors / encoder kind change neither much)
STAND_IN = {"prompt_tuning": "g_retriever", "gr_wo_projector": "g_retriever", "gr_wo_retrieval": "g_retriever",
            "g_retriever_gcn": "g_retriever", "g_retriever_gat": "g_retriever", "gr_wo_text": "graph_token",
            "lora": "g_retriever_lora", "question_only": "zero_shot", "zero_cot": "zero_shot", "cot_bag": "zero_shot",
            "kaping": "zero_shot"}


def _reference(measured: pd.DataFrame, dataset: str, method: str, need: str) -> pd.Series | None:
    """The measured run to take ``need`` from: the same dataset and method, else the same dataset and the method's
    stand-in (:data:`STAND_IN`), else the same dataset and a method of the same kind (LoRA or not)."""
    if not len(measured) or need not in measured:
        return None
    same = measured[(measured.dataset == dataset) & measured[need].notna()]
    for m in (method, STAND_IN.get(method)):
        exact = same[same.method == m]
        if m and len(exact):
            return exact.iloc[0]
    kind = same.method.isin(LORA_METHODS) if method in LORA_METHODS else ~same.method.isin(LORA_METHODS)
    return same[kind].iloc[0] if len(same[kind]) else None


def estimate_run(dataset: str, method: str, seeds: int, epochs: int, sizes: tuple[int, int, int], trained: bool,
                 measured: pd.DataFrame, profile: Profile, name: str | None = None, llm: str = EMBEDDED_LLM) -> dict:
    """One planned run (all its seeds): questions, tokens and estimated seconds, with the measured run it scales
    (only runs of the same ``llm`` are a basis); ``name`` the run's name without ``-seed<k>``."""
    n_train, n_val, n_test = sizes
    row = {"name": name or f"{dataset}-{method}", "dataset": dataset, "method": method, "seeds": seeds,
           "epochs": epochs if trained else 0, "train": n_train if trained else 0, "val": n_val if trained else 0,
           "test": n_test, "tokens": None}
    why = unavailable(llm)
    if why:
        return {**row, "seconds": 0, "basis": f"skipped by the notebook: {why}"}
    measured = measured[measured.llm == llm] if len(measured) else measured
    factor = profile.lora if method in LORA_METHODS else profile.train
    seconds, basis = 0.0, []
    if trained:
        ref = _reference(measured, dataset, method, "tokens_per_example")
        if ref is None:
            return {**row, "seconds": None, "basis": "no measured run"}
        tokens = n_train * ref.tokens_per_example * epochs
        row["tokens"] = round(tokens * seeds)
        if factor is None:
            return {**row, "seconds": None, "basis": f"no {profile.name} throughput; tokens from {Path(ref.run).name}"}
        seconds += tokens / (ref.train_tps * factor)
        if n_val and not math.isnan(ref.get("val_s", math.nan)):
            seconds += epochs * n_val * ref.val_s / factor
        basis.append(f"{Path(ref.run).parent.parent.name}/{Path(ref.run).name}")
    ans = _reference(measured, dataset, method, "answer_s")
    if ans is None or profile.answer is None:
        return {**row, "seconds": None, "basis": "no measured answers"}
    seconds += n_test * ans.answer_s / profile.answer
    if not basis or Path(ans.run).name not in basis[0]:
        basis.append(f"answers: {Path(ans.run).parent.parent.name}/{Path(ans.run).name}")
    return {**row, "seconds": round(seconds * seeds), "basis": "; ".join(basis)}


def _sizes(params: dict, dataset: str) -> tuple[int, int, int]:
    full = SPLIT_SIZES.get(dataset, SPLIT_SIZES.get(f"{dataset}-2hop", (0, 0, 0)))
    return tuple(min(full[i], params.get(k) or full[i]) for i, k in enumerate(("max_train", "max_val", "max_test")))


def with_progress(row: dict, runs_dir: Path, seeds: list[int], hashes: list[str | None], estimate,
                  llm_dtype: str | None = None, inputs: dict | None = None) -> dict:
    """``row`` (all its seeds) less what ``runs_dir`` holds: a finished seed costs nothing, an interrupted one its
    epochs left (``estimate(epochs)``: one seed's seconds), one of another configuration, ``inputs`` or ``llm_dtype``
    (:func:`gr_core.runs.seed_progress`) all its time."""
    states = [seed_progress(runs_dir / f"{row['name']}-seed{k}", h, llm_dtype, inputs) for k, h in zip(seeds, hashes)]
    done = sum(s == "done" for s, _ in states)
    conflicts = [f"seed{k}" for k, (s, _) in zip(seeds, states) if s == "conflict"]
    partial = [(k, e) for k, (s, e) in zip(seeds, states) if s == "partial"]
    note = [f"{done}/{len(seeds)} seeds done"] if done else []
    note += [f"seed{k} resumes after epoch {e}" for k, e in partial]
    note += [f"{', '.join(conflicts)}: a finished run of another configuration or other inputs is in the way"
             ] if conflicts else []
    if not note:  # nothing there yet
        return {**row, "done": ""}
    seconds = row["seconds"]
    if done == len(seeds):
        seconds = 0  # nothing left to train, measured speed or not
    elif seconds is not None:
        per_seed = seconds / max(len(seeds), 1)
        left = [estimate(max(row["epochs"] - e, 0)) for _, e in partial]
        # a seed in another configuration's way is trained again once its directory is cleared
        seconds = round(per_seed * (len(seeds) - done - len(partial)) + sum(x for x in left if x is not None))
    return {**row, "seconds": seconds, "done": "; ".join(note)}


def training_rows(preset: str, measured: pd.DataFrame, profile: Profile, root: Path | None = None,
                  overrides: dict | None = None, only: list[str] | None = None) -> list[dict]:
    """The runs of notebooks 03 and 07 (07 reuses 03's runs of the same configuration, unless ``only`` leaves 03
    out), less the seeds already finished (:func:`with_progress`)."""
    from .g_retriever.experiments import dataset_settings, preset_run_config  # noqa: PLC0415 deferred: loads torch (~1.5 s at start-up) through gr_core.g_retriever; this module stays torch-free
    from .g_retriever.model import method_config  # noqa: PLC0415 deferred: as above
    from .g_retriever.train import run_inputs  # noqa: PLC0415 deferred: as above

    runs_dir = (Path(root) / preset if root is not None else outputs_root(preset, create=False)) / "runs"
    rows = []

    def add(notebook: str, p: dict, params: dict, dataset: str, method: str, name: str | None = None,
            llm: str = EMBEDDED_LLM) -> None:
        # a method of the plan trains its seeds (an untrained one runs once), a sweep's run (``name``) one seed;
        # ``params``: the run's own
        sweep = name is not None
        trained = sweep or (method_config(method).trainable and params.get("num_epochs", 0) > 0)
        n_seeds = int(p.get("num_seeds", 1)) if trained and not sweep else 1
        epochs, sizes, first = params.get("num_epochs", 0), _sizes(params, dataset), int(p.get("seed", 0))
        row = estimate_run(dataset, method, n_seeds, epochs, sizes, trained, measured, profile, name=name, llm=llm)
        seeds = list(range(first, first + n_seeds))
        # the configuration each seed's run directory must hold (the notebook's own; None: not checked, e.g. a sweep)
        try:
            cfgs = [None if sweep else preset_run_config(preset, dataset, method, k, notebook, overrides)
                    for k in seeds]
        except OSError:  # gr_wo_projector reads the LLM's width from its config: a hub id not downloaded here
            cfgs = [None] * len(seeds)
        hashes = [None if c is None else config_hash(c.to_dict()) for c in cfgs]
        dtype = None if cfgs[0] is None else dtype_name(resolve_dtype(cfgs[0].model.llm.dtype,
                                                                       resolve_device(cfgs[0].model.llm.device)))
        try:  # what run() checks a finished run against besides its config (data or a model absent: not checked)
            inputs = None if cfgs[0] is None else run_inputs(cfgs[0])
        except OSError:
            inputs = None
        rows.append({"notebook": notebook, **with_progress(row, runs_dir, seeds, hashes, lambda e: estimate_run(
            dataset, method, 1, e, sizes, trained, measured, profile, name=name, llm=llm)["seconds"], dtype, inputs)})

    seen = set()
    p3 = notebook_parameters(preset, "03_training", overrides)
    per3 = p3.get("per_dataset") or {}
    chosen = {nb.stem for nb in find_notebooks(NOTEBOOKS, only)}  # --only 3 is 03 too
    with_03 = "03_training" in chosen
    if with_03:  # a per_dataset key naming no planned dataset (a typo) is refused here, as the notebook refuses it
        dataset_settings(p3, per3, list(p3.get("plan") or {}))
    for dataset, methods in (p3.get("plan") or {}).items() if with_03 else ():
        for method in methods:
            add("03_training", p3, {**p3, **(per3.get(dataset) or {}), **(per3.get(f"{dataset}/{method}") or {})},
                dataset, method)
            seen.add((dataset, method))
    p7 = notebook_parameters(preset, "07_ablations", overrides)
    per7 = p7.get("per_dataset") or {}
    ablated = p7.get("ablation_dataset", "webqsp")
    if "07_ablations" in chosen:  # the datasets notebook 07 passes to dataset_settings
        dataset_settings(p7, per7, sorted({ablated, *p7.get("encoder_datasets", []),
                                           p7.get("llm_size_dataset") or ablated, p7.get("k_dataset") or ablated}))
    wanted = [(p7.get("ablation_dataset", "webqsp"), m) for m in p7.get("ablations", [])]
    wanted += [(d, m) for d in p7.get("encoder_datasets", []) for m in p7.get("encoders", [])]
    for dataset, method in wanted:
        if (dataset, method) not in seen:
            seen.add((dataset, method))
            add("07_ablations", p7, {**p7, **(per7.get(dataset) or {})}, dataset, method)
    dataset = p7.get("k_dataset") or p7.get("ablation_dataset", "webqsp")
    for k, ce in product(p7.get("k_grid", []), p7.get("ce_grid", [])):
        add("07_ablations", p7, p7, dataset, "g_retriever", name=f"{dataset}-g_retriever-k{k}-ce{ce}")
    dataset = p7.get("llm_size_dataset") or p7.get("ablation_dataset", "webqsp")
    for llm in p7.get("llm_sizes", []):  # GR Table 8: G-Retriever with another LLM (notebook 03's run is the first)
        variant = "llm-" + llm.replace("/", "_").replace(":", "_")
        add("07_ablations", p7, {**p7, **(per7.get(dataset) or {})}, dataset, "g_retriever",
            name=f"{dataset}-g_retriever-{variant}", llm=llm)
    return rows


def gnn_rag_rows(preset: str, profile: Profile, root: Path | None = None, overrides: dict | None = None) -> list[dict]:
    """Notebook 04: the reasoner per dataset key (training questions x epochs x measured seconds per question), the
    two LoRA fine-tunes per dataset family, and the answers (questions x retrievers x measured seconds per answer)."""
    from .studies.gnn_rag import dataset_keys  # noqa: PLC0415 deferred: loads torch (~1.5 s at start-up) through gr_core.studies.gnn_rag; this module stays torch-free
    from .gnn_rag.evidence import RETRIEVERS  # noqa: PLC0415 deferred: loads torch (~1.5 s at start-up) through gr_core.gnn_rag.evidence; this module stays torch-free

    base = Path(root) if root is not None else measured_root()
    p = notebook_parameters(preset, "04_gnn_rag", overrides)
    by_key = p.get("by_key") or {}
    keys = dataset_keys(p.get("datasets", []), p.get("metaqa_hops", []))
    retrievers = list(p.get("retrievers", RETRIEVERS))  # the notebook's default: every retriever
    rog = any("rog" in r for r in retrievers)
    measured, rows = gnn_rag_measured(base), []

    def add(name, dataset, method, *, epochs, train, val, test, seconds, basis) -> None:
        rows.append({"notebook": "04_gnn_rag", "name": name, "dataset": dataset, "method": method, "seeds": 1,
                     "epochs": epochs, "train": train, "val": val, "test": test, "tokens": None, "seconds": seconds,
                     "basis": basis})

    for key, _, _ in keys:
        own = {**p, **(by_key.get(key) or {})}
        n, epochs = _sizes(own, key)[0], int(own.get("num_epochs", 1))
        per = profile.reasoner_seconds_per_question.get(key)
        add(f"{key}-reasoner", key, "GNN reasoner", epochs=epochs, train=n,
            val=own.get("max_val") or SPLIT_SIZES[key][1], test=own.get("max_test") or SPLIT_SIZES[key][2],
            seconds=None if per is None else round(n * epochs * per),
            basis="measured s per question and epoch" if per is not None else "no measured reasoner")
    families = {family: [k for k, f, _ in keys if f == family] for _, family, _ in keys}
    for family, fkeys in families.items():
        n = (p.get("llm_max_train") or SPLIT_SIZES[fkeys[0]][0]) * len(fkeys)
        parts = [("answer_generator", p.get("llm_epochs", 1))]
        if rog:
            parts.append(("relation_generator", p.get("rog_epochs", 1)))
        for part, epochs in parts:
            m = measured["training"].get((family, part))
            sec = (None if m is None or profile.lora is None
                   else round(n * epochs * m["tokens_per_example"] / (m["tps"] * profile.lora)))
            add(f"{family}-{part}", family, part, epochs=epochs, train=n, val=0, test=0, seconds=sec,
                basis=m["basis"] if m else "no measured fine-tune")
    # the RoG beams generated once per question: the bench's (batched as the notebook batches; in fp32, as the rest)
    bench, bench_paths = (bench_json(base / "bench" / "relation_paths.json") if rog else {}), None
    if bench.get("seconds_per_question"):
        speedup = bench_json(base / "bench" / "precision.json").get("speedups_bf16_vs_fp32", {}).get("answers")
        factor = (speedup or math.nan) if bench.get("dtype") == "bfloat16" else 1.0
        bench_paths = (bench["questions"], bench["seconds_per_question"] * factor,
                       f"bench/relation_paths.json: {bench['seconds_per_question']:.3f} s in {bench.get('dtype')}")
    for key, name, _ in keys:
        n = min(SPLIT_SIZES[key][2], p.get("llm_max_test") or SPLIT_SIZES[key][2])
        each = [(r, measured["answers"].get((key, r), measured["answers"].get((name, r)))) for r in retrievers]
        missing = [r for r, s in each if s is None]
        secs = sum((n * s / (profile.answer or math.nan) for _, s in each if s is not None), 0.0)
        basis = "s / answer of the largest measured run per retriever" + (f" (none for {missing})" if missing else "")
        if rog:
            known = bench_paths or measured["paths"].get(key) or next(
                (v for k, v in measured["paths"].items() if k.split("-")[0] == name), None)
            if known is None:
                missing.append("relation paths")
            else:
                secs += n * known[1] / (profile.answer or math.nan)
                basis += f"; relation paths on {known[0]} questions ({known[2]})"
        add(f"{key}-answers", key, "answers: " + "/".join(retrievers), epochs=0, train=0, val=0, test=n,
            seconds=None if missing or math.isnan(secs) else round(secs), basis=basis)
    return rows


def plan(preset: str, profile: str = "cpu-bf16", root: Path | None = None, overrides: dict | None = None,
         only: list[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(runs, notebooks)``: every estimated run, and per notebook the runs' sum plus its other measured work
    (``overrides``, ``only``: the suite's ``-p`` and ``--only``)."""
    prof = profiles(root)[profile]
    measured = measured_runs(root)
    chosen = find_notebooks(NOTEBOOKS, only)
    # notebook 04's rows only where it runs: its settings (a -p datasets=... meant for 05) are checked there alone
    runs = pd.DataFrame(training_rows(preset, measured, prof, root, overrides, only)
                        + (gnn_rag_rows(preset, prof, root, overrides) if any(nb.stem == "04_gnn_rag" for nb in chosen)
                           else []))
    base = Path(root) if root else measured_root()
    suite = bench_json(base / preset / "suite.json")
    last = {n.get("notebook"): n.get("seconds") for n in suite.get("notebooks", [])  # a stopped run's time is part
            if isinstance(n, dict) and n.get("status") == "passed"}
    rows = []
    if len(runs):
        runs = runs[runs.notebook.isin([nb.stem for nb in chosen])].reset_index(drop=True)
    for nb in chosen:
        mine = runs[runs.notebook == nb.stem] if len(runs) else runs
        known = mine.seconds.dropna().sum() if len(mine) else 0.0
        unknown = int(mine.seconds.isna().sum()) if len(mine) else 0
        measured = last.get(nb.name)  # the notebook's last time, less what its committed runs took
        other = None if measured is None else max(0.0, measured - (
            _gnn_rag_seconds(base / preset / "04_gnn_rag") if nb.stem == "04_gnn_rag"
            else _runs_seconds(base / preset / "runs", mine)))
        rows.append({"notebook": nb.stem, "runs": len(mine), "runs_seconds": round(known), "runs_unknown": unknown,
                     "other_seconds": None if other is None else round(other), "last_measured_seconds": measured,
                     "estimate_seconds": round(known + (other or 0.0))})
    return runs, pd.DataFrame(rows)


def _gnn_rag_seconds(folder: Path) -> float:
    """Seconds notebook 04's last run spent in what :func:`gnn_rag_rows` estimates (``summary.json``,
    ``retrievers.csv``)."""
    summary = bench_json(folder / "summary.json")
    total = sum(h.get("seconds", 0.0) for hist in (summary.get("history") or {}).values() for h in hist)
    for parts in (summary.get("llm_training") or {}).values():
        total += sum(float((rec or {}).get("seconds") or 0) for rec in parts.values() if isinstance(rec, dict))
    if (folder / "retrievers.csv").is_file():
        t = pd.read_csv(folder / "retrievers.csv")
        total += float((t["s / answer"] * t["questions"]).sum())
    return total


def _runs_seconds(runs_dir: Path, planned: pd.DataFrame) -> float:
    """Seconds the committed runs of ``planned`` took: the part of a notebook's measured time the estimates replace."""
    total = 0.0
    for r in planned.itertuples():
        for k in range(int(r.seeds)):
            name = f"{r.name}-seed{k}"
            # a run the preset has since moved to a study folder (its configuration changed) still took its time
            found = [runs_dir / name] + sorted(runs_dir.parent.parent.glob(f"studies/*/runs/{name}"))
            where = next((d for d in found if (d / "metrics.json").is_file()), runs_dir / name)
            m = bench_json(where / "metrics.json")
            hist = bench_json(where / "history.json") or []
            total += sum(float(m.get(x) or 0) for x in ("train_seconds", "inference_seconds", "build_seconds"))
            total += sum(float(h.get("val_seconds") or 0) for h in hist)
    return total


def render(preset: str, profile: str = "cpu-bf16", root: Path | None = None, overrides: dict | None = None,
           only: list[str] | None = None) -> str:
    """The plan as the text ``--dry-run`` prints (arguments as :func:`plan`)."""
    runs, notebooks = plan(preset, profile, root, overrides, only)
    prof = profiles(root)[profile]
    cpu = cpu_info()
    lines = [f"plan of preset {preset!r} on {prof.name}: {prof.description}", f"  speeds from: {prof.basis}",
             f"  this machine: {os.cpu_count()} cores, {cpu.model}, {cpu.capability}"
             f"{', AVX512-BF16' if cpu.avx512_bf16 else ''}{', AMX' if cpu.amx else ''}"]
    try:
        data_root()
    except DataNotFoundError as err:  # the run would stop at its first notebook
        lines.append(f"  data: MISSING, every notebook reads it: {str(err).splitlines()[0]}")
    lines += [f"  data: {note}" for note in papers_data_notes(preset)] + [""]
    for nb in notebooks.itertuples():
        other = ("other work not measured" if pd.isna(nb.other_seconds)
                 else f"other work {nb.other_seconds / 60:.1f} min (last measured {nb.last_measured_seconds / 60:.1f} "
                      "min in all)")
        lines.append(f"{nb.notebook}: about {nb.estimate_seconds / 60:.1f} min = {nb.runs} runs "
                     f"{nb.runs_seconds / 60:.1f} min" + (f" (+{nb.runs_unknown} unknown)" if nb.runs_unknown else "")
                     + f" + {other}")
        for r in runs[runs.notebook == nb.notebook].itertuples() if len(runs) else []:
            t = "unknown" if pd.isna(r.seconds) else f"{r.seconds / 60:6.1f} min"
            lines.append(f"    {r.name:44s} seeds {r.seeds} epochs {r.epochs:>2} "
                         f"train {r.train:>6} test {r.test:>6}  {t}   [{r.basis}]"
                         + (f" {{{r.done}}}" if isinstance(getattr(r, "done", ""), str) and r.done else ""))
    total = notebooks.estimate_seconds.sum()
    unknown = int(runs.seconds.isna().sum()) if len(runs) else 0
    tokens = runs.tokens.dropna().sum() if len(runs) else 0
    missing = int(notebooks.other_seconds.isna().sum())
    started = bool(len(runs)) and "done" in runs and runs["done"].fillna("").astype(bool).any()
    lines += ["", f"estimated{', for what is left' if started else ''}: {total / 60:.0f} min ({total / 3600:.1f} h) "
              f"on {prof.name}"
              + (f", a lower bound: {unknown} runs have no measured speed here" if unknown else "")
              + (f", and {missing} notebooks' other work (datasets, retrieval, reports) no measured time" if missing
                 else ""),
              f"LLM training tokens in all: {tokens / 1e6:.1f} M (x epochs and seeds; divide by a measured tokens/s "
              "for the time)"]
    if prof.memory_gb:  # a GPU: does the preset's LLM fit, and how long is an epoch (gr_core.gpu_plan)
        # the paper's WebQSP (RoG's 2,826 training questions), fetched here or not yet: what a GPU is booked for
        n_train = _sizes(notebook_parameters(preset, "03_training", overrides), "rog_webqsp")[0]
        lines += ["", *gpu_lines(preset, prof, n_train, overrides, root)]
    return "\n".join(lines)


def epoch_lines(s: Shapes, step: Step, n_train: int, root: Path | None = None, on_h100: bool = True) -> list[str]:
    """Time per WebQSP epoch of ``n_train`` questions of ``step.seq_len`` tokens for LLM shapes ``s``: FLOPs over the
    embedded SmolLM2-135M's measured rates (:func:`gr_core.speeds.llm_training_rates`), expected and bounds."""
    rates = llm_training_rates(root)
    gpu, cpu = rates.get("gpu"), rates.get("cpu")
    if gpu is None:
        return ["  time per epoch: unknown, no LLM training rate measured on a GPU "
                "(python bench/train_infer_throughput.py on the node writes it)"]
    per_example = step.seq_len  # RoG's 2-hop graphs fill the graph-text budget (GR Table 4: 610 tokens retrieved)
    tokens = n_train * per_example
    flops = train_flops_per_token(s, step.label_rows / per_example)
    ckpt = train_flops_per_token(s, step.label_rows / per_example, True) / flops
    where = "" if on_h100 else "on an H100 (nothing measured on this card): "
    lines = [f"  time per RoG-webqsp epoch {where}{n_train} questions x {per_example:.0f} tokens (the step above) "
             f"x {flops / 1e9:.1f} GFLOP per token (4 N + 4 V d per logit row; x{ckpt:.2f} with "
             "checkpointing) over a measured rate:"]
    if cpu is not None:
        lines.append(f"    expected {duration(tokens * flops / (cpu.mfu * gpu.peak_flops_per_s))}: {cpu.mfu:.1%} MFU "
                     f"(SmolLM2-135M compute-bound, {cpu.dtype} on {cpu.device}: {cpu.source}) of the H100's "
                     f"measured {gpu.dtype} GEMM peak {gpu.peak_flops_per_s / 1e12:.0f} TFLOP/s")
    return lines + [
        f"    at most {duration(tokens * flops / gpu.flops_per_s)}: SmolLM2-135M's H100 rate scaled by FLOPs "
        f"({gpu.tokens_per_s:.0f} tokens/s = {gpu.flops_per_s / 1e12:.2f} TFLOP/s, {gpu.mfu:.2%} MFU: a launch-bound "
        f"small model; {gpu.source})",
        f"    at least {duration(tokens * flops / gpu.peak_flops_per_s)}: at that peak"]


def gpu_lines(preset: str, profile: Profile, n_train: int, overrides: dict | None = None,
              root: Path | None = None) -> list[str]:
    """The GPU plan of a GPU profile (:mod:`gr_core.gpu_plan`) for the preset's LLM and the paper's Llama-2-7B: the
    memory of the preset's G-Retriever + LoRA step and the time per epoch."""
    from .g_retriever.experiments import preset_run_config  # noqa: PLC0415 deferred: loads torch (~1.5 s at start-up) through gr_core.g_retriever; this module stays torch-free

    cfg = preset_run_config(preset, "webqsp", "g_retriever_lora", 0, "03_training", overrides)
    step, llm = step_from_run_config(cfg), cfg.model.llm
    models = [(llm.model, " (the preset's LLM)")]
    if llm_shapes(llm.model) != PUBLISHED[PAPER_LLM.lower()]:
        models.append((PAPER_LLM, " (the paper's LLM, GR App. B.1)"))
    dtype_bytes = FP32 if llm.dtype == "float32" else 2  # "auto" is bf16 on CUDA
    lines = []
    for model, note in models:
        s = llm_shapes(model)
        lines += ([""] if lines else []) + [f"GPU plan: {model}{note} on {profile.name}, {profile.memory_gb:.0f} GB"]
        if s is None:
            lines.append(f"  no shapes for {model}: give a local model folder (its config.json is read)")
            continue
        lines += [*describe_lines(s, step), *memory_lines(s, step, (llm.quantization, llm.gradient_checkpointing),
                                                          profile.memory_gb, dtype_bytes, cfg.train.eval_batch_size),
                  *epoch_lines(s, step, n_train, root, on_h100=profile.name == "h100")]
    return lines + [f"  the paper beside it: G-Retriever {PAPER_TABLE12['g_retriever'][1]} on WebQSP, 2,826 questions "
                    "of ~610 retrieved tokens, on 2 x A100-80G (GR Tables 4, 12)"]


def default_profile(preset: str) -> str:
    """``h100`` for the full preset, else this CPU: ``cpu-bf16`` where ``"auto"`` resolves to bf16, ``cpu-avx2``
    without AVX512, else ``cpu-fp32``."""
    if preset == "full":
        return "h100"
    if str(resolve_dtype("auto", "cpu")).endswith("bfloat16"):
        return "cpu-bf16"
    return "cpu-fp32" if cpu_info().capability.startswith("AVX512") else "cpu-avx2"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gr_core.plan", description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="quick", choices=PRESETS)
    parser.add_argument("--profile", default=None, choices=PROFILE_NAMES, help="where to estimate for (default: h100 "
                        "for full, else this CPU's); a GPU profile adds the LLM's memory plan")
    args = parser.parse_args(argv)
    print(render(args.preset, args.profile or default_profile(args.preset)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
