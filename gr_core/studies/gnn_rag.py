"""Notebook 04's studies of the reasoner: one training per dataset key and the one-change-at-a-time table toward
ReaRev as released (whole-split test runs and paired comparisons: ``bench/reasoner_studies.py``)."""
from __future__ import annotations

import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np
import pandas as pd

from ..config import check_choice, usable_device
from ..gnn_rag.evidence import GNNRAGConfig, gnn_evidence
from ..gnn_rag.model import SWITCH_NAMES, ReasonerConfig
from ..gnn_rag.training import (ReasonerTrainConfig, load_reasoner, node_probabilities, reasoner_dataset,
                                reasoner_meta, save_reasoner, score_questions, summarize_scores, train_reasoner)
from ..graphqa import DatasetConfig, cache_key, data_inputs, load_dataset
from ..published import PAPER_GNN_ONLY
from ..runs import config_hash, frame_value, read_keyed, value_frame, write_keyed
from ..stats import percent_interval, wilson_interval


# ---------------------------------------------------------------------- notebook-level helpers
REASONER_DATASETS = ("webqsp", "rog_webqsp", "rog_cwq", "metaqa")  # what the reasoner trains on (GNN-RAG Table 7)
METAQA_HOPS = (1, 2, 3)


def dataset_keys(datasets: list[str], metaqa_hops: list[int]) -> list[tuple[str, str, int]]:
    """``(key, dataset name, hops)`` per run: MetaQA once per hop set (``metaqa-2hop``), the others as named;
    ValueError for a dataset or a MetaQA hop count there is no data for."""
    if unknown := [d for d in datasets if d not in REASONER_DATASETS]:
        raise ValueError(f"datasets {unknown}: the reasoner trains on {list(REASONER_DATASETS)}")
    if "metaqa" in datasets and (odd := [h for h in metaqa_hops if h not in METAQA_HOPS]):
        raise ValueError(f"metaqa_hops {odd}: MetaQA has {list(METAQA_HOPS)}-hop questions")
    keys = [(name, name, 2) for name in datasets if name != "metaqa"]
    return keys + ([(f"metaqa-{h}hop", "metaqa", int(h)) for h in metaqa_hops] if "metaqa" in datasets else [])


def dataset_key(key: str) -> tuple[str, int]:
    """``(dataset name, hops)`` of a dataset key (``webqsp``, ``metaqa-1hop`` ...); ValueError names the known keys."""
    known = {k: (name, hops) for k, name, hops in dataset_keys(list(REASONER_DATASETS), list(METAQA_HOPS))}
    if key not in known:
        raise ValueError(f"dataset key {key!r} is not one of {sorted(known)}")
    return known[key]


def reasoner_identity(data: DatasetConfig, cfg: ReasonerConfig, tcfg: ReasonerTrainConfig, max_train: int | None,
                      max_val: int | None) -> dict:
    """The key a trained reasoner's saved results are kept under: the data's cache key, the settings (the device
    aside: a reasoner trained on GPU serves a CPU rerun) and the question caps (None and 0: the whole split)."""
    return {"data": cache_key(data), "cfg": asdict(cfg), "train": asdict(replace(tcfg, device="")),
            "max_train": max_train or 0, "max_val": max_val or 0}


