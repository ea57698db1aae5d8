"""Measured speeds that ``gr_core.plan`` scales: the committed runs' throughputs and the target machines' profiles.

Every number is read from a file under ``outputs/`` that a run or bench wrote; a target with no measurement has
``None`` (its rows are "unknown" in the plan).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .paths import PACKAGE_PARENT
from .precision import run_precision

LORA_METHODS = ("lora", "g_retriever_lora")


@dataclass(frozen=True)
class Profile:
    """Where the plan is estimated for: ``train`` / ``lora`` / ``answer`` multiply the tokens/s of frozen-LLM training,
    LoRA training and answering of a committed run measured in fp32 on CPU (None: not measured for this target)."""

    name: str
    description: str
    train: float | None
    lora: float | None
    answer: float | None
    reasoner_seconds_per_question: dict = field(default_factory=dict)  # dataset key -> s per question and epoch
    basis: str = ""
    memory_gb: float | None = None  # the GPU's memory (1 GB = 1e9 bytes); None: a CPU, no GPU memory plan


def measured_root() -> Path:
    """The committed measurements the estimates read: the checkout's ``outputs/`` beside this package, whatever
    ``GR_OUTPUTS_DIR`` says (a user's own outputs elsewhere hold their runs' progress, not the speeds); an install
    outside a checkout has none, and its estimates say so."""
    return PACKAGE_PARENT / "outputs"


def bench_json(path: Path) -> dict:
    """A JSON file's contents; {} when it is missing or unreadable."""
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return {}


PROFILE_NAMES = ("cpu-fp32", "cpu-bf16", "cpu-avx2", "h100", "gpu-80gb", "gpu-24gb")  # the keys of profiles()


def profiles(root: Path | None = None) -> dict[str, Profile]:
    """The targets the plan can be estimated for, each from files under ``outputs/`` (``root``)."""
    root = Path(root) if root is not None else measured_root()
    prec = bench_json(root / "bench" / "precision.json").get("speedups_bf16_vs_fp32", {})
    cpu_reasoner = _reasoner_cpu(root)
    fp32 = bench_json(root / "bench" / "train_infer_throughput-float32.json")  # the committed runs' CPU, in fp32
    out = {
        "cpu-fp32": Profile("cpu-fp32", "2 CPU cores, LLM in fp32 (the committed runs' own speeds)", 1.0, 1.0, 1.0,
                            cpu_reasoner, "committed runs (outputs/*/runs)"),
        "cpu-bf16": Profile("cpu-bf16", "2 CPU cores with AVX512-BF16 (AMD EPYC Zen 4), LLM in bf16",
                            prec.get("g_retriever_step"), prec.get("g_retriever_lora_step"), prec.get("answers"),
                            cpu_reasoner, "committed fp32 runs x bf16/fp32 speedups of outputs/bench/precision.json"),
    }
    # a CPU without AVX512 (the committed runs' CPU has it): the same throughput bench in fp32 on such a CPU against
    # the committed runs' CPU; the reasoner has no timing there, so it takes the LLM training ratio (both fp32 GEMMs)
    avx2 = bench_json(root / "bench" / "train_infer_throughput-float32-avx2.json")
    ratio = answers = None
    if all(b.get("ours_train_tokens_per_s") and b.get("ours_infer_answers_per_s") for b in (avx2, fp32)):
        ratio = avx2["ours_train_tokens_per_s"] / fp32["ours_train_tokens_per_s"]
        answers = avx2["ours_infer_answers_per_s"] / fp32["ours_infer_answers_per_s"]
    out["cpu-avx2"] = Profile(
        "cpu-avx2", "2 CPU cores with AVX2 only (no AVX512, no bf16 units), LLM in fp32", ratio, ratio, answers,
        {k: v / ratio for k, v in cpu_reasoner.items()} if ratio else {},
        "committed fp32 runs x the fp32 throughput ratio of outputs/bench/train_infer_throughput-float32-avx2.json "
        "over train_infer_throughput-float32.json (LoRA and the reasoner: the frozen-LLM training ratio; neither is "
        "timed on such a CPU)")
    # the LLM on the GPU: bench/train_infer_throughput.py run there (its JSON copied to outputs/gpu/) against the same
    # bench in fp32 on the CPU; the two measure the same WebQSP batches
    on_gpu = bench_json(root / "gpu" / "train_infer_throughput.json")
    train = answer = None
    if on_gpu.get("ours_train_tokens_per_s") and fp32.get("ours_train_tokens_per_s"):
        train = on_gpu["ours_train_tokens_per_s"] / fp32["ours_train_tokens_per_s"]
        answer = on_gpu["ours_infer_answers_per_s"] / fp32["ours_infer_answers_per_s"]
    out["h100"] = Profile("h100", "one NVIDIA H100 80GB (the full preset's target)", train, train, answer,
                          _reasoner_gpu(root),
                          "reasoner: outputs/gpu/reasoner_sweep.jsonl; LLM: outputs/gpu/train_infer_throughput.json "
                          "over outputs/bench/train_infer_throughput-float32.json" + (
                              "" if train else " (no LLM throughput measured on a GPU yet: those rows are unknown; "
                                               "`python bench/train_infer_throughput.py` on the node measures it)"),
                          memory_gb=80.0)
    # memory-only targets: what fits is computed from the LLM's shapes (gr_core.gpu_plan); nothing was timed on them
    for gb, cards in ((80.0, "A100 80GB, H100"), (24.0, "RTX 4090, RTX A5000, A10, L4")):
        name = f"gpu-{gb:.0f}gb"
        out[name] = Profile(name, f"one {gb:.0f} GB GPU ({cards}): the memory plan; no speed measured on it", None,
                            None, None, {}, "none measured: the runs' times are unknown", memory_gb=gb)
    return out


