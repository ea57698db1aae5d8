"""Typed configuration: one frozen dataclass per component, presets per notebook, the notebooks' parameters cells.

Defaults are the paper's or the official code's values where one exists (cited in the comment); the embedded models
are this project's CPU substitutes (a documented deviation).
"""
from __future__ import annotations

import ast
import copy
import dataclasses
import functools
import json
import numbers
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from .paths import papers_data_here, repo_root

EMBEDDED_LLM = "embedded:smollm2-135m-instruct"
EMBEDDED_TEXT_ENCODER = "embedded:all-minilm-l6-v2"
PRESETS = ("smoke", "quick", "cpu", "full")
DTYPES = ("auto", "float32", "bfloat16", "float16")
QUANTIZATIONS = (None, "8bit", "4bit")
# LLMConfig fields added after runs, checkpoints and answers were keyed by the whole config: at these defaults they
# leave the keyed dict (:func:`llm_identity`), so every key recorded before them still matches
LLM_ADDED_DEFAULTS = {"gradient_checkpointing": False, "quantization": None}


def check_choice(cls: str, name: str, value: Any, choices: tuple) -> None:
    """The configs' check of an option with fixed choices: ``ValueError("<cls>.<name>=<value> is not one of ...")``."""
    if value not in choices:
        raise ValueError(f"{cls}.{name}={value!r} is not one of {choices}")


# numbers.Integral and Real take numpy's scalars too
_SIMPLE = {int: (numbers.Integral,), float: (numbers.Real,), str: (str,), bool: (bool,), type(None): (type(None),)}


def is_of(value: Any, types: tuple) -> bool:
    """``isinstance(value, types)``, where a bool is no number."""
    return isinstance(value, types) and (bool in types or not isinstance(value, bool))


def check_types(config: Any) -> None:
    """Each field of a config dataclass annotated ``int``, ``float``, ``str`` or ``bool`` (or their union with None)
    holds such a value (an int is a float; a bool is no number), else ValueError naming the field."""
    hints = typing.get_type_hints(type(config))
    for f in dataclasses.fields(config):
        union = typing.get_origin(hints[f.name]) in (typing.Union, types.UnionType)  # X | Y and Optional[X]
        members = typing.get_args(hints[f.name]) if union else (hints[f.name],)
        if not all(m in _SIMPLE for m in members):
            continue  # tuples, nested configs: checked by their own types
        value = getattr(config, f.name)
        if not is_of(value, tuple(t for m in members for t in _SIMPLE[m])):
            names = " | ".join("None" if m is type(None) else m.__name__ for m in members)
            raise ValueError(f"{type(config).__name__}.{f.name}={value!r} must be {names}")


@dataclass(frozen=True)
class LLMConfig:
    """The frozen LLM (GR paper App. B.1 uses Llama2-7b; we default to the embedded SmolLM2-135M-Instruct).

    Attributes:
        model: ``"embedded:<name>"`` (a GGUF of :data:`gr_core.llm.EMBEDDED_LLMS`, dequantized to fp32 once and
            cached), a ``.gguf`` file of another causal LM (the same way), or any Hugging Face model folder or hub id.
        dtype: the frozen LLM's weights and activations. ``"auto"`` = bf16 where the hardware computes it natively,
            else fp32 (:mod:`gr_core.precision`). Trainable parts stay fp32 whatever this is.
        device: ``"auto"`` = CUDA when available, else CPU.
        max_new_tokens: generation budget (GR code: 32).
        gradient_checkpointing: keep only each decoder layer's input during a training step and recompute the rest
            in the backward pass: one hidden state per layer and token, for one more forward pass (about 1.5x the
            FLOPs of a frozen-LLM step); what lets a 7B train on 24 GB (docs/notebooks.md "Planning a 7B run").
        quantization: ``None`` (the weights in ``dtype``), ``"8bit"`` (LLM.int8) or ``"4bit"`` (NF4, as QLoRA)
            through ``bitsandbytes`` on CUDA; the adapters and soft prompt stay fp32.
    """

    model: str = EMBEDDED_LLM
    dtype: str = "auto"
    device: str = "auto"
    max_new_tokens: int = 32  # GR code src/config.py
    # GR code src/model/graph_llm.py: off with the LLM frozen, on in its LoRA runs (peft's
    # prepare_model_for_kbit_training); off by default here, as every run recorded before the option trained
    gradient_checkpointing: bool = False
    quantization: str | None = None  # GR code src/model/graph_llm.py: none (Llama-2 in fp16 over 2 x A100-80G)

    def __post_init__(self) -> None:
        check_types(self)
        if not re.fullmatch(r"auto|cpu|mps|cuda(:\d+)?", str(self.device)):  # what torch and resolve_device take
            raise ValueError(f"LLMConfig.device={self.device!r} is not 'auto', 'cpu', 'cuda', 'cuda:N' or 'mps'")
        check_choice("LLMConfig", "dtype", self.dtype, DTYPES)
        check_choice("LLMConfig", "quantization", self.quantization, QUANTIZATIONS)
        if not self.model:
            raise ValueError("LLMConfig.model is empty: give 'embedded:smollm2-135m-instruct' or a HF path/id")
        if self.max_new_tokens < 1:
            raise ValueError(f"LLMConfig.max_new_tokens={self.max_new_tokens} must be >= 1")


