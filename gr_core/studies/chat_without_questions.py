"""The chat on a graph that comes without questions (docs/chat.md, "Chat without training questions").

Measured with none of a benchmark's questions in training:

- **MetaQA**: a reasoner trained only on questions generated from the 133k-triple KB
  (:func:`gr_core.chat.graph_reasoner.train_graph_reasoner`), the training-free path ranker (``answer_mode="paths"``,
  with either ``path_scorer``), the PCST-ranked chat (the LLM ranks the evidence's node names: the chat's default
  without a reasoner) and the question-trained reasoner, on the same real MetaQA test questions (``per_hop`` per hop
  count, seeded sample), paired;
- **WebQSP**: one reasoner trained on questions generated from the test mini-graphs themselves (a user's graphs, not
  their questions), tested on those graphs' real questions, paired with the path ranker, the PCST-ranked chat and the
  reasoner trained on WebQSP's training questions;
- **nodes that name nothing**: WebQSP answers named by a Freebase mid (a mediator node) left out, the default, or kept
  (``answer_unnamed``), checked on validation graphs, then once on test (:func:`unnamed_answers_study`); the LLM
  ranking's LLM and settings on WebQSP: :mod:`gr_core.studies.chat_ranking`;
- **two entities**: questions built from the KB that name a director and an actor ("which film directed by X stars
  Y?"), exact answers by construction, in wordings the generator's templates do not use;
- **misses** split by hop count, question type, whether a gold answer is reachable within the searched hops, and how
  far the question's wording is from every relation name;
- the path ranker's settings, each chosen on MetaQA's dev questions, never on test: :mod:`gr_core.studies.path_scoring`,
  :mod:`gr_core.studies.path_ranker_settings` (the word fit also measured there once on test against its first version).
"""
from __future__ import annotations

import re
import time
from dataclasses import replace

import numpy as np

from ..chat import ChatIndex, GraphChat, load_graph
from ..chat.graph_reasoner import train_graph_reasoner, training_record
from ..chat.index import name_key
from ..evaluate import kgqa_scores
from ..gnn_rag import load_reasoner
from ..graphqa import load_dataset
from ..kg import NeighbourhoodConfig, is_identifier
from ..paths import data_file
from ..runs import progress
from ..stats import compare, wilson_interval

BRACKETS = re.compile(r"\[([^\]]+)\]")


def metaqa_sample(split: str = "test", per_hop: int = 300, seed: int = 0, hops=(1, 2, 3)) -> list[dict]:
    """A seeded sample of MetaQA questions, ``per_hop`` per hop count, asked as a user writes them (the ``[topic]``
    brackets removed): ``{hop, line, question, topic, answers, qtype}``."""

    rng = np.random.default_rng(seed)
    out = []
    for hop in hops:
        lines = data_file("metaqa", f"{hop}-hop", f"qa_{split}.txt").read_text(encoding="utf-8").splitlines()
        qtype_file = data_file("metaqa", f"{hop}-hop", f"qa_{split}_qtype.txt")
        qtypes = qtype_file.read_text(encoding="utf-8").splitlines() if qtype_file.is_file() else []
        for i in sorted(rng.choice(len(lines), min(per_hop, len(lines)), replace=False).tolist()):
            q, answers = lines[i].split("\t")
            out.append({"hop": hop, "line": i + 1, "question": BRACKETS.sub(r"\1", q),
                        "topic": BRACKETS.search(q).group(1), "answers": answers.split("|"),
                        "qtype": qtypes[i].strip() if i < len(qtypes) else ""})
    return out


