"""Training and evaluation of one configuration: a run (GR code ``train.py``, ``inference.py``; docs/method.md §1.5).

Why one module of ~670 lines: a run's life cycle (examples, the optimization loop, DDP sharding, checkpoint
selection, scoring, the run directory) shares one :class:`RunConfig` and one directory layout, and the GR code keeps
it in two files; cut apart, a reader would follow one run across four modules.

``run(cfg, run_dir)`` builds the examples, trains when the configuration has trainable parts, reloads
the best checkpoint, generates on the test split and writes the run directory::

    run_dir/config.json        the RunConfig and its hash
    run_dir/env.json           package versions, machine, git commit
    run_dir/history.json       per-epoch train/val loss, validation greedy match, learning rate, seconds, tokens/s
    run_dir/predictions.jsonl  one line per test question
    run_dir/metrics.json       the metrics and timings (written last: its presence means the run finished)
    run_dir/ckpt/{last,best}.pt  trainable parameters (+ optimizer state in last.pt); git-ignored

Optimization follows the GR code: AdamW (lr 1e-5, weight decay 0.05, betas (0.9, 0.95)), grad-norm clip
0.1, one linear warm-up epoch then half-cycle cosine to 5e-6 (updated every step here, every 2 steps in the
GR code), early stopping on validation loss with patience 2 and the best checkpoint reloaded for test
(``select_on="val_match"`` chooses on validation greedy accuracy instead, from the same forward pass).

Data parallel: the same entry point runs under ``torchrun`` (PyTorch DDP; gloo on CPU, NCCL on GPU). Every
process walks the same seeded batch order and takes a strided shard of each global batch; the loss is
normalized by the global label-token count, so N processes follow the same trajectory as one process on
the same global batch. Only rank 0 writes files and generates.

CLI::

    python -m gr_core.train --config run.json --run-dir outputs/quick/runs/NAME
    python -m gr_core.train --preset cpu --dataset explagraphs --method g_retriever --seed 1   # notebook 03's run
    torchrun --standalone --nproc_per_node 2 -m gr_core.train --config run.json --run-dir DIR
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from .config import LLMConfig, resolve_device
from .gnn import GNNConfig
from .model import DEFAULT_SOFT_PROMPT_INIT, SOFT_PROMPT_INIT, Example, GraphLLM, LoRAConfig, ModelConfig, method_config
from .precision import dtype_name, legacy_dtype, precision_record, recorded_dtype, resolve_dtype, run_precision
from .runs import (atomic_write_bytes, check_run_identity, config_hash, environment_record, progress, read_json,
                   seed_everything, write_json)


@dataclass(frozen=True)
class TrainConfig:
    """Optimization (GR paper App. B.1; GR code ``src/config.py``, ``train.py``, ``lr_schedule.py``).

    ``batch_size`` is the *global* batch: under DDP each of N processes takes ``batch_size / N`` examples.
    """

    lr: float = 1e-5  # GR paper App. B.1
    weight_decay: float = 0.05  # GR paper App. B.1
    betas: tuple[float, float] = (0.9, 0.95)  # GR code train.py
    grad_clip: float = 0.1  # GR code train.py
    num_epochs: int = 10  # GR paper App. B.1
    warmup_epochs: float = 1.0  # GR code src/config.py
    min_lr: float = 5e-6  # GR code lr_schedule.py
    patience: int = 2  # GR code src/config.py
    batch_size: int = 8  # GR code run.sh (the paper's App. B.1 says 4)
    eval_batch_size: int = 16  # GR code src/config.py
    bucket_window: int = 50  # batches per length-sorting window (sort within windows, shuffle batches)
    graph_lr: float | None = None  # lr of the soft-prompt parts (GNN, projector, prompt vectors); None: ``lr`` (GR code)
    warmup_fraction: float | None = None  # warm-up as a fraction of all steps; None: ``warmup_epochs`` (GR code)
    # the checkpoint kept (and early stopping): lowest validation loss (None, GR code) or "val_match", the highest
    # share of validation answers that greedy decoding gets exactly right (measured in the same teacher-forced pass)
    select_on: str | None = None

    def __post_init__(self) -> None:
        if self.lr <= 0 or self.num_epochs < 0 or self.batch_size < 1 or self.eval_batch_size < 1:
            raise ValueError("TrainConfig: lr > 0, num_epochs >= 0, batch sizes >= 1 required")
        if self.select_on not in (None, "val_loss", "val_match"):
            raise ValueError(f"TrainConfig.select_on must be 'val_loss' or 'val_match', not {self.select_on!r}")

    def selection_key(self, row: dict) -> float:
        """Lower is better: the validation loss, or the share of validation answers missed (``select_on``)."""
        match = row.get("val_match", float("nan"))
        return 1.0 - match if self.select_on == "val_match" and not math.isnan(match) else row["val_loss"]


@dataclass(frozen=True)
class RunConfig:
    """One Table 3 cell for one seed: dataset, method, model parts, optimization and data sizes.

    Attributes:
        max_train, max_val, max_test: keep the first N questions of each split (None: all).
        hops: MetaQA question hops (1-3).
        variant: a suffix naming runs of one method with different settings (the k sweep: ``k10-ce0.5``).
    """

    dataset: str
    method: str
    seed: int = 0
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    max_train: int | None = None
    max_val: int | None = None
    max_test: int | None = None
    hops: int = 2
    variant: str = ""

    @property
    def name(self) -> str:
        variant = f"-{self.variant}" if self.variant else ""
        return f"{self.dataset}-{self.method}{variant}-seed{self.seed}"

    def to_dict(self) -> dict:
        d = asdict(self)
        # fields added after runs were recorded leave the dict (and so the config hash) unchanged at their defaults
        for key in ("top_k", "edge_cost"):
            if d["model"][key] is None:
                del d["model"][key]
        if d["model"]["graph_token_norm"] == "none":
            del d["model"]["graph_token_norm"]
        if d["model"]["system_prompt"] is None:
            del d["model"]["system_prompt"]
        if d["model"]["lora"] is not None and d["model"]["lora"]["dropout_masks"] == "bernoulli":
            del d["model"]["lora"]["dropout_masks"]  # the default: peft's dropout, as runs recorded before the field
        for key in ("graph_lr", "warmup_fraction", "select_on"):
            if d["train"][key] is None:
                del d["train"][key]
        if not d["variant"]:
            del d["variant"]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "RunConfig":
        d = dict(d)
        m = dict(d.pop("model", {}) or {})
        m["llm"] = LLMConfig(**(m.get("llm") or {}))
        m["gnn"] = GNNConfig(**m["gnn"]) if m.get("gnn") else None
        if m.get("lora"):
            lora = dict(m["lora"])
            lora["targets"] = tuple(lora.get("targets", LoRAConfig.targets))
            m["lora"] = LoRAConfig(**lora)
        t = dict(d.pop("train", {}) or {})
        if "betas" in t:
            t["betas"] = tuple(t["betas"])
        return cls(model=ModelConfig(**m), train=TrainConfig(**t), **d)


def make_run_config(dataset: str, method: str, seed: int = 0, llm: LLMConfig | None = None,
                    gnn: GNNConfig | None = None, train: TrainConfig | None = None, **kwargs) -> RunConfig:
    """A :class:`RunConfig` for a named method (see :data:`gr_core.model.METHODS`).

    ``kwargs`` go to the RunConfig (``max_train`` ...) or, when they are ModelConfig fields, to the model.
    """
    model_fields = set(ModelConfig.__dataclass_fields__)
    model_kw = {k: kwargs.pop(k) for k in list(kwargs) if k in model_fields}
    model = method_config(method, llm=llm, gnn=gnn, **model_kw)
    return RunConfig(dataset=dataset, method=method, seed=seed, model=model, train=train or TrainConfig(), **kwargs)


# ---------------------------------------------------------------------- distributed helpers
@dataclass
class Dist:
    """This process's place in data-parallel training. ``ddp``: a process group was joined and the model is wrapped
    in DistributedDataParallel (always when ``world`` > 1; with one process only under ``GR_DDP=1``)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    ddp: bool = False

    @property
    def main(self) -> bool:
        return self.rank == 0

    def all_sum(self, *values: float) -> list[float]:
        """Sum scalars over processes (identity without a process group)."""
        if not self.ddp:
            return list(values)
        t = torch.tensor(values, dtype=torch.float64)
        torch.distributed.all_reduce(t)
        return t.tolist()

    def barrier(self) -> None:
        if self.ddp:
            torch.distributed.barrier()


