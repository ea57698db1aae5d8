"""Efficiency: what each way of putting a graph into the prompt costs, and how it scales (GR Tables 4 and 12).

Three ways, timed per question on the same graphs: ``whole graph`` (every node and edge textualized: G-Retriever's
"before retrieval"), ``pcst`` (G-Retriever's top-k prizes + PCST, then the subgraph textualized) and ``gnn paths``
(GNN-RAG: the reasoner's node probabilities, the 0.95 candidates, shortest paths from the question entities,
verbalized). Tokens are counted with the LLM's tokenizer on what each method produces, before any prompt budget;
seconds exclude loading the question's graph (common to all three).
"""
from __future__ import annotations

import re
import time

import numpy as np
import pandas as pd

from ..g_retriever.textualize import textualize
from ..llm import count_tokens
from ..precision import run_precision
from ..published import PAPER_COLUMN, PAPER_TABLE4, PAPER_TABLE12
from ..report.results import by_name, score_interval
from ..runs import progress

METHODS = ("whole graph", "pcst", "gnn paths")

TABLE12_LABEL = {"question_only": "Question only", "zero_shot": "Textual graph and question",
                 "prompt_tuning": "Prompt tuning", "g_retriever": "G-Retriever", "lora": "LoRA",
                 "g_retriever_lora": "G-Retriever w/ LoRA"}


def cost_rows(ds, indices: list[int], key: str, tokenizer, reasoner=None) -> pd.DataFrame:
    """One row per (question, method): graph size, prompt tokens and seconds of that method.

    Args:
        key: the label of this graph set in the rows (``metaqa-2hop``, ``webqsp_full``).
        reasoner: a trained :class:`~gr_core.gnn_rag.ReaRev` for ``gnn paths`` (None leaves that method out).
    Returns:
        columns ``key, question, nodes, edges, method, nodes_after, tokens, seconds``.
    """
    from ..gnn_rag import node_probabilities, question_data  # noqa: PLC0415 deferred: loads torch (~1.5 s at start-up) through gr_core.gnn_rag; this module stays torch-free
    from ..gnn_rag.evidence import GNNRAGConfig, gnn_evidence  # noqa: PLC0415 deferred: loads torch (~1.5 s at start-up) through gr_core.gnn_rag.evidence; this module stays torch-free
    from ..graphqa import retrieve  # noqa: PLC0415 deferred: loads torch (~1.5 s at start-up) through gr_core.graphqa; this module stays torch-free

    rows = []
    ds.prefetch(indices)  # texts are encoded on first use: here, outside every timed method
    if reasoner is not None and indices:  # first-call setup (allocator, kernels) is not a per-question cost
        node_probabilities(reasoner, [question_data(ds, indices[0])])
    for i in progress(indices, desc=f"{key} costs"):
        g = ds.graph(i)
        base = {"key": key, "question": i, "nodes": g.num_nodes, "edges": g.num_edges}
        t0 = time.perf_counter()
        desc = textualize(g)
        rows.append({**base, "method": "whole graph", "nodes_after": g.num_nodes,
                     "seconds": time.perf_counter() - t0, "tokens": count_tokens(tokenizer, [desc])[0]})
        t0 = time.perf_counter()
        res = retrieve(ds, i, graph=g)
        rows.append({**base, "method": "pcst", "nodes_after": res.graph.num_nodes,
                     "seconds": time.perf_counter() - t0, "tokens": count_tokens(tokenizer, [res.desc])[0]})
        if reasoner is not None:
            t0 = time.perf_counter()
            probs = node_probabilities(reasoner, [question_data(ds, i, g)])[0]
            ev = gnn_evidence(g, probs, GNNRAGConfig())
            seconds = time.perf_counter() - t0
            names = {n for line in ev.lines for n in re.split(r" (?:->|<-) ", line)[::2]}  # entity, rel, entity, ...
            rows.append({**base, "method": "gnn paths", "nodes_after": len(names), "seconds": seconds,
                         "tokens": count_tokens(tokenizer, ["\n".join(ev.lines)])[0]})
    return pd.DataFrame(rows)


