"""A knowledge graph held once in memory: CSR adjacency and fast k-hop neighbourhoods.

KGQA benchmarks (MetaQA: 133,582 triples, 43,234 entities) ask about one large KB: it is kept once, as id arrays
with a CSR index over both edge directions, and each question's neighbourhood is cut on demand by a vectorized
breadth-first expansion (as GNN-RAG's dense subgraphs: entity linking + k hops).
"""
from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd

from .data import EDGE_COLUMNS, TextualGraph


@dataclass(frozen=True)
class NeighbourhoodConfig:
    """How a question's subgraph is cut out of the KB.

    Attributes:
        hops: expansion depth (MetaQA: the question's hop count).
        max_expand_degree: nodes of higher degree are kept but not expanded (the seeds always are).
            In MetaQA the 53 entities above 200 are genres, years, languages and popular tags, which
            no question passes *through* (every question type chains movies and people), while the
            most prolific person has degree 114; expanding a hub would pull in thousands of movies.
        max_nodes: hard cap; the last hop is truncated in breadth-first order (entity id order within
            a hop) when it would pass the cap. GNN-RAG's dense subgraphs keep the top 2,000 entities.
    """

    hops: int = 2
    max_expand_degree: int = 200
    max_nodes: int = 2000

    def __post_init__(self) -> None:
        if self.hops < 0:
            raise ValueError(f"NeighbourhoodConfig.hops={self.hops} must be >= 0")
        if self.max_nodes < 1:
            raise ValueError(f"NeighbourhoodConfig.max_nodes={self.max_nodes} must be >= 1")


# Names that name nothing: Freebase machine ids (WebQSP's mediator "CVT" nodes: m.0abc1, g.11b6...) and RDF blank
# nodes (_:b0). Never a user's answer; the named nodes beyond them are. Not "Q" and digits: a user's quarters ("Q3")
# were taken for Wikidata ids and never answered
IDENTIFIER = re.compile(r"[mg]\.[0-9a-z_]{2,}|_:\S+")


def is_identifier(name: str) -> bool:
    """Whether an entity name is an identifier that names nothing (:data:`IDENTIFIER`).

    >>> is_identifier("m.07nvh58"), is_identifier("_:b0"), is_identifier("Q3"), is_identifier("Tom Hanks")
    (True, True, False, False)
    """
    return bool(IDENTIFIER.fullmatch(str(name).strip()))


def connected_groups(n: int, pairs) -> np.ndarray:
    """``(n,)`` a group id per item ``0..n-1`` (0, 1, ... in order of each group's first item): the connected
    components of the undirected graph whose edges are ``pairs`` (scipy's ``connected_components``)."""
    from scipy.sparse import coo_matrix  # noqa: PLC0415 deferred: scipy, needed only for twin relations
    from scipy.sparse.csgraph import connected_components  # noqa: PLC0415

    a, b = (np.asarray(side, np.int64) for side in zip(*pairs)) if pairs else (np.zeros(0, np.int64),) * 2
    return connected_components(coo_matrix((np.ones(len(a)), (a, b)), shape=(n, n)), directed=False)[1].astype(np.int64)


