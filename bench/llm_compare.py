"""The embedded LLMs side by side on the Table 8 data: load time, training tokens/s, answers/s.

    python bench/llm_compare.py   ->  outputs/bench/llm_compare.json

For each embedded LLM that is installed (SmolLM2-135M-Instruct always; Gemma 3 270M with the optional ``gemma``
extra): building the fp32 cache from the GGUF (dequantization, timed once in a fresh cache folder), loading the
cached directory, and G-Retriever (frozen LLM, the quick preset's Graph Transformer 4 x 256) on the same
ExplaGraphs training questions, batch 8, length-bucketed, the first batch as warm-up; then greedy answers to the
same test questions in batches of 16. Tokens are each model's own real (non-pad) prompt + label tokens, so the two
tokenizers' lengths are reported beside the rates. No peer: PyG's port loads the same HF directories.
"""
import argparse
import os
import tempfile
import time

import torch
from common import summarize, write_result  # noqa: I001
from train_infer_throughput import ours_train  # noqa: E402  (the same timed training loop)

from gr_core.config import LLMConfig
from gr_core.g_retriever.examples import build_examples
from gr_core.g_retriever.graph_encoder import GNNConfig
from gr_core.g_retriever.model import GraphLLM
from gr_core.g_retriever.train import TrainConfig, make_run_config, predict
from gr_core.graphqa import DatasetConfig, load_dataset
from gr_core.llm import EMBEDDED_LLMS, embedded_llm_dir, unavailable

DATASET = "explagraphs"
TRAIN_EXAMPLES = 48  # 6 batches of 8: 1 warm-up + 5 timed
INFER_EXAMPLES = 48
EVAL_BATCH = 16
GNN = GNNConfig(kind="gt", hidden=256, num_layers=4, heads=4)


def build_seconds(name: str) -> float:
    """Dequantize the GGUF into a fresh cache folder (the first-use cost on a new machine)."""
    old = os.environ.get("GR_CACHE_DIR")
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["GR_CACHE_DIR"] = tmp
        try:
            t0 = time.perf_counter()
            embedded_llm_dir(name=name)
            return time.perf_counter() - t0
        finally:
            if old is None:
                os.environ.pop("GR_CACHE_DIR")
            else:
                os.environ["GR_CACHE_DIR"] = old


def one_llm(name: str, ds) -> dict:
    build = build_seconds(name)
    embedded_llm_dir(name=name)  # the project cache, outside the timings
    model_name = f"embedded:{name}"
    cfg = make_run_config(DATASET, "g_retriever", gnn=GNN, llm=LLMConfig(model=model_name), system_prompt="")
    t0 = time.perf_counter()
    torch.manual_seed(0)
    model = GraphLLM(cfg.model, in_dim=int(ds.text_emb.shape[1]))
    load = time.perf_counter() - t0
    train_ex = model.tokenize(build_examples(ds, ds.split["train"][:TRAIN_EXAMPLES], cfg.model))
    test_ex = model.tokenize(build_examples(ds, ds.split["test"][:INFER_EXAMPLES], cfg.model))
    run = ours_train(model, train_ex, TrainConfig())
    predict(model, test_ex[:EVAL_BATCH], EVAL_BATCH)  # warm-up
    answers, infer_s = predict(model, test_ex, EVAL_BATCH)
    llm = model.llm
    emb = llm.get_input_embeddings().weight
    return {"llm": model_name, "params": sum(p.numel() for p in llm.parameters()),
            "non_embedding_params": sum(p.numel() for p in llm.parameters()) - emb.numel(),
            "vocab": int(emb.shape[0]), "hidden": int(emb.shape[1]),
            "gguf_to_fp32_cache_s": round(build, 2), "model_load_s": round(load, 2),
            "train_tokens_per_s": round(sum(run["tokens"]) / sum(run["seconds"]), 1),
            "train_step_s": summarize(run["seconds"]),
            "tokens_per_example": sum(run["tokens"]) / (len(run["tokens"]) * 8),
            "answers_per_s": round(len(test_ex) / infer_s, 3), "sample_answers": answers[:3]}


def main(argv: list[str] | None = None) -> None:
    argparse.ArgumentParser(prog="python bench/llm_compare.py", description=__doc__.split("\n")[0],
                            epilog="No options: the measurement is fixed (see the module docstring).").parse_args(argv)
    ds = load_dataset(DatasetConfig(DATASET))
    ds.prefetch(list(ds.split["train"][:TRAIN_EXAMPLES]) + list(ds.split["test"][:INFER_EXAMPLES]))
    rows, skipped = [], {}
    for name in EMBEDDED_LLMS:
        why = unavailable(f"embedded:{name}")
        if why:
            skipped[name] = why
            continue
        rows.append(one_llm(name, ds))
    result = {"dataset": DATASET, "train_examples": TRAIN_EXAMPLES, "infer_examples": INFER_EXAMPLES,
              "batch_size": 8, "eval_batch_size": EVAL_BATCH, "gnn": GNN.__dict__, "llms": rows, "skipped": skipped}
    path = write_result("llm_compare", result)
    for r in rows:
        print(f"{r['llm']}: {r['params'] / 1e6:.0f}M params ({r['non_embedding_params'] / 1e6:.0f}M without "
              f"embeddings); GGUF -> fp32 cache {r['gguf_to_fp32_cache_s']:.1f} s, load {r['model_load_s']:.1f} s; "
              f"training {r['train_tokens_per_s']:.0f} tokens/s ({r['tokens_per_example']:.0f} tokens/example); "
              f"{r['answers_per_s']:.2f} answers/s")
    for name, why in skipped.items():
        print(f"embedded:{name}: skipped, {why}")
    print("->", path)


if __name__ == "__main__":
    main()
