"""GNN-RAG's LLM half (GNN-RAG paper §4.2-4.4; docs/method.md §3.2-3.3): evidence retrievers, the LoRA answer
generator trained on gold shortest paths, the RoG-style relation-path retriever, retrieval augmentation, and their
evaluation on one harness. Why one module of ~550 lines: the seven retrievers, the two fine-tunes and the scoring
share :class:`Evidence` and the token budget, and the tables compare them row by row.

Every retriever turns one question into :class:`Evidence` (verbalized lines ``a -> r -> b`` / ``a <- r <- b``):

======================  =================================================================================
``none``                no evidence; the *untuned* LLM with RoG's LLM-only prompt (GNN-RAG's "no retrieval")
``gnn``                 GNN-RAG: shortest paths from the question entities to the GNN's 0.95 candidates
``rog``                 RoG-style: the LLM (LoRA) generates 3 relation paths by beam search; each is grounded
                        by following its relations from the question entities
``gnn+rog``             GNN-RAG+RA: RoG's lines first, then the GNN's not already present (GNN-RAG §4.4)
``pcst``                G-Retriever's PCST subgraph (text-similarity prizes), one fact per line
``gnn+pcst``            GNN paths first, then the PCST facts not already present (a second augmentation)
``gnn_pcst``            beyond the papers: PCST with the GNN's node probabilities added to the prizes
======================  =================================================================================

The answer generator is one LoRA fine-tune per dataset family, trained on gold paths (paths from the question
entities to the gold answers, GNN-RAG's recipe), and answers every retriever's prompt (GNN-RAG prompt A).
"""
from __future__ import annotations

import hashlib
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .config import LLMConfig
from .gnn_rag import _hops, _path_names, gold_ids, missing_entities, reasoning_paths, seed_positions, select_candidates
from .llm import load_tokenizer
from .model import Example, GraphLLM, LoRAConfig, ModelConfig
from .prompts import ROG_PLANNING_PROMPT, gnn_rag_parts
from .published import PAPER_GNN_RAG, PAPER_HOPS_F1
from .runs import config_hash, progress, seed_everything, write_json
from .train import TrainConfig, fit, predict

RETRIEVERS = ("none", "gnn", "rog", "gnn+rog", "pcst", "gnn+pcst", "gnn_pcst")
# LLM calls per question, counted as GNN-RAG Table 12: the answer call plus one per RoG beam
LLM_CALLS = {"none": 1, "gnn": 1, "rog": 4, "gnn+rog": 4, "pcst": 1, "gnn+pcst": 1, "gnn_pcst": 1}
SEP = " <SEP> "  # RoG writes <PATH> r1 <SEP> r2 </PATH> with added special tokens; plain text here


@dataclass(frozen=True)
class GNNRAGConfig:
    """Retrieval and prompt settings of the LLM half.

    Attributes:
        eps: cumulative probability of the GNN candidate set (GNN-RAG App. C: 0.95).
        max_lines_per_pair: path lines per (question entity, candidate) pair (relation combinations are capped).
        evidence_tokens: evidence lines kept whole, in order, up to this many tokens (GNN-RAG: 4096 - 100 with
            LLaMA-2, over budget shuffled unseeded; we keep the retriever's order and bound it for CPU).
        rog_beams: relation paths per question (RoG / GNN-RAG: beam search, k = 3).
        rog_max_lines: grounded lines per relation path and question entity (bounds hub explosions).
        rog_paths_per_question: distinct gold relation paths per question used to train the RoG generator.
        prize_scale: GNN prizes = ``prize_scale * top_k_nodes * p / p_max`` on the candidates, the same on the
            question entities (beyond the papers; 1.0 puts them on the scale of the text top-k prizes).
    """

    eps: float = 0.95  # GNN-RAG App. C
    max_lines_per_pair: int = 8
    evidence_tokens: int = 384
    rog_beams: int = 3  # RoG / GNN-RAG
    rog_max_lines: int = 20
    rog_paths_per_question: int = 3
    prize_scale: float = 1.0

    def __post_init__(self) -> None:
        if not 0 < self.eps <= 1 or self.evidence_tokens < 1 or self.rog_beams < 1 or self.max_lines_per_pair < 1 \
                or self.prize_scale <= 0:
            raise ValueError("GNNRAGConfig: 0 < eps <= 1, evidence_tokens >= 1, rog_beams >= 1, max_lines_per_pair >= 1, "
                             "prize_scale > 0 required")


