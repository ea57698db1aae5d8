"""GNN-RAG retrieval: a question-conditioned GNN reasoner, answer candidates, reasoning paths
(GNN-RAG paper §4.1-4.2, App. C; GNN-RAG code ``gnn/models/ReaRev``, ``gnn/evaluate.py``,
``llm/src/utils/graph_utils.py``; docs/method.md §3.1-3.2).

The reasoner follows ReaRev on PyTorch Geometric message passing:

- ``num_ins`` instructions from the question's sentence embedding (ReaRev pools LM token states by attention;
  we cache sentence embeddings only, so each instruction is a learned projection of it: a deviation);
- relation features from the relation text's sentence embedding, one projection per direction (facts are used
  both ways);
- entities have no text features: their initial state is ReLU of the summed projected incident relations;
- ``num_iter`` iterations of ``num_gnn`` layers; each layer sends ``ReLU(W_r r ⊙ instruction_k) · p(head)`` along
  every fact, aggregates per instruction, updates the node state and re-normalizes the node distribution ``p``
  with a softmax over the graph's nodes; after each iteration the instructions are re-formed from the
  seed-weighted node states (``QueryReform``) and reasoning restarts from the seeds;
- loss: KL(uniform over the gold answers in the graph ‖ p); questions with no answer in the graph are masked.

Five switches of :class:`ReasonerConfig` (off by default until notebook 04's change table has measured them) bring
this to ReaRev as released: question entities masked out of every layer's softmax, a self-loop fact per entity, node
states carried across iterations, forward and inverse messages kept apart with a relation linear per layer, and a
gated Fusion per instruction. Instructions still come from the sentence embedding, not from token states.

Candidates (docs/method.md §3.2): softmax probabilities, question entities excluded, sorted, added until the
cumulative probability first exceeds 0.95. Paths (§5.4): shortest paths from question entities to candidates
that keep **edge direction** (a reversed hop is written with ``<-``) and **every relation** between a pair
(GNN-RAG's ``nx.Graph`` keeps one and drops direction, docs/peers.md 5).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn
from torch_geometric.data import Data

from .published import PAPER_GNN_ONLY


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


# ---------------------------------------------------------------------- candidates and paths
def select_candidates(probs: np.ndarray, seeds: set[int], eps: float = 0.95, max_nodes: int | None = None
                      ) -> list[tuple[int, float]]:
    """GNN-RAG's candidate set: nodes by probability (question entities excluded) until the cumulative
    probability first exceeds ``eps``; nodes below ``(1 - eps) / max_nodes`` are never candidates.

    Args:
        probs: ``(N,)`` the node distribution of one graph. seeds: node positions of the question entities.
    Returns:
        ``[(node position, probability), ...]`` most probable first; empty when every node is a seed.
    """
    floor = (1 - eps) / (max_nodes or len(probs) or 1)
    order = [int(i) for i in np.argsort(-probs, kind="stable") if int(i) not in seeds and probs[i] >= floor]
    out, total = [], 0.0
    for i in order:
        out.append((i, float(probs[i])))
        total += float(probs[i])
        if total > eps:
            break
    return out


@dataclass
class PathReport:
    """What :func:`reasoning_paths` did: paths, and the counted reasons for missing ones."""

    lines: list[str]
    missing_seed: int = 0  # question entity not in the graph
    no_path: int = 0  # candidate unreachable from every question entity
    truncated: int = 0  # path lines dropped by the token budget
    nodes: list[int] = field(default_factory=list)  # node ids on the kept paths, first-seen order (for highlighting)


def _hop_texts(u: int, v: int, rel_index: dict) -> list[str]:
    """Every relation between positions ``u`` and ``v`` with its direction: ``-> r ->`` or ``<- r <-``."""
    return [f" -> {r} -> " for r in rel_index.get((u, v), [])] + [f" <- {r} <- " for r in rel_index.get((v, u), [])]


def reasoning_paths(graph, seeds: list[int], targets: list[int], max_lines_per_pair: int = 8,
                    token_budget: int | None = None, count_tokens=None) -> PathReport:
    """Shortest paths from question entities to targets, verbalized with direction and every relation.

    Topology is the undirected simple graph (as GNN-RAG: a path may walk a fact backwards); each hop is then
    written once per relation between the pair, ``u -> r -> v`` for a fact u->v and ``u <- r <- v`` for a fact
    v->u, so nothing is overwritten and nothing is reversed. Lines are deduplicated, kept in target order (most
    probable candidate first), and cut to ``token_budget`` tokens when given (``count_tokens(text) -> int``).

    Args:
        graph: a :class:`~gr_core.data.TextualGraph`. seeds, targets: node *ids* of ``graph``.
    """
    import networkx as nx

    ids = graph.nodes.node_id.tolist()
    names = dict(zip(ids, graph.nodes.node_attr.tolist()))
    rel_index: dict[tuple[int, int], list[str]] = {}
    for s, r, d in zip(graph.edges.src.tolist(), graph.edges.edge_attr.tolist(), graph.edges.dst.tolist()):
        rels = rel_index.setdefault((s, d), [])
        if r not in rels:
            rels.append(r)
    g = nx.Graph()
    g.add_nodes_from(ids)
    g.add_edges_from(rel_index)
    report = PathReport(lines=[])
    line_nodes: list[list[int]] = []
    present = [s for s in seeds if s in names]
    report.missing_seed = len(seeds) - len(present)
    seen = set()
    for t in targets:
        found = False
        for s in present:
            if s == t or not nx.has_path(g, s, t):
                continue
            found = True
            for nodes in nx.all_shortest_paths(g, s, t):
                hops = [_hop_texts(u, v, rel_index) for u, v in zip(nodes, nodes[1:])]
                for combo in itertools.islice(itertools.product(*hops), max_lines_per_pair):
                    line = names[nodes[0]] + "".join(h + names[v] for h, v in zip(combo, nodes[1:]))
                    if line not in seen:
                        seen.add(line)
                        report.lines.append(line)
                        line_nodes.append(nodes)
        report.no_path += not found
    if token_budget is not None and count_tokens is not None:
        kept, used = [], 0
        for line in report.lines:
            n = count_tokens(line + "\n")
            if used + n > token_budget:
                report.truncated += 1
                continue
            kept.append(line)
            used += n
        line_nodes = [n for line, n in zip(report.lines, line_nodes) if line in set(kept)]
        report.lines = kept
    report.nodes = list(dict.fromkeys(int(v) for nodes in line_nodes for v in nodes))
    return report


# ---------------------------------------------------------------------- data, training, evaluation
class deterministic:
    """Run torch with deterministic algorithms inside the block (restored after).

    The reasoner's scatter sums differ at the 1e-8 level from run to run on CPU otherwise, which after 10 epochs
    moved MetaQA-2hop test H@1 by 3 questions of 326; with it, reruns are bit-identical at 1 and 2 threads.
    """

    def __enter__(self):
        self.before = torch.are_deterministic_algorithms_enabled()
        torch.use_deterministic_algorithms(True)

    def __exit__(self, *exc):
        torch.use_deterministic_algorithms(self.before)


class QuestionGraph(Data):
    """A question's graph for the reasoner: a PyG ``Data`` whose ``rel_id`` is offset by each graph's relation-table
    size when batched (as ``edge_index`` is by its node count)."""

    def __inc__(self, key, value, *args, **kwargs):
        if key == "rel_id":
            return self.rel_table.size(0)
        return super().__inc__(key, value, *args, **kwargs)


def question_data(ds, i: int, graph=None):
    """Question ``i`` of a KGQA dataset as the reasoner's PyG ``Data``.

    Fields: ``edge_index (2, E)`` over node positions, ``rel_table (R, dim)`` the graph's distinct relation texts and
    ``rel_id (E,)`` each fact's row of it, ``seed (N,)`` and ``answer (N,)`` bool masks, ``q_emb (1, dim)``;
    ``missing_seed`` counts question entities absent from the graph.
    """
    from .data import question_nodes

    g = graph if graph is not None else ds.graph(i)
    _, edge_attr = ds.embeddings(i, g)
    # one row per distinct relation text (E x 384 floats per graph would not fit for MetaQA's whole training splits)
    _, first, rel_id = np.unique(g.edges.edge_attr.astype(str).to_numpy(), return_index=True, return_inverse=True)
    ids = g.nodes.node_id.to_numpy()
    pos = {int(n): k for k, n in enumerate(ids)}
    src = np.array([pos[int(s)] for s in g.edges.src], dtype=np.int64)
    dst = np.array([pos[int(d)] for d in g.edges.dst], dtype=np.int64)
    seed_ids = question_nodes(g)
    seed = np.zeros(len(ids), bool)
    seed[[pos[s] for s in seed_ids]] = True
    answer = np.zeros(len(ids), bool)
    answer[[pos[a] for a in gold_ids(g, ds.records[i].answers, seed_ids)]] = True
    return QuestionGraph(edge_index=torch.from_numpy(np.stack([src, dst])).view(2, -1),
                rel_table=torch.from_numpy(np.ascontiguousarray(edge_attr[first])),
                rel_id=torch.from_numpy(rel_id.astype(np.int64).reshape(-1)),
                seed=torch.from_numpy(seed), answer=torch.from_numpy(answer),
                q_emb=torch.from_numpy(ds.question_emb[i]).view(1, -1), num_nodes=len(ids),
                missing_seed=missing_entities(g, ds.records[i].q_entities))


@dataclass(frozen=True)
class ReasonerTrainConfig:
    """GNN-RAG training defaults: Adam lr 5e-4, no decay, grad clip 1.0, batch 8 (docs/method.md §3.1)."""

    lr: float = 5e-4
    grad_clip: float = 1.0
    batch_size: int = 8
    num_epochs: int = 10  # GNN-RAG: 200 on WebQSP; bounded here for CPU, selection on validation H@1
    seed: int = 0
    time_budget_s: float = 0.0  # 0: none; else no epoch starts that would end past it (judged by the last epoch)


def train_reasoner(train_data: list, val_data: list, text_dim: int, cfg: ReasonerConfig = ReasonerConfig(),
                   tcfg: ReasonerTrainConfig = ReasonerTrainConfig()) -> tuple[ReaRev, list[dict]]:
    """Train ReaRev; keep the epoch with the best validation H@1 (GNN-RAG selects on validation).

    Returns:
        ``(model with the best weights, per-epoch history)``.
    """
    with deterministic():
        return _train_reasoner(train_data, val_data, text_dim, cfg, tcfg)


def _train_reasoner(train_data, val_data, text_dim, cfg, tcfg):
    import copy
    import time

    from torch_geometric.loader import DataLoader

    from .runs import progress

    torch.manual_seed(tcfg.seed)
    model = ReaRev(text_dim, cfg)
    opt = torch.optim.Adam(model.parameters(), lr=tcfg.lr)
    loader = DataLoader(train_data, batch_size=tcfg.batch_size, shuffle=True,
                        generator=torch.Generator().manual_seed(tcfg.seed))
    history, best, best_state = [], -1.0, None
    start = time.perf_counter()
    for epoch in range(tcfg.num_epochs):
        if tcfg.time_budget_s and history and \
                time.perf_counter() - start + history[-1]["seconds"] > tcfg.time_budget_s:
            break  # the next epoch would overrun the budget
        model.train()
        t0, total, count = time.perf_counter(), 0.0, 0
        for batch in progress(loader, desc=f"reasoner epoch {epoch}"):
            loss_sum, n = model.loss(model(batch), batch)
            if n == 0:
                continue
            opt.zero_grad(set_to_none=True)
            (loss_sum / n).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), tcfg.grad_clip)
            opt.step()
            total, count = total + float(loss_sum.detach()), count + n
        val = evaluate_reasoner(model, val_data) if val_data else {"h1": 0.0}
        history.append({"epoch": epoch, "train_loss": total / max(count, 1), "val_h1": val["h1"],
                        "val_f1": val.get("f1"), "seconds": round(time.perf_counter() - t0, 2)})
        if val["h1"] > best:
            best, best_state = val["h1"], copy.deepcopy(model.state_dict())
    if best_state is not None:
        model.load_state_dict(best_state)
    return model, history


@torch.no_grad()
def node_probabilities(model: ReaRev, data_list: list, batch_size: int = 32) -> list[np.ndarray]:
    """Each graph's node distribution ``(N_i,)``."""
    from torch_geometric.loader import DataLoader

    model.eval()
    out = []
    for batch in DataLoader(data_list, batch_size=batch_size):
        with deterministic():
            p = model(batch).exp().numpy()
        for b in range(batch.num_graphs):
            out.append(p[(batch.batch == b).numpy()])
    return out


