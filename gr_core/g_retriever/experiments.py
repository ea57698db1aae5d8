"""The notebooks' training runs (notebooks 03, 05, 06, 07) and the command line ``python -m gr_core.g_retriever``:
run configurations from a preset's merged parameters, the k grid, the LLM sizes, and a preset's plan of runs.

CLI::

    python -m gr_core.g_retriever --config run.json --run-dir outputs/quick/runs/NAME
    python -m gr_core.g_retriever --preset cpu --dataset explagraphs --method g_retriever --seed 1   # notebook 03's run
    torchrun --standalone --nproc_per_node 2 -m gr_core.g_retriever --config run.json --run-dir DIR
"""
from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from ..config import EMBEDDED_LLM, LLMConfig, notebook_parameters, parameter_defaults
from ..graphqa import DatasetConfig, load_dataset
from ..llm import unavailable
from ..paths import outputs_root
from .graph_encoder import GNNConfig
from .train import RunConfig, TrainConfig, make_run_config, run


@dataclass(frozen=True)
class RunSettings:
    """The training block that notebooks 03, 05, 06 and 07 share, as flat notebook parameters (0 keeps a whole split).

    Every notebook builds its runs through this one config, so equal parameters give equal config hashes and a run
    trained by one notebook is reused by the others. Defaults are the paper's (GR App. B.1) or the GR code's.
    """

    llm_model: str = EMBEDDED_LLM  # this project's CPU substitute for Llama 2 7B (docs/method.md)
    device: str = "auto"
    max_new_tokens: int = 32  # GR code: max_new_tokens 32
    gnn_kind: str = "gt"  # GR App. B.1: Graph Transformer
    gnn_hidden: int = 1024  # GR App. B.1
    gnn_layers: int = 4  # GR App. B.1
    gnn_heads: int = 4  # GR App. B.1
    num_epochs: int = 10  # GR App. B.1 (patience 2)
    lr: float = 1e-5  # GR App. B.1
    batch_size: int = 8  # GR code
    eval_batch_size: int = 16  # GR code
    max_train: int = 0
    max_val: int = 0
    max_test: int = 0
    max_txt_len: int = 512  # GR code: max_txt_len 512
    warmup_fraction: float | None = None  # None: one warm-up epoch (GR code)
    system_prompt: str | None = None  # None: the chat template's own
    select_on: str | None = None  # None: validation loss (GR code)
    gradient_checkpointing: bool = False  # LLMConfig's: off, as every run recorded before it
    quantization: str | None = None  # LLMConfig's: the weights in the LLM's dtype

    def __post_init__(self) -> None:
        for name in ("max_new_tokens", "gnn_hidden", "gnn_layers", "gnn_heads", "batch_size", "eval_batch_size",
                     "max_txt_len"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"RunSettings.{name} must be a positive integer, got {getattr(self, name)!r}")
        for name in ("num_epochs", "max_train", "max_val", "max_test"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise ValueError(f"RunSettings.{name} must be an integer >= 0, got {getattr(self, name)!r}")
        if not isinstance(self.lr, (int, float)) or self.lr <= 0:
            raise ValueError(f"RunSettings.lr must be a positive number, got {self.lr!r}")
        self.keywords()  # the component configs check their own choices (gnn_kind, device, select_on ...)

    @classmethod
    def from_parameters(cls, params: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> "RunSettings":
        """The settings in a notebook's flat ``params`` (its other parameters are ignored), with ``overrides`` on
        top; an override that is not a setting is an error (a typo in a preset's ``per_dataset`` would otherwise
        be dropped silently)."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(overrides or {}) - names)
        if unknown:
            raise ValueError(f"unknown run settings {unknown}; known: {sorted(names)}")
        return cls(**{k: v for k, v in {**params, **(overrides or {})}.items() if k in names})

    def keywords(self) -> dict:
        """The :func:`~gr_core.g_retriever.run_config.make_run_config` keywords."""
        return dict(
            llm=LLMConfig(model=self.llm_model, device=self.device, max_new_tokens=self.max_new_tokens,
                          gradient_checkpointing=self.gradient_checkpointing, quantization=self.quantization),
            gnn=GNNConfig(kind=self.gnn_kind, hidden=self.gnn_hidden, num_layers=self.gnn_layers, heads=self.gnn_heads),
            train=TrainConfig(num_epochs=self.num_epochs, lr=self.lr, batch_size=self.batch_size,
                              eval_batch_size=self.eval_batch_size, warmup_fraction=self.warmup_fraction,
                              select_on=self.select_on),
            max_train=self.max_train or None, max_val=self.max_val or None, max_test=self.max_test or None,
            max_txt_len=self.max_txt_len, system_prompt=self.system_prompt,
        )


def dataset_settings(params: Mapping[str, Any], per_dataset: dict | None, datasets) -> dict[str, dict]:
    """:class:`RunSettings` keywords per dataset: the flat notebook ``params`` with ``per_dataset[name]`` on top.

    A key ``"dataset/method"`` sets one method's runs on that dataset, on top of the dataset's own settings.

    >>> s = dataset_settings({"max_train": 128}, {"explagraphs": {"max_train": 0},
    ...                      "explagraphs/graph_token": {"num_epochs": 1}}, ["explagraphs", "webqsp"])
    >>> s["explagraphs"]["max_train"], s["webqsp"]["max_train"], s["explagraphs/graph_token"]["train"].num_epochs
    (None, 128, 1)
    """
    per_dataset = per_dataset or {}
    unknown = sorted({key.split("/")[0] for key in per_dataset} - set(datasets))
    if unknown:
        raise ValueError(f"per-dataset settings name datasets that are not in the plan: {unknown}")
    out = {name: RunSettings.from_parameters(params, per_dataset.get(name)).keywords() for name in datasets}
    for key in (k for k in per_dataset if "/" in k):
        name = key.split("/")[0]
        own = {**(per_dataset.get(name) or {}), **(per_dataset[key] or {})}
        out[key] = RunSettings.from_parameters(params, own).keywords()
    return out


def preset_run_config(preset: str, dataset: str, method: str, seed: int = 0, notebook: str = "03_training",
                      overrides: dict | None = None) -> RunConfig:
    """The run configuration notebook ``notebook`` builds for ``(dataset, method, seed)`` under ``preset``.

    The same keywords as the notebook's (``_training`` block, the notebook's parameters, ``per_dataset``), so a run
    made here (``python -m gr_core.g_retriever --preset cpu --dataset explagraphs --method g_retriever --seed 1``, e.g.
    one seed per process) has the notebook's config hash and the notebook reuses it.
    """
    defaults = parameter_defaults(notebook)  # the notebook's own names only, as papermill runs it
    merged = {**defaults, **notebook_parameters(preset, notebook, overrides)}
    params = {k: v for k, v in merged.items() if k in defaults}
    # the other datasets' entries of per_dataset do not apply to this run (dataset_settings rejects them as unplanned)
    own = {k: v for k, v in (params.get("per_dataset") or {}).items() if k.split("/")[0] == dataset}
    settings = dataset_settings(params, own, [dataset])
    return make_run_config(dataset, method, seed, **settings.get(f"{dataset}/{method}", settings[dataset]))


def run_k_grid(dataset: str, k_grid, ce_grid, seed: int, runs_dir: str | Path, ds=None, **settings) -> list[str]:
    """G-Retriever once per (k, C_e) (GR Table 10; run names ``<dataset>-g_retriever-k<k>-ce<C_e>-seed<s>``).

    Returns:
        the run names, in grid order (read them back with :func:`gr_core.report.results.k_sweep_table`).
    """
    names = []
    for k in k_grid:
        for ce in ce_grid:
            cfg = make_run_config(dataset, "g_retriever", seed, variant=f"k{k}-ce{ce}", top_k=int(k),
                                  edge_cost=float(ce), **settings)
            m = run(cfg, Path(runs_dir) / cfg.name, ds=ds)
            print(f"{cfg.name}: test {m['score']:.2f}, {m['mean_prompt_tokens']:.0f} prompt tokens", flush=True)
            names.append(cfg.name)
    return names


def run_llm_sizes(dataset: str, llm_models: list[str], seed: int, runs_dir: str | Path, params: dict,
                  per_dataset: dict | None = None, ds=None) -> list[tuple[str, str | None]]:
    """G-Retriever on ``dataset`` once per LLM, the same data and budget for each (GR Table 8).

    Args:
        llm_models: the first is the reference (its run is the plain ``<dataset>-g_retriever-seed<s>``, shared with
            notebook 03); the others are variants ``llm-<name>``. An embedded LLM whose optional package is missing
            is skipped (:func:`gr_core.llm.unavailable` says why).
        params, per_dataset: the flat notebook parameters and per-dataset settings (:func:`dataset_settings`; keys
            for other datasets are ignored).
    Returns:
        ``(llm, run name or None)`` per LLM, for :func:`gr_core.report.results.table8`.
    """
    mine = {k: v for k, v in (per_dataset or {}).items() if k.split("/")[0] == dataset}
    settings = dataset_settings(params, mine, [dataset])[dataset]
    rows = []
    for i, model in enumerate(llm_models):
        if (why := unavailable(model)):
            print(f"{model}: skipped, {why}", flush=True)
            rows.append((model, None))
            continue
        ds = ds if ds is not None else load_dataset(DatasetConfig(dataset))
        variant = "" if i == 0 else "llm-" + model.replace("/", "_").replace(":", "_")
        cfg = make_run_config(dataset, "g_retriever", seed, variant=variant,
                              **{**settings, "llm": replace(settings["llm"], model=model)})
        run(cfg, Path(runs_dir) / cfg.name, ds=ds)
        rows.append((model, cfg.name))
    return rows


def run_plan(plan: dict[str, list[str]], seeds: list[int], runs_dir: str | Path, force: bool = False,
             by_dataset: dict[str, dict] | None = None, **settings) -> "pd.DataFrame":
    """Run every (dataset, method, seed) of ``plan`` (dataset -> methods; each dataset loaded once): one row of
    ``metrics.json`` per run, in plan order. A configuration with nothing to train runs once, with the first seed
    (greedy decoding makes the others equal).

    Args:
        by_dataset: dataset name (or ``"dataset/method"``) -> its own settings (from :func:`dataset_settings`),
            used instead of ``settings``, the :func:`make_run_config` keywords of every run.
    """
    rows = []
    for dataset, methods in plan.items():
        own = dict((by_dataset or {}).get(dataset) or settings)
        ds = load_dataset(DatasetConfig(dataset, hops=own.get("hops", 2)))
        for method in methods:
            mine = (by_dataset or {}).get(f"{dataset}/{method}") or own
            first = make_run_config(dataset, method, seeds[0], **mine)
            # greedy answers of an untrained configuration do not depend on the seed: one run stands for all
            for seed in seeds if first.model.trainable and first.train.num_epochs > 0 else seeds[:1]:
                cfg = make_run_config(dataset, method, seed, **mine)
                t0 = time.perf_counter()
                metrics = run(cfg, Path(runs_dir) / cfg.name, ds=ds, force=force)
                print(f"{cfg.name}: score {metrics['score']:.4f} on {metrics['num_test']} test questions "
                      f"({time.perf_counter() - t0:.0f} s)", flush=True)
                rows.append(metrics)
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gr_core.g_retriever", description=__doc__.split("\n")[0])
    parser.add_argument("--config", help="a RunConfig JSON file (see RunConfig.to_dict)")
    parser.add_argument("--run-dir", help="where the run directory is written (with --preset: the preset's runs/)")
    parser.add_argument("--preset", help="instead of --config: the run notebook 03 builds under this preset ...")
    parser.add_argument("--dataset", help="... for this dataset")
    parser.add_argument("--method", help="... this method")
    parser.add_argument("--seed", type=int, default=0, help="... and this seed")
    parser.add_argument("--force", action="store_true", help="rerun even when a finished run matches the config")
    args = parser.parse_args(argv)
    if args.run_dir and Path(args.run_dir).is_file():
        parser.error(f"--run-dir {args.run_dir}: is a file; name the run's folder")
    if args.preset:
        if not (args.dataset and args.method) or args.config:
            parser.error("--preset needs --dataset and --method, and no --config")
        try:
            cfg = preset_run_config(args.preset, args.dataset, args.method, args.seed)
        except ValueError as err:  # an unknown preset, dataset or method: named with the choices
            parser.error(str(err))
        run_dir = args.run_dir or outputs_root(args.preset) / "runs" / cfg.name
    elif args.config and args.run_dir:
        try:
            cfg, run_dir = RunConfig.read(Path(args.config)), args.run_dir
        except (OSError, ValueError, TypeError, AttributeError) as err:  # unreadable, not JSON, not a RunConfig
            parser.error(f"cannot read --config {args.config}: {err}")
    else:
        parser.error("give --config and --run-dir, or --preset, --dataset and --method")
    metrics = run(cfg, run_dir, force=args.force)
    if metrics:
        print(json.dumps({k: metrics[k] for k in ("name", "score", "num_test", "epochs_run") if k in metrics}))
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    return 0
