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
    import torch

    return {"platform": platform.platform(), "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "python": platform.python_version(), "cuda": torch.cuda.is_available()}


def write_result(name: str, result: dict) -> Path:
    import shlex

    command = " ".join(["python", f"bench/{Path(sys.argv[0]).name}", *map(shlex.quote, sys.argv[1:])])
    result = {**result, "machine": machine(), "versions": package_versions(), "command": command}
    path = repo_root() / "outputs" / "bench" / f"{name}.json"
    write_json(path, result)
    return path