class KnowledgeGraph:
    """Triples ``(head, relation, tail)`` over integer ids, with an undirected CSR index.

    Args:
        entities: entity names; entity id = position.
        relations: relation names; relation id = position.
        heads, rels, tails: ``(num_edges,)`` int arrays.

    Shapes:
        ``indptr``: ``(num_entities + 1,)``; ``nbr``, ``nbr_edge``: ``(2 * num_edges,)``, the
        neighbour and the edge id for each incidence, grouped by entity.
    """

    def __init__(self, entities: list[str], relations: list[str], heads: np.ndarray, rels: np.ndarray,
                 tails: np.ndarray):
        self.entities = list(entities)
        self.relations = list(relations)
        self.heads = np.asarray(heads, dtype=np.int64)
        self.rels = np.asarray(rels, dtype=np.int64)
        self.tails = np.asarray(tails, dtype=np.int64)
        self.entity_id = {name: i for i, name in enumerate(self.entities)}
        n, m = len(self.entities), len(self.heads)
        src = np.concatenate([self.heads, self.tails])
        dst = np.concatenate([self.tails, self.heads])
        edge = np.concatenate([np.arange(m), np.arange(m)])
        order = np.argsort(src, kind="stable")
        self.nbr, self.nbr_edge = dst[order], edge[order]
        self.indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(src, minlength=n), out=self.indptr[1:])
        self.degree = np.diff(self.indptr)

    @property
    def num_entities(self) -> int:
        return len(self.entities)

    @functools.cached_property
    def named(self) -> np.ndarray:
        """``(num_entities,)`` bool: the entity's name is not an identifier (:func:`is_identifier`)."""
        return np.array([not is_identifier(e) for e in self.entities], dtype=bool)

    @property
    def num_edges(self) -> int:
        return len(self.heads)

    @functools.cached_property
    def _derived(self) -> dict:
        return {}  # a cached_property, so that graphs pickled before it (chat index caches) get one too

    def derived(self, key, make):
        """``make()``, computed once per graph and kept under ``key`` (its relations' phrases, their twin groups)."""
        if key not in self._derived:
            self._derived[key] = make()
        return self._derived[key]

    def twin_relations(self, share: float = 0.9) -> np.ndarray:
        """``(num_relations,)`` a group id per relation: relations are twins (one group, transitively) when at least
        ``share`` of the rarer one's facts link the same two entities as a fact of the other, in either direction:
        one fact stored under two names (Freebase's inverse pairs). The rarer one's share, because a WebQSP
        mini-graph often keeps fewer facts of one direction than of the other; MetaQA's ``directed_by`` and
        ``written_by`` share 47% of their facts and stay apart."""
        if not 0.0 < share <= 1.0:
            raise ValueError(f"twin_relations: share={share} must be in (0, 1]")
        return self.derived(("twins", share), lambda: self._twin_groups(share))

    def _twin_groups(self, share: float) -> np.ndarray:
        n = len(self.relations)
        pair = np.minimum(self.heads, self.tails) * max(self.num_entities, 1) + np.maximum(self.heads, self.tails)
        facts = np.unique(np.stack([pair, self.rels], 1), axis=0)  # (unordered pair, relation), each once
        count = np.bincount(facts[:, 1], minlength=n)
        _, start, size = np.unique(facts[:, 0], return_index=True, return_counts=True)
        shared = Counter()  # relation pair -> entity pairs both relations join
        for first, k in zip(start[size > 1].tolist(), size[size > 1].tolist()):  # entity pairs of 2+ relations
            shared.update(combinations(facts[first:first + k, 1].tolist(), 2))
        twins = [(a, b) for (a, b), c in shared.items() if c >= share * min(count[a], count[b])]
        return connected_groups(n, twins)

    def incidences(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """All incidences of ``nodes`` (either end): ``(neighbour ids, edge ids)``, vectorized over the CSR slices."""
        starts, ends = self.indptr[nodes], self.indptr[nodes + 1]
        lens = ends - starts
        total = int(lens.sum())
        if total == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        offsets = np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(total)
        return self.nbr[offsets], self.nbr_edge[offsets]

    def hop_edges(self, nodes: np.ndarray, relation: int, inverse: bool = False) -> np.ndarray:
        """The ids of the ``relation`` edges from ``nodes`` (to them when ``inverse``), sorted."""
        nodes = np.unique(np.asarray(nodes, np.int64))
        if len(nodes) == 0:
            return nodes
        _, edges = self.incidences(nodes)
        edges = np.unique(edges[self.rels[edges] == relation])
        inside = np.zeros(self.num_entities, bool)
        inside[nodes] = True
        return edges[inside[(self.tails if inverse else self.heads)[edges]]]

    def follow(self, nodes: np.ndarray, relation: int, inverse: bool = False) -> np.ndarray:
        """Every node one ``relation`` edge away from ``nodes`` (against its direction when ``inverse``), sorted."""
        return np.unique((self.heads if inverse else self.tails)[self.hop_edges(nodes, relation, inverse)])

    def neighbourhood(self, seeds: list[int] | np.ndarray, cfg: NeighbourhoodConfig = NeighbourhoodConfig()
                      ) -> tuple[np.ndarray, np.ndarray]:
        """The k-hop neighbourhood of ``seeds``.

        Returns:
            ``(nodes, edges)``: entity ids in discovery order (seeds first, then hop by hop, ids
            ascending within a hop), and the ids of every KB edge with both endpoints among them.
        """
        seeds = np.unique(np.asarray(seeds, dtype=np.int64))
        seen = np.zeros(self.num_entities, dtype=bool)
        seen[seeds] = True
        layers, frontier, count = [seeds], seeds, len(seeds)
        for hop in range(cfg.hops):
            expand = frontier if hop == 0 else frontier[self.degree[frontier] <= cfg.max_expand_degree]
            nbrs, _ = self.incidences(expand)
            new = np.unique(nbrs[~seen[nbrs]])
            if count + len(new) > cfg.max_nodes:
                new = new[: cfg.max_nodes - count]
            if len(new) == 0:
                break
            seen[new] = True
            layers.append(new)
            count += len(new)
            frontier = new
        nodes = np.concatenate(layers)
        nbrs, edge_ids = self.incidences(nodes)
        edges = np.unique(edge_ids[seen[nbrs]])
        return nodes, edges

    def subgraph(self, nodes: np.ndarray, edges: np.ndarray, **record) -> TextualGraph:
        """A textual graph over ``nodes`` (local ids 0..n-1 in the given order) and KB ``edges``.

        The node table carries a ``kb_id`` column so answers and paths map back to the KB.
        """
        local = {int(e): i for i, e in enumerate(nodes)}
        node_df = pd.DataFrame({"node_id": np.arange(len(nodes)), "node_attr": [self.entities[e] for e in nodes],
                                "kb_id": nodes})
        edge_df = pd.DataFrame({"src": [local[int(h)] for h in self.heads[edges]],
                                "edge_attr": [self.relations[r] for r in self.rels[edges]],
                                "dst": [local[int(t)] for t in self.tails[edges]], "kb_edge": edges},
                               columns=EDGE_COLUMNS + ["kb_edge"])
        return TextualGraph(nodes=node_df, edges=edge_df, **record)
