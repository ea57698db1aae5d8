"""One chat turn (:class:`Turn`): the question, the evidence searched, the answer and its check, with the views a
user looks at (a pyvis page per turn, a table of turns, a turn's ranked candidates) and saving turns to JSON."""
from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np
import pandas as pd

from ..data import TextualGraph
from ..runs import write_json
from ..viz import draw_evidence, evidence_html, save_figure, show_page
from .graphs import write_triples


@dataclass
class Turn:
    """One question and its answer, with the evidence behind it.

    Attributes:
        status: ``answered``; ``empty_question`` or ``unrelated`` (nothing asked, or nothing in the graph close to it:
            no model call); ``no_edges`` (a graph without edges: the evidence is the most similar nodes).
        evidence: the retrieved subgraph (the graph's own node ids); ``desc`` its text as the LLM read it (cut).
        linked: node ids of the entities linked in the question (and carried from the previous turn).
        answer_nodes: node ids of the searched graph the answer names (a part matched at the checker's ``normalized``
            level, or a node name written in a sentence), the question's own entities excluded.
        citations: each parsed citation with its verdict per match level (see :mod:`gr_core.studies.hallucination`).
        cited_nodes, cited_edges: node ids and evidence edge rows the valid citations point at (for highlighting).
        paths: the relation paths behind a ``paths`` answer, or GNN-RAG's reasoning paths.
        reasoner_seeds: node ids the path ranker or the reasoner started from (a follow-up's: the previous turn's
            start or its answers).
        mode: how the answer was made (:data:`~gr_core.chat.config.ANSWER_MODES`).
        decision: a trained reasoner's choice against the path ranker (:meth:`GraphChat.decide`), None without one.
        candidates: the answer candidates, best first (``paths``: the score of the best path reaching each;
            ``ranked``: LLM log-likelihood plus the relation prior, with its parts ``loglik`` and ``relation_fit``;
            ``reasoner``: the reasoner's probability), as :meth:`~gr_core.chat.answer.Candidate.to_dict` records.
        about: the first rule that took the question as about the graph (:func:`~gr_core.chat.link.about`), or "".
        timings: seconds per step (``link``, ``paths``, ``scope``, ``gnn``/``pcst``, ``answer``, ``total``).
    """

    question: str
    answer: str = ""
    status: str = "answered"
    note: str = ""
    evidence: TextualGraph | None = None
    desc: str = ""
    linked: list[int] = field(default_factory=list)
    answer_nodes: list[int] = field(default_factory=list)
    citations: list[dict] = field(default_factory=list)
    cited_nodes: list[int] = field(default_factory=list)
    cited_edges: list[int] = field(default_factory=list)
    fully_valid: bool | None = None
    paths: list[str] = field(default_factory=list)
    reasoner_seeds: list[int] = field(default_factory=list)
    mode: str = ""
    decision: dict | None = None
    candidates: list[dict] = field(default_factory=list)
    follow_up: bool = False
    about: str = ""
    model: str = ""
    best_similarity: float | None = None
    best_relation_similarity: float | None = None
    searched_nodes: int = 0
    searched_edges: int = 0
    timings: dict = field(default_factory=dict)
    scope: TextualGraph | None = field(default=None, repr=False)  # the searched graph (the check reads it)
    relation_similarity: np.ndarray | None = field(default=None, repr=False)  # (num_relations,) to the question

    def triples(self) -> list[tuple[str, str, str]]:
        """The evidence as ``(head, relation, tail)`` strings."""
        return self.evidence.triples() if self.evidence is not None else []

    def to_dict(self) -> dict:
        """A JSON-ready record (evidence as node and triple lists)."""
        d = {f.name: getattr(self, f.name) for f in fields(self)
             if f.name not in ("evidence", "scope", "relation_similarity")}
        ev = self.evidence
        d["evidence_nodes"] = [] if ev is None else [
            {"node_id": int(n), "text": str(t)} for n, t in zip(ev.nodes.node_id, ev.nodes.node_attr)]
        d["evidence_triples"] = [list(t) for t in self.triples()]
        return d

    def roles(self, candidates: int = 5) -> dict[int, str]:
        """Each marked evidence node's role in this turn (node id -> a key of :data:`gr_core.viz.ROLE_COLORS`): the
        answer's nodes, the question's entities, the next ``candidates`` ranked candidates, the cited nodes."""
        roles = {int(n): "cited" for n in self.cited_nodes}
        others = [n for c in self.candidates for n in c["node_ids"] if n not in self.answer_nodes]
        roles.update({int(n): "candidate" for n in others[:candidates]})
        roles.update({int(n): "question entity" for n in self.linked})
        roles.update({int(n): "answer" for n in self.answer_nodes})
        ids = set(self.evidence.nodes.node_id.tolist()) if self.evidence is not None else set()
        return {n: r for n, r in roles.items() if n in ids}

    def show(self, out_html: str | Path | None = None, height: int = 520, max_nodes: int = 30) -> str:
        """The evidence as an offline pyvis view (:func:`gr_core.viz.evidence_html`): relation labels, nodes coloured
        by role with a legend, at most ``max_nodes`` nodes; shown inline in a notebook, and written to ``out_html``
        (outside a notebook by default to ``gr-evidence.html`` in the temporary folder, its path printed)."""
        if self.evidence is None or self.evidence.num_nodes == 0:
            print(f"(no evidence: {self.note or self.status})")
            return ""
        page = evidence_html(self.evidence, self.roles(), self.cited_edges, max_nodes=max_nodes,
                             height=f"{height - 20}px")
        return show_page(page, out_html, height)

    def __str__(self) -> str:
        lines = [f"Q: {self.question}", f"A: {self.answer}" if self.answer else f"A: ({self.status}) {self.note}"]
        if self.evidence is not None and self.evidence.num_edges:
            lines.append(f"evidence ({self.evidence.num_nodes} nodes, {self.evidence.num_edges} edges):")
            lines += [f"  ({h} | {r} | {t})" for h, r, t in self.triples()[:20]]
            if self.evidence.num_edges > 20:
                lines.append(f"  ... {self.evidence.num_edges - 20} more")
        if self.citations:
            ok = sum(bool(c.get("normalized")) for c in self.citations)
            lines.append(f"citations: {ok} of {len(self.citations)} found in the graph")
        if self.note and self.answer:
            lines.append(f"note: {self.note}")
        return "\n".join(lines)