@dataclass
class Evidence:
    """One retriever's output for one question, with the counted reasons for missing evidence."""

    lines: list[str] = field(default_factory=list)
    missing_seed: int = 0  # question entities absent from the graph
    no_path: int = 0  # GNN candidates unreachable from every question entity
    empty_candidates: bool = False  # the GNN kept no candidate (every node a question entity, or an empty graph)
    ungrounded: bool = False  # RoG: no generated relation path could be followed from a question entity

    def entities(self) -> set[str]:
        """Lowercased entity names mentioned by the lines."""
        return {n.lower() for line in self.lines for n in _path_names(line)}

    def union(self, other: "Evidence") -> "Evidence":
        """``self``'s lines first, then ``other``'s not already present (GNN-RAG+RA's order)."""
        seen = set(self.lines)
        return Evidence(self.lines + [x for x in other.lines if x not in seen],
                        max(self.missing_seed, other.missing_seed), self.no_path + other.no_path,
                        self.empty_candidates or other.empty_candidates, self.ungrounded or other.ungrounded)


# ---------------------------------------------------------------------- retrievers
def answer_hops(graph, seeds: list[int], targets: list[int]) -> int | None:
    """Shortest undirected distance from any question entity to any gold answer (None: unreachable)."""
    import networkx as nx

    if not seeds or not targets:
        return None
    g = nx.Graph()
    g.add_nodes_from(graph.nodes.node_id.tolist())
    g.add_edges_from(zip(graph.edges.src.tolist(), graph.edges.dst.tolist()))
    dist = nx.multi_source_dijkstra_path_length(g, set(seeds))
    found = [dist[t] for t in targets if t in dist]
    return int(min(found)) if found else None


def gnn_evidence(graph, probs: np.ndarray, cfg: GNNRAGConfig = GNNRAGConfig()) -> Evidence:
    """GNN-RAG: paths from the question entities to the GNN's candidates (``probs``: ``(N,)`` in node order)."""
    ids = graph.nodes.node_id.to_numpy()
    seeds, seed_pos = seed_positions(graph)
    cands = [int(ids[c]) for c, _ in select_candidates(probs, seed_pos, cfg.eps)]
    rep = reasoning_paths(graph, seeds, cands, cfg.max_lines_per_pair)
    return Evidence(rep.lines, no_path=rep.no_path, empty_candidates=not cands)


def fact_lines(graph, edge_rows=None) -> list[str]:
    """One line ``head -> relation -> tail`` per edge row (all edges by default), deduplicated, in row order."""
    names = dict(zip(graph.nodes.node_id.tolist(), graph.nodes.node_attr.tolist()))
    e = graph.edges if edge_rows is None else graph.edges.iloc[np.asarray(edge_rows, dtype=np.int64)]
    lines = [f"{names[s]} -> {str(r).strip()} -> {names[d]}" for s, r, d in
             zip(e.src.tolist(), e.edge_attr.tolist(), e.dst.tolist())]
    return list(dict.fromkeys(lines))


def pcst_evidence(ds, i: int, graph, extra_node_prizes: np.ndarray | None = None) -> Evidence:
    """G-Retriever's PCST subgraph for question ``i`` (dataset config), as fact lines."""
    from .graphqa import retrieve

    return Evidence(fact_lines(graph, retrieve(ds, i, graph=graph, extra_node_prizes=extra_node_prizes).edge_rows))


