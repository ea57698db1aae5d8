"""The hallucination study, automated (GR paper §6.4, App. F, Table 5): each system answers and cites the nodes and
edges behind its answer; :mod:`gr_core.citations` checks the citations at three match levels (docs/method.md).

Metrics (Table 5): ``valid_nodes`` / ``valid_edges`` = valid / cited, pooled over responses; ``fully_valid`` =
responses citing something, all of it valid, over *all* responses; ``fully_valid_citing`` over citing ones only.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from ..citations import LEVELS, CitationMatcher, check_response, parse_citations  # noqa: F401 (notebook 05 imports them here)
from ..config import check_choice, resolve_device
from ..data import TextualGraph
from ..evaluate import task_scores
from ..llm import unavailable
from ..paths import cache_root
from ..precision import dtype_name, resolve_dtype
from ..prompts import CITE_REQUESTS, cite_question
from ..published import PAPER_TABLE5
from ..runs import atomic_write_text, changed_inputs, config_hash, read_json, seed_everything, write_json
from ..stats import wilson_interval


def cite_responses(model, ds, indices: list[int], max_new_tokens: int = 128, batch_size: int = 16,
                   request: str = "paper") -> list[str]:
    """Each question's greedy response to the citation request (``request``: a key of
    :data:`~gr_core.prompts.CITE_REQUESTS`; ``"paper"`` is the paper's wording). The model sees what it saw in
    training; only the question gains the request."""
    from ..g_retriever.examples import build_examples  # noqa: PLC0415 deferred: loads torch (~1.5 s at start-up) through gr_core.g_retriever.examples; this module stays torch-free
    from ..g_retriever.train import predict  # noqa: PLC0415 deferred: loads torch (~1.5 s at start-up) through gr_core.g_retriever.train; this module stays torch-free

    examples = build_examples(ds, indices, model.cfg, desc=f"{ds.name} cite")
    for ex, i in zip(examples, indices):
        ex.question = cite_question(ds.name, ds.records[i].question, request)
    answers, _ = predict(model, model.tokenize(examples), batch_size, desc=f"{ds.name} cite",
                         max_new_tokens=max_new_tokens)
    return answers


def audit(ds, indices: list[int], responses: list[str], system: str) -> pd.DataFrame:
    """One row per response: its key, the checker's counts and verdicts (see :func:`check_response`), whether it
    cites any node or edge (``citing``) and whether the answer is right by the dataset's metric (``correct``)."""
    rows = []
    for i, text in zip(indices, responses):
        rec = ds.records[i]
        row = check_response(text, ds.graph(i))
        score = task_scores(ds.name, text, list(rec.answers))
        digest = hashlib.sha256(text.encode()).hexdigest()[:12]
        # the question index makes the key unique (CLEVR asks several questions about one scene)
        rows.append({"key": f"{ds.name}/{system}/q{i}/{digest}", "dataset": ds.name, "system": system,
                     "index": int(i), "graph_id": str(rec.graph_id), "question": rec.question,
                     "answers": list(rec.answers), "response": text, "correct": float(score["score"]), **row,
                     "citing": row["cited_nodes"] + row["cited_edges"] > 0})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------- summaries with confidence intervals
def ratio_ci(num: np.ndarray, den: np.ndarray, seed: int = 0, n_boot: int = 2000,
             conf: float = 0.95) -> tuple[float, float, float]:
    """A pooled ratio sum(num) / sum(den) and its percentile bootstrap interval, resampling responses (citations
    cluster in responses)."""
    num, den = np.asarray(num, float), np.asarray(den, float)
    if den.sum() == 0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(num), size=(n_boot, len(num)))
    d = den[idx].sum(1)
    boots = num[idx].sum(1)[d > 0] / d[d > 0]
    lo, hi = np.quantile(boots, [(1 - conf) / 2, (1 + conf) / 2])
    return float(num.sum() / den.sum()), float(lo), float(hi)


