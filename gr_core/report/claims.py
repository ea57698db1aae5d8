"""A verdict per paper claim, from a paired test on the per-question answers of the two systems' runs.

docs/method.md §4 defines the verdicts, the pairing of seeds and the power columns (``paper_diff``, ``n_power``,
``decides``): ``reproduced`` only when significant (p < 0.05) in the paper's direction, ``contradicted`` when
significant the other way, ``not significant`` otherwise; ``not testable here`` says what is missing. Token cuts keep
the paper's threshold (a measurement); epoch times are a bootstrap over timed steps per dataset.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..published import (PAPER_COLUMN, PAPER_GNN_ONLY, PAPER_GNN_RAG, PAPER_TABLE3, PAPER_TABLE5, PAPER_TABLE6,
                         PAPER_TABLE10)
from ..runs import seed_run_dirs
from ..stats import compare, compare_seeds, mcnemar_n_for_power, signed_rank, total_reduction, verdict
from .results import GROUNDED, metric_scale, notebook_statuses, run_question_scores


@dataclass
class Claim:
    """One paper claim on one dataset: ``system_a`` beats ``system_b``; scores on the dataset's metric scale, ``n``
    the test questions both answered, ``p`` the two-sided paired p-value (None for a measurement)."""

    paper: str
    claim: str
    verdict: str
    evidence: str
    source: str
    dataset: str = ""
    system_a: str = ""
    system_b: str = ""
    score_a: float | None = None
    score_b: float | None = None
    n: int | None = None
    p: float | None = None
    test: str = ""
    seeds: int | None = None
    paper_diff: float | None = None
    n_power: int | None = None
    decides: str = ""


MIN_SEEDS = 3  # a claim about trained models decides only over this many seeds (the paper: 4 seeds, mean +- std)
MIN_TIMED_STEPS = 8  # an epoch-time claim decides only over this many timed steps a side (bench/retrieval_epoch.py)
WHOLE_GRAPH_DATASETS = ("explagraphs",)  # gr_core.g_retriever.retrieval: whole_graph=True (GR's "k = 0")
REFERENCE_EFFECT = 0.05  # the difference this project's reference-row claims are powered for (no paper number)
# runs no seed changes, run once for every seed: the deterministic reference rows (gr_core.studies.graph_baselines) and
# the untrained inference-only rows (greedy; gr_core.g_retriever.experiments.run_plan). The GNN-only classifier trains
# per seed: not one of them, and neither is a trained system that finished one seed
SEEDLESS = ("majority", "negation_parity", "question_only", "zero_shot", "zero_cot", "cot_bag", "kaping")


def decide(claim: Claim, discordance: float | None, trained: bool = True) -> Claim:
    """Fill ``n_power`` and ``decides`` from the claim's ``paper_diff``, ``n``, ``seeds`` and verdict; without the
    numbers the power needs, :func:`claims` fills ``decides`` from the verdict alone."""
    if claim.paper_diff is None or claim.n is None or discordance is None:
        return claim
    claim.n_power = mcnemar_n_for_power(claim.paper_diff / metric_scale(claim.dataset), discordance)
    seeds_ok = not trained or (claim.seeds or 1) >= MIN_SEEDS
    significant = claim.verdict in ("reproduced", "contradicted")
    powered = claim.n_power is not None and claim.n >= claim.n_power
    claim.decides = "yes" if seeds_ok and (significant or powered) else "no"
    return claim


def paired_claim(paper: str, claim: str, dataset: str, runs_dir: Path, run_a: str, run_b: str, source: str,
                 label_a: str | None = None, label_b: str | None = None, paper_diff: float | None = None) -> Claim:
    """Run ``run_a`` against ``run_b`` on the same test questions (:func:`gr_core.stats.compare_seeds`); a seed series
    is named by seed 0 (``...-seed0``), its seeds paired as docs/method.md §4 says. ``paper_diff``: the paper's
    ``a - b`` on the dataset's scale, for :func:`decide`."""
    label_a, label_b = label_a or run_a, label_b or run_b
    scale = metric_scale(dataset)

    def seeds(run: str) -> tuple[str, list[int]]:
        if not run.endswith("-seed0"):
            return run, []
        stem = run[: -len("-seed0")]
        found = seed_run_dirs(runs_dir, *stem.split("-", 1), "predictions.jsonl") if "-" in stem else []
        return stem, [k for k, _ in found] or [0]

    def untestable(why: str) -> Claim:
        return Claim(paper, claim, "not testable here", why, source, dataset, label_a, label_b, paper_diff=paper_diff)

    def seedless(stem: str, found: list[int]) -> bool:
        return len(found) == 1 and stem.split("-", 1)[-1] in SEEDLESS

    (stem_a, seeds_a), (stem_b, seeds_b) = seeds(run_a), seeds(run_b)
    unpaired = ""
    if stem_a == run_a or stem_b == run_b:  # a run that is not a seed series: compare the two directories
        names = [(run_a, run_b)]
    elif seedless(stem_a, seeds_a) or seedless(stem_b, seeds_b):  # its one run paired with each seed of the other
        names = [(f"{stem_a}-seed{i}", f"{stem_b}-seed{k}") for i in seeds_a for k in seeds_b]
    else:  # trained on both sides: seed k with seed k only; repeating one run would count it as several seeds
        common = sorted(set(seeds_a) & set(seeds_b))
        if not common:
            return untestable(f"no seed in common ({label_a} seeds {seeds_a}, {label_b} seeds {seeds_b})")
        names = [(f"{stem_a}-seed{k}", f"{stem_b}-seed{k}") for k in common]
        left = [f"{lab} seeds {sorted(set(s) - set(common))}" for lab, s in ((label_a, seeds_a), (label_b, seeds_b))
                if set(s) - set(common)]
        unpaired = f"; seeds without a partner, left out: {', '.join(left)}" if left else ""
    try:
        pairs = [(run_question_scores(runs_dir, x), run_question_scores(runs_dir, y)) for x, y in names]
    except FileNotFoundError as err:
        return untestable(f"missing predictions: {err.filename}")
    if any(list(x.index) != list(y.index) or list(x.index) != list(pairs[0][0].index) for x, y in pairs):
        sizes = sorted({len(v) for pair in pairs for v in pair})
        return untestable(f"different test questions ({sizes}): not compared")
    a_m = np.stack([x.to_numpy() for x, _ in pairs])
    b_m = np.stack([y.to_numpy() for _, y in pairs])
    if a_m.shape[1] == 0:
        return untestable("no paired answers")
    r = compare_seeds(a_m, b_m)
    a, b = r["score_a"] * scale, r["score_b"] * scale
    spread = ""
    if r["seeds"] > 1:
        per = lambda xs: " / ".join(f"{x * scale:.4g}" for x in xs)  # noqa: E731
        spread = (f" (mean of {r['seeds']} seeds: {label_a} {per(r['scores_a'])}, {label_b} {per(r['scores_b'])}"
                  + (f"; CMH p = {r['p_cmh']:.3g}" if "p_cmh" in r else "") + ")")  # no CMH on graded scores
    ev = (f"{label_a} {a:.4g} vs {label_b} {b:.4g} on the same {r['n']} questions{spread}, p = {r['p']:.3g} "
          f"({r['test']}){unpaired}")
    discordance = (r["a_only"] + r["b_only"]) / (r["n"] * r["seeds"]) if "a_only" in r else None
    return decide(Claim(paper, claim, verdict(r["diff"], r["p"]), ev, source, dataset, label_a, label_b,
                        score_a=round(a, 4), score_b=round(b, 4), n=r["n"], p=float(f"{r['p']:.4g}"), test=r["test"],
                        seeds=r["seeds"], paper_diff=paper_diff), discordance)