def gnn_prizes(graph, probs: np.ndarray, top_k: int, cfg: GNNRAGConfig = GNNRAGConfig()) -> np.ndarray:
    """Node prizes ``(N,)`` from the GNN: candidates get ``scale * top_k * p / p_max``, question entities the max.

    Candidates come from the same 0.95 rule as GNN-RAG, so a confident GNN puts one large prize on its answer and
    PCST must connect it to the question entities: the path the GNN found, plus whatever text-prized facts are
    cheap to attach.
    """
    _, seed_pos = seed_positions(graph)
    cands = select_candidates(probs, seed_pos, cfg.eps)
    top = cfg.prize_scale * max(top_k, 1)
    prizes = np.zeros(len(probs), np.float32)
    if cands:
        pmax = max(p for _, p in cands)
        for c, p in cands:
            prizes[c] = top * p / pmax
    prizes[list(seed_pos)] = top
    return prizes


def gnn_prize_evidence(ds, i: int, graph, probs: np.ndarray, cfg: GNNRAGConfig = GNNRAGConfig()) -> Evidence:
    """PCST whose node prizes are the text top-k prizes plus :func:`gnn_prizes` (a trainable retrieval)."""
    from .retrieval import DATASET_RETRIEVAL

    extra = gnn_prizes(graph, probs, DATASET_RETRIEVAL[ds.name].top_k_nodes, cfg)
    _, seed_pos = seed_positions(graph)
    ev = pcst_evidence(ds, i, graph, extra)
    ev.empty_candidates = not np.delete(extra, list(seed_pos)).any()  # no candidate got a prize
    return ev


# ---------------------------------------------------------------------- RoG-style relation paths
def relation_sequences(lines: list[str]) -> list[tuple[str, ...]]:
    """The relation sequence of each verbalized path (direction dropped, as RoG's relation paths), deduplicated."""
    return list(dict.fromkeys(tuple(r for _, _, r, _ in _hops(line)) for line in lines if _hops(line)))


def format_relation_path(relations: tuple[str, ...]) -> str:
    return SEP.join(relations)


def parse_relation_path(text: str) -> tuple[str, ...]:
    """A generated relation path back to its relations (blank pieces dropped)."""
    return tuple(r.strip() for r in text.replace("<PATH>", "").replace("</PATH>", "").split("<SEP>") if r.strip())


def ground_relation_paths(graph, seeds: list[int], relation_paths: list[tuple[str, ...]], max_lines: int = 20
                          ) -> list[str]:
    """Follow each relation path from each question entity (RoG's BFS along the exact relation sequence).

    A relation may be followed either way (RoG walks an undirected graph); the lines keep each fact's direction.
    At most ``max_lines`` lines per (relation path, question entity); cycles are not followed.
    """
    names = dict(zip(graph.nodes.node_id.tolist(), graph.nodes.node_attr.tolist()))
    adj: dict[tuple[int, str], list[tuple[int, str]]] = {}
    for s, r, d in zip(graph.edges.src.tolist(), graph.edges.edge_attr.tolist(), graph.edges.dst.tolist()):
        r = str(r).strip()
        adj.setdefault((s, r), []).append((d, f" -> {r} -> "))
        adj.setdefault((d, r), []).append((s, f" <- {r} <- "))
    lines: list[str] = []
    for rels in relation_paths:
        if not rels:
            continue
        for s in seeds:
            if s not in names:
                continue
            frontier = [(s, names[s], {s})]
            for r in rels:
                nxt = []
                for node, text, seen in frontier:
                    for v, arrow in adj.get((node, r), []):
                        if v not in seen:
                            nxt.append((v, text + arrow + names[v], seen | {v}))
                frontier = nxt[:max(1, 50 * max_lines)]  # bounded breadth; the cut below keeps max_lines
                if not frontier:
                    break
            lines += [text for _, text, _ in frontier[:max_lines]]
    return list(dict.fromkeys(lines))


def rog_example(uid: str, question: str, label: str = "", answers: list[str] | None = None) -> Example:
    """RoG's planning prompt for one question (label: one relation path)."""
    return Example(uid=uid, question=ROG_PLANNING_PROMPT.format(question=question.strip()), desc="", label=label,
                   answers=list(answers or []))


