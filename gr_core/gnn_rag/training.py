"""The reasoner's data (one PyG graph per question), training with selection on validation H@1, scoring, and
saved reasoners (GNN-RAG paper §4.1; GNN-RAG code ``gnn/train_model.py``, ``gnn/evaluate.py``)."""
from __future__ import annotations

import copy
import io
import re
import time
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.loader import DataLoader

from ..config import usable_device
from ..data import question_nodes
from ..graphqa import LazyEmbeddings
from ..runs import atomic_write_bytes, progress
from .model import SWITCH_NAMES, ReaRev, ReasonerConfig
from .reasoning_paths import gold_ids, missing_entities, select_candidates


@contextmanager
def deterministic_algorithms(enabled: bool = True):
    """Torch's deterministic algorithms inside the block, the previous setting restored after.

    Without it the scatter sums differ at 1e-8 from run to run on CPU (after 10 epochs, 3 of 326 MetaQA-2hop test
    answers); with it reruns are bit-identical at 1 and 2 threads. ``enabled=False`` (CUDA: cuBLAS refuses the mode
    unless ``CUBLAS_WORKSPACE_CONFIG`` is set before start-up) leaves the setting alone: GPU runs are not bit-identical.
    """
    if not enabled:
        yield
        return
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before)


class QuestionGraph(Data):
    """A question's graph for the reasoner: a PyG ``Data`` whose ``rel_id`` is offset by each graph's relation-table
    size when batched (as ``edge_index`` is by its node count)."""

    def __inc__(self, key, value, *args, **kwargs):
        if key == "rel_id":
            return self.rel_table.size(0)
        return super().__inc__(key, value, *args, **kwargs)


TOPIC_WORD = "it"  # what a topic entity's name becomes in the reasoner's question text


def topic_masked(question: str, names) -> str:
    """``question`` with each mention of ``names`` (its topic entities) replaced by "it", matched without case on word
    boundaries, longest name first, brackets included: ``topic_masked("who directed [Titanic]", ["Titanic"]) ==
    "who directed it"`` (what ``ReasonerConfig.mask_topic`` reads)."""
    for name in sorted({n.strip() for n in names if n and n.strip()}, key=len, reverse=True):
        question = re.sub(rf"\[?(?<!\w){re.escape(name)}(?!\w)\]?", TOPIC_WORD, question, flags=re.IGNORECASE)
    return question


class MaskedQuestions(Sequence):
    """:func:`topic_masked` of each record's question, made when first read (40k made up front cost 7 s)."""

    def __init__(self, records):
        self.records, self._texts = records, {}

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, i: int) -> str:
        if i not in self._texts:
            r = self.records[i]
            self._texts[i] = topic_masked(r.question, r.q_entities or [])
        return self._texts[i]


def masked_question_emb(ds):
    """The sentence vectors ``(num_questions, dim)`` of ``ds``'s questions with their topic entities masked: the
    dataset's own ``question_emb_masked``, else lazy ones made once with ``ds.question_emb``'s encoder; None when
    ``question_emb`` is a plain array (only a reasoner with ``mask_topic=False`` reads such graphs)."""
    emb = getattr(ds, "question_emb_masked", None)
    encoder = getattr(ds.question_emb, "encoder", None)
    if emb is None and encoder is not None:
        emb = LazyEmbeddings(MaskedQuestions(ds.records), int(ds.question_emb.shape[1]), encoder)
        ds.question_emb_masked = emb
    return emb


def question_data(ds, i: int, graph=None):
    """Question ``i`` of a KGQA dataset as the reasoner's PyG ``Data``.

    Fields: ``edge_index (2, E)`` over node positions, ``rel_table (R, dim)`` the graph's distinct relation texts and
    ``rel_id (E,)`` each fact's row of it, ``seed (N,)`` and ``answer (N,)`` bool masks, ``q_emb (1, dim)`` and
    ``q_masked (1, dim)`` (absent where :func:`masked_question_emb` gives None); ``missing_seed`` counts question
    entities absent from the graph; ``num_answers`` the gold answers, in the graph or not (F1's recall denominator).
    """
    g = graph if graph is not None else ds.graph(i)
    edge_attr = ds.edge_embeddings(i, g)
    # one row per distinct relation text (E x 384 floats per graph would not fit for MetaQA's whole training splits)
    _, first, rel_id = np.unique(g.edges.edge_attr.astype(str).to_numpy(), return_index=True, return_inverse=True)
    ids = g.nodes.node_id.to_numpy()
    pos = {int(n): k for k, n in enumerate(ids)}
    src = np.array([pos[int(s)] for s in g.edges.src], dtype=np.int64)
    dst = np.array([pos[int(d)] for d in g.edges.dst], dtype=np.int64)
    masked_emb = masked_question_emb(ds)
    masked = {} if masked_emb is None else {"q_masked": torch.from_numpy(np.asarray(masked_emb[i])).view(1, -1)}
    seed_ids = question_nodes(g)
    seed, answer = np.isin(ids, seed_ids), np.isin(ids, gold_ids(g, ds.records[i].answers, seed_ids))
    return QuestionGraph(edge_index=torch.from_numpy(np.stack([src, dst])).view(2, -1),
                         rel_table=torch.from_numpy(np.ascontiguousarray(edge_attr[first])),
                         rel_id=torch.from_numpy(rel_id.astype(np.int64).reshape(-1)), seed=torch.from_numpy(seed),
                         answer=torch.from_numpy(answer), q_emb=torch.from_numpy(ds.question_emb[i]).view(1, -1),
                         num_nodes=len(ids), missing_seed=missing_entities(g, ds.records[i].q_entities),
                         num_answers=len(ds.records[i].answers), **masked)


