import numpy as np
import pytest

from gr_core import retrieval
from gr_core.retrieval import PCSTSolverError, check_pcst_solver, solve_pcst


def test_installed_pcst_solver_passes_the_known_instance():
    check_pcst_solver()


def test_guard_fires_on_a_solver_that_repeats_vertex_ids():
    # What pcst_fast 1.0.10 does under numpy 2: right length, repeated ids.
    def broken(edges, prizes, costs, root, num_clusters, pruning, verbosity):
        return np.array([1, 1]), np.array([1])

    with pytest.raises(PCSTSolverError, match="numpy>=2") as err:
        check_pcst_solver(broken)
    assert "pcst-fast2" in str(err.value)


def test_solve_pcst_refuses_to_run_a_broken_solver(monkeypatch):
    import pcst_fast

    monkeypatch.setattr(retrieval, "_solver_checked", False)
    monkeypatch.setattr(pcst_fast, "pcst_fast", lambda *a: (np.array([0, 0]), np.array([0])))
    with pytest.raises(PCSTSolverError):
        solve_pcst(np.array([[0, 1]]), np.array([1.0, 1.0]), np.array([0.5]))


def test_solve_pcst_on_a_path_keeps_the_profitable_end():
    vertices, edges = solve_pcst(np.array([[0, 1], [1, 2]]), np.array([0.0, 5.0, 6.0]), np.array([3.0, 4.0]))
    assert sorted(vertices.tolist()) == [1, 2] and edges.tolist() == [1]


def test_broken_pcst_fast_distribution_is_not_installed():
    from importlib import metadata

    with pytest.raises(metadata.PackageNotFoundError):
        metadata.version("pcst-fast")
