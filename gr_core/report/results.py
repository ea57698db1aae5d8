"""The notebooks' tables read back, and GR's tables built from run directories (``runs/<name>/metrics.json``) beside
the paper's: accuracy as fractions, WebQSP Hit in percent (docs/method.md §1.6); CLEVR stands in for SceneGraphs."""
from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..precision import recorded_dtype, run_precision
from ..published import PAPER_COLUMN, PAPER_TABLE3, PAPER_TABLE6, PAPER_TABLE7, PAPER_TABLE8, PAPER_TABLE10
from ..runs import read_json
from ..stats import compare, seed_bootstrap, wilson_interval

METRIC_NAME = {"explagraphs": "accuracy", "clevr": "accuracy (substring)", "gqa_micro": "accuracy (substring)",
               "gqa": "accuracy (substring)", "webqsp": "Hit (%)", "webqsp_full": "Hit (%)", "metaqa": "Hit (%)",
               "rog_webqsp": "Hit (%)", "rog_cwq": "Hit (%)"}
METHOD_ORDER = ["majority", "negation_parity", "gnn_classifier", "question_only", "zero_shot", "zero_cot", "cot_bag",
                "kaping", "prompt_tuning", "graph_token", "g_retriever", "lora", "g_retriever_lora"]
RANK = {m: i for i, m in enumerate(METHOD_ORDER)}
NO_LLM = METHOD_ORDER[:3]  # the reference rows of gr_core.studies.graph_baselines
GROUNDED = " grounded"  # the suffix of a grounded row's retriever name in notebook 04's tables: "gnn grounded"
SETTING = {m: "no LLM (reference)" for m in NO_LLM} | \
          {m: "inference-only" for m in METHOD_ORDER[3:8]} | {m: "frozen LLM w/ PT" for m in METHOD_ORDER[8:11]} | \
          {"lora": "tuned LLM", "g_retriever_lora": "tuned LLM"}


# notebook output folder -> the CSV tables the report reads (file stem -> title)
SOURCES = {
    "01_datasets": {"table2": "GR Table 2 / GNN-RAG Table 7: datasets"},
    "02_retrieval": {"table4_table11": "GR Tables 4 and 11: retrieval size and accuracy",
                     "table10_k_sweep": "GR Table 10 (retrieval side): k sweep"},
    "03_training": {"table3": "GR Table 3: main results", "efficiency": "GR Table 12 columns: cost per configuration"},
    "04_gnn_rag": {"gnn_only": "GNN-RAG Table 2: the GNN alone", "retrievers": "GNN-RAG Tables 1, 4, 8, 11: retrievers",
                   "per_hop": "GNN-RAG: by hop count",
                   "against_gnn": "GNN-RAG Table 2: the LLM half against the GNN alone, same questions",
                   "failures": "GNN-RAG: what the LLM answers where the gold is among the GNN's candidates"},
    "05_hallucination": {"table5": "GR Table 5: hallucination", "table5_all_levels": "GR Table 5, every match level",
                         "checker_validation": "the citation checker against citations of known truth",
                         "agreement": "the citation checker against its author's labels",
                         "citing_rates": "which models cite at all (every LLM, system and request)"},
    "06_efficiency": {"table4": "GR Table 4: before / after retrieval", "table12": "GR Table 12: score and time",
                      "scaling": "cost vs graph size", "scaling_fit": "cost vs graph size: log-log slopes"},
    "07_ablations": {"table6": "GR Table 6: ablations", "table7": "GR Table 7: graph encoders",
                     "table10": "GR Table 10: k chosen on validation", "table11_k": "GR Table 11 for each k",
                     "table8": "GR Table 8: LLM size"},
}
TITLES = {f"{nb}/{stem}": title for nb, stems in SOURCES.items() for stem, title in stems.items()}  # in that order
FIGURES = {"03_training": ["learning_curves"], "05_hallucination": ["table5"], "06_efficiency": ["scaling"],
           "04_gnn_rag": ["evidence"], "02_retrieval": ["fig_retrieved_subgraph"]}