@dataclass(frozen=True)
class ReasonerTrainConfig:
    """GNN-RAG training defaults: Adam lr 5e-4, no decay, grad clip 1.0, batch 8 (docs/method.md §3.1)."""

    lr: float = 5e-4
    grad_clip: float = 1.0
    batch_size: int = 8
    num_epochs: int = 10  # GNN-RAG: 200 on WebQSP; bounded here for CPU, selection on validation H@1
    seed: int = 0
    time_budget_s: float = 0.0  # 0: none; else no epoch starts that would end past it (judged by the last epoch)
    device: str = "auto"  # "auto": CUDA when visible (not bit-identical run to run there), else CPU


def train_reasoner(train_data: list, val_data: list, text_dim: int, cfg: ReasonerConfig = ReasonerConfig(),
                   tcfg: ReasonerTrainConfig = ReasonerTrainConfig(), on_epoch=None) -> tuple[ReaRev, list[dict]]:
    """Train ReaRev and keep the epoch with the best validation H@1 (as GNN-RAG; without ``val_data``, the last epoch,
    its ``val_h1`` None); ``on_epoch(row)`` gets each epoch's history row as it ends. Returns ``(model with the best
    weights, per-epoch history)``."""
    if not train_data:
        raise ValueError("train_reasoner: no training questions")
    device = usable_device(tcfg.device)
    with deterministic_algorithms(enabled=device == "cpu"):
        torch.manual_seed(tcfg.seed)
        model = ReaRev(text_dim, cfg).to(device)
        opt = torch.optim.Adam(model.parameters(), lr=tcfg.lr)
        loader = DataLoader(train_data, batch_size=tcfg.batch_size, shuffle=True,
                            generator=torch.Generator().manual_seed(tcfg.seed))
        history, best, best_state = [], -1.0, None
        start = time.perf_counter()
        for epoch in range(tcfg.num_epochs):
            if tcfg.time_budget_s and history and \
                    time.perf_counter() - start + history[-1]["seconds"] > tcfg.time_budget_s:
                break  # the next epoch would overrun the budget
            model.train()
            t0, total, count = time.perf_counter(), 0.0, 0
            for batch in progress(loader, desc=f"reasoner epoch {epoch}"):
                batch = batch.to(device)
                loss_sum, n = model.loss(model(batch), batch)
                if n == 0:
                    continue
                opt.zero_grad(set_to_none=True)
                (loss_sum / n).backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), tcfg.grad_clip)
                opt.step()
                total, count = total + float(loss_sum.detach()), count + n
            val = evaluate_reasoner(model, val_data) if val_data else {"h1": None}  # nothing to choose by
            history.append({"epoch": epoch, "train_loss": total / max(count, 1), "val_h1": val["h1"],
                            "val_f1": val.get("f1"), "seconds": round(time.perf_counter() - t0, 2)})
            if on_epoch is not None:
                on_epoch(history[-1])
            if val_data and val["h1"] > best:
                best, best_state = val["h1"], copy.deepcopy(model.state_dict())
        if best_state is not None:
            model.load_state_dict(best_state)
        return model, history


@torch.no_grad()
def node_probabilities(model: ReaRev, data_list: list, batch_size: int = 32) -> list[np.ndarray]:
    """Each graph's node distribution ``(N_i,)`` (computed on the model's device, returned on CPU)."""
    model.eval()
    device = next(model.parameters()).device
    out = []
    for batch in DataLoader(data_list, batch_size=batch_size):
        if batch.num_nodes == 0:  # graphs without nodes (alone in their batch): nothing to distribute over
            out.extend(np.zeros(0, np.float32) for _ in range(batch.num_graphs))
            continue
        with deterministic_algorithms(enabled=device.type == "cpu"):
            p = model(batch.to(device)).exp().cpu().numpy()
        counts = np.bincount(batch.batch.cpu().numpy(), minlength=batch.num_graphs)  # nodes are grouped by graph
        out.extend(np.split(p, np.cumsum(counts)[:-1]))
    return out


