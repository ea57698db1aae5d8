"""Three more of ReaRev's released choices against ours (docs/method.md §3.1): test H@1 over seeds, paired.

    python bench/reasoner_released.py   ->  outputs/bench/reasoner_released.json

The start state from forward relation vectors at both ends of a fact (ours: inverse vectors for outgoing facts),
no dropout on the instructions themselves, and the loss divided by the batch size on every batch (ours: by the
questions with an answer in their graph). Notebook 04's quick reasoner (976 training questions, 5 epochs, lr 2e-3,
validation 50), seeds 0-2, each variant against ours on the same test questions (:func:`gr_core.stats.compare_seeds`).
"""
from __future__ import annotations

import json

import numpy as np
from common import write_result

import gr_core.gnn_rag.model as model_module
import gr_core.gnn_rag.training as training_module
from gr_core.gnn_rag import ReasonerConfig, ReasonerTrainConfig, reasoner_dataset, score_questions, train_reasoner
from gr_core.graphqa import DatasetConfig, load_dataset
from gr_core.runs import seed_everything
from gr_core.stats import compare_seeds
from gr_core.studies.gnn_rag import dataset_key

VARIANTS = {"ours": {}, "released start state": {"RELEASED_START": True},
            "no dropout on the instructions": {"INSTRUCTION_DROPOUT": False},
            "loss over the batch": {"LOSS_OVER_BATCH": True}}
MODULE = {"RELEASED_START": model_module, "INSTRUCTION_DROPOUT": model_module, "LOSS_OVER_BATCH": training_module}


def main() -> int:
    result = {}
    for key in ("webqsp", "metaqa-2hop"):
        name, hops = dataset_key(key)
        ds = load_dataset(DatasetConfig(name, hops=hops))
        splits = {s: list(ds.split[s])[:limit] for s, limit in (("train", 976), ("val", 50), ("test", 500))}
        data = {s: reasoner_dataset(ds, idx) for s, idx in splits.items()}
        h1 = {}
        for label, settings in VARIANTS.items():
            saved = {k: getattr(MODULE[k], k) for k in settings}
            for k, v in settings.items():
                setattr(MODULE[k], k, v)
            h1[label] = []
            for seed in (0, 1, 2):
                seed_everything(seed)
                model, _ = train_reasoner(data["train"], data["val"], int(ds.text_emb.shape[1]), ReasonerConfig(),
                                          ReasonerTrainConfig(num_epochs=5, lr=2e-3, seed=seed))
                h1[label].append([r["h1"] for r in score_questions(model, data["test"])])
            for k, v in saved.items():
                setattr(MODULE[k], k, v)
            print(json.dumps({"key": key, "variant": label, "h1": 100 * float(np.mean(h1[label]))}), flush=True)
        result[key] = {"n": len(splits["test"])}
        for label, v in h1.items():
            result[key][label] = {"h1_per_seed": [round(100 * float(np.mean(s)), 2) for s in v],
                                  "h1": round(100 * float(np.mean(v)), 2)}
            if label != "ours":
                result[key][label]["paired"] = compare_seeds(np.array(v), np.array(h1["ours"]))
    write_result("reasoner_released", {"keys": result})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