def paper_difference(dataset: str, a: str, b: str) -> float | None:
    """GR Table 3's ``a - b`` for ``dataset``'s column, on its scale (this project's reference rows:
    :data:`REFERENCE_EFFECT`)."""
    if b in ("majority", "gnn_classifier", "negation_parity"):
        return REFERENCE_EFFECT * metric_scale(dataset)
    col = PAPER_COLUMN.get(dataset)
    if col is None or col not in PAPER_TABLE3.get(a, {}) or col not in PAPER_TABLE3.get(b, {}):
        return None
    return round(PAPER_TABLE3[a][col][0] - PAPER_TABLE3[b][col][0], 4)


def _not_run(root: Path | None, what: str, *notebooks: str) -> str:
    """Why ``what`` has no result: the ``notebooks`` (numbers) that make it have not passed under ``root`` yet (its
    ``suite.json``; without one, their folders are absent), or they passed and this preset's settings leave it out.
    The cpu preset runs everything and resumes: there it is always not reached yet."""
    statuses = notebook_statuses(root) if root is not None else None
    if statuses is not None:
        passed = {name for name, status in statuses.items() if status == "passed"}
    else:  # no suite run here: the notebooks' folders say what ran
        passed = {d.name for d in root.iterdir() if d.is_dir()} if root is not None and root.is_dir() else set()
    ran = root is not None and all(any(name.startswith(f"{n}_") for name in passed) for n in notebooks)
    if root is not None and root.name == "cpu":
        return (f"{what}: not run yet (the cpu preset runs it and resumes where it stopped: `./gr suite --preset cpu` "
                "continues, `--dry-run` lists what is left)")
    if not ran:
        return (f"{what}: not run yet (`./gr suite --preset {root.name if root is not None else 'PRESET'} --only "
                f"{' '.join(notebooks)}` runs it)")
    return f"{what}: not in this preset's settings (the cpu preset runs it)"