def run_reasoner(dataset: str, hops: int = 2, max_train: int | None = None, max_val: int | None = None,
                 max_test: int | None = None, cfg: ReasonerConfig = ReasonerConfig(),
                 tcfg: ReasonerTrainConfig = ReasonerTrainConfig(), on_epoch=None, save_path=None) -> dict:
    """Train the reasoner on one KGQA dataset and score it on test (``on_epoch``: see :func:`train_reasoner`).

    ``save_path``: the trained reasoner is written there with its :func:`reasoner_identity`, and a later call with
    the same key loads it instead of training again (a stopped notebook resumes after its last finished reasoner).

    Returns:
        ``{"ds", "model", "history", "metrics", "test_indices", "probs", "test_data", "scores"}``; ``scores``: per
        test question :func:`score_questions`; metrics their :func:`summarize_scores` plus ``train_seconds``.
    """
    ds = load_dataset(DatasetConfig(dataset, hops=hops))
    key = reasoner_identity(ds.config, cfg, tcfg, max_train, max_val)
    inputs = data_inputs(ds.config)  # the encoder's version too (reasoners saved before it are taken as they are)
    saved = reasoner_meta(save_path) if save_path and Path(save_path).is_file() else {}
    test_idx = list(ds.split["test"])[:max_test or None]
    test = reasoner_dataset(ds, test_idx, f"{dataset} test graphs")
    if saved.get("key_hash") == config_hash(key) and saved.get("inputs", inputs) == inputs:
        model = load_reasoner(save_path).to(usable_device(tcfg.device))
        history, seconds, num_train = saved["history"], saved["train_seconds"], saved["num_train"]
        print(f"{dataset} ({hops} hops): reasoner reloaded from {save_path} (trained in {seconds:.0f} s)", flush=True)
    else:
        # max_* of None or 0 keep the whole split
        train = reasoner_dataset(ds, list(ds.split["train"])[:max_train or None], f"{dataset} train graphs")
        val = reasoner_dataset(ds, list(ds.split["val"])[:max_val or None], f"{dataset} val graphs")
        t0 = time.perf_counter()
        model, history = train_reasoner(train, val, int(ds.text_emb.shape[1]), cfg, tcfg, on_epoch)
        seconds, num_train = round(time.perf_counter() - t0, 2), len(train)
        if save_path:
            save_reasoner(model, save_path, {"dataset": dataset, "hops": hops, "key_hash": config_hash(key),
                                             "identity": key, "inputs": inputs, "history": history,
                                             "train_seconds": seconds, "num_train": num_train})
    probs = node_probabilities(model, test)
    scores = score_questions(model, test, probs=probs)
    metrics = summarize_scores(scores) | {"train_seconds": seconds, "num_train": num_train,
                                          "missing_seed": sum(d.missing_seed for d in test)}
    return {"ds": ds, "model": model, "history": history, "metrics": metrics, "test_indices": test_idx,
            "probs": probs, "test_data": test, "scores": scores}


def run_reasoners(datasets: list[str], metaqa_hops: list[int], max_train: int | None, max_val: int | None,
                  max_test: int | None, cfg: ReasonerConfig, tcfg: ReasonerTrainConfig,
                  by_key: dict | None = None, save_dir=None) -> dict:
    """:func:`run_reasoner` for every dataset key (:func:`dataset_keys`), each in turn; with ``save_dir``, each
    reasoner is saved as ``save_dir/<key>.pt`` as soon as it is trained and reloaded when its key is unchanged.

    Args:
        by_key: dataset key -> its own ``max_train`` / ``max_val`` / ``max_test`` / ``num_epochs`` on top of the
            shared ones (the quick preset trains MetaQA-3hop's reasoner on its whole split, the others on 976).
    Returns:
        dataset key -> :func:`run_reasoner`'s result.
    """
    by_key = by_key or {}
    known = {key for key, _, _ in dataset_keys(datasets, metaqa_hops)}
    unknown = sorted(set(by_key) - known)
    if unknown:
        raise ValueError(f"by_key names dataset keys that are not run: {unknown} (run: {sorted(known)})")
    out = {}
    for key, name, hops in dataset_keys(datasets, metaqa_hops):
        own = dict(by_key.get(key) or {})
        bad = sorted(set(own) - {"max_train", "max_val", "max_test", "num_epochs"})
        if bad:
            raise ValueError(f"by_key[{key!r}]: unknown settings {bad}")
        mine = replace(tcfg, num_epochs=int(own["num_epochs"])) if "num_epochs" in own else tcfg
        out[key] = run_reasoner(name, hops, own.get("max_train", max_train) or None,
                                own.get("max_val", max_val) or None, own.get("max_test", max_test) or None, cfg, mine,
                                save_path=Path(save_dir) / f"{key}.pt" if save_dir else None)
    return out


