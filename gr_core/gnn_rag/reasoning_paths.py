"""Answer candidates and reasoning paths (GNN-RAG paper §4.2, §5.4; docs/method.md §3.2): shortest paths from
question entities to candidates that keep edge direction (a reversed hop is written ``<-``) and every relation between a
pair; and GNN-RAG's own path code (``llm/src/utils/graph_utils.py``) for comparison."""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

import networkx as nx

try:  # all_shortest_paths' own path builder (networkx 2.x-3.x): the paths from a search made once per seed
    from networkx.algorithms.shortest_paths.generic import _build_paths_from_predecessors
except ImportError:  # a networkx without it: all_shortest_paths, one search per pair (the same paths, slower)
    _build_paths_from_predecessors = None
import numpy as np
import pandas as pd

from ..data import induced_subgraph, question_nodes
from ..runs import progress


def select_candidates(probs: np.ndarray, seeds: set[int], eps: float = 0.95) -> list[tuple[int, float]]:
    """GNN-RAG's candidate set: nodes by probability (question entities excluded) until the cumulative
    probability first exceeds ``eps``; nodes below ``(1 - eps) / N`` are never candidates.

    Args:
        probs: ``(N,)`` the node distribution of one graph.
        seeds: node positions of the question entities.
    Returns:
        ``[(node position, probability), ...]`` most probable first; empty when every node is a seed.
    """
    floor = (1 - eps) / (len(probs) or 1)
    order = [int(i) for i in np.argsort(-probs, kind="stable") if int(i) not in seeds and probs[i] >= floor]
    out, total = [], 0.0
    for i in order:
        out.append((i, float(probs[i])))
        total += float(probs[i])
        if total > eps:
            break
    return out


def named_beyond(probs: np.ndarray, unnamed: list[tuple[int, float]], edge_index: np.ndarray, skip: set[int]
                 ) -> list[tuple[int, float]]:
    """Where every candidate of :func:`select_candidates` is a node that names nothing (a Freebase mediator: a
    marriage, an address, a team membership), the nodes they link instead: each neighbour not in ``skip`` (the seeds
    and the other nameless nodes) scored by the summed probability of the candidates linking it, ties broken by its
    own probability. The mediator's probability says the reasoner reached the fact; its named ends are the answer.

    Args:
        probs: ``(N,)`` the node distribution.
        unnamed: ``[(position, probability)]`` the candidates.
        edge_index: ``(2, E)`` edges over positions, either direction followed.
        skip: positions never returned.
    Returns:
        ``[(position, score), ...]`` best first; empty when the candidates link no other node.
    """
    score: dict[int, float] = {}
    for m, p in unnamed:
        linked = np.concatenate([edge_index[1][edge_index[0] == m], edge_index[0][edge_index[1] == m]])
        for n in dict.fromkeys(int(x) for x in linked):
            if n not in skip:
                score[n] = score.get(n, 0.0) + p
    return sorted(score.items(), key=lambda t: (-t[1], -float(probs[t[0]]), t[0]))


def seed_positions(graph) -> tuple[list[int], set[int]]:
    """The question entities of ``graph``: their node ids and their row positions."""
    seeds = question_nodes(graph)
    row = {int(n): k for k, n in enumerate(graph.nodes.node_id.tolist())}
    return seeds, {row[s] for s in seeds}

def gold_ids(graph, answers: list[str], seeds: list[int]) -> list[int]:
    """Node ids whose text is exactly a gold answer (question entities excluded; exact for the reason given in
    :func:`gr_core.data.question_nodes`)."""
    gold, seeds = set(answers), set(seeds)
    return [int(n) for n, t in zip(graph.nodes.node_id, graph.nodes.node_attr)
            if str(t) in gold and int(n) not in seeds]

def missing_entities(graph, q_entities: list[str]) -> int:
    """Question entities with no node of that name in ``graph`` (counted, never an error)."""
    names = set(graph.nodes.node_attr.astype(str))
    return sum(e not in names for e in q_entities)


@dataclass
class PathReport:
    """What :func:`reasoning_paths` did: paths, and the counted reasons for missing ones."""

    lines: list[str]
    missing_seed: int = 0  # question entity not in the graph
    no_path: int = 0  # candidate unreachable from every question entity
    nodes: list[int] = field(default_factory=list)  # node ids on the kept paths, first-seen order (for highlighting)


def _hop_texts(u: int, v: int, rel_index: dict) -> list[str]:
    """Every relation between positions ``u`` and ``v`` with its direction: ``-> r ->`` or ``<- r <-``."""
    return [f" -> {r} -> " for r in rel_index.get((u, v), ())] + [f" <- {r} <- " for r in rel_index.get((v, u), ())]