def _table3_claims(t: dict, root: Path | None) -> list[Claim]:
    df = t.get("03_training/table3")
    src = "03_training/table3.csv"
    if df is None or root is None:
        return [Claim("G-Retriever", c, "not testable here", _not_run(root, "notebook 03", "03"), src)
                for c in ("G-Retriever beats prompt tuning and GraphToken",
                          "LoRA helps (G-Retriever w/ LoRA > G-Retriever)")]
    rows = {(r.dataset, r.method) for r in df.itertuples()}
    out = []
    pairs = [("G-Retriever beats GraphToken (Table 3)", "g_retriever", "graph_token"),
             ("G-Retriever beats prompt tuning (Table 3)", "g_retriever", "prompt_tuning"),
             ("LoRA helps: G-Retriever w/ LoRA beats G-Retriever (Table 3)", "g_retriever_lora", "g_retriever"),
             ("G-Retriever beats the graph-only classifier (our reference row)", "g_retriever", "gnn_classifier"),
             ("G-Retriever beats the majority class (our reference row)", "g_retriever", "majority")]
    for claim, a, b in pairs:
        paper = "G-Retriever" if "reference row" not in claim else "this project"
        both = [d for d in sorted(df.dataset.unique()) if (d, a) in rows and (d, b) in rows]
        out += [paired_claim(paper, claim, d, root / "runs", f"{d}-{a}-seed0", f"{d}-{b}-seed0", src, a, b,
                             paper_difference(d, a, b)) for d in both]
        if not both and paper == "G-Retriever":
            why = _not_run(root, f"{a} beside {b} on one dataset", "03")
            out.append(Claim(paper, claim, "not testable here", why, src))
    return out