@dataclass(frozen=True)
class TrainingRate:
    """A measured LLM training rate (``bench/train_infer_throughput.py``); ``flops_per_s`` = its MFU x its measured
    GEMM peak in the dtype used."""

    device: str
    tokens_per_s: float
    flops_per_s: float
    peak_flops_per_s: float  # the bench's measured GEMM peak in its dtype
    mfu: float
    dtype: str
    source: str


def training_rate(path: Path) -> TrainingRate | None:
    """The training rate recorded by ``bench/train_infer_throughput.py`` at ``path``; None when it is missing."""
    b = bench_json(path)
    if not (b.get("mfu") and b.get("best_dtype_peak_gflops") and b.get("ours_train_tokens_per_s")):
        return None
    machine = b.get("machine") or {}
    peak = float((b.get("gemm_peak_gflops_by_dtype") or {}).get(b.get("dtype")) or b["best_dtype_peak_gflops"]) * 1e9
    where = machine.get("gpu") or f"{machine.get('cpu_count', '?')} cores of {machine.get('cpu_model', 'a CPU')}"
    return TrainingRate(where, float(b["ours_train_tokens_per_s"]), b["mfu"] * peak, peak, float(b["mfu"]),
                        str(b.get("dtype")), f"outputs/{path.parent.name}/{path.name}")


def llm_training_rates(root: Path | None = None) -> dict[str, TrainingRate]:
    """The embedded SmolLM2-135M's measured training rates, ``gpu`` (the H100) and ``cpu`` (2 AVX512-BF16 cores);
    a missing file leaves its key out."""
    root = Path(root) if root is not None else measured_root()
    found = {"gpu": training_rate(root / "gpu" / "train_infer_throughput.json"),
             "cpu": training_rate(root / "bench" / "train_infer_throughput.json")}
    return {k: v for k, v in found.items() if v is not None}


def _reasoner_cpu(root: Path) -> dict:
    """Seconds per training question and epoch of the GNN-RAG reasoner on 2 CPU cores, per dataset key."""
    out = {}
    for path in sorted((root / "studies").glob("*/*/metrics.json")):
        m = bench_json(path)
        key, hist, n = m.get("key"), m.get("history") or [], m.get("num_train")
        if key and hist and n and all("seconds" in h for h in hist):
            per = sum(h["seconds"] for h in hist) / len(hist) / n
            out[key] = min(out.get(key, per), per)
    return out


def _reasoner_gpu(root: Path) -> dict:
    """The same on the H100, from ``outputs/gpu/reasoner_sweep.jsonl``."""
    out, sizes = {}, {}
    path = root / "gpu" / "reasoner_sweep.jsonl"
    if not path.is_file():
        return out
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if "train" in row and "key" in row:
            sizes[row["key"]] = row["train"]
        elif "run" in row and "seconds" in row:
            key = row["run"].split(":")[0]
            if sizes.get(key):
                per = row["seconds"] / sizes[key]
                out[key] = min(out.get(key, per), per)
    return out