@dataclass(frozen=True)
class TextEncoderConfig:
    """The sentence encoder for nodes, edges and questions (GR paper Eq. 1-4).

    The paper uses SentenceBERT ``all-roberta-large-v1`` (1024-d); we default to the embedded ``all-MiniLM-L6-v2``
    (384-d), mean-pooled and L2-normalized like the reference. ``dtype`` stays fp32 on every machine, unlike the
    LLM's: each text is encoded once and cached, so bf16 saves little, while its vectors differ (cosine down to
    0.9998) and would make retrieval, and every result downstream of it, depend on the CPU.
    """

    model: str = EMBEDDED_TEXT_ENCODER
    batch_size: int = 64  # GR code uses 1024 on a GPU; on 2 CPU cores 64 was fastest (756 vs 686 texts/s at 256)
    device: str = "auto"
    dtype: str = "float32"  # see above; "auto" follows the hardware like LLMConfig.dtype

    def __post_init__(self) -> None:
        check_choice("TextEncoderConfig", "dtype", self.dtype, DTYPES)
        if self.batch_size < 1:
            raise ValueError(f"TextEncoderConfig.batch_size={self.batch_size} must be >= 1")


def llm_identity(llm: dict) -> dict:
    """``asdict(LLMConfig)`` as configs, checkpoints and answers are keyed: the fields of
    :data:`LLM_ADDED_DEFAULTS` left out at their defaults (the dict is changed in place and returned)."""
    for key, default in LLM_ADDED_DEFAULTS.items():
        if key in llm and llm[key] == default:
            del llm[key]
    return llm


def resolve_device(device: str = "auto") -> str:
    """``"auto"`` -> ``"cuda"`` when a GPU is visible, else ``"cpu"``."""
    import torch  # noqa: PLC0415 deferred: torch (~1.5 s at start-up), needed only here

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


def usable_device(device: str = "auto") -> str:
    """:func:`resolve_device` for a run: a CUDA device this torch cannot see is a ValueError naming it (a plan may
    name a GPU node's device; a run would fail at its first ``.to``, in torch's words)."""
    import torch  # noqa: PLC0415 deferred: torch (~1.5 s at start-up), needed only here

    resolved = resolve_device(device)
    if resolved.startswith("cuda"):
        suffix = resolved.partition(":")[2]
        index = int(suffix) if suffix.isdigit() else 0
        seen = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if index >= seen:
            raise ValueError(f"device={device!r}: this torch sees {seen or 'no'} GPU{'s' if seen != 1 else ''}; "
                             "use 'auto' or 'cpu'")
    return resolved


def load_preset(preset: str) -> dict[str, dict[str, Any]]:
    """The parameters per notebook for a preset (``gr_core/presets/<preset>.yaml``): ``{"_all": {...}, "<notebook
    stem>": {...}}``."""
    check_choice("preset", "name", preset, PRESETS)
    text = resources.files("gr_core").joinpath("presets", f"{preset}.yaml").read_text()
    data = _parse_yaml(text)
    if not isinstance(data, dict):
        raise ValueError(f"preset file {preset}.yaml must be a mapping of notebook stem -> parameters")
    return copy.deepcopy(data)  # the caller's own: the parse is shared


@functools.lru_cache(maxsize=8)
def _parse_yaml(text: str) -> Any:
    """A preset file's text parsed once per process, keyed by the text: a dry run reads each preset about 110 times,
    ~60 ms a parse with PyYAML's pure-Python parser."""
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}


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
    names = papers_data(table)
    if names:  # the preset's names of absent papers' data -> their stand-ins; an override must name what is here
        params = {k: _with_datasets(v, names) for k, v in params.items()}
        for key, value in (overrides or {}).items():
            absent = [n for n, used in names.items() if used != n and _with_datasets(value, {n: None}) != value]
            if absent:
                raise ValueError(f"-p {key}={value!r} names {absent}, absent here: ./gr data --fetch DIR --papers "
                                 f"{' '.join(absent)} (docs/data.md), or name the offline stand-in")
    params.update(overrides or {})
    return params


def papers_data(table: dict[str, Any]) -> dict[str, str | None]:
    """A preset's ``_papers_data`` block (the papers' own datasets -> their offline stand-ins) as used on this
    machine: each name -> itself where its files are here (``./gr data --fetch DIR --papers``), else the stand-in
    (None: its rows are left out). docs/data.md."""
    block = table.get("_papers_data") or {}
    return {name: name if papers_data_here(name) else standin for name, standin in block.items()}


