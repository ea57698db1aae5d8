"""Where G-Retriever's training turns NaN on a GPU: the attention kernel, the dtype and the GNN width side by side.

    python bench/attention_nan.py [--steps 40]   ->  outputs/bench/attention_nan.json   (meant for a CUDA machine)

The ``full`` preset's ExplaGraphs G-Retriever configuration (seed 0, the embedded SmolLM2-135M-Instruct, GNN width
1024) is trained for ``--steps`` (default 40) AdamW steps from the same initial weights, four ways. It is an A/B test,
not a replay of the run: a constant lr (the configuration's peak, with no warm-up and no per-group scale) and one
length-bucketed batch order, so its step numbers are not the run's. The four ways: SDPA in bf16 (what
transformers picks by default), eager attention in bf16, SDPA in fp32, and SDPA in bf16 with a 256-wide GNN. Each
step records the loss, the clipped gradient norm, whether a trainable weight stopped being finite, and which modules
put out a non-finite value. On an H100 (torch 2.11+cu130, transformers 5.17) SDPA in bf16 gave a NaN gradient at
step 18 at both GNN widths while the other two stayed finite: the reason ``gr_core.precision.attention_implementation``
picks eager attention in 16-bit dtypes on every device (docs/environment.md "On a GPU").
"""
from common import write_result  # noqa: I001

import argparse
import math
import time
from dataclasses import replace

import torch

import gr_core.llm as llm_module
from gr_core.g_retriever.examples import build_examples, length_batches, split_indices
from gr_core.g_retriever.experiments import preset_run_config
from gr_core.g_retriever.model import GraphLLM
from gr_core.g_retriever.train import param_groups
from gr_core.graphqa import DatasetConfig, load_dataset
from gr_core.runs import config_hash

VARIANTS = {  # name: (attention forced, LLM dtype, GNN width; None = the preset's)
    "sdpa-bf16": ("sdpa", "bfloat16", None),
    "eager-bf16": ("eager", "bfloat16", None),
    "sdpa-fp32": ("sdpa", "float32", None),
    "sdpa-bf16-gnn256": ("sdpa", "bfloat16", 256),
}


def trial(cfg, ds, idx, attention: str, dtype: str, gnn_hidden: int | None, steps: int) -> dict:
    """``steps`` training steps of one variant; the first non-finite gradient or weight ends it."""
    t0 = time.perf_counter()
    default = llm_module.attention_implementation
    llm_module.attention_implementation = lambda d, dev: attention  # load_llm's choice, forced for this model
    try:
        torch.manual_seed(cfg.seed)
        mc = replace(cfg.model, llm=replace(cfg.model.llm, dtype=dtype))
        if gnn_hidden:
            mc = replace(mc, gnn=replace(mc.gnn, hidden=gnn_hidden))
        model = GraphLLM(mc, in_dim=int(ds.text_emb.shape[1]))
    finally:
        llm_module.attention_implementation = default
    examples = model.tokenize(build_examples(ds, idx["train"][:steps * cfg.train.batch_size], mc))
    batches = length_batches([e.num_prompt_tokens + len(e.label_ids) for e in examples], cfg.train.batch_size,
                             seed=cfg.seed)
    params = list(model.trainable_parameters().values())
    opt = torch.optim.AdamW(param_groups(model, cfg.train), lr=cfg.train.lr, weight_decay=cfg.train.weight_decay,
                            betas=cfg.train.betas)
    nonfinite: list[str] = []

    def watch(name):
        def hook(module, inputs, output):
            t = output[0] if isinstance(output, tuple) else output
            if torch.is_tensor(t) and t.is_floating_point() and not torch.isfinite(t).all():
                nonfinite.append(name)
        return hook
    hooks = [m.register_forward_hook(watch(n)) for n, m in model.named_modules() if n and n.count(".") <= 4]
    model.train()
    rows = []
    for k, idx_b in enumerate(batches[:steps]):
        batch = model.collate([examples[i] for i in idx_b], with_label=True).to(model.device)
        nonfinite.clear()
        loss_sum, n = model(batch)
        loss = loss_sum / n
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, cfg.train.grad_clip))
        opt.step()
        bad = [name for name, p in model.trainable_parameters().items() if not torch.isfinite(p).all()]
        rows.append({"step": k, "loss": round(float(loss.detach()), 4), "grad_norm": grad_norm,
                     "nonfinite_outputs": nonfinite[:6], "nonfinite_weights": bad[:3],
                     "padded_rows": int((batch.attention_mask == 0).any(1).sum())})
        if bad or not math.isfinite(grad_norm):
            break
    for h in hooks:
        h.remove()
    first_bad = next((r["step"] for r in rows if r["nonfinite_weights"] or not math.isfinite(r["grad_norm"])), None)
    out = {"attention": model.llm.config._attn_implementation, "dtype": str(model.llm_dtype).removeprefix("torch."),
           "gnn_hidden": mc.gnn.hidden, "steps_run": len(rows), "first_nonfinite_step": first_bad,
           "last_loss": rows[-1]["loss"], "seconds": round(time.perf_counter() - t0, 1), "steps": rows}
    print(f"{out['attention']:>6} {out['dtype']:>9} GNN {out['gnn_hidden']:>4}: {len(rows)} steps, first non-finite "
          f"step {first_bad}, last loss {out['last_loss']}", flush=True)
    del model, opt
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=40, help="training steps per variant (at least 1)")
    steps = max(1, parser.parse_args().steps)
    cfg = preset_run_config("full", "explagraphs", "g_retriever", 0)
    ds = load_dataset(DatasetConfig(cfg.dataset, hops=cfg.hops))
    idx = split_indices(ds, cfg)
    variants = {name: trial(cfg, ds, idx, *v, steps) for name, v in VARIANTS.items()}
    path = write_result("attention_nan", {"run": cfg.name, "config_hash": config_hash(cfg.to_dict()),
                                          "lr": cfg.train.lr, "steps_asked": steps, "variants": variants})
    print(f"-> {path}")


if __name__ == "__main__":
    main()
