"""The LLM ranking on WebQSP (docs/chat.md, "A larger ranking LLM" and "The LLM ranking's settings on WebQSP").

The chat's answer on a schema-named KG (Freebase's ``people.person.nationality``) is the LLM scoring every node name
of the PCST evidence (``answer_mode="ranked"``, :mod:`gr_core.chat.ranking`), the best answer measured on WebQSP
without WebQSP's questions. Two things are measured here on validation mini-graphs, each paired on the same questions:
which embedded LLM ranks (:func:`ranking_llm_study`), its relation prior and length normalization, replayed from
one run's candidate score parts without asking the LLM again (:func:`ranking_settings_study`), and whether a reasoner
trained on questions generated from the same graphs helps it, as a score term or a switch (:func:`reasoner_help_study`;
docs/chat.md, "The LLM ranking helped by the generated reasoner").
"""
from __future__ import annotations

import numpy as np

from ..chat import ChatConfig
from ..chat.ranking import Candidate, choose, rank_candidates
from ..evaluate import kgqa_scores
from ..runs import progress
from .chat_without_questions import ask_alone, hit_record, paired, ranked_chats, run_systems, webqsp_sample


def ranking_llm_study(split: str = "val", num_graphs: int = 200, seed: int = 0,
                      llms: tuple[str, ...] = ("embedded:smollm2-135m-instruct", "embedded:gemma3-270m")) -> dict:
    """The LLM that ranks the evidence's names (``answer_mode="ranked"``, the chat's answer on schema-named KGs) on
    ``num_graphs`` WebQSP mini-graphs of ``split``: each of ``llms`` zero-shot on the same questions, every one paired
    with the first (the default). A larger LLM knows more of the world its candidates name."""

    questions, graphs = webqsp_sample(num_graphs, seed, split)
    systems = {f"PCST + LLM ranking, {llm}": ranked_chats(graphs, llm) for llm in llms}
    rows = run_systems(systems, questions, graph_of=lambda q: q["graph"])
    names = list(rows)
    return {"records": [hit_record(label, r, graph=f"webqsp {split}") for label, r in rows.items()],
            "pairs": [paired(a, rows[a], names[0], rows[names[0]]) for a in names[1:]],
            "questions": {"graphs": f"webqsp {split} mini-graphs", "num_graphs": len(graphs), "seed": seed},
            "per_question": {label: [{k: r[k] for k in ("question", "answer", "hit")} for r in rr]
                             for label, rr in rows.items()}}


RANKING_PRIORS = (0.0, 5.0, 10.0, 20.0, 40.0, 80.0)  # relation_prior values replayed (20: the default, docs/chat.md)


def replay_ranking(records: list[dict], relation_prior: float, length_norm: bool, max_answers: int = 3,
                   margin: float = 2.0, extra=None) -> list[dict]:
    """The LLM ranking re-scored from one run's candidate parts (``loglik``, ``relation_fit``, ``tokens``:
    :attr:`Turn.candidates`) with another ``relation_prior`` / ``length_norm`` / choice rule
    (:func:`~gr_core.chat.ranking.choose`), without asking the LLM again: per question ``{hit, hit1, answers}``
    (answers: how many names the answer lists). A calibrated chat's candidates carry their ``prior`` too, subtracted
    as the chat does. ``extra(candidates) -> (C,)``: nats added to each candidate's score. A record without
    candidates (a turn that was not ranked) keeps its ``hit`` and ``hit1``."""
    out = []
    for r in records:
        if not r["candidates"]:
            out.append({"hit": r["hit"], "hit1": r.get("hit1", r["hit"]), "answers": 0})
            continue
        cands = [Candidate(c["name"], c["node_ids"]) for c in r["candidates"]]
        prior = (np.array([c["prior"] for c in r["candidates"]]) if all("prior" in c for c in r["candidates"])
                 else None)  # a calibrated chat's no-evidence log-likelihoods (ChatConfig.calibrate)
        ranked = rank_candidates(cands, np.array([c["loglik"] for c in r["candidates"]]),
                                 np.array([c["tokens"] for c in r["candidates"]]), prior, length_norm,
                                 relation_prior * np.array([c["relation_fit"] for c in r["candidates"]])
                                 + (extra(r["candidates"]) if extra is not None else 0.0))
        chosen = [c.name for c in choose(ranked, max_answers, margin)]
        s = kgqa_scores(chosen, r["answers"])
        out.append({"hit": s["hit"], "hit1": s["hit1"], "answers": len(chosen)})
    return out


