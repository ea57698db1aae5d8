"""A run's examples (GR code ``src/dataset/*.py``, ``train.py``; docs/method.md §1.5): which questions a run uses, each
question's retrieved subgraph, textualized graph and label as one :class:`~gr_core.g_retriever.model.Example`, and
length-bucketed batches."""
from __future__ import annotations

import random

import numpy as np
import torch
from torch_geometric.data import Data

from ..graphqa import retrieve
from ..prompts import COT_BAG, ZERO_COT, label_for, question_for
from ..runs import progress
from .baselines import kaping_retriever, retrieve_none
from .model import Example, ModelConfig
from .run_config import RunConfig


def split_indices(ds, cfg: RunConfig | None = None, max_train: int | None = None, max_val: int | None = None,
                  max_test: int | None = None) -> dict[str, list[int]]:
    """The train/val/test question indices of a run (its ``max_*``, or the given ones): the first N of each split."""
    if cfg is not None:
        max_train, max_val, max_test = cfg.max_train, cfg.max_val, cfg.max_test
    cut = {"train": max_train, "val": max_val, "test": max_test}
    return {k: list(ds.split.get(k, []))[:n] for k, n in cut.items()}  # [:None] keeps the whole split


def build_examples(ds, indices: list[int], cfg: ModelConfig, desc: str = "examples") -> list[Example]:
    """Retrieve, textualize and (when a GNN is used) tensorize each question's graph.

    The graph is the dataset's PCST subgraph (``pcst``), the whole graph (``full``), KAPING's top-k triples
    (``kaping``) or nothing (``none``); see :class:`~gr_core.g_retriever.model.ModelConfig`.
    """
    kaping = kaping_retriever(cfg.kaping_k) if cfg.graph_source == "kaping" else None
    if cfg.gnn is not None or cfg.graph_source in ("pcst", "kaping"):  # texts are encoded on first use: one batch
        ds.prefetch(indices, nodes=cfg.gnn is not None or cfg.graph_source == "pcst")
    out = []
    for i in progress(indices, desc=desc):
        rec = ds.records[i]
        g = ds.graph(i)
        res = None
        if cfg.graph_source == "pcst":
            res = retrieve(ds, i, cfg=cfg.retrieval(ds.name), graph=g)
        elif cfg.graph_source == "full":
            res = retrieve_none(g)
        elif kaping is not None:
            res = kaping(ds, i, g)
        question = question_for(ds.name, rec.question)
        if cfg.instruction == "zero_cot":
            question = question.rstrip() + " " + ZERO_COT
        elif cfg.instruction == "cot_bag":
            question = COT_BAG + "\n" + question
        data = None
        if cfg.gnn is not None:
            x, edge_attr = ds.embeddings(i, g)
            rows, erows = (res.node_rows, res.edge_rows) if res is not None else (np.arange(0), np.arange(0))
            ids = g.nodes.node_id.to_numpy()
            pos = np.full(int(ids.max()) + 1 if len(ids) else 1, -1, np.int64)
            pos[ids[rows]] = np.arange(len(rows))
            src, dst = g.edges.src.to_numpy()[erows], g.edges.dst.to_numpy()[erows]
            data = Data(x=torch.from_numpy(np.ascontiguousarray(x[rows])),
                        edge_index=torch.from_numpy(np.stack([pos[src], pos[dst]]).astype(np.int64)).view(2, -1),
                        edge_attr=torch.from_numpy(np.ascontiguousarray(edge_attr[erows])), num_nodes=len(rows))
        out.append(Example(uid=str(rec.graph_id), question=question, desc=res.desc if res is not None else "",
                           label=label_for(ds.name, rec.answers, str(rec.graph_id)), answers=list(rec.answers),
                           data=data))
    return out


def example_lengths(examples: list[Example]) -> list[int]:
    """Each tokenized example's training length (graph text + question + label tokens): what the batches bucket."""
    return [len(ex.desc_ids) + len(ex.question_ids) + len(ex.label_ids) for ex in examples]


def length_batches(lengths: list[int], batch_size: int, seed: int, window: int = 50) -> list[list[int]]:
    """Length-bucketed batches: shuffle, sort inside windows of ``window * batch_size``, cut, shuffle batches.

    Examples of similar length share a batch (little padding) while the order stays random per ``seed``.
    """
    rng = random.Random(seed)
    order = list(range(len(lengths)))
    rng.shuffle(order)
    span = max(1, window * batch_size)
    batches = []
    for start in range(0, len(order), span):
        chunk = sorted(order[start:start + span], key=lambda i: lengths[i])
        batches += [chunk[k:k + batch_size] for k in range(0, len(chunk), batch_size)]
    rng.shuffle(batches)
    return batches