def question_scores(model: ReaRev, data_list: list, eps: float = 0.95) -> list[dict]:
    """Per question: ``h1`` (the most probable non-seed node is a gold answer), ``f1`` of the ``eps`` candidate set,
    ``hit`` (a candidate is gold), ``candidates`` (its size), ``gold`` (gold answers in the graph)."""
    rows = []
    for p, d in zip(node_probabilities(model, data_list), data_list):
        seeds = set(np.flatnonzero(d.seed.numpy()).tolist())
        gold = set(np.flatnonzero(d.answer.numpy()).tolist())
        masked = p.copy()
        masked[list(seeds)] = -1
        cands = {c for c, _ in select_candidates(p, seeds, eps)}
        tp = len(cands & gold)
        prec, rec = (tp / len(cands) if cands else 0.0), (tp / len(gold) if gold else 0.0)
        rows.append({"h1": float(bool(gold) and int(np.argmax(masked)) in gold),
                     "f1": 2 * prec * rec / (prec + rec) if prec + rec else 0.0, "hit": float(tp > 0),
                     "candidates": len(cands), "gold": len(gold)})
    return rows


def evaluate_reasoner(model: ReaRev, data_list: list, eps: float = 0.95) -> dict:
    """GNN-only scores as GNN-RAG reports them: H@1 (argmax over non-seed nodes is an answer) and F1 of the
    ``eps`` candidate set, in percent, plus candidate-set hit, size and the count of questions without a gold
    answer in their graph (misses, as in GNN-RAG's evaluator, which counts a hit only for a question whose answer
    list is empty). F1's recall counts the gold answers in the graph (GNN-RAG's: every gold answer, so ours reads higher
    where answers are missing from the graph)."""
    rows = question_scores(model, data_list, eps)
    n = max(len(rows), 1)
    return {"h1": 100 * sum(r["h1"] for r in rows) / n, "f1": 100 * sum(r["f1"] for r in rows) / n,
            "candidate_hit": 100 * sum(r["hit"] for r in rows) / n,
            "mean_candidates": float(np.mean([r["candidates"] for r in rows])) if rows else 0.0,
            "no_gold_in_graph": sum(r["gold"] == 0 for r in rows), "n": len(rows)}


