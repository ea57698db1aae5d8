"""The GNN-RAG reasoner (GNN-RAG §4.1; ReaRev, its layers summed per relation): its configuration and the network;
the deviations from ReaRev as released are in docs/method.md §3.1."""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch_geometric.utils import scatter, softmax

from ..dropout import UniformDropout


@dataclass(frozen=True)
class ReasonerConfig:
    """ReaRev hyperparameters (GNN-RAG WebQSP script and ``parsing.py``; docs/method.md §3.1)."""

    entity_dim: int = 50  # --entity_dim 50
    num_ins: int = 2  # --num_ins 2 (WebQSP)
    num_iter: int = 3  # --num_iter 3 (WebQSP)
    num_gnn: int = 3  # --num_gnn 3
    dropout: float = 0.2  # linear dropout
    label_smooth: float = 0.0  # parsing.py has 0.1 but it is unused with the KL loss the scripts select
    # ReaRev as released (cmavro/GNN-RAG ``gnn/``); all five off is this module's first version, the baseline of
    # notebook 04's change table, and how a reasoner saved before the switches loads (:func:`load_reasoner`)
    mask_seeds: bool = True  # seeds out of every layer's softmax (reasongnn.py: seeds are padding, VERY_NEG_NUMBER)
    self_loops: bool = True  # one self-loop fact per entity (parsing.py --use_self_loop True)
    keep_states: bool = True  # node states carried across iterations (rearev.py resets only the distribution)
    split_directions: bool = True  # forward and inverse messages apart, a relation linear per layer, dropout before
    #                                 scoring (reasongnn.py reason_layer / reason_layer_inv)
    fusion_reform: bool = True  # a gated Fusion per instruction (query_update.py QueryReform), not one ReLU layer
    # Deviation: instructions from the question's sentence vector with its topic's name replaced by "it"
    # (``q_masked``), which one sentence vector cannot look past as ReaRev's token attention can
    mask_topic: bool = True
    # Ours, for the chat's reasoner trained on generated questions (docs/chat.md): relation vectors move along a
    # learned direction by how well the question names them (``rel_match``), instructions gain a term of ``q_steps``
    relation_match: bool = False
    relation_words_only: bool = False  # q_masked of function words and relation-naming words (chat.scope.read_question)
    twin_relations: bool = False  # a word's fit to a relation not lowered by its twins (KnowledgeGraph.twin_relations)

    def __post_init__(self) -> None:
        if min(self.entity_dim, self.num_ins, self.num_iter, self.num_gnn) < 1:
            raise ValueError("ReasonerConfig: entity_dim, num_ins, num_iter, num_gnn must be >= 1")
        if not 0.0 <= self.label_smooth < 1.0:
            raise ValueError(f"ReasonerConfig.label_smooth={self.label_smooth} must be in [0, 1)")


# The switches of :class:`ReasonerConfig` that bring the first version to ReaRev as released.
SWITCH_NAMES = ("mask_seeds", "self_loops", "keep_states", "split_directions", "fusion_reform")


