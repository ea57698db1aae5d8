"""The decode loop's variants, measured on the throughput bench's inference batch: keep only what wins.

    python bench/decode_variants.py               ->  outputs/bench/decode_variants.json
    python bench/decode_variants.py --llm DIR     ->  outputs/bench/decode_variants-<DIR's name>.json
    python bench/decode_variants.py --variants "static;packed GQA"   (a subset, ";"-separated; "dynamic" always runs)

Same model (the quick preset's G-Retriever on the embedded SmolLM2-135M-Instruct, untrained adapters, the dtype
``"auto"`` resolves to), the same WebQSP test questions as ``bench/train_infer_throughput.py``, sorted by prompt
length as ``predict`` batches them, greedy, ``MAX_NEW`` new tokens at most. Variants (issue 61, docs/peers.md):

- ``dynamic``: what ``GraphLLM.generate`` does (transformers' dynamic KV cache, EOS stopping);
- ``static``: ``cache_implementation="static"`` (the cache preallocated, no per-step ``cat``);
- ``static+compile``: the static cache with ``torch.compile`` of the forward pass (transformers' ``CompileConfig``);
- ``dynamic, batch 48``: one batch of all the questions, against three batches of 16 (does width amortize the
  per-step overhead?);
- ``packed GQA``: eager attention whose decode step (one query position) multiplies each key/value head with its
  group of query heads directly instead of copying the cache per query head (transformers' ``repeat_kv``);
- ``SDPA decode``: the decode steps through SDPA (prefill stays eager, docs/precision.md 2);
- ``SDPA``: SDPA for the prefill too (inference only: on CUDA its bf16 backward is what turned gradients NaN);
- ``dynamic, again``: the default measured last, for the spread between a process's first and later passes.

Per variant: the prefill (one new token), the whole generation, ms per decode step (their difference over the
steps), new tokens per second, and how many answers equal the dynamic batch-16 ones. Each timing is the best of two
after a warm-up generation (a compiled variant's warm-up includes its compilation, recorded apart).
"""
from common import machine, slug, timed, write_result  # noqa: I001

import argparse
import time
from pathlib import Path

import torch

from gr_core.config import LLMConfig
from gr_core.g_retriever.examples import build_examples
from gr_core.g_retriever.model import GraphLLM
from gr_core.g_retriever.train import make_run_config
from gr_core.graphqa import DatasetConfig, load_dataset
from gr_core.precision import dtype_name
from train_infer_throughput import DATASET, EVAL_BATCH, GNN, INFER_EXAMPLES, MAX_NEW