# ---------------------------------------------------------------------- prompts and training data
def fit_lines(lines: list[str], budget: int, tokenizer) -> tuple[list[str], int]:
    """Keep whole lines, in order, while their tokens (each with its newline) fit ``budget``; ``(kept, dropped)``."""
    if not lines:
        return [], 0
    counts = [len(ids) for ids in tokenizer([x + "\n" for x in lines], add_special_tokens=False)["input_ids"]]
    kept, used = [], 0
    for line, n in zip(lines, counts):
        if used + n <= budget:
            kept.append(line)
            used += n
    return kept, len(lines) - len(kept)


def rag_example(uid: str, question: str, lines: list[str] | None, answers: list[str]) -> Example:
    """GNN-RAG prompt A (``lines=None``: the no-retrieval prompt); the label is the answer list, one per line."""
    desc, q = gnn_rag_parts(lines, question)
    return Example(uid=uid, question=q, desc=desc, label="\n".join(answers), answers=list(answers))


def gold_path_lines(ds, i: int, cfg: GNNRAGConfig = GNNRAGConfig()) -> list[str]:
    """Verbalized shortest paths from the question entities to the gold answers (GNN-RAG's training input)."""
    g = ds.graph(i)
    seeds, _ = seed_positions(g)
    return reasoning_paths(g, seeds, gold_ids(g, ds.records[i].answers, seeds), cfg.max_lines_per_pair).lines


def training_examples(datasets: list, max_questions: int | None, split: str, tokenizer,
                      cfg: GNNRAGConfig = GNNRAGConfig()) -> tuple[list[Example], list[Example], dict]:
    """Answer-generator and relation-generator examples from the gold paths of ``split``.

    Returns:
        ``(answer examples, relation-path examples, counts)``; questions without any gold path are left out of
        both (GNN-RAG and RoG train only on questions whose answer is reachable) and counted.
    """
    answer_ex, rel_ex, skipped, total = [], [], 0, 0
    for ds in datasets:
        for i in progress(list(ds.split.get(split, []))[:max_questions or None], desc=f"{ds.name} {split} gold paths"):
            rec = ds.records[i]
            total += 1
            lines = gold_path_lines(ds, i, cfg)
            if not lines:
                skipped += 1
                continue
            kept, _ = fit_lines(lines, cfg.evidence_tokens, tokenizer)
            answer_ex.append(rag_example(str(rec.graph_id), rec.question, kept, rec.answers))
            for rels in relation_sequences(lines)[:cfg.rog_paths_per_question]:
                rel_ex.append(rog_example(str(rec.graph_id), rec.question, format_relation_path(rels)))
    return answer_ex, rel_ex, {"questions": total, "without_gold_path": skipped}


def _digest(examples: list[Example]) -> str:
    h = hashlib.sha256()
    for ex in examples:
        h.update("\x00".join((ex.desc, ex.question, ex.label)).encode())
    return h.hexdigest()[:16]


def model_key(cfg: ModelConfig) -> dict:
    """The model part of a LoRA generator's checkpoint key: the config's fields, less those at a default added after
    checkpoints were keyed (the LoRA dropout's masks), so that those keys stay valid."""
    key = asdict(cfg)
    if cfg.lora is not None and cfg.lora.dropout_masks == "bernoulli":
        del key["lora"]["dropout_masks"]
    return key


