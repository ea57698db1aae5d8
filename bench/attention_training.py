"""Where SDPA beats eager attention in bf16 CPU training: the crossover behind ``gr_core.kernels.SDPA_FROM``.

    python bench/attention_training.py                    ->  outputs/bench/attention_training.json
    python bench/attention_training.py --dataset clevr    ->  outputs/bench/attention_training-clevr.json

Quick's G-Retriever configuration (notebook 03) of ``--dataset`` (WebQSP, where the threshold was chosen; another
family checks it) on its first 976 training questions, sorted by length; a batch
of 8 consecutive examples at each of several length quantiles runs forward and backward with eager attention
(``SDPA_FROM`` above every width) and with SDPA (0), in turn (eager first) over ``--rounds`` rounds after an
untimed one, in one process: the median seconds of each, their ratio, and both losses (the two kernels round bf16 sums
differently). docs/precision.md 2 quotes it.
"""
from __future__ import annotations

import argparse
import statistics
import time

from common import mean_loss, write_result

import gr_core.kernels as kernels
from gr_core.g_retriever.examples import build_examples, example_lengths
from gr_core.g_retriever.experiments import preset_run_config
from gr_core.g_retriever.model import DEFAULT_SOFT_PROMPT_INIT, SOFT_PROMPT_INIT, GraphLLM
from gr_core.graphqa import DatasetConfig, load_dataset
from gr_core.runs import seed_everything

KERNELS = {"eager": 10**9, "sdpa": 0}  # SDPA_FROM for each


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quantiles", nargs="+", type=float, default=[0.5, 0.75, 0.9, 0.97, 1.0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--dataset", default="webqsp")
    args = parser.parse_args()
    in_use = kernels.SDPA_FROM
    ds = load_dataset(DatasetConfig(args.dataset))
    cfg = preset_run_config("quick", args.dataset, "g_retriever", 0, notebook="03_training")
    seed_everything(0)
    model = GraphLLM(cfg.model, in_dim=int(ds.text_emb.shape[1]),
                     soft_prompt_init=SOFT_PROMPT_INIT.get(args.dataset, DEFAULT_SOFT_PROMPT_INIT))
    examples = model.tokenize(build_examples(ds, list(ds.split["train"])[:976], cfg.model, desc=args.dataset))
    lengths = example_lengths(examples)
    order = sorted(range(len(examples)), key=lambda i: lengths[i])
    params = list(model.trainable_parameters().values())
    model.train()
    rows = []
    for q in args.quantiles:
        start = min(int(q * len(order)), len(order) - 8)
        batch = model.collate([examples[i] for i in order[start:start + 8]], with_label=True).to(model.device)
        seconds, losses = {k: [] for k in KERNELS}, {}
        for r in range(args.rounds + 1):  # round 0 warms both kernels up at this width and is not timed
            for kernel, threshold in KERNELS.items():
                kernels.SDPA_FROM = threshold
                for p in params:
                    p.grad = None
                t0 = time.perf_counter()
                loss = mean_loss(model, batch)
                loss.backward()
                if r:
                    seconds[kernel].append(time.perf_counter() - t0)
                losses[kernel] = round(float(loss), 5)
        eager, sdpa = (statistics.median(seconds[k]) for k in KERNELS)
        rows.append({"positions": int(batch.input_ids.shape[1]), "quantile": q, "eager_s": round(eager, 2),
                     "sdpa_s": round(sdpa, 2), "eager_over_sdpa": round(eager / sdpa, 3), "losses": losses})
        print(rows[-1], flush=True)
    name = "attention_training" + ("" if args.dataset == "webqsp" else f"-{args.dataset}")
    write_result(name, {"dataset": args.dataset, "batches": rows, "rounds": args.rounds, "batch_size": 8,
                                        "llm_dtype": str(model.llm_dtype), "sdpa_training_from": in_use})


if __name__ == "__main__":
    main()
