"""Does retrieval shorten training? G-Retriever's training steps with the PCST subgraph against the whole graph.

    python bench/retrieval_epoch.py  ->  outputs/bench/retrieval_epoch.json  (--preset P: retrieval_epoch-P.json)

GR Table 4 reports minutes per training epoch with and without retrieval (WebQSP 18.7 -> 6.2, SceneGraphs 123.1 ->
86.8). Notebook 06 reads the same figure from its training runs' ``seconds_per_epoch``, but the preset's runs were
trained when and beside whatever else ran (the `cpu` preset's were trained two at a time, one thread each:
docs/notebooks.md), so two runs' epochs are not a controlled comparison. This bench times both sides in one process,
one after the other, on an otherwise idle machine: the runs' own configurations (``preset_run_config(PRESET, dataset,
method, 0, "06_efficiency")``: ``g_retriever`` on the PCST subgraph, ``gr_wo_retrieval`` on the whole graph, its text
cut to ``max_txt_len`` tokens as in the paper's code), the same training questions, batches made as ``fit`` makes them
(:func:`~gr_core.g_retriever.examples.length_batches`, seed 0: the first epoch's batches), each step's forward,
backward, gradient clipping and AdamW step timed as ``fit`` takes them (collating a batch and the learning-rate
schedule are left out of the timer: both are negligible and the same on both sides). The whole epoch is timed, after
one warm-up step on its first batch: the two sides' batches hold different questions (they are bucketed by their own
lengths), so only the sum over the epoch compares like with like. Reported per side: the epoch's seconds and real
(non-pad) tokens, seconds per 1,000 tokens, each step's seconds and their median and spread; notebook 08 decides the
claim from the steps (`gr_core.stats.total_reduction`, at least 8 a side). There is no peer: PyG's port has no
whole-graph G-Retriever to time against.
"""
from common import machine, mean_loss, summarize, train_step_seconds, write_result  # noqa: I001

import argparse
import statistics
import time

import torch

from gr_core.g_retriever.examples import build_examples, example_lengths, length_batches, split_indices
from gr_core.g_retriever.experiments import preset_run_config
from gr_core.g_retriever.model import DEFAULT_SOFT_PROMPT_INIT, SOFT_PROMPT_INIT, GraphLLM
from gr_core.g_retriever.train import param_groups
from gr_core.graphqa import DatasetConfig, load_dataset
from gr_core.runs import seed_everything
from gr_core.studies.efficiency import paper_table4

SIDES = {"g_retriever": "with retrieval (PCST subgraph)", "gr_wo_retrieval": "without retrieval (whole graph)"}


def time_side(ds, dataset: str, method: str, preset: str, steps: int = 0) -> dict:
    """Time an epoch's training steps of ``method`` as the preset's run trains it (``steps`` > 0: only that many,
    for a quick look), after one warm-up step on the first batch."""
    cfg = preset_run_config(preset, dataset, method, 0, notebook="06_efficiency")
    seed_everything(0)
    model = GraphLLM(cfg.model, in_dim=int(ds.text_emb.shape[1]),
                     soft_prompt_init=SOFT_PROMPT_INIT.get(dataset, DEFAULT_SOFT_PROMPT_INIT))
    train_idx = split_indices(ds, cfg)["train"]
    examples = model.tokenize(build_examples(ds, train_idx, cfg.model, desc=f"{dataset} {method}"))
    lengths = example_lengths(examples)
    batches = length_batches(lengths, cfg.train.batch_size, 0, cfg.train.bucket_window)
    opt = torch.optim.AdamW(param_groups(model, cfg.train), lr=cfg.train.lr, weight_decay=cfg.train.weight_decay,
                            betas=cfg.train.betas)
    params = list(model.trainable_parameters().values())
    model.train()
    timed = batches[:steps] if steps else batches
    seconds, tokens = [], []
    for k, batch_ids in enumerate([timed[0]] + timed):
        batch = model.collate([examples[i] for i in batch_ids], with_label=True).to(model.device)
        dt = train_step_seconds(lambda: mean_loss(model, batch), opt, params, cfg.train.grad_clip)
        if k:  # the first step warms up (allocations, kernels) on the first batch, which is then timed again
            seconds.append(dt)
            tokens.append(int(batch.num_tokens))
    return {"method": method, "side": SIDES[method], "config": cfg.name, "graph_source": cfg.model.graph_source,
            "max_txt_len": cfg.model.max_txt_len, "train_questions": len(examples), "steps_per_epoch": len(batches),
            "timed_steps": len(seconds), "seconds": round(sum(seconds), 2), "real_tokens": sum(tokens),
            "seconds_per_1k_tokens": round(1000 * sum(seconds) / sum(tokens), 4),
            "seconds_per_step": summarize(seconds), "step_seconds": [round(x, 4) for x in seconds],
            "mean_prompt_tokens": round(statistics.mean(lengths), 1),
            "min_per_epoch": round(sum(seconds) / 60 * len(batches) / len(seconds), 3),
            "llm_dtype": str(model.llm_dtype).removeprefix("torch.")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="cpu", help="whose notebook-06 run configurations to time")
    parser.add_argument("--datasets", nargs="+", default=["webqsp", "clevr"])
    parser.add_argument("--steps", type=int, default=0, help="time only this many steps per side (0: the epoch)")
    args = parser.parse_args()
    result = {"preset": args.preset, "steps": args.steps, "threads": torch.get_num_threads(), "datasets": {}}
    for dataset in args.datasets:
        ds = load_dataset(DatasetConfig(dataset))
        sides = {}
        for method in SIDES:
            t0 = time.perf_counter()
            sides[method] = time_side(ds, dataset, method, args.preset, args.steps)
            side = sides[method]
            print(f"{dataset} {method}: {side['seconds']:.1f} s for {side['timed_steps']} steps, "
                  f"{side['real_tokens']} real tokens ({side['seconds_per_1k_tokens']:.3f} s per 1k), "
                  f"{side['min_per_epoch']:.2f} min/epoch ({time.perf_counter() - t0:.0f} s)", flush=True)
        before, after = sides["gr_wo_retrieval"]["seconds"], sides["g_retriever"]["seconds"]
        row = paper_table4(dataset)  # GR Table 4's minutes per epoch without -> with retrieval
        paper = (row["min_epoch_before"], row["min_epoch_after"]) if row else None
        result["datasets"][dataset] = {
            "sides": sides, "epoch_reduction_%": round(100 * (1 - after / before), 1),
            "token_reduction_%": round(100 * (1 - sides["g_retriever"]["real_tokens"]
                                               / sides["gr_wo_retrieval"]["real_tokens"]), 1),
            "paper_min_per_epoch": list(paper) if paper else None,
            "paper_reduction_%": round(100 * (1 - paper[1] / paper[0]), 1) if paper else None}
        r = result["datasets"][dataset]
        paper_txt = "" if paper is None else f" (paper's epoch: {-r['paper_reduction_%']:+.1f}%)"
        print(f"{dataset}: retrieval changes the epoch's training time by {-r['epoch_reduction_%']:+.1f}% and its "
              f"real tokens by {-r['token_reduction_%']:+.1f}%{paper_txt}", flush=True)
    result["summary"] = {d: r["epoch_reduction_%"] for d, r in result["datasets"].items()}
    name = "retrieval_epoch" if args.preset == "cpu" else f"retrieval_epoch-{args.preset}"  # one file per preset
    print("wrote", write_result(name, result), "on", machine()["cpu_model"])


if __name__ == "__main__":
    main()