def packed_gqa(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """Eager attention; at one query position, ``query (B, H, 1, D)`` is read as ``(B, H_kv, H / H_kv, D)`` so each
    key/value head ``(B, H_kv, T, D)`` serves its query heads without being copied ``H / H_kv`` times."""
    from transformers.models.llama.modeling_llama import eager_attention_forward  # noqa: PLC0415

    group = getattr(module, "num_key_value_groups", 1)
    if query.shape[2] != 1 or group == 1:
        return eager_attention_forward(module, query, key, value, attention_mask, scaling, dropout, **kwargs)
    b, h, _, d = query.shape
    weights = torch.matmul(query.reshape(b, h // group, group, d), key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        weights = weights + attention_mask  # (B, 1, 1, T) broadcasts over the heads
    weights = torch.nn.functional.softmax(weights, dim=-1, dtype=torch.float32).to(query.dtype)
    return torch.matmul(weights, value).reshape(b, h, 1, d).transpose(1, 2).contiguous(), None


def sdpa_decode(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """SDPA at one query position (the decode steps), eager elsewhere (the prefill)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward  # noqa: PLC0415
    from transformers.models.llama.modeling_llama import eager_attention_forward  # noqa: PLC0415

    if query.shape[2] == 1:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    return eager_attention_forward(module, query, key, value, attention_mask, scaling, dropout, **kwargs)


def register_attention() -> None:
    """The two attention variants under transformers' interface, with eager's additive mask."""
    from transformers import AttentionInterface  # noqa: PLC0415
    from transformers.masking_utils import AttentionMaskInterface, eager_mask  # noqa: PLC0415

    for name, fn in (("packed_gqa", packed_gqa), ("sdpa_decode", sdpa_decode)):
        AttentionInterface.register(name, fn)
        AttentionMaskInterface.register(name, eager_mask)  # unregistered, transformers would pass no mask at all


def measure(model: GraphLLM, batches: list, **search) -> dict:
    """Warm-up, then the best of two for the prefill and for the whole generation, summed over ``batches``."""
    start = time.perf_counter()
    for b in batches:
        model.generate_ids(b, 2, **search)
    warmup = time.perf_counter() - start
    prefill = sum(min(timed(model.generate_ids, b, 1, **search)[1] for _ in range(2)) for b in batches)
    full, texts, steps, tokens = 0.0, [], 0, 0
    for b in batches:
        (ids, t1), (_, t2) = (timed(model.generate_ids, b, MAX_NEW, **search) for _ in range(2))
        full += min(t1, t2)
        steps += ids.shape[1] - 1
        tokens += ids.shape[0] * (ids.shape[1] - 1)
        texts += [t.strip() for t in model.tokenizer.batch_decode(ids, skip_special_tokens=True)]
    decode = full - prefill
    return {"warmup_s": round(warmup, 2), "prefill_s": round(prefill, 3), "generate_s": round(full, 3),
            "decode_steps": steps, "decode_step_ms": round(1e3 * decode / max(steps, 1), 1),
            "decode_tokens_per_s": round(tokens / decode, 1) if decode > 0 else None,
            "answers_per_s": round(sum(b.input_ids.shape[0] for b in batches) / full, 3), "answers": texts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--llm", default=None, help="a Hugging Face model directory (default: the embedded "
                        "SmolLM2-135M-Instruct); random weights decode the whole budget on every row")
    parser.add_argument("--variants", default=None, help="';'-separated variant names (default: all)")
    args = parser.parse_args()
    torch.manual_seed(0)
    ds = load_dataset(DatasetConfig(DATASET))
    cfg = make_run_config(DATASET, "g_retriever", gnn=GNN, llm=LLMConfig(**({"model": args.llm} if args.llm else {})))
    model = GraphLLM(cfg.model, in_dim=int(ds.text_emb.shape[1])).eval()
    examples = model.tokenize(build_examples(ds, ds.split["test"][:INFER_EXAMPLES], cfg.model))
    examples.sort(key=lambda e: e.num_prompt_tokens)  # as predict batches them

    def batches(size: int) -> list:
        return [model.collate(examples[k:k + size], with_label=False).to(model.device)
                for k in range(0, len(examples), size)]

    from transformers import CompileConfig  # noqa: PLC0415 only this variant needs it
    compiled = CompileConfig(fullgraph=False, dynamic=False)
    compiled._compile_all_devices = True  # transformers compiles only on CUDA unless told (its default)
    register_attention()
    default_attention = model.llm.config._attn_implementation
    # name: (batch size, generate's options, attention implementation; None: the model's own)
    # the compiled variant last but one: its compilation is the slowest part (a capped run keeps the others)
    variants = {"dynamic": (EVAL_BATCH, {}, None), "static": (EVAL_BATCH, {"cache_implementation": "static"}, None),
                f"dynamic, batch {len(examples)}": (len(examples), {}, None),
                "packed GQA": (EVAL_BATCH, {}, "packed_gqa"), "SDPA decode": (EVAL_BATCH, {}, "sdpa_decode"),
                "SDPA": (EVAL_BATCH, {}, "sdpa"),
                "static+compile": (EVAL_BATCH, {"cache_implementation": "static", "compile_config": compiled}, None),
                "dynamic, again": (EVAL_BATCH, {}, None)}
    if args.variants:
        chosen = {"dynamic", *(v.strip() for v in args.variants.split(";") if v.strip())}
        unknown = chosen - set(variants)
        if unknown:
            parser.error(f"unknown variants {sorted(unknown)}; known: {list(variants)}")
        variants = {k: v for k, v in variants.items() if k in chosen}
    results = {}
    for name, (size, search, attention) in variants.items():
        model.llm.config._attn_implementation = attention or default_attention
        try:
            results[name] = {"batch_size": size, **measure(model, batches(size), **search)}
        except Exception as error:  # noqa: BLE001 a variant this transformers cannot run is recorded, not fatal
            results[name] = {"batch_size": size, "error": f"{type(error).__name__}: {str(error)[:300]}"}
        print(name, {k: v for k, v in results[name].items() if k != "answers"}, flush=True)
    model.llm.config._attn_implementation = default_attention
    base = results["dynamic"]["answers"]
    for r in results.values():
        if "answers" in r:
            r["same_answers_as_dynamic"] = sum(a == b for a, b in zip(r["answers"], base))
            r["answers"] = r["answers"][:4]
    # the default's later pass is the fairer baseline (a process's first generations run slower)
    dyn = max(results["dynamic"]["answers_per_s"], results.get("dynamic, again", {}).get("answers_per_s", 0))
    speedup = {k: round(r["answers_per_s"] / dyn, 3) for k, r in results.items() if "answers_per_s" in r}
    # a variant earns its place only by answering faster with every answer unchanged
    wins = [k for k, r in results.items() if not k.startswith("dynamic") and speedup.get(k, 0) > 1
            and r.get("same_answers_as_dynamic") == len(examples)]
    path = write_result("decode_variants" + (f"-{slug(Path(args.llm).name)}" if args.llm else ""), {
        "dataset": DATASET, "questions": len(examples), "max_new_tokens": MAX_NEW, "gnn": GNN.__dict__,
        "dtype": dtype_name(model.llm.dtype), "cpu_model": machine()["cpu_model"], "device": str(model.device),
        "llm": args.llm or "embedded:smollm2-135m-instruct", "variants": results,
        "answers_per_s_ratio_to_dynamic": speedup, "faster_with_same_answers": wins})
    print(f"answers/s against dynamic: {speedup}; faster with the same answers: {wins or 'none'} -> {path}")


if __name__ == "__main__":
    main()