def train_lora_llm(train_ex: list[Example], val_ex: list[Example], run_dir: str | Path, llm: LLMConfig = LLMConfig(),
                   train: TrainConfig = TrainConfig(), max_txt_len: int = 512, seed: int = 0,
                   lora: LoRAConfig = LoRAConfig()) -> tuple[GraphLLM, list[dict]]:
    """LoRA fine-tune of the LLM on text-only examples (no graph encoder), checkpointed in ``run_dir/ckpt``.

    The checkpoint is keyed by the model and training config and a digest of the examples, so a rerun on the same
    data resumes (or, when finished, just reloads the best epoch).
    """
    cfg = ModelConfig(llm=llm, lora=lora, graph_source="none", max_txt_len=max_txt_len)
    seed_everything(seed)
    model = GraphLLM(cfg)
    model.tokenize(train_ex)
    model.tokenize(val_ex)
    run_dir = Path(run_dir)
    key = {"model": model_key(cfg), "train": asdict(train), "seed": seed, "train_data": _digest(train_ex),
           "val_data": _digest(val_ex), "num_train": len(train_ex), "num_val": len(val_ex)}
    history = fit(model, train_ex, val_ex, train, seed, run_dir / "ckpt", config_hash(key))
    write_json(run_dir / "config.json", {**key, "config_hash": config_hash(key)})
    write_json(run_dir / "history.json", history)
    return model, history


def generate_relation_paths(model: GraphLLM, questions: list[str], beams: int = 3, batch_size: int = 8,
                            desc: str = "relation paths") -> list[list[tuple[str, ...]]]:
    """Beam search for each question's relation paths (``beams`` per question, best first, empty ones dropped)."""
    model.eval()
    examples = model.tokenize([rog_example(str(k), q) for k, q in enumerate(questions)])
    out: list[list[tuple[str, ...]]] = []
    for start in progress(range(0, len(examples), batch_size), desc=desc):
        batch = model.collate(examples[start:start + batch_size], with_label=False).to(model.device)
        for texts in model.generate_beams(batch, beams):
            out.append(list(dict.fromkeys(p for p in map(parse_relation_path, texts) if p)))
    return out


def answer_examples(model: GraphLLM, examples: list[Example], batch_size: int, adapters: bool = True,
                    desc: str = "answers") -> tuple[list[str], float]:
    """Greedy answers; ``adapters=False`` answers with the untuned LLM (LoRA disabled) for the no-retrieval row."""
    if adapters or not hasattr(model.llm, "disable_adapter"):
        return predict(model, examples, batch_size, desc=desc)
    with model.llm.disable_adapter():
        return predict(model, examples, batch_size, desc=desc)


# ---------------------------------------------------------------------- one dataset, every retriever
def collect_evidence(ds, i: int, probs: np.ndarray | None, relation_paths: list[tuple[str, ...]] | None,
                     retrievers: tuple[str, ...] = RETRIEVERS, cfg: GNNRAGConfig = GNNRAGConfig(),
                     graph=None) -> dict[str, Evidence]:
    """Every requested retriever's evidence for question ``i`` (each base retriever computed once; ``graph``:
    the question's graph when the caller already has it)."""
    g = graph if graph is not None else ds.graph(i)
    seeds, _ = seed_positions(g)
    base: dict[str, Evidence] = {"none": Evidence()}
    need = {p for r in retrievers for p in r.split("+")}
    if need & {"gnn", "gnn_pcst"} and probs is None:
        raise ValueError("collect_evidence: the gnn retrievers need the GNN's node probabilities")
    if "gnn" in need:
        base["gnn"] = gnn_evidence(g, probs, cfg)
    if "rog" in need:
        lines = ground_relation_paths(g, seeds, relation_paths or [], cfg.rog_max_lines)
        base["rog"] = Evidence(lines, ungrounded=not lines)
    if "pcst" in need:
        base["pcst"] = pcst_evidence(ds, i, g)
    if "gnn_pcst" in need:
        base["gnn_pcst"] = gnn_prize_evidence(ds, i, g, probs, cfg)
    missing = missing_entities(g, ds.records[i].q_entities)  # the same for every retriever: counted once
    for ev in base.values():
        ev.missing_seed = missing
    out = {}
    for r in retrievers:
        parts = r.split("+")
        if r == "gnn+rog":  # GNN-RAG+RA: RoG's paths first, then the GNN's
            parts = ["rog", "gnn"]
        ev = base[parts[0]]
        for p in parts[1:]:
            ev = ev.union(base[p])
        out[r] = ev
    return out


