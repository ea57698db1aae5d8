"""Dataset builders: build time, text deduplication, and MetaQA neighbourhood extraction speed.

    python bench/datasets.py   ->  outputs/bench/datasets.json

Per dataset (each built from scratch into its own empty cache, so build_seconds stand alone):
``texts_referenced`` (texts a per-graph encoder such as the reference embeds), ``texts_encoded``
(distinct texts, what we embed), ``dedup_factor``, ``build_seconds``, and
``peer_estimated_encode_seconds``: texts_referenced / the encoder's throughput measured on a
uniform sample of the referenced texts (an extrapolation; encoding all of them would take an hour).

MetaQA 2-hop: every official test question's neighbourhood cut from the 133,582-triple KB, ours
(``KnowledgeGraph.neighbourhood`` and the full textual graph) against PyG's ``k_hop_subgraph`` on
the same undirected edge_index, single-threaded, on the same questions; with the hub rule and cap
switched off both must return the same node sets.
"""
import argparse
import os
import tempfile
import time

import numpy as np
import torch
from common import summarize, write_result  # noqa: I001
from torch_geometric.utils import k_hop_subgraph, to_undirected

from gr_core.graphqa import DatasetConfig, build_dataset
from gr_core.kg import NeighbourhoodConfig
from gr_core.text_encoder import EmbeddingStore

DATASETS = [("explagraphs", {}), ("webqsp", {}), ("webqsp_full", {}), ("gqa_micro", {}), ("clevr", {}),
            ("metaqa", {"hops": 1}), ("metaqa", {"hops": 2}), ("metaqa", {"hops": 3})]
THROUGHPUT_SAMPLE = 2000


def referenced_texts(ds) -> list[str]:
    """Every text a per-graph encoder would embed (with repeats): graph texts and questions."""
    if ds.graphs is not None:
        first = {}
        for i, rec in enumerate(ds.records):
            first.setdefault(rec.graph_id, i)  # a scene's graph is embedded once, however many questions
        ids = np.concatenate([ds.node_text_ids[i] for i in first.values()]
                             + [ds.edge_text_ids[i] for i in first.values()])
    else:
        kg = ds.kg
        ent, rel = ds.entity_text_ids, ds.relation_text_ids
        ids = np.concatenate([ent[kg.heads], rel[kg.rels], ent[kg.tails]])
        ids = ids[ids >= 0]
    return [ds.texts[i] for i in ids] + [r.question for r in ds.records]


def bench_builds() -> dict:
    out = {}
    for name, kw in DATASETS:
        label = name + (f"_{kw['hops']}hop" if "hops" in kw else "")
        with tempfile.TemporaryDirectory() as tmp:
            os.environ["GR_CACHE_DIR"] = tmp
            store = EmbeddingStore()
            start = time.perf_counter()
            ds = build_dataset(DatasetConfig(name, **kw), store)
            t_encode = time.perf_counter()
            ds.prefetch(range(len(ds)))  # rows are encoded on first use: here all of them, as a full run reads them
            seconds, encode_seconds = time.perf_counter() - start, time.perf_counter() - t_encode
            ref = referenced_texts(ds)
            sample = np.random.default_rng(0).choice(len(ref), size=min(THROUGHPUT_SAMPLE, len(ref)), replace=False)
            texts = [ref[i] for i in sample]
            t0 = time.perf_counter()
            store.encoder.encode(texts, batch_size=store.cfg.batch_size, normalize_embeddings=True)
            per_text = (time.perf_counter() - t0) / len(texts)
        distinct = len(ds.texts) + len(set(r.question for r in ds.records))
        out[label] = {"questions": len(ds), "texts_referenced": len(ref), "texts_encoded": distinct,
                      "dedup_factor": round(len(ref) / distinct, 3), "build_seconds": round(seconds, 2),
                      "encode_seconds": round(encode_seconds, 2),
                      "peer_estimated_encode_seconds": round(len(ref) * per_text, 1)}
        print(f"{label:18s} {out[label]}", flush=True)
        if label == "metaqa_2hop":
            metaqa2 = ds
    os.environ.pop("GR_CACHE_DIR", None)
    return out, metaqa2


def bench_metaqa_extraction(ds) -> dict:
    torch.set_num_threads(1)
    kg = ds.kg
    test = ds.split["test"]
    seeds = [kg.entity_id[ds.records[i].q_entities[0]] for i in test]
    ours_nbh, ours_graph = [], []
    for i, s in zip(test, seeds):
        t0 = time.perf_counter()
        kg.neighbourhood([s], ds.config.neighbourhood)
        t1 = time.perf_counter()
        ds.graph(i)
        t2 = time.perf_counter()
        ours_nbh.append(t1 - t0)
        ours_graph.append(t2 - t1)
    # Side by side with PyG on identical semantics: plain 2-hop ball, no hub rule, no cap.
    plain = NeighbourhoodConfig(hops=2, max_expand_degree=10**9, max_nodes=10**9)
    edge_index = to_undirected(torch.tensor(np.stack([kg.heads, kg.tails])), num_nodes=kg.num_entities)
    sample = seeds[:: max(1, len(seeds) // 1000)]
    ours_plain, peer, same = [], [], 0
    for k, s in enumerate(sample):
        pair = []
        for which in ((0, 1) if k % 2 == 0 else (1, 0)):  # alternate who runs first
            t0 = time.perf_counter()
            if which == 0:
                nodes, _ = kg.neighbourhood([s], plain)
                ours_plain.append(time.perf_counter() - t0)
                pair.append(("ours", set(nodes.tolist())))
            else:
                subset, *_ = k_hop_subgraph(s, 2, edge_index, num_nodes=kg.num_entities)
                peer.append(time.perf_counter() - t0)
                pair.append(("peer", set(subset.tolist())))
        same += dict(pair)["ours"] == dict(pair)["peer"]
    return {"metaqa_2hop_subgraph_median_s": float(np.median(ours_nbh) + np.median(ours_graph)),
            "metaqa_2hop_neighbourhood": summarize(ours_nbh), "metaqa_2hop_textual_graph": summarize(ours_graph),
            "questions": len(test),
            "plain_2hop_vs_pyg": {"questions": len(sample), "ours": summarize(ours_plain),
                                  "peer_pyg_k_hop_subgraph": summarize(peer),
                                  "speedup": float(np.median(peer) / np.median(ours_plain)),
                                  "identical_node_sets": same / len(sample)}}


def main(argv: list[str] | None = None) -> None:
    argparse.ArgumentParser(prog="python bench/datasets.py", description=__doc__.split("\n")[0],
                            epilog="No options: the measurement is fixed (see the module docstring).").parse_args(argv)
    builds, metaqa2 = bench_builds()
    extraction = bench_metaqa_extraction(metaqa2)
    result = {"datasets": builds, **extraction}
    path = write_result("datasets", result)
    p = extraction["plain_2hop_vs_pyg"]
    print(f"MetaQA 2-hop subgraph: median {extraction['metaqa_2hop_subgraph_median_s'] * 1e3:.3f} ms "
          f"(neighbourhood {extraction['metaqa_2hop_neighbourhood']['median_s'] * 1e3:.3f} ms); plain 2-hop ball "
          f"ours {p['ours']['median_s'] * 1e3:.3f} ms vs PyG k_hop_subgraph "
          f"{p['peer_pyg_k_hop_subgraph']['median_s'] * 1e3:.2f} ms "
          f"({p['speedup']:.0f}x), identical node sets {p['identical_node_sets']:.3f}  -> {path}")


if __name__ == "__main__":
    main()
