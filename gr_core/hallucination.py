"""The hallucination study, automated (GR paper §6.4, App. F, Table 5).

The paper asks each model to "answer the question and list the nodes or edges from the graph that support your
answer", then *hand-checks* 100 responses per system for whether every cited node and edge exists in the graph.
Here the citations are parsed from free text and checked against the question's whole graph at three match levels:

``exact``
    the cited string equals a node's text, case and surrounding space aside (for scene graphs also the object's
    ``name`` field alone); relations equal the edge's relation string.
``normalized``
    after lower-casing, dropping punctuation, articles and a plural ``s``: the token sets are equal; for scene-graph
    objects the citation names the object and every other word is one of its attributes ("small gray sphere");
    relations also match by their last Freebase segment (``sports.pro_athlete.teams`` = "teams").
``fuzzy``
    ``difflib`` similarity >= 0.8, or one token set contains the other (a citation mentioning the node, or a part of
    its name); an edge may be cited in either direction.

Each level accepts everything the previous one does. A node cited only by id ("node 3") is valid when the id exists;
an edge cited by node ids ("3,behind,5") when that edge exists. A response **cites** something when the parser finds
at least one node or edge citation (see :func:`parse_citations` for the forms it reads). Metrics (Table 5):
``valid_nodes`` / ``valid_edges`` = valid / cited, pooled over responses; ``fully_valid`` = responses with at least
one citation, all valid, over *all* responses (a response that cites nothing is not a valid graph), with
``fully_valid_citing`` over citing responses only.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from .published import PAPER_TABLE5

LEVELS = ("exact", "normalized", "fuzzy")
FUZZY_RATIO = 0.8  # difflib ratio for the fuzzy level
_ARTICLES = {"a", "an", "the", "node", "nodes", "edge", "edges", "object"}
_ARROW = re.compile(r"\s*(?:-+\[([^\]]+)\]-+>|-{2,}\s*([^->\n]{1,60}?)\s*-{2,}>|<?-+>|→|⟶|=>)\s*")
_ID_TRIPLE = re.compile(r"^\(?\s*(\d+)\s*,\s*([^,()]+?)\s*,\s*(\d+)\s*\)?$")
_ID_NODE = re.compile(r"^(\d+)\s*,\s*(.+)$")
_PAREN_TRIPLE = re.compile(r"\(([^(),]+),([^(),]+),([^(),]+)\)")
_NODE_REF = re.compile(r"\bnode\s*#?\s*(\d+)\b", re.I)
_NODE_PAREN = re.compile(r"^(.*?)\s*\(\s*node\s*#?\s*(\d+)\s*\)\s*$", re.I)
_NODE_COLON = re.compile(r"^node\s*#?\s*(\d+)\s*[:.\-]\s*(.*)$", re.I)
_EDGE_REF = re.compile(r"\(\s*edge\s*#?\s*\d+\s*\)\s*$", re.I)
_INLINE_HEADING = re.compile(r"(?<=[.:!?)])[ \t]+(?=(?:the\s+)?(?:supporting\s+|relevant\s+|cited\s+)?(?:nodes?|edges?)"
                             r"\b(?!\s*#?\d)[^.:\n]*:)", re.I)
_INLINE_BULLET = re.compile(r"[ \t]+(?=[*•][ \t])")
_PROSE_WORDS = {"and", "or", "see", "also", "node", "nodes", "the", "a", "an", "is", "of", "in", "to", "with"}
_BULLET = re.compile(r"^\s*(?:[*\-•]|\d+[.)])\s+(.*)$")
_HEADING = re.compile(r"^[\s*#_]*(?:the\s+)?(?:supporting\s+|relevant\s+|cited\s+)?(nodes?|edges?)\b(?!\s*#?\d)[^:]*:\s*(.*)$",
                      re.I)


@dataclass(frozen=True)
class Citation:
    """One cited node or edge as written in a response.

    Attributes:
        kind: ``"node"`` or ``"edge"``.
        text: the citation as written (a node's text; an edge's line).
        node_id: the id of a node cited by id (``node 3``, ``3,cube``), else None.
        head, relation, tail: an edge's parts when the parser could split it (None when not given).
        head_id, tail_id: an edge cited by node ids (``3,behind,5``).
    """

    kind: str
    text: str
    node_id: int | None = None
    head: str | None = None
    relation: str | None = None
    tail: str | None = None
    head_id: int | None = None
    tail_id: int | None = None


def _clean(text: str) -> str:
    return text.strip().strip("*_`\"'“”").strip().rstrip(".;,:").strip()


def _edge_from_line(line: str) -> Citation | None:
    """An edge written as ``id,rel,id``, ``(h, r, t)`` or with an arrow (``h -> t``, ``h --r--> t``, ``h -> r -> t``)."""
    body = _EDGE_REF.sub("", _clean(line)).strip()
    m = _ID_TRIPLE.match(body)
    if m:
        return Citation("edge", body, relation=_clean(m.group(2)), head_id=int(m.group(1)), tail_id=int(m.group(3)))
    m = _PAREN_TRIPLE.search(body)
    if m:
        h, r, t = (_clean(x) for x in m.groups())
        return Citation("edge", body, head=h, relation=r, tail=t)
    arrows = list(_ARROW.finditer(body))
    if arrows:
        parts, rels, start = [], [], 0
        for a in arrows:
            parts.append(_clean(body[start:a.start()]))
            rels.append(a.group(1) or a.group(2))
            start = a.end()
        parts.append(_clean(body[start:]))
        if len(parts) == 2 and all(parts):
            return Citation("edge", body, head=parts[0], relation=_clean(rels[0]) if rels[0] else None, tail=parts[1])
        if len(parts) == 3 and all(parts) and not any(rels):  # h -> r -> t
            return Citation("edge", body, head=parts[0], relation=parts[1], tail=parts[2])
    return None


def _node_from_item(item: str) -> Citation | None:
    item = _EDGE_REF.sub("", item).strip()
    m = _NODE_PAREN.match(item)
    if m:
        text = _clean(m.group(1))
        return Citation("node", text or _clean(item), node_id=int(m.group(2)), head=text or None)
    m = _NODE_COLON.match(_clean(item))
    if m:
        rest = _clean(m.group(2))
        # "Node 1: the elephant" names the node; "Node 1: The elephant is mentioned in ..." is prose about it
        return Citation("node", rest if rest and len(rest.split()) <= 6 else _clean(item), node_id=int(m.group(1)),
                        head=rest if rest and len(rest.split()) <= 6 else None)
    m = _ID_NODE.match(_clean(item))
    if m and not _ID_TRIPLE.match(_clean(item)):
        return Citation("node", _clean(m.group(2)), node_id=int(m.group(1)), head=_clean(m.group(2)))
    text = _clean(item)
    return Citation("node", text, head=text) if text else None


def parse_citations(response: str) -> list[Citation]:
    """The nodes and edges a free-text response cites.

    Read, line by line: a ``Nodes:`` / ``Edges:`` heading (also "The nodes that support this answer are:") switches
    to that list, whose bullet or numbered items (``* x``, ``- x``, ``1. x``) and same-line remainder (split on
    ``,``/``;`` for nodes) are citations; anywhere, an edge line (``3,behind,5``, ``(h, r, t)``, ``h -> t``,
    ``h --r--> t``, ``h -> r -> t``), a copied node line (``3,cube``) inside a list (the textualized graph's
    ``node_id,node_attr`` / ``src,edge_attr,dst`` headers, echoed, start lists too), and ``node N`` references
    (``cube (node 3)``, ``Node 3: cube``). Node text for a ``node`` citation is kept in ``head`` when it names the node.
    Prose outside these forms is not a citation.
    """
    out: list[Citation] = []
    mode = None
    # lists written on one line: a heading after a sentence, and " * item" bullets, start new lines
    response = _INLINE_HEADING.sub("\n", response)
    response = _INLINE_BULLET.sub("\n", response)
    for raw in response.splitlines():
        line = raw.strip()
        if not line:
            continue
        h = _HEADING.match(line)
        items: list[str] = []
        if line.lower().replace(" ", "") in ("node_id,node_attr", "src,edge_attr,dst"):  # the prompt's CSV, echoed
            mode = "node" if line.lower().startswith("node") else "edge"
            continue
        if h:
            mode = "node" if h.group(1).lower().startswith("node") else "edge"
            rest = _clean(h.group(2))
            if rest:
                if _edge_from_line(rest) or mode == "edge":
                    items = [rest]
                else:
                    items = [x for x in re.split(r"\s*[;,]\s*", rest) if x.strip()]
        else:
            b = _BULLET.match(line)
            if b and mode:
                items = [b.group(1)]
            elif mode and (_ID_TRIPLE.match(_clean(line)) or _ID_NODE.match(_clean(line))):
                items = [line]
            else:
                edge = _edge_from_line(line) if len(line) < 200 else None
                if edge is not None:
                    out.append(edge)
                    continue
                for m in _NODE_REF.finditer(line):  # node references inside prose
                    before = line[:m.start()].rstrip()
                    paren = re.search(r"([\w'-]+(?:\s+[\w'-]+){0,2})\s*\(\s*$", before)
                    words = paren.group(1).split() if paren else []
                    while words and (words[0].lower() in _PROSE_WORDS or words[0].isdigit()):
                        words.pop(0)  # "... see node 7 and bushes (node 1)": the name is "bushes"
                    text = _clean(" ".join(words)) if words else None
                    out.append(Citation("node", text or m.group(0), node_id=int(m.group(1)), head=text or None))
                continue
        for item in items:
            edge = _edge_from_line(item)
            if edge is not None:
                out.append(edge)
            elif mode == "edge":
                out.append(Citation("edge", _clean(item)))  # an edge in words: judged by the names it contains
            else:
                node = _node_from_item(item)
                if node is not None:
                    out.append(node)
    return out


# ---------------------------------------------------------------------- matching
def _singular(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def tokens(text: str) -> tuple[str, ...]:
    """Normalized tokens: lower case, alphanumerics only, articles dropped, a plural ``s`` dropped."""
    words = re.findall(r"[a-z0-9]+", text.lower().replace("_", " "))
    return tuple(_singular(w) for w in words if w not in _ARTICLES)


def _similar(a: str, b: str) -> bool:
    return bool(a) and bool(b) and difflib.SequenceMatcher(None, a, b).ratio() >= FUZZY_RATIO


@dataclass
class _Node:
    id: int
    text: str
    name: str  # scene graphs: the object's name field; otherwise the text
    tokens: frozenset
    name_tokens: frozenset
    attr_tokens: frozenset
    joined: str


class GraphIndex:
    """A question's graph prepared for matching citations (node texts, scene-graph fields, edge sets)."""

    def __init__(self, graph):
        self.nodes: list[_Node] = []
        for nid, text in zip(graph.nodes.node_id.tolist(), graph.nodes.node_attr.astype(str).tolist()):
            fields = dict(re.findall(r"(name|attribute)s?:\s*([^;]*)", text))
            name = fields.get("name", text).strip()
            attrs = frozenset(tokens(fields.get("attribute", ""))) if "name" in fields else frozenset()
            toks = frozenset(tokens(name)) | attrs if "name" in fields else frozenset(tokens(text))
            self.nodes.append(_Node(int(nid), text.strip(), name, toks, frozenset(tokens(name)), attrs,
                                    " ".join(tokens(name if "name" in fields else text))))
        self.by_id = {n.id: n for n in self.nodes}
        self.edges = list(zip(graph.edges.src.astype(int).tolist(), graph.edges.edge_attr.astype(str).tolist(),
                              graph.edges.dst.astype(int).tolist()))
        self.edge_pairs: dict[tuple[int, int], list[str]] = {}
        for s, r, d in self.edges:
            self.edge_pairs.setdefault((s, d), []).append(r)

    def node_match(self, node: _Node, text: str, level: str) -> bool:
        low = text.strip().lower()
        if low in (node.text.lower(), node.name.lower()):
            return True
        if level == "exact":
            return False
        toks = frozenset(tokens(text))
        if not toks:
            return False
        if node.attr_tokens or node.name_tokens != node.tokens:  # scene-graph object: name + its attributes
            if node.name_tokens <= toks and toks <= node.tokens:
                return True
        elif toks == node.tokens:
            return True
        if level == "normalized":
            return False
        joined = " ".join(tokens(text))
        return _similar(joined, node.joined) or toks <= node.tokens or (bool(node.name_tokens) and
                                                                        node.name_tokens <= toks)

    def matching_nodes(self, text: str, level: str) -> set[int]:
        return {n.id for n in self.nodes if self.node_match(n, text, level)}

    @staticmethod
    def relation_match(cited: str | None, relation: str, level: str) -> bool:
        if cited is None:
            return True
        if cited.strip().lower() == relation.strip().lower():
            return True
        if level == "exact":
            return False
        a, b = tokens(cited), tokens(relation)
        if a and (a == b or a == tokens(relation.split(".")[-1])):
            return True
        if level == "normalized":
            return False
        return (bool(a) and set(a) <= set(b)) or _similar(" ".join(a), " ".join(b)) or \
            _similar(" ".join(a), " ".join(tokens(relation.split(".")[-1])))

    def nodes_of(self, c: Citation, level: str) -> set[int]:
        """The ids of the nodes a node citation matches (empty: not in the graph)."""
        name = c.head if c.head is not None else (None if c.node_id is not None else c.text)
        if name:
            return self.matching_nodes(name, level)
        return {c.node_id} if c.node_id in self.by_id else set()

    def edges_of(self, c: Citation, level: str) -> set[int]:
        """The row indices of the edges an edge citation matches (empty: not in the graph)."""
        if c.head_id is not None:
            pairs = {(c.head_id, c.tail_id)} | ({(c.tail_id, c.head_id)} if level == "fuzzy" else set())
            return {j for j, (s, r, d) in enumerate(self.edges)
                    if (s, d) in pairs and self.relation_match(c.relation, r, level)}
        if c.head is None:  # an edge in words: its two endpoint names (and relation, unless fuzzy) are in the text
            toks = set(tokens(c.text))
            return {j for j, (s, r, d) in enumerate(self.edges)
                    if self.by_id[s].name_tokens and self.by_id[d].name_tokens
                    and self.by_id[s].name_tokens <= toks and self.by_id[d].name_tokens <= toks
                    and (level == "fuzzy" or set(tokens(r)) <= toks)}
        heads, tails = self.matching_nodes(c.head, level), self.matching_nodes(c.tail, level)
        if not heads or not tails:
            return set()
        return {j for j, (s, r, d) in enumerate(self.edges)
                if ((s in heads and d in tails) or (level == "fuzzy" and s in tails and d in heads))
                and self.relation_match(c.relation, r, level)}

    def valid(self, c: Citation, level: str) -> bool:
        """Whether the citation names something that exists in the graph, at ``level``."""
        if level not in LEVELS:
            raise ValueError(f"match level {level!r} is not one of {LEVELS}")
        return bool(self.nodes_of(c, level) if c.kind == "node" else self.edges_of(c, level))

    def evidence(self, citations: list[Citation], level: str = "normalized") -> tuple[set[int], set[int]]:
        """The node ids and edge rows the citations point at (for highlighting; invalid citations add nothing)."""
        nodes, edges = set(), set()
        for c in citations:
            if c.kind == "node":
                nodes |= self.nodes_of(c, level)
            else:
                rows = self.edges_of(c, level)
                edges |= rows
                nodes |= {n for j in rows for n in (self.edges[j][0], self.edges[j][2])}
        return nodes, edges


