"""The results report: every table the notebooks wrote under ``outputs/<preset>/``, and a verdict per paper claim.

Nothing here computes a result: tables are read from the CSV files the notebooks wrote; a claim's verdict compares
numbers in those files (point estimates of one seed unless the table says otherwise: a verdict is not a significance
test, and the evidence column shows how close each comparison is). A verdict is ``reproduced``, ``partly`` (holds on some datasets only), ``not reproduced``,
or ``not testable here`` (the numbers it needs are missing, or the measurement cannot say, with the reason).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

# notebook output folder -> the CSV tables the report reads (file stem -> title)
SOURCES = {
    "01_datasets": {"table2": "GR Table 2 / GNN-RAG Table 7: datasets"},
    "02_retrieval": {"table4_table11": "GR Tables 4 and 11: retrieval size and accuracy",
                     "table10_k_sweep": "GR Table 10 (retrieval side): k sweep"},
    "03_training": {"table3": "GR Table 3: main results", "efficiency": "GR Table 12 columns: cost per configuration"},
    "04_gnn_rag": {"gnn_only": "GNN-RAG Table 2: the GNN alone", "retrievers": "GNN-RAG Tables 1, 4, 8, 11: retrievers",
                   "per_hop": "GNN-RAG: by hop count"},
    "05_hallucination": {"table5": "GR Table 5: hallucination", "table5_all_levels": "GR Table 5, every match level",
                         "agreement": "the hallucination checker vs a person"},
    "06_efficiency": {"table4": "GR Table 4: before / after retrieval", "table12": "GR Table 12: score and time",
                      "scaling": "cost vs graph size", "scaling_fit": "cost vs graph size: log-log slopes"},
    "07_ablations": {"table6": "GR Table 6: ablations", "table7": "GR Table 7: graph encoders",
                     "table10": "GR Table 10: k chosen on validation", "table11_k": "GR Table 11 for each k",
                     "table8": "GR Table 8: LLM size"},
}
FIGURES = {"03_training": ["learning_curves"], "05_hallucination": ["table5"], "06_efficiency": ["scaling"],
           "04_gnn_rag": ["evidence"], "02_retrieval": ["fig_retrieved_subgraph"]}


def load_tables(root: str | Path) -> dict[str, pd.DataFrame]:
    """Every table of :data:`SOURCES` found under ``root`` (``outputs/<preset>``), keyed ``notebook/stem``."""
    root = Path(root)
    out = {}
    for nb, stems in SOURCES.items():
        for stem in stems:
            path = root / nb / f"{stem}.csv"
            if path.is_file():
                out[f"{nb}/{stem}"] = pd.read_csv(path)
    return out


@dataclass
class Claim:
    paper: str
    claim: str
    verdict: str
    evidence: str
    source: str


def _verdict(flags: list[bool]) -> str:
    if not flags:
        return "not testable here"
    return "reproduced" if all(flags) else ("partly" if any(flags) else "not reproduced")


def _table3_claims(t: dict) -> list[Claim]:
    df = t.get("03_training/table3")
    out = []
    if df is None:
        return [Claim("G-Retriever", c, "not testable here", "notebook 03 has not written table3.csv", "03_training/table3.csv")
                for c in ("G-Retriever beats prompt tuning and GraphToken", "LoRA helps (G-Retriever w/ LoRA > G-Retriever)")]
    score = {(r.dataset, r.method): r.ours_mean for r in df.itertuples()}
    flags, ev = [], []
    for d in sorted(df.dataset.unique()):
        g = score.get((d, "g_retriever"))
        rivals = {m: score[(d, m)] for m in ("prompt_tuning", "graph_token") if (d, m) in score}
        if g is None or not rivals:
            continue
        flags.append(all(g > v for v in rivals.values()))
        ev.append(f"{d}: G-Retriever {g:g} vs " + ", ".join(f"{m} {v:g}" for m, v in rivals.items()))
    out.append(Claim("G-Retriever", "G-Retriever beats prompt tuning and GraphToken (Table 3)", _verdict(flags),
                     "; ".join(ev) or "no dataset has G-Retriever and a prompt-tuning row", "03_training/table3.csv"))
    flags, ev = [], []
    for d in sorted(df.dataset.unique()):
        a, b = score.get((d, "g_retriever_lora")), score.get((d, "g_retriever"))
        if a is None or b is None:
            continue
        flags.append(a > b)
        ev.append(f"{d}: w/ LoRA {a:g} vs {b:g}")
    out.append(Claim("G-Retriever", "LoRA helps: G-Retriever w/ LoRA beats G-Retriever (Table 3)", _verdict(flags),
                     "; ".join(ev) or "no dataset has both rows", "03_training/table3.csv"))
    return out


def _efficiency_claims(t: dict) -> list[Claim]:
    out = []
    t4 = t.get("06_efficiency/table4")
    ret = t.get("02_retrieval/table4_table11")
    flags, ev = [], []
    if t4 is not None:
        for r in t4.to_dict("records"):
            flags.append(r["token_reduction_%"] >= 80)
            ev.append(f"{r['row']} ({r['sizes from']}): tokens {r['tokens_before']:,.0f} -> {r['tokens_after']:,.0f} "
                      f"(-{r['token_reduction_%']:.1f}%)")
    elif ret is not None:
        for r in ret[ret.retriever == "pcst"].to_dict("records"):
            flags.append(r["token_reduction_%"] >= 80)
            ev.append(f"{r['dataset']}: -{r['token_reduction_%']:.1f}% (notebook 02)")
    out.append(Claim("G-Retriever", "Retrieval cuts prompt tokens by 80-99% (Table 4)", _verdict(flags),
                     "; ".join(ev) or "no Table 4", "06_efficiency/table4.csv" if t4 is not None else
                     "02_retrieval/table4_table11.csv"))
    flags, ev = [], []
    if t4 is not None:
        for d in t4.to_dict("records"):
            if pd.notna(d.get("min_epoch_before")) and pd.notna(d.get("min_epoch_after")):
                flags.append(d["min_epoch_after"] < d["min_epoch_before"])
                ev.append(f"{d['row']}: {d['min_epoch_before']} -> {d['min_epoch_after']} min/epoch")
    out.append(Claim("G-Retriever", "Retrieval shortens training epochs (Table 4: -29% / -67%)", _verdict(flags),
                     "; ".join(ev) or "the with/without-retrieval runs are missing", "06_efficiency/table4.csv"))
    return out


def _hallucination_claim(t: dict) -> Claim:
    df = t.get("05_hallucination/table5_all_levels")
    src = "05_hallucination/table5_all_levels.csv"
    if df is None:
        return Claim("G-Retriever", "Hallucination drops: more valid citations than graph prompt tuning (Table 5)",
                     "not testable here", "notebook 05 has not run", src)
    sub = df[df.level == "normalized"]
    flags, ev, silent = [], [], []
    for d, g in sub.groupby("dataset", sort=False):
        rows = {r["system"]: r for r in g.to_dict("records")}
        if "g_retriever" not in rows or "graph_token" not in rows:
            continue
        a, b = rows["g_retriever"], rows["graph_token"]
        if min(a["citing_%"], b["citing_%"]) < 5:
            silent.append(f"{d}: citing G-Retriever {a['citing_%']:.0f}% / GraphToken {b['citing_%']:.0f}%")
            continue
        flags.append(a["fully_valid_%"] > b["fully_valid_%"])
        ev.append(f"{d}: fully valid {a['fully_valid_%']:.1f}% vs {b['fully_valid_%']:.1f}%")
    if not flags and silent:
        return Claim("G-Retriever", "Hallucination drops: more valid citations than graph prompt tuning (Table 5)",
                     "not testable here", "on no dataset do both systems cite (each must list nodes or edges in at least 5% of its responses): "
                     + "; ".join(silent), src)
    return Claim("G-Retriever", "Hallucination drops: more valid citations than graph prompt tuning (Table 5)",
                 _verdict(flags), "; ".join(ev + silent) or "no dataset has both systems", src)


def _ablation_claims(t: dict) -> list[Claim]:
    df = t.get("07_ablations/table6")
    src = "07_ablations/table6.csv"
    if df is None:
        return [Claim("G-Retriever", "Every ablated component matters (Table 6)", "not testable here",
                      "notebook 07 has not run", src)]
    full = df[df.method == "g_retriever"].ours.iloc[0] if (df.method == "g_retriever").any() else None
    flags, ev = [], []
    for r in df[df.method != "g_retriever"].itertuples():
        if pd.isna(r.ours) or full is None or pd.isna(full):
            continue
        flags.append(r.ours < full)
        ev.append(f"{r.ablation}: {r.ours:g} vs full {full:g}")
    missing = [r.ablation for r in df[df.method != "g_retriever"].itertuples() if pd.isna(r.ours)]
    verdict = _verdict(flags)
    if missing and verdict == "reproduced":
        verdict = "partly"  # holds for every ablation run, but not all were run
    if missing:
        ev.append("not run: " + ", ".join(missing))
    out = [Claim("G-Retriever", "Every ablated component matters: each ablation scores below the full model (Table 6)",
                 verdict, "; ".join(ev) or "ablation rows missing", src)]
    t10 = t.get("07_ablations/table10")
    if t10 is not None and len(t10) > 1:
        best = t10.loc[t10.test.idxmax()]
        chosen = t10[t10.chosen] if "chosen" in t10 else t10.iloc[:0]
        ev = f"best test k={best.k:g} ({best.test:g}); chosen on validation: " + \
             (", ".join(f"k={r.k:g}, C_e={r.C_e:g} -> test {r.test:g}" for r in chosen.itertuples()) or "none")
        out.append(Claim("G-Retriever", "A larger k than the default helps (Table 10: k = 10 best)",
                         "reproduced" if best.k > t10.k.min() else "not reproduced", ev, "07_ablations/table10.csv"))
    return out


def _gnn_rag_claims(t: dict) -> list[Claim]:
    df = t.get("04_gnn_rag/retrievers")
    src = "04_gnn_rag/retrievers.csv"
    if df is None:
        return [Claim("GNN-RAG", c, "not testable here", "notebook 04 has not run", src)
                for c in ("GNN-RAG beats the plain LLM", "Retrieval augmentation (GNN + RoG) helps")]
    hit = {(r.dataset, r.retriever): r.Hit for r in df.itertuples()}
    out = []
    for claim, a, b in (("GNN-RAG beats the plain LLM (Hit; Tables 2, 4)", "gnn", "none"),
                        ("Retrieval augmentation helps: GNN + RoG beats GNN alone (Hit; Table 4)", "gnn+rog", "gnn")):
        flags, ev = [], []
        for d in df.dataset.unique():
            if (d, a) in hit and (d, b) in hit:
                flags.append(hit[(d, a)] > hit[(d, b)])
                ev.append(f"{d}: {hit[(d, a)]:g} vs {hit[(d, b)]:g}")
        out.append(Claim("GNN-RAG", claim, _verdict(flags), "; ".join(ev), src))
    return out


def claims(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per paper claim: paper, claim, verdict, the numbers behind it, and the file they come from."""
    rows = _table3_claims(tables) + _efficiency_claims(tables) + [_hallucination_claim(tables)] + \
        _ablation_claims(tables) + _gnn_rag_claims(tables)
    return pd.DataFrame([r.__dict__ for r in rows])


