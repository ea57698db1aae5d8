"""The reasoner's candidate floor as GNN-RAG's evaluator sets it against ours (docs/method.md §3.4): GNN F1 and
candidate sets on test.

Ours never takes a node below ``(1 - eps) / N``, N the question's graph size; GNN-RAG's ``gnn/evaluate.py`` uses
``(1 - eps) / max_local_entity``, the largest graph of the dataset (here: of the questions read), a lower floor.
Notebook 04's quick reasoner (976 training questions, 5 epochs, lr 2e-3, validation 50) is trained once per seed and
its test candidates are selected both ways: F1, candidate hit and size per seed, and a paired test of F1 over seeds
and questions (:func:`gr_core.stats.compare_seeds`, graded scores). H@1 does not depend on the floor.

    python bench/reasoner_candidate_floor.py --keys webqsp metaqa-2hop --seeds 0 1 2 --max-test 500

Writes ``outputs/bench/reasoner_candidate_floor.json``.
"""
from __future__ import annotations

import argparse
import json
from unittest import mock

import numpy as np
from common import write_result
from reasoner_relation_text import quick_reasoner_args, quick_reasoner_splits

import gr_core.gnn_rag.training as training
from gr_core.gnn_rag import ReasonerConfig, ReasonerTrainConfig, reasoner_dataset, score_questions, train_reasoner
from gr_core.gnn_rag.reasoning_paths import select_candidates
from gr_core.runs import seed_everything
from gr_core.stats import compare_seeds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    args = quick_reasoner_args(parser).parse_args()
    rows = {}
    for key in args.keys:
        ds, splits = quick_reasoner_splits(key, args.max_test)
        data = {s: reasoner_dataset(ds, idx) for s, idx in splits.items()}
        largest = max(int(d.num_nodes) for part in data.values() for d in part)  # GNN-RAG's max_local_entity

        def theirs(probs, seeds, eps=0.95):  # the floor of the largest graph: pad to it with zero probability
            return select_candidates(np.concatenate([probs, np.zeros(largest - len(probs))]), seeds, eps)

        per = {"ours": [], "GNN-RAG's floor": []}
        sizes = {k: [] for k in per}
        for seed in args.seeds:
            seed_everything(seed)
            model, _ = train_reasoner(data["train"], data["val"], int(ds.text_emb.shape[1]), ReasonerConfig(),
                                      ReasonerTrainConfig(num_epochs=5, lr=2e-3, seed=seed))
            for label in per:
                with mock.patch.object(training, "select_candidates", select_candidates if label == "ours" else theirs):
                    scores = score_questions(model, data["test"])
                per[label].append([r["f1"] for r in scores])
                sizes[label].append(float(np.mean([r["candidates"] for r in scores])))
            print(json.dumps({"key": key, "seed": seed, **{k: round(100 * float(np.mean(v[-1])), 2)
                                                            for k, v in per.items()}}), flush=True)
        rows[key] = {"n": len(splits["test"]), "seeds": args.seeds, "largest_graph": largest,
                     **{label: {"f1_per_seed": [round(100 * float(np.mean(s)), 2) for s in v],
                                "f1": round(100 * float(np.mean(v)), 2),
                                "mean_candidates": round(float(np.mean(sizes[label])), 2)} for label, v in per.items()},
                     "paired": compare_seeds(np.array(per["GNN-RAG's floor"]), np.array(per["ours"]), binary=False)}
        print(json.dumps({"key": key, **rows[key]}), flush=True)
    write_result("reasoner_candidate_floor", {"keys": rows, "settings": vars(args)})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
