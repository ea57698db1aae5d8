"""Time of one GNN-RAG reasoner training step on graphs of MetaQA-3hop size (docs/method.md §3.1).

    python bench/reasoner_step.py [cpu] [cuda]

Synthetic graphs with the mean size of a MetaQA-3hop question graph (918 nodes, 1,495 facts, 10 relation texts;
the timing depends on sizes, not on the values), a full step (forward, KL loss, backward, Adam), for ReaRev's WebQSP
shape and the official MetaQA-3 shape at batch 8 and 32, for the reasoner's layers as they are (messages summed per
(graph, relation), :class:`~gr_core.gnn_rag.RelationHops`) and fact by fact as ReaRev's released code computes them
(:func:`per_fact_forward`, the same parameters and output), factorized with torch's own
dropout, factorized with a float ``rand`` dropout mask (the reasoner's mask before 16-bit draws), and fact by fact
with torch's own dropout (gr_core.gnn_rag.model before these changes), in the same process. Prints ms per
step, the speed-up and the implied seconds per epoch of the 12,847 MetaQA-3hop training questions; writes
``outputs/bench/reasoner_step.json``.
"""
from __future__ import annotations

import argparse
import time

import torch
from common import write_result
from torch_geometric.loader import DataLoader
from torch_geometric.nn import MessagePassing
from torch_geometric.utils import scatter, softmax

from gr_core.gnn_rag import QuestionGraph, ReaRev, ReasonerConfig

NODES, FACTS, RELATIONS, TRAIN_QUESTIONS = 918, 1495, 10, 12847



def per_fact_forward(model: "ReaRev", data) -> torch.Tensor:
    """:meth:`ReaRev.forward` written fact by fact, as ReaRev's released code (and gr_core.gnn_rag.model before
    :class:`RelationHops`) computes it: each fact's message ``ReLU(r_e ⊙ ins_k) · p(head_e)`` with PyG's
    MessagePassing, summed at the tail. The reference the factorized layers are tested against
    (``tests/test_gnn_rag.py``) and timed beside (here); same parameters, same output."""

    class Hop(MessagePassing):
        def __init__(self):
            super().__init__(aggr="add")

        def forward(self, p, rel, ins, edge_index, n):
            return self.propagate(edge_index, p=p.unsqueeze(-1), rel=rel, ins=ins, size=(n, n))

        def message(self, p_j, rel, ins):
            return torch.relu(rel * ins) * p_j

    hop, cfg, m = Hop(), model.cfg, model
    D, K, N, batch, B = cfg.entity_dim, cfg.num_ins, data.num_nodes, data.batch, data.q_emb.shape[0]
    src, dst = data.edge_index
    if "rel_table" in data:
        table, rel_id = data.rel_table, data.rel_id
    else:
        table, rel_id = data.rel_emb, torch.arange(src.numel(), device=src.device)
    if cfg.self_loops:
        loops = torch.arange(N, device=src.device)
        src, dst = torch.cat([src, loops]), torch.cat([dst, loops])
        rel_id = torch.cat([rel_id, torch.full_like(loops, table.shape[0])])
        table = torch.cat([table, m.self_rel.unsqueeze(0)], dim=0)
    fwd, inv = torch.stack([src, dst]), torch.stack([dst, src])
    rel_f, rel_b = m.rel_fwd(table)[rel_id], m.rel_bwd(table)[rel_id]
    if cfg.relation_match:  # the self-loop row names nothing
        named = m.relation_match(data)
        named = torch.cat([named, named.new_zeros(len(table) - len(named), 1)])[rel_id]
        rel_f, rel_b = rel_f + m.match_fwd(named), rel_b + m.match_bwd(named)
    edges, rel = torch.cat([fwd, inv], dim=1), torch.cat([rel_f, rel_b], dim=0)
    edge_graph, fwd_graph = batch[edges[1]], batch[dst]
    h0 = torch.relu(m.entity_init(scatter(rel, edges[1], dim=0, dim_size=N, reduce="sum")))
    ins = m.drop(m.instructions_of(data)).view(B, K, D)
    seed = data.seed.float()
    p0 = seed / scatter(seed, batch, dim=0, dim_size=B, reduce="sum").clamp(min=1)[batch]
    log_p, h = torch.log(p0.clamp(min=1e-30)), h0
    for _ in range(cfg.num_iter):
        p, h = p0, (h if cfg.keep_states else h0)
        for j, layer in enumerate(m.update):
            if cfg.split_directions:
                rf, rb = m.rel_layer[j](rel_f), m.rel_layer[j](rel_b)
                agg = [x for k in range(K) for x in (hop(p, rf, ins[fwd_graph, k], fwd, N),
                                                      hop(p, rb, ins[fwd_graph, k], inv, N))]
            else:
                agg = [hop(p, rel, ins[edge_graph, k], edges, N) for k in range(K)]
            h = torch.relu(layer(m.drop(torch.cat([h, *agg], dim=-1))))
            logits = m.score(m.drop(h) if cfg.split_directions else h).squeeze(-1)
            if cfg.mask_seeds:
                logits = logits - 1e9 * seed
            log_p = torch.log(softmax(logits, batch, num_nodes=N).clamp(min=1e-30))
            p = log_p.exp()
        pooled = scatter(h * seed.unsqueeze(-1), batch, dim=0, dim_size=B, reduce="sum")
        if cfg.fusion_reform:
            ins = torch.stack([m.fusion[k](ins[:, k], pooled) for k in range(K)], dim=1)
        else:
            ins = torch.relu(m.reform(torch.cat([ins, pooled.unsqueeze(1).expand(-1, K, -1)], dim=-1)))
    return log_p


