"""How a bf16 CPU prefill computes attention: eager in batch slices (``kernels.PREFILL_SLICE_BYTES``) against eager
whole and SDPA.

    python bench/attention_prefill.py  ->  outputs/bench/attention_prefill.json

Quick's G-Retriever configuration (notebook 03; untrained graph encoder and projector, as the throughput bench's
inference) in the dtype ``"auto"`` picks, on the first ``--questions`` test questions of each of three families,
sorted by length and batched by 16 as ``predict`` batches them:

- **prefill by width**: each batch's prefill (``generate_ids`` of one token) with eager attention whole, SDPA, and
  eager in slices of 4, 8 (in use), 16 and 32 MiB of fp32 scores, alternated (AB, BA, ...) over ``--rounds`` rounds
  after an untimed one;
- **whole generations** (``MAX_NEW`` tokens) with the rule in use against the one before it (SDPA for a prefill of
  ``SDPA_FROM`` positions or more, eager whole below), alternated the same way;
- **answers**: the rule in use against eager whole, first-token logits and greedy answers (slices change which rows
  share a product, not a row's products: equal is expected).

Decode steps are packed GQA's in every variant. docs/precision.md 2 quotes it.
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch
from common import round_order, write_result
from train_infer_throughput import EVAL_BATCH, MAX_NEW

import gr_core.kernels as kernels
from gr_core.g_retriever.examples import build_examples
from gr_core.g_retriever.experiments import preset_run_config
from gr_core.g_retriever.model import GraphLLM
from gr_core.graphqa import DatasetConfig, load_dataset
from gr_core.runs import seed_everything

DATASETS = ("webqsp", "explagraphs", "clevr")
WHOLE = 2 ** 62  # a slice budget no batch reaches: eager's one product
MIB = 2 ** 20
SDPA_NAME = "bench_sdpa_prefill"


def sdpa_prefill(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """SDPA for a prefill of at least ``sdpa_prefill.start`` positions, ``packed_gqa_attention`` otherwise."""
    if query.shape[2] > 1 and query.shape[2] >= sdpa_prefill.start:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward  # noqa: PLC0415

        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, scaling, **kwargs)
    return kernels.packed_gqa_attention(module, query, key, value, attention_mask, scaling, dropout, **kwargs)


def register_sdpa_prefill() -> None:
    from transformers import AttentionInterface  # noqa: PLC0415 deferred as in gr_core.kernels
    from transformers.masking_utils import AttentionMaskInterface, eager_mask  # noqa: PLC0415

    AttentionInterface.register(SDPA_NAME, sdpa_prefill)
    AttentionMaskInterface.register(SDPA_NAME, eager_mask)


def variants(in_use: int) -> dict:
    """name -> (attention implementation, slice bytes, SDPA's first prefill width)."""
    packed = kernels.register_packed_gqa()
    return {"eager": (packed, WHOLE, 0), "sdpa": (SDPA_NAME, WHOLE, 2),
            **{f"slices {m} MiB": (packed, m * MIB, 0) for m in (4, 8, 16, 32) if m * MIB != in_use},
            "in use": (packed, in_use, 0), "before": (SDPA_NAME, WHOLE, kernels.SDPA_FROM)}


def alternate(model: GraphLLM, fn, chosen: dict, rounds: int) -> dict:
    """``fn()`` under each variant, alternated over ``rounds`` rounds after an untimed one: per variant its seconds
    and its last output."""
    seconds, outputs = {k: [] for k in chosen}, {}
    for r in range(rounds + 1):
        for name in round_order(chosen, r):
            implementation, kernels.PREFILL_SLICE_BYTES, sdpa_prefill.start = chosen[name]
            model.llm.set_attn_implementation(implementation)
            t0 = time.perf_counter()
            outputs[name] = fn()
            if r:
                seconds[name].append(time.perf_counter() - t0)
    return {"seconds": seconds, "outputs": outputs}


def first_logits(model: GraphLLM, batch) -> torch.Tensor:
    """``(B, V)`` logits of the first generated token (the prefill's last position)."""
    with torch.inference_mode():
        out = model.llm(inputs_embeds=model.embed(batch), attention_mask=batch.attention_mask,
                        position_ids=model.position_ids(batch.attention_mask), logits_to_keep=1)
    return out.logits[:, -1].float()


def study(dataset: str, questions: int, rounds: int, in_use: int) -> dict:
    """One family's prefill widths, generation timings and answers (module docstring)."""
    ds = load_dataset(DatasetConfig(dataset))
    cfg = preset_run_config("quick", dataset, "g_retriever", 0, notebook="03_training")
    seed_everything(0)
    model = GraphLLM(cfg.model, in_dim=int(ds.text_emb.shape[1])).eval()
    examples = model.tokenize(build_examples(ds, list(ds.split["test"])[:questions], cfg.model, desc=dataset))
    examples.sort(key=lambda e: e.num_prompt_tokens)
    batches = [model.collate(examples[k:k + EVAL_BATCH], with_label=False)
               for k in range(0, len(examples), EVAL_BATCH)]
    every = variants(in_use)
    prefill_kernels = {k: v for k, v in every.items() if k != "before"}
    widths = []
    for b in batches:
        timing = alternate(model, lambda b=b: model.generate_ids(b, 1), prefill_kernels, rounds)["seconds"]
        med = {k: statistics.median(v) for k, v in timing.items()}
        widths.append({"positions": int(b.input_ids.shape[1]), "seconds": {k: round(v, 3) for k, v in med.items()},
                       "in_use_speedup_vs_eager": round(med["eager"] / med["in use"], 3),
                       "in_use_speedup_vs_sdpa": round(med["sdpa"] / med["in use"], 3)})
        print(dataset, widths[-1], flush=True)

    def answer_all() -> tuple[list[str], torch.Tensor]:
        texts = [t for b in batches for t in model.generate(b, MAX_NEW)]
        return texts, torch.cat([first_logits(model, b) for b in batches])

    generation = alternate(model, answer_all, {k: every[k] for k in ("in use", "before")}, rounds)
    eager = alternate(model, answer_all, {"eager": every["eager"]}, 0)["outputs"]["eager"]  # one untimed pass
    seconds = generation["seconds"]
    texts, logits = generation["outputs"]["in use"]
    before = generation["outputs"]["before"][0]
    return {"questions": len(examples), "prefill_by_width": widths,
            "generate_s": {k: [round(x, 2) for x in v] for k, v in seconds.items()},
            "generate_speedup_in_use_vs_before": round(statistics.median(seconds["before"])
                                                       / statistics.median(seconds["in use"]), 3),
            "rounds_in_use_faster": sum(a < b for a, b in zip(seconds["in use"], seconds["before"])),
            "answers_differing_from_eager": sum(a != b for a, b in zip(texts, eager[0])),
            "first_logits_equal_to_eager": bool(torch.equal(logits, eager[1])),
            "answers_differing_before_vs_in_use": sum(a != b for a, b in zip(texts, before))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    args = parser.parse_args()
    register_sdpa_prefill()
    in_use = kernels.PREFILL_SLICE_BYTES
    results = {d: study(d, args.questions, args.rounds, in_use) for d in args.datasets}
    write_result("attention_prefill", {"datasets": results, "rounds": args.rounds, "batch_size": EVAL_BATCH,
                                       "max_new_tokens": MAX_NEW, "prefill_slice_bytes": in_use,
                                       "sdpa_from_before": kernels.SDPA_FROM})


if __name__ == "__main__":
    main()
