"""How far a GNN-RAG reasoner's test score moves when its inputs move in their last bits (docs/timings.md).

    python bench/reasoner_numerics.py [--key webqsp] [--runs 8] [--noise 1e-7]  ->  outputs/bench/reasoner_numerics.json

The sentence encoder's vector of a text differs by up to about 2e-7 with the batch it was encoded in, so a cold run
(which encodes texts in whatever batches the notebooks before it formed) trains on inputs a few bits away from a warm
run's. This bench trains notebook 04's reasoner with the quick preset's settings for the key, read from the preset
(WebQSP: 976 training, 50 validation, 200 test questions, 5 epochs, lr 2e-3, seed 0) and the notebook's
ReasonerConfig, once on the vectors as cached, then
``--runs`` times with independent N(0, ``--noise``) added to every text vector it reads, and reports the test H@1
and F1 of each run and their spread. Nothing else changes between runs: the seed, the questions, the code.
"""
from __future__ import annotations

import argparse
import statistics

import numpy as np
from common import write_result

import gr_core
from gr_core import text_encoder
from gr_core.config import notebook_parameters
from gr_core.gnn_rag import ReasonerConfig, ReasonerTrainConfig
from gr_core.studies.gnn_rag import dataset_key, run_reasoners

CFG = ReasonerConfig(entity_dim=50, num_ins=2, num_iter=3, num_gnn=3, mask_topic=True)  # notebook 04's defaults


def quick_settings(key: str) -> tuple[tuple[int, int, int], ReasonerTrainConfig]:
    """The quick preset's notebook 04 settings for ``key``: (max_train, max_val, max_test) and the training config,
    with the preset's ``by_key`` overrides applied (as ``run_reasoners`` applies them)."""
    params = notebook_parameters("quick", "04_gnn_rag")
    params = {**params, **(params.get("by_key") or {}).get(key, {})}
    train = ReasonerTrainConfig(num_epochs=params["num_epochs"], seed=params["seed"], lr=params["reasoner_lr"])
    return (params["max_train"], params["max_val"], params["max_test"]), train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--key", default="webqsp", help="a dataset key of notebook 04 (webqsp, metaqa-1hop, ...)")
    parser.add_argument("--runs", type=int, default=8, help="perturbed runs (default 8)")
    parser.add_argument("--noise", type=float, default=1e-7, help="standard deviation of the added noise")
    args = parser.parse_args()
    name, hops = dataset_key(args.key)
    sizes, train = quick_settings(args.key)
    exact = text_encoder.EmbeddingStore.encode
    state = {"run": -1}

    def perturbed(self, texts, desc="encode"):
        emb, new = exact(self, texts, desc)
        if state["run"] >= 0:  # the same texts get the same noise within a run, other noise in the next run
            rng = np.random.default_rng([state["run"], len(texts)])
            emb = (emb + rng.normal(0.0, args.noise, emb.shape)).astype(np.float32)
        return emb, new

    text_encoder.EmbeddingStore.encode = perturbed
    runs = []
    for run in range(-1, args.runs):
        state["run"] = run
        gr_core.seed_everything(train.seed)
        metrics = run_reasoners([name], [hops], *sizes, CFG, train)[args.key]["metrics"]
        runs.append({"run": "as cached" if run < 0 else run, "h1": metrics["h1"], "f1": round(metrics["f1"], 2),
                     "mean_candidates": metrics["mean_candidates"]})
        print(runs[-1], flush=True)
    h1 = [r["h1"] for r in runs[1:]]
    summary = {"h1_min": min(h1), "h1_max": max(h1), "h1_mean": round(statistics.mean(h1), 2),
               "h1_sd": round(statistics.stdev(h1), 2) if len(h1) > 1 else None}
    path = write_result("reasoner_numerics", {"key": args.key, "noise_sd": args.noise, "sizes": sizes,
                                              "train": train.__dict__, "runs": runs, "perturbed": summary})
    print(f"{args.key}: as cached H@1 {runs[0]['h1']}; {args.runs} perturbed runs {summary} -> {path}")


if __name__ == "__main__":
    main()
