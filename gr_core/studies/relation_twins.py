"""Relations stored twice (docs/chat.md, "Relations stored twice").

A word names the relation it picks out among the graph's relations: its similarity to that relation less its best
similarity to any other (:func:`~gr_core.chat.path_ranker.word_relation_fit`). Freebase stores many facts under two
names, one per direction (``location.country.languages_spoken`` and ``language.human_language.countries_spoken_in``),
and a WebQSP mini-graph keeps both: "language" is as near to one as to the other, so it picked out neither and the
question read as naming no relation. Twins (:meth:`~gr_core.kg.KnowledgeGraph.twin_relations`) are no longer
compared with each other: in the path ranker (``ChatConfig.path_twins``) and in the generated-question reasoner's
reading (``ReasonerConfig.twin_relations``, measured by ``bench/chat_generated.py ensemble --twins``).
:func:`path_twins_study` measures the path ranker's side on WebQSP mini-graphs, and counts the twins of the MetaQA KB.
"""
from __future__ import annotations

from ..chat import GraphChat, load_graph
from ..chat.generate import relation_phrase
from ..chat.graph_reasoner import read_question
from .chat_without_questions import COVERAGE, hit_record, paired, run_systems, webqsp_sample

SETTINGS = {"twins read as one relation (the default)": {}, "twins compared with each other (before)":
            {"path_twins": False}}


def twin_counts(kg) -> dict:
    """How many relations ``kg`` has, in how many twin groups, and the twin relations' phrases by group."""
    groups = kg.twin_relations()
    by_group: dict[int, list[str]] = {}
    for name, g in zip(kg.relations, groups.tolist()):
        by_group.setdefault(g, []).append(relation_phrase(name))
    return {"relations": len(kg.relations), "groups": len(by_group),
            "twins": [names for names in by_group.values() if len(names) > 1]}


def path_twins_study(split: str = "val", num_graphs: int = 200, seed: int = 0) -> dict:
    """On ``num_graphs`` WebQSP mini-graphs of ``split`` (seeded sample): the word-coverage path ranker with and
    without twins read as one, paired on the same questions; how many questions' readings (the generated reasoner's,
    :func:`~gr_core.chat.graph_reasoner.read_question`) name a relation either way; and the MetaQA KB's twins (none:
    its reading is the same either way)."""

    questions, graphs = webqsp_sample(num_graphs, seed, split)
    chats = {spec: GraphChat(g, kind="kg", retriever="pcst", answer_mode="paths") for spec, g in graphs.items()}
    named = {"with twins": 0, "without": 0}
    for q in questions:
        chat = chats[q["graph"]]
        kg = chat.index.kg
        masked = chat.index.masked(q["question"], chat.index.link(q["question"], True, True))
        for label, twins in (("with twins", kg.twin_relations()), ("without", None)):
            named[label] += bool(read_question(chat.path_scorer, masked, kg.relations, twins=twins).match.any())
    systems = {f"{COVERAGE}, {label}": (lambda spec, s=setting: GraphChat(
        graphs[spec], kind="kg", retriever="pcst", answer_mode="paths", path_scorer="coverage", **s))
        for label, setting in SETTINGS.items()}
    rows = run_systems(systems, questions, graph_of=lambda q: q["graph"])
    a, b = rows
    counts = [twin_counts(c.index.kg) for c in chats.values()]
    return {"records": [hit_record(label, r, graph=f"webqsp {split}") for label, r in rows.items()],
            "pairs": [paired(a, rows[a], b, rows[b])],
            "questions_naming_a_relation": {**named, "n": len(questions)},
            "webqsp_relations": {"relations": sum(c["relations"] for c in counts),
                                 "groups": sum(c["groups"] for c in counts), "graphs": len(counts)},
            "metaqa_kb": twin_counts(GraphChat(load_graph("metaqa")[0], kind="kg", retriever="pcst",
                                               answer_mode="paths").index.kg),
            "questions": {"graphs": f"webqsp {split} mini-graphs", "num_graphs": len(graphs), "seed": seed},
            "per_question": {label: [{k: r[k] for k in ("question", "answer", "hit")} for r in rr]
                             for label, rr in rows.items()}}
