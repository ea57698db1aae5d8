"""PCST retrieval: ours against PyG's ``retrieval_via_pcst`` on identical inputs, in one process.

    python bench/retrieval_pcst.py   ->  outputs/bench/retrieval_pcst.json

Inputs: the 18 complete WebQSP test subgraphs (embedded with the project's 384-d encoder, the question
as the query) and 30 seeded synthetic graphs of WebQSP size (1,371 nodes, 4,252 edges, 1024-d features, 150
relation embeddings shared with Zipf(1.1) frequencies so tie groups are realistic, hub-heavy
sources, a query biased towards one node and one relation, names with commas and quotes).
Single-threaded; 3 warm-up calls; A/B order alternated per input (A B, then B A). Both sides are
timed producing the same outputs: the subgraph and its textualized desc.

- ``ours``: the product's path (:func:`gr_core.graphqa.retrieve`): each distinct text scored once against the
  question (:func:`~gr_core.g_retriever.retrieval.text_similarities`; the synthetic graphs' 150 relations, a real
  graph's relation and entity texts), then the default setting (official prize rule, mat-vec similarity), PCST and
  the subgraph; ``stages`` splits its time into similarity, the solver and the rest (prizes, solver input, subgraph,
  desc).
- ``ours_per_row``: the same on per-row inputs, one embedding per node and per edge as PyG takes them.
- ``ours_compat``: PyG's prize rule and exact cosine: the subgraphs must equal PyG's (same node rows,
  same ordered edge rows, same desc string): ``identical_fraction_compat``.
- ``differs_fraction_official``: how often the official rule selects a different subgraph than PyG,
  with the cause recorded per case (PyG's "previous - c" cap makes later tie groups' prizes smaller,
  or negative once the top group is large: docs/peers.md 4).
- ``metaqa_2hop_median_s``: neighbourhood extraction from the 133,582-triple KB + PCST, per official
  2-hop test question.
"""
import argparse
import time

import numpy as np
import pandas as pd
import torch
from common import round_order, summarize, write_result  # noqa: I001
from torch_geometric.data import Data
from torch_geometric.llm.utils.backend_utils import retrieval_via_pcst

from gr_core.data import TextualGraph
from gr_core.g_retriever import retrieval
from gr_core.g_retriever.retrieval import (RetrievalConfig, check_pcst_solver, edge_prizes, retrieve_subgraph,
                                           similarities, text_similarities)
from gr_core.graphqa import DatasetConfig, load_dataset, retrieve

OURS = RetrievalConfig(3, 5, 0.5)
COMPAT = RetrievalConfig(3, 5, 0.5, prize_mode="pyg", similarity="cosine")


