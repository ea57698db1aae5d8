"""Notebook 08's Markdown: ``report.md`` (the claims, then every table) and ``RESULTS.md`` (headline numbers, claims,
speed benchmarks), generated from ``outputs/`` so that no number is copied by hand: each row names its file."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from ..published import DATASET_SOURCE, PAPER_COLUMN
from ..stats import wilson_interval
from .claims import MIN_SEEDS
from .markdown import markdown_table
from .results import TITLES, figures, notebook_statuses

REPORT_NOTEBOOK = "08_report.ipynb"  # the notebook that writes the report (running while it does)


def _num(v, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and v != v) or v == "":
        return "–"
    if isinstance(v, str):
        return v
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.{digits}g}"


def _nums(row, cols) -> str:
    """``row``'s ``cols`` as ``a / b / c``."""
    return " / ".join(_num(row.get(c)) for c in cols)


def _ci(row, prefix: str = "") -> str:
    """``prefix [low, high]`` where ``row`` has a 95% interval, else nothing."""
    return f"{prefix} [{_num(row['ci_low'])}, {_num(row['ci_high'])}]" if pd.notna(row.get("ci_low")) else ""


def headline(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per headline number: ``what`` was measured, ``ours`` (with its 95% interval where the table has one),
    ``n``, the ``paper``'s number and the ``file`` it comes from; tables not written for this preset are left out."""
    rows = []

    def add(what, ours, n, paper, key):
        rows.append({"what": what, "ours": ours, "n": _num(n), "paper": _num(paper), "file": f"{key}.csv"})

    def each(key, where=None):  # the rows of table ``key`` that ``where`` selects, none where it was not written
        t = tables.get(key)
        return [] if t is None else [r for _, r in (t if where is None else t[where(t)]).iterrows()]

    for r in each("03_training/table3"):
        detail = ", ".join(str(r[c]) for c in ("setting", "metric") if c in r and r[c] == r[c])
        ours = _num(r["ours" if "ours" in r else "ours_mean"]) + _ci(r)
        if r.get("seeds", 1) > 1 and "per_seed" in r:  # mean ± std, the mean's interval, each seed
            ours = f"{r['ours']} over {int(r['seeds'])} seeds{_ci(r, ', 95% CI')} ({r['per_seed']})"
        add(f"GR Table 3, {r['dataset']}: {r['method']}" + (f" ({detail})" if detail else ""), ours,
            r.get("n_test"), r.get("paper"), "03_training/table3")
    for r in each("01_datasets/table2", lambda t: t.dataset == "webqsp_full"):
        add("WebQSP complete graphs: mean nodes / edges / tokens (GR Tables 2, 4)",
            _nums(r, ("mean nodes", "mean edges", "mean tokens")), r["questions"],
            _nums(r, ("paper nodes", "paper edges", "paper tokens")), "01_datasets/table2")
    for r in each("06_efficiency/table4"):
        add(f"Retrieval before -> after on {r['sizes from']}: tokens; minutes per epoch as the runs trained, under "
            "whatever load they had (GR Table 4; timed alone: the benchmarks below)",
            f"{_num(r['tokens_before'])} -> {_num(r['tokens_after'])} (-{_num(r['token_reduction_%'])}%); "
            f"{_num(r['min_epoch_before'])} -> {_num(r['min_epoch_after'])}", "–",
            f"{_num(r['paper tokens_before'])} -> {_num(r['paper tokens_after'])}; "
            f"{_num(r['paper min_epoch_before'])} -> {_num(r['paper min_epoch_after'])}", "06_efficiency/table4")
    for r in each("02_retrieval/table4_table11", lambda t: t.answer_in_subgraph.notna()):  # where answers are nodes
        ci = f" [{_num(r['answer_ci_low'])}, {_num(r['answer_ci_high'])}]" if "answer_ci_low" in r else ""
        add(f"Answer in the retrieved subgraph, {r['dataset']}, {r['retriever']} (%)",
            _num(r["answer_in_subgraph"]) + ci, r["questions"], "–", "02_retrieval/table4_table11")
    for r in each("04_gnn_rag/gnn_only"):
        low, high = wilson_interval(int(round(r["h1"] * r["n"] / 100)), int(r["n"]))
        add(f"GNN reasoner alone, {r['dataset']}: H@1 / F1 ({int(r['num_train'])} training questions, "
            f"{_num(r['train_seconds'])} s)", f"{_num(r['h1'])} [{_num(100 * low)}, {_num(100 * high)}] / "
            f"{_num(r['f1'])}", r["n"], _nums(r, ("paper H@1", "paper F1")), "04_gnn_rag/gnn_only")
    for r in each("04_gnn_rag/retrievers"):
        add(f"GNN-RAG LLM, {r['dataset']}, retriever {r['retriever']}: Hit / Hit@1 / F1",
            _nums(r, ("Hit", "Hit@1", "F1")), r["questions"], _nums(r, ("paper Hit", "paper Hit@1", "paper F1")),
            "04_gnn_rag/retrievers")
    for r in each("05_hallucination/table5", lambda t: t.metric == "Fully Valid Graphs"):
        ours = [c for c in r.index if c != "metric" and not c.startswith("paper")]
        add("Fully Valid Graphs, % (GR Table 5): " + " / ".join(ours), _nums(r, ours), "–",
            _nums(r, [c for c in r.index if c.startswith("paper")]), "05_hallucination/table5")
    for r in each("07_ablations/table6", lambda t: t.ours.notna()):
        # over seeds, the mean ± std and the mean's 95% interval; the paper ablates on WebQSP only
        ours = (f"{_num(r['ours'])} ± {_num(r['ours_std'])} over {int(r['seeds'])} seeds{_ci(r, ', 95% CI')}"
                if r.get("seeds", 1) > 1 and r.get("ours_std") == r.get("ours_std") else _num(r["ours"]) + _ci(r))
        paper = _num(r["paper"]) + ("" if PAPER_COLUMN.get(r["dataset"]) == "webqsp" else " (WebQSP Hit)")
        add(f"GR Table 6, {r['dataset']}: {r['ablation']}", ours, r["n_test"], paper, "07_ablations/table6")
    return pd.DataFrame(rows, columns=["what", "ours", "n", "paper", "file"])


def benchmarks(bench_root: str | Path) -> pd.DataFrame:
    """The speed benchmarks' summaries (``outputs/bench/*.json``, ``python bench/NAME.py``) beside their targets."""
    rows, root = [], Path(bench_root)

    def read(name):
        path = root / f"{name}.json"
        return json.loads(path.read_text()) if path.is_file() else None

    if (d := read("train_infer_throughput")) is not None:
        dtype, targets = d.get("dtype", "float32"), d.get("targets", {})
        rows += [{"what": f"training tokens/s, ours vs PyG GRetriever (same LLM in {dtype}, GNN, data, batch)",
                  "ours": f"{_num(d['ours_train_tokens_per_s'])} vs {_num(d['peer_train_tokens_per_s'])} "
                          f"({_num(d['train_speedup'])}x; MFU {_num(100 * d['mfu'], 3)}% of the {dtype} peak)",
                  "target": f"{_num(targets.get('train_speedup', 1.5))}x", "file": "bench/train_infer_throughput.json"},
                 {"what": f"answers/s at equal token budget, ours vs PyG GRetriever ({dtype})",
                  "ours": f"{_num(d['infer_speedup'])}x ({_num(d['infer_speedup_vs_peer_default'])}x vs PyG's "
                          "default 128 new tokens)", "target": f"{_num(targets.get('infer_speedup', 3.0))}x",
                  "file": "bench/train_infer_throughput.json"}]
    if (d := read("precision")) is not None:
        cpu, speedups, targets = d["cpu"], d["speedups_bf16_vs_fp32"], d.get("targets_on_amx", {})
        where = (f"{cpu['cpu_model']}, {'AMX' if cpu['amx'] else 'no AMX'}, "
                 f"AVX512-BF16 {'yes' if cpu['avx512_bf16'] else 'no'}")
        for key, what in (("g_retriever_step", "G-Retriever training step"),
                          ("g_retriever_lora_step", "G-Retriever + LoRA training step"),
                          ("answers", "answering the 554 ExplaGraphs test questions"),
                          ("sentence_encoder", "sentence encoder, names/s")):
            if speedups.get(key) is not None:
                rows.append({"what": f"bf16 against fp32: {what} ({where})", "ours": f"{_num(speedups[key])}x",
                             "target": f"{_num(targets[key])}x on an AMX CPU" if key in targets else "",
                             "file": "bench/precision.json"})
    if (d := read("retrieval_epoch")) is not None:
        cpu = d.get("machine", {}).get("cpu_model", "?")
        for name, r in d.get("datasets", {}).items():
            before, after = r["sides"]["gr_wo_retrieval"], r["sides"]["g_retriever"]
            paper = r.get("paper_reduction_%")
            rows.append({"what": f"G-Retriever's training steps for an epoch on {name} ({d.get('preset')} preset's "
                                 f"runs), whole graph -> PCST subgraph, timed alone ({cpu}, "
                                 f"LLM in {after.get('llm_dtype', '?')})",
                         "ours": f"{_num(before['seconds'])} -> {_num(after['seconds'])} s "
                                 f"({_num(-r['epoch_reduction_%'])}%; tokens {_num(-r['token_reduction_%'])}%)",
                         "target": "–" if paper is None else f"{_num(-paper)}% per epoch (GR Table 4)",
                         "file": "bench/retrieval_epoch.json"})
    # the chat on graph families it was not tuned on (bench/chat_families.py; docs/chat.md)
    for path in sorted((root / "chat").glob("*.json")):
        d = json.loads(path.read_text())
        rec = {r["label"]: r for r in d["records"]}
        cell = lambda r: f"{_num(r['hit'], 3)}% [{_num(r['ci_low'], 3)}, {_num(r['ci_high'], 3)}]"  # noqa: E731
        # the default against the default of the latest version before (pairs are appended as versions come)
        before = ([p for p in d["pairs"] if p["a"] == "default" and p["b"].startswith("default (before")] or [None])[-1]
        turn = rec["default"]["turn_median_s"]
        rows.append({"what": f"chat Hit on {rec['default']['n']} {d['family']} questions ({d['split'] or 'all'}), the "
                             f"default (relation paths) / train_reasoner; median turn {turn} s",
                     "ours": f"{cell(rec['default'])} / {cell(rec['train_reasoner'])}",
                     "target": "–" if before is None else
                     f"not below the version before: {_num(100 * before['score_b'], 3)}% (p {before['p']:.2g})",
                     "file": f"bench/chat/{path.name}"})
    return pd.DataFrame(rows, columns=["what", "ours", "target", "file"])


def data_sources(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """``dataset, source``: where the questions and graphs of every dataset a table names come from (docs/data.md)."""
    names = {str(d).split("-")[0] for t in tables.values() if isinstance(t, pd.DataFrame) and "dataset" in t
             for d in t["dataset"].dropna().unique()}
    return pd.DataFrame([{"dataset": n, "source": DATASET_SOURCE[n]} for n in sorted(names & set(DATASET_SOURCE))],
                        columns=["dataset", "source"])


def results_markdown(tables: dict[str, pd.DataFrame], claim_table: pd.DataFrame, preset: str,
                     bench_root: str | Path | None = None, note: str = "") -> str:
    """``RESULTS.md``: the headline numbers, the claims' verdicts and (from ``bench_root``) the benchmarks; ``note``
    (:func:`failed_note`) under the title."""
    cols = [c for c in ("paper", "claim", "dataset", "verdict", "decides", "n", "seeds", "n_power", "evidence")
            if c in claim_table]
    bench = benchmarks(bench_root) if bench_root is not None else pd.DataFrame()
    return "\n".join([
        f"# Results: preset `{preset}`", "", *([note, ""] if note else []),
        f"Generated by notebook `08_report` from the files under `outputs/{preset}/` (each row names its file); do "
        "not edit by hand. Scores are on each table's scale (accuracy as a fraction, Hit / H@1 in percent), with a "
        "95% Wilson interval in brackets where the table has one; `n` is the number of test questions. The full "
        "report with every table: [`08_report/report.md`](08_report/report.md).", "",
        "## Data", "", "Where each dataset's questions and graphs come from (the papers' own data, or an offline "
        "stand-in; `./gr data --check` lists what is here).", "", markdown_table(data_sources(tables)), "",
        "## Headline numbers", "", markdown_table(headline(tables)), "",
        "## The papers' claims, judged by paired tests on the same questions", "",
        "`n_power`: the test questions that detect the paper's difference at 80% power (for this project's "
        "reference rows, 5 points), given the discordance measured here; `seeds`: training seeds paired.", "",
        *claims_markdown(claim_table[cols])]
        + (["## Speed benchmarks (`outputs/bench/`, the same machine for ours and the peer)", "",
            markdown_table(bench.assign(file=["../" + f for f in bench.file])), ""] if len(bench) else []))


def claims_markdown(claim_table: pd.DataFrame) -> list[str]:
    """The claims as Markdown lines: the rows that can decide (``decides == "yes"``) apart from the sanity rows."""
    if "decides" not in claim_table:
        return [markdown_table(claim_table), ""]
    decides = claim_table.decides
    lines = []
    for title, text, part in (
            ("Rows that decide", "Significant, or not significant with at least `n_power` questions (the paper's "
             f"difference `paper_diff` detected at 80% power); claims about trained models over at least {MIN_SEEDS} "
             "seeds.", decides == "yes"),
            ("Measurements", "Claims about a measured quantity (tokens, citation rates) judged by the paper's "
             "threshold, not by a paired test.", decides == "measurement"),
            ("Sanity rows", "Too few questions or seeds to decide, or not run here (the evidence says why): they show "
             "that the machinery works, not whether the paper's claim holds.", ~decides.isin(["yes", "measurement"]))):
        rows = claim_table[part]
        lines += [f"### {title}", "", text, "", markdown_table(rows) if len(rows) else "(none)", ""]
    return lines


def to_markdown(tables: dict[str, pd.DataFrame], claim_table: pd.DataFrame, preset: str, note: str = "") -> str:
    """The report as Markdown: the claims first, then every table found, each under its title and file; ``note``
    (:func:`failed_note`) under the title."""
    lines = [f"# Results report: preset `{preset}`", "", *([note, ""] if note else []),
             f"Every number below is read from a file under `outputs/{preset}/` written by a notebook run; "
             "the file is named under each table.", "", "## Claims of the papers", ""]
    lines += claims_markdown(claim_table)
    for key, title in TITLES.items():
        if key in tables:
            lines += [f"## {title}", "", f"`outputs/{preset}/{key}.csv`", "", markdown_table(tables[key]), ""]
    missing = [f"{key}.csv" for key in TITLES if key not in tables]
    if missing:
        lines += ["## Not found", "", "These tables were not written for this preset: " + ", ".join(missing), ""]
    return "\n".join(lines)


def show_tables(tables: dict[str, pd.DataFrame], preset: str) -> None:
    """Display every table found (notebook 08), each under its title and file."""
    from IPython.display import Markdown, display  # noqa: PLC0415 deferred: only a notebook displays

    for key, title in TITLES.items():
        if key in tables:
            display(Markdown(f"### {title}\n`outputs/{preset}/{key}.csv`"))
            display(tables[key])


def show_figures(root: str | Path) -> None:
    """Display every figure the notebooks wrote under ``root`` (``outputs/<preset>``), each under its file."""
    from IPython.display import Image, Markdown, display  # noqa: PLC0415 deferred: only a notebook displays

    for path in figures(root):
        display(Markdown(f"`{path.relative_to(Path(root).parent)}`"))
        display(Image(filename=str(path), width=720))


def failed_note(root: str | Path) -> str:
    """A warning naming the notebooks whose last run under ``root`` failed or was stopped part way (its
    ``suite.json``: failed, interrupted, or still running when the suite was killed): their folders may hold that
    run's files beside an earlier run's. "" when none did. The report's own notebook, running as it writes, and those
    a running suite has yet to run are not named."""
    failed = [name for name, status in (notebook_statuses(root, pending=False) or {}).items()
              if status in ("failed", "interrupted", "running") and name != REPORT_NOTEBOOK]
    folders = "its folder" if len(failed) == 1 else "their folders"
    return (f"**The last run of {', '.join(failed)} failed or was stopped** (`suite.json`): {folders} may hold files "
            "of that run beside an earlier one's; rerun before reading their rows.") if failed else ""


def write_report(tables: dict[str, pd.DataFrame], claim_table: pd.DataFrame, preset: str, root: str | Path) -> Path:
    """Write ``08_report/report.md``, ``RESULTS.md`` and ``08_report/summary.json`` (claims, tables and figures found)
    under ``root`` (``outputs/<preset>``); returns the report's path."""
    from ..runs import atomic_write_text, write_json  # noqa: PLC0415 the writers, kept out of this module's imports

    root = Path(root)
    report = root / "08_report" / "report.md"
    note = failed_note(root)
    atomic_write_text(report, to_markdown(tables, claim_table, preset, note))
    atomic_write_text(root / "RESULTS.md", results_markdown(tables, claim_table, preset, root.parent / "bench", note))
    write_json(root / "08_report" / "summary.json", {"claims": claim_table.to_dict("records"), "tables": sorted(tables),
                                                     "figures": [str(p.relative_to(root)) for p in figures(root)]})
    return report
