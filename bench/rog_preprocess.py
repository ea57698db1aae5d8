"""Preprocessing cost of RoG-webqsp, measured on its 18 complete 2-hop graphs and estimated for the whole release.

    python bench/rog_preprocess.py   ->  outputs/bench/rog_preprocess.json

The 18 shared RoG-webqsp test rows are written as hub-format parquet shards into a temporary data folder and read
through the reader the full preset uses (``gr_core.rog``), into an empty cache. Timed, one after the other: packing
the shards, embedding every distinct text (nodes, relations, questions) with the embedded MiniLM, and G-Retriever's
retrieval (top-k prizes + PCST, webqsp_full's k and C_e) on every question. The official pipeline (GR code
``preprocess/webqsp.py``) embeds every node and edge text of every graph, repeats included: that count, times the
encoder's speed measured here on a sample of them, is its embedding cost on this machine (the encoder model differs:
theirs is SBERT all-roberta-large-v1, ~20x MiniLM's FLOPs, so this understates it).

The whole of RoG-webqsp (4,700 questions) is then **estimated**, not measured: packing and PCST scale with the graphs
(per-graph cost x 4,700, the graphs being of the 18's mean size, 4,044 triples against the release's 4,252); the
distinct texts grow more slowly than the graphs, so their count is extrapolated with Heaps' law (distinct =
K * referenced^beta, fitted on the 18 graphs taken cumulatively in a seeded random order). Users of the official
code report about 10 hours of WebQSP preprocessing (G-Retriever issue 7).
"""
import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import write_result  # noqa: I001

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_rog import write_rog  # noqa: E402  the hub-format shard writer the tests use

from gr_core.graphqa import DatasetConfig, build_dataset, retrieve  # noqa: E402
from gr_core.paths import data_file, data_root  # noqa: E402
from gr_core.text_encoder import EmbeddingStore  # noqa: E402

ROG_WEBQSP_QUESTIONS = 2826 + 246 + 1628  # RoG's splits (issue 60; GNN-RAG Table 7)
OFFICIAL_HOURS = 10  # G-Retriever issue 7, as users report it
SAMPLE = 2000


def heaps_fit(referenced: np.ndarray, distinct: np.ndarray) -> tuple[float, float]:
    """``(K, beta)`` of distinct = K * referenced^beta, least squares in log space."""
    beta, log_k = np.polyfit(np.log(referenced), np.log(distinct), 1)
    return float(np.exp(log_k)), float(beta)


def main(argv: list[str] | None = None) -> None:
    argparse.ArgumentParser(prog="python bench/rog_preprocess.py", description=__doc__.split("\n")[0],
                            epilog="No options: the measurement is fixed (see the module docstring).").parse_args(argv)
    rows = [json.loads(line) for line in open(data_file("webqsp", "full_subgraphs.jsonl"), encoding="utf-8")]
    rows = [{k: r[k] for k in ("id", "question", "answer", "q_entity", "graph")} for r in rows]
    shared = data_root()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "data"
        folder.mkdir()
        for entry in shared.iterdir():
            (folder / entry.name).symlink_to(entry)
        write_rog(folder / "rog" / "webqsp" / "data", rows, counts=(("train", 2), ("validation", 1), ("test", 1)))
        os.environ.update(GR_DATA_DIR=str(folder), GR_CACHE_DIR=str(Path(tmp) / "cache"),
                          HF_HUB_CACHE=str(Path(tmp) / "hub"))
        store = EmbeddingStore()
        t0 = time.perf_counter()
        ds = build_dataset(DatasetConfig("rog_webqsp"), store)
        pack_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        encoded = ds.prefetch(range(len(ds)))
        encode_s = time.perf_counter() - t0
        pcst = []
        for i in range(len(ds)):
            t0 = time.perf_counter()
            retrieve(ds, i)
            pcst.append(time.perf_counter() - t0)
        # what the official pipeline embeds: every node and edge text of every graph, and the questions
        per_graph = [len(ds.node_text_ids[i]) + len(ds.edge_text_ids[i]) for i in range(len(ds))]
        referenced = [ds.texts[t] for i in range(len(ds)) for t in np.concatenate([ds.node_text_ids[i],
                                                                                    ds.edge_text_ids[i]])]
        sample = np.random.default_rng(0).choice(len(referenced), size=min(SAMPLE, len(referenced)), replace=False)
        t0 = time.perf_counter()
        store.encoder.encode([referenced[i] for i in sample], batch_size=store.cfg.batch_size,
                             normalize_embeddings=True)
        per_text = (time.perf_counter() - t0) / len(sample)
        order = np.random.default_rng(0).permutation(len(ds))
        seen, cum_ref, cum_distinct = set(), [], []
        for i in order:
            ids = np.concatenate([ds.node_text_ids[i], ds.edge_text_ids[i]])
            seen.update(ids.tolist())
            cum_ref.append((cum_ref[-1] if cum_ref else 0) + len(ids))
            cum_distinct.append(len(seen))
    n = len(ds)
    k, beta = heaps_fit(np.array(cum_ref), np.array(cum_distinct))
    whole_ref = float(np.mean(per_graph)) * ROG_WEBQSP_QUESTIONS
    whole_distinct = k * whole_ref ** beta + ROG_WEBQSP_QUESTIONS  # + the questions
    est = {"questions": ROG_WEBQSP_QUESTIONS,
           "pack_seconds": round(pack_s / n * ROG_WEBQSP_QUESTIONS, 1),
           "distinct_texts": int(whole_distinct), "texts_referenced": int(whole_ref + ROG_WEBQSP_QUESTIONS),
           "encode_seconds": round(whole_distinct * encode_s / max(encoded, 1), 1),
           "pcst_seconds": round(float(np.mean(pcst)) * ROG_WEBQSP_QUESTIONS, 1),
           "official_embedding_seconds_minilm": round((whole_ref + ROG_WEBQSP_QUESTIONS) * per_text, 1)}
    est["ours_total_hours"] = round((est["pack_seconds"] + est["encode_seconds"] + est["pcst_seconds"]) / 3600, 3)
    result = {
        "measured_18_graphs": {"questions": n, "triples_mean": float(np.mean([len(r["graph"]) for r in rows])),
                               "pack_seconds": round(pack_s, 3), "texts_encoded": int(encoded),
                               "encode_seconds": round(encode_s, 2), "texts_per_second": round(encoded / encode_s, 1),
                               "pcst_seconds_median": round(float(np.median(pcst)), 4),
                               "pcst_seconds_mean": round(float(np.mean(pcst)), 4),
                               "texts_referenced": int(sum(per_graph) + n),
                               "official_embedding_seconds_minilm": round((sum(per_graph) + n) * per_text, 1),
                               "heaps_k": round(k, 3), "heaps_beta": round(beta, 4)},
        "estimated_whole_rog_webqsp": est,
        "official_reported_hours": OFFICIAL_HOURS,
        "encoder": ds.config.encoder,
    }
    path = write_result("rog_preprocess", result)
    m = result["measured_18_graphs"]
    print(f"18 graphs: pack {m['pack_seconds']} s, {m['texts_encoded']} distinct texts in {m['encode_seconds']} s "
          f"(of {m['texts_referenced']} referenced), PCST median {m['pcst_seconds_median'] * 1e3:.1f} ms; whole "
          f"RoG-webqsp estimated {est['ours_total_hours']} h ({est['distinct_texts']} distinct texts) against the "
          f"official ~{OFFICIAL_HOURS} h  -> {path}")


if __name__ == "__main__":
    main()