def papers_data_notes(preset: str) -> list[str]:
    """One line per papers' dataset of ``preset``: which data its rows use here (the suite and --dry-run print it)."""
    from .published import DATASET_SOURCE  # noqa: PLC0415 deferred: a table the notes need, not the presets

    lines = []
    for name, used in papers_data(load_preset(preset)).items():
        if used == name:
            lines.append(f"{name}: {DATASET_SOURCE[name]}")
        else:
            instead = f"offline stand-in {used} ({DATASET_SOURCE[used]})" if used else "its rows are left out"
            lines.append(f"{name}: absent ({DATASET_SOURCE[name]}): {instead}; ./gr data --fetch DIR --papers {name}")
    return lines


def _with_datasets(value: Any, names: dict[str, str | None]) -> Any:
    """``value`` with every dataset name of ``names`` replaced: a string equal to it, list items and mapping keys
    (also ``name/method`` keys); a name mapped to None is dropped from lists and mappings."""
    def swap(text: str) -> str | None:
        head, sep, tail = text.partition("/")
        if head not in names:
            return text
        return None if names[head] is None else names[head] + sep + tail

    if isinstance(value, str):
        return swap(value)
    if isinstance(value, list):
        return [x for x in (_with_datasets(v, names) for v in value) if x is not None]
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            key = swap(k) if isinstance(k, str) else k
            if key in out:
                raise ValueError(f"{k!r} and another key both become {key!r} with the offline stand-ins {names}")
            if key is not None:
                out[key] = _with_datasets(v, names)
        return out
    return value


def parameter_defaults(notebook_stem: str, notebooks_dir: Path | None = None) -> dict[str, Any]:
    """The ``parameters`` cell of ``notebooks/<notebook_stem>.ipynb`` as ``{name: default}``, in order.

    Raises:
        FileNotFoundError: no such notebook; ValueError: no cell tagged ``parameters``, or a value there is not a
        literal.
    """
    out: dict[str, Any] = {}
    for path, node, name in _parameter_lines(notebook_stem, notebooks_dir):
        try:
            out[name] = ast.literal_eval(node.value)
        except ValueError as err:
            raise ValueError(f"{path}: parameters cell line {node.lineno}: {name} is not a literal") from err
    return out


def parameter_annotations(notebook_stem: str, notebooks_dir: Path | None = None) -> dict[str, str | None]:
    """The ``parameters`` cell's ``{name: annotation}`` (``"int"``, ``"str | None"``; None where a name has none), in
    order; raises as :func:`parameter_defaults`."""
    return {name: ast.unparse(node.annotation) if isinstance(node, ast.AnnAssign) else None
            for _, node, name in _parameter_lines(notebook_stem, notebooks_dir)}


_ANNOTATED = {"int": int, "float": float, "str": str, "bool": bool, "None": type(None), "list": list, "List": list,
              "dict": dict, "Dict": dict}


def annotation_types(annotation: str | None) -> tuple | None:
    """The Python types a value of a parameters cell's ``annotation`` may have (``"int | None"``, ``"Optional[int]"``,
    ``"list[str]"``), as :func:`check_types` reads them; None where it is absent or names another type."""
    if not annotation:
        return None
    members = []
    for part in annotation.split("|"):
        part = part.strip().removeprefix("typing.")
        if part.startswith("Optional["):
            members += [part[len("Optional["):-1].strip().split("[")[0], "None"]
        else:
            members.append(part.split("[")[0])
    if not all(m in _ANNOTATED for m in members):
        return None
    return tuple(t for m in members for t in _SIMPLE.get(_ANNOTATED[m], (_ANNOTATED[m],)))


def _parameter_lines(notebook_stem: str, notebooks_dir: Path | None):
    """``(path, node, name)`` of each assignment in the notebook's cell tagged ``parameters``."""
    path = (notebooks_dir or repo_root() / "notebooks") / f"{notebook_stem}.ipynb"
    cells = json.loads(path.read_text())["cells"]
    for cell in cells:
        if "parameters" not in cell.get("metadata", {}).get("tags", []):
            continue
        lines = []
        for node in ast.parse("".join(cell["source"])).body:
            target = node.targets[0] if isinstance(node, ast.Assign) else getattr(node, "target", None)
            if not isinstance(target, ast.Name) or getattr(node, "value", None) is None:
                raise ValueError(f"{path}: parameters cell line {node.lineno}: only `name = literal` assignments")
            lines.append((path, node, target.id))
        return lines
    raise ValueError(f"{path}: no cell is tagged 'parameters'")


def used_parameters(namespace: Mapping[str, Any], notebook_stem: str) -> dict[str, Any]:
    """The parameters one notebook execution uses: the value in ``namespace`` (the notebook's ``globals()``, after
    papermill's injected cell) of every name the parameters cell assigns."""
    names = list(parameter_defaults(notebook_stem))
    missing = [n for n in names if n not in namespace]
    if missing:
        raise KeyError(f"{notebook_stem}: parameters {missing} are not defined; run the parameters cell first")
    return {n: namespace[n] for n in names}