def figures(root: str | Path) -> list[Path]:
    """The PNG figures of :data:`FIGURES` that exist under ``root``."""
    return [p for nb, names in FIGURES.items() for n in names if (p := Path(root) / nb / f"{n}.png").is_file()]


def markdown_table(df: pd.DataFrame) -> str:
    """A GitHub Markdown table of ``df`` (what ``DataFrame.to_markdown`` gives, without the tabulate dependency)."""
    def cell(v) -> str:
        if v is None or (isinstance(v, float) and v != v):
            return ""
        if isinstance(v, float):
            return f"{v:,.0f}" if abs(v) >= 1000 or (v == int(v) and abs(v) >= 100) else f"{v:.4g}"
        return str(v).replace("|", "\\|").replace("\n", " ")

    head = "| " + " | ".join(map(str, df.columns)) + " |"
    rule = "|" + "|".join("---" for _ in df.columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, rule] + body)


def to_markdown(tables: dict[str, pd.DataFrame], claim_table: pd.DataFrame, preset: str) -> str:
    """The report as Markdown: the claims first, then every table found, each under its title and file."""
    lines = [f"# Results report: preset `{preset}`", "",
             "Every number below is read from a file under `outputs/{preset}/` written by a notebook run; "
             "the file is named under each table.".format(preset=preset), "", "## Claims of the papers", "",
             markdown_table(claim_table), ""]
    for nb, stems in SOURCES.items():
        for stem, title in stems.items():
            key = f"{nb}/{stem}"
            if key in tables:
                lines += [f"## {title}", "", f"`outputs/{preset}/{key}.csv`", "",
                          markdown_table(tables[key]), ""]
    missing = [f"{nb}/{s}.csv" for nb, stems in SOURCES.items() for s in stems if f"{nb}/{s}" not in tables]
    if missing:
        lines += ["## Not found", "", "These tables were not written for this preset: " + ", ".join(missing), ""]
    return "\n".join(lines)