def _efficiency_claims(t: dict, root: Path | None) -> list[Claim]:
    t4, ret = t.get("06_efficiency/table4"), t.get("02_retrieval/table4_table11")
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
    verdict_ = ("not testable here" if not flags else "reproduced" if all(flags) else "partly" if any(flags) else
                "not reproduced")
    tokens = Claim("G-Retriever", "Retrieval cuts prompt tokens by 80-99% (Table 4)", verdict_,
                   "; ".join(ev) or _not_run(root, "notebooks 02 and 06", "02", "06"),
                   "06_efficiency/table4.csv" if t4 is not None else "02_retrieval/table4_table11.csv")
    # only both sides timed alone in one process decide (bench/retrieval_epoch.py for this preset): the runs' own
    # epochs were trained when and beside what the preset's lanes allowed
    bench, timed = _retrieval_epoch_bench(root)
    ev = [f"{d['row']}: {d['min_epoch_before']} -> {d['min_epoch_after']} min/epoch"
          for d in (t4.to_dict("records") if t4 is not None else [])
          if pd.notna(d.get("min_epoch_before")) and pd.notna(d.get("min_epoch_after"))]
    ev = ([f"the runs' own epochs (not a controlled comparison): {'; '.join(ev)}"] if ev else [])
    tests = {d: total_reduction(r["sides"]["gr_wo_retrieval"].get("step_seconds", []),
                                r["sides"]["g_retriever"].get("step_seconds", [])) for d, r in timed.items()}
    steps = {d: min(t["n_before"], t["n_after"]) for d, t in tests.items()}
    deciding = {d: t for d, t in tests.items() if steps[d] >= MIN_TIMED_STEPS and t["p"] >= 0}
    few = [f"{d}: " + (f"{steps[d]} timed steps a side, {MIN_TIMED_STEPS} decide" if steps[d] < MIN_TIMED_STEPS
                       else "unusable step times") for d in tests if d not in deciding]
    verdicts = {d: verdict(t["reduction_%"], t["p"]) for d, t in deciding.items()}
    found = set(verdicts.values())
    verdict_ = ("not testable here" if not found else "contradicted" if "contradicted" in found else
                "reproduced" if found == {"reproduced"} else "partly" if "reproduced" in found else "not significant")
    # the datasets behind the verdict (for "partly": those reproduced) and the largest of their p
    behind = [d for d, v in verdicts.items() if v == {"partly": "reproduced"}.get(verdict_, verdict_)] or \
        list(verdicts)
    preset = root.name if root is not None else "PRESET"
    how = [_timed_alone(timed, tests)] + few if timed else [
        f"python bench/retrieval_epoch.py --preset {preset} times both sides alone"] if ev else [
        _not_run(root, "notebook 06's runs with and without retrieval", "06")]
    return [tokens, Claim("G-Retriever", "Retrieval shortens training epochs (Table 4: -29% / -67%)", verdict_,
                          "; ".join(how + ev), f"../bench/{bench.name}" if timed else "06_efficiency/table4.csv",
                          dataset=", ".join(behind), p=max((deciding[d]["p"] for d in behind), default=None),
                          test="bootstrap over the epoch's timed steps, each side resampled" if deciding else "",
                          decides="yes" if verdict_ in ("reproduced", "contradicted", "partly") else "no")]


def _retrieval_epoch_bench(root: Path | None) -> tuple[Path | None, dict]:
    """The path and per-dataset entries of ``outputs/bench/retrieval_epoch[-<preset>].json`` if it timed the preset
    at ``root``, else ``(None, {})``."""
    for name in ([] if root is None else [f"retrieval_epoch-{root.name}.json", "retrieval_epoch.json"]):
        path = root.parent / "bench" / name
        if path.is_file() and (d := json.loads(path.read_text())).get("preset") == root.name:
            return path, d.get("datasets") or {}
    return None, {}


def _timed_alone(timed: dict, tests: dict) -> str:
    """The bench's evidence: per dataset an epoch's training seconds without -> with retrieval, the reduction's 95%
    interval and p."""
    parts = []
    for d, r in timed.items():
        before, after, t = r["sides"]["gr_wo_retrieval"], r["sides"]["g_retriever"], tests[d]
        paper = "" if r.get("paper_reduction_%") is None else f"; paper's epoch {-r['paper_reduction_%']:+.1f}%"
        test = "" if t["p"] != t["p"] else f", 95% CI [{-t['ci_high']:+.1f}, {-t['ci_low']:+.1f}], p {t['p']:.2g}"
        parts.append(f"{d}: {before['seconds']:.0f} -> {after['seconds']:.0f} s of training steps for the epoch "
                     f"({-r['epoch_reduction_%']:+.1f}%{test}; real tokens {-r['token_reduction_%']:+.1f}%{paper}; "
                     f"LLM in {after.get('llm_dtype', '?')})")
    return "timed alone, both sides in one process (python bench/retrieval_epoch.py): " + "; ".join(parts)


