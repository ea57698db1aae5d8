"""Figures and interactive subgraph views.

pyvis runs in ``in_line`` mode (vis-network inlined, ~0.7 MB per graph): its ``local`` mode still loads vis-network
from a CDN and draws nothing offline (pyvis#228). Each view is embedded as an ``<iframe srcdoc=...>`` so that
several graphs per notebook each draw in their own box, and has a static PNG twin (networkx + matplotlib) for
untrusted notebooks and GitHub, which run no JS.
"""
from __future__ import annotations

import html
import io
import json
import re
import tempfile
import warnings
from pathlib import Path
from typing import Iterable

import networkx as nx
import numpy as np

from .data import TextualGraph
from .published import PAPER_TABLE5
from .runs import atomic_write_bytes, atomic_write_text

HIGHLIGHT = "#d62728"
PLAIN = "#9ecae1"
PLAIN_EDGE = "#bbbbbb"
# pyvis links Bootstrap from a CDN in every mode (pyvis#229). The graph does not use it, and offline the browser
# would wait on it, so those two tags are dropped: the page then loads nothing remote.
_BOOTSTRAP_TAGS = re.compile(r"<link[^>]*bootstrap[^>]*/>|<script[^>]*bootstrap[^>]*>\s*</script>", re.S)
# The roles a node of a chat turn's evidence can play, with their colours, in legend order (the view's legend and
# its PNG twin use the same table).
ROLE_COLORS = {"question entity": "#2ca02c", "answer": "#d62728", "candidate": "#ff7f0e", "cited": "#9467bd",
               "other": PLAIN}


def set_style() -> None:
    """One matplotlib style for every figure of the project."""
    import matplotlib as mpl  # noqa: PLC0415 deferred: matplotlib (~0.6 s at start-up), only for figures

    mpl.rcParams.update({"figure.dpi": 100, "savefig.dpi": 150, "font.size": 10, "axes.grid": True,
                         "grid.alpha": 0.3, "svg.hashsalt": "gr_core", "axes.spines.top": False,
                         "axes.spines.right": False})


def _pyplot():
    import matplotlib.pyplot as plt  # noqa: PLC0415 deferred: matplotlib (~0.6 s at start-up), only for figures

    return plt


