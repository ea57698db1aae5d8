"""Does retrieval shorten training? G-Retriever's training steps with the PCST subgraph against the whole graph.

    python bench/retrieval_epoch.py  ->  outputs/bench/retrieval_epoch.json

GR Table 4 reports minutes per training epoch with and without retrieval (WebQSP 18.7 -> 6.2, SceneGraphs 123.1 ->
86.8). Notebook 06 reads the same figure from its training runs' ``seconds_per_epoch``, but the preset's runs were
trained when and beside what their lanes allowed (the `cpu` preset trains two runs at a time, one thread each), so
two runs' epochs are not a controlled comparison. This bench times both sides in one process, one after the other,
on an otherwise idle machine: the runs' own configurations (``preset_run_config(PRESET, dataset, method, 0,
"06_efficiency")``: ``g_retriever`` on the PCST subgraph, ``gr_wo_retrieval`` on the whole graph, its text cut to
``max_txt_len`` tokens as in the paper's code), the same training questions, batches made as ``fit`` makes them
(:func:`~gr_core.g_retriever.examples.length_batches`, seed 0), each step as ``fit`` takes it (AdamW over the
trainable parts, gradient clipping). Reported per side: seconds per step (median over the timed steps, after one
warm-up step), real tokens per step, and the minutes per epoch that projects for the run's training split. There is
no peer: PyG's port has no whole-graph G-Retriever to time against.
"""
from common import machine, mean_loss, summarize, train_step_seconds, write_result  # noqa: I001

import argparse
import statistics
import time

import torch

from gr_core.g_retriever.examples import build_examples, length_batches
from gr_core.g_retriever.experiments import preset_run_config
from gr_core.g_retriever.model import DEFAULT_SOFT_PROMPT_INIT, SOFT_PROMPT_INIT, GraphLLM
from gr_core.g_retriever.train import param_groups, split_indices
from gr_core.graphqa import DatasetConfig, load_dataset
from gr_core.runs import seed_everything

SIDES = {"g_retriever": "with retrieval (PCST subgraph)", "gr_wo_retrieval": "without retrieval (whole graph)"}
# GR Table 4: minutes per epoch without -> with retrieval (clevr stands for its SceneGraphs row)
PAPER = {"webqsp": (18.7, 6.2), "clevr": (123.1, 86.8)}


def time_side(ds, dataset: str, method: str, preset: str, steps: int) -> dict:
    """Time ``steps`` training steps (after one warm-up) of ``method`` as the preset's run trains it."""
    cfg = preset_run_config(preset, dataset, method, 0, notebook="06_efficiency")
    seed_everything(0)
    model = GraphLLM(cfg.model, in_dim=int(ds.text_emb.shape[1]),
                     soft_prompt_init=SOFT_PROMPT_INIT.get(dataset, DEFAULT_SOFT_PROMPT_INIT))
    train_idx = split_indices(ds, cfg)["train"]
    examples = model.tokenize(build_examples(ds, train_idx, cfg.model, desc=f"{dataset} {method}"))
    lengths = [len(ex.desc_ids) + len(ex.question_ids) + len(ex.label_ids) for ex in examples]
    batches = length_batches(lengths, cfg.train.batch_size, 0, cfg.train.bucket_window)
    opt = torch.optim.AdamW(param_groups(model, cfg.train), lr=cfg.train.lr, weight_decay=cfg.train.weight_decay,
                            betas=cfg.train.betas)
    params = list(model.trainable_parameters().values())
    model.train()
    seconds, tokens = [], []
    for k, batch_ids in enumerate(batches[:steps + 1]):
        batch = model.collate([examples[i] for i in batch_ids], with_label=True)
        dt = train_step_seconds(lambda: mean_loss(model, batch), opt, params, cfg.train.grad_clip)
        if k:  # the first step warms up (allocations, kernels)
            seconds.append(dt)
            tokens.append(int(batch.num_tokens))
    step = statistics.median(seconds)
    return {"method": method, "side": SIDES[method], "config": cfg.name, "graph_source": cfg.model.graph_source,
            "max_txt_len": cfg.model.max_txt_len, "train_questions": len(examples), "steps_per_epoch": len(batches),
            "timed_steps": len(seconds), "seconds_per_step": summarize(seconds),
            "real_tokens_per_step": round(statistics.mean(tokens), 1),
            "mean_prompt_tokens": round(statistics.mean(lengths), 1),
            "projected_min_per_epoch": round(step * len(batches) / 60, 3), "llm_dtype": str(model.llm_dtype)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="cpu", help="whose notebook-06 run configurations to time")
    parser.add_argument("--datasets", nargs="+", default=["webqsp", "clevr"])
    parser.add_argument("--steps", type=int, default=8, help="timed training steps per side (after one warm-up)")
    args = parser.parse_args()
    result = {"preset": args.preset, "steps": args.steps, "threads": torch.get_num_threads(), "datasets": {}}
    for dataset in args.datasets:
        ds = load_dataset(DatasetConfig(dataset))
        sides = {}
        for method in SIDES:
            t0 = time.perf_counter()
            sides[method] = time_side(ds, dataset, method, args.preset, args.steps)
            print(f"{dataset} {method}: {sides[method]['seconds_per_step']['median_s']:.2f} s/step, "
                  f"{sides[method]['real_tokens_per_step']:.0f} tokens/step, projected "
                  f"{sides[method]['projected_min_per_epoch']:.2f} min/epoch ({time.perf_counter() - t0:.0f} s)",
                  flush=True)
        before = sides["gr_wo_retrieval"]["seconds_per_step"]["median_s"]
        after = sides["g_retriever"]["seconds_per_step"]["median_s"]
        paper = PAPER.get(dataset)
        result["datasets"][dataset] = {
            "sides": sides, "step_reduction_%": round(100 * (1 - after / before), 1),
            "paper_min_per_epoch": list(paper) if paper else None,
            "paper_reduction_%": round(100 * (1 - paper[1] / paper[0]), 1) if paper else None}
        r = result["datasets"][dataset]
        print(f"{dataset}: retrieval changes the step time by {-r['step_reduction_%']:+.1f}% (paper's epoch: "
              f"{-r['paper_reduction_%']:+.1f}%)", flush=True)
    result["summary"] = {d: r["step_reduction_%"] for d, r in result["datasets"].items()}
    print("wrote", write_result("retrieval_epoch", result), "on", machine()["cpu_model"])


if __name__ == "__main__":
    main()