def _hallucination_claims(t: dict, root: Path | None) -> list[Claim]:
    """Per dataset, G-Retriever against GraphToken on each response's fully-valid flag (normalized level), paired by
    question index in notebook 05's ``responses.jsonl``."""
    df = t.get("05_hallucination/table5_all_levels")
    src = "05_hallucination/responses.jsonl"
    claim = "Hallucination drops: more valid citations than graph prompt tuning (Table 5)"
    table = "05_hallucination/table5_all_levels.csv"  # the source of the rows with nothing to pair
    if df is None:
        return [Claim("G-Retriever", claim, "not testable here", _not_run(root, "notebook 05", "05"), table)]
    resp = pd.read_json(root / src, lines=True) if root is not None and (root / src).is_file() else None
    paper_pct = PAPER_TABLE5["g_retriever"]["fully_valid_%"] - PAPER_TABLE5["graph_token"]["fully_valid_%"]
    out, silent = [], []
    for d, g in df[df.level == "normalized"].groupby("dataset", sort=False):
        rows = {r["system"]: r for r in g.to_dict("records")}
        if "g_retriever" not in rows or "graph_token" not in rows:
            continue
        a, b = rows["g_retriever"], rows["graph_token"]
        if min(a["citing_%"], b["citing_%"]) < 5:
            silent.append(f"{d}: citing G-Retriever {a['citing_%']:.0f}% / GraphToken {b['citing_%']:.0f}%")
            continue
        scale = metric_scale(d)  # the Claim columns' scale (decide's power needs it); the evidence says percent
        c = Claim("G-Retriever", claim, "not testable here", f"{d}: fully valid {a['fully_valid_%']:.1f}% vs "
                  f"{b['fully_valid_%']:.1f}%, no per-response records to pair (rerun notebook 05)", src, d,
                  "g_retriever", "graph_token", paper_diff=round(paper_pct / 100 * scale, 4), seeds=1)
        # each response's flag by question index; a question answered twice by one system cannot be paired
        fa, fb = ([] if resp is None else resp[(resp.dataset == d) & (resp.system == s)].set_index("index")
                  ["fully_valid_normalized"].astype(float) for s in ("g_retriever", "graph_token"))
        common = [] if resp is None or fa.index.duplicated().any() or fb.index.duplicated().any() else \
            fa.index.intersection(fb.index)
        if not len(common):
            out.append(c)
            continue
        r = compare(fa.loc[common].to_numpy(), fb.loc[common].to_numpy())
        c.verdict, c.n, c.p, c.test = verdict(r["diff"], r["p"]), r["n"], float(f"{r['p']:.4g}"), r["test"]
        c.score_a, c.score_b = round(r["score_a"] * scale, 4), round(r["score_b"] * scale, 4)
        c.evidence = (f"{d}: fully valid {100 * r['score_a']:.1f}% vs {100 * r['score_b']:.1f}% of the same {r['n']} "
                      f"questions (G-Retriever alone {r['a_only']}, GraphToken alone {r['b_only']}), p = "
                      f"{r['p']:.3g} ({r['test']})")
        out.append(decide(c, (r["a_only"] + r["b_only"]) / r["n"]))
    if silent:
        where = "on these datasets the two systems do not both cite" if out else "on no dataset do both systems cite"
        out.append(Claim("G-Retriever", claim, "not testable here",
                         f"{where} (each must list nodes or edges in >= 5% of its responses): " + "; ".join(silent)
                         + citing_evidence(t.get("05_hallucination/citing_rates")), table))
    return out or [Claim("G-Retriever", claim, "not testable here", "no dataset has both systems", table)]


def citing_evidence(df: pd.DataFrame | None) -> str:
    """What notebook 05 §4b measured about who cites: each (dataset, LLM, system, request)'s citing share, and how
    much of it copies the prompt's graph; "" when it did not run.

    >>> print(citing_evidence(pd.DataFrame({"dataset": ["clevr"] * 2, "llm": ["embedded:a", "embedded:b"],
    ...     "system": ["zero_shot"] * 2, "request": ["format"] * 2, "responses": [16, 0], "citing_%": [75.0, None],
    ...     "echo_%": [75.0, None], "note": ["", "not run: b is not installed"]})))
    . Who cites (05 §4b): clevr: a zero_shot (format) 75% of 16, 75% copying the prompt's graph; b: not run: b is not installed
    """  # noqa: E501 a doctest's expected output: one line, which cannot be wrapped
    if df is None or not len(df):
        return ""
    parts = []
    for d, g in df.groupby("dataset", sort=False):
        items = []
        for r in g.to_dict("records"):
            llm = str(r["llm"]).split(":")[-1]
            if not r["responses"]:
                if f"{llm}: {r['note']}" not in items:
                    items.append(f"{llm}: {r['note']}")
                continue
            echo = f", {r['echo_%']:.0f}% copying the prompt's graph" if r.get("echo_%") else ""
            items.append(f"{llm} {r['system']} ({r['request']}) {r['citing_%']:.0f}% of {int(r['responses'])}{echo}")
        parts.append(f"{d}: " + "; ".join(items))
    return ". Who cites (05 §4b): " + " | ".join(parts)