def ask_alone(chat: GraphChat, q: dict) -> dict:
    """One question on its own (no history): Hit (a gold among the answer's lines, the papers' metric), Hit@1, whether
    a gold is a node of the evidence, whether the answer names a node, the turn's seconds and the best relation
    similarity (how close the wording is to some relation name)."""
    chat.reset()
    t = time.perf_counter()
    turn = chat.ask(q["question"])
    secs = time.perf_counter() - t
    gold = {a.lower() for a in q["answers"]}
    ev = {str(a).lower() for a in turn.evidence.nodes.node_attr} if turn.evidence is not None else set()
    lines = turn.answer.split(" | ") if turn.mode in ("ranked", "reasoner", "paths") else turn.answer
    s = kgqa_scores(lines, q["answers"])
    return {"question": q["question"], "answer": turn.answer, "hit": s["hit"], "hit1": s["hit1"],
            "in_evidence": bool(gold & ev), "node_answer": bool(turn.answer_nodes), "turn_s": secs,
            "status": turn.status, "mode": turn.mode, "linked": len(turn.linked),
            "relation_similarity": turn.best_relation_similarity}


def hit_record(label: str, rows: list[dict], **extra) -> dict:
    """``{label, n, hit, hit_ci, hit1, in_evidence, node_answer_share, turn_median_s}`` of per-question rows (None
    for a field the rows do not all have: committed rows keep only question, answer and hit)."""
    n = len(rows)
    hits = int(sum(r["hit"] for r in rows))
    lo, hi = wilson_interval(hits, n)

    def over(key: str, reduce, scale: float, digits: int):
        return round(scale * float(reduce([r[key] for r in rows])), digits) if n and all(key in r for r in rows) \
            else None

    return {"label": label, "n": n, "hit": round(100 * hits / n, 2) if n else None,
            "ci_low": round(100 * lo, 2), "ci_high": round(100 * hi, 2), "hit1": over("hit1", np.mean, 100, 2),
            "node_answer_share": over("node_answer", np.mean, 1, 4), "turn_median_s": over("turn_s", np.median, 1, 4),
            **extra}


def paired(label_a: str, rows_a: list[dict], label_b: str, rows_b: list[dict]) -> dict:
    """Exact McNemar on Hit between two systems' rows for the same questions."""
    if [r["question"] for r in rows_a] != [r["question"] for r in rows_b]:
        raise ValueError(f"{label_a} and {label_b} were asked different questions")
    return {"a": label_a, "b": label_b, **compare([r["hit"] for r in rows_a], [r["hit"] for r in rows_b])}


def gold_distance(kg, topic_rows: list[int], answers: list[str], max_hops: int = 3) -> int | None:
    """The fewest hops (any direction) from the topic to a gold answer in the whole KB, None beyond ``max_hops``."""
    gold = {a.lower() for a in answers}
    seen = np.zeros(kg.num_entities, bool)
    frontier = np.unique(np.asarray(topic_rows, np.int64))
    if len(frontier) == 0:
        return None
    seen[frontier] = True
    for hop in range(1, max_hops + 1):
        nbrs, _ = kg._gather(frontier)
        frontier = np.unique(nbrs[~seen[nbrs]])
        if len(frontier) == 0:
            return None
        seen[frontier] = True
        if any(kg.entities[n].lower() in gold for n in frontier.tolist()):
            return hop
    return None


def miss_breakdown(questions: list[dict], rows: list[dict], kg, index, searched_hops: int,
                   far_quantile: float = 0.25) -> dict:
    """Hit split by hop count, question type, whether a gold is reachable within ``searched_hops`` of the linked
    topic, and whether the wording is far from every relation name (best relation similarity in the lowest
    ``far_quantile`` of the sample)."""
    sims = np.array([r["relation_similarity"] if r["relation_similarity"] is not None else np.nan for r in rows])
    cut = float(np.nanquantile(sims, far_quantile)) if np.isfinite(sims).any() else float("nan")
    table: dict[str, dict] = {}

    def add(group: str, value: str, hit: float) -> None:
        cell = table.setdefault(group, {}).setdefault(value, {"n": 0, "hits": 0})
        cell["n"] += 1
        cell["hits"] += int(hit)

    for q, r, s in zip(questions, rows, sims):
        topic = index.names.get(name_key(q["topic"]), [])
        dist = gold_distance(kg, topic, q["answers"], max(searched_hops, 3))
        add("hop", str(q.get("hop", "")), r["hit"])
        if q.get("qtype"):
            add("qtype", q["qtype"], r["hit"])
        add("gold_within_searched_hops", str(dist is not None and dist <= searched_hops), r["hit"])
        add("wording_far_from_relations", str(bool(np.isfinite(s) and s <= cut)), r["hit"])
    return {"relation_similarity_cut": round(cut, 4),
            "groups": {g: {v: {**c, "hit": round(100 * c["hits"] / c["n"], 1)} for v, c in sorted(vals.items())}
                       for g, vals in table.items()}}