def seed_positions(graph) -> tuple[list[int], set[int]]:
    """The question entities of ``graph``: their node ids and their row positions."""
    from .data import question_nodes

    seeds = question_nodes(graph)
    row = {int(n): k for k, n in enumerate(graph.nodes.node_id.tolist())}
    return seeds, {row[s] for s in seeds}


def gold_ids(graph, answers: list[str], seeds: list[int]) -> list[int]:
    """Node ids whose text is exactly a gold answer (question entities excluded; exact for the reason given in
    :func:`gr_core.data.question_nodes`)."""
    gold, seeds = set(answers), set(seeds)
    return [int(n) for n, t in zip(graph.nodes.node_id, graph.nodes.node_attr) if str(t) in gold and int(n) not in seeds]


def missing_entities(graph, q_entities: list[str]) -> int:
    """Question entities with no node of that name in ``graph`` (counted, never an error)."""
    names = set(graph.nodes.node_attr.astype(str))
    return sum(e not in names for e in q_entities)


def reasoner_dataset(ds, indices: list[int], desc: str = "reasoner data") -> list:
    """:func:`question_data` for each question index, with a progress bar."""
    from .runs import progress

    return [question_data(ds, i) for i in progress(indices, desc=desc)]


def save_reasoner(model: ReaRev, path, meta: dict | None = None):
    """Write a trained reasoner (weights, its :class:`ReasonerConfig`, the text width) atomically to ``path``."""
    import io
    from dataclasses import asdict

    from .runs import atomic_write_bytes

    buf = io.BytesIO()
    torch.save({"config": asdict(model.cfg), "text_dim": model.text_dim, "state": model.state_dict(),
                "meta": meta or {}}, buf)
    return atomic_write_bytes(path, buf.getvalue())


