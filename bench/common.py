"""Shared helpers for the benchmarks: timing, machine description, result file."""
from __future__ import annotations

import os
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("GR_PROGRESS", "off")

from gr_core.paths import repo_root  # noqa: E402
from gr_core.runs import package_versions, write_json  # noqa: E402


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def summarize(seconds: list[float]) -> dict:
    s = sorted(seconds)
    return {"median_s": statistics.median(s), "p90_s": s[min(len(s) - 1, int(0.9 * len(s)))],
            "min_s": s[0], "n": len(s)}


def machine() -> dict:
    """The machine: its CPU model, AMX / AVX512-BF16 support, and ``auto_dtype``, what ``dtype="auto"`` resolves to
    here (a bench names the dtype it timed beside each figure). Timings from different CPUs are not comparable."""
    import torch

    from gr_core.config import resolve_device
    from gr_core.precision import precision_record, resolve_dtype

    device = resolve_device("auto")
    precision = precision_record(resolve_dtype("auto", device), device)
    precision["auto_dtype"] = precision.pop("dtype")
    return {"platform": platform.platform(), "cpu_count": os.cpu_count(), "python": platform.python_version(),
            "cuda": torch.cuda.is_available(), **precision}


def gemm_peak_gflops(dtype, n: int = 2048, repeats: int = 5) -> float:
    """The best ``n x n`` matrix-product rate of this process in ``dtype``, in GFLOP/s (the MFU denominator)."""
    import torch

    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
    torch.mm(a, b)
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - start)
    return 2 * n ** 3 / best / 1e9


def write_result(name: str, result: dict) -> Path:
    import shlex

    command = " ".join(["python", f"bench/{Path(sys.argv[0]).name}", *map(shlex.quote, sys.argv[1:])])
    result = {**result, "machine": machine(), "versions": package_versions(), "command": command}
    path = repo_root() / "outputs" / "bench" / f"{name}.json"
    write_json(path, result)
    return path


def train_step_seconds(loss_fn, opt, params, grad_clip: float) -> float:
    """Seconds of one training step as ``gr_core.train.fit`` takes it: zero the gradients, ``loss_fn()`` (a scalar
    loss), backward, clip the gradient norm of ``params`` to ``grad_clip``, optimizer step."""
    import torch

    start = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    loss_fn().backward()
    torch.nn.utils.clip_grad_norm_(params, grad_clip)
    opt.step()
    return time.perf_counter() - start


def mean_loss(model, batch):
    """A ``GraphLLM``'s mean token loss on ``batch`` (its forward returns the sum and the count)."""
    total, count = model(batch)
    return total / count
