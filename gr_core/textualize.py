"""Textualization (GR paper Table 9; GR code ``retrieval.py``): a graph as two CSV tables.

``desc = nodes.to_csv(index=False) + "\\n" + edges.to_csv(index=False)``: the node table
``node_id,node_attr``, a blank line (pandas ends each table with a newline), then the edge
table ``src,edge_attr,dst``. pandas quotes fields containing commas or quotes. Node ids are
the graph's own ids, not re-indexed after retrieval.
"""
from __future__ import annotations

from .data import EDGE_COLUMNS, NODE_COLUMNS, TextualGraph


def textualize(graph: TextualGraph) -> str:
    """The reference CSV text of ``graph`` (byte-identical to the GR code's ``desc``)."""
    nodes = graph.nodes[NODE_COLUMNS].to_csv(index=False)
    edges = graph.edges[EDGE_COLUMNS].to_csv(index=False)
    return nodes + "\n" + edges