def save_reasoners(results: dict, folder) -> list:
    """Each trained reasoner of :func:`run_reasoner` results as ``folder/<key>.pt`` (for ``GraphChat(retriever="gnn")``);
    the files sit beside the results they produced but are git-ignored, like every checkpoint."""
    from pathlib import Path

    return [save_reasoner(r["model"], Path(folder) / f"{key}.pt",
                          {"key": key, "dataset": r["ds"].name, "hops": r["ds"].config.hops, "metrics": r["metrics"]})
            for key, r in results.items()]


def load_reasoner(path) -> ReaRev:
    """A reasoner saved by :func:`save_reasoner`, in eval mode."""
    blob = torch.load(path, map_location="cpu", weights_only=False)
    # A file written before the switches existed describes the first version: its missing switches are off.
    config = {name: False for name in SWITCH_NAMES} | blob["config"]
    model = ReaRev(int(blob["text_dim"]), ReasonerConfig(**config))
    model.load_state_dict(blob["state"])
    return model.eval()


# ---------------------------------------------------------------------- GNN-RAG's own path code, for comparison
def reference_paths(graph, seeds: list[int], targets: list[int]) -> list[str]:
    """GNN-RAG's verbalizer as released (``llm/src/utils/graph_utils.py``): an undirected ``nx.Graph`` keyed by
    entity *name*, one relation per pair (a later triple overwrites an earlier one), every hop printed ``->``
    whatever the fact's direction. Kept only to measure what :func:`reasoning_paths` fixes."""
    import networkx as nx

    names = dict(zip(graph.nodes.node_id.tolist(), graph.nodes.node_attr.tolist()))
    g = nx.Graph()
    for s, r, d in zip(graph.edges.src.tolist(), graph.edges.edge_attr.tolist(), graph.edges.dst.tolist()):
        g.add_edge(names[s], names[d], relation=str(r).strip())
    lines, seen = [], set()
    for t in targets:
        for s in seeds:
            a, b = names.get(s), names.get(t)
            if a is None or b is None or a == b or a not in g or b not in g or not nx.has_path(g, a, b):
                continue
            for nodes in nx.all_shortest_paths(g, a, b):
                line = nodes[0] + "".join(f" -> {g[u][v]['relation']} -> {v}" for u, v in zip(nodes, nodes[1:]))
                if line not in seen:
                    seen.add(line)
                    lines.append(line)
    return lines


def _hops(line: str) -> list[tuple[str, str, str, str]]:
    """``(left, arrow, relation, right)`` per hop of a verbalized path."""
    import re

    parts = re.split(r" (->|<-) ", line)
    # parts: e0, arrow, r1, arrow, e1, arrow, r2, arrow, e2 ...
    return [(parts[k], parts[k + 1], parts[k + 2], parts[k + 4]) for k in range(0, len(parts) - 4, 4)]


