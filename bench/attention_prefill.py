"""Where SDPA beats eager attention in a bf16 CPU prefill, and whether it moves answers: ``llm.SDPA_FROM``.

    python bench/attention_prefill.py  ->  outputs/bench/attention_prefill.json

Quick's G-Retriever configuration (notebook 03; untrained graph encoder and projector, as the throughput bench's
inference) in the dtype ``"auto"`` picks, on the first ``--questions`` test questions of each dataset, sorted by
length and batched by 16 as ``predict`` batches them. The threshold is training's (``bench/attention_training.py``);
this bench checks it for inference on three families, never choosing on answers:

- **speed**: each batch's prefill (``generate_ids`` of one token) with eager attention (``SDPA_FROM`` above
  every width) and with SDPA (0), alternated over ``--rounds`` rounds after an untimed one; then whole generations
  (``MAX_NEW`` tokens) with eager, SDPA, and the threshold in use (``SDPA_FROM``), alternated the same way;
- **fidelity**: against the same model in fp32 (the reference both bf16 kernels round), per question the largest
  absolute difference of the first generated token's logits and whether the greedy answer equals fp32's; eager
  against SDPA by a paired Wilcoxon test on the differences and an exact McNemar test on the answers.

docs/precision.md 2 quotes it.
"""
from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace

import torch
from common import write_result
from scipy.stats import binomtest, wilcoxon
from train_infer_throughput import EVAL_BATCH, MAX_NEW

import gr_core.llm as llm_module
from gr_core.g_retriever.examples import build_examples
from gr_core.g_retriever.experiments import preset_run_config
from gr_core.g_retriever.model import GraphLLM
from gr_core.graphqa import DatasetConfig, load_dataset
from gr_core.runs import seed_everything

KERNELS = {"eager": 10**9, "sdpa": 0}  # SDPA_FROM for each
DATASETS = ("webqsp", "explagraphs", "clevr")


def first_logits(model: GraphLLM, batch) -> torch.Tensor:
    """``(B, V)`` fp32 logits of the first generated token (the prefill's last position)."""
    with torch.inference_mode():
        out = model.llm(inputs_embeds=model.embed(batch), attention_mask=batch.attention_mask,
                        position_ids=model.position_ids(batch.attention_mask), logits_to_keep=1)
    return out.logits[:, -1].float()


def alternate(fn, kernels: dict, rounds: int) -> dict:
    """``fn()`` under each kernel's threshold, alternated (AB, BA, ...) over ``rounds`` rounds after an untimed
    one: per kernel its seconds and its last output."""
    seconds, outputs = {k: [] for k in kernels}, {}
    names = list(kernels)
    for r in range(rounds + 1):
        for name in (names if r % 2 == 0 else names[::-1]):
            llm_module.SDPA_FROM = kernels[name]
            t0 = time.perf_counter()
            outputs[name] = fn()
            if r:
                seconds[name].append(time.perf_counter() - t0)
    return {"seconds": seconds, "outputs": outputs}


def study(dataset: str, questions: int, rounds: int, in_use: int) -> dict:
    """One dataset's prefill widths, timings and fidelity (module docstring)."""
    ds = load_dataset(DatasetConfig(dataset))
    cfg = preset_run_config("quick", dataset, "g_retriever", 0, notebook="03_training")
    seed_everything(0)
    model = GraphLLM(cfg.model, in_dim=int(ds.text_emb.shape[1])).eval()
    reference = GraphLLM(replace(cfg.model, llm=replace(cfg.model.llm, dtype="float32")),
                         in_dim=int(ds.text_emb.shape[1])).eval()
    reference.load_trainable_state(model.trainable_state())  # the same graph encoder and projector
    examples = model.tokenize(build_examples(ds, list(ds.split["test"])[:questions], cfg.model, desc=dataset))
    examples.sort(key=lambda e: e.num_prompt_tokens)
    batches = [model.collate(examples[k:k + EVAL_BATCH], with_label=False)
               for k in range(0, len(examples), EVAL_BATCH)]
    widths = []
    for b in batches:
        timing = alternate(lambda b=b: model.generate_ids(b, 1), KERNELS, rounds)["seconds"]
        eager, sdpa = (statistics.median(timing[k]) for k in KERNELS)
        widths.append({"positions": int(b.input_ids.shape[1]), "eager_s": round(eager, 3), "sdpa_s": round(sdpa, 3),
                       "eager_over_sdpa": round(eager / sdpa, 3)})
        print(dataset, widths[-1], flush=True)

    def answer_all() -> tuple[list[str], torch.Tensor]:
        texts = [t for b in batches for t in model.generate(b, MAX_NEW)]
        return texts, torch.cat([first_logits(model, b) for b in batches])

    generation = alternate(answer_all, {**KERNELS, "in use": in_use}, rounds)
    ref_texts = [t for b in batches for t in reference.generate(b, MAX_NEW)]
    ref_logits = torch.cat([first_logits(reference, b) for b in batches])
    fidelity, same = {}, {}
    for name in KERNELS:
        texts, logits = generation["outputs"][name]
        diff = (logits - ref_logits).abs().max(-1).values
        same[name] = [a == b for a, b in zip(texts, ref_texts)]
        fidelity[name] = {"median_max_logit_diff": round(float(diff.median()), 4), "diffs": diff.tolist(),
                          "first_token_as_fp32": int((logits.argmax(-1) == ref_logits.argmax(-1)).sum()),
                          "answers_as_fp32": sum(same[name])}
    only_eager = sum(a and not b for a, b in zip(same["eager"], same["sdpa"]))
    only_sdpa = sum(b and not a for a, b in zip(same["eager"], same["sdpa"]))
    seconds = generation["seconds"]
    return {"questions": len(examples), "prefill_by_width": widths,
            "generate_s": {k: round(statistics.median(v), 2) for k, v in seconds.items()},
            "generate_speedup_in_use_vs_eager": round(statistics.median(seconds["eager"])
                                                      / statistics.median(seconds["in use"]), 3),
            "fidelity": {k: {kk: vv for kk, vv in v.items() if kk != "diffs"} for k, v in fidelity.items()},
            "logit_diff_wilcoxon_p": float(wilcoxon(fidelity["eager"]["diffs"], fidelity["sdpa"]["diffs"]).pvalue),
            "answers_as_fp32_only_eager": only_eager, "answers_as_fp32_only_sdpa": only_sdpa,
            "answers_mcnemar_p": (binomtest(only_eager, only_eager + only_sdpa).pvalue
                                  if only_eager + only_sdpa else 1.0),
            "answers_changed_eager_vs_sdpa": sum(a != b for a, b in zip(generation["outputs"]["eager"][0],
                                                                         generation["outputs"]["sdpa"][0]))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=96)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    args = parser.parse_args()
    in_use = llm_module.SDPA_FROM
    results = {d: study(d, args.questions, args.rounds, in_use) for d in args.datasets}
    llm_module.SDPA_FROM = in_use
    write_result("attention_prefill", {"datasets": results, "rounds": args.rounds, "batch_size": EVAL_BATCH,
                                       "max_new_tokens": MAX_NEW, "sdpa_prefill_from": in_use})


if __name__ == "__main__":
    main()