def load_tables(root: str | Path) -> dict[str, pd.DataFrame]:
    """Every table of :data:`SOURCES` found under ``root`` (``outputs/<preset>``), keyed ``notebook/stem``."""
    return {key: pd.read_csv(path) for key in TITLES if (path := Path(root) / f"{key}.csv").is_file()}


def notebook_statuses(root: str | Path | None, pending: bool = True) -> dict[str, str] | None:
    """Each notebook's status in the last suite run under ``root`` (``suite.json``: ``"04_gnn_rag.ipynb"`` ->
    ``"passed"`` ...); None where no suite ran there (a notebook run alone) or its record is unreadable.
    ``pending=False`` leaves out the notebooks a suite still running has yet to run (their records are an earlier
    run's)."""
    try:
        record = json.loads((Path(root) / "suite.json").read_text())
        later = set() if pending else set(record.get("pending") or ())
        return {r["notebook"]: r.get("status", "") for r in record["notebooks"] if r["notebook"] not in later}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def figures(root: str | Path) -> list[Path]:
    """The PNG figures of :data:`FIGURES` that exist under ``root``."""
    return [p for nb, names in FIGURES.items() for n in names if (p := Path(root) / nb / f"{n}.png").is_file()]


def collect_runs(root: str | Path) -> pd.DataFrame:
    """One row per finished run under ``root`` (a ``runs/`` folder): its ``metrics.json``, the LLM's ``dtype`` ("n/a"
    for the no-LLM rows; :func:`~gr_core.precision.recorded_dtype`) and ``cpu_model``."""
    rows = []
    for path in sorted(Path(root).glob("*/metrics.json")):
        row = read_json(path)
        config = read_json(path.parent / "config.json") if (path.parent / "config.json").is_file() else {}
        llm = (config.get("model") or {}).get("llm") or {}
        no_llm = row.get("method") in NO_LLM and not run_precision(row)
        row["dtype"] = "n/a" if no_llm else recorded_dtype(row, path.parent, llm.get("dtype", "auto"),
                                                           llm.get("device", "auto"))
        row["cpu_model"] = run_precision(row).get("cpu_model", "not recorded")
        rows.append(row)
    return pd.DataFrame(rows)


def metric_scale(dataset: str) -> float:
    """100 where ``dataset``'s score is in percent (KGQA Hit; a key such as ``metaqa-2hop`` too), else 1."""
    return 100.0 if METRIC_NAME.get(dataset.split("-")[0], "").endswith("(%)") else 1.0


def _fmt(mean: float, std: float | None, digits: int) -> str:
    return f"{mean:.{digits}f}" if std is None or np.isnan(std) else f"{mean:.{digits}f} ± {std:.{digits}f}"


