"""The decode loop's variants, measured on the throughput bench's inference batch: keep only what wins.

    python bench/decode_variants.py               ->  outputs/bench/decode_variants.json
    python bench/decode_variants.py --llm DIR     ->  outputs/bench/decode_variants-<DIR's name>.json
    python bench/decode_variants.py --variants "static;packed GQA"   (a subset, ";"-separated; "dynamic" always runs)
    python bench/decode_variants.py --ab "packed GQA" --rounds 6     ->  outputs/bench/decode_ab-packed_GQA.json
    python bench/decode_variants.py --ab eager --dataset explagraphs ->  outputs/bench/decode_ab-eager-explagraphs.json
    python bench/decode_variants.py --ab "padded prefill" --dtype float32 ->  .../decode_ab-padded_prefill-float32.json

Same model (the quick preset's G-Retriever on the embedded SmolLM2-135M-Instruct, untrained adapters, the dtype
``"auto"`` resolves to), the same WebQSP test questions as ``bench/train_infer_throughput.py``, sorted by prompt
length as ``predict`` batches them, greedy, ``MAX_NEW`` new tokens at most. Variants (issue 61, docs/peers.md):

- ``dynamic``: what ``GraphLLM.generate`` does (transformers' dynamic KV cache, EOS stopping; on a CPU in bf16 with
  packed GQA, below, since it won the A/B; eager attention on CUDA);
- ``eager``: transformers' eager attention, ``repeat_kv`` copying the cache per query head (the CPU's default before);
- ``static``: ``cache_implementation="static"`` (the cache preallocated, no per-step ``cat``);
- ``static+compile``: the static cache with ``torch.compile`` of the forward pass (transformers' ``CompileConfig``);
- ``dynamic, batch 48``: one batch of all the questions, against three batches of 16 (does width amortize the
  per-step overhead?);
- ``packed GQA``: ``gr_core.kernels.packed_gqa_attention``, eager attention whose decode step (one query position)
  multiplies each key/value head with its group of query heads directly instead of copying the cache first;
- ``SDPA decode``: the decode steps through SDPA (prefill stays eager, docs/precision.md 2);
- ``SDPA``: SDPA for the prefill too (inference only: on CUDA its bf16 backward is what turned gradients NaN);
- ``plain linears``: the linear layers through ``F.linear``, which reorders each bf16 weight for oneDNN on every
  call (the default packs each once: ``gr_core.kernels.prepack_linears``, on a CPU in bf16);
- ``padded prefill``: one prefill over the whole left-padded batch (the default, on CPU, encodes the prompts in
  groups of near length first: ``gr_core.kernels.grouped_prefill``);
- ``dynamic, again``: the default measured last, for the spread between a process's first and later passes.

Per variant: the prefill (one new token), the whole generation, ms per decode step (their difference over the
steps), new tokens per second, and how many answers equal the dynamic batch-16 ones. Each timing is the best of two
after a warm-up generation (a compiled variant's warm-up includes its compilation, recorded apart).

``--ab NAME`` decides whether one variant beats the default beyond this machine's spread between passes: after a
warm-up of each, ``--rounds`` rounds each generate the 48 answers once with both, in alternating order (AB, BA, ...),
in one process; per round the seconds of each, and over the rounds the median ratio, the rounds won and a two-sided
sign test's p, with how many answers differ.
"""
from common import machine, round_order, slug, timed, write_result  # noqa: I001

import argparse
import statistics
import time
from pathlib import Path

import torch

from gr_core import kernels
from gr_core.config import LLMConfig
from gr_core.g_retriever.examples import build_examples
from gr_core.g_retriever.model import GraphLLM
from gr_core.g_retriever.train import make_run_config
from gr_core.graphqa import DatasetConfig, load_dataset
from gr_core.kernels import prepack_linears, register_packed_gqa
from gr_core.precision import dtype_name
from train_infer_throughput import DATASET, EVAL_BATCH, GNN, INFER_EXAMPLES, MAX_NEW

DEFAULT_GROUP_COST = kernels.PREFILL_GROUP_COST