def synthetic_graph(seed: int, n: int = 1371, m: int = 4252, dim: int = 1024, num_rel: int = 150):
    """A seeded WebQSP-sized textual graph with embeddings and a query (docs/peers.md's recipe: 1024-d, the
    width of the paper's all-roberta-large-v1; the real graphs carry our 384-d MiniLM embeddings)."""
    rng = np.random.default_rng(seed)
    hubs = rng.choice(n, size=20, replace=False)
    src = np.where(rng.random(m) < 0.4, rng.choice(hubs, size=m), rng.integers(0, n, m))
    dst = rng.integers(0, n, m)
    zipf = 1.0 / np.arange(1, num_rel + 1) ** 1.1
    rel = rng.choice(num_rel, size=m, p=zipf / zipf.sum())
    x = rng.normal(size=(n, dim)).astype(np.float32)
    r = rng.normal(size=(num_rel, dim)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    r /= np.linalg.norm(r, axis=1, keepdims=True)
    q = 0.5 * x[rng.integers(n)] + 0.5 * r[rng.integers(num_rel)] + 0.3 * rng.normal(size=dim).astype(np.float32)
    names = [f'entity {i}, "alias {i % 7}"' if i % 5 == 0 else f"entity {i}" for i in range(n)]
    nodes = pd.DataFrame({"node_id": np.arange(n), "node_attr": names})
    edges = pd.DataFrame({"src": src, "edge_attr": [f"rel.{k}" for k in rel], "dst": dst})
    texts = (np.concatenate([x, r]), np.arange(n), n + rel)  # the distinct texts' table and each row's text
    return TextualGraph(nodes, edges), x, r[rel], q.astype(np.float32), texts


def pyg_inputs(graph, x, e):
    return Data(x=torch.from_numpy(x),
                edge_index=torch.tensor(np.stack([graph.edges.src.to_numpy(), graph.edges.dst.to_numpy()])),
                edge_attr=torch.from_numpy(e), num_nodes=graph.num_nodes, node_idx=np.arange(graph.num_nodes),
                edge_idx=np.arange(graph.num_edges))


def run_peer(graph, x, e, q):
    return retrieval_via_pcst(pyg_inputs(graph, x, e), torch.from_numpy(q), graph.nodes, graph.edges, 3, 5, 0.5)


def inputs():
    ds = load_dataset("webqsp_full")
    ds.prefetch(range(len(ds)))
    for i in range(len(ds)):
        g = ds.graph(i)
        x, e = ds.embeddings(i)
        yield (f"webqsp/{ds.records[i].graph_id}", g, np.ascontiguousarray(x), np.ascontiguousarray(e),
               ds.question_emb[i], (ds.text_emb, *ds.text_rows(i, g)))
    for seed in range(30):
        yield f"synthetic/{seed}", *synthetic_graph(seed)


def run_ours(g, q, texts, stages: dict | None = None):
    """The product's retrieval (as :func:`gr_core.graphqa.retrieve`) and its desc; ``stages`` collects the seconds
    of the similarity and the solver."""
    t0 = time.perf_counter()
    node_sim, edge_sim = text_similarities(q, *texts, OURS.similarity)
    if stages is not None:
        stages["similarity"].append(time.perf_counter() - t0)
    res = retrieve_subgraph(g, None, None, None, OURS, node_sim=node_sim, edge_sim=edge_sim)
    return res, res.desc


def main(argv: list[str] | None = None) -> None:
    argparse.ArgumentParser(prog="python bench/retrieval_pcst.py", description=__doc__.split("\n")[0],
                            epilog="No options: the measurement is fixed (see the module docstring).").parse_args(argv)
    torch.set_num_threads(1)
    check_pcst_solver()
    cases = list(inputs())
    for _, g, x, e, q, texts in cases[:3]:  # warm-up
        run_peer(g, x, e, q)
        run_ours(g, q, texts)
        retrieve_subgraph(g, x, e, q, OURS)
    times = {"peer": [], "ours": [], "per_row": [], "compat": []}
    rows = []
    for k, (name, g, x, e, q, texts) in enumerate(cases):
        runs = {}
        for which in round_order(("peer", "ours", "per_row", "compat"), k):
            t0 = time.perf_counter()
            if which == "peer":
                runs[which] = run_peer(g, x, e, q)
            elif which == "ours":
                runs[which] = run_ours(g, q, texts)
            else:  # the same outputs as PyG's: the subgraph and its desc text
                res = retrieve_subgraph(g, x, e, q, OURS if which == "per_row" else COMPAT)
                runs[which] = (res, res.desc)
            times[which].append(time.perf_counter() - t0)
        peer_data, peer_desc = runs["peer"]
        (compat, compat_desc), (ours, _) = runs["compat"], runs["ours"]
        identical = (compat.node_rows.tolist() == np.asarray(peer_data.node_idx).tolist()
                     and compat.edge_rows.tolist() == np.asarray(peer_data.edge_idx).tolist()
                     and compat_desc == peer_desc)
        same_official = (sorted(ours.node_rows.tolist()) == sorted(compat.node_rows.tolist())
                         and sorted(ours.edge_rows.tolist()) == sorted(compat.edge_rows.tolist()))
        sim_e = similarities(q, e, "cosine")
        pyg_prizes = edge_prizes(sim_e, 5, 0.01, "pyg")
        top_group = int((sim_e == sim_e.max()).sum())
        rows.append({"graph": name, "nodes": g.num_nodes, "edges": g.num_edges, "identical_compat": identical,
                     "official_differs": not same_official, "top_tie_group": top_group,
                     "pyg_negative_prize_edges": int((pyg_prizes < 0).sum()),
                     "subgraph_nodes_official": len(ours.node_rows), "subgraph_nodes_pyg": len(compat.node_rows),
                     "answer_in_official": bool(set(a.lower() for a in g.answers) & set(ours.graph.nodes.node_attr)),
                     "answer_in_pyg": bool(set(a.lower() for a in g.answers) & set(compat.graph.nodes.node_attr))})
    differ = [r for r in rows if r["official_differs"]]
    med = {which: summarize(t)["median_s"] for which, t in times.items()}
    result = {
        "ours_median_s": med["ours"], "ours_p90_s": summarize(times["ours"])["p90_s"],
        "ours_per_row_median_s": med["per_row"], "ours_per_row_p90_s": summarize(times["per_row"])["p90_s"],
        "ours_compat_median_s": med["compat"], "ours_compat_p90_s": summarize(times["compat"])["p90_s"],
        "peer_median_s": med["peer"], "peer_p90_s": summarize(times["peer"])["p90_s"],
        "speedup": med["peer"] / med["ours"], "speedup_per_row": med["peer"] / med["per_row"],
        "speedup_compat": med["peer"] / med["compat"],
        "identical_fraction_compat": float(np.mean([r["identical_compat"] for r in rows])),
        "differs_fraction_official": len(differ) / len(rows),
        "differs_with_negative_pyg_prizes": sum(r["pyg_negative_prize_edges"] > 0 for r in differ),
        **{part: {"ours": summarize(times["ours"][sl]), "ours_per_row": summarize(times["per_row"][sl]),
                  "ours_compat": summarize(times["compat"][sl]), "peer": summarize(times["peer"][sl])}
           for part, sl in (("webqsp_full", slice(0, 18)), ("synthetic", slice(18, None)))},
        "cases": rows, "threads": 1, "dtype": "float32 (embeddings and similarities; the solver in float64)",
    }
    result["stages"] = stages(cases)
    result["solver_only"] = result["stages"].pop("solver_s")
    result.update(metaqa_2hop())
    path = write_result("retrieval_pcst", result)
    print(f"PCST retrieval, {len(rows)} graphs, 1 thread: ours {result['ours_median_s'] * 1e3:.2f} ms median "
          f"(p90 {result['ours_p90_s'] * 1e3:.2f}; per-row inputs {result['ours_per_row_median_s'] * 1e3:.2f}), "
          f"compat {result['ours_compat_median_s'] * 1e3:.2f} ms, "
          f"PyG {result['peer_median_s'] * 1e3:.1f} ms -> {result['speedup']:.0f}x ({result['speedup_compat']:.0f}x "
          f"compat); identical in PyG's setting {result['identical_fraction_compat']:.3f}; solver alone "
          f"{result['solver_only']['median_s'] * 1e3:.2f} ms; official rule differs "
          f"{result['differs_fraction_official']:.3f}; MetaQA 2-hop extraction+PCST "
          f"{result['metaqa_2hop_median_s'] * 1e3:.2f} ms"
          f"  -> {path}")


def stages(cases) -> dict:
    """Where the product's retrieval spends its time, per input: the similarity, the ``pcst_fast`` call (the floor),
    and the rest (prizes, the solver's input, the subgraph and its desc), each a median over the inputs."""
    parts, inner = {"similarity": [], "solver": []}, retrieval.solve_pcst

    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        out = inner(*args, **kwargs)
        parts["solver"].append(time.perf_counter() - t0)
        return out

    retrieval.solve_pcst, total = timed, []
    try:
        for _, g, _, _, q, texts in cases:
            t0 = time.perf_counter()
            run_ours(g, q, texts, parts)
            total.append(time.perf_counter() - t0)
    finally:
        retrieval.solve_pcst = inner
    rest = np.array(total) - np.array(parts["similarity"]) - np.array(parts["solver"])
    return {"similarity_median_s": float(np.median(parts["similarity"])), "solver_s": summarize(parts["solver"]),
            "rest_median_s": float(np.median(rest)), "total_median_s": float(np.median(total))}


def metaqa_2hop() -> dict:
    ds = load_dataset(DatasetConfig("metaqa", hops=2))
    ds.prefetch(ds.split["test"])  # the texts encoded before the clock starts: retrieval is timed, not the encoder
    times, sizes = [], []
    for i in ds.split["test"]:
        t0 = time.perf_counter()
        g = ds.graph(i)
        res = retrieve(ds, i, OURS, g)
        times.append(time.perf_counter() - t0)
        sizes.append(len(res.node_rows))
    return {"metaqa_2hop_median_s": summarize(times)["median_s"], "metaqa_2hop_p90_s": summarize(times)["p90_s"],
            "metaqa_2hop_questions": len(times), "metaqa_2hop_mean_subgraph_nodes": float(np.mean(sizes))}


if __name__ == "__main__":
    main()
