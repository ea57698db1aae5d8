"""Questions the chat refused (docs/chat.md, "Questions the chat refused").

A question that names no entity of the graph is "not about this graph" when its words are far from every node and
relation (``ChatConfig.relevance_threshold``, ``relation_threshold``). Freebase's relation names rarely read like
WebQSP's questions, so a question naming its topic in part ("stanley matthews") or by one word ("laos") was refused.
Two rules take such questions as about the graph: a name written in part with two or more of its words and at least
half of them (:meth:`~gr_core.chat.ChatIndex.partial_match`), and a one-word name of the graph's hub
(:meth:`~gr_core.chat.ChatIndex.names_the_graph`). :func:`relevance_gate_study` counts, for WebQSP questions on their
own mini-graphs and for off-topic questions, which rule takes each one, so what each rule admits is on record.
"""
from __future__ import annotations

from collections import Counter

from ..chat import GraphChat, load_graph
from .chat_speed import OFF_TOPIC
from .chat_without_questions import webqsp_sample

REASONS = ("named", "similar", "in part", "hub", "refused")


def why_about(chat: GraphChat, question: str) -> str:
    """Why ``chat`` takes ``question``, asked first in a conversation, as about its graph (:attr:`Turn.about
    <gr_core.chat.Turn>`: ``named``, ``similar``, ``in part`` or ``hub``), or ``refused``."""
    chat.reset()
    return chat.retrieve(question).about or "refused"


def relevance_gate_study(split: str = "val", num_graphs: int = 200, seed: int = 0, off_topic_every: int = 10) -> dict:
    """On ``num_graphs`` WebQSP mini-graphs of ``split`` (seeded sample): why each of their questions is taken as about
    its graph or refused; the same for :data:`~gr_core.studies.chat_speed.OFF_TOPIC` asked of every
    ``off_topic_every``-th of those graphs and of the MetaQA KB. Counts by reason, and the questions of every reason
    but ``named`` and ``similar``."""
    questions, graphs = webqsp_sample(num_graphs, seed, split)
    chats = {spec: GraphChat(g, kind="kg", retriever="pcst", answer_mode="paths") for spec, g in graphs.items()}
    own = [(q["question"], q["graph"], why_about(chats[q["graph"]], q["question"])) for q in questions]
    off = [(q, spec, why_about(chats[spec], q)) for spec in list(chats)[::off_topic_every] for q in OFF_TOPIC]
    kb, kind, _ = load_graph("metaqa")
    metaqa = GraphChat(kb, kind=kind, retriever="pcst", answer_mode="paths")
    off_kb = [(q, "metaqa", why_about(metaqa, q)) for q in OFF_TOPIC]

    def summary(rows):
        counts = Counter(r for *_, r in rows)
        return {"n": len(rows), "by_reason": {r: counts.get(r, 0) for r in REASONS},
                "questions": [{"question": q, "graph": g, "reason": r} for q, g, r in rows
                              if r not in ("named", "similar")]}

    return {"split": split, "num_graphs": len(graphs), "seed": seed, "webqsp_questions": summary(own),
            "off_topic_on_webqsp_graphs": summary(off), "off_topic_on_metaqa": summary(off_kb)}