def sdpa_decode(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """SDPA at one query position (the decode steps), eager elsewhere (the prefill)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward  # noqa: PLC0415
    from transformers.models.llama.modeling_llama import eager_attention_forward  # noqa: PLC0415

    if query.shape[2] == 1:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    return eager_attention_forward(module, query, key, value, attention_mask, scaling, dropout, **kwargs)


def register_attention() -> str:
    """``sdpa_decode`` under transformers' interface, with eager's additive mask (unregistered, transformers would
    pass no mask at all); returns the name of gr_core's packed GQA attention, registered the same way."""
    from transformers import AttentionInterface  # noqa: PLC0415
    from transformers.masking_utils import AttentionMaskInterface, eager_mask  # noqa: PLC0415

    AttentionInterface.register("sdpa_decode", sdpa_decode)
    AttentionMaskInterface.register("sdpa_decode", eager_mask)
    return register_packed_gqa()


def set_kernels(model: GraphLLM, packed: bool, grouped: bool = True) -> None:
    """The LLM's linear layers packed once (what ``load_llm`` does on a bf16 CPU) or through ``F.linear``; the
    prefill grouped by length (the default) or over the padded batch."""
    kernels.PREFILL_GROUP_COST = DEFAULT_GROUP_COST if grouped else float("inf")
    for m in model.llm.modules():
        m.__dict__.pop("forward", None)  # the class's own forward again
    if packed and model.llm.dtype == torch.bfloat16 and model.device.type == "cpu":
        prepack_linears(model.llm)


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


def alternate(model: GraphLLM, batches: list, options: dict, rounds: int) -> dict:
    """``rounds`` alternating passes of the default (``"dynamic"``) and one variant over ``batches``; ``options``:
    name -> (generate's options, attention implementation, linears packed, prefill grouped). Returns each pass's
    seconds and the answers."""
    from scipy.stats import binomtest  # noqa: PLC0415 only the A/B needs it

    default_attention = model.llm.config._attn_implementation

    def one_pass(name: str) -> tuple[float, list[str]]:
        search, attention, packed, grouped = options[name]
        model.llm.config._attn_implementation = attention or default_attention
        set_kernels(model, packed, grouped)
        seconds, texts = 0.0, []
        for b in batches:
            ids, dt = timed(model.generate_ids, b, MAX_NEW, **search)
            seconds += dt
            texts += [t.strip() for t in model.tokenizer.batch_decode(ids, skip_special_tokens=True)]
        model.llm.config._attn_implementation = default_attention
        set_kernels(model, True)
        return seconds, texts

    names = list(options)
    for name in names:  # warm-up
        one_pass(name)
    seconds: dict[str, list[float]] = {n: [] for n in names}
    answers: dict[str, list[str]] = {}
    for r in range(rounds):
        for name in round_order(names, r):
            dt, answers[name] = one_pass(name)
            seconds[name].append(round(dt, 3))
        print(f"round {r + 1}: " + ", ".join(f"{n} {seconds[n][-1]:.2f} s" for n in names), flush=True)
    base, variant = names
    ratios = sorted(a / b for a, b in zip(seconds[base], seconds[variant]))  # > 1: the variant is faster
    wins = sum(x > 1 for x in ratios)
    return {"rounds": rounds, "seconds": seconds, "median_speedup": round(statistics.median(ratios), 3),
            "rounds_won": wins, "sign_test_p": round(binomtest(wins, rounds).pvalue, 4),
            "answers_changed": sum(a != b for a, b in zip(answers[base], answers[variant])),
            "answers": len(answers[base])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--llm", default=None, help="a Hugging Face model directory (default: the embedded "
                        "SmolLM2-135M-Instruct); random weights decode the whole budget on every row")
    parser.add_argument("--variants", default=None, help="';'-separated variant names (default: all)")
    parser.add_argument("--dataset", default=DATASET, help=f"a GraphQA dataset (default {DATASET}: the "
                        "throughput bench's; another family checks a choice made on it)")
    parser.add_argument("--dtype", default="auto", help="the LLM's dtype (default auto: what this machine resolves; "
                        "another names the result file)")
    parser.add_argument("--ab", default=None, help="one variant against the default, in alternating rounds")
    parser.add_argument("--rounds", type=int, default=6, help="rounds of --ab (default 6: p 0.03 if all are won)")
    args = parser.parse_args()
    torch.manual_seed(0)
    ds = load_dataset(DatasetConfig(args.dataset))
    # result names: the default dataset and LLM add nothing, others name themselves
    suffix = "".join(f"-{slug(x)}" for x in (args.dataset if args.dataset != DATASET else None,
                                              Path(args.llm).name if args.llm else None,
                                              args.dtype if args.dtype != "auto" else None) if x)
    cfg = make_run_config(args.dataset, "g_retriever", gnn=GNN,
                          llm=LLMConfig(dtype=args.dtype, **({"model": args.llm} if args.llm else {})))
    model = GraphLLM(cfg.model, in_dim=int(ds.text_emb.shape[1])).eval()
    examples = model.tokenize(build_examples(ds, ds.split["test"][:INFER_EXAMPLES], cfg.model))
    examples.sort(key=lambda e: e.num_prompt_tokens)  # as predict batches them

    def batches(size: int) -> list:
        return [model.collate(examples[k:k + size], with_label=False).to(model.device)
                for k in range(0, len(examples), size)]

    from transformers import CompileConfig  # noqa: PLC0415 only this variant needs it
    compiled = CompileConfig(fullgraph=False, dynamic=False)
    compiled._compile_all_devices = True  # transformers compiles only on CUDA unless told (its default)
    packed = register_attention()
    default_attention = model.llm.config._attn_implementation
    # name: (batch size, generate's options, attention implementation (None: the model's own), linears packed,
    # prefill grouped; a static cache cannot take a prefilled dynamic one, so those prefill the padded batch)
    # the compiled variant last but one: its compilation is the slowest part (a capped run keeps the others)
    variants = {"dynamic": (EVAL_BATCH, {}, None, True, True),
                "static": (EVAL_BATCH, {"cache_implementation": "static"}, None, True, False),
                f"dynamic, batch {len(examples)}": (len(examples), {}, None, True, True),
                "eager": (EVAL_BATCH, {}, "eager", True, True), "packed GQA": (EVAL_BATCH, {}, packed, True, True),
                "SDPA decode": (EVAL_BATCH, {}, "sdpa_decode", True, True),
                "SDPA": (EVAL_BATCH, {}, "sdpa", True, True), "plain linears": (EVAL_BATCH, {}, None, False, True),
                "padded prefill": (EVAL_BATCH, {}, None, True, False),
                "static+compile": (EVAL_BATCH, {"cache_implementation": "static", "compile_config": compiled}, None,
                                   True, False),
                "dynamic, again": (EVAL_BATCH, {}, None, True, True)}
    if args.ab:
        if args.ab not in variants or variants[args.ab][0] != EVAL_BATCH:
            parser.error(f"--ab takes one of {[k for k, v in variants.items() if v[0] == EVAL_BATCH]}")
        result = alternate(model, batches(EVAL_BATCH), {n: variants[n][1:] for n in ("dynamic", args.ab)}, args.rounds)
        path = write_result(f"decode_ab-{slug(args.ab)}{suffix}", {
            "dataset": args.dataset, "questions": len(examples), "max_new_tokens": MAX_NEW, "variant": args.ab,
            "dtype": dtype_name(model.llm.dtype), "cpu_model": machine()["cpu_model"], "device": str(model.device),
            **result})
        print(f"{args.ab} against dynamic: median {result['median_speedup']}x, {result['rounds_won']} of "
              f"{args.rounds} rounds won (sign test p {result['sign_test_p']}), {result['answers_changed']} of "
              f"{result['answers']} answers changed -> {path}")
        return
    if args.variants:
        chosen = {"dynamic", *(v.strip() for v in args.variants.split(";") if v.strip())}
        unknown = chosen - set(variants)
        if unknown:
            parser.error(f"unknown variants {sorted(unknown)}; known: {list(variants)}")
        variants = {k: v for k, v in variants.items() if k in chosen}
    results = {}
    for name, (size, search, attention, linears, grouped) in variants.items():
        model.llm.config._attn_implementation = attention or default_attention
        set_kernels(model, linears, grouped)
        try:
            results[name] = {"batch_size": size, **measure(model, batches(size), **search)}
        except Exception as error:  # noqa: BLE001 a variant this transformers cannot run is recorded, not fatal
            results[name] = {"batch_size": size, "error": f"{type(error).__name__}: {str(error)[:300]}"}
        print(name, {k: v for k, v in results[name].items() if k != "answers"}, flush=True)
    model.llm.config._attn_implementation = default_attention
    set_kernels(model, True)
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
    path = write_result(f"decode_variants{suffix}", {
        "dataset": args.dataset, "questions": len(examples), "max_new_tokens": MAX_NEW, "gnn": GNN.__dict__,
        "dtype": dtype_name(model.llm.dtype), "cpu_model": machine()["cpu_model"], "device": str(model.device),
        "llm": args.llm or "embedded:smollm2-135m-instruct", "variants": results,
        "answers_per_s_ratio_to_dynamic": speedup, "faster_with_same_answers": wins})
    print(f"answers/s against dynamic: {speedup}; faster with the same answers: {wins or 'none'} -> {path}")


if __name__ == "__main__":
    main()
