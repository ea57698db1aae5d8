"""Numeric precision from the hardware: bf16 where the machine computes bf16 natively, fp32 where it does not.

bf16 matrix products run 7-9x faster than fp32 on CPUs with AMX tiles, 2.3-3.3x with AVX512-BF16, and 50-200x
*slower* where torch emulates them (docs/precision.md). ``dtype="auto"`` therefore resolves to bf16 on CUDA (compute
capability 8+) and on CPUs with AMX or AVX512-BF16, else fp32; ``GR_DTYPE`` overrides it. Only the frozen LLM takes
that dtype. :func:`precision_record` goes into every run's ``metrics.json``, every bench JSON and ``suite.json``.
"""
from __future__ import annotations

import json
import os
import platform
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

DTYPE_OVERRIDE = "GR_DTYPE"  # environment variable: what "auto" resolves to, whatever the hardware
RESOLVABLE = ("float32", "bfloat16")


@dataclass(frozen=True)
class CPUInfo:
    """What this CPU offers for bf16: its model name, AMX tiles, AVX512-BF16 instructions, torch's ISA level."""

    model: str
    amx: bool
    avx512_bf16: bool
    capability: str

    @property
    def native_bf16(self) -> bool:
        """Whether bf16 products run on the hardware (AMX tiles or AVX512-BF16 instructions) rather than emulated."""
        return self.amx or self.avx512_bf16


def _cpu_flags(path: str | os.PathLike = "/proc/cpuinfo") -> tuple[str, set[str]]:
    """The model name and the flags of the first processor in ``path`` (no flags without the file)."""
    model, flags = "", set()
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and not model:
                    model = value.strip()
                elif key == "flags" and not flags:
                    flags = set(value.split())
                if model and flags:
                    break
    except OSError:
        pass
    return model or platform.processor() or platform.machine() or "unknown", flags


@lru_cache(maxsize=1)
def cpu_info() -> CPUInfo:
    """This machine's CPU, read once per process: torch's own checks where it has them, else the kernel's flags."""
    import torch  # noqa: PLC0415 deferred: torch (~1.5 s at start-up), needed only here

    model, flags = _cpu_flags()
    amx = getattr(torch.cpu, "_is_amx_tile_supported", None)
    bf16 = getattr(torch.cpu, "_is_avx512_bf16_supported", None)
    return CPUInfo(model=model,
                   amx=bool(amx()) if amx else "amx_bf16" in flags,
                   avx512_bf16=bool(bf16()) if bf16 else "avx512_bf16" in flags,
                   capability=str(torch.backends.cpu.get_cpu_capability()))


def native_bf16(device: str) -> bool:
    """Whether ``device`` runs bf16 matrix products natively (see the module docstring)."""
    import torch  # noqa: PLC0415 deferred: torch (~1.5 s at start-up), needed only here

    if device.startswith("cuda"):  # bf16 units from compute capability 8 (Ampere); a T4 or V100 would emulate them
        return torch.cuda.is_available() and torch.cuda.get_device_capability(torch.device(device))[0] >= 8
    if device == "cpu":
        return cpu_info().native_bf16
    return False  # other backends (mps ...): not measured here, fp32 is the safe choice


def resolve_dtype(dtype: str, device: str) -> torch.dtype:
    """The ``torch.dtype`` for a configured ``dtype`` on ``device``.

    ``"auto"``: the ``GR_DTYPE`` environment variable when set, else bf16 where :func:`native_bf16`, else fp32.
    Any other value is taken as is (``"float32"``, ``"bfloat16"``, ``"float16"``).
    """
    import torch  # noqa: PLC0415 deferred: torch (~1.5 s at start-up), needed only here

    if dtype != "auto":
        return getattr(torch, dtype)
    forced = os.environ.get(DTYPE_OVERRIDE, "").strip()
    if forced:
        if forced not in RESOLVABLE:
            raise ValueError(f"{DTYPE_OVERRIDE}={forced!r} is not one of {RESOLVABLE}")
        return getattr(torch, forced)
    return torch.bfloat16 if native_bf16(device) else torch.float32


def dtype_name(dtype) -> str:
    """``torch.bfloat16`` -> ``"bfloat16"``."""
    return str(dtype).removeprefix("torch.")


def attention_implementation(dtype, device: str, backward: bool = True) -> str | None:
    """The attention kernel of a model in ``dtype`` on ``device``: ``"eager"`` in a 16-bit dtype on CPU, and on
    CUDA for a model that trains through its attention (``backward``); else None (transformers' default, SDPA).

    Why (docs/precision.md): on CPU, SDPA's bf16 backward pass with a padding mask is slow; on CUDA, SDPA in bf16
    turned the graph encoder's gradient NaN on an H100 (``bench/attention_nan.py``).
    """
    import torch  # noqa: PLC0415 deferred: torch (~1.5 s at start-up), needed only here

    if dtype not in (torch.bfloat16, torch.float16):
        return None
    return "eager" if device == "cpu" or backward else None


def precision_record(dtype, device: str, configured: str = "auto") -> dict:
    """What a timing or a result was computed with: the dtype and device, the CPU model, its bf16 support and the
    threads torch uses; ``dtype_override`` names ``GR_DTYPE`` when it decided (``configured`` was ``"auto"``)."""
    import torch  # noqa: PLC0415 deferred: torch (~1.5 s at start-up), needed only here

    info = cpu_info()
    forced = os.environ.get(DTYPE_OVERRIDE, "").strip() if configured == "auto" else None
    record = {"dtype": dtype_name(dtype), "device": device, "cpu_model": info.model, "amx": info.amx,
              "avx512_bf16": info.avx512_bf16, "cpu_capability": info.capability,
              "torch_threads": torch.get_num_threads(), "dtype_override": forced or None}
    if device.startswith("cuda") and torch.cuda.is_available():
        record["gpu"] = torch.cuda.get_device_name(torch.device(device).index or 0)
    return record


def legacy_dtype(configured: str, device: str) -> str:
    """The dtype a run recorded before precision records existed ran in: what ``configured`` meant then."""
    if configured != "auto":
        return configured
    return "bfloat16" if str(device).startswith("cuda") else "float32"


def run_precision(metrics: dict) -> dict:
    """A run's precision record (``metrics["precision"]``), or ``{}`` for a run recorded before those existed (or
    whose key holds its answers' *precision score*, a number)."""
    record = metrics.get("precision")
    return record if isinstance(record, dict) else {}


def recorded_dtype(metrics: dict, run_dir: str | os.PathLike | None = None, configured: str = "auto",
                   device: str = "auto") -> str:
    """The LLM dtype a finished run was computed in: its ``precision`` record, else :func:`legacy_dtype` on its
    configured ``device`` (for ``"auto"``: CUDA when its ``env.json`` names a GPU)."""
    if run_precision(metrics).get("dtype"):
        return metrics["precision"]["dtype"]
    if device == "auto":
        env = Path(run_dir) / "env.json" if run_dir is not None else None
        cuda = json.loads(env.read_text(encoding="utf-8")).get("cuda") if env is not None and env.is_file() else None
        device = "cuda" if cuda else "cpu"
    return legacy_dtype(configured, device)