def measured_runs(root: Path | None = None) -> pd.DataFrame:
    """One row per committed trained or answered run: dataset, method, tokens per training example, training
    tokens/s, validation and answering seconds per question, and its dtype (fp32 rows only are scaled)."""
    root = Path(root) if root is not None else measured_root()
    rows = []
    for mpath in sorted(root.glob("*/runs/*/metrics.json")) + sorted(root.glob("studies/*/runs/*/metrics.json")):
        m = bench_json(mpath)
        if not m.get("num_test") or m.get("inference_seconds") is None:  # reference rows (majority ...) answer no LLM
            continue
        hist = bench_json(mpath.parent / "history.json")  # {} when there is none
        llm = ((bench_json(mpath.parent / "config.json").get("model") or {}).get("llm") or {}).get("model")
        row = {"dataset": m.get("dataset"), "method": m.get("method"),
               "dtype": run_precision(m).get("dtype", "float32"),  # older runs: no record, fp32
               "run": str(mpath.parent), "llm": llm, "answer_s": m["inference_seconds"] / m["num_test"],
               "num_train": m.get("num_train") or 0}
        if hist and m.get("num_train"):
            row["tokens_per_example"] = hist[0]["train_tokens"] / m["num_train"]
            row["train_tps"] = sum(h["train_tokens"] for h in hist) / max(sum(h["train_seconds"] for h in hist), 1e-9)
            if m.get("num_val") and all("val_seconds" in h for h in hist):
                row["val_s"] = sum(h["val_seconds"] for h in hist) / len(hist) / m["num_val"]
        rows.append(row)
    df = pd.DataFrame(rows)
    if len(df):  # bf16 runs trained beside other processes: the fp32 runs alone are a clean basis to scale
        df = df[df.dtype == "float32"].sort_values("num_train", ascending=False)
    return df


def gnn_rag_measured(base: Path) -> dict:
    """Measured GNN-RAG costs (fp32, 2 CPU cores): seconds per answer per (dataset key, retriever) from the run with
    the most questions, and tokens per example and tokens/s of the two fine-tunes per dataset family."""
    answers, sizes, training = {}, {}, {}
    for path in sorted(base.glob("*/04_gnn_rag/retrievers.csv")) + sorted(base.glob("studies/*/retrievers.csv")):
        for r in pd.read_csv(path).to_dict("records"):
            k = (r["dataset"], r["retriever"])
            if r.get("questions", 0) > sizes.get(k, 0):
                sizes[k], answers[k] = r["questions"], float(r["s / answer"])
                answers.setdefault((r["dataset"].split("-")[0], r["retriever"]), float(r["s / answer"]))
    paths = {}  # relation-path generation (RoG beams): seconds per question, from the run with the most questions
    for path in sorted(base.glob("*/04_gnn_rag/summary.json")):
        for family, parts in (bench_json(path).get("llm_training") or {}).items():
            for key, sec in ((parts or {}).get("relation_path_seconds") or {}).items():
                q = sizes.get((key, "rog"), 0)
                if q and q >= paths.get(key, (0, 0.0))[0]:
                    paths[key] = (q, sec / q, str(path.relative_to(base)))
    for path in sorted(base.glob("*/04_gnn_rag/summary.json")) + sorted(base.glob("studies/*/metrics.json")):
        block = bench_json(path).get("llm_training") or bench_json(path).get("training") or {}
        for family, parts in block.items() if isinstance(block, dict) else []:
            for part, rec in (parts or {}).items() if isinstance(parts, dict) else []:
                hist, n = ((rec or {}).get("history") if isinstance(rec, dict) else None,
                           (rec or {}).get("train_examples"))
                if not hist or not n:
                    continue
                m = {"tokens_per_example": hist[0]["train_tokens"] / n,
                     "tps": sum(h["train_tokens"] for h in hist) / max(sum(h["train_seconds"] for h in hist), 1e-9),
                     "n": n, "basis": str(path.relative_to(base))}
                if n > training.get((family, part), {}).get("n", 0):
                    training[(family, part)] = m
    return {"answers": answers, "training": training, "paths": paths}
