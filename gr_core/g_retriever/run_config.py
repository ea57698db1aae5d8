"""A run's configuration (one Table 3 cell for one seed) and how it is written beside the run (``config.json``).

:class:`TrainConfig` is the optimization (GR paper App. B.1), :class:`RunConfig` the whole cell; a run directory's
``config.json`` holds ``RunConfig.to_dict()`` plus its name and hash, and :meth:`RunConfig.read` reads it back.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..config import LLMConfig, check_choice, check_types, llm_identity
from ..graphqa import DATASETS
from ..runs import check_seed, read_json
from .graph_encoder import GNNConfig
from .model import METHODS, LoRAConfig, ModelConfig, method_config


@dataclass(frozen=True)
class TrainConfig:
    """Optimization (GR paper App. B.1; GR code ``src/config.py``, ``train.py``, ``lr_schedule.py``).

    ``batch_size`` is the *global* batch: under DDP each of N processes takes ``batch_size / N`` examples.
    """

    lr: float = 1e-5  # GR paper App. B.1
    weight_decay: float = 0.05  # GR paper App. B.1
    betas: tuple[float, float] = (0.9, 0.95)  # GR code train.py
    grad_clip: float = 0.1  # GR code train.py
    num_epochs: int = 10  # GR paper App. B.1
    warmup_epochs: float = 1.0  # GR code src/config.py
    min_lr: float = 5e-6  # GR code lr_schedule.py
    patience: int = 2  # GR code src/config.py
    batch_size: int = 8  # GR code run.sh (the paper's App. B.1 says 4)
    eval_batch_size: int = 16  # GR code src/config.py
    bucket_window: int = 50  # batches per length-sorting window (sort within windows, shuffle batches)
    # lr of the soft-prompt parts (GNN, projector, prompt vectors); None: ``lr`` (GR code)
    graph_lr: float | None = None
    warmup_fraction: float | None = None  # warm-up as a fraction of all steps; None: ``warmup_epochs`` (GR code)
    # the checkpoint kept (and early stopping): lowest validation loss (None, GR code) or "val_match", the highest
    # share of validation answers that greedy decoding gets exactly right (measured in the same teacher-forced pass)
    select_on: str | None = None

    def __post_init__(self) -> None:
        check_types(self)
        if self.lr <= 0 or self.num_epochs < 0 or self.batch_size < 1 or self.eval_batch_size < 1:
            raise ValueError("TrainConfig: lr > 0, num_epochs >= 0, batch sizes >= 1 required")
        if self.select_on not in (None, "val_loss", "val_match"):
            raise ValueError(f"TrainConfig.select_on must be 'val_loss' or 'val_match', not {self.select_on!r}")

    def selection_key(self, row: dict) -> float:
        """Lower is better: the validation loss, or the share of validation answers missed (``select_on``)."""
        match = row.get("val_match", float("nan"))
        return 1.0 - match if self.select_on == "val_match" and not math.isnan(match) else row["val_loss"]


@dataclass(frozen=True)
class RunConfig:
    """One Table 3 cell for one seed: dataset, method, model parts, optimization and data sizes.

    Attributes:
        max_train, max_val, max_test: keep the first N questions of each split (None: all).
        hops: MetaQA question hops (1-3).
        variant: a suffix naming runs of one method with different settings (the k sweep: ``k10-ce0.5``).
    """

    dataset: str
    method: str
    seed: int = 0
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    max_train: int | None = None
    max_val: int | None = None
    max_test: int | None = None
    hops: int = 2
    variant: str = ""

    def __post_init__(self) -> None:
        check_types(self)
        check_choice("RunConfig", "method", self.method, tuple(METHODS))
        check_choice("RunConfig", "dataset", self.dataset, DATASETS)  # before anything loads
        check_seed(self.seed, "RunConfig.seed")
        for name in ("max_train", "max_val", "max_test"):
            if getattr(self, name) is not None and getattr(self, name) < 1:  # 0 would be an empty split
                raise ValueError(f"RunConfig.{name}={getattr(self, name)} must be >= 1, or None for the whole split "
                                 "(0 keeps it whole only in the notebooks' parameters, RunSettings)")

    @property
    def name(self) -> str:
        variant = f"-{self.variant}" if self.variant else ""
        return f"{self.dataset}-{self.method}{variant}-seed{self.seed}"

    def to_dict(self) -> dict:
        d = asdict(self)
        # fields added after runs were recorded leave the dict (and so the config hash) unchanged at their defaults
        added = {"model": {"top_k": None, "edge_cost": None, "graph_token_norm": "none", "system_prompt": None},
                 "train": {"graph_lr": None, "warmup_fraction": None, "select_on": None}}
        for part, defaults in added.items():
            for key, default in defaults.items():
                if d[part][key] == default:
                    del d[part][key]
        if d["model"]["lora"] is not None and d["model"]["lora"]["dropout_masks"] == "bernoulli":
            del d["model"]["lora"]["dropout_masks"]  # the default: peft's dropout, as runs recorded before the field
        if not d["variant"]:
            del d["variant"]
        llm_identity(d["model"]["llm"])  # the LLM's loading options, at their defaults, as runs recorded before them
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "RunConfig":
        d = dict(d)
        m = dict(d.pop("model", {}) or {})
        m["llm"] = LLMConfig(**(m.get("llm") or {}))
        m["gnn"] = GNNConfig(**m["gnn"]) if m.get("gnn") else None
        if m.get("lora"):
            lora = dict(m["lora"])
            lora["targets"] = tuple(lora.get("targets", LoRAConfig.targets))
            m["lora"] = LoRAConfig(**lora)
        t = dict(d.pop("train", {}) or {})
        if "betas" in t:
            t["betas"] = tuple(t["betas"])
        return cls(model=ModelConfig(**m), train=TrainConfig(**t), **d)

    @classmethod
    def read(cls, path: str | Path) -> "RunConfig":
        """The configuration recorded in a run directory's ``config.json`` (or that file itself)."""
        path = Path(path)
        raw = read_json(path / "config.json" if path.is_dir() else path)
        return cls.from_dict({k: v for k, v in raw.items() if k not in ("name", "config_hash")})


def make_run_config(dataset: str, method: str, seed: int = 0, llm: LLMConfig | None = None,
                    gnn: GNNConfig | None = None, train: TrainConfig | None = None, **kwargs) -> RunConfig:
    """A :class:`RunConfig` for a named method (see :data:`gr_core.g_retriever.model.METHODS`).

    ``kwargs`` go to the RunConfig (``max_train`` ...) or, when they are ModelConfig fields, to the model.
    """
    model_fields = set(ModelConfig.__dataclass_fields__)
    model_kw = {k: kwargs.pop(k) for k in list(kwargs) if k in model_fields}
    model = method_config(method, llm=llm, gnn=gnn, **model_kw)
    return RunConfig(dataset=dataset, method=method, seed=seed, model=model, train=train or TrainConfig(), **kwargs)
