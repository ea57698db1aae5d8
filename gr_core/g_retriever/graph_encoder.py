"""Graph encoders (GR paper §5.4 Eq. 9, App. B.1; GR code ``src/model/gnn.py``; docs/method.md §1.3).

``h_g = mean_pool(GNN(S*))``: PyG convolutions over the retrieved subgraph's node embeddings, mean-pooled into one
vector per graph; between layers norm -> ReLU -> dropout, nothing after the last (GR code).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch_geometric.nn import GATConv, GCNConv, LayerNorm, TransformerConv, global_mean_pool

from ..config import check_choice

GNN_KINDS = ("gt", "gat", "gcn")
NORMS = ("batch", "layer", "none")


@dataclass(frozen=True)
class GNNConfig:
    """One graph encoder.

    Attributes:
        kind: GR Table 7's encoders: ``gt`` (the code's default), ``TransformerConv`` with ``heads`` concatenated
            heads and relation embeddings as ``edge_dim``; ``gat``, ``GATConv`` with heads averaged and **no**
            edge features (as the GR code); ``gcn``, ``GCNConv``.
        hidden: hidden and output width (paper: 1024, the width of all-roberta-large-v1; on CPU we scale it
            to the 384-d MiniLM input, see the presets). Input width is read from the data, never typed in.
        num_layers: paper: 4.
        heads: attention heads (paper: 4); ``gt`` concatenates ``hidden // heads`` channels per head.
        dropout: GR code: 0.
        norm: ``batch`` (GR code: BatchNorm1d), ``layer`` (PyG graph-wise LayerNorm: independent of how
            graphs are split across processes, used by the DDP equivalence test), or ``none``.
    """

    kind: str = "gt"  # GR code src/model/gnn.py, default since f0d1545
    hidden: int = 1024  # GR paper App. B.1
    num_layers: int = 4  # GR paper App. B.1
    heads: int = 4  # GR paper App. B.1
    dropout: float = 0.0  # GR code src/config.py
    norm: str = "batch"  # GR code src/model/gnn.py

    def __post_init__(self) -> None:
        check_choice("GNNConfig", "kind", self.kind, GNN_KINDS)
        check_choice("GNNConfig", "norm", self.norm, NORMS)
        if self.num_layers < 1 or self.hidden < 1:
            raise ValueError(f"GNNConfig needs num_layers >= 1 and hidden >= 1, got {self.num_layers}, {self.hidden}")
        if self.kind == "gt" and self.hidden % self.heads:
            raise ValueError(f"GNNConfig: kind 'gt' concatenates heads, so hidden={self.hidden} must be divisible "
                             f"by heads={self.heads}")


def batch_norm(norm: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``norm(x)``, except that a training batch of one row, which has no batch statistics, is normalized with the
    running ones as in evaluation (PyG's ``BatchNorm(allow_single_element=True)``) instead of failing.

    Args:
        norm: the layer (a batch norm gets the rule, a ``SyncBatchNorm`` only in a process group of one: with several,
            a rank's one row still joins the others' statistics; any other layer is called as it is).
        x: ``(rows, features)``: nodes, or a batch's graph tokens.

    Returns:
        ``(rows, features)``.
    """
    synced = isinstance(norm, nn.SyncBatchNorm) and torch.distributed.is_initialized() and \
        torch.distributed.get_world_size() > 1  # every rank must join its statistics' gather, whatever it holds
    if synced or not (norm.training and x.size(0) == 1 and isinstance(norm, nn.modules.batchnorm._BatchNorm)):
        return norm(x)
    return nn.functional.batch_norm(x, norm.running_mean, norm.running_var, norm.weight, norm.bias, False, 0.0,
                                    norm.eps)


class GraphEncoder(nn.Module):
    """GNN + mean pooling: one vector per graph.

    Args:
        in_dim: node (and edge) embedding width (the sentence encoder's).
        cfg: the encoder's :class:`GNNConfig`.

    Shapes:
        input: ``x (N, in_dim)``, ``edge_index (2, E)``, ``edge_attr (E, in_dim)``, ``batch (N,)``
        output: ``(num_graphs, cfg.hidden)``
    """

    def __init__(self, in_dim: int, cfg: GNNConfig):
        super().__init__()

        self.cfg = cfg
        self.convs = nn.ModuleList()
        self.norms = nn.ModuleList()
        dims = [in_dim] + [cfg.hidden] * cfg.num_layers
        for i in range(cfg.num_layers):
            d_in, d_out = dims[i], dims[i + 1]
            if cfg.kind == "gt":
                conv = TransformerConv(d_in, d_out // cfg.heads, heads=cfg.heads, edge_dim=in_dim, dropout=cfg.dropout)
            elif cfg.kind == "gat":
                conv = GATConv(d_in, d_out, heads=cfg.heads, concat=False, dropout=cfg.dropout)
            else:
                conv = GCNConv(d_in, d_out)
            self.convs.append(conv)
            if i < cfg.num_layers - 1:
                self.norms.append(nn.BatchNorm1d(d_out) if cfg.norm == "batch"
                                  else LayerNorm(d_out, mode="graph") if cfg.norm == "layer" else nn.Identity())
        self.out_dim = cfg.hidden

    def node_forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_attr: torch.Tensor | None = None,
                     batch: torch.Tensor | None = None) -> torch.Tensor:
        """Node embeddings before pooling, ``(N, cfg.hidden)``."""
        for i, conv in enumerate(self.convs):
            x = conv(x, edge_index, edge_attr=edge_attr) if self.cfg.kind == "gt" else conv(x, edge_index)
            if i < len(self.convs) - 1:
                norm = self.norms[i]
                x = norm(x, batch) if hasattr(norm, "mode") else batch_norm(norm, x)
                x = nn.functional.dropout(torch.relu(x), self.cfg.dropout, self.training)
        return x

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_attr: torch.Tensor | None,
                batch: torch.Tensor, num_graphs: int) -> torch.Tensor:
        x = self.node_forward(x, edge_index, edge_attr, batch)
        return global_mean_pool(x, batch, size=num_graphs)  # (num_graphs, hidden); empty graphs pool to 0
