"""GNN-RAG's evidence (GNN-RAG paper §4.1 reasoning paths, §4.4 retrieval augmentation; docs/method.md §3.2-3.3):
every retriever turns one question into :class:`Evidence`, verbalized lines ``a -> r -> b`` / ``a <- r <- b``:

======================  =================================================================================
``none``                no evidence; the *untuned* LLM with RoG's LLM-only prompt (GNN-RAG's "no retrieval")
``gnn``                 GNN-RAG: shortest paths from the question entities to the GNN's 0.95 candidates
``rog``                 RoG-style: the LLM (LoRA) generates 3 relation paths by beam search; each is grounded
                        by following its relations from the question entities
``gnn+rog``             GNN-RAG+RA: RoG's lines first, then the GNN's not already present (GNN-RAG §4.4)
``pcst``                G-Retriever's PCST subgraph (text-similarity prizes), one fact per line
``gnn+pcst``            GNN paths first, then the PCST facts not already present (a second augmentation)
``gnn_pcst``            beyond the papers: PCST with the GNN's node probabilities added to the prizes
======================  =================================================================================
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from ..g_retriever.retrieval import DATASET_RETRIEVAL
from ..graphqa import retrieve
from .reasoning_paths import _hops, _path_names, missing_entities, reasoning_paths, seed_positions, select_candidates

RETRIEVERS = ("none", "gnn", "rog", "gnn+rog", "pcst", "gnn+pcst", "gnn_pcst")
# LLM calls per question, counted as GNN-RAG Table 12: the answer call plus one per RoG beam
LLM_CALLS = {"none": 1, "gnn": 1, "rog": 4, "gnn+rog": 4, "pcst": 1, "gnn+pcst": 1, "gnn_pcst": 1}
SEP = " <SEP> "  # RoG writes <PATH> r1 <SEP> r2 </PATH> with added special tokens; plain text here


@dataclass(frozen=True)
class GNNRAGConfig:
    """Retrieval and prompt settings of the LLM half."""

    eps: float = 0.95  # cumulative probability of the GNN candidate set (GNN-RAG App. C)
    max_lines_per_pair: int = 8  # path lines per (question entity, candidate): relation combinations capped
    # evidence lines kept whole, in order, up to this many tokens (GNN-RAG: 4096 - 100 with LLaMA-2, over budget
    # shuffled unseeded; we keep the retriever's order and bound it for CPU)
    evidence_tokens: int = 384
    rog_beams: int = 3  # relation paths per question (RoG / GNN-RAG: beam search, k = 3)
    rog_max_lines: int = 20  # grounded lines per relation path and question entity (bounds hub explosions)
    rog_paths_per_question: int = 3  # distinct gold relation paths per question the RoG generator trains on
    # GNN prizes = prize_scale * top_k_nodes * p / p_max on the candidates, the same on the question entities
    # (beyond the papers; 1.0 puts them on the scale of the text top-k prizes)
    prize_scale: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.eps <= 1 or self.evidence_tokens < 1 or self.rog_beams < 1 or self.max_lines_per_pair < 1 \
                or self.prize_scale <= 0:
            raise ValueError("GNNRAGConfig: 0 < eps <= 1, evidence_tokens >= 1, rog_beams >= 1, "
                             "max_lines_per_pair >= 1, prize_scale > 0 required")


@dataclass
class Evidence:
    """One retriever's output for one question, with the counted reasons for missing evidence."""

    lines: list[str] = field(default_factory=list)
    missing_seed: int = 0  # question entities absent from the graph
    no_path: int = 0  # GNN candidates unreachable from every question entity
    empty_candidates: bool = False  # the GNN kept no candidate (every node a question entity, or an empty graph)
    ungrounded: bool = False  # RoG: no generated relation path could be followed from a question entity

    def names(self) -> list[str]:
        """The entity names the lines mention, each once, in order of first mention."""
        return list(dict.fromkeys(n for line in self.lines for n in _path_names(line)))

    def union(self, other: "Evidence") -> "Evidence":
        """``self``'s lines first, then ``other``'s not already present (GNN-RAG+RA's order)."""
        seen = set(self.lines)
        return Evidence(self.lines + [x for x in other.lines if x not in seen],
                        max(self.missing_seed, other.missing_seed), self.no_path + other.no_path,
                        self.empty_candidates or other.empty_candidates, self.ungrounded or other.ungrounded)