def compare_path_styles(graph, ours: list[str], reference: list[str]) -> dict:
    """What GNN-RAG's verbalizer loses on one question, measured against the graph's real facts.

    Returns counts: ``reference_reversed_hops`` (hops printed ``h -> r -> t`` where the fact is really ``t -> r -> h``),
    ``reference_lines`` / ``ours_lines``, ``relations_only_in_ours`` (distinct (pair, relation) hops the reference drops).
    """
    names = dict(zip(graph.nodes.node_id.tolist(), graph.nodes.node_attr.tolist()))
    facts = {(names[s], str(r).strip(), names[d]) for s, r, d in
             zip(graph.edges.src.tolist(), graph.edges.edge_attr.tolist(), graph.edges.dst.tolist())}
    reversed_hops = sum((a, r, b) not in facts and (b, r, a) in facts for line in reference for a, _, r, b in _hops(line))

    def pair_rel(lines):
        return {(frozenset((a, b)), r) for line in lines for a, _, r, b in _hops(line)}
    return {"ours_lines": len(ours), "reference_lines": len(reference), "reference_reversed_hops": reversed_hops,
            "relations_only_in_ours": len(pair_rel(ours) - pair_rel(reference))}


def path_study(ds, indices: list[int], probs: list[np.ndarray], eps: float = 0.95) -> "pd.DataFrame":
    """Per question: candidates, our paths vs GNN-RAG's verbalizer, and the explicit failure counts.

    Columns: ``candidates``, ``empty_candidates``, ``missing_seed``, ``no_path`` (candidates with no path),
    ``ours_lines``, ``reference_lines``, ``reference_reversed_hops``, ``relations_only_in_ours``,
    ``answer_in_paths`` (a gold answer is the end of one of our paths).
    """
    import pandas as pd

    from .runs import progress

    rows = []
    for i, p in progress(list(zip(indices, probs)), desc="paths"):
        g = ds.graph(i)
        ids = g.nodes.node_id.to_numpy()
        seeds, seed_pos = seed_positions(g)
        cands = [int(ids[c]) for c, _ in select_candidates(p, seed_pos, eps)]
        rep = reasoning_paths(g, seeds, cands)
        ref = reference_paths(g, seeds, cands)
        gold = set(ds.records[i].answers)
        ends = {line.rsplit(" -> ", 1)[-1].rsplit(" <- ", 1)[-1] for line in rep.lines}
        rows.append({"index": i, "candidates": len(cands), "empty_candidates": not cands,
                     "missing_seed": missing_entities(g, ds.records[i].q_entities), "no_path": rep.no_path,
                     "answer_in_paths": bool(ends & gold), **compare_path_styles(g, rep.lines, ref)})
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------- notebook-level helpers
def dataset_keys(datasets: list[str], metaqa_hops: list[int]) -> list[tuple[str, str, int]]:
    """``(key, dataset name, hops)`` per run: MetaQA once per hop set (``metaqa-2hop``), the others as named."""
    keys = [(name, name, 2) for name in datasets if name != "metaqa"]
    return keys + ([(f"metaqa-{h}hop", "metaqa", int(h)) for h in metaqa_hops] if "metaqa" in datasets else [])


def run_reasoner(dataset: str, hops: int = 2, max_train: int | None = None, max_val: int | None = None,
                 max_test: int | None = None, cfg: ReasonerConfig = ReasonerConfig(),
                 tcfg: ReasonerTrainConfig = ReasonerTrainConfig()) -> dict:
    """Train the reasoner on one KGQA dataset and score it on test.

    Returns:
        ``{"ds", "model", "history", "metrics", "test_indices", "probs"}``; metrics from :func:`evaluate_reasoner`
        plus ``train_seconds``.
    """
    import time

    from .graphqa import DatasetConfig, load_dataset

    ds = load_dataset(DatasetConfig(dataset, hops=hops))
    # max_* of None or 0 keep the whole split
    train = reasoner_dataset(ds, list(ds.split["train"])[:max_train or None], f"{dataset} train graphs")
    val = reasoner_dataset(ds, list(ds.split["val"])[:max_val or None], f"{dataset} val graphs")
    test_idx = list(ds.split["test"])[:max_test or None]
    test = reasoner_dataset(ds, test_idx, f"{dataset} test graphs")
    t0 = time.perf_counter()
    model, history = train_reasoner(train, val, int(ds.text_emb.shape[1]), cfg, tcfg)
    seconds = time.perf_counter() - t0
    metrics = evaluate_reasoner(model, test) | {"train_seconds": round(seconds, 2), "num_train": len(train),
                                                 "missing_seed": sum(d.missing_seed for d in test)}
    return {"ds": ds, "model": model, "history": history, "metrics": metrics, "test_indices": test_idx,
            "probs": node_probabilities(model, test)}


