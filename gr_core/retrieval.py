"""Subgraph retrieval (GR paper §5.2-5.3): the Prize-Collecting Steiner Tree solver, guarded.

``pcst_fast==1.0.10`` returns silently wrong vertex ids under numpy 2 (fraenkel-lab/pcst_fast#16);
the maintained fork ``pcst-fast2`` ships the same ``pcst_fast`` module and is correct. Both own
the same compiled file, so which one you get depends on install order. :func:`solve_pcst`
therefore checks the solver on a known instance at first use and refuses to run a broken one.
"""
from __future__ import annotations

from importlib import metadata

import numpy as np

# A 3-node path 0-1-2 with prizes (0, 5, 6) and edge costs (3, 4): the optimum keeps nodes 1, 2
# and edge 1 (net 5 + 6 - 4 = 7). The broken build returns repeated ids such as [1, 1].
KNOWN_EDGES = np.array([[0, 1], [1, 2]], dtype=np.int64)
KNOWN_PRIZES = np.array([0.0, 5.0, 6.0])
KNOWN_COSTS = np.array([3.0, 4.0])
KNOWN_VERTICES = [1, 2]
KNOWN_EDGE_IDS = [1]

_solver_checked = False


class PCSTSolverError(RuntimeError):
    """The installed ``pcst_fast`` gives wrong answers."""


def _installed_dists() -> str:
    found = []
    for name in ("pcst-fast", "pcst-fast2"):
        try:
            found.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pass
    return ", ".join(found) or "neither pcst-fast nor pcst-fast2"


def check_pcst_solver(solver=None) -> None:
    """Run the solver on a known instance; raise :class:`PCSTSolverError` if its answer is wrong.

    Args:
        solver: a callable with ``pcst_fast.pcst_fast``'s signature (default: the installed one).
    """
    if solver is None:
        import pcst_fast

        solver = pcst_fast.pcst_fast
    vertices, edges = solver(KNOWN_EDGES, KNOWN_PRIZES, KNOWN_COSTS, -1, 1, "gw", 0)
    got_v, got_e = sorted(np.asarray(vertices).tolist()), sorted(np.asarray(edges).tolist())
    if got_v != KNOWN_VERTICES or got_e != KNOWN_EDGE_IDS:
        import numpy

        raise PCSTSolverError(
            f"pcst_fast is broken: on the known instance (path 0-1-2, prizes [0, 5, 6], costs [3, 4]) it returned "
            f"vertices {got_v} and edges {got_e}, expected {KNOWN_VERTICES} and {KNOWN_EDGE_IDS}. "
            f"This is the pcst_fast==1.0.10 + numpy>=2 bug (fraenkel-lab/pcst_fast#16): installed are "
            f"{_installed_dists()} with numpy {numpy.__version__}. Fix: `pip uninstall -y pcst-fast pcst-fast2 && "
            f"pip install pcst-fast2` (both ship the same pcst_fast module; never install pcst-fast)."
        )


def solve_pcst(edges: np.ndarray, prizes: np.ndarray, costs: np.ndarray, root: int = -1,
               num_clusters: int = 1, pruning: str = "gw") -> tuple[np.ndarray, np.ndarray]:
    """Prize-Collecting Steiner Tree via ``pcst_fast`` (GR code: unrooted, 1 cluster, GW pruning).

    Args:
        edges: ``(num_edges, 2)`` int64 endpoints.
        prizes: ``(num_nodes,)`` non-negative node prizes.
        costs: ``(num_edges,)`` non-negative edge costs.
    Returns:
        ``(vertices, edge_ids)``: the selected node ids and edge row ids (int64 arrays).
    """
    global _solver_checked
    import pcst_fast

    if not _solver_checked:
        check_pcst_solver(pcst_fast.pcst_fast)
        _solver_checked = True
    vertices, edge_ids = pcst_fast.pcst_fast(np.ascontiguousarray(edges, dtype=np.int64),
                                             np.ascontiguousarray(prizes, dtype=np.float64),
                                             np.ascontiguousarray(costs, dtype=np.float64),
                                             root, num_clusters, pruning, 0)
    return np.asarray(vertices, dtype=np.int64), np.asarray(edge_ids, dtype=np.int64)