def crossfit_evidence(ds, indices: list[int], val_indices: list[int], cfg: ReasonerConfig,
                      tcfg: ReasonerTrainConfig, rag: GNNRAGConfig = GNNRAGConfig(), folds: int = 2) -> dict:
    """GNN-RAG's evidence for questions the reasoner did not train on (beyond the paper: the answer generator then
    trains on evidence like the evidence it serves). ``indices`` are split into ``folds`` by position; a reasoner
    trained on the other folds gives each fold's node probabilities, the first fold's also those of ``val_indices``.

    Returns:
        question index -> the verbalized paths to its 0.95 candidates (:func:`~gr_core.gnn_rag.evidence.gnn_evidence`).
    """
    data = reasoner_dataset(ds, indices, f"{ds.name} cross-fit graphs")
    val = reasoner_dataset(ds, val_indices, f"{ds.name} val graphs")
    probs: dict[int, np.ndarray] = {}
    for f in range(folds):
        model, _ = train_reasoner([d for k, d in enumerate(data) if k % folds != f], val,
                                  int(ds.text_emb.shape[1]), cfg, tcfg)
        held = [k for k in range(len(indices)) if k % folds == f]
        probs |= dict(zip([indices[k] for k in held], node_probabilities(model, [data[k] for k in held])))
        if f == 0:
            probs |= dict(zip(val_indices, node_probabilities(model, val)))
    return {i: gnn_evidence(ds.graph(i), p, rag).lines for i, p in probs.items()}


CROSSFIT_QUESTIONS = 976  # training questions the cross-fitted reasoners split (the quick reasoners' 976; cost)


def generator_evidence(source: str, results: dict, llm_max_train: int | None, llm_max_val: int | None,
                       cfg: ReasonerConfig, tcfg: ReasonerTrainConfig, by_key: dict | None = None,
                       rag: GNNRAGConfig = GNNRAGConfig()) -> dict | None:
    """What the answer generator reads in training (notebook 04's ``llm_train_evidence``): ``"gold"``, the gold paths
    (GNN-RAG; returns None), or ``"gnn"``: per key of ``results``, :func:`crossfit_evidence` over the first
    max(``CROSSFIT_QUESTIONS``, ``llm_max_train``) training questions with the key's epochs, as dataset key ->
    {question index: evidence lines} (:func:`~gr_core.studies.gnn_rag_llm.run_gnn_rag`'s ``train_evidence``)."""
    check_choice("04_gnn_rag", "llm_train_evidence", source, ("gold", "gnn"))
    if source == "gold":
        return None
    out = {}
    for key, r in results.items():
        own = (by_key or {}).get(key) or {}
        mine = replace(tcfg, num_epochs=int(own["num_epochs"])) if "num_epochs" in own else tcfg
        ds = r["ds"]
        n = max(CROSSFIT_QUESTIONS, llm_max_train or 0) if llm_max_train else None
        out[key] = crossfit_evidence(ds, list(ds.split["train"])[:n], list(ds.split["val"])[:llm_max_val or None],
                                     cfg, mine, rag)
    return out


# Notebook 04's change table: each switch of :class:`ReasonerConfig` toward ReaRev as released, then our one deviation,
# cumulative: each row's difference to the row above is that change alone.
REASONER_CHANGES: list[tuple[str, dict]] = [
    ("first version", {name: False for name in SWITCH_NAMES} | {"mask_topic": False}),
    ("+ seeds masked in every layer's softmax", {"mask_seeds": True}),
    ("+ a self-loop fact per entity", {"self_loops": True}),
    ("+ node states kept across iterations", {"keep_states": True}),
    ("+ directions apart, a relation linear per layer", {"split_directions": True}),
    ("+ a gated Fusion per instruction", {"fusion_reform": True}),
    ("+ the topic's name masked in the question", {"mask_topic": True}),
]