def save_figure(fig, out_dir: str | Path, name: str, show: bool = True,
                formats: Iterable[str] = ("png",)) -> list[Path]:
    """Save ``fig`` as ``out_dir/name.<fmt>`` with fixed metadata (byte-stable PNG), then show it."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        meta = {"Date": None} if fmt == "svg" else {"CreationDate": None} if fmt == "pdf" else {"Software": None}
        paths.append(out_dir / f"{name}.{fmt}")
        buffer = io.BytesIO()  # written whole or not at all, as every other file (runs.atomic_write_bytes)
        fig.savefig(buffer, format=fmt, bbox_inches="tight", metadata=meta)
        atomic_write_bytes(paths[-1], buffer.getvalue())
    if show:
        try:
            from IPython import get_ipython  # noqa: PLC0415 deferred: optional: only inside a notebook
            from IPython.display import display  # noqa: PLC0415 the same

            if getattr(get_ipython(), "kernel", None) is not None:  # a terminal would print "Figure(800x600)"
                display(fig)
        except ImportError:
            pass
    _pyplot().close(fig)
    return paths


def _label(text: str, width: int = 28) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _drawn(text: str, width: int = 28) -> str:
    """:func:`_label` for matplotlib, its dollar signs escaped: matplotlib reads text between two as math ("Ke$ha and
    A$AP" came out garbled, an unbalanced formula raised)."""
    return _label(text, width).replace("$", r"\$")


def _edges(graph: TextualGraph):
    """``(row, (src, edge_attr, dst))`` of every edge of ``graph``."""
    return enumerate(graph.edges[["src", "edge_attr", "dst"]].itertuples(index=False))


def _network(height: str):
    from pyvis.network import Network  # noqa: PLC0415 deferred: optional: the notebooks extra; needed only for HTML views

    return Network(height=height, width="100%", directed=True, cdn_resources="in_line", notebook=False)


def graph_network(graph: TextualGraph, highlight_nodes: Iterable[int] = (), highlight_edges: Iterable[int] = (),
                  height: str = "420px"):
    """A pyvis ``Network`` of ``graph``; highlighted nodes/edges (by node id / edge row) drawn in red."""
    hn, he = set(highlight_nodes), set(highlight_edges)
    net = _network(height)
    for nid, text in graph.nodes[["node_id", "node_attr"]].itertuples(index=False):
        # ids as text: vis-network reads numbers as JavaScript's doubles, where ids above 2**53 collide
        net.add_node(str(int(nid)), label=_label(str(text)), title=f"{nid}: {text}",
                     color=HIGHLIGHT if nid in hn else PLAIN)
    for row, (src, rel, dst) in _edges(graph):
        net.add_edge(str(int(src)), str(int(dst)), label=_label(str(rel), 20), title=str(rel),
                     color=HIGHLIGHT if row in he else PLAIN_EDGE, width=3 if row in he else 1)
    net.set_options('{"physics": {"stabilization": {"iterations": 200}}, "edges": {"font": {"size": 10}}}')
    return net


def graph_html(graph: TextualGraph, **kwargs) -> str:
    """The self-contained HTML page of :func:`graph_network`: no remote script or stylesheet."""
    return _BOOTSTRAP_TAGS.sub("", graph_network(graph, **kwargs).generate_html())


def show_graph(graph: TextualGraph, out_html: str | Path | None = None, height: int = 440, **kwargs) -> str:
    """Display ``graph`` inline as an offline pyvis view (:func:`show_page`); returns the HTML page.

    JupyterLab renders it only in a trusted notebook (papermill output is untrusted until ``jupyter trust``); the
    PNG from :func:`draw_graph` is the fallback.
    """
    return show_page(graph_html(graph, height=f"{height - 20}px", **kwargs), out_html, height, "gr-graph.html")


def show_page(page: str, out_html: str | Path | None = None, height: int = 440, name: str = "gr-evidence.html"
              ) -> str:
    """Display a self-contained HTML page inline in its own ``<iframe srcdoc>`` box (and write it to ``out_html``).
    Outside a notebook the page is written to ``out_html``, by default ``name`` in the temporary folder, and its path
    printed (open it in a browser). Returns ``page``."""
    try:  # a Jupyter kernel runs this code (a terminal, even IPython's, cannot show HTML)
        from IPython import get_ipython  # noqa: PLC0415 deferred: optional: only inside a notebook

        notebook = getattr(get_ipython(), "kernel", None) is not None
    except ImportError:
        notebook = False
    if out_html is None and not notebook:
        out_html = Path(tempfile.gettempdir()) / name
    if out_html is not None:
        atomic_write_text(out_html, page)
    if not notebook:
        print(f"written to {out_html} (open it in a browser)")
        return page
    from IPython.display import HTML, display  # noqa: PLC0415 deferred: optional: only inside a notebook

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Consider using IPython.display.IFrame")
        display(HTML(f'<iframe srcdoc="{html.escape(page)}" width="100%" height="{height}" style="border:0"></iframe>'))
    return page


def _draw(g, pos, *, figsize, node_size, node_color, labels, label_size, edges, edge_labels, label_kw,
          label_bbox=None, arrowsize=12):
    """The figure of ``g`` at ``pos``.

    Args:
        node_size, node_color: one per node of ``g``, in its order; ``labels``: node -> text, in ``label_size`` points.
        edges: ``(src, dst, color, width)`` per edge drawn.
        edge_labels: ``(src, dst, text)``; the texts of parallel edges are joined by " / ", drawn with ``label_kw``.
    """
    fig, ax = _pyplot().subplots(figsize=figsize)
    ax.grid(False)
    ax.set_axis_off()
    nx.draw_networkx_nodes(g, pos, ax=ax, node_size=node_size, node_color=node_color)
    nx.draw_networkx_labels(g, pos, ax=ax, labels=labels, font_size=label_size,
                            **({"bbox": label_bbox} if label_bbox else {}))
    # facts both ways between two nodes (spouse, Freebase's inverse relations) drawn as two arcs, each with its label:
    # straight, they were one line under two overlapping labels
    both = {(s, d) for s, d, _, _ in edges if s != d} & {(d, s) for s, d, _, _ in edges}
    joined = {}
    for s, d, text in edge_labels:
        joined.setdefault((s, d), []).append(text)
    for bent in (False, True):
        style = {"connectionstyle": "arc3,rad=0.25"} if bent else {}
        drawn = [e for e in edges if ((e[0], e[1]) in both) == bent]
        if drawn:
            nx.draw_networkx_edges(g, pos, ax=ax, edgelist=[(s, d) for s, d, _, _ in drawn],
                                   edge_color=[c for _, _, c, _ in drawn], width=[w for _, _, _, w in drawn],
                                   arrows=True, arrowsize=arrowsize, node_size=node_size, **style)
        texts = {k: " / ".join(v) for k, v in joined.items() if (k in both) == bent}
        if texts:
            nx.draw_networkx_edge_labels(g, pos, ax=ax, edge_labels=texts, **style, **label_kw)
    return fig, ax


def draw_graph(graph: TextualGraph, highlight_nodes: Iterable[int] = (), highlight_edges: Iterable[int] = (),
               title: str = "", seed: int = 0):
    """A static matplotlib drawing of ``graph`` (the PNG twin of the pyvis view). Returns the Figure."""
    hn, he = set(highlight_nodes), set(highlight_edges)
    g = nx.MultiDiGraph()
    names = dict(zip(graph.nodes.node_id, graph.nodes.node_attr))
    g.add_nodes_from(names)
    rows = list(_edges(graph))
    for _, (src, rel, dst) in rows:
        g.add_edge(src, dst, rel=rel)
    pos = nx.spring_layout(g, seed=seed)
    # large views label only the highlighted part; with nothing highlighted, none past 100 nodes (a ball of text)
    crowded = g.number_of_nodes() > 25 and (bool(hn) or g.number_of_nodes() > 100)
    fig, ax = _draw(
        g, pos, figsize=(7, 5), node_size=[500 if (n in hn or not crowded) else 120 for n in g.nodes],
        node_color=[HIGHLIGHT if n in hn else PLAIN for n in g.nodes],
        labels={n: _drawn(str(names[n]), 18) for n in g.nodes if n in hn or not crowded}, label_size=8,
        edges=[(s, d, HIGHLIGHT if i in he else PLAIN_EDGE, 2.5 if i in he else 0.8) for i, (s, _, d) in rows],
        edge_labels=[(s, d, _drawn(rel, 16)) for i, (s, rel, d) in rows if i in he or not crowded],
        label_kw={"font_size": 7})
    if title:
        ax.set_title(_drawn(title, len(title)))
    return fig


def focus_nodes(graph: TextualGraph, roles: dict[int, str], max_nodes: int) -> list[int]:
    """At most ``max_nodes`` node ids of ``graph`` to draw: nodes with a role first (answers, question entities,
    candidates, cited), then their neighbours, then the rest, in graph order."""
    order = {r: k for k, r in enumerate(("answer", "question entity", "candidate", "cited"))}
    ids = [int(n) for n in graph.nodes.node_id]
    marked = sorted((n for n in ids if roles.get(n, "other") != "other"), key=lambda n: order.get(roles[n], 9))
    near = set()
    for s, d in zip(graph.edges.src.tolist(), graph.edges.dst.tolist()):
        if int(s) in roles or int(d) in roles:
            near.update((int(s), int(d)))
    return list(dict.fromkeys(marked + [n for n in ids if n in near] + ids))[:max_nodes]


def _focus(graph: TextualGraph, roles: dict[int, str], max_nodes: int):
    """:func:`focus_nodes`, the node texts by id, and ``(row, src, relation, dst)`` of the edges between kept nodes."""
    keep = focus_nodes(graph, roles, max_nodes)
    names = dict(zip((int(n) for n in graph.nodes.node_id), (str(a) for a in graph.nodes.node_attr)))
    rows = [(i, int(s), r, int(d)) for i, (s, r, d) in _edges(graph) if int(s) in keep and int(d) in keep]
    return keep, names, rows


def evidence_html(graph: TextualGraph, roles: dict[int, str], highlight_edges: Iterable[int] = (), max_nodes: int = 30,
                  height: str = "520px") -> str:
    """A chat turn's evidence as a self-contained pyvis page a person can read: every edge labelled with its
    relation, node labels cut to 24 characters (the full text on hover), nodes coloured by role
    (:data:`ROLE_COLORS`) with a legend, and at most ``max_nodes`` nodes (:func:`focus_nodes`; the legend says how
    many more there are)."""
    keep, names, rows = _focus(graph, roles, max_nodes)
    he = set(highlight_edges)
    net = _network(height)
    for nid in keep:
        role = roles.get(nid, "other")
        net.add_node(str(nid), label=_label(names[nid], 24), title=f"{nid}: {names[nid]} ({role})",
                     color=ROLE_COLORS[role], size=16 if role != "other" else 10,
                     font={"size": 14 if role != "other" else 12, "strokeWidth": 3, "strokeColor": "#ffffff"})
    for row, src, rel, dst in rows:
        net.add_edge(str(src), str(dst), label=_label(str(rel), 22), title=str(rel),
                     color=HIGHLIGHT if row in he else "#999999", width=3 if row in he else 1)
    # Repulsion with long springs and overlap avoidance keeps labels apart; edge labels sit on the edges.
    net.set_options('{"physics": {"solver": "forceAtlas2Based", "forceAtlas2Based": {"gravitationalConstant": -120, '
                    '"springLength": 140, "avoidOverlap": 1}, "stabilization": {"iterations": 400}}, '
                    '"edges": {"font": {"size": 10, "align": "middle", "strokeWidth": 3}, '
                    '"smooth": {"type": "dynamic"}, "arrows": {"to": {"scaleFactor": 0.6}}}}')
    used = {roles[n] for n in keep if n in roles} | {"other"}
    items = "".join(f'<span style="margin-right:12px"><span style="display:inline-block;width:11px;height:11px;'
                    f'border-radius:6px;background:{ROLE_COLORS[r]};margin-right:4px"></span>{html.escape(r)}</span>'
                    for r in ROLE_COLORS if r in used)
    hidden = len(names) - len(keep)
    more = f'<span style="color:#555">{hidden} more nodes not drawn</span>' if hidden else ""
    legend = (f'<div id="legend" style="position:absolute;top:6px;left:8px;z-index:10;font:12px sans-serif;'
              f'background:rgba(255,255,255,0.85);padding:3px 6px;border-radius:4px">{items}{more}</div>')
    page = _BOOTSTRAP_TAGS.sub("", net.generate_html())
    return page.replace('<div id="mynetwork"', legend + '<div id="mynetwork"', 1)


def draw_evidence(graph: TextualGraph, roles: dict[int, str], highlight_edges: Iterable[int] = (), title: str = "",
                  max_nodes: int = 30):
    """The PNG twin of :func:`evidence_html`: the same nodes, role colours, relation labels and legend."""
    from matplotlib.lines import Line2D  # noqa: PLC0415 deferred: matplotlib (~0.6 s at start-up), only for figures

    keep, names, rows = _focus(graph, roles, max_nodes)
    he = set(highlight_edges)
    g = nx.MultiDiGraph()
    g.add_nodes_from(keep)
    for _, s, r, d in rows:
        g.add_edge(s, d, rel=r)
    pos = nx.kamada_kawai_layout(nx.Graph(g)) if len(keep) > 1 else {n: (0.0, 0.0) for n in keep}
    fig, ax = _draw(
        g, pos, figsize=(8, 6), node_size=[420 if roles.get(n, "other") != "other" else 160 for n in g.nodes],
        node_color=[ROLE_COLORS[roles.get(n, "other")] for n in g.nodes],
        labels={n: _drawn(names[n], 20) for n in g.nodes}, label_size=7,
        edges=[(s, d, HIGHLIGHT if i in he else "#999999", 2.5 if i in he else 0.8) for i, s, _, d in rows],
        edge_labels=[(s, d, _drawn(r, 16)) for _, s, r, d in rows],
        label_kw={"font_size": 6, "font_color": "#444444"},
        label_bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.7, "pad": 0.5}, arrowsize=10)
    used = {roles.get(n, "other") for n in keep}
    handles = [Line2D([], [], marker="o", ls="", color=ROLE_COLORS[r], label=r) for r in ROLE_COLORS if r in used]
    if hidden := len(names) - len(keep):
        handles.append(Line2D([], [], ls="", label=f"{hidden} more nodes not drawn"))
    ax.margins(0.08)  # room for the labels of nodes the layout puts on the border
    # beside the drawing, not over it: the layout puts nodes in the corners (saved with a tight bounding box)
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, frameon=True)
    if title:
        ax.set_title(_drawn(title, 90), fontsize=9)
    return fig