def init_distributed() -> Dist:
    """Join the process group torchrun set up (``WORLD_SIZE`` > 1), else a single process.

    ``GR_DDP=1`` under ``torchrun --nproc_per_node 1`` joins a group of one and still wraps the model in DDP: the
    only way to exercise the NCCL path on a one-GPU machine (NCCL refuses two ranks on one device).
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1 and not (os.environ.get("GR_DDP") == "1" and "MASTER_ADDR" in os.environ):
        return Dist()
    import torch.distributed as dist

    if not dist.is_initialized():
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")
    return Dist(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", "0")), ddp=True)


# ---------------------------------------------------------------------- examples
def split_indices(ds, cfg: RunConfig | None = None, max_train: int | None = None, max_val: int | None = None,
                  max_test: int | None = None) -> dict[str, list[int]]:
    """The train/val/test question indices of a run (its ``max_*``, or the given ones): the first N of each split."""
    if cfg is not None:
        max_train, max_val, max_test = cfg.max_train, cfg.max_val, cfg.max_test
    cut = {"train": max_train, "val": max_val, "test": max_test}
    return {k: list(ds.split.get(k, []))[:n] for k, n in cut.items()}  # [:None] keeps the whole split


def build_examples(ds, indices: list[int], cfg: ModelConfig, store=None, desc: str = "examples") -> list[Example]:
    """Retrieve, textualize and (when a GNN is used) tensorize each question's graph.

    The graph is the dataset's PCST subgraph (``pcst``), the whole graph (``full``), KAPING's top-k triples
    (``kaping``) or nothing (``none``); see :class:`~gr_core.model.ModelConfig`.
    """
    from torch_geometric.data import Data

    from .baselines import retrieve_none
    from .graphqa import retrieve
    from .prompts import COT_BAG, ZERO_COT, label_for, question_for
    from .retrieval_eval import kaping_retriever

    kaping = kaping_retriever(cfg.kaping_k, store) if cfg.graph_source == "kaping" else None
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
            rows = res.node_rows if res is not None else np.arange(0)
            erows = res.edge_rows if res is not None else np.arange(0)
            ids = g.nodes.node_id.to_numpy()
            pos = np.full(int(ids.max()) + 1 if len(ids) else 1, -1, np.int64)
            pos[ids[rows]] = np.arange(len(rows))
            src, dst = g.edges.src.to_numpy()[erows], g.edges.dst.to_numpy()[erows]
            data = Data(x=torch.from_numpy(np.ascontiguousarray(x[rows])),
                        edge_index=torch.from_numpy(np.stack([pos[src], pos[dst]]).astype(np.int64)).view(2, -1),
                        edge_attr=torch.from_numpy(np.ascontiguousarray(edge_attr[erows])), num_nodes=len(rows))
        out.append(Example(uid=str(rec.graph_id), question=question, desc=res.desc if res is not None else "",
                           label=label_for(ds.name, rec.answers), answers=list(rec.answers), data=data))
    return out


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


def lr_at(step: int, steps_per_epoch: int, cfg: TrainConfig) -> float:
    """GR code ``adjust_learning_rate``: linear warm-up, then half-cycle cosine from ``lr`` to ``min_lr``.

    The warm-up lasts ``warmup_epochs`` epochs, or ``warmup_fraction`` of all steps when that is set (one warm-up
    epoch of a one-epoch run would never leave the warm-up).
    """
    epoch = (step + 1) / max(1, steps_per_epoch)
    warmup = cfg.warmup_epochs if cfg.warmup_fraction is None else cfg.warmup_fraction * cfg.num_epochs
    if epoch < warmup:
        return cfg.lr * epoch / warmup
    span = max(1e-9, cfg.num_epochs - warmup)
    return cfg.min_lr + (cfg.lr - cfg.min_lr) * 0.5 * (1 + math.cos(math.pi * min(1.0, (epoch - warmup) / span)))


GRAPH_PARTS = ("gnn.", "projector.", "soft_prompt")


def param_groups(model: GraphLLM, cfg: TrainConfig) -> list[dict]:
    """AdamW groups: the soft-prompt parts (GNN, projector, prompt vectors) and LoRA, each with its ``lr_scale``.

    ``lr_scale`` multiplies the scheduled lr at every step: ``graph_lr / lr`` for the soft-prompt parts, 1 for LoRA.
    """
    named = model.trainable_parameters()
    graph = [p for n, p in named.items() if n.startswith(GRAPH_PARTS)]
    rest = [p for n, p in named.items() if not n.startswith(GRAPH_PARTS)]
    scale = (cfg.graph_lr or cfg.lr) / cfg.lr
    return [g for g in ({"params": graph, "lr_scale": scale}, {"params": rest, "lr_scale": 1.0}) if g["params"]]


# ---------------------------------------------------------------------- training
def _save(path: Path, obj) -> None:
    import io

    buf = io.BytesIO()
    torch.save(obj, buf)
    atomic_write_bytes(path, buf.getvalue())


def _loss(model, module, batch, dist: Dist) -> tuple[torch.Tensor, float, float]:
    """``(loss to backpropagate, local loss sum, local label tokens)``; normalized by the global token count."""
    loss_sum, n = module(batch)
    _, global_n = dist.all_sum(0.0, float(n))
    # DDP averages gradients over processes, so scale by world size to get d(sum / global_n)
    return loss_sum * dist.world / max(global_n, 1.0), float(loss_sum.detach()), float(n)


def evaluate_validation(model: GraphLLM, examples: list[Example], batch_size: int, dist: Dist) -> tuple[float, float]:
    """Mean label-token loss over ``examples`` and the share whose label greedy decoding would produce exactly
    (one teacher-forced pass, sharded over processes; see :meth:`GraphLLM.forward`)."""
    model.eval()
    total, count, matched = 0.0, 0.0, 0.0
    order = sorted(range(len(examples)), key=lambda i: examples[i].num_prompt_tokens)
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size][dist.rank::dist.world]
            if not idx:
                continue
            batch = model.collate([examples[i] for i in idx], with_label=True).to(model.device)
            s, n, match = model(batch, with_match=True)
            total, count, matched = total + float(s), count + float(n), matched + float(match.sum())
    total, count, matched = dist.all_sum(total, count, matched)
    return total / max(count, 1.0), matched / max(len(examples), 1)


def fit(model: GraphLLM, train: list[Example], val: list[Example], cfg: TrainConfig, seed: int, ckpt_dir: Path,
        cfg_hash: str, dist: Dist = Dist(), on_epoch_end=None) -> list[dict]:
    """Train the trainable parts of ``model``; resume from ``ckpt_dir/last.pt`` when it matches ``cfg_hash``.

    Returns:
        the per-epoch history; the parameters of the epoch chosen on validation (``cfg.select_on``) are loaded
        into ``model`` on return.
    """
    params = list(model.trainable_parameters().values())
    optimizer = torch.optim.AdamW(param_groups(model, cfg), lr=cfg.lr, weight_decay=cfg.weight_decay, betas=cfg.betas)
    if not train:
        raise ValueError("fit: no training examples (does the dataset have a train split? webqsp_full is test-only)")
    module = model
    if dist.ddp:
        from torch.nn.parallel import DistributedDataParallel

        if model.device.type == "cuda":  # BatchNorm statistics over the global batch, as on one process
            torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)

        module = DistributedDataParallel(model, device_ids=[dist.local_rank] if model.device.type == "cuda" else None)
    lengths = [len(ex.desc_ids) + len(ex.question_ids) + len(ex.label_ids) for ex in train]
    steps_per_epoch = len(length_batches(lengths, cfg.batch_size, 0, cfg.bucket_window))
    history, best_val, best_epoch, start_epoch = [], float("inf"), -1, 0
    last, best = ckpt_dir / "last.pt", ckpt_dir / "best.pt"
    dtype = dtype_name(model.llm_dtype)
    if last.is_file():
        state = torch.load(last, map_location="cpu", weights_only=False)
        trained_in = state.get("llm_dtype") or legacy_dtype(model.cfg.llm.dtype, model.device.type)
        if state.get("config_hash") == cfg_hash and trained_in != dtype:
            # "auto" means another dtype on this machine: the epochs left would train in another precision
            if dist.main:
                print(f"note: {last} was trained with the LLM in {trained_in}, this machine runs it in {dtype}: "
                      "training starts over instead of resuming", flush=True)
        elif state.get("config_hash") == cfg_hash:
            model.load_trainable_state(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            history, best_val, best_epoch = state["history"], state["best_val"], state["best_epoch"]
            start_epoch = state["epoch"] + 1
            torch.set_rng_state(state["torch_rng"])
            random.setstate(state["py_rng"])
            np.random.set_state(state["np_rng"])
    step = start_epoch * steps_per_epoch
    for epoch in range(start_epoch, cfg.num_epochs):
        if epoch - best_epoch > cfg.patience and best_epoch >= 0:
            break
        model.train()
        t0, tokens, loss_total, loss_count = time.perf_counter(), 0, 0.0, 0.0
        batches = length_batches(lengths, cfg.batch_size, seed * 1000 + epoch, cfg.bucket_window)
        for batch_idx in progress(batches, desc=f"epoch {epoch}", disable=not dist.main):
            shard = batch_idx[dist.rank::dist.world]
            if len(batch_idx) < dist.world:  # too small to give every process an example: skipped by all
                continue
            for g in optimizer.param_groups:
                g["lr"] = lr_at(step, steps_per_epoch, cfg) * g["lr_scale"]
            batch = model.collate([train[i] for i in shard], with_label=True).to(model.device)
            optimizer.zero_grad(set_to_none=True)
            loss, s, n = _loss(model, module, batch, dist)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
            optimizer.step()
            step += 1
            tokens += batch.num_tokens
            loss_total, loss_count = loss_total + s, loss_count + n
        train_seconds = time.perf_counter() - t0
        loss_total, loss_count, tokens = dist.all_sum(loss_total, loss_count, float(tokens))
        t1 = time.perf_counter()
        val_loss, val_match = (evaluate_validation(model, val, cfg.eval_batch_size, dist) if val
                               else (loss_total / max(loss_count, 1), float("nan")))
        row = {"epoch": epoch, "train_loss": loss_total / max(loss_count, 1.0), "val_loss": val_loss,
               "val_match": val_match,
               "lr": optimizer.param_groups[0]["lr"], "train_seconds": round(train_seconds, 3),
               "val_seconds": round(time.perf_counter() - t1, 3), "train_tokens": int(tokens),
               "train_tokens_per_s": round(tokens / max(train_seconds, 1e-9), 1), "steps": step}
        history.append(row)
        key = cfg.selection_key(row)
        if key < best_val:
            best_val, best_epoch = key, epoch
            if dist.main:
                _save(best, {"config_hash": cfg_hash, "llm_dtype": dtype, "epoch": epoch,
                             "model": model.trainable_state()})
        if dist.main:
            _save(last, {"config_hash": cfg_hash, "llm_dtype": dtype, "epoch": epoch, "model": model.trainable_state(),
                         "optimizer": optimizer.state_dict(), "history": history, "best_val": best_val,
                         "best_epoch": best_epoch, "torch_rng": torch.get_rng_state(), "py_rng": random.getstate(),
                         "np_rng": np.random.get_state()})
        dist.barrier()
        if on_epoch_end is not None:
            on_epoch_end(epoch, row)
    if best.is_file():
        model.load_trainable_state(torch.load(best, map_location="cpu", weights_only=False)["model"])
    return history


def predict(model: GraphLLM, examples: list[Example], batch_size: int, desc: str = "generate",
            max_new_tokens: int | None = None) -> tuple[list[str], float]:
    """Greedy answers for ``examples`` in length-sorted batches (input order kept) and the seconds it took
    (``max_new_tokens``: the model's own budget when None)."""
    model.eval()
    order = sorted(range(len(examples)), key=lambda i: examples[i].num_prompt_tokens)
    answers = [""] * len(examples)
    t0 = time.perf_counter()
    for start in progress(range(0, len(order), batch_size), desc=desc):
        idx = order[start:start + batch_size]
        batch = model.collate([examples[i] for i in idx], with_label=False).to(model.device)
        for i, a in zip(idx, model.generate(batch, max_new_tokens)):
            answers[i] = a
    return answers, time.perf_counter() - t0


# ---------------------------------------------------------------------- one run
def run(cfg: RunConfig, run_dir: str | Path, ds=None, force: bool = False, on_epoch_end=None) -> dict:
    """Train (when there is anything to train) and evaluate one configuration; write its run directory.

    A finished run whose ``metrics.json`` carries the same config hash is returned as is (``force`` reruns); a
    finished run of another configuration in ``run_dir`` raises :class:`~gr_core.runs.RunConflictError` unless ``force``.

    Returns:
        the metrics dict written to ``metrics.json``.
    """
    from .evaluate import task_report, task_scores
    from .graphqa import DatasetConfig, load_dataset

    run_dir = Path(run_dir)
    cfg_hash = config_hash(cfg.to_dict())
    done = run_dir / "metrics.json"
    if not force and check_run_identity(run_dir, cfg.to_dict(), cfg_hash):
        return precision_of_reuse(read_json(done), cfg.model.llm, run_dir)
    dist = init_distributed()
    model_cfg = cfg.model
    if dist.ddp and torch.cuda.is_available():
        model_cfg = replace(model_cfg, llm=replace(model_cfg.llm, device=f"cuda:{dist.local_rank}"))
    seed_everything(cfg.seed)
    if ds is None:
        ds = load_dataset(DatasetConfig(cfg.dataset, hops=cfg.hops))
    if dist.main:
        done.unlink(missing_ok=True)  # a rerun interrupted later must not leave the old run's metrics as "finished"
        write_json(run_dir / "config.json", {"name": cfg.name, "config_hash": cfg_hash, **cfg.to_dict()})
        write_json(run_dir / "env.json", environment_record())
    t_build = time.perf_counter()
    idx = split_indices(ds, cfg)
    model = GraphLLM(model_cfg, in_dim=int(ds.text_emb.shape[1]),
                     soft_prompt_init=SOFT_PROMPT_INIT.get(cfg.dataset, DEFAULT_SOFT_PROMPT_INIT))
    trained = model_cfg.trainable and cfg.train.num_epochs > 0
    splits = ("train", "val", "test") if trained else ("test",)
    examples = {s: model.tokenize(build_examples(ds, idx[s], model_cfg, desc=f"{cfg.dataset} {s}")) for s in splits}
    build_seconds = time.perf_counter() - t_build
    history = []
    if trained:
        history = fit(model, examples["train"], examples["val"], cfg.train, cfg.seed, run_dir / "ckpt", cfg_hash,
                      dist, on_epoch_end)
        if dist.main:
            write_json(run_dir / "history.json", history)
    metrics: dict = {}
    if dist.main:
        test = examples["test"]
        answers, gen_seconds = predict(model, test, cfg.train.eval_batch_size, desc=f"{cfg.name} test")
        lines = []
        for ex, a in zip(test, answers):
            lines.append(json.dumps({"id": ex.uid, "prediction": a, "answers": ex.answers,
                                     **task_scores(cfg.dataset, a, ex.answers)}))
        atomic_write_bytes(run_dir / "predictions.jsonl", ("\n".join(lines) + "\n").encode())
        prompt_tokens = [len(model.template.prefix) + model.num_slots + ex.num_prompt_tokens + len(model.template.suffix)
                         for ex in test]
        trainable = sum(p.numel() for p in model.trainable_parameters().values())
        report = task_report(cfg.dataset, answers, [ex.answers for ex in test])
        if "precision" in report:  # the KGQA answers' precision score; "precision" is the run's precision record
            report["answer_precision"] = report.pop("precision")
        metrics = {"name": cfg.name, "dataset": cfg.dataset, "method": cfg.method, "seed": cfg.seed,
                   "config_hash": cfg_hash, **report,
                   "num_train": len(examples.get("train", [])), "num_val": len(examples.get("val", [])),
                   "num_test": len(test), "epochs_run": len(history),
                   "best_epoch": int(np.argmin([cfg.train.selection_key(h) for h in history])) if history else None,
                   "train_seconds": round(sum(h["train_seconds"] for h in history), 2),
                   "seconds_per_epoch": round(float(np.mean([h["train_seconds"] for h in history])), 2) if history else None,
                   "train_tokens_per_s": round(float(np.mean([h["train_tokens_per_s"] for h in history])), 1) if history else None,
                   "inference_seconds": round(gen_seconds, 2), "answers_per_s": round(len(test) / max(gen_seconds, 1e-9), 3),
                   "build_seconds": round(build_seconds, 2), "mean_prompt_tokens": round(float(np.mean(prompt_tokens)), 1) if test else 0.0,
                   "trainable_params": trainable, "world_size": dist.world,
                   "precision": precision_record(model.llm_dtype, model.device.type, model_cfg.llm.dtype)}
        write_json(done, metrics)
    dist.barrier()
    return metrics


def precision_of_reuse(metrics: dict, llm: LLMConfig, run_dir: str | Path | None = None) -> dict:
    """A finished run's metrics, annotated when this machine resolves ``llm.dtype`` to another dtype than the run's.

    A configuration says ``dtype="auto"``; what that means depends on the machine (:mod:`gr_core.precision`), so a
    committed run can be reused where it would now be computed in another precision. Its numbers are returned as
    recorded, never mixed silently: ``precision_here`` and ``precision_note`` say what differs, and a line is printed.
    """
    recorded = recorded_dtype(metrics, run_dir, llm.dtype, llm.device)
    device = resolve_device(llm.device)
    here = dtype_name(resolve_dtype(llm.dtype, device))
    if recorded == here:
        return metrics
    cpu = run_precision(metrics).get("cpu_model", "a CPU not recorded")
    note = (f"run {metrics.get('name')} was computed in {recorded} on {cpu}; this machine resolves {llm.dtype!r} to "
            f"{here}: its recorded numbers are reused, not recomputed (force=True recomputes them here)")
    print(f"note: {note}", flush=True)
    return {**metrics, "precision_here": precision_record(resolve_dtype(llm.dtype, device), device, llm.dtype),
            "precision_note": note}


def run_settings(llm_model: str = "embedded:smollm2-135m-instruct", device: str = "auto", max_new_tokens: int = 32,
                 gnn_kind: str = "gt", gnn_hidden: int = 1024, gnn_layers: int = 4, gnn_heads: int = 4,
                 num_epochs: int = 10, lr: float = 1e-5, batch_size: int = 8, eval_batch_size: int = 16,
                 max_train: int = 0, max_val: int = 0, max_test: int = 0, max_txt_len: int = 512,
                 warmup_fraction: float | None = None, system_prompt: str | None = None,
                 select_on: str | None = None) -> dict:
    """The :func:`make_run_config` keywords from the flat notebook parameters (0 keeps a whole split).

    Notebooks 03, 05, 06 and 07 build their runs through this one function, so equal parameters give equal config
    hashes and a run trained by one notebook is reused by the others. Defaults are the paper's (GR App. B.1).
    """
    return dict(
        llm=LLMConfig(model=llm_model, device=device, max_new_tokens=max_new_tokens),
        gnn=GNNConfig(kind=gnn_kind, hidden=gnn_hidden, num_layers=gnn_layers, heads=gnn_heads),
        train=TrainConfig(num_epochs=num_epochs, lr=lr, batch_size=batch_size, eval_batch_size=eval_batch_size,
                          warmup_fraction=warmup_fraction, select_on=select_on),
        max_train=max_train or None, max_val=max_val or None, max_test=max_test or None, max_txt_len=max_txt_len,
        system_prompt=system_prompt,
    )


def dataset_settings(params: dict, per_dataset: dict | None, datasets) -> dict[str, dict]:
    """:func:`run_settings` per dataset: the flat notebook ``params`` with ``per_dataset[name]`` on top.

    A key ``"dataset/method"`` sets one method's runs on that dataset, on top of the dataset's own settings.

    >>> s = dataset_settings({"max_train": 128}, {"explagraphs": {"max_train": 0},
    ...                      "explagraphs/graph_token": {"num_epochs": 1}}, ["explagraphs", "webqsp"])
    >>> s["explagraphs"]["max_train"], s["webqsp"]["max_train"], s["explagraphs/graph_token"]["train"].num_epochs
    (None, 128, 1)
    """
    per_dataset = per_dataset or {}
    unknown = sorted({key.split("/")[0] for key in per_dataset} - set(datasets))
    if unknown:
        raise ValueError(f"per-dataset settings name datasets that are not in the plan: {unknown}")
    out = {name: run_settings(**{**params, **(per_dataset.get(name) or {})}) for name in datasets}
    for key in (k for k in per_dataset if "/" in k):
        name = key.split("/")[0]
        out[key] = run_settings(**{**params, **(per_dataset.get(name) or {}), **(per_dataset[key] or {})})
    return out


# notebook 03's parameter defaults that no preset sets (tests/test_config.py checks them against the notebook)
NOTEBOOK_DEFAULTS = dict(llm_model="embedded:smollm2-135m-instruct", device="auto", gnn_kind="gt", gnn_heads=4,
                         eval_batch_size=16, warmup_fraction=None, system_prompt=None)


def preset_run_config(preset: str, dataset: str, method: str, seed: int = 0, notebook: str = "03_training",
                      overrides: dict | None = None) -> RunConfig:
    """The run configuration notebook ``notebook`` builds for ``(dataset, method, seed)`` under ``preset``.

    The same keywords as the notebook's (``_training`` block, the notebook's parameters, ``per_dataset``), so a run
    made here (``python -m gr_core.train --preset cpu --dataset explagraphs --method g_retriever --seed 1``, e.g. one
    seed per process) has the notebook's config hash and the notebook reuses it.
    """
    from .config import notebook_parameters

    params = {**NOTEBOOK_DEFAULTS, **notebook_parameters(preset, notebook, overrides)}
    keys = set(run_settings.__code__.co_varnames[:run_settings.__code__.co_argcount])
    flat = {k: v for k, v in params.items() if k in keys and k != "select_on"}
    settings = dataset_settings(flat, params.get("per_dataset"), [dataset])
    return make_run_config(dataset, method, seed, **settings.get(f"{dataset}/{method}", settings[dataset]))


def trained_model(cfg: RunConfig, run_dir: str | Path, ds=None) -> GraphLLM:
    """The run's model with its best checkpoint loaded, training it first when needed.

    Reuses a finished run (same config hash) whose ``ckpt/best.pt`` exists; a finished run without its checkpoint
    (``ckpt/`` is git-ignored, so a fresh clone has the metrics but not the weights) is rerun so that the returned
    model is the one the metrics describe. Inference-only configurations return the untouched model.
    """
    from .graphqa import DatasetConfig, load_dataset

    run_dir = Path(run_dir)
    if ds is None:
        ds = load_dataset(DatasetConfig(cfg.dataset, hops=cfg.hops))
    trained = cfg.model.trainable and cfg.train.num_epochs > 0
    best = run_dir / "ckpt" / "best.pt"
    state = torch.load(best, map_location="cpu", weights_only=False) if trained and best.is_file() else None
    cfg_hash = config_hash(cfg.to_dict())
    finished = check_run_identity(run_dir, cfg.to_dict(), cfg_hash)  # refuses another configuration's run
    if trained and (state is None or state.get("config_hash") != cfg_hash):
        run(cfg, run_dir, ds=ds, force=finished)  # this configuration's metrics, its weights missing: retrain
        state = torch.load(best, map_location="cpu", weights_only=False)
    else:
        run(cfg, run_dir, ds=ds)  # a no-op when finished; inference-only runs write their metrics
    model = GraphLLM(cfg.model, in_dim=int(ds.text_emb.shape[1]),
                     soft_prompt_init=SOFT_PROMPT_INIT.get(cfg.dataset, DEFAULT_SOFT_PROMPT_INIT))
    if state is not None:
        model.load_trainable_state(state["model"])
    return model.eval()


def score_checkpoint(run_dir: str | Path, checkpoint: str = "last", splits=("val", "test"), ds=None) -> dict:
    """Score a run's ``ckpt/<checkpoint>.pt`` (``last``: the final epoch; ``best``: the kept one) on ``splits``.

    For diagnosis: early stopping keeps the lowest validation loss, which need not be the best accuracy.

    Returns:
        ``{"epoch", split: {"score", "n"}}`` with the dataset's Table 3 metric.
    """
    from .evaluate import task_report
    from .graphqa import DatasetConfig, load_dataset

    run_dir = Path(run_dir)
    raw = {k: v for k, v in read_json(run_dir / "config.json").items() if k not in ("name", "config_hash")}
    cfg = RunConfig.from_dict(raw)
    ds = ds if ds is not None else load_dataset(DatasetConfig(cfg.dataset, hops=cfg.hops))
    state = torch.load(run_dir / "ckpt" / f"{checkpoint}.pt", map_location="cpu", weights_only=False)
    model = GraphLLM(cfg.model, in_dim=int(ds.text_emb.shape[1]),
                     soft_prompt_init=SOFT_PROMPT_INIT.get(cfg.dataset, DEFAULT_SOFT_PROMPT_INIT))
    model.load_trainable_state(state["model"])
    idx = split_indices(ds, cfg)
    out: dict = {"epoch": int(state["epoch"])}
    for split in splits:
        examples = model.tokenize(build_examples(ds, idx[split], cfg.model, desc=split))
        answers, _ = predict(model, examples, cfg.train.eval_batch_size, desc=split)
        report = task_report(cfg.dataset, answers, [ex.answers for ex in examples])
        out[split] = {"score": report.get("score"), "n": len(examples)}
    return out


def run_k_grid(dataset: str, k_grid, ce_grid, seed: int, runs_dir: str | Path, ds=None, **settings) -> list[str]:
    """G-Retriever once per (k, C_e) (GR Table 10; run names ``<dataset>-g_retriever-k<k>-ce<C_e>-seed<s>``).

    Returns:
        the run names, in grid order (read them back with :func:`gr_core.results.k_sweep_table`).
    """
    names = []
    for k in k_grid:
        for ce in ce_grid:
            cfg = make_run_config(dataset, "g_retriever", seed, variant=f"k{k}-ce{ce}", top_k=int(k),
                                  edge_cost=float(ce), **settings)
            m = run(cfg, Path(runs_dir) / cfg.name, ds=ds)
            print(f"{cfg.name}: test {m['score']:.2f}, {m['mean_prompt_tokens']:.0f} prompt tokens", flush=True)
            names.append(cfg.name)
    return names


def run_llm_sizes(dataset: str, llm_models: list[str], seed: int, runs_dir: str | Path, params: dict,
                  per_dataset: dict | None = None, ds=None) -> list[tuple[str, str | None]]:
    """G-Retriever on ``dataset`` once per LLM, the same data and budget for each (GR Table 8).

    Args:
        llm_models: the first is the reference (its run is the plain ``<dataset>-g_retriever-seed<s>``, shared with
            notebook 03); the others are variants ``llm-<name>``. An embedded LLM whose optional package is missing
            is skipped (:func:`gr_core.llm.unavailable` says why).
        params, per_dataset: the flat notebook parameters and per-dataset settings (:func:`dataset_settings`; keys
            for other datasets are ignored).
    Returns:
        ``(llm, run name or None)`` per LLM, for :func:`gr_core.results.table8`.
    """
    from .graphqa import DatasetConfig, load_dataset
    from .llm import unavailable

    mine = {k: v for k, v in (per_dataset or {}).items() if k.split("/")[0] == dataset}
    settings = dataset_settings(params, mine, [dataset])[dataset]
    rows = []
    for i, model in enumerate(llm_models):
        if (why := unavailable(model)):
            print(f"{model}: skipped, {why}", flush=True)
            rows.append((model, None))
            continue
        ds = ds if ds is not None else load_dataset(DatasetConfig(dataset))
        variant = "" if i == 0 else "llm-" + model.replace("/", "_").replace(":", "_")
        cfg = make_run_config(dataset, "g_retriever", seed, variant=variant,
                              **{**settings, "llm": replace(settings["llm"], model=model)})
        run(cfg, Path(runs_dir) / cfg.name, ds=ds)
        rows.append((model, cfg.name))
    return rows


def run_plan(plan: dict[str, list[str]], seeds: list[int], runs_dir: str | Path, force: bool = False,
             by_dataset: dict[str, dict] | None = None, **settings) -> "pd.DataFrame":
    """Run every (dataset, method, seed) of ``plan`` (each dataset loaded once); return their metrics.

    A configuration with nothing to train runs once, with the first seed (greedy decoding makes the others equal).

    Args:
        plan: dataset name -> method names (see :data:`gr_core.model.METHODS`).
        by_dataset: dataset name (or ``"dataset/method"``) -> its own settings (from :func:`dataset_settings`),
            used instead of ``settings``.
        settings: :func:`make_run_config` keywords shared by every run (``llm``, ``gnn``, ``train``, ``max_train`` ...).
    Returns:
        one row per run (the ``metrics.json`` contents), in plan order.
    """
    import pandas as pd

    from .graphqa import DatasetConfig, load_dataset

    rows = []
    for dataset, methods in plan.items():
        own = dict((by_dataset or {}).get(dataset) or settings)
        ds = load_dataset(DatasetConfig(dataset, hops=own.get("hops", 2)))
        for method in methods:
            mine = (by_dataset or {}).get(f"{dataset}/{method}") or own
            first = make_run_config(dataset, method, seeds[0], **mine)
            # greedy answers of an untrained configuration do not depend on the seed: one run stands for all
            for seed in seeds if first.model.trainable and first.train.num_epochs > 0 else seeds[:1]:
                cfg = make_run_config(dataset, method, seed, **mine)
                t0 = time.perf_counter()
                metrics = run(cfg, Path(runs_dir) / cfg.name, ds=ds, force=force)
                print(f"{cfg.name}: score {metrics['score']:.4f} on {metrics['num_test']} test questions "
                      f"({time.perf_counter() - t0:.0f} s)", flush=True)
                rows.append(metrics)
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gr_core.train", description=__doc__.split("\n")[0])
    parser.add_argument("--config", help="a RunConfig JSON file (see RunConfig.to_dict)")
    parser.add_argument("--run-dir", help="where the run directory is written (with --preset: the preset's runs/)")
    parser.add_argument("--preset", help="instead of --config: the run notebook 03 builds under this preset ...")
    parser.add_argument("--dataset", help="... for this dataset")
    parser.add_argument("--method", help="... this method")
    parser.add_argument("--seed", type=int, default=0, help="... and this seed")
    parser.add_argument("--force", action="store_true", help="rerun even when a finished run matches the config")
    args = parser.parse_args(argv)
    if args.preset:
        if not (args.dataset and args.method) or args.config:
            parser.error("--preset needs --dataset and --method, and no --config")
        from .paths import outputs_root

        cfg = preset_run_config(args.preset, args.dataset, args.method, args.seed)
        run_dir = args.run_dir or outputs_root(args.preset) / "runs" / cfg.name
    elif args.config and args.run_dir:
        try:
            raw = json.loads(Path(args.config).read_text())
        except (OSError, json.JSONDecodeError) as err:
            parser.error(f"cannot read --config {args.config}: {err}")
        cfg, run_dir = RunConfig.from_dict({k: v for k, v in raw.items() if k not in ("name", "config_hash")}), args.run_dir
    else:
        parser.error("give --config and --run-dir, or --preset, --dataset and --method")
    metrics = run(cfg, run_dir, force=args.force)
    if metrics:
        print(json.dumps({k: metrics[k] for k in ("name", "score", "num_test", "epochs_run") if k in metrics}))
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