def evaluate_retrievers(key: str, ds, indices: list[int], probs: list[np.ndarray] | None, generator: GraphLLM,
                        relation_paths: list[list[tuple[str, ...]]] | None = None,
                        retrievers: tuple[str, ...] = RETRIEVERS, cfg: GNNRAGConfig = GNNRAGConfig(),
                        batch_size: int = 16) -> "pd.DataFrame":
    """Answer ``indices`` of ``ds`` with every retriever's evidence; one row per (question, retriever).

    Columns: ``dataset, retriever, index, question, prediction, answers, hops`` (shortest question-entity ->
    answer distance), the :func:`~gr_core.evaluate.kgqa_scores` fields, ``coverage`` (a gold answer is an entity of
    the evidence the LLM sees), ``input_tokens`` (the whole prompt, chat template included), ``evidence_lines``,
    ``lines_dropped`` (over the token budget), ``missing_seed``, ``no_path``, ``empty_candidates``, ``ungrounded``,
    ``answer_seconds`` (per question, that retriever's batch time / questions).
    """
    import pandas as pd

    from .evaluate import kgqa_scores, normalize

    unknown = set(retrievers) - set(RETRIEVERS)
    if unknown:
        raise ValueError(f"unknown retrievers {sorted(unknown)}; choose from {RETRIEVERS}")
    tok, t = generator.tokenizer, generator.template
    per_q = []
    for k, i in enumerate(progress(indices, desc=f"{key} evidence")):
        g = ds.graph(i)
        seeds, _ = seed_positions(g)
        ev = collect_evidence(ds, i, probs[k] if probs is not None else None,
                              relation_paths[k] if relation_paths is not None else None, retrievers, cfg, g)
        per_q.append((ev, answer_hops(g, seeds, gold_ids(g, ds.records[i].answers, seeds))))
    rows = []
    for r in retrievers:
        examples, info = [], []
        for i, (ev, hops) in zip(indices, per_q):
            rec = ds.records[i]
            e = ev[r]
            kept, dropped = fit_lines(e.lines, cfg.evidence_tokens, tok)
            examples.append(rag_example(str(rec.graph_id), rec.question, None if r == "none" else kept, rec.answers))
            gold = {normalize(a) for a in rec.answers}
            ents = {normalize(n) for n in Evidence(kept).entities()}
            info.append({"dataset": key, "retriever": r, "index": int(i), "question": rec.question, "hops": hops,
                         "coverage": float(bool(gold & ents)), "evidence_lines": len(kept), "lines_dropped": dropped,
                         "missing_seed": e.missing_seed, "no_path": e.no_path,
                         "empty_candidates": bool(e.empty_candidates), "ungrounded": bool(e.ungrounded)})
        generator.tokenize(examples)
        answers, seconds = answer_examples(generator, examples, batch_size, adapters=(r != "none"), desc=f"{key} {r}")
        for ex, a, row in zip(examples, answers, info):
            row.update(prediction=a, answers=ex.answers, answer_seconds=seconds / max(len(examples), 1),
                       input_tokens=len(t.prefix) + ex.num_prompt_tokens + len(t.suffix),
                       **kgqa_scores(a, ex.answers))
            rows.append(row)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------- the whole LLM half
