"""The reasoner's relation text as written against GNN-RAG's words for it (docs/method.md §3.1): test H@1 over seeds.

Ours embeds each relation as the graph writes it (``people.person.nationality``, ``directed_by``); GNN-RAG's
``gnn/dataset_load.py`` embeds the words of its last two dotted fields (``person nationality``) or of its
underscores (``directed by``). This trains notebook 04's quick reasoner (976 training questions, 5 epochs, lr 2e-3,
validation 50) once per seed with each text and scores both on the same test questions: H@1 per seed and a paired
test over seeds (:func:`gr_core.stats.compare_seeds`). Only the forward text changes here (the released code also
encodes the inverse relation from the reversed words, where ours learns a second map of the same vector).

    python bench/reasoner_relation_text.py --keys webqsp metaqa-2hop --seeds 0 1 2 --max-test 500

Writes ``outputs/bench/reasoner_relation_text.json``.
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict

import numpy as np
import torch
from common import write_result

from gr_core.config import TextEncoderConfig
from gr_core.gnn_rag import ReasonerConfig, ReasonerTrainConfig, reasoner_dataset, score_questions, train_reasoner
from gr_core.graphqa import DatasetConfig, load_dataset
from gr_core.runs import seed_everything
from gr_core.stats import compare_seeds
from gr_core.studies.gnn_rag import dataset_key
from gr_core.text_encoder import EmbeddingStore


def gnn_rag_words(relation: str) -> str:
    """GNN-RAG's text for a relation: the words of its last two dotted fields, else of its underscores."""
    fields = relation.split(".")
    parts = fields[-2:] if len(fields) > 1 else fields
    return " ".join(w for part in parts for w in part.split("_") if w)


def as_gnn_rag_words(ds, indices: list[int], data: list, store: EmbeddingStore) -> list:
    """``data`` (``question_data`` of ``indices``) with each ``rel_table`` row re-encoded from GNN-RAG's words; the
    rows keep their order (the graph's distinct relation texts, sorted, as ``question_data`` builds them)."""
    for i, d in zip(indices, data):
        texts = np.unique(ds.graph(i).edges.edge_attr.astype(str).to_numpy())
        emb, _ = store.encode([gnn_rag_words(t) for t in texts])
        assert len(texts) == d.rel_table.shape[0]
        d.rel_table = torch.from_numpy(emb)
    return data


def quick_reasoner_args(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``parser`` with the options of the benches that train notebook 04's quick reasoner: ``--keys``, ``--seeds``,
    ``--max-test``."""
    parser.add_argument("--keys", nargs="+", default=["webqsp", "metaqa-2hop"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--max-test", type=int, default=500)
    return parser


def quick_reasoner_splits(key: str, max_test: int) -> tuple:
    """``(dataset, splits)`` of a dataset key: notebook 04's quick sizes (976 training, 50 validation questions)."""
    name, hops = dataset_key(key)
    ds = load_dataset(DatasetConfig(name, hops=hops))
    return ds, {s: list(ds.split[s])[:limit] for s, limit in (("train", 976), ("val", 50), ("test", max_test))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    args = quick_reasoner_args(parser).parse_args()
    cfg = ReasonerConfig()
    rows = {}
    for key in args.keys:
        ds, splits = quick_reasoner_splits(key, args.max_test)
        store = EmbeddingStore.shared(TextEncoderConfig(model=ds.config.encoder))
        written = {s: reasoner_dataset(ds, idx) for s, idx in splits.items()}
        words = {s: as_gnn_rag_words(ds, idx, reasoner_dataset(ds, idx), store) for s, idx in splits.items()}
        h1 = {"as written": [], "GNN-RAG's words": []}
        for seed in args.seeds:
            tcfg = ReasonerTrainConfig(num_epochs=5, lr=2e-3, seed=seed)
            for label, data in (("as written", written), ("GNN-RAG's words", words)):
                seed_everything(seed)
                t0 = time.perf_counter()
                model, _ = train_reasoner(data["train"], data["val"], int(ds.text_emb.shape[1]), cfg, tcfg)
                h1[label].append([r["h1"] for r in score_questions(model, data["test"])])
                print(json.dumps({"key": key, "seed": seed, "text": label, "h1": 100 * float(np.mean(h1[label][-1])),
                                  "seconds": round(time.perf_counter() - t0, 1)}), flush=True)
        # no interval pooled over seeds and questions (not independent draws): the paired test below is over seeds
        per = {label: {"h1_per_seed": [round(100 * float(np.mean(s)), 2) for s in v],
                       "h1": round(100 * float(np.mean(v)), 2)} for label, v in h1.items()}
        rows[key] = {"n": len(splits["test"]), "seeds": args.seeds, **per,
                     "paired": compare_seeds(np.array(h1["GNN-RAG's words"]), np.array(h1["as written"]))}
        print(json.dumps({"key": key, **rows[key]}), flush=True)
    write_result("reasoner_relation_text", {"keys": rows, "reasoner": asdict(cfg), "settings": vars(args)})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
