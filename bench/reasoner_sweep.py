"""GNN-RAG reasoner settings on whole training splits: validation H@1 after every epoch, test H@1 / F1 of the
epoch chosen on validation (docs/method.md §3.1).

    python bench/reasoner_sweep.py metaqa-3hop:3:2:5e-4:20 metaqa-3hop:2:3:5e-4:20 --budget-minutes 6 --workers 4

Each argument names one run: ``key:num_ins:num_iter:lr:epochs[:entity_dim[:batch]]`` (``key`` as in
``bench/reasoner_studies.py``: ``webqsp``, ``metaqa-1hop`` ... ``metaqa-3hop``); the other settings are the
:class:`~gr_core.gnn_rag.ReasonerConfig` / :class:`~gr_core.gnn_rag.ReasonerTrainConfig` defaults. Runs of one key
share the question graphs, built once (``--workers`` processes build them in parallel). A GPU makes a sweep take
minutes (a MetaQA-3hop epoch over the 12,847 training questions takes about 7 minutes on 2 CPU cores). Writes
``outputs/bench/reasoner_sweep[_TAG].json`` (``--tag``), with every epoch's row, and prints one JSON line per epoch.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import time
from dataclasses import asdict

import numpy as np
import torch
from common import write_result

from gr_core.gnn_rag import (QuestionGraph, ReasonerConfig, ReasonerTrainConfig, evaluate_reasoner, question_data,
                             reasoner_dataset, train_reasoner)
from gr_core.graphqa import DatasetConfig, load_dataset
from gr_core.stats import wilson_interval
from gr_core.studies.gnn_rag import dataset_key

_DS = None  # the dataset a worker process builds graphs from (inherited by fork)


def _build(i: int) -> dict:
    # numpy, not tensors: torch would pass each tensor back through a file descriptor, and thousands of them fail
    return {k: v.numpy() if hasattr(v, "numpy") else v for k, v in question_data(_DS, i).to_dict().items()}


def _graph(fields: dict) -> QuestionGraph:
    return QuestionGraph(**{k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in fields.items()})


def parse(spec: str) -> dict:
    parts = spec.split(":") + [""] * 7
    return dict(key=parts[0], num_ins=int(parts[1]), num_iter=int(parts[2]), lr=float(parts[3]), epochs=int(parts[4]),
                entity_dim=int(parts[5]) if parts[5] else ReasonerConfig.entity_dim,
                batch=int(parts[6]) if parts[6] else ReasonerTrainConfig.batch_size)


def graphs(ds, indices: list[int], workers: int) -> list:
    """The reasoner's question graphs, built by ``workers`` forked processes (one process: the library's loop)."""
    global _DS
    if workers <= 1:
        return reasoner_dataset(ds, indices)

    ds.prefetch(indices, nodes=False)  # encode the questions and relations once, before forking
    _DS = ds
    with mp.get_context("fork").Pool(workers) as pool:
        return [_graph(f) for f in pool.map(_build, indices, chunksize=64)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--budget-minutes", type=float, default=0.0, help="training time budget per run (0: none)")
    parser.add_argument("--max-train", type=int, default=0, help="0: the whole training split")
    parser.add_argument("--max-val", type=int, default=0, help="0: the whole validation split")
    parser.add_argument("--max-test", type=int, default=0, help="0: the whole test split")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    specs = [parse(s) for s in args.runs]
    for spec in specs:
        dataset_key(spec["key"])  # every key checked before the first build
    results, built = [], {}
    for spec, name in zip(specs, args.runs):
        if spec["key"] not in built:
            t0 = time.perf_counter()
            dataset, hops = dataset_key(spec["key"])
            ds = load_dataset(DatasetConfig(dataset, hops=hops))
            built = {spec["key"]: (ds, *(graphs(ds, list(ds.split[s])[:limit or None], args.workers)
                                         for s, limit in (("train", args.max_train), ("val", args.max_val),
                                                          ("test", args.max_test))))}
            print(json.dumps({"key": spec["key"], "build_seconds": round(time.perf_counter() - t0, 1),
                              **{s: len(d) for s, d in zip(("train", "val", "test"), built[spec["key"]][1:])}}),
                  flush=True)
        ds, train, val, test = built[spec["key"]]
        cfg = ReasonerConfig(entity_dim=spec["entity_dim"], num_ins=spec["num_ins"], num_iter=spec["num_iter"])
        tcfg = ReasonerTrainConfig(lr=spec["lr"], batch_size=spec["batch"], num_epochs=spec["epochs"],
                                   time_budget_s=60 * args.budget_minutes)
        t0 = time.perf_counter()
        model, history = train_reasoner(train, val, int(ds.text_emb.shape[1]), cfg, tcfg,
                                        on_epoch=lambda row: print(json.dumps({"run": name, **row}), flush=True))
        seconds = time.perf_counter() - t0
        scores = evaluate_reasoner(model, test)
        hits = round(scores["h1"] * scores["n"] / 100)
        low, high = wilson_interval(hits, scores["n"])
        row = {"run": name, **spec, "epochs_run": len(history), "train_seconds": round(seconds, 1),
               "best_epoch": max(history, key=lambda h: h["val_h1"])["epoch"],
               "best_val_h1": max(h["val_h1"] for h in history), "test": scores,
               "test_h1_ci": [round(100 * low, 2), round(100 * high, 2)], "history": history,
               "reasoner": asdict(cfg), "train": asdict(tcfg), "device": str(next(model.parameters()).device)}
        print(json.dumps({k: v for k, v in row.items() if k != "history"}), flush=True)
        results.append(row)
    write_result("reasoner_sweep" + (f"_{args.tag}" if args.tag else ""),
                 {"runs": results, "settings": {k: v for k, v in vars(args).items() if k != "runs"}})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