def run_gnn_rag(results: dict, run_dir: str | Path, llm: LLMConfig = LLMConfig(), train: TrainConfig = TrainConfig(),
                cfg: GNNRAGConfig = GNNRAGConfig(), max_train: int | None = None, max_val: int | None = None,
                max_test: int | None = None, retrievers: tuple[str, ...] = RETRIEVERS, seed: int = 0,
                rog_train: TrainConfig | None = None) -> dict:
    """Train the answer generator and the relation-path generator per dataset family, then answer every test
    question of every ``results`` entry (from :func:`gr_core.gnn_rag.run_reasoner`) with every retriever.

    Args:
        results: dataset key (``webqsp``, ``metaqa-2hop`` ...) -> reasoner result; keys with the same dataset name
            share one generator trained on all their training questions.
        max_train, max_val: questions per dataset key for the LLM fine-tunes; max_test: test questions answered.
        train, rog_train: optimization of the answer generator and of the relation-path generator (default: same).
    Returns:
        ``{"rows": per (question, retriever) DataFrame, "training": per family dict of histories and counts,
        "relation_paths": key -> {"indices", "paths"}: the generated relation paths of each test question}``.
    """
    import pandas as pd

    run_dir = Path(run_dir)
    families: dict[str, list[str]] = {}
    for key, r in results.items():
        families.setdefault(r["ds"].name, []).append(key)
    frames, training, rel_paths_out = [], {}, {}
    needs_rog = any("rog" in r for r in retrievers)
    for family, keys in families.items():
        dss = [results[k]["ds"] for k in keys]
        t0 = time.perf_counter()
        tokenizer = load_tokenizer(llm)
        tr_ans, tr_rel, tr_counts = training_examples(dss, max_train, "train", tokenizer, cfg)
        va_ans, va_rel, va_counts = training_examples(dss, max_val, "val", tokenizer, cfg)
        max_txt = cfg.evidence_tokens + 64  # instruction + "Reasoning Paths:" on top of the line budget
        generator, gen_hist = train_lora_llm(tr_ans, va_ans, run_dir / f"{family}-answer-generator", llm, train,
                                             max_txt, seed)
        info = {"answer_generator": {"history": gen_hist, "train_examples": len(tr_ans), "val_examples": len(va_ans),
                                     "train_counts": tr_counts, "val_counts": va_counts,
                                     "seconds": round(time.perf_counter() - t0, 1)}}
        rog = None
        if needs_rog:
            t0 = time.perf_counter()
            rog, rog_hist = train_lora_llm(tr_rel, va_rel, run_dir / f"{family}-relation-generator", llm,
                                           rog_train or train, max_txt, seed)
            info["relation_generator"] = {"history": rog_hist, "train_examples": len(tr_rel),
                                          "val_examples": len(va_rel), "seconds": round(time.perf_counter() - t0, 1)}
        training[family] = info
        for key in keys:
            r = results[key]
            ds, n = r["ds"], len(r["test_indices"][:max_test or None])
            indices, probs = r["test_indices"][:n], r["probs"][:n]
            rel_paths = None
            if rog is not None:
                t0 = time.perf_counter()
                rel_paths = generate_relation_paths(rog, [ds.records[i].question for i in indices], cfg.rog_beams,
                                                    train.eval_batch_size, desc=f"{key} relation paths")
                info.setdefault("relation_path_seconds", {})[key] = round(time.perf_counter() - t0, 2)
                rel_paths_out[key] = {"indices": [int(i) for i in indices], "paths": rel_paths}
            frames.append(evaluate_retrievers(key, ds, indices, probs, generator, rel_paths, retrievers, cfg,
                                              train.eval_batch_size))
        del generator, rog
    return {"rows": pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(), "training": training,
            "relation_paths": rel_paths_out}


# ---------------------------------------------------------------------- tables
def training_table(training: dict) -> "pd.DataFrame":
    """One row per LoRA fine-tune of :func:`run_gnn_rag`'s ``training``: examples, epochs, final val loss, seconds."""
    import pandas as pd

    return pd.DataFrame([{"family": family, "model": name, "train examples": v["train_examples"],
                          "val examples": v["val_examples"], "epochs": len(v["history"]),
                          "final val loss": round(v["history"][-1]["val_loss"], 3) if v["history"] else None,
                          "seconds": v["seconds"]}
                         for family, info in training.items() for name, v in info.items()
                         if isinstance(v, dict) and "history" in v])


def one_question(rows: "pd.DataFrame", dataset: str, position: int = 0) -> "pd.DataFrame":
    """Every retriever's evidence size, coverage, prompt tokens and answer for one test question of ``dataset``."""
    sub = rows[rows.dataset == dataset]
    index = sub["index"].drop_duplicates().iloc[position]
    return sub[sub["index"] == index][["retriever", "evidence_lines", "coverage", "input_tokens", "prediction",
                                       "answers", "hit"]]