def replay_matches(records: list[dict], replay: list[dict]) -> bool:
    """Whether a replay of the asked settings gives every asked turn's Hit, Hit@1 and number of answer names."""
    asked = [(r["hit"], r["hit1"], len(r["answer"].split(" | ")) if r["candidates"] else 0) for r in records]
    return asked == [(x["hit"], x["hit1"], x["answers"]) for x in replay]


def ranking_settings_study(split: str = "val", num_graphs: int = 200, seed: int = 0,
                           llm_model: str = "embedded:smollm2-135m-instruct",
                           priors: tuple[float, ...] = RANKING_PRIORS) -> dict:
    """The LLM ranking's relation prior and length normalization on ``num_graphs`` WebQSP mini-graphs of ``split``
    (chosen on MetaQA's 60 questions, docs/chat.md): the chat asked once (its defaults), every setting replayed from
    the candidates' score parts (:func:`replay_ranking`), each paired with the default on Hit and on Hit@1 (a
    length-normalized score is in nats per token, so the default's 2-nat margin lets more names into the answer:
    Hit@1 and the mean answer count say whether a gain is only more guesses). The replay of the default setting must
    give the asked turns' Hit, Hit@1 and answer counts (``replay_matches``). Every candidate's parts are kept
    (``candidates``) so that other settings can be replayed from the file."""
    questions, graphs = webqsp_sample(num_graphs, seed, split)
    chat = ranked_chats(graphs, llm_model)
    records = []
    for q in progress(questions, desc="PCST + LLM ranking"):
        c = chat(q["graph"])
        row = ask_alone(c, q)
        last = c.history[-1] if c.history else None
        row["candidates"] = last.candidates if last is not None and last.mode == "ranked" else []
        records.append(row | {"answers": q["answers"]})
    default = ChatConfig()
    rows, answers = {}, {}
    # a length-normalized score is in nats per token: its margin is also tried on that scale
    choices = [(False, default.answer_margin)] + [(True, m) for m in (default.answer_margin, 0.5, 0.2)]
    for prior in priors:
        for norm, margin in choices:
            label = (f"relation prior {prior:g}{', length-normalized' if norm else ''}"
                     f"{f', margin {margin:g}' if margin != default.answer_margin else ''}")
            replay = replay_ranking(records, prior, norm, default.max_answers, margin)
            rows[label] = [{"question": r["question"], "answer": "", "hit": x["hit"], "hit1": x["hit1"]}
                           for r, x in zip(records, replay)]
            answers[label] = round(float(np.mean([x["answers"] for x in replay if x["answers"]])), 3)
    base = f"relation prior {default.relation_prior:g}{', length-normalized' if default.length_norm else ''}"

    def on_hit1(rr):
        return [{"question": r["question"], "hit": r["hit1"]} for r in rr]

    return {"records": [hit_record(label, r, graph=f"webqsp {split}") | {"mean_answers": answers[label]}
                        for label, r in rows.items()],
            "pairs": [paired(a, rows[a], base, rows[base]) for a in rows if a != base],
            "pairs_hit1": [paired(a, on_hit1(rows[a]), base, on_hit1(rows[base])) for a in rows if a != base],
            "replay_matches": replay_matches(records, replay_ranking(records, default.relation_prior,
                                                                     default.length_norm, default.max_answers,
                                                                     default.answer_margin)),
            "asked": hit_record("PCST + LLM ranking (asked, defaults)", records, graph=f"webqsp {split}"),
            "questions": {"graphs": f"webqsp {split} mini-graphs", "num_graphs": len(graphs), "seed": seed},
            "per_question": {"asked": [{k: r[k] for k in ("question", "answer", "hit")} for r in records]},
            "candidates": [{"question": r["question"], "answers": r["answers"], "hit": r["hit"], "hit1": r["hit1"],
                            "candidates": [{k: c[k] for k in ("name", "node_ids", "loglik", "relation_fit", "tokens")}
                                           for c in r["candidates"]]} for r in records]}


REASONER_WEIGHTS = (0.0, 1.0, 2.0, 5.0, 10.0, 20.0)  # nats a candidate gains per unit of reasoner probability
SWITCH_THRESHOLDS = (0.5, 0.8, 0.9, 0.95, 0.99)  # reasoner's best probability above which its answer is taken


def replay_with_reasoner(records: list[dict], weight: float, use_log: bool, relation_prior: float = 20.0,
                         max_answers: int = 3, margin: float = 2.0) -> list[dict]:
    """The LLM ranking re-scored with the generated-question reasoner's probability of each candidate
    (``reasoner_p``, its best node) added: ``weight * p`` nats, or ``weight * log(max(p, 1e-4))`` when ``use_log``.
    Per question ``{hit, hit1, answers}``; a record without candidates keeps its ``hit``."""

    def help_(candidates: list[dict]) -> np.ndarray:
        p = np.array([c["reasoner_p"] for c in candidates], np.float64)
        return weight * (np.log(np.maximum(p, 1e-4)) if use_log else p)

    return replay_ranking(records, relation_prior, False, max_answers, margin, extra=help_)