def run_systems(systems: dict, questions: list[dict], graph_of=None) -> dict[str, list[dict]]:
    """Each system's rows on the same questions. ``systems``: label -> a :class:`GraphChat`, or a function of a graph
    spec returning one (``graph_of(q)`` names each question's graph: one chat per graph, built on first use)."""
    rows: dict[str, list[dict]] = {}
    for label, system in systems.items():
        out, chats = [], {}
        for q in progress(questions, desc=label):
            one = isinstance(system, GraphChat) or not callable(system)
            chat = system if one else chats.get(graph_of(q)) or chats.setdefault(graph_of(q), system(graph_of(q)))
            out.append(ask_alone(chat, q))
        rows[label] = out
    return rows


def study_result(graph: str, rows: dict[str, list[dict]], questions: list[dict], reference: str, trained: str,
                 reasoner_path, baseline: str) -> dict:
    """Records per system, every system paired with ``baseline`` (the chat without a reasoner) and with ``reference``
    (the question-trained reasoner), and the ``generated_reasoner`` row of ``trained``."""
    records = [hit_record(label, r, graph=graph) for label, r in rows.items()]
    pairs = [paired(a, rows[a], b, rows[b]) for a in rows for b in (baseline, reference)
             if b in rows and a not in (b, baseline)]
    main = next(r for r in records if r["label"] == trained)
    vs = {p["b"]: p for p in pairs if p["a"] == trained}
    row = {"graph": graph, "n": main["n"], "hit": main["hit"], "ci_low": main["ci_low"], "ci_high": main["ci_high"],
           "p_vs_ranked": vs.get(baseline, {}).get("p"), "p_vs_question_trained": vs.get(reference, {}).get("p"),
           **training_record(reasoner_path)}
    by_hop = {label: hop_records(label, r, questions) for label, r in rows.items()}
    return {"records": records, "pairs": pairs, "generated_reasoner": row, "by_hop": by_hop}


def hop_records(label: str, rows: list[dict], questions: list[dict]) -> dict:
    """:func:`hit_record` of ``rows`` per hop count of ``questions`` (none when the questions have no hop)."""
    return {str(h): hit_record(f"{label}, {h}-hop", [r for r, q in zip(rows, questions) if q.get("hop") == h])
            for h in sorted({q["hop"] for q in questions if q.get("hop") is not None})}


def subset(rows: dict[str, list[dict]], keep: list[bool]) -> dict[str, list[dict]]:
    """Every system's rows on the questions marked in ``keep``."""
    return {label: [x for x, k in zip(r, keep) if k] for label, r in rows.items()}


GENERATED = "reasoner trained on generated questions"
PATHS = "path ranker (no training)"
COVERAGE = "path ranker, word coverage (no training)"
RANKED = "PCST + LLM ranking (the chat without a reasoner)"
QUESTION_TRAINED = "reasoner trained on the benchmark's questions"
GENERATED_UNNAMED = "reasoner trained on generated questions, unnamed nodes answered too"
GENERATED_OTHER = "reasoner trained on questions generated {} identifier-named topics and answers"