def check_response(response: str, graph, levels=LEVELS, index: GraphIndex | None = None) -> dict:
    """Parse one response and check its citations against ``graph`` (a TextualGraph; ``index``: its
    :class:`GraphIndex` when the caller already built one).

    Returns:
        ``cited_nodes``, ``cited_edges``, per level ``valid_nodes_<level>``, ``valid_edges_<level>``,
        ``fully_valid_<level>`` (cites something, all valid), and ``citations`` (each with its verdicts).
    """
    cites = parse_citations(response)
    index = index if index is not None else GraphIndex(graph)
    row: dict = {"cited_nodes": sum(c.kind == "node" for c in cites),
                 "cited_edges": sum(c.kind == "edge" for c in cites), "citations": []}
    verdicts = {lv: [index.valid(c, lv) for c in cites] for lv in levels}
    for lv in levels:
        row[f"valid_nodes_{lv}"] = sum(v for c, v in zip(cites, verdicts[lv]) if c.kind == "node")
        row[f"valid_edges_{lv}"] = sum(v for c, v in zip(cites, verdicts[lv]) if c.kind == "edge")
        row[f"fully_valid_{lv}"] = bool(cites) and all(verdicts[lv])
    row["citations"] = [{**{k: v for k, v in asdict(c).items() if v is not None},
                         **{lv: verdicts[lv][j] for lv in levels}} for j, c in enumerate(cites)]
    return row


