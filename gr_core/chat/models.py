"""The chat's LLM: a trained G-Retriever checkpoint found under ``outputs/`` for the kind of graph, or zero-shot."""
from __future__ import annotations

import os
from pathlib import Path

import torch

from ..config import LLMConfig
from ..g_retriever.model import GraphLLM, method_config
from ..g_retriever.run_config import RunConfig
from ..g_retriever.train import load_run_model
from ..paths import OUTPUTS_ENV, repo_root
from ..runs import config_hash, read_json
from .config import CHECKPOINT_PRESETS, KIND_DATASETS


def find_checkpoint(kind: str, outputs: str | Path | None = None, llm_model: str | None = None,
                    presets=CHECKPOINT_PRESETS) -> Path | None:
    """The run directory of a trained G-Retriever for ``kind`` (``outputs/<preset>/runs/<dataset>-g_retriever-seed*``),
    best preset first, then dataset order of :data:`KIND_DATASETS`; only finished runs (:func:`_finished`) whose
    ``ckpt/best.pt`` carries their config's hash (a running training has one from its first epoch on) and, when
    ``llm_model`` is given, that were trained on that LLM."""
    root = Path(outputs or os.environ.get(OUTPUTS_ENV) or repo_root() / "outputs")
    for preset in presets:
        for dataset in KIND_DATASETS[kind]:
            for run_dir in sorted((root / preset / "runs").glob(f"{dataset}-g_retriever-seed*")):
                finished = _finished(run_dir)
                if finished is None or (llm_model and finished[0].model.llm.model != llm_model):
                    continue
                state = torch.load(run_dir / "ckpt" / "best.pt", map_location="cpu", weights_only=True)
                if state.get("config_hash") == finished[1]:
                    return run_dir
    return None


def _finished(run_dir: Path) -> tuple[RunConfig, str] | None:
    """``(its RunConfig, config hash)`` where ``run_dir`` holds a finished training (config, best checkpoint and
    metrics of that config), else None."""
    if not all((run_dir / f).is_file() for f in ("config.json", "metrics.json", "ckpt/best.pt")):
        return None
    cfg = RunConfig.read(run_dir)
    cfg_hash = config_hash(cfg.to_dict())
    return (cfg, cfg_hash) if read_json(run_dir / "metrics.json").get("config_hash") == cfg_hash else None


def run_directory(model: str) -> Path | None:
    """The training run directory ``model`` names (None for ``auto`` and ``zero_shot``); FileNotFoundError where it
    is neither, nor a finished run (:func:`_finished`)."""
    if model in ("auto", "zero_shot"):
        return None
    run_dir = Path(model)
    if _finished(run_dir) is None:
        raise FileNotFoundError(f"model={model!r} is not 'auto', 'zero_shot' or a training run directory that "
                                f"finished (config.json, ckpt/best.pt and metrics.json of the same config)")
    return run_dir


def load_answerer(model: str, kind: str, llm_model: str, device: str, max_txt_len: int, in_dim: int):
    """The GraphLLM that answers: ``auto`` (a trained checkpoint for ``kind``, else zero-shot), ``zero_shot``, or a
    run directory. Returns ``(GraphLLM, description, run_dir or None)``."""
    run_dir = find_checkpoint(kind, llm_model=llm_model) if model == "auto" else run_directory(model)
    if run_dir is None:
        cfg = method_config("zero_shot", llm=LLMConfig(model=llm_model, device=device), max_txt_len=max_txt_len)
        presets = ",".join(CHECKPOINT_PRESETS)
        why = f" (no trained {kind} checkpoint in outputs/{{{presets}}}/runs)" if model == "auto" else ""
        return GraphLLM(cfg).eval(), f"zero-shot {llm_model}{why}", None
    cfg = RunConfig.read(run_dir)
    state = torch.load(run_dir / "ckpt" / "best.pt", map_location="cpu", weights_only=True)  # read once
    if cfg.model.gnn is not None and in_dim != (trained := checkpoint_in_dim(state["model"], run_dir)):
        raise ValueError(f"{run_dir}: its graph encoder reads {trained}-d text "
                         f"embeddings; this graph is indexed with {in_dim}-d ones (a different sentence encoder)")
    net = load_run_model(run_dir, in_dim, cfg=cfg, state=state, device=device)
    return net, f"trained {cfg.method} ({run_dir.parent.parent.name}/{run_dir.name})", run_dir


def checkpoint_in_dim(state: dict, run_dir: Path | str = "") -> int:
    """The text-embedding width a checkpoint's graph encoder (its ``model`` state dict) was trained on."""
    for name, value in state.items():
        if name.startswith("gnn.") and name.endswith("weight") and value.dim() == 2:
            return int(value.shape[1])
    raise ValueError(f"{run_dir}: no graph encoder weight in the checkpoint")