def show_turns(turns: list[Turn], out_dir: str | Path, height: int = 520) -> None:
    """Each turn's evidence inline (offline pyvis) with its PNG twin, written as ``out_dir/turn<k>.html`` / ``.png``;
    a turn without evidence prints why. The ``turn<k>`` files of an earlier call are removed first: they would stand
    beside answers they do not belong to."""
    for old in Path(out_dir).glob("turn*.*"):
        if re.fullmatch(r"turn\d+\.(html|png)", old.name):
            old.unlink()
    for k, turn in enumerate(turns):
        if turn.evidence is None:
            print(f"turn {k}: {turn.status}: {turn.note}")
            continue
        print(f"turn {k}: {turn.question}  ->  {turn.answer!r}")
        turn.show(out_html=Path(out_dir) / f"turn{k}.html", height=height)
        save_figure(draw_evidence(turn.evidence, turn.roles(), turn.cited_edges, title=turn.question), out_dir,
                    f"turn{k}")


def write_evidence(turns: list[Turn], path: str | Path) -> Path:
    """The evidence of the first of ``turns`` that found some, written as a triples file a chat opens again
    (:func:`~gr_core.chat.graphs.write_triples`); a tab or line break inside a name is written as a space (a file of
    lines cannot hold it).

    Raises:
        ValueError: no turn found evidence (every question was about something other than the graph).
    """
    for turn in turns:
        if triples := turn.triples():
            return write_triples([tuple(re.sub(r"[\t\r\n]+", " ", x).strip() for x in t) for t in triples], path)
    raise ValueError("no turn found evidence to write: every question was about something other than the graph")


def save_turns(turns: list[Turn], path: str | Path, meta: dict | None = None) -> Path:
    """The turns as one JSON file (atomic): ``{"meta": ..., "turns": [Turn.to_dict(), ...]}``."""
    return write_json(path, {"meta": meta or {}, "turns": [t.to_dict() for t in turns]})


RETRIEVAL_STEPS = ("scope", "paths", "gnn", "pcst")  # Turn.timings keys of the evidence steps (conversation.py)


def turns_table(turns: list[Turn]) -> pd.DataFrame:
    """One row per turn: status, answer, evidence size, whether the answer names a node of the evidence, the
    citations found in the graph, and the time of each step."""
    rows = []
    for t in turns:
        ev_ids = set(t.evidence.nodes.node_id.tolist()) if t.evidence is not None else set()
        size = (t.evidence.num_nodes, t.evidence.num_edges) if t.evidence is not None else (0, 0)
        rows.append({"question": t.question, "status": t.status, "mode": t.mode, "answer": t.answer,
                     "follow_up": t.follow_up, "evidence nodes": size[0], "evidence edges": size[1],
                     "answer in evidence": bool(set(t.answer_nodes) & ev_ids),
                     "citations valid": f"{sum(bool(c.get('normalized')) for c in t.citations)}/{len(t.citations)}",
                     # the steps between linking and answering that this turn took
                     "retrieval ms": round(1000 * sum(t.timings.get(k, 0.0) for k in RETRIEVAL_STEPS), 1),
                     "answer s": round(t.timings.get("answer", 0.0), 2)})
    return pd.DataFrame(rows)


def candidates_table(turn: Turn, k: int = 10) -> pd.DataFrame:
    """The turn's ``k`` best answer candidates: name, node ids, score, whether chosen."""
    chosen = set(turn.answer_nodes)
    return pd.DataFrame([{"name": c["name"], "node_ids": c["node_ids"], "score": c["score"],
                          "chosen": bool(chosen & set(c["node_ids"]))} for c in turn.candidates[:k]],
                        columns=["name", "node_ids", "score", "chosen"])
