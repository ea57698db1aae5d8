"""Citations in free text, parsed and checked against a graph (the checker of GR paper §6.4, Table 5).

The paper hand-checks 100 responses per system; here the cited nodes and edges are parsed from free text and
checked against the question's whole graph at three match levels, each accepting everything the one before does:
``exact`` (the text, or a scene object's name), ``normalized`` (case, punctuation, articles and a plural aside; a
scene object named with some of its attributes; a Freebase relation by its last segment) and ``fuzzy`` (difflib >=
0.8, one token set inside the other, an edge in either direction). A node cited by id ("node 3") is valid when the
id exists, an edge cited by ids ("3,behind,5") when that edge does. The forms read and the metrics: docs/method.md 1.9.
"""
from __future__ import annotations

import difflib
import re
from dataclasses import asdict, dataclass

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
_HEADING = re.compile(r"^[\s*#_]*(?:the\s+)?(?:supporting\s+|relevant\s+|cited\s+)?(nodes?|edges?)"
                      r"\b(?!\s*#?\d)[^:]*:\s*(.*)$", re.I)


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


def _edge_from_line(line: str, pipes: bool = False) -> Citation | None:
    """An edge written as ``id,rel,id``, ``(h, r, t)`` or with an arrow (``h -> t``, ``h --r--> t``, ``h -> r -> t``);
    with ``pipes`` also ``h | r | t`` (the chat's evidence lines: not on an answer's first line, where the chat lists
    three answers so)."""
    body = _EDGE_REF.sub("", _clean(line)).strip()
    m = _ID_TRIPLE.match(body)
    if m:
        return Citation("edge", body, relation=_clean(m.group(2)), head_id=int(m.group(1)), tail_id=int(m.group(3)))
    m = _PAREN_TRIPLE.search(body)
    if m:
        h, r, t = (_clean(x) for x in m.groups())
        return Citation("edge", body, head=h, relation=r, tail=t)
    fields = [_clean(x) for x in body.split("|")] if pipes else []
    if len(fields) == 3 and all(fields):  # the chat's evidence lines on a KG (textualize)
        return Citation("edge", body, head=fields[0], relation=fields[1], tail=fields[2])
    pieces = _ARROW.split(body)  # part, the relation written inside the arrow (its two forms), part, ...
    parts, rels = [_clean(p) for p in pieces[::3]], [a or b for a, b in zip(pieces[1::3], pieces[2::3])]
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
    text = _clean(item)
    m = _NODE_COLON.match(text)
    if m:
        rest = _clean(m.group(2))
        # "Node 1: the elephant" names the node; "Node 1: The elephant is mentioned in ..." is prose about it
        name = rest if rest and len(rest.split()) <= 6 else None
        return Citation("node", name or text, node_id=int(m.group(1)), head=name)
    m = _ID_NODE.match(text)
    if m and not _ID_TRIPLE.match(text):
        return Citation("node", _clean(m.group(2)), node_id=int(m.group(1)), head=_clean(m.group(2)))
    return Citation("node", text, head=text) if text else None


def parse_citations(response: str) -> list[Citation]:
    """The nodes and edges a free-text response cites.

    Read, line by line: a ``Nodes:`` / ``Edges:`` heading (or an echoed ``node_id,node_attr`` / ``src,edge_attr,dst``
    header) starts a list whose items (bullets, numbers, a copied ``3,cube`` line, the heading's remainder) are
    citations; anywhere, an edge line (``3,behind,5``, ``(h, r, t)``, ``h | r | t`` below the first line, ``h -> t``,
    ``h --r--> t``, ``h -> r -> t``) and ``node N`` references (``cube (node 3)``, ``Node 3: cube``). ``head`` keeps a
    node citation's name when it has one. Prose outside these forms is not a citation.
    """
    out: list[Citation] = []
    mode = None
    # lists written on one line: a heading after a sentence, and " * item" bullets, start new lines
    response = _INLINE_HEADING.sub("\n", response)
    response = _INLINE_BULLET.sub("\n", response)
    first = True  # the answer's own line: "A | B | C" lists three answers there, an evidence line below it
    for raw in response.splitlines():
        line = raw.strip()
        if not line:
            continue
        pipes, first = not first, False
        h = _HEADING.match(line)
        items: list[str] = []
        if line.lower().replace(" ", "") in ("node_id,node_attr", "src,edge_attr,dst"):  # the prompt's CSV, echoed
            mode = "node" if line.lower().startswith("node") else "edge"
            continue
        if h:
            mode = "node" if h.group(1).lower().startswith("node") else "edge"
            rest = _clean(h.group(2))
            if rest:
                if _edge_from_line(rest, pipes=mode == "edge") or mode == "edge":
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
                edge = _edge_from_line(line, pipes) if len(line) < 200 else None
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
            edge = _edge_from_line(item, pipes=mode == "edge")
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


class CitationMatcher:
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
        a, b, last = tokens(cited), tokens(relation), tokens(relation.split(".")[-1])  # last: a Freebase segment
        if a and (a == b or a == last):
            return True
        if level == "normalized":
            return False
        return ((bool(a) and set(a) <= set(b)) or _similar(" ".join(a), " ".join(b))
                or _similar(" ".join(a), " ".join(last)))

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


def check_response(response: str, graph, levels=LEVELS, index: CitationMatcher | None = None) -> dict:
    """Parse one response and check its citations against ``graph`` (a TextualGraph; ``index``: its
    :class:`CitationMatcher` when the caller already built one).

    Returns:
        ``cited_nodes``, ``cited_edges``, per level ``valid_nodes_<level>``, ``valid_edges_<level>``,
        ``fully_valid_<level>`` (cites something, all valid), and ``citations`` (each with its verdicts).
    """
    cites = parse_citations(response)
    index = index if index is not None else CitationMatcher(graph)
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