# Notebook 04's change table: each switch of :class:`ReasonerConfig` that brings the reasoner to ReaRev as released,
# applied on top of the ones before it (cumulative), so each row's difference to the row above is that change alone.
REASONER_CHANGES: list[tuple[str, dict]] = [
    ("first version", {name: False for name in SWITCH_NAMES}),
    ("+ seeds masked in every layer's softmax", {"mask_seeds": True}),
    ("+ a self-loop fact per entity", {"self_loops": True}),
    ("+ node states kept across iterations", {"keep_states": True}),
    ("+ directions apart, a relation linear per layer", {"split_directions": True}),
    ("+ a gated Fusion per instruction", {"fusion_reform": True}),
]


def reasoner_change_table(dataset: str, hops: int = 2, max_train: int | None = None, max_val: int | None = None,
                          cfg: ReasonerConfig = ReasonerConfig(), tcfg: ReasonerTrainConfig = ReasonerTrainConfig(),
                          changes: list[tuple[str, dict]] = REASONER_CHANGES) -> tuple["pd.DataFrame", "pd.DataFrame"]:
    """Train the reasoner once per cumulative change and score each on **validation** (the test split is not read).

    Returns:
        ``(table, by_type)``: per change, validation H@1 / F1 (percent), its 95% Wilson interval, the difference to
        the row above, mean candidate-set size and training seconds; and per change and question type (MetaQA's
        ``qtype``; one type ``"all"`` elsewhere) the validation H@1.
    """
    import time
    from dataclasses import replace

    import pandas as pd

    from .graphqa import DatasetConfig, load_dataset
    from .stats import wilson_interval

    ds = load_dataset(DatasetConfig(dataset, hops=hops))
    val_idx = list(ds.split["val"])[:max_val or None]
    train = reasoner_dataset(ds, list(ds.split["train"])[:max_train or None], f"{dataset} train graphs")
    val = reasoner_dataset(ds, val_idx, f"{dataset} val graphs")
    qtypes = [(ds.records[i].extra or {}).get("qtype", "all") for i in val_idx]
    rows, by_type, fields = [], [], {}
    for name, change in changes:
        fields = {**fields, **change}
        c = replace(cfg, **fields)
        t0 = time.perf_counter()
        model, history = train_reasoner(train, val, int(ds.text_emb.shape[1]), c, tcfg)
        seconds = time.perf_counter() - t0
        scores = question_scores(model, val)
        hits = sum(r["h1"] for r in scores)
        low, high = wilson_interval(int(hits), len(scores))
        rows.append({"change": name, "val H@1": 100 * hits / max(len(scores), 1), "ci_low": 100 * low,
                     "ci_high": 100 * high, "val F1": 100 * float(np.mean([r["f1"] for r in scores])),
                     "mean candidates": float(np.mean([r["candidates"] for r in scores])), "n": len(scores),
                     "best epoch": max(history, key=lambda h: h["val_h1"])["epoch"] if history else None,
                     "train seconds": round(seconds, 1)})
        frame = pd.DataFrame(scores).assign(qtype=qtypes)
        for t, g in frame.groupby("qtype"):
            by_type.append({"change": name, "qtype": t, "n": len(g), "val H@1": 100 * g.h1.mean()})
    table = pd.DataFrame(rows)
    table.insert(2, "difference", table["val H@1"].diff())
    return table.round(2), pd.DataFrame(by_type).round(2)


def reasoner_change_tables(keys: list[str], max_train: int | None = None, max_val: int | None = None,
                           cfg: ReasonerConfig = ReasonerConfig(), tcfg: ReasonerTrainConfig = ReasonerTrainConfig(),
                           first_and_last: tuple[str, ...] = (), on_key=None) -> tuple["pd.DataFrame", "pd.DataFrame"]:
    """:func:`reasoner_change_table` for each dataset key of :func:`dataset_keys` (``webqsp``, ``metaqa-2hop`` ...),
    concatenated with a ``dataset`` column; keys in ``first_and_last`` train only the first version and all switches.
    ``on_key(table, by_type)`` is called after each key with the tables so far (to save partial results)."""
    import pandas as pd

    known = {key: (name, hops) for key, name, hops in dataset_keys(["webqsp", "metaqa"], [1, 2, 3])}
    every = {field: True for _, change in REASONER_CHANGES for field in change}
    tables, types = {}, {}
    for key in keys:
        if key not in known:
            raise ValueError(f"dataset key {key!r} is not one of {sorted(known)}")
        changes = [REASONER_CHANGES[0], ("all five switches", every)] if key in first_and_last else REASONER_CHANGES
        tables[key], types[key] = reasoner_change_table(*known[key], max_train, max_val, cfg, tcfg, changes)
        table = pd.concat(tables, names=["dataset", None]).reset_index(level=0)
        by_type = pd.concat(types, names=["dataset", None]).reset_index(level=0)
        if on_key is not None:
            on_key(table, by_type)
    return (table, by_type) if keys else (pd.DataFrame(), pd.DataFrame())