def metaqa_study(reasoner_cfg, per_hop: int = 300, llm_per_hop: int = 300, seed: int = 0,
                 question_reasoner=None, llm_model: str = "embedded:smollm2-135m-instruct") -> dict:
    """The MetaQA part of the module docstring: the generated reasoner (trained, or loaded from its cache), the path
    ranker, the question-trained reasoner (when ``question_reasoner`` is a file) on ``per_hop`` test questions per hop
    count; the PCST + LLM chat on the first ``llm_per_hop`` of each (the pairs with it use those questions)."""

    kb, kind, _ = load_graph("metaqa")
    ranked = GraphChat(kb, model="zero_shot", llm_model=llm_model, kind=kind, retriever="pcst",
                       answer_mode="ranked")
    t0 = time.perf_counter()
    path = train_graph_reasoner(ranked.index, reasoner_cfg)
    wall = time.perf_counter() - t0
    questions = metaqa_sample("test", per_hop, seed)
    systems = {GENERATED: GraphChat(kb, kind=kind, reasoner=path, retriever="gnn"),
               PATHS: GraphChat(kb, kind=kind, retriever="pcst", answer_mode="paths", path_scorer="sentence"),
               COVERAGE: GraphChat(kb, kind=kind, retriever="pcst", answer_mode="paths", path_scorer="coverage")}
    if question_reasoner is not None:
        systems[QUESTION_TRAINED] = GraphChat(kb, kind=kind, reasoner=question_reasoner, retriever="gnn")
    rows = run_systems(systems, questions)
    rank_of = {}
    for q in questions:
        rank_of.setdefault(q["hop"], []).append(q["line"])
    keep = [q["line"] in rank_of[q["hop"]][:llm_per_hop] for q in questions]
    llm_questions = [q for q, k in zip(questions, keep) if k]
    ranked_rows = run_systems({RANKED: ranked}, llm_questions)[RANKED] if llm_per_hop else []
    everything = study_result("metaqa", rows, questions, QUESTION_TRAINED, GENERATED, path, PATHS)
    everything["pairs"].append(paired(GENERATED, rows[GENERATED], COVERAGE, rows[COVERAGE]))
    everything["generated_reasoner"]["p_vs_ranked"] = None
    if ranked_rows:  # the LLM's pairs on the questions it answered
        on_them = subset(rows, keep)
        pairs = [paired(a, on_them[a], RANKED, ranked_rows) for a in rows]
        everything["pairs"] += pairs
        everything["records"].append(hit_record(RANKED, ranked_rows, graph="metaqa"))
        everything["by_hop"][RANKED] = hop_records(RANKED, ranked_rows, llm_questions)
        everything["generated_reasoner"]["p_vs_ranked"] = next(p["p"] for p in pairs if p["a"] == GENERATED)
        everything["generated_reasoner"]["n_vs_ranked"] = len(llm_questions)
    everything["generated_reasoner"]["p_vs_paths"] = next(
        (p["p"] for p in everything["pairs"] if p["a"] == GENERATED and p["b"] == PATHS), None)
    everything["generated_reasoner"]["call_seconds"] = round(wall, 1) if wall >= 1.0 else None  # None: from its cache
    # the hops each system searches: a reasoner the chat's neighbourhood, the path ranker its own path length
    searched = {label: chat.config.path_hops if chat.config.mode == "paths" else chat.config.hops
                for label, chat in systems.items()}
    everything["misses"] = {label: miss_breakdown(questions, r, ranked.index.kg, ranked.index, searched[label])
                            for label, r in rows.items()}
    everything["questions"] = {"split": "test", "per_hop": per_hop, "llm_per_hop": llm_per_hop, "seed": seed}
    everything["per_question"] = {label: [{k: r[k] for k in ("question", "answer", "hit")} for r in rr]
                                  for label, rr in {**rows, **({RANKED: ranked_rows} if ranked_rows else {})}.items()}
    return everything


def webqsp_sample(num_graphs: int = 300, seed: int = 0, split: str = "test") -> tuple[list[dict], dict]:
    """``num_graphs`` WebQSP mini-graphs of ``split`` (seeded sample) and their questions: ``([{question, answers,
    graph, topic}], {graph spec: its triples})``."""
    ds = load_dataset("webqsp")
    test = ds.split[split]
    pick = sorted(np.random.default_rng(seed).choice(len(test), min(num_graphs, len(test)), replace=False).tolist())
    specs = [f"webqsp:{test[i]}" for i in pick]
    questions = [{"question": ds.records[test[i]].question, "answers": ds.records[test[i]].answers, "graph": spec,
                  "topic": (ds.records[test[i]].q_entities or [""])[0]} for i, spec in zip(pick, specs)]
    return questions, {spec: load_graph(spec)[0] for spec in specs}


