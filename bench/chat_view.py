"""The chat's evidence view, looked at in a headless browser: is it readable?

    python bench/chat_view.py   ->  outputs/bench/chat_view.json, outputs/bench/chat_view_{before,after}.png

Real turns on the MetaQA KB (the embedded SmolLM2-135M, the chat's default answer mode) are drawn twice: with the
plain subgraph view (:func:`gr_core.viz.graph_html`, every node, one colour for every marked node, no legend) and
with the turn view (:meth:`gr_core.chat.Turn.show`: roles, legend, relation labels, a node cap). Debian's Chromium
renders each page headless and offline; a script in the page records where vis-network placed every node once the
layout settled (5 s after loading), and the DOM is dumped to read it back. Measured per view: nodes drawn, relation
labels drawn, the legend, and the number of node-label pairs whose boxes overlap (each label's box estimated from its
length at the view's font size). Screenshots of the first question are written beside the JSON. Needs ``chromium`` on
the PATH (``apt-get install chromium``); without it the script says so and exits 2.
"""
import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from common import result_path, write_result  # noqa: I001

from gr_core.chat import GraphChat, load_graph
from gr_core.viz import graph_html

QUESTIONS = ["Who directed Forrest Gump?", "Which films did Tom Hanks star in?",
             "what genres are the films directed by Ridley Scott", "who wrote the screenplay of Blade Runner"]
PROBE = ('<script>setTimeout(function () {var d = document.createElement("pre");'
         'd.id = "positions"; d.style.display = "none"; d.textContent = JSON.stringify(network.getPositions());'
         'document.body.appendChild(d);}, 5000);</script>')


def chromium(page: Path, screenshot: Path | None) -> str:
    """The DOM of ``page`` after 10 s of virtual time (and its screenshot when asked)."""
    base = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={tempfile.mkdtemp()}", "--window-size=1000,720", "--virtual-time-budget=10000"]
    if screenshot is not None:
        subprocess.run(base + [f"--screenshot={screenshot}", page.as_uri()], capture_output=True, timeout=120,
                       check=True)
    res = subprocess.run(base + ["--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120, check=True)
    return res.stdout


def overlaps(positions: dict, labels: dict, font_px: float = 14.0) -> int:
    """Pairs of node labels whose boxes overlap: a label is drawn centred under its node, about 0.55 em a character."""
    boxes = []
    for nid, p in positions.items():
        text = labels.get(str(nid), "")
        w, h = 0.55 * font_px * len(text), 1.2 * font_px
        boxes.append((p["x"] - w / 2, p["y"] + 8, p["x"] + w / 2, p["y"] + 8 + h))
    n = 0
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            a, b = boxes[i], boxes[j]
            n += a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
    return int(n)


def measure(page_html: str, name: str, out: Path, shot: bool) -> dict:
    page = out / f"{name}.html"
    page.write_text(page_html, encoding="utf-8")
    dom = chromium(page, out / f"{name}.png" if shot else None)
    m = re.search(r'<pre id="positions"[^>]*>(.*?)</pre>', dom, re.S)
    positions = json.loads(m.group(1).replace("&quot;", '"')) if m else {}
    labels = {str(n["id"]): n.get("label", "") for n in json.loads(re.search(r"nodes = new vis\.DataSet\((\[.*?\])\);",
                                                                             page_html, re.S).group(1))}
    edges = json.loads(re.search(r"edges = new vis\.DataSet\((\[.*?\])\);", page_html, re.S).group(1))
    return {"nodes_drawn": len(labels), "nodes_placed": len(positions), "edges_drawn": len(edges),
            "edges_with_relation_label": sum(bool(e.get("label")) for e in edges),
            "legend": 'id="legend"' in page_html, "label_overlaps": overlaps(positions, labels) if positions else None,
            "more_nodes_note": bool(re.search(r"\d+ more nodes not drawn", page_html))}


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(prog="python bench/chat_view.py", description=__doc__.split("\n")[0],
                            epilog="No options: the measurement is fixed (see the module docstring).").parse_args(argv)
    if shutil.which("chromium") is None:
        print("chromium is not installed (apt-get install chromium): nothing measured", file=sys.stderr)
        return 2
    kb, kind = load_graph("metaqa")
    chat = GraphChat(kb, model="zero_shot", kind=kind, answer_mode="ranked")
    out = result_path("chat_view").parent
    tmp = Path(tempfile.mkdtemp())
    rows = []
    for k, q in enumerate(QUESTIONS):
        chat.reset()
        turn = chat.ask(q)
        marked = set(turn.linked) | set(turn.answer_nodes)
        before = graph_html(turn.evidence, highlight_nodes=marked)
        after = turn.show()
        rec = {"question": q, "answer": turn.answer, "evidence_nodes": turn.evidence.num_nodes,
               "evidence_edges": turn.evidence.num_edges, "roles": sorted(set(turn.roles().values()))}
        for name, page in (("before", before), ("after", after)):
            m = measure(page.replace("</body>", PROBE + "</body>", 1),
                        f"chat_view_{name}" if k == 0 else f"view{k}_{name}", out if k == 0 else tmp, k == 0)
            rec[name] = m
        rows.append(rec)
        print(f"{q!r}: {turn.evidence.num_nodes} nodes; label overlaps before {rec['before']['label_overlaps']}, "
              f"after {rec['after']['label_overlaps']}; relation labels {rec['after']['edges_with_relation_label']}"
              f"/{rec['after']['edges_drawn']}", flush=True)
    for name in ("before", "after"):
        (out / f"chat_view_{name}.html").unlink(missing_ok=True)  # ~0.7 MB each: the PNGs are the record
    summary = {f"label_overlaps_{v}": int(np.sum([r[v]["label_overlaps"] or 0 for r in rows]))
               for v in ("before", "after")}
    summary["every_after_view_has_legend"] = all(r["after"]["legend"] for r in rows)
    summary["every_after_edge_labelled"] = all(r["after"]["edges_with_relation_label"] == r["after"]["edges_drawn"]
                                               for r in rows)
    print(summary)
    print("wrote", write_result("chat_view", {"views": rows, "summary": summary, "label_px_per_char": 0.55 * 14}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
