"""GNN-RAG's reasoner studies on whole splits, outside notebook 04 (docs/method.md §3.1): one subcommand each.

    python bench/reasoner_studies.py test --keys metaqa-3hop --max-train 0 --max-val 200 --max-test 1000 --out DIR
    python bench/reasoner_studies.py changes --keys metaqa-1hop,metaqa-2hop,webqsp --out DIR
    python bench/reasoner_studies.py paired --keys metaqa-3hop --reasoners "A=a.pt,B=b.pt" --out FILE.json
    python bench/reasoner_studies.py llm-half --reasoners "metaqa-3hop=a.pt,webqsp=b.pt" --out DIR

``test`` trains the default reasoner per dataset key and scores it on test; ``changes`` is notebook 04's change table
(:func:`gr_core.studies.gnn_rag.reasoner_change_tables`); ``paired`` scores two saved reasoners on the same questions
(exact McNemar); ``llm-half`` runs GNN-RAG's LLM half (retrievers ``none`` and ``gnn``) on saved reasoners. Every
subcommand checks its keys and files before anything trains. Keys: ``webqsp``, ``metaqa-1hop`` ... ``metaqa-3hop``.
"""
from __future__ import annotations

import argparse
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from gr_core.config import LLMConfig
from gr_core.g_retriever.train import TrainConfig
from gr_core.gnn_rag.evidence import GNNRAGConfig
from gr_core.gnn_rag.model import ReasonerConfig
from gr_core.gnn_rag.training import (ReasonerTrainConfig, load_reasoner, node_probabilities, reasoner_dataset,
                                      save_reasoner, score_questions)
from gr_core.graphqa import DatasetConfig, load_dataset
from gr_core.paths import repo_relative
from gr_core.runs import environment_record, write_csv, write_json, write_records
from gr_core.stats import compare, percent_interval, verdict
from gr_core.studies.gnn_rag import dataset_key, reasoner_change_tables, run_reasoner
from gr_core.studies.gnn_rag_llm import retriever_table, run_gnn_rag


def _provenance(study: str, keys: str, out, max_train, max_val, max_test, cfg: ReasonerConfig,
                tcfg: ReasonerTrainConfig) -> dict:
    """``settings``, the ``command`` that reruns a run of :func:`main` and the ``env`` record, for its metrics.json."""
    out = repo_relative(out)
    return {"settings": {"max_train": max_train, "max_val": max_val, "max_test": max_test, "reasoner": asdict(cfg),
                         "train": asdict(tcfg)},
            "command": f"python bench/reasoner_studies.py {study} --keys {keys} --max-train {max_train or 0} "
                       f"--max-val {max_val or 0} --max-test {max_test or 0} --epochs {tcfg.num_epochs} "
                       f"--budget-minutes {tcfg.time_budget_s / 60:g}"
                       + (f" --lr {tcfg.lr:g}" if tcfg.lr != ReasonerTrainConfig.lr else "") + f" --out {out}",
            "env": environment_record()}