def score_questions(model: ReaRev, data_list: list, eps: float = 0.95, probs: list[np.ndarray] | None = None
                    ) -> list[dict]:
    """Per question: ``h1`` (the most probable non-seed node is a gold answer), ``f1`` of the ``eps`` candidate set,
    ``hit`` (a candidate is gold), ``candidates`` (its size), ``gold`` (gold answers in the graph). ``probs``: the
    model's :func:`node_probabilities` of ``data_list`` where the caller has them (not computed again).

    F1's recall divides by every gold answer (``num_answers``, in the graph or not; without it, those in the graph),
    as GNN-RAG's evaluator and :func:`gr_core.evaluate.kgqa_scores` do."""
    rows = []
    for p, d in zip(node_probabilities(model, data_list) if probs is None else probs, data_list, strict=True):
        seeds = set(np.flatnonzero(d.seed.numpy()).tolist())
        gold = set(np.flatnonzero(d.answer.numpy()).tolist())
        masked = np.where(d.seed.numpy(), -1, p)
        cands = {c for c, _ in select_candidates(p, seeds, eps)}
        tp, answers = len(cands & gold), int(getattr(d, "num_answers", len(gold)))
        prec, rec = (tp / len(cands) if cands else 0.0), (min(tp, answers) / answers if answers else 0.0)
        rows.append({"h1": float(bool(gold) and int(np.argmax(masked)) in gold),
                     "f1": 2 * prec * rec / (prec + rec) if prec + rec else 0.0, "hit": float(tp > 0),
                     "candidates": len(cands), "gold": len(gold)})
    return rows


def evaluate_reasoner(model: ReaRev, data_list: list, eps: float = 0.95) -> dict:
    """GNN-only scores as GNN-RAG reports them (:func:`summarize_scores` of :func:`score_questions`)."""
    return summarize_scores(score_questions(model, data_list, eps))


def summarize_scores(rows: list[dict]) -> dict:
    """H@1, F1, candidate-set hit in percent, mean candidates, and the questions without a gold answer in their
    graph (misses, as in GNN-RAG's evaluator)."""
    n = max(len(rows), 1)
    return {"h1": 100 * sum(r["h1"] for r in rows) / n, "f1": 100 * sum(r["f1"] for r in rows) / n,
            "candidate_hit": 100 * sum(r["hit"] for r in rows) / n,
            "mean_candidates": float(np.mean([r["candidates"] for r in rows])) if rows else 0.0,
            "no_gold_in_graph": sum(r["gold"] == 0 for r in rows), "n": len(rows)}


def reasoner_dataset(ds, indices: list[int], desc: str = "reasoner data", scope=None) -> list:
    """:func:`question_data` for each question index; ``scope`` (a :class:`~gr_core.kg.NeighbourhoodConfig`) cuts KB
    questions' graphs other than the dataset's own."""
    ds.prefetch(indices, nodes=False)  # texts are encoded on first use: the questions and relations in one batch
    masked_emb = masked_question_emb(ds)
    if hasattr(masked_emb, "prefetch"):
        masked_emb.prefetch(indices)
    return [question_data(ds, i, ds.graph(i, scope) if scope is not None else None)
            for i in progress(indices, desc=desc)]


def save_reasoner(model: ReaRev, path, meta: dict | None = None):
    """Write a trained reasoner (weights, its :class:`ReasonerConfig`, the text width) atomically to ``path``."""
    buf = io.BytesIO()
    torch.save({"config": asdict(model.cfg), "text_dim": model.text_dim, "state": model.state_dict(),
                "meta": meta or {}}, buf)
    return atomic_write_bytes(path, buf.getvalue())


def _saved(path) -> dict:
    """A file :func:`save_reasoner` wrote; ValueError for any other (a truncated save)."""
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
        blob["config"], blob["text_dim"], blob["state"]
    except Exception as err:  # noqa: BLE001 whatever the unpickler meets in a file that is not one (IndexError too)
        raise ValueError(f"{path} is not a saved GNN-RAG reasoner ({err})") from None
    return blob


def reasoner_meta(path) -> dict:
    """The ``meta`` record saved with a reasoner (:func:`save_reasoner`); ValueError for any other file."""
    return _saved(path).get("meta") or {}


def load_reasoner(path) -> ReaRev:
    """A reasoner saved by :func:`save_reasoner`, in eval mode; ValueError for any other file (a truncated save)."""
    blob = _saved(path)
    # a file written before the switches (or mask_topic) describes the first version: those missing are off
    config = {name: False for name in SWITCH_NAMES} | {"mask_topic": False} | blob["config"]
    known = {f.name for f in fields(ReasonerConfig)}  # a setting since removed was off where saved
    model = ReaRev(int(blob["text_dim"]), ReasonerConfig(**{k: v for k, v in config.items() if k in known}))
    model.load_state_dict(blob["state"])
    return model.eval()
