"""The citation checker measured against citations whose truth is known by construction (GR paper §6.4, Table 5).

The paper hand-checks responses; this project's checker (:mod:`gr_core.citations`) is automatic, so its precision
and recall are measured here (docs/method.md). Each citation is made from a real graph of the dataset, either true or
false by a controlled corruption:

true cases
    ``node`` (a node's name), ``node, noisy`` (another case, a leading article, a plural ``s``), ``edge``
    (``head -> relation -> tail``), ``edge, short relation`` (a Freebase relation cut to its last segment).
false cases
    ``renamed node`` (a name from another graph, no node's here), ``partial name`` (the first word of a multi-word
    name, no node's), ``invented edge`` (two nodes and a relation of the graph, no edge either way), ``reversed
    edge`` (tail -> relation -> head, no such edge), ``renamed endpoint`` (an edge's head renamed from another graph).

Each case is one response, so a parse failure counts as the checker judging the citation invalid. Scene-graph objects
are cited as a reader names them (``large red cube``), which the ``exact`` level never accepts. A false case is never
a true citation in disguise: names are compared by their normalized tokens.
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..citations import LEVELS, CitationMatcher, parse_citations, tokens
from ..stats import wilson_interval

TRUE_CASES = ("node", "node, noisy", "edge", "edge, short relation")
FALSE_CASES = ("renamed node", "partial name", "invented edge", "reversed edge", "renamed endpoint")


def cited_name(node_text: str) -> str:
    """How a reader names a node: scene-graph objects (``name: cube; attribute: large, red; ...``) as
    ``large red cube``, other nodes by their text."""
    fields = dict(re.findall(r"(name|attribute)s?:\s*([^;]*)", node_text))
    if "name" not in fields:
        return node_text.strip()
    attrs = [a.strip() for a in fields.get("attribute", "").split(",") if a.strip()]
    return " ".join(attrs + [fields["name"].strip()])


def _noisy(name: str) -> str:
    """Another case, a leading article, and a plural ``s`` on a last word that is a plain word of 3+ letters."""
    words = name.split()
    if not words:
        return name
    last = words[-1]
    plural = last + "s" if last.isalpha() and len(last) >= 3 and not last.endswith("s") else last
    return "The " + " ".join(words[:-1] + [plural]).upper()


def constructed_cases(graph, other_names: list[str], rng: np.random.Generator) -> list[dict]:
    """One citation of every case the graph can give (e.g. no reversed edge where none is reversible).
    ``other_names``: node names of other graphs, for renamings.

    Returns:
        dicts with ``case``, ``truth`` (True: the citation names something in the graph), ``kind`` and ``response``.
    """
    names = {int(n): cited_name(str(t)) for n, t in zip(graph.nodes.node_id, graph.nodes.node_attr)}
    # a name is "own" by the checker's most lenient identity short of fuzzy: its normalized tokens, or a scene
    # object's bare name, so that no false case is secretly a true citation
    own = {tokens(v) for v in names.values()} | {tokens(m.group(1)) for t in graph.nodes.node_attr.astype(str)
                                                 if (m := re.search(r"name:\s*([^;]*)", t))}
    edges = list(zip(graph.edges.src.astype(int), graph.edges.edge_attr.astype(str), graph.edges.dst.astype(int)))
    named = {(tokens(names[s]), r, tokens(names[d])) for s, r, d in edges}  # duplicate names are one citation
    foreign = [n for n in other_names if n.strip() and tokens(n) not in own]
    out: list[dict] = []

    def add(case: str, truth: bool, kind: str, text: str) -> None:
        out.append({"case": case, "truth": truth, "kind": kind,
                    "response": f"{'Nodes' if kind == 'node' else 'Edges'}:\n- {text}"})

    node_ids = [i for i, n in names.items() if n]
    pairs_named = {(a, b) for a, _, b in named}
    if node_ids:
        n = names[node_ids[rng.integers(len(node_ids))]]
        add("node", True, "node", n)
        add("node, noisy", True, "node", _noisy(n))
    if foreign:
        add("renamed node", False, "node", foreign[rng.integers(len(foreign))])
    multi = [names[i] for i in node_ids if len(names[i].split()) > 1 and tokens(names[i].split()[0]) not in own]
    if multi:
        add("partial name", False, "node", multi[rng.integers(len(multi))].split()[0])
    if edges and node_ids:
        s, r, d = edges[rng.integers(len(edges))]
        add("edge", True, "edge", f"{names[s]} -> {r} -> {names[d]}")
        short = r.split(".")[-1] if "." in r else r.upper()
        add("edge, short relation", True, "edge", f"{names[s]} -> {short} -> {names[d]}")
        reversible = [(s, r, d) for s, r, d in edges
                      if (tokens(names[d]), r, tokens(names[s])) not in named and tokens(names[s]) != tokens(names[d])]
        if reversible:
            s, r, d = reversible[rng.integers(len(reversible))]
            add("reversed edge", False, "edge", f"{names[d]} -> {r} -> {names[s]}")
        if foreign:
            add("renamed endpoint", False, "edge", f"{foreign[rng.integers(len(foreign))]} -> {r} -> {names[d]}")
        relations = sorted({r for _, r, _ in edges})
        for _attempt in range(20):  # an invented pair: both nodes exist, the edge does not (either way)
            a, b = (node_ids[k] for k in rng.integers(len(node_ids), size=2))
            r = relations[rng.integers(len(relations))]
            ta, tb = tokens(names[a]), tokens(names[b])
            if ta != tb and (ta, tb) not in pairs_named and (tb, ta) not in pairs_named:
                add("invented edge", False, "edge", f"{names[a]} -> {r} -> {names[b]}")
                break
    return out


def judge(graph, cases: list[dict]) -> list[dict]:
    """Each case with the checker's verdict per level (``parsed``: the parser found exactly one citation of the
    case's kind; a case not parsed is judged invalid at every level)."""
    matcher = CitationMatcher(graph)
    rows = []
    for c in cases:
        cites = [x for x in parse_citations(c["response"]) if x.kind == c["kind"]]
        parsed = len(cites) == 1
        rows.append({**c, "parsed": parsed, **{lv: parsed and matcher.valid(cites[0], lv) for lv in LEVELS}})
    return rows


