"""The GNN-RAG reasoner (ReaRev on PyTorch Geometric message passing): its configuration and the network.

Shapes and the deviations from ReaRev as released are in :class:`ReaRev` and docs/method.md §3.1.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class ReasonerConfig:
    """ReaRev hyperparameters (GNN-RAG WebQSP script and ``parsing.py``; docs/method.md §3.1)."""

    entity_dim: int = 50  # --entity_dim 50
    num_ins: int = 2  # --num_ins 2 (WebQSP)
    num_iter: int = 3  # --num_iter 3 (WebQSP)
    num_gnn: int = 3  # --num_gnn 3
    dropout: float = 0.2  # linear dropout
    label_smooth: float = 0.0  # parsing.py has 0.1 but it is unused with the KL loss the scripts select
    # ReaRev as released (cmavro/GNN-RAG ``gnn/``), on by default. All five off reproduce this module's first version,
    # which notebook 04's change table measures each switch against (:data:`REASONER_CHANGES`); a reasoner saved
    # before the switches existed loads with them off (:func:`load_reasoner`).
    mask_seeds: bool = True  # question entities out of every layer's softmax (dataset_load.py: seeds are padding
    #                           in candidate_entities; reasongnn.py adds VERY_NEG_NUMBER to padding)
    self_loops: bool = True  # one self-loop fact per entity (parsing.py --use_self_loop True; _build_fact_mat)
    keep_states: bool = True  # node states carried from one iteration to the next (rearev.py resets only the
    #                            distribution to the seeds)
    split_directions: bool = True  # forward and inverse messages apart for each instruction, a relation linear per
    #                                 layer, dropout before scoring (reasongnn.py reason_layer / reason_layer_inv)
    fusion_reform: bool = True  # each instruction updated by its own gated Fusion with the seeds' states
    #                              (query_update.py QueryReform; the first version: one shared ReLU layer)

    def __post_init__(self) -> None:
        if min(self.entity_dim, self.num_ins, self.num_iter, self.num_gnn) < 1:
            raise ValueError("ReasonerConfig: entity_dim, num_ins, num_iter, num_gnn must be >= 1")
        if not 0.0 <= self.label_smooth < 1.0:
            raise ValueError(f"ReasonerConfig.label_smooth={self.label_smooth} must be in [0, 1)")


# The switches of :class:`ReasonerConfig` that bring the first version to ReaRev as released.
SWITCH_NAMES = ("mask_seeds", "self_loops", "keep_states", "split_directions", "fusion_reform")


class FactMessage(torch.nn.Module):
    """One hop of ``p``-weighted fact messages: ``m_e = ReLU(r_e ⊙ ins) · p(head_e)``, summed at the tail.

    Shapes:
        input: ``p (N,)``, ``rel (E, D)`` (already projected), ``ins (E, D)`` (the instruction of each edge's graph),
        ``edge_index (2, E)``; output: ``(N, D)``.
    """

    def __init__(self):
        super().__init__()
        from torch_geometric.nn import MessagePassing

        class _Conv(MessagePassing):
            def __init__(self):
                super().__init__(aggr="add")

            def forward(self, p, rel, ins, edge_index, num_nodes):
                return self.propagate(edge_index, p=p.unsqueeze(-1), rel=rel, ins=ins, size=(num_nodes, num_nodes))

            def message(self, p_j, rel, ins):
                return torch.relu(rel * ins) * p_j

        self.conv = _Conv()

    def forward(self, p, rel, ins, edge_index, num_nodes):
        return self.conv(p, rel, ins, edge_index, num_nodes)


class Fusion(nn.Module):
    """ReaRev's gated update ``g * W_r[x, y, x - y] + (1 - g) * x`` with ``g = sigmoid(W_g[x, y, x - y])``
    (``query_update.py``; no biases). Shapes: ``x, y (B, D)`` -> ``(B, D)``."""

    def __init__(self, dim: int):
        super().__init__()
        self.r = nn.Linear(3 * dim, dim, bias=False)
        self.g = nn.Linear(3 * dim, dim, bias=False)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        xy = torch.cat([x, y, x - y], dim=-1)
        gate = torch.sigmoid(self.g(xy))
        return gate * self.r(xy) + (1 - gate) * x


class ReaRev(nn.Module):
    """The GNN reasoner: node log-probabilities for one batch of question graphs.

    Args:
        text_dim: sentence-embedding width (questions and relation texts).
        cfg: :class:`ReasonerConfig`.

    Shapes (a PyG ``Batch``):
        ``edge_index (2, E)`` facts head -> tail; the relations either as ``rel_table (R, text_dim)`` (each graph's
        distinct relation texts, :class:`QuestionGraph`) with ``rel_id (E,)`` rows of it, or as ``rel_emb (E,
        text_dim)``; ``seed (N,)`` bool; ``q_emb (B, text_dim)``; ``batch (N,)``. Output: ``log p (N,)``,
        normalized per graph.
    """

    def __init__(self, text_dim: int, cfg: ReasonerConfig = ReasonerConfig()):
        super().__init__()
        D, K = cfg.entity_dim, cfg.num_ins
        self.cfg = cfg
        self.text_dim = text_dim
        self.rel_fwd = nn.Linear(text_dim, D)
        self.rel_bwd = nn.Linear(text_dim, D)
        self.entity_init = nn.Linear(D, D)
        self.instructions = nn.Linear(text_dim, K * D)
        self.hop = FactMessage()
        channels = 2 * K if cfg.split_directions else K  # messages per layer: per instruction (and direction)
        self.update = nn.ModuleList([nn.Linear((channels + 1) * D, D) for _ in range(cfg.num_gnn)])
        self.score = nn.Linear(D, 1)
        if cfg.split_directions:
            self.rel_layer = nn.ModuleList([nn.Linear(D, D) for _ in range(cfg.num_gnn)])
        if cfg.self_loops:
            # the self-loop "relation" has no text: a learned vector where relation-text embeddings live
            self.self_rel = nn.Parameter(torch.randn(text_dim) / text_dim ** 0.5)
        if cfg.fusion_reform:
            self.fusion = nn.ModuleList([Fusion(D) for _ in range(K)])
        else:
            self.reform = nn.Linear(2 * D, D)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, data) -> torch.Tensor:
        from torch_geometric.utils import scatter, softmax

        cfg = self.cfg
        D, K = cfg.entity_dim, cfg.num_ins
        N, batch = data.num_nodes, data.batch
        B = data.q_emb.shape[0]
        src, dst = data.edge_index
        # relation texts: each distinct relation projected once, then gathered per fact (MetaQA has 9 relations
        # and ~10^3 facts a graph); the self-loop relation is one more row
        if "rel_table" in data:
            table, rel_id = data.rel_table, data.rel_id
        else:
            table, rel_id = data.rel_emb, torch.arange(src.numel(), device=src.device)
        if cfg.self_loops:
            loops = torch.arange(N, device=src.device)
            src, dst = torch.cat([src, loops]), torch.cat([dst, loops])
            rel_id = torch.cat([rel_id, torch.full_like(loops, table.shape[0])])
            table = torch.cat([table, self.self_rel.unsqueeze(0)], dim=0)
        # facts in both directions: head -> tail with W_fwd, tail -> head with W_bwd
        fwd, inv = torch.stack([src, dst]), torch.stack([dst, src])
        rel_f, rel_b = self.rel_fwd(table)[rel_id], self.rel_bwd(table)[rel_id]  # (E, D) each
        edges, rel = torch.cat([fwd, inv], dim=1), torch.cat([rel_f, rel_b], dim=0)  # (2, 2E), (2E, D)
        edge_graph, fwd_graph = batch[edges[1]], batch[dst]  # each fact's graph (both directions; forward only)
        h0 = torch.relu(self.entity_init(scatter(rel, edges[1], dim=0, dim_size=N, reduce="sum")))  # (N, D)
        ins = self.drop(self.instructions(data.q_emb)).view(B, K, D)
        seed = data.seed.float()
        p0 = seed / scatter(seed, batch, dim=0, dim_size=B, reduce="sum").clamp(min=1)[batch]
        log_p = torch.log(p0.clamp(min=1e-30))
        h = h0
        for _ in range(cfg.num_iter):
            p = p0
            h = h if cfg.keep_states else h0
            for j, layer in enumerate(self.update):
                if cfg.split_directions:
                    rf, rb = self.rel_layer[j](rel_f), self.rel_layer[j](rel_b)
                    agg = [m for k in range(K) for m in (self.hop(p, rf, ins[fwd_graph, k], fwd, N),
                                                          self.hop(p, rb, ins[fwd_graph, k], inv, N))]  # 2K x (N, D)
                else:
                    agg = [self.hop(p, rel, ins[edge_graph, k], edges, N) for k in range(K)]  # K x (N, D)
                h = torch.relu(layer(self.drop(torch.cat([h, *agg], dim=-1))))
                logits = self.score(self.drop(h) if cfg.split_directions else h).squeeze(-1)
                if cfg.mask_seeds:  # a graph made only of seeds keeps a uniform distribution over them
                    logits = logits - 1e9 * seed
                log_p = torch.log(softmax(logits, batch, num_nodes=N).clamp(min=1e-30))
                p = log_p.exp()
            pooled = scatter(h * seed.unsqueeze(-1), batch, dim=0, dim_size=B, reduce="sum")  # (B, D)
            if cfg.fusion_reform:
                ins = torch.stack([self.fusion[k](ins[:, k], pooled) for k in range(K)], dim=1)
            else:
                ins = torch.relu(self.reform(torch.cat([ins, pooled.unsqueeze(1).expand(-1, K, -1)], dim=-1)))
        return log_p

    def loss(self, log_p: torch.Tensor, data) -> tuple[torch.Tensor, int]:
        """KL(uniform over gold answers ‖ p), summed over questions that have an answer in their graph.

        Returns:
            ``(loss_sum, number of questions with an answer)``.
        """
        from torch_geometric.utils import scatter

        B = data.q_emb.shape[0]
        ans = data.answer.float()
        count = scatter(ans, data.batch, dim=0, dim_size=B, reduce="sum")  # (B,)
        target = ans / count.clamp(min=1)[data.batch]
        if self.cfg.label_smooth:
            sizes = scatter(torch.ones_like(ans), data.batch, dim=0, dim_size=B, reduce="sum")
            eps = self.cfg.label_smooth
            target = (1 - eps) * target + eps / sizes[data.batch]
        per_node = torch.where(target > 0, target * (torch.log(target.clamp(min=1e-30)) - log_p), torch.zeros_like(target))
        per_q = scatter(per_node, data.batch, dim=0, dim_size=B, reduce="sum")
        has = count > 0
        return per_q[has].sum(), int(has.sum())
