"""Subgraph retrieval (GR paper §5.2-5.3; GR code ``src/dataset/utils/retrieval.py``; docs/method.md §1.1).

Cosine top-k prizes for nodes (Eq. 6) and edges (tie groups share their rank value), the virtual-node construction
that lets ``pcst_fast`` take edge prizes, the solver (unrooted, one cluster, GW pruning) and the subgraph, with the
graph's own node ids. Vectorized: the only Python loops run k_e times, never over edges. Two prize rules:
``"official"`` (the GR code since 07cbdb9) and ``"pyg"`` (torch_geometric's ``retrieval_via_pcst``: docs/peers.md 4).

``pcst_fast==1.0.10`` returns wrong vertex ids under numpy 2 (fraenkel-lab/pcst_fast#16); the fork ``pcst-fast2``
ships the same module and is correct, and which one is installed depends on install order, so :func:`solve_pcst`
checks the solver on a known instance at first use.
"""
from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass, field
from importlib import metadata

import numpy as np
import pandas as pd
import pcst_fast

from ..config import check_choice
from ..data import EDGE_COLUMNS, NODE_COLUMNS, TextualGraph
from .textualize import _table, column_rows

_solver_checked = False


# pcst_fast's root, num_clusters, pruning, verbosity: the GR code's unrooted single tree with GW pruning
PCST_ARGS = (-1, 1, "gw", 0)


class PCSTSolverError(RuntimeError):
    """The installed ``pcst_fast`` gives wrong answers."""


def check_pcst_solver(solver=None) -> None:
    """Raise :class:`PCSTSolverError` if ``solver`` (``pcst_fast.pcst_fast``'s signature; default: the installed one)
    is wrong on a known instance: the path 0-1-2 with prizes (0, 5, 6) and edge costs (3, 4), whose optimum keeps
    nodes 1, 2 and edge 1 (the broken build returns repeated ids such as [1, 1])."""
    solver = solver or pcst_fast.pcst_fast
    vertices, edges = solver(np.array([[0, 1], [1, 2]], np.int64), np.array([0.0, 5.0, 6.0]), np.array([3.0, 4.0]),
                             *PCST_ARGS)
    got_v, got_e = sorted(np.asarray(vertices).tolist()), sorted(np.asarray(edges).tolist())
    if got_v != [1, 2] or got_e != [1]:
        installed = []
        for name in ("pcst-fast", "pcst-fast2"):
            with contextlib.suppress(metadata.PackageNotFoundError):
                installed.append(f"{name}=={metadata.version(name)}")
        raise PCSTSolverError(
            f"pcst_fast is broken: on the known instance (path 0-1-2, prizes [0, 5, 6], costs [3, 4]) it returned "
            f"vertices {got_v} and edges {got_e}, expected [1, 2] and [1]. "
            f"This is the pcst_fast==1.0.10 + numpy>=2 bug (fraenkel-lab/pcst_fast#16): installed are "
            f"{', '.join(installed) or 'neither pcst-fast nor pcst-fast2'} with numpy {np.__version__}. Fix: "
            f"`pip uninstall -y pcst-fast pcst-fast2 && pip install pcst-fast2` (both ship the same pcst_fast module; "
            f"never install pcst-fast)."
        )


