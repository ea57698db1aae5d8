"""GNN-RAG's LLM (GNN-RAG paper §4.2, App. B; docs/method.md §3.3): the answer generator, one LoRA fine-tune per
dataset family on gold paths that answers every retriever's prompt (GNN-RAG prompt A), and the RoG-style relation-path
generator (beam search) whose paths :func:`~gr_core.gnn_rag.evidence.ground_relation_paths` follows in the graph."""
from __future__ import annotations

import hashlib
from dataclasses import asdict
from pathlib import Path

from ..config import LLMConfig, llm_identity
from ..evaluate import answer_matches, normalize
from ..g_retriever.model import Example, GraphLLM, LoRAConfig, ModelConfig
from ..g_retriever.train import TrainConfig, fit, predict_timed
from ..llm import weights_identity
from ..prompts import ROG_PLANNING_PROMPT, gnn_rag_parts
from ..runs import config_hash, progress, seed_everything, write_json
from .evidence import GNNRAGConfig, format_relation_path, parse_relation_path, relation_sequences
from .reasoning_paths import gold_ids, reasoning_paths, seed_positions


def rog_example(uid: str, question: str, label: str = "") -> Example:
    """RoG's planning prompt for one question (label: one relation path)."""
    return Example(uid=uid, question=ROG_PLANNING_PROMPT.format(question=question.strip()), desc="", label=label,
                   answers=[])


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


def training_examples(datasets: list, max_questions: int | None, split: str, tokenizer,
                      cfg: GNNRAGConfig = GNNRAGConfig(), evidence: list[dict] | None = None
                      ) -> tuple[list[Example], list[Example], dict]:
    """Answer-generator and relation-generator examples from the gold paths of ``split`` (the verbalized shortest
    paths from the question entities to the gold answers, GNN-RAG's training input).

    ``evidence`` (beyond the paper; per dataset, question index -> lines, e.g. the paths to a held-out reasoner's
    candidates, :func:`gr_core.studies.gnn_rag.crossfit_evidence`): the answer generator reads these instead of the
    gold paths, to train on evidence like the evidence it answers from.

    Returns:
        ``(answer examples, relation-path examples, counts)``; questions without a gold path are left out of both
        (GNN-RAG and RoG train only on reachable answers) and counted, and with ``evidence`` so are the answer
        examples whose kept lines name no gold answer.
    """
    answer_ex, rel_ex, skipped, unseen, total = [], [], 0, 0, 0
    for d, ds in enumerate(datasets):
        for i in progress(list(ds.split.get(split, []))[:max_questions or None], desc=f"{ds.name} {split} gold paths"):
            rec, g = ds.records[i], ds.graph(i)
            total += 1
            seeds, _ = seed_positions(g)
            lines = reasoning_paths(g, seeds, gold_ids(g, rec.answers, seeds), cfg.max_lines_per_pair).lines
            if not lines:
                skipped += 1
                continue
            for rels in relation_sequences(lines)[:cfg.rog_paths_per_question]:
                rel_ex.append(rog_example(str(rec.graph_id), rec.question, format_relation_path(rels)))
            kept, _ = fit_lines(lines if evidence is None else evidence[d][i], cfg.evidence_tokens, tokenizer)
            if evidence is not None and not any(answer_matches(" ".join(kept), a) for a in rec.answers):
                unseen += 1  # a label the evidence cannot support would teach the generator to guess
                continue
            answer_ex.append(rag_example(str(rec.graph_id), rec.question, kept, rec.answers))
    counts = {"questions": total, "without_gold_path": skipped}
    return answer_ex, rel_ex, counts if evidence is None else counts | {"gold_not_in_evidence": unseen}


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
    llm_identity(key["llm"])  # the LLM's loading options (gradient checkpointing, quantization) at their defaults
    return key


def train_lora_llm(train_ex: list[Example], val_ex: list[Example], run_dir: str | Path, llm: LLMConfig = LLMConfig(),
                   train: TrainConfig = TrainConfig(), max_txt_len: int = 512, seed: int = 0,
                   lora: LoRAConfig = LoRAConfig()) -> tuple[GraphLLM, list[dict]]:
    """LoRA fine-tune of the LLM on text-only examples (no graph encoder), checkpointed in ``run_dir/ckpt`` under a
    key of the configs and the examples' digest: a rerun on the same data resumes, or reloads the best epoch."""
    cfg = ModelConfig(llm=llm, lora=lora, graph_source="none", max_txt_len=max_txt_len)
    seed_everything(seed)
    model = GraphLLM(cfg)
    model.tokenize(train_ex)
    model.tokenize(val_ex)
    run_dir = Path(run_dir)
    key = {"model": model_key(cfg), "weights": weights_identity(llm.model), "train": asdict(train), "seed": seed,
           "train_data": _digest(train_ex), "val_data": _digest(val_ex), "num_train": len(train_ex),
           "num_val": len(val_ex)}
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
                    desc: str = "answers") -> tuple[list[str], list[float]]:
    """Greedy answers and each one's seconds (:func:`~gr_core.g_retriever.train.predict_timed`); ``adapters=False``
    answers with the untuned LLM (LoRA disabled) for the no-retrieval row."""
    if adapters or not hasattr(model.llm, "disable_adapter"):
        return predict_timed(model, examples, batch_size, desc=desc)
    with model.llm.disable_adapter():
        return predict_timed(model, examples, batch_size, desc=desc)


# ---------------------------------------------------------------------- grounded answers (beyond the papers)
def named_node(line: str, names: dict[str, str]) -> str | None:
    """The node a reply line names: the longest normalized node name the normalized line contains (word-bounded; the
    whole line included), None when it names none. ``names``: normalized name -> name."""
    text = normalize(line)
    if text and text in names:  # the whole line is a name: the longest it can contain
        return names[text]
    padded = f" {text} "
    inside = [n for n in names if n and f" {n} " in padded]
    return names[max(inside, key=len)] if inside else None


def name_index(names) -> dict[str, str]:
    """Normalized name -> name, what :func:`named_node` looks names up in; a dict is taken as built already."""
    return names if isinstance(names, dict) else {normalize(n): n for n in names}


def answer_kind(reply: str, gold: list[str], candidates, evidence, graph_names) -> str:
    """What the reply's first line (all Hit@1 reads) is: ``gold``, ``another candidate`` (of the GNN), ``evidence
    node`` (not a candidate), ``outside the evidence`` (a node of the question's graph), ``no node`` or ``empty``.
    Each name group is a list or its :func:`name_index`."""
    first = next((x for x in reply.split("\n") if x.strip()), "")
    if not first:
        return "empty"
    if any(answer_matches(first, a) for a in gold):
        return "gold"
    for kind, names in (("another candidate", candidates), ("evidence node", evidence),
                        ("outside the evidence", graph_names)):
        if named_node(first, name_index(names)) is not None:
            return kind
    return "no node"


def ground_reply(reply: str, evidence: list[str], fallback: str | None) -> tuple[str, bool]:
    """The reply's lines replaced by the evidence nodes they name (:func:`named_node`; none or repeats dropped), or
    ``fallback`` (the GNN's top candidate) where it names none. Returns ``(grounded reply, fell back)``."""
    names = name_index(evidence)
    kept = list(dict.fromkeys(n for n in (named_node(x, names) for x in reply.split("\n")) if n is not None))
    if kept:
        return "\n".join(kept), False
    return fallback or "", True