def with_committed(rows: dict[str, list[dict]], questions: list[dict], committed: dict) -> dict[str, list[dict]]:
    """``rows`` and, for each system of an earlier study's ``per_question`` rows that answered every one of
    ``questions`` (matched by question text; each question once), those rows in the same order, labelled
    ``<system> (committed)``: the same questions answered by the code of that run, paired without rerunning it."""
    order = [q["question"] for q in questions]
    out = dict(rows)
    if len(set(order)) != len(order):
        return out
    for label, earlier in committed.get("per_question", {}).items():
        by_text = {r["question"]: r for r in earlier}
        if label not in rows and all(t in by_text for t in order):
            out[f"{label} (committed)"] = [by_text[t] for t in order]
    return out


def pair_with_committed(result: dict, committed: dict) -> dict:
    """``result``'s generated reasoner paired, on the same questions (by text), with each system of an earlier run
    (``committed``) that ``result`` did not run (``<label> (committed)``, its answers carried into ``per_question``:
    the question-trained reasoner when its weights are gone) and with that run's generated reasoner (``<label>
    (previous run)``: what changed, if anything did); ``result``'s ``pairs`` and ``generated_reasoner`` gain them."""
    mine, row = result["per_question"][GENERATED], result["generated_reasoner"]
    texts = [r["question"] for r in mine]
    for label, rows in committed.get("per_question", {}).items():
        label, by_text = label.removesuffix(" (committed)"), {r["question"]: r for r in rows}
        ran = label != GENERATED and {label, f"{label} (committed)"} & result["per_question"].keys()
        if ran or len(set(texts)) != len(texts) or not all(t in by_text for t in texts):
            continue
        name, other = f"{label} ({'previous run' if label == GENERATED else 'committed'})", [by_text[t] for t in texts]
        result["pairs"].append(pair := paired(GENERATED, mine, name, other))
        if label == GENERATED:
            row["previous_hit"], row["p_vs_previous"] = round(100 * pair["score_b"], 2), pair["p"]
            continue
        result["per_question"][name] = other  # carried forward: a later run without the weights pairs with them too
        key = {QUESTION_TRAINED: "p_vs_question_trained", RANKED: "p_vs_ranked"}.get(label)
        if key and row.get(key) is None:  # the LLM ranking's committed answers when it was not rerun
            row.update({key: pair["p"]} | ({"n_vs_ranked": pair["n"]} if label == RANKED else {}))
    return result


