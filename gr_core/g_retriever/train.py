"""Training and evaluation of one configuration: a run (GR code ``train.py``, ``inference.py``; docs/method.md §1.5).

``run(cfg, run_dir)`` builds the examples (:mod:`~gr_core.g_retriever.examples`), trains when the configuration has
trainable parts (GR code's optimization: :class:`~gr_core.g_retriever.run_config.TrainConfig`), reloads the checkpoint
chosen on validation, generates on the test split and writes the run directory::

    run_dir/config.json        the RunConfig and its hash
    run_dir/env.json           package versions, machine, git commit
    run_dir/history.json       per-epoch train/val loss, validation greedy match, learning rate, seconds, tokens/s
    run_dir/predictions.jsonl  one line per test question
    run_dir/metrics.json       the metrics and timings (written last: its presence means the run finished)
    run_dir/ckpt/{last,best}.pt  trainable parameters (+ optimizer state in last.pt); git-ignored

Under ``torchrun`` (:mod:`~gr_core.g_retriever.distributed`) every process walks the same seeded batch order and takes
a strided shard of each global batch; the loss is normalized by the global label-token count, so N processes follow
one process's trajectory. Only rank 0 writes files and generates.
"""
from __future__ import annotations

import io
import json
import math
import random
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel

from ..config import LLMConfig, resolve_device
from ..evaluate import task_report, task_scores
from ..graphqa import DATASET_BUILD, DatasetConfig, data_inputs, load_dataset
from ..llm import weights_identity
from ..precision import dtype_name, legacy_dtype, precision_record, recorded_dtype, resolve_dtype, run_precision
from ..runs import (atomic_write_bytes, changed_inputs, check_run_identity, config_hash, environment_record,
                    folder_content, progress, read_json, seed_everything, write_json)
