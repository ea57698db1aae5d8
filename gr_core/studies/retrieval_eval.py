"""Retrieval quality and cost on real data (GR paper Tables 4, 10, 11): per question and retriever, the graph's size
and tokens before and after retrieval, whether a gold answer is a node of the subgraph (Table 11's "retrieval
accuracy"), and the time.
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

from ..data import TextualGraph, induced_subgraph
from ..g_retriever.baselines import Retriever, kaping_retriever, retrieve_khop, retrieve_none
from ..g_retriever.retrieval import DATASET_RETRIEVAL, RetrievalConfig, RetrievedSubgraph, similarities
from ..graphqa import GraphQADataset, load_dataset, retrieve
from ..llm import count_tokens
from ..prompts import KGQA_DATASETS
from ..published import PAPER_TABLE10
from ..runs import progress
from ..stats import mcnemar_exact, percent_interval


def answer_in(graph: TextualGraph, answers: list[str]) -> bool:
    """Whether a gold answer is exactly a node's text in ``graph`` (MetaQA's ``Drama`` is not its tag ``drama``)."""
    names = set(graph.nodes.node_attr.astype(str))
    return any(a in names for a in answers)


ROW_COLUMNS = ["dataset", "question", "retriever", "nodes_before", "edges_before", "tokens_before", "nodes_after",
               "edges_after", "tokens_after", "answer_in_subgraph", "seconds"]


def evaluate_retrievers(ds: GraphQADataset, indices: list[int], retrievers: dict[str, Retriever],
                        tokenizer=None) -> pd.DataFrame:
    """One row per (question, retriever): sizes and tokens before/after, answer hit, seconds (the texts' vectors an
    index would hold, nodes, edges and KAPING's triples, are computed before the clock starts)."""
    if not retrievers:
        return pd.DataFrame(columns=ROW_COLUMNS)
    rows = []
    ds.prefetch(indices)  # texts are encoded on first use: here, so that no retriever's seconds include it
    for i in progress(indices, desc=f"retrieve {ds.name}"):
        graph = ds.graph(i)
        before = count_tokens(tokenizer, [retrieve_none(graph).desc])[0] if tokenizer else None
        for name, fn in retrievers.items():
            if hasattr(fn, "prepare"):  # what an index would hold (KAPING's triple vectors), as prefetch does above
                fn.prepare(ds, i, graph)
            start = time.perf_counter()
            res = fn(ds, i, graph)
            seconds = time.perf_counter() - start
            sub = res.graph
            rows.append({"dataset": ds.name, "question": i, "retriever": name, "nodes_before": graph.num_nodes,
                         "edges_before": graph.num_edges, "tokens_before": before, "nodes_after": sub.num_nodes,
                         "edges_after": sub.num_edges,
                         "tokens_after": count_tokens(tokenizer, [res.desc])[0] if tokenizer else None,
                         # defined only where answers are graph nodes (KGQA); scene-graph answers are "yes", "2", ...
                         "answer_in_subgraph": (answer_in(sub, ds.records[i].answers) if ds.name in KGQA_DATASETS
                                                else None),
                         "seconds": seconds})
    return pd.DataFrame(rows, columns=ROW_COLUMNS)  # the columns even without rows (no question or no retriever)


def evaluate_datasets(names: list[str], questions: int = 0, tokenizer=None, kaping_k: int = 10) -> pd.DataFrame:
    """:func:`evaluate_retrievers` over the first ``questions`` test questions (0: all) of each named dataset, one
    table: PCST (the dataset's default config), KAPING top-k triples, the 1-hop neighbourhood, no retrieval."""
    if not names:
        raise ValueError("evaluate_datasets: no dataset named (study_datasets=[]): name at least one")
    rows = []
    for name in names:
        ds = load_dataset(name)
        retrievers = {"pcst": lambda d, i, g: retrieve(d, i, graph=g),
                      f"kaping_top{kaping_k}": kaping_retriever(kaping_k),  # after the dataset: its store
                      "1hop": lambda d, i, g: retrieve_khop(g, 1, d.embeddings(i, g)[0], d.question_emb[i]),
                      "none": lambda d, i, g: retrieve_none(g)}
        rows.append(evaluate_retrievers(ds, ds.split["test"][: questions or None], retrievers, tokenizer))
    return pd.concat(rows, ignore_index=True)


def summarize_retrievers(rows: pd.DataFrame, reference: str = "pcst") -> pd.DataFrame:
    """Per dataset and retriever: mean sizes and tokens before/after, reductions, answer-in-subgraph rate (%) with its
    Wilson 95% interval, and ``p_vs_<reference>``: the exact McNemar p of its answer-in-subgraph flags against the
    ``reference`` retriever's on the same questions (KGQA datasets; GR Table 11 compares PCST with KAPING)."""
    g = rows.groupby(["dataset", "retriever"], sort=False)
    out = g.agg(questions=("question", "count"), nodes_before=("nodes_before", "mean"),
                nodes_after=("nodes_after", "mean"), edges_after=("edges_after", "mean"),
                tokens_before=("tokens_before", "mean"), tokens_after=("tokens_after", "mean"),
                answer_in_subgraph=("answer_in_subgraph", lambda v: v.astype(float).mean()),
                median_ms=("seconds", lambda s: 1000 * float(np.median(s)))).reset_index()
    out["node_reduction_%"] = 100 * (1 - out.nodes_after / out.nodes_before)
    if out.tokens_before.notna().all():
        out["token_reduction_%"] = 100 * (1 - out.tokens_after / out.tokens_before)
    out["answer_in_subgraph"] = 100 * out["answer_in_subgraph"].astype(float)
    low, high, p = [], [], []
    for (dataset, name), group in g:
        hits = group.answer_in_subgraph.dropna().astype(float)
        ci = percent_interval(hits.sum(), len(hits), 2)
        low.append(ci[0])
        high.append(ci[1])
        mine = group.set_index("question").answer_in_subgraph
        ref = rows[(rows.dataset == dataset) & (rows.retriever == reference)].set_index("question")
        ref = ref.answer_in_subgraph.reindex(mine.index)  # the same questions, in the same order
        paired = name != reference and len(mine) and mine.notna().all() and ref.notna().all()
        p.append(mcnemar_exact(mine.astype(float), ref.astype(float))["p"] if paired else np.nan)
    out["answer_ci_low"], out["answer_ci_high"] = low, high
    if (rows.retriever == reference).any():  # a sweep of one retriever's settings has none to pair with
        out[f"answer_p_vs_{reference}"] = p
    return out.round({c: 2 for c in out.columns if c != f"answer_p_vs_{reference}"})


def k_sweep(ds: GraphQADataset, indices: list[int], ks=(3, 5, 10, 20), tokenizer=None,
            edge_costs=None) -> pd.DataFrame:
    """Table 10 analogue: k applied to nodes *and* edges (the paper does not say which), C_e the dataset default or
    each of ``edge_costs``; retrieval only (answer in subgraph, size, tokens). An empty ``ks``: no rows."""
    base_cost = DATASET_RETRIEVAL[ds.name].edge_cost if len(ks) and not edge_costs else None
    grid = {(f"k={k}" if not edge_costs else f"k={k}, C_e={ce}"): (k, ce)
            for k in ks for ce in (edge_costs or [base_cost])}
    retrievers = {name: (lambda d, i, g, k=k, ce=ce: retrieve(d, i, RetrievalConfig(k, k, ce), g))
                  for name, (k, ce) in grid.items()}
    table = summarize_retrievers(evaluate_retrievers(ds, indices, retrievers, tokenizer))
    table["k"] = table.retriever.map(lambda name: grid[name][0])
    if edge_costs:
        table["C_e"] = table.retriever.map(lambda name: grid[name][1])
    # the paper's Table 10 is WebQSP's: another dataset's sweep has no paper figure beside it
    webqsp = ds is not None and ds.name in ("webqsp", "webqsp_full", "rog_webqsp")
    table["paper_hit@1"] = table.k.map(PAPER_TABLE10) if webqsp else np.nan
    return table


def explain_retrieval(ds: GraphQADataset, i: int, res: RetrievedSubgraph, top: int = 10
                      ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``top`` most similar nodes and edges of question ``i`` with similarity, prize and whether PCST kept them."""
    graph = res.source
    x, edge_attr = ds.embeddings(i, graph)
    q = ds.question_emb[i]
    ns, es = similarities(q, x), similarities(q, edge_attr)
    kept_n, kept_e = set(res.node_rows.tolist()), set(res.edge_rows.tolist())
    n_top = np.argsort(-ns, kind="stable")[:top]
    e_top = np.argsort(-es, kind="stable")[:top]
    nodes = pd.DataFrame({"node_id": graph.nodes.node_id.to_numpy()[n_top],
                          "node_attr": graph.nodes.node_attr.to_numpy()[n_top],
                          "similarity": ns[n_top].round(4), "prize": res.node_prizes[n_top],
                          "in_subgraph": [r in kept_n for r in n_top]})
    e = graph.edges
    edges = pd.DataFrame({"src": e.src.to_numpy()[e_top], "edge_attr": e.edge_attr.to_numpy()[e_top],
                          "dst": e.dst.to_numpy()[e_top],
                          "similarity": es[e_top].round(4), "prize": res.edge_prizes[e_top].round(4),
                          "in_subgraph": [r in kept_e for r in e_top]})
    return nodes, edges


def context_view(res: RetrievedSubgraph, max_nodes: int = 60) -> tuple[TextualGraph, list[int], list[int]]:
    """The retrieved subgraph inside its neighbourhood, for drawing: the subgraph's nodes plus their neighbours up to
    ``max_nodes``. Returns ``(view, highlighted node ids, highlighted edge rows of view)``."""
    graph = res.source
    ids = graph.nodes.node_id.to_numpy()
    chosen = [int(v) for v in ids[res.node_rows]]
    src, dst = graph.edges.src.to_numpy(), graph.edges.dst.to_numpy()
    touching = np.isin(src, chosen) | np.isin(dst, chosen)
    neighbours = np.concatenate([src[touching], dst[touching]]).astype(int).tolist()
    view = induced_subgraph(graph, list(dict.fromkeys(chosen + neighbours))[:max(max_nodes, len(chosen))])
    kept = graph.edges.iloc[res.edge_rows]
    kept_pairs = set(zip(kept.src, kept.edge_attr, kept.dst))
    hl_edges = [k for k, t in enumerate(zip(view.edges.src, view.edges.edge_attr, view.edges.dst)) if t in kept_pairs]
    return view, chosen, hl_edges
