"""The chat on graph families it was not tuned on, each question asked alone (docs/chat.md, "What it scores where"):

    python bench/chat_families.py --family metaqa --split test --size 300        ->  outputs/bench/chat/metaqa_test.json
    python bench/chat_families.py --family metaqa_slice --split test --size 60   ->  .../metaqa_slice_test.json
    python bench/chat_families.py --family webqsp_mini --split test --size 300 --llm
    python bench/chat_families.py --family webqsp_full --size 6                   (the first 6 of the 18 graphs; 0: all)
    python bench/chat_families.py --family two_entity --split test --size 120
    python bench/chat_families.py --family webqsp_union --split test --size 300  (6 unions of 50 mini-graphs)

Each file holds every system's Hit with its 95% interval, the exact McNemar pair with the default, the trained
reasoners' decisions and training records, every question's answer, the machine, versions and command. ``--before
FILE``: a file of the same questions answered by an earlier commit (``per_question``), paired with this run's systems.

A rule of the chat is chosen on one family and reported on the others, so that no rule is tuned to one graph. The
families, each with real questions written for it (none of them generated):

- ``metaqa``: the MetaQA KB (133,582 triples, word relations), searched by neighbourhoods; MetaQA's 1-, 2- and 3-hop
  questions (dev to choose, test to report);
- ``metaqa_slice``: parts of the MetaQA KB of 2k-15k triples, each opened as a graph of its own (as a user's graph
  of that size is) and searched whole: the ball of 4 hops around a seeded film, hubs of more than 50 facts not
  expanded, at most 3,000 nodes (:func:`metaqa_slices`); MetaQA's questions whose topic is in the slice and whose
  relation chain (the question type) reaches an answer inside it, the gold answers being those it reaches there;
- ``webqsp_mini``: WebQSP mini-graphs (30 Freebase triples on average, schema relations) of the seeded re-split
  (val to choose, test to report), each question on its own graph;
- ``webqsp_union``: the same mini-graphs joined 50 at a time into one graph each (nodes of one name merged: 1k-2.4k
  triples, 200-330 relations, searched as the chat searches a graph of that size), each question asked on its union:
  the schema relations of a graph the size of a user's, with the mini-graphs' split (val to choose, test to report);
- ``webqsp_full``: the 18 complete RoG 2-hop WebQSP graphs (348-7,499 triples), each searched whole, with its one
  question (report only: 18 questions choose nothing);
- ``two_entity``: questions naming two MetaQA entities that together pick the answer (:func:`two_entity_questions`).

Any family written ``FAMILY+lower`` or ``FAMILY+sentence`` asks its questions typed without capitals, or with only
the first letter capitalized: where a one-word name cannot be told from a word by its capital; ``FAMILY+hyphenless``
with a space for each hyphen ("spider man 2" for "Spider-Man 2").

:func:`ask_alone` asks one question on its own; :func:`hit_record` and :func:`paired` give Hit with its 95% interval
and the exact McNemar test of two systems on the same questions.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np

from common import write_result

from gr_core.chat import ChatIndex, GraphChat, load_graph
from gr_core.chat.generate import Hop, reach
from gr_core.datasets import TOPIC_BRACKETS
from gr_core.evaluate import kgqa_scores
from gr_core.kg import KnowledgeGraph, NeighbourhoodConfig
from gr_core.paths import data_file
from gr_core.runs import progress
from gr_core.stats import compare, wilson_interval


FAMILIES = ("metaqa", "metaqa_slice", "webqsp_mini", "webqsp_union", "webqsp_full")
UNION = 50  # mini-graphs per union graph (webqsp_union)
# MetaQA's question types name a relation chain: movie_to_X follows X's relation, X_to_movie follows it backwards
METAQA_RELATIONS = {"director": "directed_by", "writer": "written_by", "actor": "starred_actors",
                    "year": "release_year", "genre": "has_genre", "language": "in_language", "tags": "has_tags",
                    "tag": "has_tags", "imdbrating": "has_imdb_rating", "imdbvotes": "has_imdb_votes"}
# the slices (module docstring): chosen once for their size, never for a score
SLICE_SCOPE = NeighbourhoodConfig(hops=4, max_expand_degree=50, max_nodes=3000)
SLICE_EDGES = (2000, 15000)


def metaqa_sample(split: str = "test", per_hop: int = 300, seed: int = 0, hops=(1, 2, 3)) -> list[dict]:
    """A seeded sample of MetaQA questions, ``per_hop`` per hop count (all with ``per_hop=None``), asked as a user
    writes them (the ``[topic]`` brackets removed): ``{hop, line, question, topic, answers, qtype}``."""

    rng = np.random.default_rng(seed)
    out = []
    for hop in hops:
        lines = data_file("metaqa", f"{hop}-hop", f"qa_{split}.txt").read_text(encoding="utf-8").splitlines()
        qtypes = data_file("metaqa", f"{hop}-hop", f"qa_{split}_qtype.txt").read_text(encoding="utf-8").splitlines()
        pick = range(len(lines)) if per_hop is None else sorted(
            rng.choice(len(lines), min(per_hop, len(lines)), replace=False).tolist())
        for i in pick:
            q, answers = lines[i].split("\t")
            out.append({"hop": hop, "line": i + 1, "question": TOPIC_BRACKETS.sub(r"\1", q),
                        "topic": TOPIC_BRACKETS.search(q).group(1), "answers": answers.split("|"),
                        "qtype": qtypes[i].strip()})
    return out


def qtype_path(qtype: str, relations: list[str]) -> tuple[Hop, ...]:
    """The relation path a MetaQA question type names (``actor_to_movie_to_director``: ``starred_actors`` backwards,
    then ``directed_by``)."""
    rel = {r: i for i, r in enumerate(relations)}
    parts = qtype.split("_to_")
    return tuple(Hop(rel[METAQA_RELATIONS[b]], False) if a == "movie" else Hop(rel[METAQA_RELATIONS[a]], True)
                 for a, b in zip(parts, parts[1:]))


def metaqa_slices(kg: KnowledgeGraph, count: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """``count`` slices of the KB (module docstring): ``(node rows, edge rows)`` of the :data:`SLICE_SCOPE` ball around
    seeded films, kept when its edges number within :data:`SLICE_EDGES`."""
    rng = np.random.default_rng(seed)
    films = np.unique(kg.heads[kg.rels == kg.relations.index("directed_by")])
    out = []
    for _ in range(200 * count):
        if len(out) >= count:
            break
        nodes, edges = kg.neighbourhood([int(rng.choice(films))], SLICE_SCOPE)
        if SLICE_EDGES[0] <= len(edges) <= SLICE_EDGES[1]:
            out.append((nodes, edges))
    return out


def slice_questions(kg: KnowledgeGraph, edges: np.ndarray, questions: list[dict]) -> list[dict]:
    """The ``questions`` (:func:`metaqa_sample` records) a slice holds: a topic named by exactly one node of the KB,
    inside the slice, whose question type's chain reaches an answer in the slice; their ``answers`` are what the
    chain reaches there (the topic itself excepted, as MetaQA's answers)."""
    part = KnowledgeGraph(kg.entities, kg.relations, kg.heads[edges], kg.rels[edges], kg.tails[edges])
    inside = part.degree > 0
    rows: dict[str, list[int]] = {}
    for i, e in enumerate(kg.entities):
        rows.setdefault(e.lower(), []).append(i)
    out = []
    for q in questions:
        topic = rows.get(q["topic"].lower(), [])
        if len(topic) != 1 or not inside[topic[0]]:
            continue
        reached = reach(part, topic[0], qtype_path(q["qtype"], kg.relations))
        gold = sorted({kg.entities[r] for r in reached.tolist() if r != topic[0]})
        if gold:
            out.append({**q, "answers": gold})
    return out


def metaqa_slice_family(split: str, num_slices: int = 4, per_slice: int = 60, seed: int = 0
                        ) -> tuple[list[dict], dict]:
    """``num_slices`` slices with ``per_slice`` of their questions each (a seeded draw, the hop counts in turn):
    ``(questions with their ``graph`` spec, {spec: triples})``."""
    kg = ChatIndex.build(load_graph("metaqa")[0]).kg
    everything = metaqa_sample(split, None, seed)
    rng = np.random.default_rng(seed)
    questions, graphs = [], {}
    for k, (nodes, edges) in enumerate(metaqa_slices(kg, num_slices, seed)):
        spec = f"metaqa_slice:{split}:{k}"
        graphs[spec] = [(kg.entities[h], kg.relations[r], kg.entities[t])
                        for h, r, t in zip(kg.heads[edges], kg.rels[edges], kg.tails[edges])]
        held = slice_questions(kg, edges, everything)
        by_hop = [[q for q in held if q["hop"] == h] for h in (1, 2, 3)]
        for group in by_hop:
            rng.shuffle(group)
        picked = [q for trio in zip(*by_hop) for q in trio][:per_slice]
        questions += [{**q, "graph": spec} for q in picked]
    return questions, graphs


def webqsp_mini_family(split: str = "test", num_graphs: int = 300, seed: int = 0) -> tuple[list[dict], dict]:
    """``num_graphs`` WebQSP mini-graphs of ``split`` (the seeded re-split; a seeded sample) and their questions:
    ``([{question, answers, graph, topic}], {spec: graph})``."""
    from gr_core.graphqa import load_dataset  # noqa: PLC0415 deferred: the WebQSP dataset, for these families only

    ds = load_dataset("webqsp")
    ids = ds.split[split]
    pick = sorted(np.random.default_rng(seed).choice(len(ids), min(num_graphs, len(ids)), replace=False).tolist())
    specs = [f"webqsp:{ids[i]}" for i in pick]
    questions = [{"question": ds.records[ids[i]].question, "answers": ds.records[ids[i]].answers, "graph": spec,
                  "topic": (ds.records[ids[i]].q_entities or [""])[0]} for i, spec in zip(pick, specs)]
    return questions, {spec: load_graph(spec)[0] for spec in specs}


def webqsp_union_family(split: str = "test", num_graphs: int = 300, seed: int = 0) -> tuple[list[dict], dict]:
    """:func:`webqsp_mini_family`'s graphs joined :data:`UNION` at a time (in the sample's order) into graphs of
    ``(head, relation, tail)`` names, one fact kept once; each question asked on the union holding its own graph."""
    questions, minis = webqsp_mini_family(split, num_graphs, seed)
    graphs: dict[str, list[tuple]] = {}
    for k in range(0, len(questions), UNION):
        spec = f"webqsp_union:{split}:{k // UNION}"
        facts: dict[tuple, None] = {}
        for q in questions[k:k + UNION]:
            facts.update(dict.fromkeys(minis[q["graph"]].triples()))
            q["graph"] = spec
        graphs[spec] = list(facts)
    return questions, graphs


def webqsp_full_family(num_graphs: int = 0) -> tuple[list[dict], dict]:
    """The 18 complete WebQSP graphs and their questions (the first ``num_graphs``; 0: all)."""
    from gr_core.graphqa import load_dataset  # noqa: PLC0415 deferred: the WebQSP dataset, for these families only

    ds = load_dataset("webqsp_full")
    specs = [f"webqsp_full:{i}" for i in range(min(num_graphs, len(ds)) or len(ds))]
    questions = [{"question": ds.records[i].question, "answers": ds.records[i].answers, "graph": spec,
                  "topic": (ds.records[i].q_entities or [""])[0]} for i, spec in enumerate(specs)]
    return questions, {spec: load_graph(spec)[0] for spec in specs}


def ask_alone(chat: GraphChat, q: dict) -> dict:
    """One question on its own (no history): Hit (a gold among the answer's lines, the papers' metric), Hit@1, the
    turn's seconds, its status and mode."""
    chat.reset()
    t = time.perf_counter()
    turn = chat.ask(q["question"])
    secs = time.perf_counter() - t
    lines = turn.answer.split(" | ") if turn.answer_nodes or turn.mode != "free" else turn.answer
    s = kgqa_scores(lines, q["answers"])
    return {"question": q["question"], "answer": turn.answer, "hit": s["hit"], "hit1": s["hit1"], "turn_s": secs,
            "status": turn.status, "mode": turn.mode, "linked": len(turn.linked)}


def run_systems(systems: dict, questions: list[dict]) -> dict[str, list[dict]]:
    """Each system's rows on the same questions. ``systems``: label -> ``chat(graph spec) -> GraphChat`` (called once
    per graph, on first use)."""
    rows: dict[str, list[dict]] = {}
    for label, make in systems.items():
        out, chats = [], {}
        for q in progress(questions, desc=label):
            if q["graph"] not in chats:
                chats = {q["graph"]: make(q["graph"])}  # one graph's chat at a time: they hold its index
            out.append(ask_alone(chats[q["graph"]], q))
        rows[label] = out
    return rows


def hit_record(label: str, rows: list[dict], **extra) -> dict:
    """``{label, n, hit, ci_low, ci_high, hit1, turn_median_s}`` (percent) of per-question rows."""
    n = len(rows)
    hits = int(sum(r["hit"] for r in rows))
    lo, hi = wilson_interval(hits, n)
    return {"label": label, "n": n, "hit": round(100 * hits / n, 2) if n else None,
            "ci_low": round(100 * lo, 2), "ci_high": round(100 * hi, 2),
            "hit1": round(100 * float(np.mean([r["hit1"] for r in rows])), 2) if n else None,
            "turn_median_s": round(float(np.median([r["turn_s"] for r in rows])), 4) if n else None, **extra}


def paired(label_a: str, rows_a: list[dict], label_b: str, rows_b: list[dict]) -> dict:
    """Exact McNemar on Hit between two systems' rows for the same questions."""
    if [r["question"] for r in rows_a] != [r["question"] for r in rows_b]:
        raise ValueError(f"{label_a} and {label_b} were asked different questions")
    return {"a": label_a, "b": label_b, **compare([r["hit"] for r in rows_a], [r["hit"] for r in rows_b])}


# Two-entity questions written by hand for the MetaQA KB (none is a generator frame): (relation of the first entity,
# relation of the second, then a relation followed from the films both pick, or None), wordings
TWO_ENTITY = (
    (("directed_by", "starred_actors", None), ("which film was directed by {a} and stars {b}",
                                               "what movie starring {b} did {a} direct",
                                               "name a film by director {a} featuring {b}")),
    (("starred_actors", "starred_actors", None), ("which movie features both {a} and {b}",
                                                  "in which film did {a} act with {b}")),
    (("written_by", "starred_actors", None), ("which film written by {a} stars {b}",
                                              "what movie did {a} write that {b} acted in")),
    (("directed_by", "release_year", None), ("which film did {a} direct in {b}", "what movie by {a} came out in {b}")),
    (("starred_actors", "starred_actors", "directed_by"), ("who directed the film starring {a} and {b}",
                                                           "who was the director of the movie with {a} and {b}")),
    (("directed_by", "starred_actors", "release_year"), ("when was the film directed by {a} with {b} released",)),
)


def two_entity_questions(kg: KnowledgeGraph, n: int, seed: int = 0, edges: np.ndarray | None = None) -> list[dict]:
    """``n`` questions naming two entities of the MetaQA KB (or of its part ``edges``), in the wordings of
    :data:`TWO_ENTITY` in turn; the answers are exact by construction: the films related to both (then their relation's
    ends, for a wording that asks one hop further). Entities whose name another node shares are skipped."""
    part = kg if edges is None else KnowledgeGraph(kg.entities, kg.relations, kg.heads[edges], kg.rels[edges],
                                                   kg.tails[edges])
    rid = {r: i for i, r in enumerate(kg.relations)}
    count: dict[str, int] = {}
    for e in kg.entities:
        count[e.lower()] = count.get(e.lower(), 0) + 1
    rng = np.random.default_rng(seed)
    films = np.unique(part.heads[part.rels == rid["directed_by"]])
    out, seen = [], set()
    for attempt in range(200 * n):
        if len(out) >= n or not len(films):
            break
        (ra, rb, then), wordings = TWO_ENTITY[len(out) % len(TWO_ENTITY)]
        film = int(films[rng.integers(len(films))])
        ends = [part.follow(np.array([film]), rid[r]) for r in (ra, rb)]
        if not all(len(e) for e in ends):
            continue
        a, b = (int(e[rng.integers(len(e))]) for e in ends)
        if a == b or (a, b) in seen or any(count[kg.entities[x].lower()] > 1 for x in (a, b)):
            continue
        seen.add((a, b))
        both = np.intersect1d(part.follow(np.array([a]), rid[ra], inverse=True),
                              part.follow(np.array([b]), rid[rb], inverse=True))
        answers = part.follow(both, rid[then]) if then else both
        wording = wordings[attempt % len(wordings)]
        out.append({"question": wording.format(a=kg.entities[a], b=kg.entities[b]),
                    "answers": sorted({kg.entities[x] for x in answers.tolist()}), "topic": kg.entities[a],
                    "second": kg.entities[b], "wording": wording})
    return out


CASES = {"lower": str.lower, "sentence": lambda q: q.lower()[:1].upper() + q.lower()[1:],
         "hyphenless": lambda q: q.replace("-", " ")}


def family_questions(family: str, split: str, size: int, seed: int = 0) -> tuple[list[dict], dict]:
    """:func:`family_of`'s questions; ``FAMILY+lower`` (``+sentence``) asks them typed without capitals (but the
    first letter), as users often type (WebQSP's are lowercase), ``+hyphenless`` with spaces for hyphens."""
    family, _, case = family.partition("+")
    if case and case not in CASES:
        raise ValueError(f"unknown retyping +{case}: use one of {sorted(CASES)}")
    questions, graphs = family_of(family, split, size, seed)
    if case:
        questions = [{**q, "question": CASES[case](q["question"])} for q in questions]
    return questions, graphs


def family_of(family: str, split: str, size: int, seed: int = 0) -> tuple[list[dict], dict]:
    """A family's questions and graphs (module docstring): ``size`` questions per hop count (``metaqa``), per slice of 4
    (``metaqa_slice``), graphs (``webqsp_mini``, ``webqsp_union``, ``webqsp_full``: 0 for all 18); ``two_entity``:
    :func:`two_entity_questions` on the KB; every question carries its ``graph`` spec, ``graphs`` maps a spec to what
    :class:`GraphChat` reads."""
    if family == "metaqa":
        return [{**q, "graph": "metaqa"} for q in metaqa_sample(split, size, seed)], {"metaqa": "metaqa"}
    if family == "metaqa_slice":
        return metaqa_slice_family(split, 4, size, seed)
    if family == "webqsp_mini":
        return webqsp_mini_family(split, size, seed)
    if family == "webqsp_union":
        return webqsp_union_family(split, size, seed)
    if family == "webqsp_full":
        return webqsp_full_family(size)
    if family == "two_entity":
        kg = ChatIndex.build(load_graph("metaqa")[0]).kg
        return ([{**q, "graph": "metaqa"} for q in two_entity_questions(kg, size, seed + (split == "test"))],
                {"metaqa": "metaqa"})
    raise ValueError(f"unknown family {family!r}: use one of {FAMILIES + ('two_entity',)}, with "
                     f"{' or '.join('+' + c for c in CASES)} for a retyping")


def served_h1(chats: list, meta: dict, limit: int = 300) -> dict:
    """A trained reasoner's held-out generated questions (the epoch-choosing ones, saved in its ``meta``) asked
    through the chat's turn with the reasoner (``chats[k]`` answers graph ``k``'s): H@1 as served, with its interval,
    beside the trainer's own H@1 on them (one scope for training and serving: they should agree within noise)."""
    hits = []
    for q in meta.get("val_questions", [])[:limit]:
        chat = chats[q["graph"]]
        chat.reset()
        first = chat.index.rows_of(chat.ask(q["question"], mode="reasoner").answer_nodes[:1])
        hits.append(float(bool(first) and first[0] in q["answers"]))
    chats[0].reset()
    lo, hi = wilson_interval(sum(hits), len(hits))
    return {"n": len(hits), "served_h1": round(100 * float(np.mean(hits)), 2) if hits else None,
            "ci_low": round(100 * lo, 2), "ci_high": round(100 * hi, 2), "trained_h1": meta.get("val_h1")}


def family_study(family: str, split: str, size: int, seed: int = 0, reasoner_cfg=None, llm: bool = False) -> dict:
    """The chat on one family's questions, each asked alone: the default (``GraphChat(graph)``), ``train_reasoner``
    (a reasoner trained on the graph's generated questions, served where :meth:`GraphChat.decide` chooses it; on
    ``webqsp_mini``, whose graphs are too small alone, one reasoner for all of the family's graphs and one decision over
    them, :func:`~gr_core.chat.conversation.decide`), that reasoner served whatever the decision, and with ``llm``
    the LLM ranking PCST's evidence (``answer_mode="ranked"``, the embedded LLM zero-shot). Returns records, exact
    McNemar pairs against the default, per-question rows, the decisions, the reasoners' training records and their
    held-out H@1 as served against as trained (:func:`served_h1`)."""
    from gr_core.chat import GraphReasonerConfig, train_graph_reasoner, training_record  # noqa: PLC0415 deferred: the chat's training, for this study only
    from gr_core.chat.conversation import decide  # noqa: PLC0415
    from gr_core.gnn_rag import load_reasoner, reasoner_meta  # noqa: PLC0415

    questions, graphs = family_questions(family, split, size, seed)
    cfg = reasoner_cfg or GraphReasonerConfig()
    trained: dict[str, GraphChat] = {}
    decisions, training, consistency = {}, {}, {}
    if family == "webqsp_mini":
        specs = list(graphs)
        path = train_graph_reasoner([ChatIndex.build(graphs[s]) for s in specs], cfg, verbose=False)
        reasoner = load_reasoner(path)
        chats = [GraphChat(graphs[s], model="zero_shot", reasoner=reasoner) for s in specs]
        meta = reasoner_meta(path)
        decisions["all graphs"], training["all graphs"] = decide(chats, meta), training_record(path)
        consistency["all graphs"] = served_h1(chats, meta)
        for s, chat in zip(specs, chats):
            chat.decision, chat.reasoner_path = decisions["all graphs"], str(path)
            trained[s] = chat

    def with_reasoner(spec: str) -> GraphChat:
        if spec not in trained:
            chat = GraphChat(graphs[spec], model="zero_shot", train_reasoner=cfg)
            decisions[spec] = chat.decision
            training[spec] = training_record(chat.trained_reasoner) if chat.trained_reasoner else None
            if chat.trained_reasoner:
                consistency[spec] = served_h1([chat], reasoner_meta(chat.trained_reasoner))
            trained[spec] = chat
        return trained[spec]

    def forced(spec: str) -> GraphChat:
        chat = with_reasoner(spec)
        return GraphChat(graphs[spec], model="zero_shot", reasoner=chat.reasoner) if chat.reasoner else chat

    systems = {"default": lambda spec: GraphChat(graphs[spec], model="zero_shot"), "train_reasoner": with_reasoner,
               "reasoner, whatever the decision": forced}
    if llm:
        first: list[GraphChat] = []

        def ranked(spec: str) -> GraphChat:
            chat = GraphChat(graphs[spec], model="zero_shot", answer_mode="ranked")
            chat.reuse_model(first[0]) if first else first.append(chat)  # one LLM in memory for every graph
            return chat

        systems["LLM ranking (PCST evidence)"] = ranked
    rows = run_systems(systems, questions)
    return {"family": family, "split": split, "size": size, "seed": seed,
            "records": [hit_record(label, r, family=family) for label, r in rows.items()],
            "pairs": [paired(label, r, "default", rows["default"]) for label, r in rows.items() if label != "default"],
            "decisions": decisions, "training": training, "served_vs_trained": consistency,
            "per_question": {label: [{k: r[k] for k in ("question", "answer", "hit", "hit1", "turn_s")} for r in rr]
                             for label, rr in rows.items()}}


def main() -> None:
    p = argparse.ArgumentParser(prog="python bench/chat_families.py", description=__doc__.split("\n")[0])
    p.add_argument("--family", required=True, help=f"one of {FAMILIES + ('two_entity',)}, "
                   f"{', '.join('+' + c for c in CASES)}: its questions typed without capitals (but the first "
                   "letter) or hyphens")
    p.add_argument("--split", default="test", help="dev or test (metaqa), val or test (webqsp_mini, webqsp_union)")
    p.add_argument("--size", type=int, default=300,
                   help="questions per hop count / per slice / graphs (webqsp_full: 0 or more than 18 for all 18)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--llm", action="store_true", help="also the LLM ranking PCST's evidence (slow)")
    p.add_argument("--before", nargs="+", default=[],
                   help="earlier commits' answers to the same questions (JSON files with per_question and commit)")
    args = p.parse_args()
    result = family_study(args.family, args.split, args.size, args.seed, llm=args.llm)
    asked = [r["question"] for r in result["per_question"]["default"]]
    for before in (json.load(open(path)) for path in args.before):
        for label, rows in before["per_question"].items():
            name = f"{label} (before: {before.get('commit', 'earlier')})"
            by_text = {r["question"]: r for r in rows}  # the questions of this run, where it asked fewer
            result["per_question"][name] = rows = [by_text[t] for t in asked]
            result["pairs"] += [paired(mine, result["per_question"][mine], name, rows)
                                for mine in ("default", "train_reasoner")]
    split = "" if args.family == "webqsp_full" else f"_{args.split}"
    print("wrote", write_result(f"chat/{args.family}{split}", result))
    for r in result["records"]:
        print(f"  {r['label']}: Hit {r['hit']} [{r['ci_low']}, {r['ci_high']}] n {r['n']}, turn {r['turn_median_s']} s")


if __name__ == "__main__":
    main()
