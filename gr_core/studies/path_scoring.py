"""Other ways to score the path ranker's relation paths, on MetaQA's dev questions (docs/chat.md, "Chat without
training questions"): the ways tried to close the gap between generated-question training and real wording.

The chat's path ranker (:mod:`gr_core.chat.path_ranker`) scores a path by the sentence similarity of the question
(its entity masked) to the path's relation names, less a hop penalty. Its misses on dev are mostly two: a question
that names a film type word ("what films did X direct") is pulled to a longer path through ``starred actors``, and a
1-hop question picks a 2-hop path whose extra relation the question never mentions. Each alternative below re-scores
the same candidates (the ``top`` best paths by the sentence score, so every system chooses among the same paths):

- **sentence** (the chat's first ``path_scorer``): cosine(question, path words) - ``hop_penalty`` per extra
  relation step;
- **word coverage** (the chat's ``path_scorer="coverage"``, :func:`gr_core.chat.path_ranker.coverage`): every
  relation step of the path must be named by a word of the question, one word per step, a step there and back
  ("same directed by") named by its relation's words (greedy one-to-one assignment of steps to question words by
  their word-level cosine), a step scoring its cosine
  less ``tau`` (a step no word names costs), plus ``alpha`` times the sentence cosine, less ``hop_penalty`` per
  extra relation step;
- **LLM channel**: the embedded LLM's log-probability of the question given the path ("Relation path: <words>\\nA
  question asking for the end of this path: <question>"), a noisy-channel reranker that needs no training, alone and
  plus ``lam`` times the sentence score.

A path is a hit when the nodes it reaches hold a gold answer (the chat then answers with that path's nodes). Tuned
on dev only; word coverage with the setting chosen here became the chat's ``path_scorer="coverage"`` option, measured
once on test by ``bench/chat_generated.py metaqa`` / ``webqsp``.
"""
from __future__ import annotations

import itertools

import numpy as np

from ..chat.path_ranker import PathScorer, content_words, coverage, enumerate_paths, path_units
from ..gnn_rag import topic_masked


def dev_candidates(chat, questions: list[dict], top: int = 10) -> list[dict]:
    """Each question's masked text and its ``top`` best paths by the chat's sentence score (hop penalty included),
    each with ``units`` (relation steps as words), ``steps`` (their relation phrases), ``hops``, ``sentence`` (cosine
    before the penalty) and ``hit``."""

    kg, index, cfg = chat.index.kg, chat.index, chat.config
    scorer = PathScorer(lambda texts: chat.encoder.encode(texts, normalize_embeddings=True, convert_to_numpy=True,
                                                          batch_size=64))
    out = []
    for q in questions:
        starts = index.link(q["question"])
        masked = topic_masked(q["question"], [kg.entities[r] for r in starts])
        gold = {a.lower() for a in q["answers"]}
        paths = []
        if starts:
            ranked = scorer.score(chat.embed(masked), enumerate_paths(kg, np.array(starts), cfg.path_hops),
                                  cfg.path_hop_penalty)[:top]
            paths = [{"units": path_units(p.path, kg.relations), "steps": list(p.steps), "hops": len(p.path),
                      "sentence": p.score + cfg.path_hop_penalty * (p.units - 1),
                      "hit": any(kg.entities[n].lower() in gold for n in p.reached.tolist())} for p in ranked]
        out.append({"hop": q["hop"], "question": q["question"], "masked": masked, "paths": paths})
    return out


def channel_log_probs(model, tokenizer, prompts: list[str], question: str) -> np.ndarray:
    """``log P(question | prompt)`` under a causal LM for each prompt, summed over the question's tokens ``(P,)``."""
    import torch  # noqa: PLC0415 deferred: torch (~1.5 s at start-up), only the LLM channel needs it

    q_ids = tokenizer(" " + question, add_special_tokens=False).input_ids
    seqs = [tokenizer(p, add_special_tokens=False).input_ids + q_ids for p in prompts]
    width = max(map(len, seqs))
    ids = torch.full((len(seqs), width), tokenizer.pad_token_id)
    att = torch.zeros_like(ids)
    for i, s in enumerate(seqs):  # right padding: the question's positions are exact
        ids[i, :len(s)] = torch.tensor(s)
        att[i, :len(s)] = 1
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=ids.to(model.device), attention_mask=att.to(model.device))
                                 .logits.float(), -1).cpu()
    target = torch.tensor(q_ids)
    out = []
    for i, s in enumerate(seqs):
        start = len(s) - len(q_ids)
        out.append(float(logp[i, start - 1:len(s) - 1].gather(1, target[:, None]).sum()))
    return np.array(out)