def evidence_view(ds, i: int, probs: np.ndarray, eps: float = 0.95, max_candidates: int = 5):
    """One question's candidates and paths, and a small graph to draw them on.

    Returns:
        ``(candidates DataFrame, our path lines, GNN-RAG's path lines, view graph, highlighted node ids,
        highlighted edge rows of the view graph)``. The view is the subgraph induced by the question entities,
        the top candidates and every node on our paths to them.
    """
    import pandas as pd

    from .data import induced_subgraph

    g = ds.graph(i)
    ids = g.nodes.node_id.to_numpy()
    names = dict(zip(g.nodes.node_id.tolist(), g.nodes.node_attr.tolist()))
    seeds, seed_pos = seed_positions(g)
    cands = select_candidates(probs, seed_pos, eps)
    gold = set(ds.records[i].answers)
    table = pd.DataFrame([{"node": names[int(ids[c])], "probability": round(p, 4),
                           "gold answer": names[int(ids[c])] in gold} for c, p in cands])
    top = [int(ids[c]) for c, _ in cands[:max_candidates]]
    ours = reasoning_paths(g, seeds, top).lines
    ref = reference_paths(g, seeds, top)
    on_path = {n for line in ours for n in _path_names(line)}
    keep = set(seeds) | set(top) | {n for n, t in names.items() if t in on_path}
    view = induced_subgraph(g, keep)
    path_pairs = {(a, b) for line in ours for a, _, _, b in _hops(line)}
    vn = dict(zip(view.nodes.node_id.tolist(), view.nodes.node_attr.tolist()))
    edge_rows = [k for k, (s, d) in enumerate(zip(view.edges.src.tolist(), view.edges.dst.tolist()))
                 if (vn[s], vn[d]) in path_pairs or (vn[d], vn[s]) in path_pairs]
    return table, ours, ref, view, set(seeds) | set(top), edge_rows


def _path_names(line: str) -> list[str]:
    hops = _hops(line)
    return [hops[0][0]] + [h[3] for h in hops] if hops else [line]


def gnn_only_table(results: dict) -> "pd.DataFrame":
    """One row per dataset of :func:`run_reasoner` results, beside the paper's GNN-only numbers."""
    import pandas as pd

    rows = []
    for key, r in results.items():
        paper = PAPER_GNN_ONLY.get(key, {})
        rows.append({"dataset": key, **{k: round(v, 2) if isinstance(v, float) else v for k, v in r["metrics"].items()},
                     "paper H@1": paper.get("h1"), "paper F1": paper.get("f1"), "paper source": paper.get("source", "")})
    return pd.DataFrame(rows)


def summarize_path_study(studies: dict) -> "pd.DataFrame":
    """One row per dataset of :func:`path_study` frames: failures counted, path lines, what GNN-RAG's code loses."""
    import pandas as pd

    rows = []
    for key, df in studies.items():
        rows.append({"dataset": key, "questions": len(df), "mean candidates": round(df.candidates.mean(), 2),
                     "empty candidate sets": int(df.empty_candidates.sum()),
                     "missing question entities": int(df.missing_seed.sum()),
                     "candidates without a path": int(df.no_path.sum()),
                     "answer at a path end (%)": round(100 * df.answer_in_paths.mean(), 1),
                     "our lines": round(df.ours_lines.mean(), 1), "GNN-RAG lines": round(df.reference_lines.mean(), 1),
                     "questions with reversed hops in GNN-RAG (%)": round(100 * (df.reference_reversed_hops > 0).mean(), 1),
                     "questions with relations GNN-RAG drops (%)": round(100 * (df.relations_only_in_ours > 0).mean(), 1)})
    return pd.DataFrame(rows)