def retriever_table(rows: "pd.DataFrame") -> "pd.DataFrame":
    """One row per (dataset, retriever): Hit, Hit@1, F1 (reference, unbounded precision) and bounded F1 in %,
    answer coverage in %, median input tokens, LLM calls, mean evidence lines, the bad-input counts, and the
    paper's numbers beside them."""
    import pandas as pd

    out = []
    for (key, r), g in rows.groupby(["dataset", "retriever"], sort=False):
        paper = PAPER_GNN_RAG.get((key, r), {})
        out.append({"dataset": key, "retriever": r, "questions": len(g), "Hit": round(100 * g.hit.mean(), 2),
                    "Hit@1": round(100 * g.hit1.mean(), 2), "F1": round(100 * g.f1.mean(), 2),
                    "F1 bounded": round(100 * g.f1_bounded.mean(), 2), "coverage %": round(100 * g.coverage.mean(), 1),
                    "median tokens": float(g.input_tokens.median()), "LLM calls": LLM_CALLS[r],
                    "mean lines": round(g.evidence_lines.mean(), 1), "lines over budget": int(g.lines_dropped.sum()),
                    "missing question entities": int(g.missing_seed.sum()), "candidates without path": int(g.no_path.sum()),
                    "empty candidate sets": int(g.empty_candidates.sum()), "ungrounded (RoG)": int(g.ungrounded.sum()),
                    "s / answer": round(g.answer_seconds.mean(), 3),
                    "paper Hit": paper.get("Hit"), "paper Hit@1": paper.get("Hit@1"), "paper F1": paper.get("F1"),
                    "paper tokens": paper.get("tokens"), "paper source": paper.get("source", "")})
    return pd.DataFrame(out)


def hop_table(rows: "pd.DataFrame") -> "pd.DataFrame":
    """Hit / Hit@1 / F1 (%) and coverage by the shortest question-entity -> answer distance, per dataset and
    retriever (``unreachable``: no gold answer reachable in the graph), with GNN-RAG Table 8's WebQSP F1."""
    import pandas as pd

    df = rows.assign(hop=rows.hops.map(lambda h: "unreachable" if pd.isna(h) else str(int(h))))
    out = []
    for (key, hop, r), g in df.groupby(["dataset", "hop", "retriever"], sort=True):
        paper = PAPER_HOPS_F1.get((r, int(hop))) if key == "webqsp" and hop.isdigit() else None
        out.append({"dataset": key, "hops": hop, "retriever": r, "questions": len(g),
                    "Hit": round(100 * g.hit.mean(), 1), "Hit@1": round(100 * g.hit1.mean(), 1),
                    "F1": round(100 * g.f1.mean(), 1), "coverage %": round(100 * g.coverage.mean(), 1),
                    "paper F1": paper})
    return pd.DataFrame(out)


def metrics_record(rows: "pd.DataFrame", gnn_only: "pd.DataFrame | None" = None) -> dict:
    """``metrics.json``: per dataset, per retriever Hit / Hit@1 / F1 / coverage / median tokens (and the GNN-only
    H@1 / F1 when given)."""
    table = retriever_table(rows)
    out: dict = {}
    for rec in table.to_dict("records"):
        out.setdefault(rec["dataset"], {})[rec["retriever"]] = {
            k: rec[k] for k in ("questions", "Hit", "Hit@1", "F1", "F1 bounded", "coverage %", "median tokens",
                                "LLM calls", "missing question entities", "candidates without path",
                                "empty candidate sets", "ungrounded (RoG)")}
    if gnn_only is not None:
        for rec in gnn_only.to_dict("records"):
            out.setdefault(rec["dataset"], {})["gnn_only"] = {"Hit@1": rec["h1"], "F1": rec["f1"], "questions": rec["n"]}
    return out