def reasoner_test_run(key: str, out_dir, max_train: int | None = None, max_val: int | None = None,
                      max_test: int | None = None, cfg: ReasonerConfig = ReasonerConfig(),
                      tcfg: ReasonerTrainConfig = ReasonerTrainConfig()) -> dict:
    """Train the reasoner on one dataset key and score it on test; write ``out_dir``: ``metrics.json`` (H@1 with its
    95% Wilson interval, F1, n, training seconds, the history, settings and environment), ``by_type.csv`` (H@1 per
    MetaQA question type), ``by_candidates.csv`` (H@1 by the size of the 0.95 candidate set) and the reasoner."""
    out_dir = Path(out_dir)
    def show(row):  # a long run reports each epoch as it ends
        print(f"{key} epoch {row['epoch']}: train loss {row['train_loss']:.3f}, validation H@1 {row['val_h1']:.1f}, "
              f"{row['seconds']:.0f} s", flush=True)

    result = run_reasoner(*dataset_key(key), max_train or None, max_val or None, max_test or None, cfg, tcfg, show)
    ds, test_idx = result["ds"], result["test_indices"]
    scores = pd.DataFrame(result["scores"])
    scores["qtype"] = [(ds.records[i].extra or {}).get("qtype", "all") for i in test_idx]
    hits = int(scores.h1.sum())
    metrics = {"key": key, **result["metrics"], "h1_ci": list(percent_interval(hits, len(scores), 2)),
               "epochs_run": len(result["history"]), "history": result["history"],
               **_provenance("test", key, out_dir.parent, max_train, max_val, max_test, cfg, tcfg)}
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "metrics.json").unlink(missing_ok=True)  # an earlier run's metrics never describe this run's files
    by_type = scores.groupby("qtype").agg(n=("h1", "size"), h1=("h1", "mean"), f1=("f1", "mean"),
                                          candidates=("candidates", "mean")).reset_index()
    by_type[["h1", "f1"]] *= 100
    write_csv(by_type.round(2), out_dir / "by_type.csv")
    bins = pd.cut(scores.candidates, [-1, 0, 1, 2, 5, 10, 50, 200, 10**6], right=True)  # (-1, 0]: no candidate
    by_size = scores.groupby(bins, observed=True).agg(n=("h1", "size"), h1=("h1", "mean")).reset_index()
    by_size["h1"] *= 100
    write_csv(by_size.astype({"candidates": str}).round(2), out_dir / "by_candidates.csv")
    save_reasoner(result["model"], out_dir / f"{key}.pt")
    write_json(out_dir / "metrics.json", metrics)  # last: the files beside it are this run's
    low, high = metrics["h1_ci"]
    print(f"{key}: test H@1 {metrics['h1']:.2f} [{low:.1f}, {high:.1f}] F1 {metrics['f1']:.2f} "
          f"n {len(scores)}, {metrics['epochs_run']} epochs, {metrics['train_seconds']:.0f} s", flush=True)
    return metrics


def key_test_graphs(key: str, max_test: int | None = None) -> tuple:
    """The first ``max_test`` test questions of a dataset key as reasoner graphs: ``(dataset, indices, graphs)``."""
    name, hops = dataset_key(key)
    ds = load_dataset(DatasetConfig(name, hops=hops))
    idx = list(ds.split["test"])[:max_test or None]
    return ds, idx, reasoner_dataset(ds, idx, f"{key} test graphs")


def paired_reasoners(key: str, reasoners: dict[str, str], out_file, max_test: int | None = None) -> dict:
    """Two saved reasoners (``{label: path}``, the first the one claimed better) scored on the same test questions of
    ``key``: H@1 of each with its 95% interval and the exact McNemar test, written to ``out_file`` (JSON)."""
    if len(reasoners) != 2:
        raise ValueError(f"paired_reasoners compares two reasoners, got {len(reasoners)}: {sorted(reasoners)}")
    _, idx, test = key_test_graphs(key, max_test)
    h1 = {label: [float(r["h1"]) for r in score_questions(load_reasoner(path), test)]
          for label, path in reasoners.items()}
    (a, hits_a), (b, hits_b) = h1.items()
    out = {"key": key, "n": len(idx),
           "h1": {label: round(100 * sum(v) / len(v), 2) for label, v in h1.items()},
           "h1_ci": {label: list(percent_interval(sum(v), len(v), 2)) for label, v in h1.items()},
           "mcnemar": compare(hits_a, hits_b), "reasoners": reasoners, "env": environment_record()}
    write_json(out_file, out)
    print(f"{key}, n {len(idx)}: {a} {out['h1'][a]} vs {b} {out['h1'][b]}, exact McNemar p "
          f"{out['mcnemar']['p']:.2g}", flush=True)
    return out


# notebook 04's recipe at its cpu preset's settings, for llm_half_run
LLM_HALF_SETTINGS = {"llm_max_train": 96, "llm_max_val": 24, "llm_epochs": 2, "llm_lr": 1e-3, "evidence_tokens": 256,
                     "llm_model": "embedded:smollm2-135m-instruct", "seed": 0}