def _hit_by_hop(rows: list[dict], choose) -> dict:
    """Path Hit (%) per hop count and over all when ``choose(i, row) -> path index`` picks each row's path."""
    hits: dict[str, list[bool]] = {}
    for i, r in enumerate(rows):
        hit = bool(r["paths"]) and r["paths"][choose(i, r)]["hit"]
        hits.setdefault(str(r["hop"]), []).append(hit)
        hits.setdefault("all", []).append(hit)
    return {k: round(100 * float(np.mean(v)), 1) for k, v in sorted(hits.items())}


def compare_scorers(rows: list[dict], encode, llm=None, hop_penalties=(0.0, 0.05, 0.1),
                    taus=(0.4, 0.45, 0.5, 0.55, 0.6), alphas=(0.0, 0.5, 1.0), lams=(0.0, 10.0, 40.0),
                    channel_penalty: float = 0.1) -> dict:
    """Path Hit per hop of every scorer and setting on the candidates of :func:`dev_candidates`.

    Args:
        rows: :func:`dev_candidates`'s output.
        encode: ``encode(texts) -> (len(texts), d)`` L2-normalized sentence vectors (the chat's encoder).
        llm: ``(model, tokenizer)`` for the LLM channel, or None to leave it out.
        channel_penalty: the hop penalty of the sentence score added to the LLM channel (the chat's default).

    Returns:
        ``{"top_k_recall": {hop: % with a hitting path among the candidates}, "sentence": {penalty: hits},
        "word_coverage": {"alpha/tau/penalty": hits}, "llm_channel": {lam: hits}}``.
    """
    words = sorted({w for r in rows for w in content_words(r["masked"])})
    units = sorted({u for r in rows for p in r["paths"] for u in p["steps"]})
    vec = dict(zip(words + units, encode(words + units))) if words or units else {}
    out: dict = {"top_k_recall": _hit_by_hop(rows, lambda i, r: int(np.argmax([p["hit"] for p in r["paths"]])))}

    def sentence(p, pen):
        return p["sentence"] - pen * (len(p["units"]) - 1)

    out["sentence"] = {str(pen): _hit_by_hop(rows, lambda i, r, pen=pen: int(np.argmax([sentence(p, pen)
                                                                                           for p in r["paths"]])))
                       for pen in hop_penalties}
    covered = {}
    for i, r in enumerate(rows):
        ws = [vec[w] for w in content_words(r["masked"])]
        for j, p in enumerate(r["paths"]):
            covered[i, j] = (coverage(np.stack(ws), np.stack([vec[u] for u in p["steps"]])) if ws
                             else np.zeros(len(p["steps"])))
    out["word_coverage"] = {}
    for alpha, tau, pen in itertools.product(alphas, taus, hop_penalties):
        def pick(i, r, alpha=alpha, tau=tau, pen=pen):
            return int(np.argmax([float(np.sum(covered[i, j] - tau)) + alpha * p["sentence"]
                                  - pen * (len(p["units"]) - 1) for j, p in enumerate(r["paths"])]))
        out["word_coverage"][f"{alpha}/{tau}/{pen}"] = _hit_by_hop(rows, pick)
    if llm is not None:
        model, tokenizer = llm
        logps = [channel_log_probs(model, tokenizer, [f"Relation path: {' '.join(p['units'])}\nA question asking "
                                                      "for the end of this path:" for p in r["paths"]], r["masked"])
                 if r["paths"] else np.zeros(0) for r in rows]
        out["llm_channel"] = {str(lam): _hit_by_hop(rows, lambda i, r, lam=lam: int(np.argmax(
            logps[i] + lam * np.array([sentence(p, channel_penalty) for p in r["paths"]])))) for lam in lams}
    return out


def best_settings(result: dict) -> dict:
    """Each scorer's setting with the highest mean of 1- and 2-hop path Hit (the issue's targets), and its hits."""
    best = {}
    for scorer in ("sentence", "word_coverage", "llm_channel"):
        if scorer in result:
            key = max(result[scorer], key=lambda k: (result[scorer][k]["1"] + result[scorer][k]["2"]) / 2)
            best[scorer] = {"setting": key, **result[scorer][key]}
    return best