def summarize(rows: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Table 5 per (dataset, system) and match level: Valid Nodes, Valid Edges, Fully Valid Graphs (%), each with a
    95% CI, from one row per response with the columns of :func:`check_response` (and ``correct``, optional)."""
    out = []
    for (dataset, system), g in rows.groupby(["dataset", "system"], sort=False):
        n, citing = len(g), int(((g.cited_nodes + g.cited_edges) > 0).sum())
        for lv in LEVELS:
            vn, vn_lo, vn_hi = ratio_ci(g[f"valid_nodes_{lv}"], g.cited_nodes, seed)
            ve, ve_lo, ve_hi = ratio_ci(g[f"valid_edges_{lv}"], g.cited_edges, seed)
            fv = int(g[f"fully_valid_{lv}"].sum())
            fv_lo, fv_hi = wilson_interval(fv, n)
            fc_lo, fc_hi = wilson_interval(fv, citing)
            rec = {"dataset": dataset, "system": system, "level": lv, "responses": n, "citing_%": 100 * citing / n,
                   "cited_nodes": int(g.cited_nodes.sum()), "cited_edges": int(g.cited_edges.sum()),
                   "valid_nodes_%": 100 * vn, "valid_nodes_ci": (100 * vn_lo, 100 * vn_hi),
                   "valid_edges_%": 100 * ve, "valid_edges_ci": (100 * ve_lo, 100 * ve_hi),
                   "fully_valid_%": 100 * fv / n, "fully_valid_ci": (100 * fv_lo, 100 * fv_hi),
                   "fully_valid_citing_%": 100 * fv / citing if citing else float("nan"),
                   "fully_valid_citing_ci": (100 * fc_lo, 100 * fc_hi)}
            if "correct" in g:
                rec["correct_%"] = 100 * float(g.correct.mean())
            out.append(rec)
    return pd.DataFrame(out)


# GR paper Table 1, verbatim: the prompt-tuned baseline and G-Retriever on "What kind of animal is in the bushes?"
TABLE1_RESPONSES = {
    "graph prompt tuning": "The animal in the bushes is a deer. Nodes: * Deer (node 1) * Bushes (node 2) Edges: * Deer "
                           "→ Bushes (edge 1) * Deer → Grass (edge 2) * Bushes → Grass (edge 3)",
    "g_retriever": "Based on the information provided in the graph, the animal in the bushes is an elephant. The nodes "
                   "that support this answer are: * Node 1: The elephant is mentioned in the first line of the graph. "
                   "The edges that support this answer are: * The edge connects the elephant to the bushes, indicating "
                   "that the elephant is in the bushes. Therefore, the answer to the question is: The animal in the "
                   "bushes is an elephant.",
}


def table1_scene():
    """A three-object scene for Table 1's question (the paper does not print its graph): elephant in bushes."""
    return TextualGraph(nodes=pd.DataFrame({"node_id": [0, 1, 2], "node_attr": ["elephant", "bushes", "tree"]}),
                        edges=pd.DataFrame({"src": [0, 1], "edge_attr": ["in", "next to"], "dst": [1, 2]}),
                        question="What kind of animal is in the bushes?", answers=["elephant"])


def table5(summary: pd.DataFrame, level: str = "normalized") -> pd.DataFrame:
    """Table 5's layout (metrics as rows, systems as columns), ours at ``level`` with 95% CIs, the paper beside."""
    check_choice("table5", "level", level, LEVELS)  # another would select no row of ours: the paper's columns alone
    rows = []
    sub = summary[summary.level == level]
    for metric, label in (("valid_nodes_%", "Valid Nodes"), ("valid_edges_%", "Valid Edges"),
                          ("fully_valid_%", "Fully Valid Graphs")):
        rec = {"metric": label}
        for r in sub.to_dict("records"):
            ci = r[metric.replace("_%", "_ci")]
            v = r[metric]
            rec[f"{r['dataset']} {r['system']}"] = "–" if v != v else f"{v:.1f} [{ci[0]:.1f}, {ci[1]:.1f}]"
        for system, vals in PAPER_TABLE5.items():
            rec[f"paper {system}"] = f"{vals[metric]:.0f}"
        rows.append(rec)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------- the checker against a human
def agreement(rows: pd.DataFrame, labels: pd.DataFrame) -> pd.DataFrame:
    """The checker's agreement with hand labels (one row per response: ``key`` as in ``rows`` and the human's
    :data:`LABEL_FIELDS`), per match level: responses matched, the fully-valid verdict's accuracy and Cohen's kappa,
    and the mean absolute difference in cited and valid counts (the parser's errors as well as the matcher's)."""
    human = labels[["key", "cited_nodes", "valid_nodes", "cited_edges", "valid_edges", "fully_valid"]]
    merged = human.rename(columns=lambda c: c if c == "key" else f"{c}_human").merge(rows, on="key")
    out = []
    h, n = merged.fully_valid_human.astype(bool).to_numpy(), len(merged)
    cited = merged.cited_nodes_human + merged.cited_edges_human - merged.cited_nodes - merged.cited_edges
    valid = merged.valid_nodes_human + merged.valid_edges_human
    for lv in LEVELS:
        m = merged[f"fully_valid_{lv}"].astype(bool).to_numpy()
        po = float((h == m).mean()) if n else float("nan")
        pe = float(h.mean() * m.mean() + (1 - h.mean()) * (1 - m.mean())) if n else float("nan")
        kappa = (po - pe) / (1 - pe) if n and pe < 1 else float("nan")
        valid_diff = valid - merged[f"valid_nodes_{lv}"] - merged[f"valid_edges_{lv}"]
        out.append({"level": lv, "labelled": len(labels), "matched": n, "fully_valid_agreement_%": 100 * po,
                    "cohen_kappa": kappa, "cited_abs_diff": float(cited.abs().mean()),
                    "valid_abs_diff": float(valid_diff.abs().mean())})
    return pd.DataFrame(out)


# ---------------------------------------------------------------------- the study, end to end
def response_cache(cfg, ds, indices: list[int], max_new_tokens: int, batch_size: int, seed: int,
                   request: str = "paper"):
    """Where :func:`run_study` caches one run's responses, keyed by everything that makes them (the run's config
    hash, the questions, the budget, the request, batch and seed): a new parser or new labels regenerate none."""
    spec = {"run": config_hash(cfg.to_dict()), "questions": [str(ds.records[i].graph_id) for i in indices],
            "max_new_tokens": max_new_tokens, "request": CITE_REQUESTS[request], "batch_size": batch_size, "seed": seed}
    dtype = dtype_name(resolve_dtype(cfg.model.llm.dtype, resolve_device(cfg.model.llm.device)))
    if dtype != "float32":  # the LLM's precision on this machine ("auto"); fp32 keeps the keys made before it mattered
        spec["llm_dtype"] = dtype
    key = config_hash(spec)
    return cache_root() / "hallucination" / f"{cfg.name}-{key}.json"


def _test_indices(ds, questions: dict | int | None) -> list[int]:
    """The first ``questions`` test questions of ``ds`` (a dict per dataset name; None or 0: all)."""
    n = questions.get(ds.name) if isinstance(questions, dict) else questions
    return list(ds.split["test"])[:n or None]


def _responses(cfg, ds, indices: list[int], runs_dir, max_new_tokens: int, batch_size: int, seed: int,
               request: str = "paper", loaded: dict | None = None) -> list[str]:
    """The responses of ``cfg``'s run to ``request``, read from :func:`response_cache` or generated and cached;
    ``loaded`` keeps the trained model, loaded only where a response is missing, for the next request."""
    from ..g_retriever.train import run_inputs, trained_model  # noqa: PLC0415 deferred: loads torch (~1.5 s at start-up) through gr_core.g_retriever.train; this module stays torch-free

    cached, inputs = response_cache(cfg, ds, indices, max_new_tokens, batch_size, seed, request), run_inputs(cfg, ds)
    # the run's inputs (data, encoder, LLM weights) are checked beside the key; responses cached before them are kept
    if cached.is_file() and not changed_inputs((found := read_json(cached)).get("inputs"), inputs):
        return found["responses"]
    loaded = {} if loaded is None else loaded
    if "model" not in loaded:
        loaded["model"] = trained_model(cfg, Path(runs_dir) / cfg.name, ds)
    seed_everything(seed)
    responses = cite_responses(loaded["model"], ds, indices, max_new_tokens, batch_size, request)
    write_json(cached, {"run": cfg.name, "request": request, "inputs": inputs, "responses": responses})
    return responses


def run_study(datasets: list[str], systems: list[str], runs_dir, settings: dict, questions: dict | int | None = None,
              max_new_tokens: int = 128, batch_size: int = 16, seed: int = 0) -> pd.DataFrame:
    """Every (dataset, system): the trained run (reused, or trained with ``settings``), its responses to the
    citation request on the first ``questions`` test questions (a dict per dataset; None or 0: all), and the
    checker's verdicts: one row per response (:func:`audit`).

    Args:
        systems: Table 3 method names; the paper's pair is ``graph_token`` and ``g_retriever``.
        settings: :func:`gr_core.g_retriever.run_config.make_run_config` keywords (notebook 03's: its runs are reused).
    """
    from ..g_retriever.train import make_run_config  # noqa: PLC0415 deferred: loads torch (~1.5 s at start-up) through gr_core.g_retriever.train; this module stays torch-free
    from ..graphqa import DatasetConfig, load_dataset  # noqa: PLC0415 deferred: loads torch (~1.5 s at start-up) through gr_core.graphqa; this module stays torch-free

    frames = []
    for name in datasets:
        ds = load_dataset(DatasetConfig(name))
        indices = _test_indices(ds, questions)
        for system in systems:
            cfg = make_run_config(name, system, seed, **settings)
            responses = _responses(cfg, ds, indices, runs_dir, max_new_tokens, batch_size, seed)
            frames.append(audit(ds, indices, responses, system))
    return pd.concat(frames, ignore_index=True)


LABEL_FIELDS = ("key", "cited_nodes", "valid_nodes", "cited_edges", "valid_edges", "fully_valid")


def label_template(rows: pd.DataFrame, k: int = 30, seed: int = 0) -> list[dict]:
    """A sample of ``k`` responses to check by hand, half of them citing something (when there are enough), each
    with empty fields for the human's counts."""
    rng = np.random.default_rng(seed)
    citing = rows[(rows.cited_nodes + rows.cited_edges) > 0]
    rest = rows.drop(citing.index)
    take = min(len(citing), (k + 1) // 2)
    idx = [citing.index[j] for j in rng.permutation(len(citing))[:take]]
    idx += [rest.index[j] for j in rng.permutation(len(rest))[:k - take]]
    return [{"key": rows.key[i], "dataset": rows.dataset[i], "system": rows.system[i], "graph_id": rows.graph_id[i],
             "question": rows.question[i], "response": rows.response[i],
             **{f: None for f in LABEL_FIELDS[1:]}, "note": ""} for i in idx]


def load_labels(path) -> pd.DataFrame:
    """Hand labels (JSON lines with :data:`LABEL_FIELDS`); a malformed line is an error naming file and line."""
    rows = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{n}: not JSON ({e.msg})") from None
        missing = [f for f in LABEL_FIELDS if rec.get(f) is None]
        if missing:
            raise ValueError(f"{path}:{n}: hand label lacks {missing}")
        for f in LABEL_FIELDS[1:5]:
            if not isinstance(rec[f], int) or rec[f] < 0:
                raise ValueError(f"{path}:{n}: field {f!r} must be a count >= 0, got {rec[f]!r}")
        if rec["valid_nodes"] > rec["cited_nodes"] or rec["valid_edges"] > rec["cited_edges"]:
            raise ValueError(f"{path}:{n}: more valid than cited citations")
        rows.append(rec)
    return pd.DataFrame(rows, columns=list(LABEL_FIELDS) + ["note"])


def check_against_labels(rows: pd.DataFrame, out_dir, labels_path, seed: int = 0, k: int = 30):
    """Notebook 05's hand-label check: writes a fresh sample of ``k`` responses to label (``to_label.jsonl``, half
    of them citing: :func:`label_template`) and, where ``labels_path`` exists, the checker's :func:`agreement` with
    those labels (``agreement.csv``), which it returns; None (and says so) where there are no labels."""
    out_dir = Path(out_dir)
    atomic_write_text(out_dir / "to_label.jsonl",
                      "".join(json.dumps(r) + "\n" for r in label_template(rows, k=k, seed=seed)))
    if not Path(labels_path).is_file():
        print(f"no labels at {labels_path}: the checker's agreement is not measured for this preset")
        return None
    agree = agreement(rows, load_labels(labels_path))
    agree.to_csv(out_dir / "agreement.csv", index=False)
    return agree


def first_citing_evidence(rows: pd.DataFrame, level: str = "normalized"):
    """The first response that cites something, with its question's graph and the node ids / edge rows it points at
    (for highlighting), as ``(row, graph, nodes, edges)``; None when no response cites."""
    from ..graphqa import DatasetConfig, load_dataset  # noqa: PLC0415 deferred: loads torch (~1.5 s at start-up) through gr_core.graphqa; this module stays torch-free

    citing = rows[(rows.cited_nodes + rows.cited_edges) > 0]
    if citing.empty:
        return None
    r = citing.iloc[0]
    graph = load_dataset(DatasetConfig(r.dataset)).graph(int(r["index"]))
    nodes, edges = CitationMatcher(graph).evidence(parse_citations(r.response), level)
    return r, graph, nodes, edges


def examples(rows: pd.DataFrame, k: int = 2, level: str = "normalized") -> pd.DataFrame:
    """The first ``k`` citing responses per (dataset, system) (the first responses when none cites), with the
    checker's verdict on each citation at ``level``."""
    out = []
    for _, g in rows.groupby(["dataset", "system"], sort=False):
        citing = g[(g.cited_nodes + g.cited_edges) > 0]
        for r in (citing if len(citing) else g).head(k).itertuples(index=False):
            out.append({"dataset": r.dataset, "system": r.system, "question": r.question, "gold": r.answers,
                        "response": r.response,
                        "citations": "; ".join(f"{'✓' if c[level] else '✗'} {c['kind']} {c['text'][:40]}"
                                               for c in r.citations) or "(none)"})
    return pd.DataFrame(out)


# ---------------------------------------------------------------------- which models cite at all
# the textualized graph's CSV headers and the format request's placeholders
ECHO_MARKS = ("node_id,node_attr", "src,edge_attr,dst", "<node>", "<source>", "<relation>", "<target>")


def is_echo(response: str) -> bool:
    """Whether the response copies the prompt: its textualized graph (the CSV header) or the format request's
    template (``<node>``), instead of choosing evidence."""
    flat = response.lower().replace(" ", "")
    return any(h in flat for h in ECHO_MARKS)


def citing_rates(datasets: list[str], llms: list[str], systems: list[str], requests: list[str], runs_dir,
                 settings: dict, questions: dict | int | None = None, max_new_tokens: int = 128, batch_size: int = 16,
                 seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Which (LLM, system, request) cites at all: Table 5 needs systems that list evidence, and a small model may not.

    Each LLM of ``llms`` answers zero-shot (one not installed gets a row saying why), and each trained system of
    ``systems`` (notebook 03's runs with the LLM of ``settings``) answers, the first ``questions`` test questions of
    each dataset under each citation request of ``requests``.

    Returns:
        ``(rows, table)``: one row per response (:func:`audit` plus ``llm``, ``request``, ``echo``), and per (dataset,
        llm, system, request) the responses and the shares (%) citing anything (95% Wilson), copying the prompt
        (:func:`is_echo`), fully valid (normalized level) and correct.
    """
    from ..g_retriever.train import make_run_config  # noqa: PLC0415 deferred: loads torch (~1.5 s at start-up); this module stays torch-free
    from ..graphqa import DatasetConfig, load_dataset  # noqa: PLC0415 deferred: as above

    pairs = [(llm, "zero_shot") for llm in llms] + [(settings["llm"].model, s) for s in systems if s != "zero_shot"]
    frames, table = [], []
    for name in datasets:
        ds = load_dataset(DatasetConfig(name))
        indices = _test_indices(ds, questions)
        for llm, system in pairs:
            why = unavailable(llm)
            cfg = make_run_config(name, system, seed, **{**settings, "llm": replace(settings["llm"], model=llm)})
            loaded: dict = {}
            for request in requests:
                head = {"dataset": name, "llm": llm, "system": system, "request": request}
                if why:
                    table.append({**head, "responses": 0, "note": f"not run: {why}"})
                    continue
                responses = _responses(cfg, ds, indices, runs_dir, max_new_tokens, batch_size, seed, request, loaded)
                rows = audit(ds, indices, responses, system).assign(
                    llm=llm, request=request, echo=[is_echo(r) for r in responses])
                frames.append(rows)
                citing = int(((rows.cited_nodes + rows.cited_edges) > 0).sum())
                lo, hi = wilson_interval(citing, len(rows))
                table.append({**head, "responses": len(rows), "citing_%": 100 * citing / len(rows),
                              "citing_low": 100 * lo, "citing_high": 100 * hi,
                              "echo_%": 100 * float(rows.echo.mean()),
                              "fully_valid_%": 100 * float(rows.fully_valid_normalized.mean()),
                              "correct_%": 100 * float(rows.correct.mean()), "note": ""})
            del loaded
    return (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()), pd.DataFrame(table)