def solve_pcst(edges: np.ndarray, prizes: np.ndarray, costs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Prize-Collecting Steiner Tree via ``pcst_fast`` (GR code: unrooted, 1 cluster, GW pruning).

    Args:
        edges: ``(num_edges, 2)`` int64 endpoints.
        prizes: ``(num_nodes,)`` non-negative node prizes.
        costs: ``(num_edges,)`` non-negative edge costs.
    Returns:
        ``(vertices, edge_ids)``: the selected node ids and edge row ids (int64 arrays).
    """
    global _solver_checked

    if not _solver_checked:
        check_pcst_solver()
        _solver_checked = True
    vertices, edge_ids = pcst_fast.pcst_fast(np.ascontiguousarray(edges, dtype=np.int64),
                                             np.ascontiguousarray(prizes, dtype=np.float64),
                                             np.ascontiguousarray(costs, dtype=np.float64), *PCST_ARGS)
    return np.asarray(vertices, dtype=np.int64), np.asarray(edge_ids, dtype=np.int64)


# ------------------------------------------------------------------ retrieval
PRIZE_MODES = ("official", "pyg")
SIMILARITIES = ("dot", "cosine")


@dataclass(frozen=True)
class RetrievalConfig:
    """Top-k + PCST retrieval.

    Attributes:
        top_k_nodes: k of Eq. 5-6 (GR App. B.1: WebQSP 3, SceneGraphs 3). 0 gives no node prizes.
        top_k_edges: k_e (GR code: WebQSP 5, SceneGraphs 3).
        edge_cost: C_e of Eq. 8 (WebQSP 0.5; SceneGraphs: paper 1, code 0.5, docs/method.md §1.1).
        prize_mode: ``"official"`` (GR code) or ``"pyg"`` (torch_geometric's variant).
        similarity: ``"dot"`` = a mat-vec on our L2-normalized embeddings (cosine up to rounding, 15x faster);
            ``"cosine"`` = torch's ``CosineSimilarity``, bit-identical to both reference implementations.
        decay: c = 0.01, the GR code's tie-group decay and clamp constant.
        whole_graph: skip retrieval (GR's ExplaGraphs setting, "k = 0").
    """

    top_k_nodes: int = 3
    top_k_edges: int = 5
    edge_cost: float = 0.5
    prize_mode: str = "official"
    similarity: str = "dot"
    decay: float = 0.01  # GR code retrieval.py: c = 0.01
    whole_graph: bool = False

    def __post_init__(self) -> None:
        check_choice("RetrievalConfig", "prize_mode", self.prize_mode, PRIZE_MODES)
        check_choice("RetrievalConfig", "similarity", self.similarity, SIMILARITIES)
        for name in ("top_k_nodes", "top_k_edges"):  # a count: 2.5 or True would reach torch.topk as k
            k = getattr(self, name)
            if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
                raise ValueError(f"RetrievalConfig.{name}={k!r} must be an integer >= 0")
        if self.edge_cost < 0:
            raise ValueError(f"RetrievalConfig.edge_cost={self.edge_cost} must be >= 0")


# Per-dataset defaults (GR paper App. B.1 and GR code; docs/method.md §1.1).
DATASET_RETRIEVAL = {
    "webqsp": RetrievalConfig(3, 5, 0.5),
    "webqsp_full": RetrievalConfig(3, 5, 0.5),
    "rog_webqsp": RetrievalConfig(3, 5, 0.5),  # the papers' 2-hop graphs: WebQSP's k and C_e, as webqsp_full
    "rog_cwq": RetrievalConfig(3, 5, 0.5),  # not in GR: WebQSP's KGQA setting on CWQ's 2-hop graphs
    "metaqa": RetrievalConfig(3, 5, 0.5),  # not in the paper: WebQSP's KGQA setting
    # SceneGraphs: k = 3 for nodes and edges; C_e = 1 in the paper, 0.5 in the code. We follow the code,
    # which produced the published numbers; set edge_cost=1.0 for the paper's value.
    "gqa_micro": RetrievalConfig(3, 3, 0.5),
    "gqa": RetrievalConfig(3, 3, 0.5),
    "clevr": RetrievalConfig(3, 3, 0.5),
    "explagraphs": RetrievalConfig(whole_graph=True),  # "k = 0": the whole (5-node) graph
}


def similarities(query, embeddings, mode: str = "dot"):
    """Similarity of one query to each row.

    Shapes:
        query: ``(dim,)``; embeddings: ``(n, dim)``; returns float32 ``(n,)``.
    """
    import torch  # noqa: PLC0415 deferred: torch (~1.5 s at start-up), needed only here

    if len(embeddings) == 0:
        return np.zeros(0, np.float32)
    q = torch.as_tensor(np.asarray(query, np.float32))
    emb = torch.as_tensor(np.ascontiguousarray(embeddings, np.float32))  # zero-copy view
    if mode == "cosine":
        return torch.nn.CosineSimilarity(dim=-1)(q, emb).numpy()
    # torch, not numpy: numpy's BLAS ignores torch.set_num_threads and its threads spin under load
    return torch.mv(emb, q).numpy()


def distinct_rows(rows: np.ndarray, table_size: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(rows, return_inverse=True)`` for row numbers below ``table_size``.

    A table at most 16x the rows is marked in a boolean mask instead of sorting the rows (a full WebQSP graph's
    ~7,000 rows of a 25,000-text table: 4x faster); a far larger table (RoG's millions of texts) is sorted.
    """
    if table_size > 16 * len(rows):
        return np.unique(rows, return_inverse=True)
    mask = np.zeros(table_size, bool)
    mask[rows] = True
    return np.flatnonzero(mask), (np.cumsum(mask) - 1)[rows]


def text_similarities(query, table, node_rows: np.ndarray, edge_rows: np.ndarray, mode: str = "dot"
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Similarities of one query to a graph's node and edge texts, each distinct text scored once, then gathered.

    A graph repeats its texts (a full WebQSP graph: ~4,000 edges over a few hundred relations), and identical texts
    then tie exactly, one tie group of edge prizes as under the references' per-row cosine. A graph using half of the
    table or more has the whole table scored in place (cheaper than copying its rows out); the two paths can round a
    similarity differently in the last bit (a mat-vec's blocking depends on its row count), ties stay exact in both.

    Shapes:
        query: ``(dim,)``; table: ``(num_texts, dim)``, an array or a :class:`~gr_core.graphqa.LazyEmbeddings`;
        node_rows ``(num_nodes,)`` and edge_rows ``(num_edges,)``: rows of ``table``. Returns float32
        ``(num_nodes,)`` and ``(num_edges,)``.
    """
    rows = np.concatenate([node_rows, edge_rows]).astype(np.int64, copy=False)
    texts, inverse = distinct_rows(rows, len(table))
    if 2 * len(texts) >= len(table):
        whole = table.encoded(texts) if hasattr(table, "encoded") else table
        sim = similarities(query, whole, mode)[rows]
    else:
        sim = similarities(query, table[texts], mode)[inverse]
    return sim[:len(node_rows)], sim[len(node_rows):]


def node_prizes(sim: np.ndarray, k: int) -> np.ndarray:
    """Eq. 6: the k most similar nodes get k, k-1, ..., 1 (torch.topk order, as both references); others 0."""
    import torch  # noqa: PLC0415 deferred: torch (~1.5 s at start-up), needed only here

    prizes = np.zeros(len(sim), np.float32)
    k = min(k, len(sim))
    if k > 0:
        top = torch.topk(torch.as_tensor(sim), k, largest=True).indices.numpy()
        prizes[top] = np.arange(k, 0, -1, dtype=np.float32)
    return prizes


def edge_prizes(sim: np.ndarray, k: int, c: float = 0.01, mode: str = "official") -> np.ndarray:
    """Edge prizes by tie group (docs/method.md §1.1): the j-th highest distinct similarity's edges share
    ``min((k - j) / |group|, cap)``; ``cap`` starts at k and becomes ``value * (1 - c)`` (``"official"``)
    or the same minus c (``"pyg"``: the cap is ``previous - c``). Edges below the k-th value get 0.

    Shapes:
        sim: float32 ``(num_edges,)``; returns float32 ``(num_edges,)``.
    """
    prizes = np.zeros(len(sim), np.float32)
    if k <= 0 or len(sim) == 0:
        return prizes
    # The k largest distinct similarities by k masked max passes: O(k * num_edges), no full sort.
    top = []
    below = sim
    for _ in range(k):
        if below.size == 0:
            break
        top.append(below.max())
        below = below[below < top[-1]]
    top = np.array(top, dtype=sim.dtype)  # descending
    k = len(top)
    in_top = sim >= top[-1]
    rank = np.full(len(sim), k, np.int64)
    rank[in_top] = np.searchsorted(-top, -sim[in_top])  # 0 = the best tie group (exact equality)
    sizes = np.bincount(rank[in_top], minlength=k)
    values = np.zeros(k, np.float32)
    one_minus_c, cf = np.float32(1 - c), np.float32(c)
    last = np.float32(k)
    for j in range(k):  # k_e scalars: float32 rounding as in the reference loop
        ratio = np.float32(k - j) / np.float32(sizes[j])
        cap = last - cf if mode == "pyg" else last
        values[j] = min(ratio, cap)
        last = np.float32(values[j] * one_minus_c)
    prizes[in_top] = values[rank[in_top]]
    return prizes


@dataclass
class RetrievedSubgraph:
    """The PCST subgraph of one question.

    Attributes:
        source: the input textual graph.
        node_rows: rows (positions) of its node table kept, sorted.
        edge_rows: rows of its edge table kept, in the reference order (solver's real edges, then virtual).
        node_prizes, edge_prizes: the prizes given to every input node / edge.
        edge_cost: C_e after the clamp.
        id_columns: the source's ``node_id``, ``src`` and ``dst`` columns as arrays, when read already (then
            :attr:`desc` takes them from here).
    """

    source: object
    node_rows: np.ndarray
    edge_rows: np.ndarray
    node_prizes: np.ndarray
    edge_prizes: np.ndarray
    edge_cost: float
    id_columns: dict[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    @functools.cached_property
    def graph(self):
        """The subgraph as a textual graph (original node ids kept), built on first use."""
        src = self.source
        if len(self.node_rows) == src.num_nodes and len(self.edge_rows) == src.num_edges and \
                np.array_equal(self.edge_rows, np.arange(src.num_edges)):
            return src
        return TextualGraph(src.nodes.iloc[self.node_rows], src.edges.iloc[self.edge_rows],
                            src.question, src.answers, src.graph_id, src.q_entities)

    @property
    def desc(self) -> str:
        """The textualized subgraph (= ``textualize(self.graph)``), written straight from the selected rows."""

        def values(frame, name: str, rows: np.ndarray) -> list:
            known = self.id_columns.get(name)
            return known[rows].tolist() if known is not None else column_rows(frame, name, rows)

        n, e = self.source.nodes, self.source.edges
        nodes = _table(NODE_COLUMNS, [values(n, c, self.node_rows) for c in NODE_COLUMNS])
        edges = _table(EDGE_COLUMNS, [values(e, c, self.edge_rows) for c in EDGE_COLUMNS])
        return nodes + "\n" + edges


def retrieve_subgraph(graph, x: np.ndarray | None, edge_attr: np.ndarray | None, query: np.ndarray | None,
                      cfg: RetrievalConfig = RetrievalConfig(), node_sim: np.ndarray | None = None,
                      edge_sim: np.ndarray | None = None, extra_node_prizes: np.ndarray | None = None
                      ) -> RetrievedSubgraph:
    """G-Retriever's retrieval: top-k prizes, PCST, mapping back (GR paper Eq. 4-8).

    Args:
        graph: a :class:`~gr_core.data.TextualGraph`; ``graph.edges.src/dst`` are node ids.
        x: node embeddings ``(num_nodes, dim)`` in node-table order; edge_attr: ``(num_edges, dim)``.
        query: the question embedding ``(dim,)``.
        node_sim, edge_sim: precomputed similarities ``(num_nodes,)`` / ``(num_edges,)`` replacing x / edge_attr
            (:func:`text_similarities`, as :func:`gr_core.graphqa.retrieve` does).
        extra_node_prizes: ``(num_nodes,)`` added to the top-k node prizes (a learned prize, e.g. the GNN's node
            probabilities in :func:`gr_core.gnn_rag.evidence.gnn_prize_evidence`, via :func:`gr_core.graphqa.retrieve`).
    Returns:
        the subgraph; a graph with no node or no edge (or ``cfg.whole_graph``) is returned whole.
    """
    n, m = graph.num_nodes, graph.num_edges
    if cfg.whole_graph or n == 0 or m == 0:
        return RetrievedSubgraph(graph, np.arange(n), np.arange(m), np.zeros(n, np.float32), np.zeros(m, np.float32),
                                 cfg.edge_cost)
    node_sim = similarities(query, x, cfg.similarity) if node_sim is None else node_sim
    edge_sim = similarities(query, edge_attr, cfg.similarity) if edge_sim is None else edge_sim
    n_prizes = node_prizes(node_sim, cfg.top_k_nodes)
    if extra_node_prizes is not None:
        if extra_node_prizes.shape != (n,):
            raise ValueError(f"extra_node_prizes has shape {extra_node_prizes.shape}, expected ({n},)")
        n_prizes = n_prizes + extra_node_prizes.astype(np.float32)
    e_prizes = edge_prizes(edge_sim, cfg.top_k_edges, cfg.decay, cfg.prize_mode)
    cost = cfg.edge_cost
    if cfg.top_k_edges > 0:  # GR code: "reduce the cost of the edges so that at least one edge is chosen"
        cost = min(cost, float(e_prizes.max()) * (1 - cfg.decay / 2))
    cost32 = np.float32(cost)
    # node ids -> row positions (ids are kept for the text, rows index x and the solver); each column read once
    columns = {"node_id": graph.nodes["node_id"].to_numpy(), "src": graph.edges["src"].to_numpy(),
               "dst": graph.edges["dst"].to_numpy()}
    ids, src, dst = columns["node_id"], columns["src"], columns["dst"]
    if not np.array_equal(ids, np.arange(n)):
        lookup = pd.Series(np.arange(n), index=ids)
        src, dst = lookup[src].to_numpy(), lookup[dst].to_numpy()
    real = e_prizes <= cost32
    real_rows, virt_rows = np.flatnonzero(real), np.flatnonzero(~real)
    nv = len(virt_rows)
    virt_ids = n + np.arange(nv)
    # Solver edges: real edges (cost C_e - prize), then per virtual node (src, v) and (v, dst) at cost 0.
    virt_edges = np.empty((2 * nv, 2), np.int64)
    virt_edges[0::2, 0], virt_edges[0::2, 1] = src[virt_rows], virt_ids
    virt_edges[1::2, 0], virt_edges[1::2, 1] = virt_ids, dst[virt_rows]
    edges = np.concatenate([np.stack([src[real_rows], dst[real_rows]], 1), virt_edges])
    costs = np.concatenate([cost32 - e_prizes[real_rows], np.zeros(2 * nv, np.float32)]).astype(np.float64)
    prizes = np.concatenate([n_prizes, e_prizes[virt_rows] - cost32]).astype(np.float64)
    vertices, sel = solve_pcst(edges, prizes, costs)
    edge_rows = np.concatenate([real_rows[sel[sel < len(real_rows)]], virt_rows[vertices[vertices >= n] - n]])
    node_rows = np.unique(np.concatenate([vertices[vertices < n], src[edge_rows], dst[edge_rows]]))
    return RetrievedSubgraph(graph, node_rows, edge_rows, n_prizes, e_prizes, cost, columns)
