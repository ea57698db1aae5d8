"""The no-LLM reference rows: the negation-parity rule, the majority class and the GNN-only classifier."""
import json

import numpy as np
import pandas as pd
import pytest
import torch

from gr_core.data import TextualGraph
from gr_core.g_retriever.graph_encoder import GNNConfig
from gr_core.report.results import collect_runs, confusion, table3
from gr_core.studies.graph_baselines import GraphClassifierConfig, is_negated, negation_parity, run_graph_baselines


def test_negation_parity_counts_negated_relations():
    assert [is_negated(r) for r in ("not capable of", "is not a", "antonym of", "capable of", "notable for")] == \
        [True, True, True, False, False]
    assert negation_parity(["capable of", "desires"]) == "support"
    assert negation_parity(["not desires", "causes"]) == "counter"
    assert negation_parity(["not desires", "antonym of"]) == "support"  # two negations cancel


class _ToyDataset:
    """An ExplaGraphs-shaped dataset in memory: the label is the parity of negated edges, which a GNN can learn."""

    name = "explagraphs"

    def __init__(self, n=60, seed=0):
        from types import SimpleNamespace

        rng = np.random.default_rng(seed)
        self.graphs, self.records, self._x = [], [], []
        for i in range(n):
            neg = rng.integers(0, 2, 3).astype(bool)
            rels = ["not causes" if k else "causes" for k in neg]
            nodes = pd.DataFrame({"node_id": range(4), "node_attr": [f"n{i}-{j}" for j in range(4)]})
            edges = pd.DataFrame({"src": [0, 1, 2], "edge_attr": rels, "dst": [1, 2, 3]})
            self.graphs.append(TextualGraph(nodes, edges))
            label = "counter" if neg.sum() % 2 else "support"
            self.records.append(SimpleNamespace(answers=[label], graph_id=str(i), question=f"q{i}"))
            self._x.append(neg)
        self.split = {"train": list(range(0, 40)), "val": list(range(40, 50)), "test": list(range(50, n))}

    def prefetch(self, indices, nodes=True):
        return 0  # the features are made in memory: nothing to encode

    def to_pyg(self, i):
        from torch_geometric.data import Data

        neg = torch.tensor(self._x[i], dtype=torch.float32)
        edge_attr = torch.stack([neg, 1 - neg], 1).repeat(1, 2)  # (3, 4)
        return Data(x=torch.ones(4, 4), edge_index=torch.tensor([[0, 1, 2], [1, 2, 3]]), edge_attr=edge_attr,
                    num_nodes=4)


def test_reference_rows_are_run_directories_paired_with_the_llm_runs(tmp_path):
    ds = _ToyDataset()
    cfg = GraphClassifierConfig(gnn=GNNConfig(hidden=8, num_layers=2, heads=2), max_epochs=2)
    rows = {r["method"]: r for r in run_graph_baselines(ds, tmp_path, max_test=8, cfg=cfg)}
    assert rows["negation_parity"]["score"] == 1.0  # the toy label is the parity itself
    assert rows["majority"]["valid"] == 1.0 and rows["majority"]["num_test"] == 8
    assert len(rows["gnn_classifier"]["val_acc"]) == 2
    first = (tmp_path / "explagraphs-gnn_classifier-seed0" / "metrics.json").stat().st_mtime_ns
    run_graph_baselines(ds, tmp_path, max_test=8, cfg=cfg)  # finished and unchanged: reused
    assert (tmp_path / "explagraphs-gnn_classifier-seed0" / "metrics.json").stat().st_mtime_ns == first
    lines = (tmp_path / "explagraphs-majority-seed0" / "predictions.jsonl").read_text().splitlines()
    assert [json.loads(x)["id"] for x in lines] == [str(i) for i in range(50, 58)]
    t3 = table3(collect_runs(tmp_path), tmp_path, reference="majority").set_index("method")
    assert t3.loc["negation_parity", "setting"] == "no LLM (reference)"
    assert t3.loc["negation_parity", "ci_high"] == 1.0 and t3.loc["negation_parity", "ci_low"] < 1.0
    assert t3.loc["negation_parity", "n_test"] == 8 and 0 <= t3.loc["negation_parity", "p_vs_zero_shot"] <= 1
    cm = confusion(tmp_path, "explagraphs-negation_parity-seed0")
    assert int(cm.values.sum()) == 8 and int(cm["other"].sum()) == 0
    assert int(np.trace(cm[["support", "counter"]].to_numpy())) == 8
    with pytest.raises(ValueError, match="unknown graph baseline"):
        run_graph_baselines(ds, tmp_path, methods=["parity"])