def scaling_study(sets: list[str], tokenizer, questions: int | None = None, reasoner_train: int | None = None,
                  reasoner_epochs: int = 4, seed: int = 0) -> pd.DataFrame:
    """:func:`cost_rows` over graph sets named like ``metaqa-2hop``, ``webqsp_full``, ``clevr``, with one GNN
    reasoner per KGQA dataset (``webqsp_full`` uses WebQSP's); other graph sets get no ``gnn paths`` rows."""
    from ..gnn_rag import ReasonerTrainConfig  # noqa: PLC0415 deferred: loads torch (~1.5 s at start-up) through gr_core.gnn_rag; this module stays torch-free
    from ..graphqa import DatasetConfig, load_dataset  # noqa: PLC0415 deferred: loads torch (~1.5 s at start-up) through gr_core.graphqa; this module stays torch-free
    from .gnn_rag import run_reasoner  # noqa: PLC0415 deferred: loads torch (~1.5 s at start-up) through gr_core.studies.gnn_rag; this module stays torch-free

    reasoners, frames = {}, []
    for key in sets:
        name, hops = ("metaqa", int(key.split("-")[1][0])) if key.startswith("metaqa") else (key, 2)
        train_on = "webqsp" if name == "webqsp_full" else name
        if name in ("metaqa", "webqsp", "webqsp_full") and (train_on, hops) not in reasoners:
            r = run_reasoner(train_on, hops, max_train=reasoner_train,
                             max_val=max(1, reasoner_train // 4) if reasoner_train else None, max_test=1,
                             tcfg=ReasonerTrainConfig(num_epochs=reasoner_epochs, seed=seed))
            reasoners[(train_on, hops)] = r["model"]
            print(f"reasoner {train_on} ({hops} hops): {r['metrics']['num_train']} questions, "
                  f"{r['metrics']['train_seconds']:.0f} s", flush=True)
        ds = load_dataset(DatasetConfig(name, hops=hops))
        frames.append(cost_rows(ds, list(ds.split["test"])[:questions or None], key, tokenizer,
                                reasoners.get((train_on, hops))))
    return pd.concat(frames, ignore_index=True)


def table12_dataset(table4_rows: dict) -> str:
    """Table 12's dataset: the training runs of Table 4's WebQSP row, else ``webqsp``."""
    return (table4_rows.get("webqsp") or (None, "webqsp"))[1]


def runs_plan(table4_rows: dict, table12_methods: list[str]) -> dict[str, list[str]]:
    """The training runs Tables 4 and 12 read: with / without retrieval per Table 4 row, Table 12's methods on
    :func:`table12_dataset`."""
    plan: dict[str, list[str]] = {}
    for _, dataset in table4_rows.values():
        plan.setdefault(dataset, []).extend(m for m in ("g_retriever", "gr_wo_retrieval") if m not in plan[dataset])
    web = table12_dataset(table4_rows)
    plan.setdefault(web, []).extend(m for m in table12_methods if m not in plan[web])
    return plan


def cost_summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per graph set and method: questions, mean nodes, mean / median tokens, median and p90 milliseconds."""
    g = rows.groupby(["key", "method"], sort=False)
    out = g.agg(questions=("question", "count"), nodes=("nodes", "mean"), edges=("edges", "mean"),
                nodes_after=("nodes_after", "mean"), mean_tokens=("tokens", "mean"),
                median_tokens=("tokens", "median"),
                median_ms=("seconds", lambda s: 1000 * float(np.median(s))),
                p90_ms=("seconds", lambda s: 1000 * float(np.quantile(s, 0.9)))).reset_index()
    return out.round(2)


def scaling_fit(rows: pd.DataFrame) -> pd.DataFrame:
    """The slope of log(tokens) and log(seconds) against log(nodes) per method: ~1 grows with the graph, ~0 does not."""
    out = []
    for method, g in rows.groupby("method", sort=False):
        g = g[(g.nodes > 0) & (g.tokens > 0) & (g.seconds > 0)]
        if g.nodes.nunique() < 2:
            continue
        x = np.log(g.nodes.to_numpy(float))
        out.append({"method": method, "questions": len(g),
                    "tokens_slope": float(np.polyfit(x, np.log(g.tokens.to_numpy(float)), 1)[0]),
                    "seconds_slope": float(np.polyfit(x, np.log(g.seconds.to_numpy(float)), 1)[0])})
    return pd.DataFrame(out).round(3)


def plot_scaling(rows: pd.DataFrame):
    """Prompt tokens and milliseconds against graph size, log-log, a colour per method, a marker per graph set."""
    import matplotlib.pyplot as plt  # noqa: PLC0415 deferred: matplotlib (~0.6 s at start-up), only for figures

    markers = dict(zip(rows.key.unique(), "osD^vP*X"))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for j, method in enumerate(METHODS):
        sub = rows[rows.method == method]
        for key, g in sub.groupby("key", sort=False):
            for ax, col, scale in ((axes[0], "tokens", 1), (axes[1], "seconds", 1000)):
                ax.scatter(g.nodes, np.maximum(g[col] * scale, 1e-3), s=10, alpha=0.5, color=f"C{j}",
                           marker=markers[key], label=f"{method} · {key}")
    for ax, label in ((axes[0], "prompt tokens"), (axes[1], "milliseconds per question")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("graph size (nodes)")
        ax.set_ylabel(label)
    axes[0].set_title("what the LLM must read")
    axes[1].set_title("time to build the prompt's graph part")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=7, loc="center right", markerscale=1.5)
    fig.tight_layout(rect=(0, 0, 0.8, 1))
    return fig


def table4(summary: pd.DataFrame, runs: pd.DataFrame, rows: dict[str, tuple[str, str]]) -> pd.DataFrame:
    """GR Table 4: tokens and nodes before / after retrieval, and minutes per training epoch without / with it.

    Args:
        summary: :func:`cost_summary` rows.
        runs: run metrics (:func:`gr_core.report.results.collect_runs`).
        rows: table row -> (graph set key in ``summary``, training dataset of the runs), e.g.
            ``{"webqsp": ("webqsp_full", "webqsp")}``: sizes from the full graphs, epochs from the mini-graph runs.
    """
    by = by_name(runs)
    out = []
    for label, (key, dataset) in rows.items():
        s = summary[summary.key == key].set_index("method")
        if "whole graph" not in s.index:
            continue
        before = by.get(f"{dataset}-gr_wo_retrieval-seed0", {})
        after = by.get(f"{dataset}-g_retriever-seed0", {})
        rec = {"row": label, "sizes from": key, "epochs from": dataset,
               "tokens_before": s.loc["whole graph", "mean_tokens"], "nodes_before": s.loc["whole graph", "nodes"],
               "min_epoch_before": _minutes(before),
               "tokens_after": s.loc["pcst", "mean_tokens"], "nodes_after": s.loc["pcst", "nodes_after"],
               "min_epoch_after": _minutes(after)}
        rec["token_reduction_%"] = round(100 * (1 - rec["tokens_after"] / rec["tokens_before"]), 1)
        rec["node_reduction_%"] = round(100 * (1 - rec["nodes_after"] / rec["nodes_before"]), 1)
        # the two epochs' times are compared: name the precision and CPU each ran on, and compare only like with like
        ran_before, ran_after = _ran_on(before), _ran_on(after)
        rec["dtype_before"], rec["cpu_before"] = ran_before
        rec["dtype_after"], rec["cpu_after"] = ran_after
        if rec["min_epoch_before"] and rec["min_epoch_after"] and None not in ran_before and ran_before == ran_after:
            rec["epoch_reduction_%"] = round(100 * (1 - rec["min_epoch_after"] / rec["min_epoch_before"]), 1)
        rec.update({f"paper {k}": v for k, v in paper_table4(dataset).items()})
        out.append(rec)
    return pd.DataFrame(out)


def paper_table4(dataset: str) -> dict:
    """GR Table 4's row for ``dataset`` (RoG-webqsp is WebQSP's, CLEVR and GQA SceneGraphs'), or {}."""
    return PAPER_TABLE4.get(PAPER_COLUMN.get(dataset) or dataset, {})


def _minutes(metrics: dict) -> float | None:
    """A run's minutes per training epoch (None where it has none)."""
    return None if metrics.get("seconds_per_epoch") is None else round(metrics["seconds_per_epoch"] / 60, 2)


def _ran_on(metrics: dict) -> tuple[str | None, str | None]:
    """``(LLM dtype, CPU model)`` a run was timed on: :func:`~gr_core.report.results.collect_runs`' columns, else the
    run's own precision record; ``None`` where neither says."""
    record = run_precision(metrics)

    def known(key: str) -> str | None:  # NaN (a column absent for this row) and "not recorded" are unknown
        return next((v for v in (metrics.get(key), record.get(key)) if isinstance(v, str) and v != "not recorded"),
                    None)

    return known("dtype"), known("cpu_model")


def table12(runs: pd.DataFrame, dataset: str = "webqsp", seed: int = 0) -> pd.DataFrame:
    """GR Table 12: each configuration's score (with its Wilson 95% interval) and time (minutes per training epoch,
    inference seconds per question), ours beside the paper's."""
    by = by_name(runs)
    out = []
    for method, label in TABLE12_LABEL.items():
        r = by.get(f"{dataset}-{method}-seed{seed}")
        paper_score, paper_time = PAPER_TABLE12[method]
        rec = {"method": label, "name": method, "ours": None, "n_test": None, "ci_low": None, "ci_high": None,
               "dtype": None, "cpu": None, "min/epoch": None,
               "inference s/question": None, "paper Hit@1": paper_score, "paper time": paper_time}
        if r is not None:
            dtype, cpu = _ran_on(r)
            low, high = score_interval(dataset, float(r["score"]), r["num_test"])
            rec.update({"ours": r["score"], "n_test": r["num_test"], "ci_low": low, "ci_high": high, "dtype": dtype,
                        "cpu": cpu,
                        "min/epoch": _minutes(r),
                        "inference s/question": round(r["inference_seconds"] / max(r["num_test"], 1), 3)})
        out.append(rec)
    return pd.DataFrame(out)