def answer_hops(graph, seeds: list[int], targets: list[int]) -> int | None:
    """Shortest undirected distance from any question entity to any gold answer (None: unreachable)."""
    if not seeds or not targets:
        return None
    g = nx.Graph()
    g.add_nodes_from(graph.nodes.node_id.tolist())
    g.add_edges_from(zip(graph.edges.src.tolist(), graph.edges.dst.tolist()))
    dist = nx.multi_source_dijkstra_path_length(g, set(seeds))
    found = [dist[t] for t in targets if t in dist]
    return int(min(found)) if found else None


def gnn_evidence(graph, probs: np.ndarray, cfg: GNNRAGConfig = GNNRAGConfig()) -> Evidence:
    """GNN-RAG: paths from the question entities to the GNN's candidates (``probs``: ``(N,)`` in node order)."""
    ids = graph.nodes.node_id.to_numpy()
    if len(probs) != len(ids):  # another graph's distribution would name this graph's first nodes
        raise ValueError(f"gnn_evidence: probs has {len(probs)} entries, the graph {len(ids)} nodes")
    seeds, seed_pos = seed_positions(graph)
    cands = [int(ids[c]) for c, _ in select_candidates(probs, seed_pos, cfg.eps)]
    rep = reasoning_paths(graph, seeds, cands, cfg.max_lines_per_pair)
    return Evidence(rep.lines, no_path=rep.no_path, empty_candidates=not cands)


def fact_lines(graph, edge_rows=None) -> list[str]:
    """One line ``head -> relation -> tail`` per edge row (all edges by default), deduplicated, in row order."""
    names = dict(zip(graph.nodes.node_id.tolist(), graph.nodes.node_attr.tolist()))
    e = graph.edges if edge_rows is None else graph.edges.iloc[np.asarray(edge_rows, dtype=np.int64)]
    lines = [f"{names[s]} -> {str(r).strip()} -> {names[d]}" for s, r, d in
             zip(e.src.tolist(), e.edge_attr.tolist(), e.dst.tolist())]
    return list(dict.fromkeys(lines))


def pcst_evidence(ds, i: int, graph, extra_node_prizes: np.ndarray | None = None) -> Evidence:
    """G-Retriever's PCST subgraph for question ``i`` (dataset config), as fact lines."""
    return Evidence(fact_lines(graph, retrieve(ds, i, graph=graph, extra_node_prizes=extra_node_prizes).edge_rows))


def gnn_prizes(graph, probs: np.ndarray, top_k: int, cfg: GNNRAGConfig = GNNRAGConfig()) -> np.ndarray:
    """Node prizes ``(N,)`` from the GNN: candidates get ``scale * top_k * p / p_max``, question entities the max.

    A confident GNN puts one large prize on its answer, which PCST must connect to the question entities: the path
    the GNN found, plus whatever text-prized facts are cheap to attach.
    """
    _, seed_pos = seed_positions(graph)
    cands = select_candidates(probs, seed_pos, cfg.eps)
    top = cfg.prize_scale * max(top_k, 1)
    prizes = np.zeros(len(probs), np.float32)
    for c, p in cands:
        prizes[c] = top * p / cands[0][1]  # the most probable first
    prizes[list(seed_pos)] = top
    return prizes


def gnn_prize_evidence(ds, i: int, graph, probs: np.ndarray, cfg: GNNRAGConfig = GNNRAGConfig()) -> Evidence:
    """PCST whose node prizes are the text top-k prizes plus :func:`gnn_prizes` (a trainable retrieval)."""
    extra = gnn_prizes(graph, probs, DATASET_RETRIEVAL[ds.name].top_k_nodes, cfg)
    _, seed_pos = seed_positions(graph)
    ev = pcst_evidence(ds, i, graph, extra)
    ev.empty_candidates = not np.delete(extra, list(seed_pos)).any()  # no candidate got a prize
    return ev


