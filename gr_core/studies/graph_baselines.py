"""What the graph alone is worth: reference rows for a classification dataset that need no LLM (this project's own:
what a Table 3 row must beat to show that it learned anything).

- ``majority``: the training split's most frequent label for every test question;
- ``negation_parity`` (ExplaGraphs): ``counter`` when the graph holds an odd number of negated relations, else
  ``support``; no training;
- ``gnn_classifier``: G-Retriever's graph encoder (mean-pooled) with a linear head, trained as a plain classifier on
  the same node / edge embeddings; the epoch is chosen on validation accuracy.

Each is written as a run directory beside the LLM runs, so Table 3 and the paired tests treat it like any other row.
"""
from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch_geometric.loader import DataLoader

from ..evaluate import task_report, task_scores
from ..g_retriever.examples import split_indices
from ..g_retriever.graph_encoder import GNNConfig, GraphEncoder
from ..graphqa import DatasetConfig, data_inputs, load_dataset
from ..runs import atomic_write_bytes, config_hash, environment_record, read_json, seed_everything, write_json

BASELINES = ("majority", "negation_parity", "gnn_classifier")
CLASSIFICATION_DATASETS = ("explagraphs",)  # one stored graph and one label per question


def is_negated(relation: str) -> bool:
    """An ExplaGraphs relation that negates its head: ``not capable of``, ``is not a``, ``antonym of`` ...

    >>> [is_negated(r) for r in ("not desires", "is not a", "antonym of", "capable of", "synonym of")]
    [True, True, True, False, False]
    """
    r = relation.strip().lower()
    return r.startswith("not ") or " not " in f" {r} " or r == "antonym of"


def negation_parity(relations) -> str:
    """``counter`` when an odd number of ``relations`` are negated, else ``support``."""
    return "counter" if sum(is_negated(r) for r in relations) % 2 else "support"


@dataclass(frozen=True)
class GraphClassifierConfig:
    """The GNN-only classifier: G-Retriever's encoder at the quick preset's size, a linear head, AdamW."""

    gnn: GNNConfig = field(default_factory=lambda: GNNConfig(hidden=256, num_layers=4))
    lr: float = 1e-3
    weight_decay: float = 0.05  # as the LLM runs (GR paper App. B.1)
    batch_size: int = 32
    max_epochs: int = 8


def train_graph_classifier(ds, split: dict[str, list[int]], cfg: GraphClassifierConfig, seed: int = 0) -> dict:
    """Train the GNN-only classifier, keeping the epoch with the best validation accuracy: ``{"labels", "test_pred"
    (label per test question), "val_acc" per epoch, "best_epoch", "train_seconds"}``."""
    seed_everything(seed)
    labels = sorted({ds.records[i].answers[0].strip().lower() for i in split["train"]})
    data = {}
    ds.prefetch([i for s in ("train", "val", "test") for i in split[s]])  # every graph's texts in one batch
    for s in ("train", "val", "test"):
        ys = torch.tensor([labels.index(ds.records[i].answers[0].strip().lower()) for i in split[s]])
        data[s] = [ds.to_pyg(i) for i in split[s]]
        for d, y in zip(data[s], ys):
            d.y = y.view(1)
    in_dim = int(data["train"][0].x.shape[1])
    encoder = GraphEncoder(in_dim, cfg.gnn)
    model = nn.ModuleDict({"gnn": encoder, "head": nn.Linear(encoder.out_dim, len(labels))})
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    gen = torch.Generator().manual_seed(seed)

    def logits(batch):
        return model["head"](model["gnn"](batch.x, batch.edge_index, batch.edge_attr, batch.batch, batch.num_graphs))

    def predict(items) -> np.ndarray:
        model.eval()
        out = []
        with torch.no_grad():
            for batch in DataLoader(items, batch_size=256):
                out.append(logits(batch).argmax(-1))
        return torch.cat(out).numpy()

    t0, val_acc, best, best_state = time.perf_counter(), [], -1.0, None
    val_y = np.array([d.y.item() for d in data["val"]])
    for _ in range(cfg.max_epochs):
        model.train()
        for batch in DataLoader(data["train"], batch_size=cfg.batch_size, shuffle=True, generator=gen):
            opt.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(logits(batch), batch.y).backward()
            opt.step()
        acc = float(np.mean(predict(data["val"]) == val_y)) if len(val_y) else 0.0
        val_acc.append(round(acc, 4))
        if acc > best:
            best, best_state = acc, {k: v.detach().clone() for k, v in model.state_dict().items()}
    model.load_state_dict(best_state)
    return {"labels": labels, "test_pred": [labels[k] for k in predict(data["test"])], "val_acc": val_acc,
            "best_epoch": int(np.argmax(val_acc)), "train_seconds": round(time.perf_counter() - t0, 2)}