class RelationHops:
    """One batch's fact structure for :meth:`ReaRev.forward`, built once and used by every layer.

    A fact's message ``m_e = ReLU(r_e ⊙ ins_k) · p(head_e)`` (ReaRev's ``reason_layer``) depends on the fact only
    through its relation and its head, so the sum at a tail factorizes: ``agg_v = Σ_r c_{v,r} ReLU(r ⊙ ins_k)``, with
    ``c_{v,r}`` the probability reaching ``v`` over ``r``: a scatter of ``E`` scalars and one ``(B, N_max, R_max) @
    (B, R_max, K·D)`` product per layer instead of ``E x D`` floats per instruction and direction. With ``self_loops``
    each graph's last relation row is the self-loop.

    Shapes: ``src, dst (E,)`` node positions, ``rel_id (E,)`` rows of the relation table, ``batch (N,)``;
    ``rows (P,)`` the table row of each distinct (graph, relation) pair and ``row_graph (P,)`` its graph.
    """

    def __init__(self, src, dst, rel_id, batch, num_graphs: int, self_loops: bool = False):
        N, device = batch.numel(), batch.device
        counts = torch.bincount(batch, minlength=num_graphs)
        starts = torch.cumsum(counts, 0) - counts
        self.B, self.n_max = num_graphs, int(counts.max()) if N else 0
        self.node_flat = batch * self.n_max + (torch.arange(N, device=device) - starts[batch])  # (N,) padded slot
        graph = batch[dst]
        key = graph * (int(rel_id.max()) + 1 if rel_id.numel() else 1) + rel_id
        pairs, pair = torch.unique(key, return_inverse=True)  # sorted: grouped by graph
        self.row_graph = graph.new_zeros(pairs.numel()).scatter_(0, pair, graph)
        self.rows = rel_id.new_zeros(pairs.numel()).scatter_(0, pair, rel_id)
        per_graph = torch.bincount(self.row_graph, minlength=num_graphs)
        self.loops = self_loops
        self.r_max = (int(per_graph.max()) if pairs.numel() else 0) + int(self_loops)
        local = torch.arange(pairs.numel(), device=device) - (torch.cumsum(per_graph, 0) - per_graph)[self.row_graph]
        self.row_flat = self.row_graph * self.r_max + local  # (P,) padded slot of each pair
        pair_local = local[pair]  # (E,)
        # padded (graph, node, relation) slot each direction delivers to (tails forward, heads inverse), and who sends
        into_dst, into_src = (self.node_flat[dst] * self.r_max + pair_local,
                              self.node_flat[src] * self.r_max + pair_local)
        if self_loops:
            nodes = torch.arange(N, device=device)
            loop = self.node_flat * self.r_max + self.r_max - 1
            src, dst, into_dst, into_src = (torch.cat([src, nodes]), torch.cat([dst, nodes]),
                                            torch.cat([into_dst, loop]), torch.cat([into_src, loop]))
        self.routes = {True: (src, into_dst), False: (dst, into_src)}

    def pad_rows(self, vectors: torch.Tensor, loop: torch.Tensor | None = None) -> torch.Tensor:
        """``(P, C)`` per-pair vectors (with self-loops also ``loop (B, C)``) -> ``(B, R_max, C)``, zero padded."""
        out = vectors.new_zeros(self.B * self.r_max, vectors.shape[-1]).index_copy(0, self.row_flat, vectors)
        if self.loops:
            out = out.index_copy(0, torch.arange(1, self.B + 1, device=out.device) * self.r_max - 1, loop)
        return out.view(self.B, self.r_max, -1)

    def propagate(self, weight: torch.Tensor, rows: torch.Tensor, forward: bool) -> torch.Tensor:
        """``Σ_e weight(sender_e) · rows[graph_e, relation_e]`` at each receiver: tails when ``forward``, else heads.

        Shapes: ``weight (N,)``, ``rows (B, R_max, C)`` -> ``(N, C)``.
        """
        sender, slot = self.routes[forward]
        mass = weight.new_zeros(self.B * self.n_max * self.r_max).index_add(0, slot, weight[sender])
        out = torch.bmm(mass.view(self.B, self.n_max, self.r_max), rows)  # (B, N_max, C)
        return out.reshape(self.B * self.n_max, -1).index_select(0, self.node_flat)


class Fusion(nn.Module):
    """ReaRev's gated update ``g * W_r[x, y, x - y] + (1 - g) * x``, ``g = sigmoid(W_g[x, y, x - y])`` (no biases).

    Shapes: ``x, y (B, D)`` -> ``(B, D)``."""

    def __init__(self, dim: int):
        super().__init__()
        self.r = nn.Linear(3 * dim, dim, bias=False)
        self.g = nn.Linear(3 * dim, dim, bias=False)

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        xy = torch.cat([x, y, x - y], dim=-1)
        gate = torch.sigmoid(self.g(xy))
        return gate * self.r(xy) + (1 - gate) * x


