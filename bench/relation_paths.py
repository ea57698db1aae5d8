"""Seconds per question of notebook 04's RoG-style relation paths (GNN-RAG + RA), at the notebook's batch and beams.

    python bench/relation_paths.py [--questions 64] [--batch 16] [--beams 3]

Generates the relation paths of the first MetaQA-3hop test questions with ``gr_core.gnn_rag.generation.
generate_relation_paths`` (beam search, as notebook 04 runs it) on an untrained LoRA model: an untrained model
writes until its token budget, so this is an upper bound on a trained generator's time. The plan of a preset
(``./gr suite --dry-run``, ``gr_core.plan``) reads ``seconds_per_question`` from ``outputs/bench/relation_paths.json``.
No peer: PyG has no relation-path generator.
"""
from __future__ import annotations

import argparse

import torch
from common import timed, write_result

from gr_core.config import LLMConfig
from gr_core.g_retriever.model import GraphLLM, LoRAConfig, ModelConfig
from gr_core.gnn_rag.generation import generate_relation_paths
from gr_core.graphqa import DatasetConfig, load_dataset


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--questions", type=int, default=64)
    parser.add_argument("--batch", type=int, default=16, help="notebook 04's eval_batch_size")
    parser.add_argument("--beams", type=int, default=3, help="notebook 04's rog_beams (RoG / GNN-RAG: 3)")
    args = parser.parse_args()



    torch.manual_seed(0)
    ds = load_dataset(DatasetConfig("metaqa", hops=3))
    questions = [ds.records[i].question for i in list(ds.split["test"])[:args.questions]]
    model = GraphLLM(ModelConfig(llm=LLMConfig(), lora=LoRAConfig(), graph_source="none"))
    generate_relation_paths(model, questions[:2], args.beams, args.batch)  # warm-up
    paths, seconds = timed(generate_relation_paths, model, questions, args.beams, args.batch)
    result = {"questions": len(questions), "batch_size": args.batch, "beams": args.beams,
              "max_new_tokens": model.cfg.llm.max_new_tokens, "dtype": str(model.llm_dtype).replace("torch.", ""),
              "threads": torch.get_num_threads(), "seconds": round(seconds, 2),
              "seconds_per_question": round(seconds / len(questions), 4),
              "mean_paths_per_question": round(sum(map(len, paths)) / len(paths), 2),
              "note": "untrained LoRA: writes to the token budget, an upper bound on a trained generator's time"}
    path = write_result("relation_paths", result)
    print(f"{len(questions)} questions, batch {args.batch}, {args.beams} beams, {result['dtype']}: "
          f"{seconds:.1f} s = {result['seconds_per_question']:.3f} s per question -> {path}")


if __name__ == "__main__":
    main()
