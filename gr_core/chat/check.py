"""Step 5, **check**: the answer's nodes and citations looked up in the searched graph (GR §1: answers that point at
the part of the graph behind them; the citation checker of notebook 05, :func:`gr_core.citations.check_response`)."""
from __future__ import annotations

import re

from ..citations import CitationMatcher, check_response, parse_citations
from ..data import EDGE_COLUMNS, NODE_COLUMNS, TextualGraph
from .index import ChatIndex
from .link import find_names


def named_nodes(index: ChatIndex, answer: str, asked: list[int], graph: TextualGraph, matcher=None) -> list[int]:
    """Node ids of ``graph`` that a free-text answer names: the parts of its first line (split on ``|``, ``,``, ``;``,
    " and ") matched at the checker's ``normalized`` level, and node names written in a sentence; not the question's
    own entities (``asked``, node rows)."""
    head = answer.strip().splitlines()[0] if answer.strip() else ""
    parts = [p.strip(" .") for p in re.split(r"\||,|;|\band\b", head) if p.strip(" .")]
    if parts and matcher is None:
        matcher = CitationMatcher(graph)
    found = [n for p in parts[:10] for n in sorted(matcher.matching_nodes(p, "normalized"))]
    found += [int(index.node_ids[r]) for r in find_names(index, answer)]
    own = {int(index.node_ids[r]) for r in asked}
    inside = set(graph.nodes.node_id.tolist())
    return [n for n in dict.fromkeys(found) if n in inside and n not in own]


def check_turn(index: ChatIndex, turn, asked: list[int], answer_nodes: list[int] | None = None) -> None:
    """Fill ``turn``'s check: its citations' verdicts against the searched graph, the evidence nodes and edges they
    point at, and the answer's nodes (``answer_nodes``, else :func:`named_nodes`)."""
    scope = TextualGraph(turn.scope.nodes[NODE_COLUMNS], turn.scope.edges[EDGE_COLUMNS])
    matcher = CitationMatcher(scope)
    check = check_response(turn.answer, scope, index=matcher)
    turn.citations = check["citations"]
    turn.fully_valid = check["fully_valid_normalized"] if turn.citations else None
    evidence = TextualGraph(turn.evidence.nodes[NODE_COLUMNS], turn.evidence.edges[EDGE_COLUMNS])
    nodes, edge_rows = CitationMatcher(evidence).evidence(parse_citations(turn.answer))
    turn.cited_nodes, turn.cited_edges = sorted(nodes), sorted(edge_rows)
    turn.answer_nodes = (list(dict.fromkeys(answer_nodes)) if answer_nodes is not None
                         else named_nodes(index, turn.answer, asked, scope, matcher))