def relation_sequences(lines: list[str]) -> list[tuple[str, ...]]:
    """The relation sequence of each verbalized path (direction dropped, as RoG's relation paths), deduplicated."""
    return list(dict.fromkeys(tuple(r for _, _, r, _ in _hops(line)) for line in lines if _hops(line)))


def format_relation_path(relations: tuple[str, ...]) -> str:
    return SEP.join(relations)


def parse_relation_path(text: str) -> tuple[str, ...]:
    """A generated relation path back to its relations (blank pieces dropped)."""
    return tuple(r.strip() for r in text.replace("<PATH>", "").replace("</PATH>", "").split("<SEP>") if r.strip())


def ground_relation_paths(graph, seeds: list[int], relation_paths: list[tuple[str, ...]], max_lines: int = 20
                          ) -> list[str]:
    """Follow each relation path from each question entity (RoG's BFS along the exact relation sequence), a relation
    either way (RoG's graph is undirected) with each fact's direction written, without cycles, at most ``max_lines``
    lines per (relation path, question entity)."""
    names = dict(zip(graph.nodes.node_id.tolist(), graph.nodes.node_attr.tolist()))
    adj: dict[tuple[int, str], list[tuple[int, str]]] = {}
    for s, r, d in zip(graph.edges.src.tolist(), graph.edges.edge_attr.tolist(), graph.edges.dst.tolist()):
        r = str(r).strip()
        adj.setdefault((s, r), []).append((d, f" -> {r} -> "))
        adj.setdefault((d, r), []).append((s, f" <- {r} <- "))
    lines: list[str] = []
    for rels in relation_paths:
        if not rels:
            continue
        for s in seeds:
            if s not in names:
                continue
            frontier = [(s, names[s], {s})]
            for r in rels:  # bounded breadth; the cut below keeps max_lines
                frontier = [(v, text + arrow + names[v], seen | {v}) for node, text, seen in frontier
                            for v, arrow in adj.get((node, r), []) if v not in seen][:max(1, 50 * max_lines)]
                if not frontier:
                    break
            lines += [text for _, text, _ in frontier[:max_lines]]
    return list(dict.fromkeys(lines))


def collect_evidence(ds, i: int, probs: np.ndarray | None, relation_paths: list[tuple[str, ...]] | None,
                     retrievers: tuple[str, ...] = RETRIEVERS, cfg: GNNRAGConfig = GNNRAGConfig(),
                     graph=None) -> dict[str, Evidence]:
    """Every requested retriever's evidence for question ``i``, each base retriever computed once."""
    g = graph if graph is not None else ds.graph(i)
    seeds, _ = seed_positions(g)
    base: dict[str, Evidence] = {"none": Evidence()}
    need = {p for r in retrievers for p in r.split("+")}
    if need & {"gnn", "gnn_pcst"} and probs is None:
        raise ValueError("collect_evidence: the gnn retrievers need the GNN's node probabilities")
    if "gnn" in need:
        base["gnn"] = gnn_evidence(g, probs, cfg)
    if "rog" in need:
        lines = ground_relation_paths(g, seeds, relation_paths or [], cfg.rog_max_lines)
        base["rog"] = Evidence(lines, ungrounded=not lines)
    if "pcst" in need:
        base["pcst"] = pcst_evidence(ds, i, g)
    if "gnn_pcst" in need:
        base["gnn_pcst"] = gnn_prize_evidence(ds, i, g, probs, cfg)
    missing = missing_entities(g, ds.records[i].q_entities)  # the same for every retriever: counted once
    for ev in base.values():
        ev.missing_seed = missing
    out = {}
    for r in retrievers:
        parts = ["rog", "gnn"] if r == "gnn+rog" else r.split("+")  # GNN-RAG+RA: RoG's paths first, then the GNN's
        out[r] = functools.reduce(Evidence.union, [base[p] for p in parts[1:]], base[parts[0]])
    return out