def reasoning_paths(graph, seeds: list[int], targets: list[int], max_lines_per_pair: int = 8) -> PathReport:
    """Shortest paths from question entities to targets, verbalized with direction and every relation.

    Topology is the undirected simple graph (as GNN-RAG: a path may walk a fact backwards); each hop is then
    written once per relation between the pair, ``u -> r -> v`` for a fact u->v and ``u <- r <- v`` for a fact
    v->u, so nothing is overwritten and nothing is reversed. Lines are deduplicated, kept in target order (most
    probable candidate first).

    Args:
        graph: a :class:`~gr_core.data.TextualGraph`.
        seeds, targets: node *ids* of ``graph``.
    """
    ids = graph.nodes.node_id.tolist()
    names = dict(zip(ids, graph.nodes.node_attr.tolist()))
    rel_index: dict[tuple[int, int], dict[str, None]] = {}  # (head, tail) -> its distinct relations, in order
    for s, r, d in zip(graph.edges.src.tolist(), graph.edges.edge_attr.tolist(), graph.edges.dst.tolist()):
        rel_index.setdefault((s, d), {})[r] = None
    g = nx.Graph()
    g.add_nodes_from(ids)
    g.add_edges_from(rel_index)
    present = [s for s in seeds if s in names]
    kept: dict[str, list[int]] = {}  # line -> the path's nodes
    no_path = 0
    preds: dict[int, dict] = {}  # one breadth-first search per seed, not one per (seed, target) pair
    for t in targets:
        found = False
        for s in present:
            if s not in preds:
                preds[s] = nx.predecessor(g, s)
            pred = preds[s]
            if s == t or t not in pred:
                continue
            found = True
            # nx.all_shortest_paths(g, s, t) without its search: the same paths in the same order, from ``pred``
            paths = (_build_paths_from_predecessors({s}, t, pred) if _build_paths_from_predecessors
                     else nx.all_shortest_paths(g, s, t))
            for nodes in paths:
                hops = [_hop_texts(u, v, rel_index) for u, v in zip(nodes, nodes[1:])]
                for combo in itertools.islice(itertools.product(*hops), max_lines_per_pair):
                    line = names[nodes[0]] + "".join(h + names[v] for h, v in zip(combo, nodes[1:]))
                    kept.setdefault(line, nodes)
        no_path += not found
    return PathReport(lines=list(kept), missing_seed=len(seeds) - len(present), no_path=no_path,
                      nodes=list(dict.fromkeys(int(v) for nodes in kept.values() for v in nodes)))


def reference_paths(graph, seeds: list[int], targets: list[int]) -> list[str]:
    """GNN-RAG's verbalizer as released, to measure what :func:`reasoning_paths` fixes: an undirected graph keyed by
    entity *name*, one relation per pair (the last triple's), every hop printed ``->`` whatever its direction."""
    names = dict(zip(graph.nodes.node_id.tolist(), graph.nodes.node_attr.tolist()))
    g = nx.Graph()
    for s, r, d in zip(graph.edges.src.tolist(), graph.edges.edge_attr.tolist(), graph.edges.dst.tolist()):
        g.add_edge(names[s], names[d], relation=str(r).strip())
    lines: dict[str, None] = {}  # deduplicated, in order
    for t in targets:
        for s in seeds:
            a, b = names.get(s), names.get(t)
            if a is None or b is None or a == b or a not in g or b not in g or not nx.has_path(g, a, b):
                continue
            for nodes in nx.all_shortest_paths(g, a, b):
                lines[nodes[0] + "".join(f" -> {g[u][v]['relation']} -> {v}" for u, v in zip(nodes, nodes[1:]))] = None
    return list(lines)


def _hops(line: str) -> list[tuple[str, str, str, str]]:
    """``(left, arrow, relation, right)`` per hop of a verbalized path."""
    parts = re.split(r" (->|<-) ", line)  # e0, arrow, r1, arrow, e1, arrow, r2, ...
    return [(parts[k], parts[k + 1], parts[k + 2], parts[k + 4]) for k in range(0, len(parts) - 4, 4)]


def compare_path_styles(graph, ours: list[str], reference: list[str]) -> dict:
    """What GNN-RAG's verbalizer loses on one question, against the graph's facts: counts of ``ours_lines``,
    ``reference_lines``, ``reference_reversed_hops`` (``h -> r -> t`` printed for a fact ``t -> r -> h``) and
    ``relations_only_in_ours`` (distinct (pair, relation) hops the reference drops)."""
    names = dict(zip(graph.nodes.node_id.tolist(), graph.nodes.node_attr.tolist()))
    facts = {(names[s], str(r).strip(), names[d]) for s, r, d in
             zip(graph.edges.src.tolist(), graph.edges.edge_attr.tolist(), graph.edges.dst.tolist())}
    reversed_hops = sum((a, r, b) not in facts and (b, r, a) in facts
                        for line in reference for a, _, r, b in _hops(line))

    def pair_rel(lines):
        return {(frozenset((a, b)), r) for line in lines for a, _, r, b in _hops(line)}
    return {"ours_lines": len(ours), "reference_lines": len(reference), "reference_reversed_hops": reversed_hops,
            "relations_only_in_ours": len(pair_rel(ours) - pair_rel(reference))}


