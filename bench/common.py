"""What every benchmark (``bench/*.py``) shares and records: quiet progress bars by default, wall-clock timing
summaries, the machine a figure was measured on (CPU, bf16 support, the dtype ``"auto"`` resolves to), the peak
matrix-product rate, one training step's time, and the result file ``outputs/bench/<name>.json`` with the machine,
package versions and the command beside the figures. Timings from different CPUs are not comparable
(docs/timings.md). Tested in tests/test_bench_common.py."""
from __future__ import annotations

import os
import platform
import re
import shlex
import statistics
import sys
import time
from pathlib import Path

import torch

os.environ.setdefault("GR_PROGRESS", "off")  # before gr_core reads it

from gr_core.config import resolve_device
from gr_core.paths import outputs_root
from gr_core.precision import precision_record, resolve_dtype
from gr_core.runs import package_versions, write_json  # noqa: F401 (package_versions: for the scripts)


def timed(fn, *args, **kwargs):
    """``(fn(*args, **kwargs), seconds)``, queued CUDA work waited for on both sides (:func:`synchronize`)."""
    synchronize()
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    synchronize()
    return out, time.perf_counter() - start


def round_order(names, r: int) -> list:
    """``names`` in round ``r``'s order of an alternated comparison (AB, BA, AB, ...): drift in the machine's speed
    during a run falls on every variant alike."""
    names = list(names)
    return names if r % 2 == 0 else names[::-1]


def summarize(seconds: list[float]) -> dict:
    """Median, 90th percentile (nearest rank) and minimum of ``seconds``, and their number."""
    if not seconds:
        raise ValueError("summarize: no timings")
    s = sorted(seconds)
    return {"median_s": statistics.median(s), "p90_s": s[min(len(s) - 1, int(0.9 * len(s)))],
            "min_s": s[0], "n": len(s)}


def machine() -> dict:
    """The machine: its CPU model, AMX / AVX512-BF16 support, and ``auto_dtype``, what ``dtype="auto"`` resolves to
    here (a bench names the dtype it timed beside each figure)."""
    device = resolve_device("auto")
    precision = precision_record(resolve_dtype("auto", device), device)
    precision["auto_dtype"] = precision.pop("dtype")
    return {"platform": platform.platform(), "cpu_count": os.cpu_count(), "python": platform.python_version(),
            "cuda": torch.cuda.is_available(), **precision}


def synchronize() -> None:
    """Wait for queued CUDA work (a no-op on CPU), so a wall-clock timer measures the work and not its launch."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def gemm_peak_gflops(dtype, n: int | None = None, repeats: int = 5, device: str | None = None) -> float:
    """The best ``n x n`` matrix-product rate of this process in ``dtype``, in GFLOP/s (the MFU denominator); on
    ``device``, by default the GPU when one is visible (``n``: 2048 on CPU, 8192 on a GPU, where smaller products do
    not reach its peak)."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    n = n or (8192 if device == "cuda" else 2048)
    a, b = torch.randn(n, n, device=device).to(dtype), torch.randn(n, n, device=device).to(dtype)
    torch.mm(a, b)
    synchronize()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        torch.mm(a, b)
        synchronize()
        best = min(best, time.perf_counter() - start)
    return 2 * n ** 3 / best / 1e9


def memory_bandwidth_gbs(megabytes: int = 512, repeats: int = 5, device: str | None = None) -> float:
    """The best rate of one ``megabytes`` fp32 tensor copied into another, in GB/s of bytes read plus bytes written:
    the memory-bandwidth bound of a decode step, which reads every weight once per step whatever the batch."""
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    src = torch.ones(megabytes * 2 ** 20 // 4, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    synchronize()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        dst.copy_(src)
        synchronize()
        best = min(best, time.perf_counter() - start)
    return 2 * src.numel() * 4 / best / 1e9


def result_path(name: str) -> Path:
    """``outputs/bench/<name>.json`` (``name`` may hold a sub-folder: ``chat_follow_ups/<label>``)."""
    return outputs_root("bench") / f"{name}.json"


def slug(text: str) -> str:
    """``text`` as a file name: runs of characters other than letters, digits, ``_.-`` become one ``_``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "_"


def write_result(name: str, result: dict, argv: list[str] | None = None, path: Path | None = None) -> Path:
    """Write ``result`` with the machine, the package versions and the command that made it (``argv``: the
    script's ``sys.argv``) to ``path`` (default :func:`result_path` ``(name)``), atomically; returns the path."""
    argv = sys.argv if argv is None else argv
    command = " ".join(["python", f"bench/{Path(argv[0]).name}", *map(shlex.quote, argv[1:])])
    path = path or result_path(name)
    write_json(path, {**result, "machine": machine(), "versions": package_versions(), "command": command})
    return path


def train_step_seconds(loss_fn, opt, params, grad_clip: float) -> float:
    """Seconds of one training step as :func:`gr_core.g_retriever.train.fit` takes it: zero the gradients,
    ``loss_fn()`` (a scalar loss), backward, clip the gradient norm of ``params`` to ``grad_clip``, optimizer step."""
    synchronize()
    start = time.perf_counter()
    opt.zero_grad(set_to_none=True)
    loss_fn().backward()
    torch.nn.utils.clip_grad_norm_(params, grad_clip)
    opt.step()
    synchronize()
    return time.perf_counter() - start


def mean_loss(model, batch):
    """A ``GraphLLM``'s mean token loss on ``batch`` (its forward returns the sum and the count)."""
    total, count = model(batch)
    return total / count


def llm_flops(llm) -> tuple[int, int]:
    """(non-embedding parameters of the LLM, vocabulary-projection MACs per position).

    Leaves out LoRA adapters, the input embedding and the output projection, whether tied (SmolLM2: one tensor,
    which ``named_parameters`` yields once) or not, so ``n + vocab`` weights are what a decode step reads."""
    emb = llm.get_input_embeddings().weight
    head = llm.get_output_embeddings().weight
    total = sum(p.numel() for n, p in llm.named_parameters() if "lora_" not in n)
    return total - emb.numel() - (0 if head is emb else head.numel()), head.numel()
