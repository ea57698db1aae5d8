"""Lowercase questions (docs/chat.md, "Lowercase questions").

The chat links a question to the graph by the node names it writes (:meth:`~gr_core.chat.ChatIndex.link`). A one-word
name links only when capitalized mid-sentence, so that "big" and "up" in prose are not the films *Big* and *Up*. A
question typed without any capital letter carries no such signal, and WebQSP's questions are all lowercase ("in which
continent is germany"): with that rule alone, half of them linked nothing and their topic entity was not a start of
any path, not a seed of the reasoner, and not kept out of the answers. ``ChatConfig.link_uncased`` (the default) links
the one-word names of such a question where no longer name links, and ``ChatConfig.link_partial`` links, where no name
links at all, the node whose name shares the most words with the question ("heskey" -> "Emile Heskey").
:func:`linking_study` measures both on WebQSP mini-graphs, each system under each rule, paired on the same questions.
A reasoner reading the question with its entities masked, and the path ranker, read the linked names written "it"
(:meth:`~gr_core.chat.ChatIndex.masked`): however the question wrote them, which :func:`masking_study` measures
against the literal match that came before.
"""
from __future__ import annotations

import numpy as np

from ..chat import ChatConfig, GraphChat, load_graph
from ..chat.graph_reasoner import train_graph_reasoner, training_record
from ..chat.index import name_key
from ..gnn_rag import load_reasoner, topic_masked
from ..stats import wilson_interval
from .chat_without_questions import (COVERAGE, GENERATED, RANKED, hit_record, metaqa_sample, paired, ranked_chats,
                                     run_systems, webqsp_sample)

# the linking rules compared (ChatConfig overrides); the first is the chat's default
RULES = {"lowercase questions link one-word names, else partial names (the default)": {},
         "lowercase questions link one-word names, no partial names": {"link_partial": False},
         "one-word names only capitalized, no partial names": {"link_uncased": False, "link_partial": False}}


def topic_linked(chat: GraphChat, question: str, topic: str, uncased: bool, partial: bool) -> tuple[bool, bool]:
    """``(whether linking question on chat's graph finds its gold topic entity (by name_key), whether it finds
    nothing)`` under the rule ``link_uncased=uncased, link_partial=partial``."""
    rows = chat.index.link(question, uncased, partial)
    return name_key(topic) in {name_key(chat.index.kg.entities[r]) for r in rows}, not rows


def linking_study(reasoner_cfg, split: str = "val", num_graphs: int = 200, seed: int = 0,
                  llm_model: str = "embedded:smollm2-135m-instruct", llm: bool = True) -> dict:
    """On ``num_graphs`` WebQSP mini-graphs of ``split`` (seeded sample): how often each question's topic entity is
    linked, and the Hit of the LLM ranking, the word-coverage path ranker and a reasoner trained on questions generated
    from those graphs (``reasoner_cfg``; its training does not link: each generated question knows its topic), under
    each of :data:`RULES`, every rule paired with the default and with the rule after it, on the same questions."""

    questions, graphs = webqsp_sample(num_graphs, seed, split)
    plain = {spec: GraphChat(g, kind="kg", retriever="pcst", answer_mode="paths") for spec, g in graphs.items()}
    rates = {}
    for label, rule in RULES.items():
        cfg = ChatConfig(**rule)
        found, none = zip(*(topic_linked(plain[q["graph"]], q["question"], q["topic"], cfg.link_uncased,
                                         cfg.link_partial) for q in questions))
        lo, hi = wilson_interval(int(sum(found)), len(found))
        rates[label] = {"topic_linked": round(100 * float(np.mean(found)), 2), "ci_low": round(100 * lo, 2),
                        "ci_high": round(100 * hi, 2), "nothing_linked": round(100 * float(np.mean(none)), 2)}
    generated = load_reasoner(train_graph_reasoner([c.index for c in plain.values()], reasoner_cfg))
    ranked = ranked_chats(graphs, llm_model)
    systems, bases = {}, ([RANKED] if llm else []) + [COVERAGE, GENERATED]
    for label, rule in RULES.items():
        if llm:
            systems[f"{RANKED}, {label}"] = lambda spec, r=rule: ranked(spec, **r)
        systems[f"{COVERAGE}, {label}"] = lambda spec, r=rule: GraphChat(
            graphs[spec], kind="kg", retriever="pcst", answer_mode="paths", path_scorer="coverage", **r)
        systems[f"{GENERATED}, {label}"] = lambda spec, r=rule: GraphChat(
            graphs[spec], kind="kg", reasoner=generated, retriever="gnn", **r)
    rows = run_systems(systems, questions, graph_of=lambda q: q["graph"])
    labels = list(RULES)
    pairs = [(labels[0], other) for other in labels[1:]] + list(zip(labels[1:], labels[2:]))
    return {"link_rates": rates,
            "records": [hit_record(label, r, graph=f"webqsp {split}") for label, r in rows.items()],
            "pairs": [paired(f"{b}, {x}", rows[f"{b}, {x}"], f"{b}, {y}", rows[f"{b}, {y}"])
                      for b in bases for x, y in pairs],
            "questions": {"graphs": f"webqsp {split} mini-graphs", "num_graphs": len(graphs), "seed": seed},
            "per_question": {label: [{k: r[k] for k in ("question", "answer", "hit")} for r in rr]
                             for label, rr in rows.items()}}