def webqsp_study(reasoner_cfg, num_graphs: int = 300, seed: int = 0, question_reasoner=None,
                 llm_model: str = "embedded:smollm2-135m-instruct", llm: bool = True, committed: dict | None = None,
                 split: str = "test", generation_pair: bool = False) -> dict:
    """The WebQSP part of the module docstring on ``num_graphs`` test mini-graphs (seeded sample): one reasoner trained
    on questions generated from those graphs, tested on their real questions (answering named nodes only, the default,
    and unnamed ones too), beside the path ranker, the PCST + LLM chat and the question-trained reasoner
    (``question_reasoner``; without it, its answers in an earlier run of this study, ``committed``, when they cover
    these questions: :func:`with_committed`). ``split``: test, or val to choose on. ``generation_pair``: also a
    reasoner trained on questions generated the other way round for identifier-named nodes (``GenerationConfig.
    unnamed`` flipped: as topics and answers, or left out), paired with the default one."""

    questions, graphs = webqsp_sample(num_graphs, seed, split)
    specs = list(graphs)
    base = {spec: GraphChat(g, model="zero_shot", llm_model=llm_model, kind="kg", retriever="pcst",
                            answer_mode="ranked") for spec, g in graphs.items()}
    t0 = time.perf_counter()
    path = train_graph_reasoner([c.index for c in base.values()], reasoner_cfg)
    wall = time.perf_counter() - t0
    first = next(iter(base.values()))
    for chat in base.values():
        if llm and chat is not first:
            chat.reuse_model(first)  # one LLM for every graph

    generated = load_reasoner(path)  # loaded once, not once a graph
    if generation_pair:
        flipped = not reasoner_cfg.generation.unnamed
        other_label = GENERATED_OTHER.format("with" if flipped else "without")
        other_cfg = replace(reasoner_cfg, generation=replace(reasoner_cfg.generation, unnamed=flipped))
        other = load_reasoner(train_graph_reasoner([c.index for c in base.values()], other_cfg))
    systems = {GENERATED: lambda spec: GraphChat(graphs[spec], kind="kg", reasoner=generated, retriever="gnn"),
               GENERATED_UNNAMED: lambda spec: GraphChat(graphs[spec], kind="kg", reasoner=generated, retriever="gnn",
                                                         answer_unnamed=True),
               PATHS: lambda spec: GraphChat(graphs[spec], kind="kg", retriever="pcst", answer_mode="paths",
                                             path_scorer="sentence"),
               COVERAGE: lambda spec: GraphChat(graphs[spec], kind="kg", retriever="pcst", answer_mode="paths",
                                                path_scorer="coverage")}
    if generation_pair:
        systems[other_label] = lambda spec: GraphChat(graphs[spec], kind="kg", reasoner=other, retriever="gnn")
    if question_reasoner is not None:
        reference = load_reasoner(question_reasoner)
        systems[QUESTION_TRAINED] = lambda spec: GraphChat(graphs[spec], kind="kg", reasoner=reference,
                                                           retriever="gnn")
    if llm:
        systems[RANKED] = base.__getitem__
    rows = run_systems(systems, questions, graph_of=lambda q: q["graph"])
    reference = QUESTION_TRAINED
    if question_reasoner is None and committed:
        earlier = {k.removesuffix(" (committed)"): v for k, v in committed["per_question"].items()}
        rows = with_committed(rows, questions, {"per_question": {k: v for k, v in earlier.items()
                                                                 if k == QUESTION_TRAINED}})
        reference = next((label for label in rows if label.startswith(QUESTION_TRAINED)), QUESTION_TRAINED)
    out = study_result("webqsp", rows, questions, reference, GENERATED, path, RANKED if llm else PATHS)
    out["pairs"] += [paired(GENERATED, rows[GENERATED], b, rows[b]) for b in rows
                     if b == GENERATED_UNNAMED or b.startswith(GENERATED_OTHER.split("{}")[0])]
    if llm:  # the pairs with the path rankers are not among the baseline's
        out["pairs"] += [paired(a, rows[a], b, rows[b]) for a, b in ((GENERATED, PATHS), (COVERAGE, PATHS))]
    out["pairs"].append(paired(GENERATED, rows[GENERATED], COVERAGE, rows[COVERAGE]))
    out["generated_reasoner"]["p_vs_paths"] = next(
        (p["p"] for p in out["pairs"] if p["a"] == GENERATED and p["b"] == PATHS), None)
    out["generated_reasoner"]["call_seconds"] = round(wall, 1) if wall >= 1.0 else None  # None: from its cache
    out["questions"] = {"graphs": f"webqsp {split} mini-graphs", "num_graphs": len(specs), "seed": seed}
    out["per_question"] = {label: [{k: r[k] for k in ("question", "answer", "hit")} for r in rr]
                           for label, rr in rows.items()}
    return out


# Wordings of two-entity questions, none of them a generator template (module docstring)
TWO_ENTITY_WORDINGS = ("which film was directed by {a} and stars {b}", "what movie starring {b} did {a} direct",
                       "name a film by director {a} featuring {b}")