def reasoner_test_run(key: str, out_dir, max_train: int | None = None, max_val: int | None = None,
                      max_test: int | None = None, cfg: ReasonerConfig = ReasonerConfig(),
                      tcfg: ReasonerTrainConfig = ReasonerTrainConfig()) -> dict:
    """Train the reasoner on one dataset key (``metaqa-3hop``, ``webqsp``) and score it on test; write ``out_dir``:
    ``metrics.json`` (H@1 with its 95% Wilson interval, F1, n, training seconds and epochs, the history, settings and
    environment), ``by_type.csv`` (test H@1 per MetaQA question type) and ``by_candidates.csv`` (H@1 by the size
    of the 0.95 candidate set, to show where the errors are)."""
    from dataclasses import asdict
    from pathlib import Path

    import pandas as pd

    from .runs import environment_record, write_json
    from .stats import wilson_interval

    known = {k: (name, hops) for k, name, hops in dataset_keys(["webqsp", "metaqa"], [1, 2, 3])}
    if key not in known:
        raise ValueError(f"dataset key {key!r} is not one of {sorted(known)}")
    out_dir = Path(out_dir)
    result = run_reasoner(*known[key], max_train or None, max_val or None, max_test or None, cfg, tcfg)
    ds, test_idx = result["ds"], result["test_indices"]
    scores = pd.DataFrame(question_scores(result["model"], reasoner_dataset(ds, test_idx, f"{key} test graphs")))
    scores["qtype"] = [(ds.records[i].extra or {}).get("qtype", "all") for i in test_idx]
    hits = int(scores.h1.sum())
    low, high = wilson_interval(hits, len(scores))
    metrics = {"key": key, **result["metrics"], "h1_ci": [round(100 * low, 2), round(100 * high, 2)],
               "epochs_run": len(result["history"]), "history": result["history"],
               "settings": {"max_train": max_train, "max_val": max_val, "max_test": max_test,
                            "reasoner": asdict(cfg), "train": asdict(tcfg)},
               "command": f"python -m gr_core.gnn_rag --test --keys {key} --max-train {max_train or 0} "
                          f"--max-val {max_val or 0} --max-test {max_test or 0} --epochs {tcfg.num_epochs} "
                          f"--budget-minutes {tcfg.time_budget_s / 60:g} --out {out_dir.parent}",
               "env": environment_record()}
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "metrics.json", metrics)
    by_type = scores.groupby("qtype").agg(n=("h1", "size"), h1=("h1", "mean"), f1=("f1", "mean"),
                                          candidates=("candidates", "mean")).reset_index()
    by_type[["h1", "f1"]] *= 100
    by_type.round(2).to_csv(out_dir / "by_type.csv", index=False)
    bins = pd.cut(scores.candidates, [0, 1, 2, 5, 10, 50, 200, 10**6], right=True)
    by_size = scores.groupby(bins, observed=True).agg(n=("h1", "size"), h1=("h1", "mean")).reset_index()
    by_size["h1"] *= 100
    by_size.astype({"candidates": str}).round(2).to_csv(out_dir / "by_candidates.csv", index=False)
    save_reasoner(result["model"], out_dir / f"{key}.pt")
    print(f"{key}: test H@1 {metrics['h1']:.2f} [{low * 100:.1f}, {high * 100:.1f}] F1 {metrics['f1']:.2f} "
          f"n {len(scores)}, {metrics['epochs_run']} epochs, {metrics['train_seconds']:.0f} s", flush=True)
    return metrics


def main(argv: list[str] | None = None) -> int:
    """``python -m gr_core.gnn_rag --keys metaqa-2hop,webqsp --out DIR``: :func:`reasoner_change_table` per dataset key
    (validation only), written as ``DIR/reasoner_changes.csv``, ``..._by_type.csv`` and ``reasoner_changes.json``
    (settings, package versions, commit)."""
    import argparse
    from dataclasses import asdict
    from pathlib import Path

    from .runs import environment_record, write_json

    parser = argparse.ArgumentParser(prog="python -m gr_core.gnn_rag", description=main.__doc__)
    parser.add_argument("--keys", required=True, help="comma-separated: webqsp, metaqa-1hop, metaqa-2hop, metaqa-3hop")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--max-train", type=int, default=976, help="0: the whole training split")
    parser.add_argument("--max-val", type=int, default=200)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--first-and-last", default="", help="keys that train only the first version and all switches")
    parser.add_argument("--test", action="store_true",
                        help="train the default reasoner once per key and score it on test (reasoner_test_run)")
    parser.add_argument("--max-test", type=int, default=0, help="with --test: test questions (0: the whole split)")
    parser.add_argument("--budget-minutes", type=float, default=0.0, help="training time budget per key (0: none)")
    args = parser.parse_args(argv)
    cfg = ReasonerConfig()
    tcfg = ReasonerTrainConfig(num_epochs=args.epochs, seed=0, time_budget_s=60 * args.budget_minutes)
    if args.test:
        for key in args.keys.split(","):
            reasoner_test_run(key, args.out / key, args.max_train, args.max_val, args.max_test, cfg, tcfg)
        return 0

    def save(table, by_type):
        args.out.mkdir(parents=True, exist_ok=True)
        print(table.to_string(), flush=True)
        table.to_csv(args.out / "reasoner_changes.csv", index=False)
        by_type.to_csv(args.out / "reasoner_changes_by_type.csv", index=False)
        write_json(args.out / "reasoner_changes.json", {"settings": {**vars(args), "out": str(args.out),
                   "reasoner": asdict(cfg), "train": asdict(tcfg)}, "env": environment_record()})

    reasoner_change_tables(args.keys.split(","), args.max_train, args.max_val, cfg, tcfg,
                           tuple(filter(None, args.first_and_last.split(","))), on_key=save)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
