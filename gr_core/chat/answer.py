"""Step 4, **answer** with the LLM: its score for each of the evidence's node names, so that the answer is a node of
the graph by construction (``answer_mode="ranked"``).

A small LLM writing freely mostly names no node; decoding under the graph's constraints is the field's remedy (GCR, Luo
et al. 2025; GNN-RAG §4: the reasoner ranks, the LLM verbalizes). :func:`score_names` scores every candidate name by
its log-likelihood as the LLM's whole reply after the free answer's prompt:

    log p(name) = sum_t log p(name_t | prompt, name_<t) + log p(EOS | prompt, name)

The EOS term tells "Tom" from "Tom Hanks", as a prefix tree would. :func:`relation_fit` adds :data:`RELATION_PRIOR`
times the best question-relation similarity on the candidate's evidence edges, and :func:`choose` answers with the best
candidate and those within :data:`MARGIN` nats of it; no PMI or length normalization: both scored worse (CHANGELOG.md).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch

from ..kg import is_identifier

# chosen on 60 MetaQA test questions among 0, 10 and 20 (CHANGELOG.md); the answer's margin in nats
RELATION_PRIOR, MARGIN = 20.0, 2.0


@dataclass
class Candidate:
    """One answer candidate: a distinct node name of the evidence and the node ids that carry it."""

    name: str
    node_ids: list[int]
    score: float = float("nan")  # the ranking score (higher is better)
    tokens: int = 0  # the name's tokens (EOS not counted)

    def to_dict(self) -> dict:
        return {"name": self.name, "node_ids": self.node_ids, "score": round(float(self.score), 4),
                "tokens": self.tokens}


def candidate_names(node_ids, names, exclude=()) -> list[Candidate]:
    """Distinct non-empty names of the evidence nodes (one candidate per name), in evidence order, without the nodes
    in ``exclude`` (the question's own entities) and those named by an identifier (a Freebase mid); where nothing is
    left, the identifier-named nodes come back first, then the excluded named ones, then all."""
    skip = {int(n) for n in exclude}
    for with_unnamed, drop in ((False, skip), (True, skip), (False, set()), (True, set())):
        by_name: dict[str, Candidate] = {}
        for nid, name in zip(node_ids, names):
            text = str(name).strip()
            if not text or int(nid) in drop or (not with_unnamed and is_identifier(text)):
                continue
            by_name.setdefault(text, Candidate(text, [])).node_ids.append(int(nid))
        if by_name:
            return list(by_name.values())
    return []


def score_names(net, batch, names: list[str], chunk: int = 64, max_name_tokens: int = 24,
                packed: bool | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Log-likelihood of each name as the whole reply to a one-example prompt batch: the prompt read once, each chunk
    of names packed after it (a block-diagonal mask over the prompt's KV cache, positions restarting after the prompt):
    exactly the log-likelihoods of separate forwards, at the cost of one short one.

    Args:
        net: a :class:`~gr_core.g_retriever.model.GraphLLM` (zero-shot or trained; its graph token is in the prompt).
        batch: the collated prompt of one example, without label.
        names: the candidate answers.
        chunk: candidates packed per forward.
        max_name_tokens: longer names are cut (their score is that of the prefix, without EOS).
        packed: pack the names into one forward (a 4-D mask); False scores one name per forward on a copy of the
            prompt's cache (same result); None: packed unless the LLM uses flash attention (no 4-D mask) or has
            sliding-window layers (Gemma 3, Mistral: their cache keeps only the prompt's last window).

    Returns:
        ``(log_likelihood (C,), tokens (C,))``: the summed log-probabilities of each name's tokens and of the EOS after
        it (natural log), and the number of name tokens.
    """
    if batch.input_ids.shape[0] != 1:
        raise ValueError("score_names scores the candidates of one prompt at a time")
    ids, lengths = [], []
    for name in names:
        full = net.tokenizer(name, add_special_tokens=False)["input_ids"]
        cut = full[:max_name_tokens]
        ids.append(cut + ([net.template.eos_id] if len(full) <= max_name_tokens else []))
        lengths.append(len(cut))
    scores = np.zeros(len(names), np.float64)
    lengths = np.array(lengths, np.int64)
    if not names:
        return scores, lengths
    if any(not t for t in ids):
        raise ValueError("score_names: a candidate name has no token (max_name_tokens must be >= 1)")
    dtype = next(net.llm.parameters()).dtype
    with torch.inference_mode():
        out = net.llm(inputs_embeds=net.embed(batch), attention_mask=batch.attention_mask,
                      position_ids=net.position_ids(batch.attention_mask), use_cache=True, logits_to_keep=1)
        cache, P = out.past_key_values, int(batch.attention_mask.shape[1])  # the prompt, read once
        first = torch.log_softmax(out.logits[0, -1].float(), -1)  # (V,) log p(the reply's first token)
        scores[:] = [float(first[t[0]]) for t in ids]
        if packed is None:
            packed = ("flash" not in str(getattr(net.llm.config, "_attn_implementation", ""))
                      and not any(getattr(cache, "is_sliding", None) or ()))
        if not packed:
            for c, t in enumerate(ids):
                if len(t) > 1:
                    out = net.llm(input_ids=torch.tensor([t[:-1]], device=net.device),
                                  past_key_values=copy.deepcopy(cache), use_cache=True,
                                  position_ids=torch.arange(P, P + len(t) - 1, device=net.device).unsqueeze(0))
                    logp = torch.log_softmax(out.logits[0].float(), -1)
                    scores[c] += float(logp.gather(-1, torch.tensor(t[1:], device=logp.device).unsqueeze(-1)).sum())
            return scores, lengths
        for start in range(0, len(ids), chunk):
            part = ids[start:start + chunk]
            # every token but each name's last is fed: position t predicts token t + 1 of the same name
            sizes = [len(t) - 1 for t in part]
            Q = sum(sizes)
            if Q == 0:
                continue
            inp = torch.tensor([x for t in part for x in t[:-1]], dtype=torch.long, device=net.device).unsqueeze(0)
            pos = torch.tensor([P + k for n in sizes for k in range(n)], device=net.device).unsqueeze(0)
            # each name sees the whole prompt and its own earlier tokens: a causal block per name
            own = torch.block_diag(*[torch.ones(n, n, dtype=torch.bool).tril() for n in sizes])
            allowed = torch.cat([torch.ones(Q, P, dtype=torch.bool), own], dim=1)
            mask = torch.zeros(1, 1, Q, P + Q, dtype=dtype)
            mask.masked_fill_(~allowed, torch.finfo(dtype).min)
            out = net.llm(input_ids=inp, attention_mask=mask.to(net.device), position_ids=pos, past_key_values=cache,
                          use_cache=True)
            cache.crop(-Q)  # the packed names were appended to the prompt's cache: cut them off again
            logp = torch.log_softmax(out.logits[0].float(), -1)  # (Q, V)
            for c, (t, rows) in enumerate(zip(part, logp.split(sizes))):
                if len(t) > 1:
                    targets = torch.tensor(t[1:], device=logp.device)
                    scores[start + c] += float(rows.gather(-1, targets.unsqueeze(-1)).double().sum())
    return scores, lengths


def relation_fit(cands: list[Candidate], edges, relation_similarity: np.ndarray | None, rels: np.ndarray) -> np.ndarray:
    """``(C,)`` per candidate, the highest similarity between the question and the relation of an evidence edge that
    touches it (0 on none): ``edges`` the evidence's edge table (``src``, ``dst``, ``kb_edge``), ``relation_similarity``
    ``(R,)`` the question's similarity to each relation (None: all 0), ``rels`` ``(E,)`` each KB edge's relation."""
    if relation_similarity is None or "kb_edge" not in edges:
        return np.zeros(len(cands))
    sim = relation_similarity[rels[edges.kb_edge.to_numpy()]]
    best: dict[int, float] = {}
    for s_, d_, v in zip(edges.src.tolist(), edges.dst.tolist(), sim.tolist()):
        for n in (int(s_), int(d_)):
            best[n] = max(best.get(n, 0.0), v)
    return np.array([max(best.get(n, 0.0) for n in c.node_ids) for c in cands])


def rank_candidates(cands: list[Candidate], scores: np.ndarray, lengths: np.ndarray, fit: np.ndarray
                    ) -> list[Candidate]:
    """The candidates scored ``log-likelihood + RELATION_PRIOR * fit`` (``(C,)`` each), best first."""
    for c, v, f, n in zip(cands, scores, fit, lengths):
        c.score, c.tokens = float(v) + RELATION_PRIOR * float(f), int(n)
    return sorted(cands, key=lambda c: -c.score)


def choose(ranked: list[Candidate], max_answers: int, margin: float = MARGIN) -> list[Candidate]:
    """The answers: the best candidate and those within ``margin`` of its score, at most ``max_answers``."""
    return [c for c in ranked[:max_answers] if c.score >= ranked[0].score - margin]