def reasoner_help_study(reasoner_cfg, split: str = "val", num_graphs: int = 200, seed: int = 0,
                        llm_model: str = "embedded:smollm2-135m-instruct", weights=REASONER_WEIGHTS,
                        thresholds=SWITCH_THRESHOLDS) -> dict:
    """The LLM ranking (PCST evidence) helped by a reasoner trained on questions generated from the same
    ``num_graphs`` WebQSP mini-graphs of ``split`` (:func:`~gr_core.chat.graph_reasoner.train_graph_reasoner`, the
    library's defaults): each question asked once of both chats; then, replayed from the kept parts, each ranked
    candidate scored with the reasoner's probability added (``weights``, linear and log), and a switch that answers
    with the reasoner where its best candidate's probability reaches a threshold (``thresholds``), else with the LLM
    ranking. Every setting paired with the LLM ranking alone on the same questions."""
    from ..chat import GraphChat  # noqa: PLC0415 (the module's other studies need no chat class)
    from ..chat.graph_reasoner import train_graph_reasoner, training_record  # noqa: PLC0415
    from ..gnn_rag import load_reasoner  # noqa: PLC0415

    questions, graphs = webqsp_sample(num_graphs, seed, split)
    chat = ranked_chats(graphs, llm_model)
    ranked = {spec: chat(spec) for spec in graphs}
    path = train_graph_reasoner([c.index for c in ranked.values()], reasoner_cfg)
    reasoner = load_reasoner(path)
    records = []
    for q in progress(questions, desc="LLM ranking + generated reasoner"):
        c = ranked[q["graph"]]
        row = ask_alone(c, q)
        last = c.history[-1] if c.history else None
        cands = last.candidates if last is not None and last.mode == "ranked" else []
        g = GraphChat(graphs[q["graph"]], kind="kg", reasoner=reasoner, retriever="gnn")
        alone = ask_alone(g, q)
        gturn = g.history[-1] if g.history else None
        probs = gturn.reasoner_probs if gturn is not None else None
        for cand in cands:
            rows_ = g.index.rows_of(cand["node_ids"])
            cand["reasoner_p"] = float(probs[rows_].max()) if probs is not None and rows_ else 0.0
        top = float(gturn.candidates[0]["score"]) if gturn is not None and gturn.candidates else 0.0
        records.append(row | {"answers": q["answers"], "candidates": cands, "reasoner_hit": alone["hit"],
                              "reasoner_hit1": alone["hit1"], "reasoner_top": top,
                              "reasoner_answer": alone["answer"]})
    rows = {"LLM ranking": [{"question": r["question"], "hit": r["hit"], "hit1": r["hit1"]} for r in records],
            "generated reasoner": [{"question": r["question"], "hit": r["reasoner_hit"], "hit1": r["reasoner_hit1"]}
                                   for r in records]}
    for use_log in (False, True):
        for w in weights:
            if w == 0:
                continue
            label = f"LLM ranking + {w:g} x {'log ' if use_log else ''}reasoner p"
            rows[label] = [{"question": r["question"], "hit": x["hit"], "hit1": x["hit1"]}
                           for r, x in zip(records, replay_with_reasoner(records, w, use_log))]
    for t in thresholds:
        rows[f"reasoner where its best p >= {t:g}, else LLM ranking"] = [
            {"question": r["question"], "hit": r["reasoner_hit"] if r["reasoner_top"] >= t else r["hit"],
             "hit1": r["reasoner_hit1"] if r["reasoner_top"] >= t else r["hit1"]} for r in records]
    base = "LLM ranking"
    return {"records": [hit_record(label, rr, graph=f"webqsp {split}") for label, rr in rows.items()],
            "pairs": [paired(a, rows[a], base, rows[base]) for a in rows if a != base],
            "replay_matches": replay_matches(records, replay_with_reasoner(records, 0.0, False)),
            "reasoner": training_record(path),
            "questions": {"graphs": f"webqsp {split} mini-graphs", "num_graphs": len(graphs), "seed": seed},
            "per_question": [{k: r[k] for k in ("question", "answer", "hit", "hit1", "reasoner_answer",
                                                "reasoner_hit", "reasoner_top")} for r in records],
            "candidates": [{"question": r["question"], "answers": r["answers"],
                            "candidates": [{k: c[k] for k in ("name", "node_ids", "loglik", "relation_fit", "tokens",
                                                              "reasoner_p")} for c in r["candidates"]]}
                           for r in records]}