def plot_learning_curves(runs_dir: str | Path, names: Iterable[str] | None = None, title: str = "learning curves"):
    """Train and validation loss per epoch, one line pair per run, read from each run's ``history.json``."""
    from matplotlib.ticker import MaxNLocator  # noqa: PLC0415 deferred: matplotlib (~0.6 s at start-up), only for figures

    fig, ax = _pyplot().subplots(figsize=(7, 3.6))
    wanted = set(names) if names is not None else None
    for path in sorted(Path(runs_dir).glob("*/history.json")):
        name = path.parent.name
        if wanted is not None and name not in wanted:
            continue
        hist = json.loads(path.read_text())
        epochs = [h["epoch"] + 1 for h in hist]
        line, = ax.plot(epochs, [h["val_loss"] for h in hist], marker="o", label=f"{name} (val)")
        ax.plot(epochs, [h["train_loss"] for h in hist], ls="--", color=line.get_color(), alpha=0.6)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss per label token")
    ax.set_title(title + "  (solid: validation, dashed: training)")
    if ax.lines:
        ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    return fig


def plot_table5(summary, level: str = "normalized"):
    """Bars of Valid Nodes, Valid Edges and Fully Valid Graphs per dataset and system at ``level`` (95% CIs),
    the paper's SceneGraphs numbers as hatched bars."""
    metrics = (("valid_nodes_%", "Valid Nodes"), ("valid_edges_%", "Valid Edges"), ("fully_valid_%", "Fully Valid"))
    sub = summary[summary.level == level].reset_index(drop=True)
    groups = [(f"{r.dataset}\n{r.system}", r) for r in sub.itertuples(index=False)]
    groups += [(f"paper (SceneGraphs)\n{s}", None) for s in PAPER_TABLE5]
    fig, ax = _pyplot().subplots(figsize=(max(6, 1.3 * len(groups)), 3.6))
    width = 0.8 / len(metrics)
    for j, (metric, label) in enumerate(metrics):
        ys, lo, hi = [], [], []
        for x, (name, r) in enumerate(groups):
            if r is None:
                y, ci = PAPER_TABLE5[name.split("\n")[1]][metric], (np.nan, np.nan)
            else:
                y, ci = sub.loc[x, metric], sub.loc[x, metric.replace("_%", "_ci")]
            y = 0.0 if y != y else y
            ys.append(y)
            lo.append(0 if ci[0] != ci[0] else max(0.0, y - ci[0]))
            hi.append(0 if ci[1] != ci[1] else max(0.0, ci[1] - y))
        xs = [x + (j - 1) * width for x in range(len(groups))]
        bars = ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=label, color=f"C{j}")
        for b, (_, r) in zip(bars, groups):
            if r is None:  # the paper's
                b.set_hatch("//")
                b.set_alpha(0.5)
    ax.set_xticks(range(len(groups)), [g for g, _ in groups], fontsize=8)
    ax.set_ylabel("%")
    ax.set_ylim(0, 100)
    ax.set_title(f"Hallucination (GR Table 5), match level: {level}")
    ax.legend(fontsize=8, ncols=3, loc="upper left")
    fig.tight_layout()
    return fig