def two_entity_questions(kg, n: int = 200, seed: int = 0) -> list[dict]:
    """``n`` questions naming a director and an actor of the MetaQA KB, answers = every film with both (exact by
    construction); directors and actors whose name is shared by another node or is a common word are skipped."""
    rng = np.random.default_rng(seed)
    rel = {r: i for i, r in enumerate(kg.relations)}
    d_rel, a_rel = rel["directed_by"], rel["starred_actors"]
    by_film: dict[int, tuple[set, set]] = {}
    for h, r, t in zip(kg.heads.tolist(), kg.rels.tolist(), kg.tails.tolist()):
        if r in (d_rel, a_rel):
            by_film.setdefault(h, (set(), set()))[0 if r == d_rel else 1].add(t)
    films = [f for f, (d, a) in by_film.items() if d and a]
    counts: dict[str, int] = {}
    for e in kg.entities:
        counts[e.lower()] = counts.get(e.lower(), 0) + 1
    out, seen = [], set()
    for _ in range(50 * n):
        if len(out) >= n:
            break
        film = films[int(rng.integers(len(films)))]
        d = sorted(by_film[film][0])[int(rng.integers(len(by_film[film][0])))]
        a = sorted(by_film[film][1])[int(rng.integers(len(by_film[film][1])))]
        names = kg.entities[d], kg.entities[a]
        if (d, a) in seen or d == a or any(counts[x.lower()] > 1 or len(x.split()) < 2 for x in names):
            continue
        seen.add((d, a))
        answers = sorted({kg.entities[f] for f, (ds, as_) in by_film.items() if d in ds and a in as_})
        wording = TWO_ENTITY_WORDINGS[len(out) % len(TWO_ENTITY_WORDINGS)]
        out.append({"question": wording.format(a=names[0], b=names[1]), "answers": answers, "topic": names[0],
                    "second": names[1], "wording": wording})
    return out


def two_entity_study(n: int = 200, seed: int = 0, generated_reasoner=None) -> dict:
    """Hit on :func:`two_entity_questions` for the path ranker with and without the intersection (sentence scorer),
    with the intersection under the coverage scorer (the two paths' steps scored together on the question's words),
    and the generated reasoner (both entities as its seeds) when given; paired against the sentence intersection."""

    kb, kind, _ = load_graph("metaqa")
    # the reference: the sentence scorer, as when these were first measured (docs/chat.md)
    inter = GraphChat(kb, kind=kind, retriever="pcst", answer_mode="paths", path_scorer="sentence")
    questions = two_entity_questions(inter.index.kg, n, seed)
    systems = {"path ranker, intersection of the two entities' paths": inter,
               "path ranker, best single path": GraphChat(kb, kind=kind, retriever="pcst", answer_mode="paths",
                                                          path_scorer="sentence", path_intersect=False),
               "path ranker (word coverage), intersection, the pair scored together": GraphChat(
                   kb, kind=kind, retriever="pcst", answer_mode="paths", path_scorer="coverage")}
    if generated_reasoner is not None:
        systems[GENERATED + " (both entities as seeds)"] = GraphChat(kb, kind=kind, reasoner=generated_reasoner,
                                                                     retriever="gnn")
    rows = run_systems(systems, questions)
    first = next(iter(rows))
    linked_both = [r["linked"] >= 2 for r in rows[first]]
    return {"records": [hit_record(label, r, graph="metaqa two-entity (constructed)") for label, r in rows.items()],
            "pairs": [paired(a, rows[a], first, rows[first]) for a in rows if a != first],
            "both_entities_linked": round(float(np.mean(linked_both)), 4),
            "questions": {"n": len(questions), "seed": seed, "wordings": list(TWO_ENTITY_WORDINGS),
                          "mean_answers": round(float(np.mean([len(q["answers"]) for q in questions])), 2)},
            "per_question": {label: [{k: r[k] for k in ("question", "answer", "hit")} for r in rr]
                             for label, rr in rows.items()}}


def ranked_chats(graphs: dict, llm_model: str):
    """``chat(spec, **config) -> GraphChat``: the PCST + LLM-ranking chat on ``graphs[spec]``, every chat sharing the
    LLM loaded by the first (one model in memory for hundreds of mini-graphs)."""
    first: list[GraphChat] = []

    def chat(spec: str, **config) -> GraphChat:
        out = GraphChat(graphs[spec], model="zero_shot", llm_model=llm_model, kind="kg", retriever="pcst",
                        answer_mode="ranked", **config)
        if first:
            out.reuse_model(first[0])
        else:
            first.append(out)
        return out

    return chat


