"""ExplaGraphs training settings on the whole split: accuracy after every epoch (docs/explagraphs_learning.md).

    python bench/explagraphs_sweep.py g_retriever:1e-3:8:2 graph_token:1e-3:8:2::::nosys ...

Each argument names one run: ``method:lr:batch:epochs[:norm[:graph_lr[:seed[:nosys]]]]`` (``norm``: the
``graph_token_norm`` option; ``nosys``: an empty system prompt). Every run trains with the project's own
``train.fit`` on the 1,659 training graphs (GNN 4 x 256, 10% warm-up, fp32) and, after each epoch, answers the 553
validation and 554 test questions with ``train.predict``; selection is meant to use the validation column. A GPU
makes a sweep take minutes (an epoch is about 17 minutes on 2 CPU cores). Writes
``outputs/bench/explagraphs_sweep.json``
(set ``GR_LLM`` to a model directory to use one other than the embedded SmolLM2).
"""
import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import torch
from common import write_result

from gr_core.config import LLMConfig
from gr_core.evaluate import task_scores
from gr_core.g_retriever.examples import build_examples, split_indices
from gr_core.g_retriever.graph_encoder import GNNConfig
from gr_core.g_retriever.model import SOFT_PROMPT_INIT, GraphLLM
from gr_core.g_retriever.train import TrainConfig, fit, make_run_config, predict
from gr_core.graphqa import DatasetConfig, load_dataset
from gr_core.runs import seed_everything


def parse(name: str) -> dict:
    parts = name.split(":") + [""] * 8
    return dict(method=parts[0], lr=float(parts[1]), batch=int(parts[2]), epochs=int(parts[3]),
                norm=parts[4] or "none", graph_lr=float(parts[5]) if parts[5] else None,
                seed=int(parts[6]) if parts[6] else 0, system_prompt="" if parts[7] == "nosys" else None)


def scores(model, examples) -> dict:
    answers, _ = predict(model, examples, 64, desc="eval")
    per_question = [task_scores("explagraphs", a, e.answers)["score"] for a, e in zip(answers, examples)]
    return {"acc": float(np.mean(per_question)),
            "support": float(np.mean([a.strip().lower().startswith("support") for a in answers]))}


def grad_norms(model, examples) -> dict:
    """Gradient norms of the graph encoder, projector and LoRA on the first 8 examples, before any clipping."""
    model.train()
    model.zero_grad(set_to_none=True)
    loss, n = model(model.collate(examples[:8], with_label=True).to(model.device))
    (loss / n).backward()
    out = {}
    for part in ("gnn.", "projector.", "lora"):
        g = [p.grad.norm() ** 2 for k, p in model.named_parameters()
             if p.grad is not None and (part in k if part == "lora" else k.startswith(part))]
        if g:
            out[part.rstrip(".")] = round(float(torch.stack(g).sum().sqrt()), 3)
    model.zero_grad(set_to_none=True)
    return out


def run_one(ds, name: str, llm: str) -> dict:
    p = parse(name)
    seed_everything(p["seed"])
    cfg = make_run_config("explagraphs", p["method"], p["seed"], llm=LLMConfig(model=llm, dtype="float32"),
                          gnn=GNNConfig(hidden=256, num_layers=4),
                          train=TrainConfig(lr=p["lr"], graph_lr=p["graph_lr"], num_epochs=p["epochs"],
                                            warmup_fraction=0.1, batch_size=p["batch"], eval_batch_size=64,
                                            patience=p["epochs"]),
                          graph_token_norm=p["norm"], system_prompt=p["system_prompt"])
    model = GraphLLM(cfg.model, in_dim=int(ds.text_emb.shape[1]), soft_prompt_init=SOFT_PROMPT_INIT["explagraphs"])
    idx = split_indices(ds, cfg)
    ex = {s: model.tokenize(build_examples(ds, idx[s], cfg.model, desc=s)) for s in ("train", "val", "test")}
    rows, init_grads = [], grad_norms(model, ex["train"])

    def on_epoch(epoch, row):
        val, test = scores(model, ex["val"]), scores(model, ex["test"])
        rows.append({"epoch": epoch + 1, "val_loss": row["val_loss"], "val_acc": val["acc"], "test_acc": test["acc"],
                     "test_support": test["support"], "train_seconds": row["train_seconds"]})
        print(name, json.dumps(rows[-1]), flush=True)

    t0 = time.perf_counter()
    fit(model, ex["train"], ex["val"], cfg.train, cfg.seed, Path("/tmp/explagraphs_sweep") / name.replace(":", "_"),
        name, on_epoch_end=on_epoch)
    return {"config": p, "init_grad_norms": init_grads, "epochs": rows, "seconds": round(time.perf_counter() - t0, 1)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python bench/explagraphs_sweep.py", description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="*", default=["g_retriever:1e-3:8:2::::nosys"],
                        help="method:lr:batch:epochs[:norm[:graph_lr[:seed[:nosys]]]], one per run")
    names = parser.parse_args(argv).runs
    for name in names:
        try:
            parse(name)
        except (ValueError, IndexError) as err:
            parser.error(f"run {name!r}: {err} (expected method:lr:batch:epochs[:norm[:graph_lr[:seed[:nosys]]]])")
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 as on CPU
    ds = load_dataset(DatasetConfig("explagraphs"))
    llm = os.environ.get("GR_LLM", "embedded:smollm2-135m-instruct")
    print("wrote", write_result("explagraphs_sweep", {"runs": {n: run_one(ds, n, llm) for n in names}}))


if __name__ == "__main__":
    main()