def reasoner_change_table(dataset: str, hops: int = 2, max_train: int | None = None, max_val: int | None = None,
                          cfg: ReasonerConfig = ReasonerConfig(), tcfg: ReasonerTrainConfig = ReasonerTrainConfig(),
                          changes: list[tuple[str, dict]] = REASONER_CHANGES) -> tuple["pd.DataFrame", "pd.DataFrame"]:
    """Train the reasoner once per cumulative change and score each on **validation** (the test split is not read).

    Returns:
        ``(table, by_type)``: per change, validation H@1 / F1 (%) with H@1's 95% Wilson interval, the difference to
        the row above, mean candidate-set size and training seconds; per change and question type (MetaQA's
        ``qtype``, else ``"all"``) the validation H@1.
    """
    ds = load_dataset(DatasetConfig(dataset, hops=hops))
    val_idx = list(ds.split["val"])[:max_val or None]
    train = reasoner_dataset(ds, list(ds.split["train"])[:max_train or None], f"{dataset} train graphs")
    val = reasoner_dataset(ds, val_idx, f"{dataset} val graphs")
    qtypes = [(ds.records[i].extra or {}).get("qtype", "all") for i in val_idx]
    rows, by_type, fields = [], [], {}
    for name, change in changes:
        fields = {**fields, **change}
        c = replace(cfg, **fields)
        t0 = time.perf_counter()
        model, history = train_reasoner(train, val, int(ds.text_emb.shape[1]), c, tcfg)
        seconds = time.perf_counter() - t0
        scores = score_questions(model, val)
        hits = sum(r["h1"] for r in scores)
        low, high = wilson_interval(int(hits), len(scores))
        rows.append({"change": name, "val H@1": 100 * hits / max(len(scores), 1), "ci_low": 100 * low,
                     "ci_high": 100 * high, "val F1": 100 * float(np.mean([r["f1"] for r in scores])),
                     "mean candidates": float(np.mean([r["candidates"] for r in scores])), "n": len(scores),
                     "best epoch": (max(history, key=lambda h: h["val_h1"]) if val else history[-1])["epoch"]
                     if history else None,
                     "train seconds": round(seconds, 1)})
        frame = pd.DataFrame(scores).assign(qtype=qtypes)
        for t, g in frame.groupby("qtype"):
            by_type.append({"change": name, "qtype": t, "n": len(g), "val H@1": 100 * g.h1.mean()})
    table = pd.DataFrame(rows)
    table.insert(2, "difference", table["val H@1"].diff())
    return table.round(2), pd.DataFrame(by_type).round(2)


def reasoner_change_tables(keys: list[str], max_train: int | None = None, max_val: int | None = None,
                           cfg: ReasonerConfig = ReasonerConfig(), tcfg: ReasonerTrainConfig = ReasonerTrainConfig(),
                           first_and_last: tuple[str, ...] = (), on_key=None,
                           cache_dir=None) -> tuple["pd.DataFrame", "pd.DataFrame"]:
    """:func:`reasoner_change_table` per dataset key, concatenated with a ``dataset`` column; keys in
    ``first_and_last`` train only the first version and all switches. ``on_key(table, by_type)`` is called after each
    key with the tables so far; ``cache_dir``: each key's tables are kept there (``<key>.json``) and reused."""
    resolved = {key: dataset_key(key) for key in keys}  # every key checked before the first training
    every = {field: True for _, change in REASONER_CHANGES for field in change}
    tables, types = {}, {}
    for key in keys:
        changes = [REASONER_CHANGES[0], ("every change", every)] if key in first_and_last else REASONER_CHANGES
        name, hops = resolved[key]
        ident = reasoner_identity(DatasetConfig(name, hops=hops), cfg, tcfg, max_train, max_val) | {"changes": changes}
        done = read_keyed(Path(cache_dir) / f"{key}.json", ident) if cache_dir else None
        if done is not None:
            tables[key], types[key] = (value_frame(done, part, part + "_columns") for part in ("table", "by_type"))
            print(f"{key}: change table reloaded from {cache_dir}", flush=True)
        else:
            tables[key], types[key] = reasoner_change_table(name, hops, max_train, max_val, cfg, tcfg, changes)
            if cache_dir:
                write_keyed(Path(cache_dir) / f"{key}.json", ident,
                            frame_value(tables[key], "table", "table_columns")
                            | frame_value(types[key], "by_type", "by_type_columns"))
        table = pd.concat(tables, names=["dataset", None]).reset_index(level=0)
        by_type = pd.concat(types, names=["dataset", None]).reset_index(level=0)
        if on_key is not None:
            on_key(table, by_type)
    return (table, by_type) if keys else (pd.DataFrame(), pd.DataFrame())


def gnn_only_table(results: dict) -> "pd.DataFrame":
    """One row per dataset of :func:`run_reasoner` results (H@1 with its Wilson 95% interval), beside the paper's."""
    rows = []
    for key, r in results.items():
        paper, m = PAPER_GNN_ONLY.get(key, {}), r["metrics"]
        n = m.get("n") or 0
        low, high = percent_interval(m["h1"] / 100 * n, n, 2)
        rows.append({"dataset": key, **{k: round(v, 2) if isinstance(v, float) else v for k, v in m.items()},
                     "h1_ci_low": low, "h1_ci_high": high,
                     "paper H@1": paper.get("h1"), "paper F1": paper.get("f1"),
                     "paper source": paper.get("source", "")})
    return pd.DataFrame(rows)