from .distributed import Dist, init_distributed
from .examples import build_examples, example_lengths, length_batches, split_indices
from .model import DEFAULT_SOFT_PROMPT_INIT, SOFT_PROMPT_INIT, Example, GraphLLM
from .run_config import RunConfig, TrainConfig, make_run_config  # noqa: F401 (re-exported: a run and its config)


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
    buf = io.BytesIO()
    torch.save(obj, buf)
    atomic_write_bytes(path, buf.getvalue())


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
        cfg_hash: str, dist: Dist = Dist(), on_epoch_end=None, inputs: dict | None = None) -> list[dict]:
    """Train the trainable parts of ``model``; resume from ``ckpt_dir/last.pt`` when it matches ``cfg_hash`` and
    ``inputs`` (:func:`run_inputs`; a checkpoint saved before inputs were recorded matches any).

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
        if model.device.type == "cuda":  # BatchNorm statistics over the global batch, as on one process
            torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)

        module = DistributedDataParallel(model, device_ids=[dist.local_rank] if model.device.type == "cuda" else None)
    lengths = example_lengths(train)
    steps_per_epoch = len(length_batches(lengths, cfg.batch_size, 0, cfg.bucket_window))
    history, best_val, best_epoch, start_epoch = [], float("inf"), -1, 0
    last, best = ckpt_dir / "last.pt", ckpt_dir / "best.pt"
    dtype = dtype_name(model.llm_dtype)
    try:
        state = torch.load(last, map_location="cpu", weights_only=False) if last.is_file() else None
    except Exception as err:  # a checkpoint cut short (a full disk, a copy): counted as none, as seed_progress does
        if dist.main:
            print(f"note: {last} is unreadable ({type(err).__name__}): training starts over", flush=True)
        state = None
    if state is not None:
        trained_in = state.get("llm_dtype") or legacy_dtype(model.cfg.llm.dtype, model.device.type)
        same = state.get("config_hash") == cfg_hash and not changed_inputs(state.get("inputs"), inputs)
        if not same and dist.main:
            print(f"note: {last} was trained from another config or other inputs: training starts over", flush=True)
        if same and trained_in != dtype:
            # "auto" means another dtype on this machine: the epochs left would train in another precision
            if dist.main:
                print(f"note: {last} was trained with the LLM in {trained_in}, this machine runs it in {dtype}: "
                      "training starts over instead of resuming", flush=True)
        elif same:
            model.load_trainable_state(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            history, best_val, best_epoch = state["history"], state["best_val"], state["best_epoch"]
            start_epoch = state["epoch"] + 1
            torch.set_rng_state(state["torch_rng"])
            if state.get("cuda_rng") is not None and model.device.type == "cuda" and not dist.ddp:
                torch.cuda.set_rng_state(state["cuda_rng"], model.device)  # GPU dropout goes on as if never stopped
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
            loss_sum, n = module(batch)
            _, global_n = dist.all_sum(0.0, float(n))
            # DDP averages gradients over processes, so scale by world size to get d(sum / global_n)
            (loss_sum * dist.world / max(global_n, 1.0)).backward()
            torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
            optimizer.step()
            step += 1
            tokens += batch.num_tokens
            loss_total, loss_count = loss_total + float(loss_sum.detach()), loss_count + float(n)
        if model.device.type == "cuda":
            torch.cuda.synchronize(model.device)  # the last step's kernels belong to this epoch's time
        train_seconds = time.perf_counter() - t0
        loss_total, loss_count, tokens = dist.all_sum(loss_total, loss_count, float(tokens))
        t1 = time.perf_counter()
        val_loss, val_match = (evaluate_validation(model, val, cfg.eval_batch_size, dist) if val
                               else (loss_total / max(loss_count, 1), float("nan")))
        row = {"epoch": epoch, "train_loss": loss_total / max(loss_count, 1.0), "val_loss": val_loss,
               "val_match": val_match, "lr": optimizer.param_groups[0]["lr"], "train_seconds": round(train_seconds, 3),
               "val_seconds": round(time.perf_counter() - t1, 3), "train_tokens": int(tokens),
               "train_tokens_per_s": round(tokens / max(train_seconds, 1e-9), 1), "steps": step}
        history.append(row)
        key = cfg.selection_key(row)
        if key < best_val:
            best_val, best_epoch = key, epoch
        if dist.main:
            ckpt = {"config_hash": cfg_hash, "inputs": inputs, "llm_dtype": dtype, "epoch": epoch,
                    "model": model.trainable_state()}
            if best_epoch == epoch:
                _save(best, ckpt)
            _save(last, {**ckpt, "cuda_rng": torch.cuda.get_rng_state(model.device)
                         if model.device.type == "cuda" else None,
                         "optimizer": optimizer.state_dict(), "history": history, "best_val": best_val,
                         "best_epoch": best_epoch, "torch_rng": torch.get_rng_state(), "py_rng": random.getstate(),
                         "np_rng": np.random.get_state()})
        dist.barrier()
        if on_epoch_end is not None:
            on_epoch_end(epoch, row)
    if best.is_file() and best_epoch >= 0:  # a best.pt left by another configuration is never loaded
        state = torch.load(best, map_location="cpu", weights_only=True)
        if state.get("config_hash") == cfg_hash and not changed_inputs(state.get("inputs"), inputs):
            model.load_trainable_state(state["model"])
    return history


def predict(model: GraphLLM, examples: list[Example], batch_size: int, desc: str = "generate",
            max_new_tokens: int | None = None) -> tuple[list[str], float]:
    """Greedy answers for ``examples`` in length-sorted batches (input order kept) and the seconds it took
    (``max_new_tokens``: the model's own budget when None)."""
    answers, seconds = predict_timed(model, examples, batch_size, desc, max_new_tokens)
    return answers, sum(seconds)


def predict_timed(model: GraphLLM, examples: list[Example], batch_size: int, desc: str = "generate",
                  max_new_tokens: int | None = None) -> tuple[list[str], list[float]]:
    """:func:`predict` with each example's share of its batch's seconds (what examples of several kinds answered in
    one pass cost each kind)."""
    model.eval()
    order = sorted(range(len(examples)), key=lambda i: examples[i].num_prompt_tokens)
    answers, seconds = [""] * len(examples), [0.0] * len(examples)
    for start in progress(range(0, len(order), batch_size), desc=desc):
        t0 = time.perf_counter()
        idx = order[start:start + batch_size]
        batch = model.collate([examples[i] for i in idx], with_label=False).to(model.device)
        texts = model.generate(batch, max_new_tokens)
        share = (time.perf_counter() - t0) / len(idx)
        for i, text in zip(idx, texts):
            answers[i], seconds[i] = text, share
    return answers, seconds


# ---------------------------------------------------------------------- one run
def run_inputs(cfg: RunConfig, ds=None) -> dict:
    """What a run reads besides its settings, recorded in its ``metrics.json`` and checkpoints and checked when it is
    reused (:func:`~gr_core.runs.check_run_identity`): ``ds``'s raw data and sentence encoder
    (:func:`~gr_core.graphqa.data_inputs`; default: the dataset's), how it was built (its split seed, size and
    neighbourhoods: another split is other questions) and the LLM's weights, the same on every machine; a local LLM
    folder's content too (``llm_content``: weights rewritten in place keep their names and sizes; runs recorded
    before it are compared without it)."""
    data = DatasetConfig(cfg.dataset, hops=cfg.hops) if ds is None else getattr(ds, "config", None)
    built = {} if data is None else {"dataset": {k: getattr(data, k) for k in DATASET_BUILD}}
    model = cfg.model.llm.model
    local = not model.startswith("embedded:") and Path(model).expanduser().exists()
    return (data_inputs(data) | built | {"llm": weights_identity(model)}
            | ({"llm_content": folder_content(model)} if local else {}))


def check_dataset(cfg: RunConfig, ds) -> None:
    """A ``ds`` given to :func:`run` must be the dataset ``cfg`` names (and, for MetaQA, its hops): the run directory
    records ``cfg``'s, so another one would be trained on and filed under the wrong name."""
    data = getattr(ds, "config", None)
    if data is not None and (data.name != cfg.dataset or (cfg.dataset == "metaqa" and data.hops != cfg.hops)):
        raise ValueError(f"run: ds is {data.name} (hops={data.hops}) but the RunConfig names {cfg.dataset} "
                         f"(hops={cfg.hops}): pass the dataset the configuration names, or ds=None to load it")


def run(cfg: RunConfig, run_dir: str | Path, ds=None, force: bool = False, on_epoch_end=None) -> dict:
    """Train (when there is anything to train) and evaluate one configuration; write its run directory.

    A finished run whose ``metrics.json`` carries the same config hash is returned as is (``force`` reruns it from its
    first epoch); a finished run of another configuration, or made from other :func:`run_inputs`, in ``run_dir``
    raises :class:`~gr_core.runs.RunConflictError` unless ``force``.

    Returns:
        the metrics dict written to ``metrics.json``.
    """
    run_dir = Path(run_dir)
    check_dataset(cfg, ds)
    cfg_hash = config_hash(cfg.to_dict())
    done = run_dir / "metrics.json"
    inputs = run_inputs(cfg, ds)
    if not force and check_run_identity(run_dir, cfg.to_dict(), cfg_hash, inputs):
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
        if force:  # its checkpoints too: a forced rerun trains anew, not on from the last epoch it had
            for name in ("last.pt", "best.pt"):
                (run_dir / "ckpt" / name).unlink(missing_ok=True)
        write_json(run_dir / "config.json", {"name": cfg.name, "config_hash": cfg_hash, **cfg.to_dict()})
        write_json(run_dir / "env.json", environment_record())
    dist.barrier()  # no process reads a checkpoint before a forced rerun has removed it
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
                      dist, on_epoch_end, inputs)
        if dist.main:
            write_json(run_dir / "history.json", history)
    metrics: dict = {}
    if dist.main:
        test = examples["test"]
        answers, gen_seconds = predict(model, test, cfg.train.eval_batch_size, desc=f"{cfg.name} test")
        lines = [json.dumps({"id": ex.uid, "prediction": a, "answers": ex.answers,
                             **task_scores(cfg.dataset, a, ex.answers)}) for ex, a in zip(test, answers)]
        atomic_write_bytes(run_dir / "predictions.jsonl", ("\n".join(lines) + "\n").encode())
        prompt_tokens = [len(model.template.prefix) + model.num_slots + ex.num_prompt_tokens
                         + len(model.template.suffix) for ex in test]
        trainable = sum(p.numel() for p in model.trainable_parameters().values())
        report = task_report(cfg.dataset, answers, [ex.answers for ex in test])
        if "precision" in report:  # the KGQA answers' precision score; "precision" is the run's precision record
            report["answer_precision"] = report.pop("precision")
        metrics = {"name": cfg.name, "dataset": cfg.dataset, "method": cfg.method, "seed": cfg.seed,
                   "config_hash": cfg_hash, "inputs": inputs, **report, "num_train": len(examples.get("train", [])),
                   "num_val": len(examples.get("val", [])), "num_test": len(test), "epochs_run": len(history),
                   "best_epoch": int(np.argmin([cfg.train.selection_key(h) for h in history])) if history else None,
                   "train_seconds": round(sum(h["train_seconds"] for h in history), 2),
                   "seconds_per_epoch": round(float(np.mean([h["train_seconds"] for h in history])), 2)
                   if history else None,
                   "train_tokens_per_s": round(float(np.mean([h["train_tokens_per_s"] for h in history])), 1)
                   if history else None,
                   "inference_seconds": round(gen_seconds, 2),
                   "answers_per_s": round(len(test) / max(gen_seconds, 1e-9), 3),
                   "build_seconds": round(build_seconds, 2),
                   "mean_prompt_tokens": round(float(np.mean(prompt_tokens)), 1) if test else 0.0,
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
    device = resolve_device(llm.device)  # only names the precision a run would use here
    here = dtype_name(resolve_dtype(llm.dtype, device))
    if recorded == here:
        return metrics
    cpu = run_precision(metrics).get("cpu_model", "a CPU not recorded")
    note = (f"run {metrics.get('name')} was computed in {recorded} on {cpu}; this machine resolves {llm.dtype!r} to "
            f"{here}: its recorded numbers are reused, not recomputed (force=True recomputes them here)")
    print(f"note: {note}", flush=True)
    return {**metrics, "precision_here": precision_record(resolve_dtype(llm.dtype, device), device, llm.dtype),
            "precision_note": note}


def trained_model(cfg: RunConfig, run_dir: str | Path, ds=None) -> GraphLLM:
    """The run's model with its best checkpoint loaded, training it first when needed.

    Reuses a finished run (same config hash) whose ``ckpt/best.pt`` exists; a finished run without its checkpoint
    (``ckpt/`` is git-ignored, so a fresh clone has the metrics but not the weights) is rerun so that the returned
    model is the one the metrics describe. Inference-only configurations return the untouched model.
    """
    run_dir = Path(run_dir)
    if ds is None:
        ds = load_dataset(DatasetConfig(cfg.dataset, hops=cfg.hops))
    state = None
    if cfg.model.trainable and cfg.train.num_epochs > 0:  # inference-only: the untouched model, no run needed
        best = run_dir / "ckpt" / "best.pt"
        state = torch.load(best, map_location="cpu", weights_only=True) if best.is_file() else None
        cfg_hash, inputs = config_hash(cfg.to_dict()), run_inputs(cfg, ds)
        finished = check_run_identity(run_dir, cfg.to_dict(), cfg_hash, inputs)  # refuses another run's directory
        stale = state is None or state.get("config_hash") != cfg_hash or changed_inputs(state.get("inputs"), inputs)
        if stale or not finished:
            # trains, finishes an interrupted training, or retrains a finished run whose weights are missing
            run(cfg, run_dir, ds=ds, force=finished and stale)
            state = torch.load(best, map_location="cpu", weights_only=True)
    return load_run_model(run_dir, int(ds.text_emb.shape[1]), cfg=cfg, state=state)


def load_run_model(run_dir: str | Path, in_dim: int, cfg: RunConfig | None = None, state: dict | None = None,
                   device: str | None = None) -> GraphLLM:
    """A run's :class:`GraphLLM` (eval mode) with the trainable parameters of its ``ckpt/best.pt``.

    Args:
        in_dim: the width of the text embeddings its graph encoder reads.
        cfg: the run's configuration (default: its ``config.json``); an inference-only one loads no checkpoint.
        state: the checkpoint already read (``torch.load``), else read here.
        device: run the LLM on this device instead of the recorded one.
    """
    cfg = cfg or RunConfig.read(run_dir)
    model_cfg = cfg.model if device is None else replace(cfg.model, llm=replace(cfg.model.llm, device=device))
    model = GraphLLM(model_cfg, in_dim=in_dim,
                     soft_prompt_init=SOFT_PROMPT_INIT.get(cfg.dataset, DEFAULT_SOFT_PROMPT_INIT))
    if state is None and cfg.model.trainable and cfg.train.num_epochs > 0:
        state = torch.load(Path(run_dir) / "ckpt" / "best.pt", map_location="cpu", weights_only=True)
    if state is not None:
        model.load_trainable_state(state["model"])
    return model.eval()