def llm_half_run(reasoners: dict[str, str], out_dir, max_test: int = 100) -> dict:
    """GNN-RAG's LLM half (retrievers ``none`` and ``gnn``, :data:`LLM_HALF_SETTINGS`) on saved reasoners
    (``{dataset key: path}``), the first ``max_test`` test questions of each key, with the exact McNemar test of
    ``gnn`` against ``none`` on Hit and on Hit@1. Writes ``out_dir``: ``retrievers.csv``, ``predictions.jsonl.gz``,
    ``paired.csv`` and ``metrics.json`` (settings, LoRA histories, environment)."""
    out_dir = Path(out_dir)
    results = {}
    for key, path in reasoners.items():
        ds, idx, test = key_test_graphs(key, max_test)
        model = load_reasoner(path)
        probs = node_probabilities(model, test)
        results[key] = {"ds": ds, "test_indices": idx, "probs": probs,
                        "scores": score_questions(model, test, probs=probs)}
    s = LLM_HALF_SETTINGS
    train = TrainConfig(lr=s["llm_lr"], num_epochs=s["llm_epochs"], batch_size=8, eval_batch_size=16)
    rag = run_gnn_rag(results, out_dir / "runs", llm=LLMConfig(model=s["llm_model"]), train=train,
                      cfg=GNNRAGConfig(evidence_tokens=s["evidence_tokens"]), max_train=s["llm_max_train"],
                      max_val=s["llm_max_val"], max_test=max_test, retrievers=("none", "gnn"), seed=s["seed"])
    rows = rag["rows"]
    paired = []
    for key, g in rows.groupby("dataset", sort=False):
        by = {r: g[g.retriever == r].sort_values("index") for r in ("gnn", "none")}
        for metric in ("hit", "hit1"):
            a, b = by["gnn"][metric].to_numpy(), by["none"][metric].to_numpy()
            r = compare(a, b)
            paired.append({"dataset": key, "metric": metric, "n": r["n"], "gnn": round(100 * r["score_a"], 1),
                           "gnn 95% CI": list(percent_interval(float(a.sum()), len(a))),
                           "none": round(100 * r["score_b"], 1),
                           "none 95% CI": list(percent_interval(float(b.sum()), len(b))),
                           "gnn only": r["a_only"], "none only": r["b_only"], "p": r["p"],
                           "verdict": verdict(r["diff"], r["p"])})
    out_dir.mkdir(parents=True, exist_ok=True)
    table, paired = retriever_table(rows), pd.DataFrame(paired)
    write_csv(table, out_dir / "retrievers.csv")
    write_csv(paired, out_dir / "paired.csv")
    write_records(rows, out_dir / "predictions.jsonl.gz")
    write_json(out_dir / "metrics.json", {
        "reasoners": reasoners, "retrievers": table.to_dict("records"), "paired": paired.to_dict("records"),
        "training": rag["training"], "settings": {"max_test": max_test, **LLM_HALF_SETTINGS},
        "env": environment_record()})
    print(paired.to_string(), flush=True)
    return {"rows": rows, "retrievers": table, "paired": paired}