def metaqa_linking_check(per_hop: int = 300, seed: int = 0) -> dict:
    """The same rules on MetaQA's KB, whose questions write their entities capitalized (a few tags are lowercase):
    the default word-coverage path ranker (the chat's answer there) under each of :data:`RULES` on ``per_hop`` test
    questions a hop (the seeded sample of :func:`~gr_core.studies.chat_without_questions.metaqa_sample`), paired with
    the default; and how many questions each rule links differently from the default."""

    kb, kind, _ = load_graph("metaqa")
    questions = metaqa_sample("test", per_hop, seed)
    chats = {label: GraphChat(kb, kind=kind, retriever="pcst", answer_mode="paths", **rule)
             for label, rule in RULES.items()}
    rows = run_systems({f"{COVERAGE}, {label}": chat for label, chat in chats.items()}, questions)
    first, index = next(iter(chats)), next(iter(chats.values())).index
    linked = {label: [index.link(q["question"], c.config.link_uncased, c.config.link_partial) for q in questions]
              for label, c in chats.items()}
    labels = list(rows)
    return {"records": [hit_record(label, r, graph="metaqa test") for label, r in rows.items()],
            "pairs": [paired(labels[0], rows[labels[0]], b, rows[b]) for b in labels[1:]],
            "links_differing_from_default": {label: int(sum(a != b for a, b in zip(links, linked[first])))
                                             for label, links in linked.items()},
            "questions": {"split": "test", "per_hop": per_hop, "seed": seed, "n": len(questions)},
            "per_question": {label: [{k: r[k] for k in ("question", "answer", "hit")} for r in rr]
                             for label, rr in rows.items()}}


def literal_masking(chat: GraphChat) -> GraphChat:
    """``chat`` masking its linked entities as before :meth:`~gr_core.chat.ChatIndex.masked`: each name matched
    literally (without case), so a name written without its accent or period, or in part, stayed in the question."""
    index = chat.index
    index.masked = lambda question, rows, written=None: topic_masked(question, [index.kg.entities[r] for r in rows])
    return chat


def _reads_differently(index, question: str) -> bool:
    """Whether ``question``, linked with the chat's default rules, is masked otherwise than by the literal match."""
    linked = index.link(question, True, True)
    return index.masked(question, linked) != topic_masked(question, [index.kg.entities[r] for r in linked])


def masking_study(reasoner_cfg, split: str = "val", num_graphs: int = 200, seed: int = 0) -> dict:
    """The linked entities written "it" however the question wrote them (the default) against the literal match, on
    ``num_graphs`` WebQSP mini-graphs of ``split``: how many questions read differently, and the Hit of the two
    systems that read the masked question (the word-coverage path ranker, a reasoner trained on questions generated
    from those graphs), each paired on the same questions, and how many of the path ranker's 900 MetaQA test
    questions (:func:`metaqa_sample`, 300 a hop) read differently. The LLM ranking reads the question as asked."""

    questions, graphs = webqsp_sample(num_graphs, seed, split)
    plain = {spec: GraphChat(g, kind="kg", retriever="pcst", answer_mode="paths") for spec, g in graphs.items()}
    differ = sum(_reads_differently(plain[q["graph"]].index, q["question"]) for q in questions)
    path = train_graph_reasoner([c.index for c in plain.values()], reasoner_cfg)
    generated = load_reasoner(path)
    systems = {}
    for label, wrap in (("linked names masked as written (the default)", lambda c: c),
                        ("linked names masked literally (before)", literal_masking)):
        systems[f"{COVERAGE}, {label}"] = lambda spec, w=wrap: w(GraphChat(
            graphs[spec], kind="kg", retriever="pcst", answer_mode="paths", path_scorer="coverage"))
        systems[f"{GENERATED}, {label}"] = lambda spec, w=wrap: w(GraphChat(
            graphs[spec], kind="kg", reasoner=generated, retriever="gnn"))
    rows = run_systems(systems, questions, graph_of=lambda q: q["graph"])
    labels = list(rows)
    kb, kind, _ = load_graph("metaqa")  # cased questions: how many of the path ranker's MetaQA sample read otherwise
    metaqa = GraphChat(kb, kind=kind, retriever="pcst", answer_mode="paths").index
    metaqa_differ = sum(_reads_differently(metaqa, q["question"]) for q in metaqa_sample("test", 300, 0))
    return {"questions_masked_differently": differ, "metaqa_test_questions_masked_differently": metaqa_differ,
            "metaqa_questions": 900, "reasoner": training_record(path),
            "records": [hit_record(label, r, graph=f"webqsp {split}") for label, r in rows.items()],
            "pairs": [paired(labels[i], rows[labels[i]], labels[i + 2], rows[labels[i + 2]]) for i in (0, 1)],
            "questions": {"graphs": f"webqsp {split} mini-graphs", "num_graphs": len(graphs), "seed": seed},
            "per_question": {label: [{k: r[k] for k in ("question", "answer", "hit")} for r in rr]
                             for label, rr in rows.items()}}