def path_study(ds, indices: list[int], probs: list[np.ndarray], eps: float = 0.95) -> "pd.DataFrame":
    """Per question: candidates, failure counts (``no_path``: candidates without a path), ``answer_in_paths`` (a gold
    answer ends one of our paths), and :func:`compare_path_styles`' counts."""
    rows = []
    for i, p in progress(list(zip(indices, probs)), desc="paths"):
        g = ds.graph(i)
        ids = g.nodes.node_id.to_numpy()
        seeds, seed_pos = seed_positions(g)
        cands = [int(ids[c]) for c, _ in select_candidates(p, seed_pos, eps)]
        rep = reasoning_paths(g, seeds, cands)
        ref = reference_paths(g, seeds, cands)
        gold = set(ds.records[i].answers)
        ends = {line.rsplit(" -> ", 1)[-1].rsplit(" <- ", 1)[-1] for line in rep.lines}
        rows.append({"index": i, "candidates": len(cands), "empty_candidates": not cands,
                     "missing_seed": missing_entities(g, ds.records[i].q_entities), "no_path": rep.no_path,
                     "answer_in_paths": bool(ends & gold), **compare_path_styles(g, rep.lines, ref)})
    return pd.DataFrame(rows)


def evidence_view(ds, i: int, probs: np.ndarray, eps: float = 0.95, max_candidates: int = 5):
    """One question's candidates and paths, and a small graph to draw them on: ``(candidates DataFrame, our lines,
    GNN-RAG's lines, view graph, highlighted node ids, highlighted edge rows of the view)``; the view is induced by
    the question entities, the top candidates and the nodes on our paths to them."""
    g = ds.graph(i)
    ids = g.nodes.node_id.tolist()
    names = dict(zip(ids, g.nodes.node_attr.tolist()))
    seeds, seed_pos = seed_positions(g)
    cands = [(ids[c], p) for c, p in select_candidates(probs, seed_pos, eps)]  # (node id, probability)
    gold = set(ds.records[i].answers)
    table = pd.DataFrame([{"node": names[n], "probability": round(p, 4), "gold answer": names[n] in gold}
                          for n, p in cands])
    top = [n for n, _ in cands[:max_candidates]]
    ours = reasoning_paths(g, seeds, top).lines
    ref = reference_paths(g, seeds, top)
    on_path = {n for line in ours for n in _path_names(line)}
    keep = set(seeds) | set(top) | {n for n, t in names.items() if t in on_path}
    view = induced_subgraph(g, keep)
    path_pairs = {(a, b) for line in ours for a, _, _, b in _hops(line)}
    vn = dict(zip(view.nodes.node_id.tolist(), view.nodes.node_attr.tolist()))
    edge_rows = [k for k, (s, d) in enumerate(zip(view.edges.src.tolist(), view.edges.dst.tolist()))
                 if (vn[s], vn[d]) in path_pairs or (vn[d], vn[s]) in path_pairs]
    return table, ours, ref, view, set(seeds) | set(top), edge_rows


def _path_names(line: str) -> list[str]:
    hops = _hops(line)
    return [hops[0][0]] + [h[3] for h in hops] if hops else [line]


def summarize_path_study(studies: dict) -> "pd.DataFrame":
    """One row per dataset of :func:`path_study` frames."""
    rows = []
    for key, df in studies.items():
        rows.append({"dataset": key, "questions": len(df), "mean candidates": round(df.candidates.mean(), 2),
                     "empty candidate sets": int(df.empty_candidates.sum()),
                     "missing question entities": int(df.missing_seed.sum()),
                     "candidates without a path": int(df.no_path.sum()),
                     "answer at a path end (%)": round(100 * df.answer_in_paths.mean(), 1),
                     "our lines": round(df.ours_lines.mean(), 1), "GNN-RAG lines": round(df.reference_lines.mean(), 1),
                     "questions with reversed hops in GNN-RAG (%)":
                         round(100 * (df.reference_reversed_hops > 0).mean(), 1),
                     "questions with relations GNN-RAG drops (%)":
                         round(100 * (df.relations_only_in_ours > 0).mean(), 1)})
    return pd.DataFrame(rows)