def main(argv: list[str] | None = None) -> int:
    """``python bench/reasoner_studies.py STUDY ...``: notebook 04's reasoner studies outside the notebook, one
    subcommand each (``python bench/reasoner_studies.py STUDY --help``)."""
    parser = argparse.ArgumentParser(prog="python bench/reasoner_studies.py", description=main.__doc__)
    sub = parser.add_subparsers(dest="study", required=True)

    def study(name: str, help_: str, keys: bool = True, out_help: str = "the output folder") -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        if keys:
            p.add_argument("--keys", required=True,
                           help="comma-separated: webqsp, metaqa-1hop, metaqa-2hop, metaqa-3hop")
        p.add_argument("--out", required=True, type=Path, help=out_help)
        p.add_argument("--max-train", type=int, default=976, help="0: the whole training split")
        p.add_argument("--max-val", type=int, default=200)
        p.add_argument("--max-test", type=int, default=0, help="test questions (0: the whole split)")
        p.add_argument("--epochs", type=int, default=5)
        p.add_argument("--budget-minutes", type=float, default=0.0, help="training time budget per key (0: none)")
        p.add_argument("--lr", type=float, default=ReasonerTrainConfig.lr, help="Adam learning rate (GNN-RAG: 5e-4)")
        return p

    changes = study("changes", "notebook 04's change table per key (validation only): reasoner_changes.csv, "
                    "..._by_type.csv and reasoner_changes.json (settings, package versions, commit) in --out")
    changes.add_argument("--first-and-last", default="", help="keys that train only the first version and all switches")
    study("test", "train the default reasoner once per key and score it on test (reasoner_test_run), in --out/KEY")
    paired = study("paired", "score two saved reasoners on the same --max-test questions of the one --keys key, "
                   "paired exact McNemar (paired_reasoners)", out_help="the result file (.json)")
    paired.add_argument("--reasoners", required=True, help="LABEL=FILE.pt,LABEL=FILE.pt")
    half = study("llm-half", "GNN-RAG's LLM half on saved reasoners (llm_half_run), the first --max-test (default "
                 "100) test questions of each key", keys=False)
    half.add_argument("--reasoners", required=True, help="KEY=FILE.pt,...")
    args = parser.parse_args(argv)
    try:  # every key and KEY=FILE item checked before the first one trains
        for key in args.keys.split(",") if args.study != "llm-half" else []:
            dataset_key(key)
        if args.study in ("paired", "llm-half"):
            items = args.reasoners.split(",")
            if not all("=" in item and all(item.split("=", 1)) for item in items):
                name = "LABEL" if args.study == "paired" else "KEY"
                raise ValueError(f"--reasoners {args.reasoners!r}: expected {name}=FILE.pt items separated by commas")
            pairs = dict(item.split("=", 1) for item in items)
            if args.study == "paired" and "," in args.keys:
                raise ValueError(f"--keys {args.keys!r}: paired scores on one key's test questions")
            if args.study == "paired" and len(pairs) != 2:
                raise ValueError(f"--reasoners {args.reasoners!r}: paired compares two reasoners, got {len(pairs)}")
            for key in pairs if args.study == "llm-half" else []:
                dataset_key(key)
            missing = [f for f in pairs.values() if not Path(f).is_file()]
            if missing:
                raise ValueError(f"--reasoners: no such file: {', '.join(missing)}")
    except ValueError as err:
        parser.error(str(err))
    cfg = ReasonerConfig()
    tcfg = ReasonerTrainConfig(num_epochs=args.epochs, seed=0, time_budget_s=60 * args.budget_minutes, lr=args.lr)
    if args.study == "llm-half":
        llm_half_run(pairs, args.out, args.max_test or 100)
    elif args.study == "paired":
        paired_reasoners(args.keys, pairs, args.out, args.max_test)
    elif args.study == "test":
        for key in args.keys.split(","):
            reasoner_test_run(key, args.out / key, args.max_train, args.max_val, args.max_test, cfg, tcfg)
    else:
        def save(table, by_type):
            args.out.mkdir(parents=True, exist_ok=True)
            print(table.to_string(), flush=True)
            write_csv(table, args.out / "reasoner_changes.csv")
            write_csv(by_type, args.out / "reasoner_changes_by_type.csv")
            write_json(args.out / "reasoner_changes.json", {"settings": {**vars(args), "out": str(args.out),
                       "reasoner": asdict(cfg), "train": asdict(tcfg)}, "env": environment_record()})

        reasoner_change_tables(args.keys.split(","), args.max_train, args.max_val, cfg, tcfg,
                               tuple(filter(None, args.first_and_last.split(","))), on_key=save)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