def unnamed_answers_study(split: str = "val", num_graphs: int = 200, seed: int = 0,
                          llm_model: str = "embedded:smollm2-135m-instruct") -> dict:
    """Answers named by identifiers (a Freebase mid names a WebQSP mediator node, never a user's answer) on
    ``num_graphs`` WebQSP mini-graphs of ``split``: the path ranker and the LLM ranking, each leaving such nodes out
    (the chat's default) and keeping them (``answer_unnamed=True``), paired on the same questions."""

    questions, graphs = webqsp_sample(num_graphs, seed, split)
    ranked = ranked_chats(graphs, llm_model)
    labels = {False: "named nodes only (the default)", True: "unnamed nodes too"}
    systems = {f"path ranker, {labels[u]}": lambda spec, u=u: GraphChat(graphs[spec], kind="kg", retriever="pcst",
                                                                          answer_mode="paths", answer_unnamed=u)
               for u in (False, True)}
    systems |= {f"PCST + LLM ranking, {labels[u]}": lambda spec, u=u: ranked(spec, answer_unnamed=u)
                for u in (False, True)}
    rows = run_systems(systems, questions, graph_of=lambda q: q["graph"])
    names = list(rows)
    unnamed_share = {label: round(float(np.mean([bool(r["answer"]) and all(
        is_identifier(a) for a in r["answer"].split(" | ")) for r in rr])), 4) for label, rr in rows.items()}
    return {"records": [hit_record(label, r, graph=f"webqsp {split}") for label, r in rows.items()],
            "pairs": [paired(names[0], rows[names[0]], names[1], rows[names[1]]),
                      paired(names[2], rows[names[2]], names[3], rows[names[3]]),
                      paired(names[0], rows[names[0]], names[2], rows[names[2]])],
            "answers_all_unnamed": unnamed_share,
            "questions": {"graphs": f"webqsp {split} mini-graphs", "num_graphs": len(graphs), "seed": seed},
            "per_question": {label: [{k: r[k] for k in ("question", "answer", "hit")} for r in rr]
                             for label, rr in rows.items()}}


def cost_study(max_nodes: int = 6000, max_expand_degree: int = 400, per_hop: int = 40, seed: int = 3) -> dict:
    """The cost of ``GraphChat(graph, train_reasoner=True)`` on a mid-sized graph nobody wrote questions for: the
    MetaQA KB's 2-hop neighbourhood of the topics of ``per_hop`` 1- and 2-hop test questions (up to ``max_nodes``
    nodes), opened as a triples list; with Hit on those of the questions whose topic it holds (generated reasoner and
    path ranker). ``train_seconds`` and ``build_seconds`` are the reasoner's own (recorded when it was trained)."""

    index = ChatIndex.build(load_graph("metaqa")[0])
    questions = metaqa_sample("test", per_hop, seed, hops=(1, 2))
    seeds = [r for q in questions for r in index.names.get(name_key(q["topic"]), [])]
    nodes, edges = index.kg.neighbourhood(np.array(seeds), NeighbourhoodConfig(2, max_expand_degree, max_nodes))
    triples = index.subgraph(nodes, edges).triples()
    t0 = time.perf_counter()
    trained = GraphChat(triples, model="zero_shot", train_reasoner=True)
    wall = time.perf_counter() - t0
    inside = {index.kg.entities[n].lower() for n in nodes}
    asked = [q for q in questions if q["topic"].lower() in inside]
    paths = GraphChat(triples, model="zero_shot", retriever="pcst", answer_mode="paths", path_scorer="sentence")
    rows = run_systems({GENERATED: trained, PATHS: paths}, asked)
    return {"triples": len(triples), "nodes": len(nodes), "call_seconds": round(wall, 1),
            **training_record(trained.trained_reasoner),
            "records": [hit_record(label, r, graph="metaqa neighbourhood") for label, r in rows.items()],
            "pairs": [paired(GENERATED, rows[GENERATED], PATHS, rows[PATHS])]}