def cite_responses(model, ds, indices: list[int], max_new_tokens: int = 128, batch_size: int = 16) -> list[str]:
    """Each question's response to the citation request (:data:`~gr_core.prompts.CITE_INSTRUCTION`).

    The model sees what it saw in training (its soft tokens and/or the textualized graph of its
    ``graph_source``); only the question gains the request. Greedy, up to ``max_new_tokens``.
    """
    from .prompts import cite_question
    from .train import build_examples, predict

    examples = build_examples(ds, indices, model.cfg, desc=f"{ds.name} cite")
    for ex, i in zip(examples, indices):
        ex.question = cite_question(ds.name, ds.records[i].question)
    answers, _ = predict(model, model.tokenize(examples), batch_size, desc=f"{ds.name} cite",
                         max_new_tokens=max_new_tokens)
    return answers


def audit(ds, indices: list[int], responses: list[str], system: str, levels=LEVELS) -> pd.DataFrame:
    """One row per response: its key, the checker's counts and verdicts (see :func:`check_response`) and whether
    the answer is right by the dataset's metric (``correct``)."""
    import hashlib

    from .evaluate import task_scores

    rows = []
    for i, text in zip(indices, responses):
        rec = ds.records[i]
        row = check_response(text, ds.graph(i), levels)
        score = task_scores(ds.name, text, list(rec.answers))
        digest = hashlib.sha256(text.encode()).hexdigest()[:12]
        # the question index makes the key unique (CLEVR asks several questions about one scene)
        rows.append({"key": f"{ds.name}/{system}/q{i}/{digest}", "dataset": ds.name, "system": system,
                     "index": int(i), "graph_id": str(rec.graph_id), "question": rec.question, "answers": list(rec.answers),
                     "response": text, "correct": float(score["score"]), **row})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------- summaries with confidence intervals