class ReaRev(nn.Module):
    """The GNN reasoner (ReaRev): node log-probabilities for one batch of question graphs.

    ``num_ins`` instructions are projections of the question vector; entities start from ReLU of their summed
    projected incident relations; ``num_iter`` iterations of ``num_gnn`` layers each send ``ReLU(W_r r ⊙ ins_k) ·
    p(head)`` along every fact and renormalize ``p`` per graph; after each iteration the instructions are re-formed
    from the seeds' states and reasoning restarts from the seeds.

    Args:
        text_dim: sentence-embedding width (questions and relation texts).
        cfg: :class:`ReasonerConfig`.

    Shapes (a PyG ``Batch``):
        ``edge_index (2, E)`` facts head -> tail; the relations either as ``rel_table (R, text_dim)`` (each graph's
        distinct relation texts, :class:`QuestionGraph`) with ``rel_id (E,)`` rows of it, or as ``rel_emb (E,
        text_dim)``; ``seed (N,)`` bool; ``q_emb (B, text_dim)`` the question as asked and ``q_masked (B, text_dim)``
        with its topic entities' names replaced (read instead when ``cfg.mask_topic``); ``batch (N,)``; with
        ``cfg.relation_match``, ``rel_match`` aligned with the relation rows (``(R,)`` or ``(E,)``) in [0, 1] and
        ``q_steps (B, 2)``.
        Output: ``log p (N,)``, normalized per graph.
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
        channels = 2 * K if cfg.split_directions else K  # messages per layer: per instruction (and direction)
        self.update = nn.ModuleList([nn.Linear((channels + 1) * D, D) for _ in range(cfg.num_gnn)])
        self.score = nn.Linear(D, 1)
        if cfg.split_directions:
            self.rel_layer = nn.ModuleList([nn.Linear(D, D) for _ in range(cfg.num_gnn)])
        if cfg.self_loops:
            # the self-loop "relation" has no text: a learned vector where relation-text embeddings live
            self.self_rel = nn.Parameter(torch.randn(text_dim) / text_dim ** 0.5)
        if cfg.relation_match:  # the direction a named relation's vector moves along, forward and inverse
            self.match_fwd = nn.Linear(1, D, bias=False)
            self.match_bwd = nn.Linear(1, D, bias=False)
            self.steps = nn.Linear(2, K * D, bias=False)
        if cfg.fusion_reform:
            self.fusion = nn.ModuleList([Fusion(D) for _ in range(K)])
        else:
            self.reform = nn.Linear(2 * D, D)
        self.drop = UniformDropout(cfg.dropout)

    def question(self, data) -> torch.Tensor:
        """The question vectors ``(B, text_dim)`` the instructions are made from."""
        if not self.cfg.mask_topic:
            return data.q_emb
        if "q_masked" not in data:
            raise ValueError("this reasoner reads the question with its topic entity masked "
                             "(ReasonerConfig.mask_topic) but the batch has no q_masked: build graphs with "
                             "gnn_rag.question_data, or give q_masked "
                             "(the sentence vector of gnn_rag.topic_masked(question, topic names))")
        return data.q_masked

    def instructions_of(self, data) -> torch.Tensor:
        """The instructions before dropout ``(B, K·D)``."""
        ins = self.instructions(self.question(data))
        if self.cfg.relation_match:  # q_steps is there: forward checked the batch with relation_match first
            ins = ins + self.steps(data.q_steps.float().view(-1, 2))
        return ins

    def relation_match(self, data) -> torch.Tensor:
        """``rel_match``, how well the question names each relation row, as a column ``(R, 1)`` (or ``(E, 1)``)."""
        if "rel_match" not in data or "q_steps" not in data:
            raise ValueError("this reasoner reads how well the question names each relation "
                             "(ReasonerConfig.relation_match) but the batch has no rel_match or q_steps: build graphs "
                             "with gr_core.chat.scope.question_graph(..., reading=read_question(...))")
        return data.rel_match.float().view(-1, 1)

    def forward(self, data) -> torch.Tensor:
        cfg = self.cfg
        D, K = cfg.entity_dim, cfg.num_ins
        N, batch = data.num_nodes, data.batch
        B = data.q_emb.shape[0]
        if data.q_emb.shape[-1] != self.text_dim:  # a matmul's shape error otherwise, naming nothing
            raise ValueError(f"ReaRev reads {self.text_dim}-d text embeddings; these questions are "
                             f"{data.q_emb.shape[-1]}-d (another sentence encoder)")
        src, dst = data.edge_index
        if "rel_table" in data:
            table, rel_id = data.rel_table, data.rel_id
        else:
            table, rel_id = data.rel_emb, torch.arange(src.numel(), device=src.device)
        hops = RelationHops(src, dst, rel_id, batch, B, cfg.self_loops)
        # each distinct (graph, relation) projected once (MetaQA: ~10 relations and ~10^3 facts a graph)
        rel_f, rel_b = self.rel_fwd(table[hops.rows]), self.rel_bwd(table[hops.rows])  # (P, D) each
        if cfg.relation_match:
            named = self.relation_match(data)[hops.rows]  # (P, 1)
            rel_f, rel_b = rel_f + self.match_fwd(named), rel_b + self.match_bwd(named)
        # the self-loop relation, once per graph (in both directions, as ReaRev's self-loop facts are)
        loop_f = self.rel_fwd(self.self_rel).expand(B, -1) if cfg.self_loops else None  # (B, D)
        loop_b = self.rel_bwd(self.self_rel).expand(B, -1) if cfg.self_loops else None
        ones = torch.ones(N, device=src.device)
        # facts in both directions: head -> tail with W_fwd, tail -> head with W_bwd; h0 sums what comes in
        h0 = hops.propagate(ones, hops.pad_rows(rel_f, loop_f), True) + \
            hops.propagate(ones, hops.pad_rows(rel_b, loop_b), False)
        h0 = torch.relu(self.entity_init(h0))  # (N, D)
        ins = self.drop(self.instructions_of(data)).view(B, K, D)
        seed = data.seed.float()
        p0 = seed / scatter(seed, batch, dim=0, dim_size=B, reduce="sum").clamp(min=1)[batch]
        log_p = torch.log(p0.clamp(min=1e-30))
        h = h0

        def messages(p, rel, loop, forward):  # (N, K, D): Σ over facts into each node of ReLU(r ⊙ ins_k) · p(sender)
            rows = torch.relu(rel.unsqueeze(1) * ins[hops.row_graph]).view(-1, K * D)  # (P, K·D)
            loop_rows = torch.relu(loop.unsqueeze(1) * ins).view(B, K * D) if loop is not None else None
            return hops.propagate(p, hops.pad_rows(rows, loop_rows), forward).view(N, K, D)

        for _ in range(cfg.num_iter):
            p = p0
            h = h if cfg.keep_states else h0
            for j, layer in enumerate(self.update):
                if cfg.split_directions:  # 2K channels, ordered (k0 forward, k0 inverse, k1 forward, ...)
                    lin = self.rel_layer[j]
                    loops = (lin(loop_f), lin(loop_b)) if cfg.self_loops else (None, None)  # (B, D) each
                    agg = torch.stack([messages(p, lin(rel_f), loops[0], True),
                                       messages(p, lin(rel_b), loops[1], False)], dim=2).reshape(N, 2 * K * D)
                else:  # K channels, both directions summed
                    agg = (messages(p, rel_f, loop_f, True) + messages(p, rel_b, loop_b, False)).reshape(N, K * D)
                h = torch.relu(layer(self.drop(torch.cat([h, agg], dim=-1))))
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
        B = data.q_emb.shape[0]
        ans = data.answer.float()
        count = scatter(ans, data.batch, dim=0, dim_size=B, reduce="sum")  # (B,)
        target = ans / count.clamp(min=1)[data.batch]
        if self.cfg.label_smooth:
            sizes = scatter(torch.ones_like(ans), data.batch, dim=0, dim_size=B, reduce="sum")
            eps = self.cfg.label_smooth
            target = (1 - eps) * target + eps / sizes[data.batch]
        per_node = torch.where(target > 0, target * (torch.log(target.clamp(min=1e-30)) - log_p),
                               torch.zeros_like(target))
        per_q = scatter(per_node, data.batch, dim=0, dim_size=B, reduce="sum")
        has = count > 0
        return per_q[has].sum(), int(has.sum())