def _ablation_claims(t: dict, root: Path | None) -> list[Claim]:
    df = t.get("07_ablations/table6")
    src = "07_ablations/table6.csv"
    claim = "Every ablated component matters: the full model beats each ablation (Table 6)"
    if df is None or root is None:
        return [Claim("G-Retriever", claim, "not testable here", _not_run(root, "notebook 07", "07"), src)]
    out = []
    d = str(df.dataset.iloc[0]) if "dataset" in df else "webqsp"
    for r in df[df.method != "g_retriever"].itertuples():
        # the paper's WebQSP difference (Hit@1 points) is the effect powered for on every dataset (it ablates on
        # WebQSP only); on ExplaGraphs the same number of points on the accuracy scale
        diff = (round((PAPER_TABLE6["g_retriever"] - PAPER_TABLE6[r.method]) * metric_scale(d) / 100, 4)
                if r.method in PAPER_TABLE6 else None)
        if pd.isna(r.ours):
            why = (f"{r.ablation}: does not apply on {d} (its graphs are used whole: nothing is retrieved)"
                   if r.method == "gr_wo_retrieval" and d in WHOLE_GRAPH_DATASETS
                   else _not_run(root, r.ablation, "07"))
            out.append(Claim("G-Retriever", f"{claim}: {r.ablation}", "not testable here", why, src, d, "g_retriever",
                             r.method, paper_diff=diff))
            continue
        out.append(paired_claim("G-Retriever", f"{claim}: {r.ablation}", d, root / "runs", f"{d}-g_retriever-seed0",
                                f"{d}-{r.method}-seed0", src, "g_retriever", r.method, diff))
    t10 = t.get("07_ablations/table10")
    if t10 is not None and len(t10) > 1:
        big, small = t10.loc[t10.k.idxmax()], t10.loc[t10.k.idxmin()]
        k_dataset = str(big["name"]).split("-", 1)[0]  # the k sweep's own dataset (the runs' names start with it)
        c = paired_claim("G-Retriever", "A larger k than the default helps (Table 10: k = 10 beats k = 3)",
                         k_dataset, root / "runs", big["name"], small["name"], "07_ablations/table10.csv",
                         f"k={big.k:g}", f"k={small.k:g}",
                         round((PAPER_TABLE10[10] - PAPER_TABLE10[3]) * metric_scale(k_dataset) / 100, 4))
        if "chosen" in t10 and t10.chosen.any():
            c.evidence += "; chosen on validation: k=" + ", ".join(f"{r.k:g}" for r in t10[t10.chosen].itertuples())
        out.append(c)
    return out