def wilson(k: int, n: int, conf: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion k / n (scipy's ``binomtest``); (nan, nan) when n = 0."""
    if n == 0:
        return float("nan"), float("nan")
    from scipy.stats import binomtest

    ci = binomtest(int(k), int(n)).proportion_ci(confidence_level=conf, method="wilson")
    return float(ci.low), float(ci.high)


def ratio_ci(num: np.ndarray, den: np.ndarray, seed: int = 0, n_boot: int = 2000,
             conf: float = 0.95) -> tuple[float, float, float]:
    """A pooled ratio sum(num) / sum(den) and its percentile bootstrap interval, resampling responses.

    Citations cluster in responses, so responses (not citations) are resampled.
    """
    num, den = np.asarray(num, float), np.asarray(den, float)
    if den.sum() == 0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(num), size=(n_boot, len(num)))
    d = den[idx].sum(1)
    boots = num[idx].sum(1)[d > 0] / d[d > 0]
    lo, hi = np.quantile(boots, [(1 - conf) / 2, (1 + conf) / 2])
    return float(num.sum() / den.sum()), float(lo), float(hi)


def summarize(rows: pd.DataFrame, by=("dataset", "system"), levels=LEVELS, seed: int = 0) -> pd.DataFrame:
    """Table 5 per group and match level: Valid Nodes, Valid Edges, Fully Valid Graphs (%), each with a 95% CI.

    ``rows`` has one row per response with the columns of :func:`check_response` (and ``correct``, optional).
    """
    out = []
    for key, g in rows.groupby(list(by), sort=False):
        key = key if isinstance(key, tuple) else (key,)
        n = len(g)
        citing = int(((g.cited_nodes + g.cited_edges) > 0).sum())
        for lv in levels:
            vn, vn_lo, vn_hi = ratio_ci(g[f"valid_nodes_{lv}"], g.cited_nodes, seed)
            ve, ve_lo, ve_hi = ratio_ci(g[f"valid_edges_{lv}"], g.cited_edges, seed)
            fv = int(g[f"fully_valid_{lv}"].sum())
            fv_lo, fv_hi = wilson(fv, n)
            fc_lo, fc_hi = wilson(fv, citing)
            rec = dict(zip(by, key))
            rec.update({"level": lv, "responses": n, "citing_%": 100 * citing / n if n else float("nan"),
                        "cited_nodes": int(g.cited_nodes.sum()), "cited_edges": int(g.cited_edges.sum()),
                        "valid_nodes_%": 100 * vn, "valid_nodes_ci": (100 * vn_lo, 100 * vn_hi),
                        "valid_edges_%": 100 * ve, "valid_edges_ci": (100 * ve_lo, 100 * ve_hi),
                        "fully_valid_%": 100 * fv / n if n else float("nan"),
                        "fully_valid_ci": (100 * fv_lo, 100 * fv_hi),
                        "fully_valid_citing_%": 100 * fv / citing if citing else float("nan"),
                        "fully_valid_citing_ci": (100 * fc_lo, 100 * fc_hi)})
            if "correct" in g:
                rec["correct_%"] = 100 * float(g.correct.mean())
            out.append(rec)
    return pd.DataFrame(out)


# GR paper Table 1, verbatim: the prompt-tuned baseline and G-Retriever on "What kind of animal is in
# the bushes?"
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
    from .data import TextualGraph

    return TextualGraph(nodes=pd.DataFrame({"node_id": [0, 1, 2], "node_attr": ["elephant", "bushes", "tree"]}),
                        edges=pd.DataFrame({"src": [0, 1], "edge_attr": ["in", "next to"], "dst": [1, 2]}),
                        question="What kind of animal is in the bushes?", answers=["elephant"])


def table5(summary: pd.DataFrame, level: str = "normalized") -> pd.DataFrame:
    """Table 5's layout (metrics as rows, systems as columns), ours at ``level`` with 95% CIs, the paper beside."""
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
def agreement(rows: pd.DataFrame, labels: pd.DataFrame, levels=LEVELS) -> pd.DataFrame:
    """The checker's agreement with hand labels, per match level.

    ``labels`` has one row per hand-checked response: ``key`` (as in ``rows``), the human's ``cited_nodes``,
    ``valid_nodes``, ``cited_edges``, ``valid_edges`` and ``fully_valid``. Reports how many labelled responses
    were found, the fully-valid verdict's accuracy and Cohen's kappa, and the mean absolute difference in cited
    and valid counts (which measures the parser as well as the matcher).
    """
    human = labels[["key", "cited_nodes", "valid_nodes", "cited_edges", "valid_edges", "fully_valid"]]
    merged = human.rename(columns=lambda c: c if c == "key" else f"{c}_human").merge(rows, on="key")
    out = []
    for lv in levels:
        h = merged.fully_valid_human.astype(bool).to_numpy()
        m = merged[f"fully_valid_{lv}"].astype(bool).to_numpy()
        n = len(merged)
        po = float((h == m).mean()) if n else float("nan")
        pe = float(h.mean() * m.mean() + (1 - h.mean()) * (1 - m.mean())) if n else float("nan")
        kappa = (po - pe) / (1 - pe) if n and pe < 1 else float("nan")
        out.append({"level": lv, "labelled": len(labels), "matched": n, "fully_valid_agreement_%": 100 * po,
                    "cohen_kappa": kappa,
                    "cited_abs_diff": float((merged.cited_nodes_human + merged.cited_edges_human
                                             - merged.cited_nodes - merged.cited_edges).abs().mean()) if n else float("nan"),
                    "valid_abs_diff": float((merged.valid_nodes_human + merged.valid_edges_human
                                             - merged[f"valid_nodes_{lv}"] - merged[f"valid_edges_{lv}"]).abs().mean())
                    if n else float("nan")})
    return pd.DataFrame(out)


# ---------------------------------------------------------------------- the study, end to end
def response_cache(cfg, ds, indices: list[int], max_new_tokens: int, batch_size: int, seed: int):
    """Where :func:`run_study` caches one run's responses: keyed by everything that makes them (the run's config
    hash, which fixes its checkpoint; the questions; the budget; the request; batch and seed), so re-checking with a
    new parser or new hand labels does not regenerate them."""
    from .paths import cache_root
    from .prompts import CITE_INSTRUCTION
    from .runs import config_hash

    key = config_hash({"run": config_hash(cfg.to_dict()), "questions": [str(ds.records[i].graph_id) for i in indices],
                       "max_new_tokens": max_new_tokens, "request": CITE_INSTRUCTION, "batch_size": batch_size,
                       "seed": seed})
    return cache_root() / "hallucination" / f"{cfg.name}-{key}.json"


def run_study(datasets: list[str], systems: list[str], runs_dir, settings: dict, questions: dict | int | None = None,
              max_new_tokens: int = 128, batch_size: int = 16, seed: int = 0) -> pd.DataFrame:
    """Every (dataset, system): the trained run (reused, or trained with ``settings``), its responses to the
    citation request on the first ``questions`` test questions (a dict per dataset; None or 0: all), and the
    checker's verdicts.

    Args:
        systems: Table 3 method names; the paper's pair is ``graph_token`` (its "LLM w/ graph prompt tuning")
            and ``g_retriever``.
        settings: :func:`gr_core.train.make_run_config` keywords; equal to notebook 03's, so its runs are reused.
    Returns:
        one row per response (:func:`audit`), datasets and systems in the order given. Responses are cached under
        ``.cache/hallucination/``, keyed by the run's config hash, the questions, the budget and the request.
    """
    from pathlib import Path

    from .graphqa import DatasetConfig, load_dataset
    from .runs import read_json, seed_everything, write_json
    from .train import make_run_config, trained_model

    frames = []
    for name in datasets:
        ds = load_dataset(DatasetConfig(name))
        n = questions.get(name) if isinstance(questions, dict) else questions
        indices = list(ds.split["test"])[:n or None]
        for system in systems:
            cfg = make_run_config(name, system, seed, **settings)
            cached = response_cache(cfg, ds, indices, max_new_tokens, batch_size, seed)
            if cached.is_file():
                responses = read_json(cached)["responses"]
            else:
                model = trained_model(cfg, Path(runs_dir) / cfg.name, ds)
                seed_everything(seed)
                responses = cite_responses(model, ds, indices, max_new_tokens, batch_size)
                write_json(cached, {"run": cfg.name, "responses": responses})
                del model
            frames.append(audit(ds, indices, responses, system))
    return pd.concat(frames, ignore_index=True)


LABEL_FIELDS = ("key", "cited_nodes", "valid_nodes", "cited_edges", "valid_edges", "fully_valid")


def label_template(rows: pd.DataFrame, k: int = 30, seed: int = 0) -> list[dict]:
    """A sample of responses to check by hand, half of them citing something (when there are enough).

    Each record carries the response, the question's graph id and empty fields for the human's counts.
    """
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
    import json
    from pathlib import Path

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


def plot_table5(summary: pd.DataFrame, level: str = "normalized"):
    """Bars of Valid Nodes, Valid Edges and Fully Valid Graphs per dataset and system at ``level`` (95% CIs),
    the paper's SceneGraphs numbers as hatched bars."""
    import matplotlib.pyplot as plt

    metrics = (("valid_nodes_%", "Valid Nodes"), ("valid_edges_%", "Valid Edges"), ("fully_valid_%", "Fully Valid"))
    sub = summary[summary.level == level].reset_index(drop=True)
    groups = [(f"{r.dataset}\n{r.system}", r) for r in sub.itertuples(index=False)]
    groups += [(f"paper (SceneGraphs)\n{s}", None) for s in PAPER_TABLE5]
    fig, ax = plt.subplots(figsize=(max(6, 1.3 * len(groups)), 3.6))
    width = 0.8 / len(metrics)
    for j, (metric, label) in enumerate(metrics):
        xs, ys, lo, hi, hatch = [], [], [], [], []
        for x, (name, r) in enumerate(groups):
            if r is None:
                y, ci = PAPER_TABLE5[name.split("\n")[1]][metric], (np.nan, np.nan)
            else:
                y, ci = sub.loc[x, metric], sub.loc[x, metric.replace("_%", "_ci")]
            y = 0.0 if y != y else y
            xs.append(x + (j - 1) * width)
            ys.append(y)
            lo.append(0 if ci[0] != ci[0] else max(0.0, y - ci[0]))
            hi.append(0 if ci[1] != ci[1] else max(0.0, ci[1] - y))
            hatch.append(r is None)
        bars = ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=label, color=f"C{j}")
        for b, h in zip(bars, hatch):
            if h:
                b.set_hatch("//")
                b.set_alpha(0.5)
    ax.set_xticks(range(len(groups)), [g for g, _ in groups], fontsize=8)
    ax.set_ylabel("%")
    ax.set_ylim(0, 100)
    ax.set_title(f"Hallucination (GR Table 5), match level: {level}")
    ax.legend(fontsize=8, ncols=3, loc="upper left")
    fig.tight_layout()
    return fig


def first_citing_evidence(rows: pd.DataFrame, level: str = "normalized"):
    """The first response that cites something, with its question's graph and the node ids / edge rows it points at
    (for highlighting), as ``(row, graph, nodes, edges)``; None when no response cites."""
    from .graphqa import DatasetConfig, load_dataset

    citing = rows[(rows.cited_nodes + rows.cited_edges) > 0]
    if citing.empty:
        return None
    r = citing.iloc[0]
    graph = load_dataset(DatasetConfig(r.dataset)).graph(int(r["index"]))
    nodes, edges = GraphIndex(graph).evidence(parse_citations(r.response), level)
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