def _predictions(runs_dir: str | Path, name: str, limit: int | None = None) -> list[dict]:
    """One run's ``predictions.jsonl``: a dict per test question, in file order (the first ``limit`` only)."""
    with open(Path(runs_dir) / name / "predictions.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in itertools.islice((x for x in fh if x.strip()), limit)]


def run_question_scores(runs_dir: str | Path, name: str) -> pd.Series:
    """One run's per-question score (from ``predictions.jsonl``), indexed by question id in file order."""
    rows = _predictions(runs_dir, name)
    return pd.Series([float(r.get("score", float("nan"))) for r in rows], index=[str(r["id"]) for r in rows],
                     name=name)


def paired(runs_dir: str | Path, name_a: str, name_b: str) -> dict:
    """Run ``name_a`` against ``name_b`` on the same test questions (:func:`gr_core.stats.compare`); runs scored on
    different question sets are never compared: the result then has ``p = nan`` and a ``note``."""
    nan = float("nan")
    try:
        a, b = run_question_scores(runs_dir, name_a), run_question_scores(runs_dir, name_b)
    except FileNotFoundError as err:
        return {"n": 0, "p": nan, "diff": nan, "note": f"missing predictions: {err.filename}"}
    if list(a.index) != list(b.index):
        return {"n": 0, "p": nan, "diff": nan, "note": f"different test questions ({len(a)} vs {len(b)}): not compared"}
    return compare(a.to_numpy(), b.to_numpy())


def table3(runs: pd.DataFrame, runs_dir: str | Path | None = None, reference: str = "zero_shot") -> pd.DataFrame:
    """Long Table 3: per (dataset, method), our mean ± std over seeds next to the paper's value (docs/method.md §4).

    ``ci_low``, ``ci_high``: :func:`seeds_interval`; ``p_vs_zero_shot`` (with ``runs_dir``): exact McNemar of the
    first seed's run against the ``reference`` method's of that seed; ``paper``: SceneGraphs' for CLEVR / GQA.
    """
    if runs.empty:
        return pd.DataFrame()
    rows = []
    for (dataset, method), g in runs.groupby(["dataset", "method"], sort=False):
        g = g.sort_values("seed")
        scores = g["score"].astype(float).to_numpy()
        mean, std = float(scores.mean()), float(scores.std(ddof=1)) if len(scores) > 1 else float("nan")
        digits = 2 if metric_scale(dataset) == 100 else 4
        n = int(g["num_test"].iloc[0])
        low, high = seeds_interval(dataset, runs_dir, list(g["name"]), list(scores), n)
        lows = [score_interval(dataset, float(x), n)[0] for x in scores]
        per_seed = " / ".join(f"{x:.{min(digits, 3)}f}" for x in scores)
        col = PAPER_COLUMN.get(dataset)
        p_mean, p_std = PAPER_TABLE3.get(method, {}).get(col, (None, None)) if col else (None, None)
        p_ref = float("nan")
        if runs_dir is not None and method != reference:
            ref = runs[(runs.dataset == dataset) & (runs.method == reference) & (runs.seed == g["seed"].iloc[0])]
            if len(ref):
                p_ref = paired(runs_dir, g["name"].iloc[0], ref["name"].iloc[0])["p"]
        valid = g["valid"].iloc[0] if "valid" in g and pd.notna(g["valid"].iloc[0]) else None
        dtypes = "+".join(sorted(set(g["dtype"]))) if "dtype" in g else ""
        rows.append({"dataset": dataset, "setting": SETTING.get(method, ""), "method": method,
                     "metric": METRIC_NAME.get(dataset, "score"), "seeds": len(scores), "dtype": dtypes,
                     "n_test": n, "ours_mean": round(mean, 4),
                     "ours_std": None if np.isnan(std) else round(std, 4), "ours": _fmt(mean, std, digits),
                     "ci_low": low, "ci_high": high, "per_seed": per_seed,
                     "lowest_ci_low": None if any(v is None for v in lows) else min(lows),
                     "valid_answers": None if valid is None else round(float(valid), 4),
                     "p_vs_zero_shot": None if np.isnan(p_ref) else float(f"{p_ref:.4g}"),
                     "paper_mean": p_mean, "paper_std": p_std,
                     "paper": "" if p_mean is None else _fmt(p_mean, p_std, digits)})
    out = pd.DataFrame(rows)
    out["_m"] = out.method.map(RANK).fillna(99)
    return out.sort_values(["dataset", "_m"]).drop(columns="_m").reset_index(drop=True)


def table3_wide(long: pd.DataFrame) -> pd.DataFrame:
    """Table 3 as the paper prints it: one row per method, ``ours | paper`` per dataset."""
    if long.empty:
        return long
    long = long.assign(cell=[f"{o}  |  {p or '–'}" for o, p in zip(long.ours, long.paper)])
    wide = long.pivot(index="method", columns="dataset", values="cell")
    wide = wide.loc[sorted(wide.index, key=lambda m: RANK.get(m, 99))]  # stable: unknown methods last, as pivoted
    wide.insert(0, "setting", [SETTING.get(m, "") for m in wide.index])
    return wide.fillna("")


def efficiency(runs: pd.DataFrame) -> pd.DataFrame:
    """Per (dataset, method, dtype, CPU): prompt tokens, seconds per epoch, training tokens/s, test answers/s
    (Table 12's columns). Timings of different precisions or CPUs are never averaged together."""
    cols = ["mean_prompt_tokens", "seconds_per_epoch", "train_tokens_per_s", "answers_per_s", "trainable_params"]
    if runs.empty:
        return pd.DataFrame()
    keys = ["dataset", "method"] + [k for k in ("dtype", "cpu_model") if k in runs]
    return runs.groupby(keys, sort=False)[cols].mean(numeric_only=True).round(2).reset_index()


def best_trained_run(runs: pd.DataFrame, dataset: str) -> str | None:
    """The name of ``dataset``'s trained run (``epochs_run`` > 0) with the best test score, or None."""
    if runs.empty or "epochs_run" not in runs:
        return None
    trained = runs[(runs.dataset == dataset) & (runs.epochs_run.fillna(0) > 0)]
    return None if trained.empty else str(trained.sort_values("score").iloc[-1]["name"])


def confusion(runs_dir: str | Path, name: str, labels=("support", "counter")) -> pd.DataFrame:
    """Gold label (rows) x answered label (columns) of one classification run; answers that are no label count
    under ``other`` (the first label named in the answer decides, as the ExplaGraphs metric does)."""
    pattern = re.compile("|".join(map(re.escape, labels)), re.IGNORECASE)
    table = pd.DataFrame(0, index=list(labels), columns=[*labels, "other"])
    for r in _predictions(runs_dir, name):
        m = pattern.search(r["prediction"])
        table.loc[r["answers"][0].strip().lower(), m.group(0).lower() if m else "other"] += 1
    table.index.name, table.columns.name = "gold", "answered"
    return table


def sample_predictions(runs_dir: str | Path, names, k: int = 2) -> pd.DataFrame:
    """The first ``k`` test answers of each run, with gold answers and per-question score."""
    return pd.DataFrame([{"run": name, "prediction": p["prediction"][:80], "gold": "|".join(p["answers"])[:60],
                          "score": p["score"]} for name in names for p in _predictions(runs_dir, name, k)])


# ---------------------------------------------------------------------- ablations (GR Tables 6, 7, 8, 10)
TABLE6_LABEL = {"g_retriever": "G-Retriever (full)", "prompt_tuning": "w/o graph encoder (10 soft tokens)",
                "gr_wo_projector": "w/o projection layer", "gr_wo_text": "w/o textualized graph",
                "gr_wo_retrieval": "w/o retrieval"}
TABLE7_LABEL = {"g_retriever_gcn": "GCN", "g_retriever_gat": "GAT", "g_retriever": "Graph Transformer"}


def score_interval(dataset: str | None, score: float | None, n: int | None) -> tuple[float | None, float | None]:
    """The Wilson 95% interval of a run's score on its ``n`` test questions, on the score's own scale
    (fractions for accuracy datasets, percent for KGQA Hit); ``(None, None)`` for an unknown dataset or no n."""
    if score is None or not n or score != score or dataset not in METRIC_NAME:
        return None, None
    scale = metric_scale(dataset)
    low, high = wilson_interval(score / scale * n, int(n))
    return round(low * scale, 4), round(high * scale, 4)


def seeds_interval(dataset: str | None, runs_dir: str | Path | None, names: list[str], scores: list[float],
                   n: int | None) -> tuple[float | None, float | None]:
    """The 95% interval of a system's mean score over its seeds' runs ``names`` (``scores`` theirs, in order): one
    seed's Wilson interval; several seeds' two-level bootstrap (:func:`~gr_core.stats.seed_bootstrap`), for right /
    wrong scores at least the Wilson interval of the mean rate; ``(None, None)`` where the per-question scores are
    missing, not finite, or on different questions."""
    if len(names) <= 1:
        return score_interval(dataset, scores[0] if scores else None, n)
    if runs_dir is None or dataset not in METRIC_NAME:
        return None, None
    try:
        per = [run_question_scores(runs_dir, name) for name in names]
    except FileNotFoundError:
        return None, None
    if any(list(p.index) != list(per[0].index) for p in per):
        return None, None
    m = np.vstack([p.to_numpy() for p in per])  # (S, N)
    if not np.isfinite(m).all():
        return None, None
    boot = seed_bootstrap(m, np.zeros_like(m))  # the mean of m, resampled
    low, high = boot["ci_low"], boot["ci_high"]
    if np.isin(m, (0.0, 1.0)).all():  # right / wrong: at least the Wilson interval of the mean rate over N questions
        w_low, w_high = wilson_interval(float(m.mean()) * m.shape[1], m.shape[1])  # (a resample of all-right seeds
        low, high = min(low, w_low), max(high, w_high)  # is all right: the bootstrap alone would read certainty)
    scale = metric_scale(dataset)
    return round(low * scale, 4), round(high * scale, 4)


def by_name(runs: pd.DataFrame) -> dict[str, dict]:
    """Run metrics keyed by run name."""
    return {r["name"]: r for r in runs.to_dict("records")}


def _over_seeds(runs: pd.DataFrame, dataset: str, method: str, seed: int | None, runs_dir: str | Path | None) -> dict:
    """The runs ``<dataset>-<method>-seed<k>`` (every seed, or ``seed`` alone): ``ours`` (the mean score, None
    without runs), ``seeds``, ``ours_std``, ``n_test`` and the mean's 95% interval (:func:`seeds_interval`)."""
    rows = runs.to_dict("records") if len(runs) else []
    mine = sorted((r for r in rows if r.get("dataset") == dataset and r.get("method") == method
                   and r.get("name") == f"{dataset}-{method}-seed{r.get('seed')}"
                   and (seed is None or r.get("seed") == seed)), key=lambda r: r["seed"])
    scores = [float(r["score"]) for r in mine]
    n = mine[0]["num_test"] if mine else None
    low, high = seeds_interval(dataset, runs_dir, [r["name"] for r in mine], scores, n)
    return {"ours": float(np.mean(scores)) if scores else None, "seeds": len(scores),
            "ours_std": round(float(np.std(scores, ddof=1)), 4) if len(scores) > 1 else None,
            "n_test": n, "ci_low": low, "ci_high": high}


def table6(runs: pd.DataFrame, dataset: str = "webqsp", seed: int | None = None,
           runs_dir: str | Path | None = None) -> pd.DataFrame:
    """GR Table 6: each ablation's score (:func:`_over_seeds`) and its relative drop from the full model's, beside the
    paper's WebQSP Hit@1 and drop (GR Table 6 is on WebQSP only, whatever ``dataset`` is)."""
    ours = {m: _over_seeds(runs, dataset, m, seed, runs_dir) for m in TABLE6_LABEL}
    full, paper_full = ours["g_retriever"]["ours"], PAPER_TABLE6["g_retriever"]
    rows = []
    for method, label in TABLE6_LABEL.items():
        s, paper = ours[method], PAPER_TABLE6[method]
        drop = None if s["ours"] is None or not full else round(100 * (full - s["ours"]) / full, 2)
        rows.append({"dataset": dataset, "method": method, "ablation": label, "ours": s["ours"], "seeds": s["seeds"],
                     "ours_std": s["ours_std"], "ours_drop_%": drop, "n_test": s["n_test"], "ci_low": s["ci_low"],
                     "ci_high": s["ci_high"], "paper_dataset": "webqsp", "paper": paper,
                     "paper_drop_%": round(100 * (paper_full - paper) / paper_full, 2)})
    return pd.DataFrame(rows)


def table7(runs: pd.DataFrame, datasets=("webqsp", "explagraphs"), seed: int | None = None,
           runs_dir: str | Path | None = None) -> pd.DataFrame:
    """GR Table 7: G-Retriever with a GCN, GAT or Graph Transformer encoder (:func:`_over_seeds`) beside the paper's."""
    rows = []
    for method, label in TABLE7_LABEL.items():
        rec = {"encoder": label, "method": method}
        for d in datasets:
            s = _over_seeds(runs, d, method, seed, runs_dir)
            rec |= {f"{d} {k}": s[k] for k in ("ours", "seeds", "n_test", "ci_low", "ci_high")}
            rec[f"{d} paper"] = PAPER_TABLE7[method].get(d)
        rows.append(rec)
    return pd.DataFrame(rows)


def k_sweep_table(runs_dir: str | Path, names: list[str]) -> pd.DataFrame:
    """GR Table 10: per (k, C_e) run its best validation loss, test score and retrieval size; ``chosen`` marks the
    lowest validation loss (how the paper suggests choosing k)."""
    rows = []
    for name in names:
        d = Path(runs_dir) / name
        cfg, m = read_json(d / "config.json"), read_json(d / "metrics.json")
        hist = read_json(d / "history.json") if (d / "history.json").is_file() else []
        k, ce = cfg["model"].get("top_k"), cfg["model"].get("edge_cost")
        low, high = score_interval(m.get("dataset") or cfg.get("dataset"), float(m["score"]), m["num_test"])
        rows.append({"name": name, "k": k, "C_e": ce, "best_val_loss": min((h["val_loss"] for h in hist), default=None),
                     "test": float(m["score"]), "n_test": m["num_test"], "ci_low": low, "ci_high": high,
                     "mean_prompt_tokens": m["mean_prompt_tokens"],
                     "paper (Hit@1, C_e unstated)": PAPER_TABLE10.get(k)})
    out = pd.DataFrame(rows, columns=["name", "k", "C_e", "best_val_loss", "test", "n_test", "ci_low", "ci_high",
                                      "mean_prompt_tokens", "paper (Hit@1, C_e unstated)"])
    if len(out) and out.best_val_loss.notna().any():
        out["chosen"] = out.best_val_loss == out.best_val_loss.min()
    return out


def table8(runs_dir: str | Path, rows: list[tuple[str, str | None]], dataset: str) -> pd.DataFrame:
    """GR Table 8 (LLM size): one row per ``(llm, run name or None)`` of ``rows``: ``score``, ``n_test``, its Wilson
    interval, and against the first LLM's run on the same questions ``diff`` and ``p_vs_first`` (exact McNemar)."""
    out, first = [], None
    for llm, name in rows:
        rec = {"dataset": dataset, "llm": llm, "run": name, "score": None, "n_test": None, "ci_low": None,
               "ci_high": None, "diff": None, "p_vs_first": None, "note": ""}
        out.append(rec)  # filled in below
        if not (name and (Path(runs_dir) / name / "metrics.json").is_file()):
            rec["note"] = "not run" if name is None else f"no finished run {name}"
            continue
        m = read_json(Path(runs_dir) / name / "metrics.json")
        rec["score"], rec["n_test"] = float(m["score"]), int(m["num_test"])
        rec["ci_low"], rec["ci_high"] = score_interval(dataset, rec["score"], rec["n_test"])
        if first is None:
            first = name
            continue
        pair = paired(runs_dir, name, first)
        rec["note"] = pair.get("note", "")
        if not rec["note"]:
            rec["diff"], rec["p_vs_first"] = round(pair["diff"] * metric_scale(dataset), 4), float(f"{pair['p']:.4g}")
    table = pd.DataFrame(out)
    table.attrs["paper"] = PAPER_TABLE8
    return table


def families_table(folder):
    """One row per family file of ``bench/chat_families.py`` in ``folder`` (``outputs/bench/chat``): the default's and
    ``train_reasoner``'s Hit [95% interval], what was served, the median turn, their paired p, and earlier commits'
    Hit of the same answer mode on the same questions."""
    rows = []
    for path in sorted(Path(folder).glob("*.json")):
        d = read_json(path)
        rec = {r["label"]: r for r in d["records"]}
        cell = lambda r: f"{r['hit']:.1f} [{r['ci_low']:.1f}, {r['ci_high']:.1f}]" if r else "–"  # noqa: E731
        served = sorted({v["served"] for v in d["decisions"].values() if v}) or ["paths (no reasoner)"]
        row = {"family": d["family"], "split": d["split"] if d["family"] != "webqsp_full" else "all",
               "n": rec["default"]["n"], "default": cell(rec["default"]),
               "train_reasoner": cell(rec.get("train_reasoner")), "served": " / ".join(served),
               "turn s": rec["default"]["turn_median_s"]}
        for p in d["pairs"]:
            if p["a"] == "train_reasoner" and p["b"] == "default":
                row["train_reasoner vs default, p"] = float(f"{p['p']:.2g}")
            if p["b"].startswith(f"{p['a']} (before: "):  # the same answer mode at an earlier commit
                commit = p["b"].split("before: ", 1)[1].rstrip(")")
                before = f"{100 * p['score_b']:.1f} at {commit} (p {p['p']:.2g})"
                row[f"{p['a']} before"] = "; ".join(filter(None, (row.get(f"{p['a']} before"), before)))
        rows.append(row)
    return pd.DataFrame(rows)