def run_graph_baselines(ds, runs_dir: str | Path, max_train: int | None = None, max_val: int | None = None,
                        max_test: int | None = None, seed: int = 0,
                        cfg: GraphClassifierConfig = GraphClassifierConfig(), methods=BASELINES) -> list[dict]:
    """Write one run directory per reference baseline (``<dataset>-<baseline>-seed<seed>``); return their metrics.
    Each split is cut to its first ``max_*`` questions (None: whole), as the LLM runs cut them. A finished run with
    the same config hash is reused."""
    unknown = sorted(set(methods) - set(BASELINES))
    if unknown:
        raise ValueError(f"unknown graph baseline(s) {unknown}; choose from {BASELINES}")
    if ds.graphs is None:
        raise ValueError(f"{ds.name}: the graph baselines need one stored graph per question (a classification set)")

    split = split_indices(ds, max_train=max_train, max_val=max_val, max_test=max_test)
    inputs = data_inputs(getattr(ds, "config", None))  # what the runs read besides their settings
    out = []
    for method in methods:
        config = {"dataset": ds.name, "method": method, "seed": seed, "max_train": max_train, "max_val": max_val,
                  "max_test": max_test, "classifier": asdict(cfg) if method == "gnn_classifier" else None}
        h = config_hash(config)
        run_dir = Path(runs_dir) / f"{ds.name}-{method}-seed{seed}"
        done = run_dir / "metrics.json"
        if done.is_file() and (found := read_json(done)).get("config_hash") == h and \
                found.get("inputs", inputs) == inputs:  # runs recorded before their inputs are taken as they are
            out.append(found)
            continue
        done.unlink(missing_ok=True)  # new predictions are never left beside an earlier run's metrics
        extra: dict = {}
        if method == "majority":
            label = Counter(ds.records[i].answers[0].strip().lower() for i in split["train"]).most_common(1)[0][0]
            preds = [label] * len(split["test"])
        elif method == "negation_parity":
            preds = [negation_parity(ds.graphs[i].edges.edge_attr) for i in split["test"]]
        else:
            res = train_graph_classifier(ds, split, cfg, seed)
            preds = res.pop("test_pred")
            extra = {k: res[k] for k in ("val_acc", "best_epoch", "train_seconds")}
        answers = [list(ds.records[i].answers) for i in split["test"]]
        lines = [json.dumps({"id": str(ds.records[i].graph_id), "prediction": p, "answers": a,
                             **task_scores(ds.name, p, a)}) for i, p, a in zip(split["test"], preds, answers)]
        write_json(run_dir / "config.json", {"name": run_dir.name, "config_hash": h, **config})
        write_json(run_dir / "env.json", environment_record())
        atomic_write_bytes(run_dir / "predictions.jsonl", ("\n".join(lines) + "\n").encode())
        metrics = {"name": run_dir.name, "dataset": ds.name, "method": method, "seed": seed, "config_hash": h,
                   "inputs": inputs,
                   **task_report(ds.name, preds, answers), "num_train": len(split["train"]),
                   "num_val": len(split["val"]), "num_test": len(split["test"]), **extra}
        write_json(done, metrics)
        out.append(metrics)
    return out


def reference_runs(by_dataset: dict[str, dict], runs_dir: str | Path, methods=BASELINES,
                   seeds: list[int] | None = None) -> list[dict]:
    """The reference rows for every classification dataset of a plan (ExplaGraphs), on the LLM runs' own splits.

    Args:
        by_dataset: dataset -> run settings (:func:`gr_core.g_retriever.experiments.dataset_settings`); their ``max_*``
            cut the splits.
        seeds: the GNN-only classifier trains once per seed (it is compared with each seed of the LLM runs); the
            deterministic rows (majority, negation parity) run with the first. None: ``[0]``.
    Returns:
        the reference runs' metrics (empty when no dataset of the plan has one graph and one label per question).
    """
    seeds = list(seeds) if seeds else [0]
    out = []
    for name in [d for d in by_dataset if d in CLASSIFICATION_DATASETS]:
        sizes = {k: by_dataset[name].get(k) for k in ("max_train", "max_val", "max_test")}
        ds = load_dataset(DatasetConfig(name))
        out += run_graph_baselines(ds, runs_dir, seed=seeds[0], methods=methods, **sizes)
        if "gnn_classifier" in methods:
            for k in seeds[1:]:
                out += run_graph_baselines(ds, runs_dir, seed=k, methods=["gnn_classifier"], **sizes)
    return out
