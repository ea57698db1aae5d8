"""Does encoding a batch's prompts in groups of near length (``gr_core.kernels.grouped_prefill``) answer faster, and
what does it change? Chosen on WebQSP, reported on the other families (issue 61).

    python bench/grouped_prefill.py                      ->  outputs/bench/grouped_prefill.json
    python bench/grouped_prefill.py --questions 48 --datasets webqsp     (a quick look)

Model: the ``zero_shot`` method (the frozen embedded SmolLM2-135M-Instruct reading the textualized graph, cut to 512
tokens, and the question: answers a trained model's quality would not hide), in the dtype ``"auto"`` resolves to.
Questions: the first ``--questions`` of each family's validation split, answered by ``predict`` (length-sorted batches
of 16, greedy, 32 new tokens at most), in three passes after a warm-up: ``padded`` (one prefill over the whole
batch, grouping off), ``grouped`` (the default), and ``padded, batch 8`` (how many answers a batch's composition
alone changes: the yardstick for the grouped pass's changes), one pass each in this order (their noise is not
measured: ``bench/decode_variants.py --ab "padded prefill"`` alternates). Per family: each pass's seconds, answers
changed against ``padded``, each pass's score (the family's Table 3 metric) and the paired exact McNemar test against
``padded``. On the first family also the prefill alone (one new token) for each group cost in ``--costs``, the best of
two fixed-order passes: how the default :data:`~gr_core.kernels.PREFILL_GROUP_COST` was chosen.
"""
from common import machine, timed, write_result  # noqa: I001

import argparse

import torch

from gr_core import kernels
from gr_core.config import LLMConfig
from gr_core.evaluate import task_scores
from gr_core.g_retriever.examples import build_examples
from gr_core.g_retriever.model import GraphLLM
from gr_core.g_retriever.train import make_run_config, predict
from gr_core.graphqa import DatasetConfig, load_dataset
from gr_core.precision import dtype_name
from gr_core.stats import compare

BATCH = 16  # predict's batch in the presets (GR code eval batch)


def with_cost(cost: float, fn, *args):
    """``fn(*args)`` with :data:`kernels.PREFILL_GROUP_COST` set to ``cost`` (``inf``: grouping off)."""
    default, kernels.PREFILL_GROUP_COST = kernels.PREFILL_GROUP_COST, cost
    try:
        return fn(*args)
    finally:
        kernels.PREFILL_GROUP_COST = default


def family(name: str, questions: int, llm: LLMConfig, costs: list[float]) -> dict:
    ds = load_dataset(DatasetConfig(name))
    cfg = make_run_config(name, "zero_shot", llm=llm)
    model = GraphLLM(cfg.model).eval()
    split = "val" if ds.split.get("val") else "test"
    index = list(ds.split[split])[:questions]
    examples = model.tokenize(build_examples(ds, index, cfg.model))
    lengths = [e.num_prompt_tokens for e in examples]
    predict(model, examples[:BATCH], BATCH)  # warm-up
    passes = {"padded": (float("inf"), BATCH), "grouped": (kernels.PREFILL_GROUP_COST, BATCH),
              "padded, batch 8": (float("inf"), 8)}
    result, answers = {}, {}
    for pass_name, (cost, batch) in passes.items():
        answers[pass_name], seconds = with_cost(cost, predict, model, examples, batch)
        scores = [task_scores(name, a, ds.records[i].answers)["score"] for a, i in zip(answers[pass_name], index)]
        result[pass_name] = {"seconds": round(seconds, 2), "answers_per_s": round(len(examples) / seconds, 3),
                             "answers_changed": sum(a != b for a, b in zip(answers[pass_name], answers["padded"])),
                             "score": round(100 * sum(scores) / len(scores), 2), "scores": scores}
    base = result["padded"].pop("scores")
    for r in list(result.values())[1:]:
        test = compare(r.pop("scores"), base)
        r["vs_padded"] = {k: test[k] for k in ("a_only", "b_only", "p")}  # a_only: right in this pass only
    out = {"dtype": dtype_name(model.llm_dtype), "split": split, "questions": len(examples),
           "prompt_tokens": [min(lengths), max(lengths)],
           "speedup": round(result["padded"]["seconds"] / result["grouped"]["seconds"], 3), "passes": result}
    if costs:
        ordered = sorted(examples, key=lambda e: e.num_prompt_tokens)
        batches = [model.collate(ordered[k:k + BATCH], with_label=False) for k in range(0, len(ordered), BATCH)]
        prefill = {}
        for _ in range(2):  # the best of two, costs interleaved
            for cost in costs:
                dt = sum(timed(with_cost, cost, model.generate_ids, b, 1)[1] for b in batches)
                prefill[str(cost)] = round(min(prefill.get(str(cost), dt), dt), 2)
        out["prefill_s_by_cost"] = prefill
        out["groups_by_cost"] = {str(c): [len(kernels.length_groups(b.attention_mask.sum(1).tolist(), c))
                                          for b in batches] for c in costs}
    print(name, {k: v for k, v in out.items() if k != "passes"},
          {k: {x: y for x, y in v.items() if x != "vs_padded"} for k, v in result.items()}, flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", default="webqsp,explagraphs,clevr,metaqa",
                        help="','-separated GraphQA datasets; the first is where the cost is chosen")
    parser.add_argument("--questions", type=int, default=192, help="validation questions per family (default 192)")
    parser.add_argument("--costs", default="0,32,128,512,inf", help="group costs timed on the first family")
    args = parser.parse_args()
    torch.manual_seed(0)
    llm = LLMConfig()
    costs = [float(c) for c in args.costs.split(",") if c]
    families = {}
    for k, name in enumerate(d.strip() for d in args.datasets.split(",") if d.strip()):
        families[name] = family(name, args.questions, llm, costs if k == 0 else [])
    path = write_result("grouped_prefill", {
        "method": "zero_shot", "llm": llm.model, "batch_size": BATCH, "group_cost": kernels.PREFILL_GROUP_COST,
        "cpu_model": machine()["cpu_model"], "families": families})
    print(f"-> {path}")


if __name__ == "__main__":
    main()