def graph(gen: torch.Generator) -> QuestionGraph:
    seed = torch.zeros(NODES, dtype=torch.bool)
    seed[0] = True
    answer = torch.zeros(NODES, dtype=torch.bool)
    answer[torch.randint(1, NODES, (5,), generator=gen)] = True
    return QuestionGraph(edge_index=torch.randint(0, NODES, (2, FACTS), generator=gen),
                         rel_table=torch.randn(RELATIONS, 384, generator=gen),
                         rel_id=torch.randint(0, RELATIONS, (FACTS,), generator=gen), seed=seed, answer=answer,
                         q_emb=torch.randn(1, 384, generator=gen), q_masked=torch.randn(1, 384, generator=gen),
                         num_nodes=NODES)


class RandDropout(torch.nn.Dropout):
    """The reasoner's dropout before its 16-bit draws: a float ``rand`` mask, ``x * (rand >= p) / (1 - p)``."""

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        return x * (torch.rand_like(x) >= self.p) * (1.0 / (1.0 - self.p))


def time_steps(device: str, cfg: ReasonerConfig, batch_size: int, data: list, steps: int, layers: str) -> float:
    """Seconds per training step; ``layers``: ``factorized`` (the reasoner as it is), ``torch_dropout`` (factorized,
    with torch's own ``nn.Dropout``), ``rand_dropout`` (factorized, with :class:`RandDropout`), ``per_fact`` (the same
    network fact by fact) or ``before`` (fact by fact with torch's own dropout: gr_core.gnn_rag.model before these
    changes)."""
    torch.manual_seed(0)
    model = ReaRev(384, cfg).to(device)
    if layers in ("before", "torch_dropout"):
        model.drop = torch.nn.Dropout(cfg.dropout)
    if layers == "rand_dropout":
        model.drop = RandDropout(cfg.dropout)
    opt = torch.optim.Adam(model.parameters(), lr=5e-4)
    batches = list(DataLoader(data, batch_size=batch_size))

    def step(b):
        b = b.to(device)
        log_p = per_fact_forward(model, b) if layers in ("before", "per_fact") else model(b)
        loss, n = model.loss(log_p, b)
        opt.zero_grad(set_to_none=True)
        (loss / max(n, 1)).backward()
        opt.step()
        return float(loss.detach())  # waits for the device

    for b in batches[:2]:  # warm-up
        step(b)
    start = time.perf_counter()
    for b in batches[:steps]:
        step(b)
    return (time.perf_counter() - start) / min(steps, len(batches))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python bench/reasoner_step.py", description=__doc__.split("\n")[0])
    parser.add_argument("devices", nargs="*", choices=["cpu", "cuda"], help="where to time the steps (default: cpu)")
    devices = parser.parse_args(argv).devices or ["cpu"]
    gen = torch.Generator().manual_seed(0)
    data = [graph(gen) for _ in range(256)]
    rows = []
    for device in devices:
        for name, cfg in (("WebQSP shape (2 instructions, 3 iterations)", ReasonerConfig()),
                          ("MetaQA-3 shape (3 instructions, 2 iterations)", ReasonerConfig(num_ins=3, num_iter=2))):
            for batch_size in (8, 32):
                ms = {}
                for layers in ("before", "per_fact", "torch_dropout", "rand_dropout", "factorized"):
                    seconds = time_steps(device, cfg, batch_size, data, 8 if device == "cpu" else 64, layers)
                    ms[layers] = 1000 * seconds
                    row = {"device": device, "shape": name, "batch": batch_size, "layers": layers,
                           "ms_per_step": round(ms[layers], 1),
                           "epoch_seconds_metaqa_3hop": round(seconds * TRAIN_QUESTIONS / batch_size)}
                    print(row, flush=True)
                    rows.append(row)
                rows[-1]["speedup_vs_per_fact"] = round(ms["per_fact"] / ms["factorized"], 2)
                rows[-1]["speedup_vs_before"] = round(ms["before"] / ms["factorized"], 2)
                rows[-1]["speedup_vs_torch_dropout"] = round(ms["torch_dropout"] / ms["factorized"], 2)
                rows[-1]["speedup_vs_rand_dropout"] = round(ms["rand_dropout"] / ms["factorized"], 2)
                print(f"  factorized layers: {rows[-1]['speedup_vs_per_fact']}x faster than fact by fact, "
                      f"{rows[-1]['speedup_vs_before']}x faster than before (torch dropout too), "
                      f"{rows[-1]['speedup_vs_torch_dropout']}x faster than with torch's dropout, "
                      f"{rows[-1]['speedup_vs_rand_dropout']}x faster than with a rand mask", flush=True)
    write_result("reasoner_step", {"rows": rows, "dtype": "float32",  # the reasoner trains in fp32 on every machine
                                   "graph": {"nodes": NODES, "facts": FACTS, "relations": RELATIONS},
                                   "threads": torch.get_num_threads()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