def _gnn_rag_claims(t: dict, root: Path | None) -> list[Claim]:
    """GNN-RAG's claims on notebook 04's per-question predictions, per dataset key, powered for the paper's WebQSP
    difference: against the plain LLM, RA against GNN alone, and the LLM half against the GNN beneath it (Hit@1 by
    McNemar, F1 by signed rank), free-text and grounded."""
    src = "04_gnn_rag/predictions.jsonl.gz"  # gr_core.runs.write_records
    web = {k[1]: v for k, v in PAPER_GNN_RAG.items() if k[0] == "webqsp"}
    alone = PAPER_GNN_ONLY["webqsp"]
    # (claim, system a, system b ("" = the GNN alone on a's rows), metric column, the paper's WebQSP difference)
    specs = [("GNN-RAG beats the plain LLM (Hit; Tables 2, 4)", "gnn", "none", "hit",
              web["gnn"]["Hit"] - web["none"]["Hit"]),
             ("Retrieval augmentation helps: GNN + RoG beats GNN alone (Hit; Table 4)", "gnn+rog", "gnn", "hit",
              web["gnn+rog"]["Hit"] - web["gnn"]["Hit"])]
    for r, name in (("gnn", "GNN-RAG"), ("gnn+rog", "GNN-RAG+RA")):
        for suffix, what in (("", ""), (GROUNDED, " (grounded replies, beyond the paper)")):
            specs += [(f"{name}{what} beats its GNN alone (Hit@1; Table 2)", r + suffix, "", "hit1",
                       web[r]["Hit@1"] - alone["h1"]),
                      (f"{name}{what} beats its GNN alone (F1; Table 2)", r + suffix, "", "f1",
                       web[r]["F1"] - alone["f1"])]
    if root is None or not (root / src).is_file():
        why = _not_run(root, "notebook 04", "04")
        return [Claim("GNN-RAG", c, "not testable here", why, src) for c, *_ in specs[:2]]
    preds = pd.read_json(root / src, lines=True)
    out = []
    for claim, a, b, col, diff in specs:
        if not (preds.retriever == a).any():  # a retriever this preset does not run
            continue
        if not b and ("gnn_h1" not in preds or preds.gnn_h1.isna().all()):
            out.append(Claim("GNN-RAG", claim, "not testable here", "these predictions carry no per-question GNN "
                             "scores (notebook 04 before issue 59): rerun notebook 04", src))
            continue
        for d in preds.dataset.unique():
            pa = preds[(preds.dataset == d) & (preds.retriever == a)].set_index("index")
            pb = pa[{"hit1": "gnn_h1", "f1": "gnn_f1"}[col]] if not b else \
                preds[(preds.dataset == d) & (preds.retriever == b)].set_index("index")[col]
            common = pa.index.intersection(pb.index)
            if not len(common):
                continue
            a_, b_ = pa.loc[common, col].to_numpy(), pb.loc[common].to_numpy()
            r = signed_rank(a_, b_) if col == "f1" else compare(a_, b_)
            sa, sb = 100 * r["score_a"], 100 * r["score_b"]
            # the direction is the test's own: Wilcoxon's rank sums, which a few large gains in the mean can outvote
            direction = r["rank_biserial"] if col == "f1" else r["diff"]
            rb = f"; rank-biserial {direction:+.2f}, > 0 when {a} is ahead by the test" if col == "f1" else ""
            c = Claim("GNN-RAG", claim, verdict(direction, r["p"]),
                      f"{a} {sa:.4g} vs {b or 'the GNN alone'} {sb:.4g} on the same {r['n']} questions, p = "
                      f"{r['p']:.3g} ({r['test']}{rb})", src, d, a, b or "gnn alone", round(sa, 4), round(sb, 4),
                      r["n"], float(f"{r['p']:.4g}"), r["test"], seeds=1, paper_diff=round(diff, 4))
            if col == "f1":  # no power formula for the signed-rank test: decides only when significant
                c.decides = "yes" if c.verdict in ("reproduced", "contradicted") else "no"
            # one reasoner and one generator compared with and without their evidence (or without the LLM): a claim
            # about the method on fixed models, not about a training run, so one seed can decide it
            out.append(c if col == "f1" else decide(c, (r["a_only"] + r["b_only"]) / r["n"], trained=False))
    return out


def claims(tables: dict[str, pd.DataFrame], root: str | Path | None = None) -> pd.DataFrame:
    """One row per paper claim and dataset: the verdict, both scores, n, the paired p-value and the file. Without
    ``root`` (``outputs/<preset>``: the runs and predictions) every comparison is ``not testable here``."""
    root = None if root is None else Path(root)
    rows = _table3_claims(tables, root) + _efficiency_claims(tables, root) + _hallucination_claims(tables, root) + \
        _ablation_claims(tables, root) + _gnn_rag_claims(tables, root)
    for r in rows:  # not run: cannot decide; a threshold on a measurement (tokens, citations): no test
        if not r.decides:
            r.decides = "no" if r.verdict == "not testable here" else "measurement"
    cols = ["paper", "claim", "dataset", "verdict", "decides", "system_a", "system_b", "score_a", "score_b", "n",
            "seeds", "paper_diff", "n_power", "p", "test", "evidence", "source"]
    return pd.DataFrame([r.__dict__ for r in rows])[cols]