def validate_on_datasets(names: list[str], graphs: int = 100, seed: int = 0) -> pd.DataFrame:
    """Constructed citations on the first ``graphs`` distinct test graphs (0: all) of each dataset in ``names``,
    judged by the checker: one row per citation (``dataset``, ``index``, ``case``, ``truth``, ``kind``,
    ``response``, ``parsed``, one bool column per level)."""
    from ..graphqa import load_dataset  # noqa: PLC0415 deferred: loads torch (~1.5 s at start-up) through gr_core.graphqa; this module stays torch-free

    if not names:
        raise ValueError("validate_on_datasets: no dataset named")
    rows = []
    for name in names:
        ds = load_dataset(name)
        rng = np.random.default_rng(seed)
        first: dict[str, int] = {}  # one question per graph: CLEVR asks about ten questions of each scene
        for i in ds.split["test"]:
            if graphs and len(first) == graphs:
                break
            first.setdefault(str(ds.records[i].graph_id), i)
        found = {i: ds.graph(i) for i in first.values()}
        pool = sorted({cited_name(str(t)) for g in found.values() for t in g.nodes.node_attr})
        for i, g in found.items():
            rows += [{"dataset": ds.name, "index": int(i), **r} for r in judge(g, constructed_cases(g, pool, rng))]
    return pd.DataFrame(rows)


def checker_scores(rows: pd.DataFrame) -> pd.DataFrame:
    """Per dataset and level: precision (of citations judged valid, the share truly valid) and recall (of truly
    valid citations, the share judged valid), in percent, with their counts and 95% Wilson intervals."""
    out = []
    for dataset, g in rows.groupby("dataset", sort=False):
        for lv in LEVELS:
            said = g[g[lv]]
            true = g[g.truth]
            tp = int((said.truth).sum())
            p_lo, p_hi = wilson_interval(tp, len(said))
            r_lo, r_hi = wilson_interval(tp, len(true))
            out.append({"dataset": dataset, "level": lv, "precision_%": 100 * tp / len(said) if len(said) else np.nan,
                        "precision_ci": (round(100 * p_lo, 1), round(100 * p_hi, 1)), "judged_valid": len(said),
                        "recall_%": 100 * tp / max(len(true), 1),
                        "recall_ci": (round(100 * r_lo, 1), round(100 * r_hi, 1)),
                        "truly_valid": len(true), "citations": len(g)})
    return pd.DataFrame(out).round(2)


def acceptance_by_case(rows: pd.DataFrame) -> pd.DataFrame:
    """Per dataset and case: n, the share parsed, and the share judged valid at each level (percent). True cases
    should be accepted (recall), false ones rejected."""
    table = rows.groupby(["dataset", "case"], sort=False).agg(
        truth=("truth", "first"), n=("truth", "size"), parsed=("parsed", "mean"), **{lv: (lv, "mean") for lv in LEVELS})
    for col in ["parsed", *LEVELS]:
        table[col] = (100 * table[col]).round(1)
    return table.reset_index()
