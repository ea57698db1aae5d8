"""GNN-RAG's LLM half against the GNN beneath it (issue 59; docs/results.md, "GNN-RAG's LLM half"):

    python bench/gnn_rag_llm_curve.py --family webqsp --sizes 96,384,976 --seeds 0,1
    python bench/gnn_rag_llm_curve.py --family metaqa --sizes 96,384 --seeds 0
    python bench/gnn_rag_llm_curve.py --family webqsp --sizes 384 --seeds 0 --train-evidence gnn
        ->  outputs/bench/gnn_rag_llm_curve-<family>[-gnn-evidence].json

1. The answer generator's learning curve: notebook 04's LoRA recipe (quick preset: 2 epochs, lr 1e-3, evidence
   256 tokens) trained on the first N training questions of each dataset key of the family, for each size in
   ``--sizes`` (the seeds in ``--seeds`` at the largest size, seed 0 below it), each answering the first
   ``--max-test`` test questions with the GNN's reasoning paths; Hit@1 and F1 of the free-text reply and of the
   grounded reply, paired with the GNN alone on the same questions (exact McNemar on Hit@1 against H@1), with the
   training cost (seconds, tokens) per size.
With ``--train-evidence gnn`` (beyond the paper) the generator trains on the paths to the candidates of a reasoner
that did not see the question (two folds of the first max(976, size) training questions, the served reasoners'
settings) instead of the gold paths: the evidence it then answers from at test time.
2. Why it loses, at the largest size (seed 0): what the reply's first line is where the gold answer is among the
   GNN's candidates (:func:`gr_core.studies.gnn_rag_llm.failure_table`), and the same questions answered again with
   the evidence lines in reverse order (the GNN's least probable candidate first) and with twice the evidence budget.

The reasoners are notebook 04's quick-preset reasoners (``outputs/quick/04_gnn_rag/reasoners``, trained there);
LoRA checkpoints go to ``.cache/bench/gnn_rag_llm_curve`` and are reused when their data and settings are unchanged.
"""
import argparse
import time
from dataclasses import replace

import numpy as np
from common import write_result
from reasoner_studies import key_test_graphs

import gr_core.studies.gnn_rag_llm as half
from gr_core.config import LLMConfig
from gr_core.g_retriever.train import TrainConfig
from gr_core.gnn_rag import ReasonerConfig, ReasonerTrainConfig, load_reasoner, node_probabilities, score_questions
from gr_core.gnn_rag.evidence import GNNRAGConfig
from gr_core.gnn_rag.generation import train_lora_llm, training_examples
from gr_core.llm import load_tokenizer
from gr_core.paths import cache_root, repo_root
from gr_core.stats import compare, signed_rank, wilson_interval
from gr_core.studies.gnn_rag import crossfit_evidence

KEYS = {"webqsp": ("webqsp",), "metaqa": ("metaqa-1hop", "metaqa-2hop", "metaqa-3hop")}
TRAIN = TrainConfig(lr=1e-3, num_epochs=2, batch_size=8, eval_batch_size=16)  # notebook 04, quick and cpu presets
CFG = GNNRAGConfig(evidence_tokens=256)
MAX_VAL = 24


def key_record(g) -> dict:
    """Hit@1 / F1 of one key's rows against the GNN alone on the same questions (exact McNemar on Hit@1)."""
    a, b = g.hit1.to_numpy(), g.gnn_h1.to_numpy()
    r, f = compare(a, b), signed_rank(g.f1.to_numpy(), g.gnn_f1.to_numpy())
    return {"n": int(len(g)), "hit1": round(100 * a.mean(), 2),
            "hit1_ci": [round(100 * x, 1) for x in wilson_interval(a.sum(), len(a))],
            "hit": round(100 * g.hit.mean(), 2), "f1": round(100 * g.f1.mean(), 2), "gnn_h1": round(100 * b.mean(), 2),
            "gnn_f1": round(100 * g.gnn_f1.mean(), 2),
            "llm_only": int(r["a_only"]), "gnn_only": int(r["b_only"]), "p_hit1": float(f"{r['p']:.4g}"),
            "p_f1": float(f"{f['p']:.4g}"), "fallbacks": int(g.grounded_fallback.sum())}


def main() -> None:
    ap = argparse.ArgumentParser(prog="python bench/gnn_rag_llm_curve.py", description=__doc__.split("\n")[0])
    ap.add_argument("--family", choices=sorted(KEYS), required=True)
    ap.add_argument("--sizes", default="96,384,976", help="training questions per dataset key")
    ap.add_argument("--seeds", default="0,1", help="seeds at the largest size (seed 0 below it)")
    ap.add_argument("--max-test", type=int, default=200)
    ap.add_argument("--reasoners", default=str(repo_root() / "outputs/quick/04_gnn_rag/reasoners"))
    ap.add_argument("--train-evidence", choices=("gold", "gnn"), default="gold",
                    help="what the answer generator reads in training: the gold paths (GNN-RAG) or the paths to the "
                         "candidates of a reasoner that did not train on the question (cross-fitted, two folds)")
    args = ap.parse_args()
    sizes, seeds = [int(x) for x in args.sizes.split(",")], [int(x) for x in args.seeds.split(",")]
    cache = cache_root() / "bench/gnn_rag_llm_curve"
    llm = LLMConfig()
    results = {}
    for key in KEYS[args.family]:
        ds, idx, test = key_test_graphs(key, args.max_test)
        model = load_reasoner(f"{args.reasoners}/{key}.pt")
        probs = node_probabilities(model, test)
        results[key] = {"ds": ds, "test_indices": idx, "probs": probs,
                        "scores": score_questions(model, test, probs=probs)}
    train_evidence = None
    if args.train_evidence == "gnn":  # the served reasoners' settings (quick preset), on folds of the training split
        train_evidence = {}
        for key, r in results.items():
            ds = r["ds"]
            tcfg = ReasonerTrainConfig(num_epochs=3 if key == "metaqa-3hop" else 5, seed=0, lr=2e-3)
            train_evidence[key] = crossfit_evidence(ds, list(ds.split["train"])[:max(976, max(sizes))],
                                                    list(ds.split["val"])[:50], ReasonerConfig(), tcfg, CFG)
    tag = f"{args.family}" + ("" if args.train_evidence == "gold" else "-gnn-evidence")
    curve, rows_at = [], {}
    for size in sizes:
        for seed in (seeds if size == max(sizes) else [0]):
            t0 = time.perf_counter()
            rag = half.run_gnn_rag(results, cache / f"{tag}-n{size}-s{seed}", llm, TRAIN, CFG, max_train=size,
                                   max_val=MAX_VAL, max_test=args.max_test, retrievers=("gnn",), seed=seed,
                                   train_evidence=train_evidence)
            rows = half.with_grounded(rag["rows"])
            gen = rag["training"][args.family]["answer_generator"]
            hist = gen["history"]
            rec = {"size": size, "seed": seed, "train_examples": gen["train_examples"],
                   "train_seconds": round(sum(h["train_seconds"] for h in hist), 1),
                   "train_tokens": sum(h["train_tokens"] for h in hist), "val_loss": round(hist[-1]["val_loss"], 4),
                   "wall_seconds": round(time.perf_counter() - t0, 1),
                   "free_text": {k: key_record(g) for k, g in rows[rows.retriever == "gnn"].groupby("dataset")},
                   "grounded": {k: key_record(g) for k, g in rows[rows.retriever == "gnn grounded"].groupby("dataset")}}
            curve.append(rec)
            rows_at[(size, seed)] = rows
            for k, v in rec["free_text"].items():
                print(f"{k} n_train {size} seed {seed}: Hit@1 {v['hit1']} (grounded {rec['grounded'][k]['hit1']}) "
                      f"vs GNN {v['gnn_h1']}, p {v['p_hit1']:.3g}; {rec['train_seconds']} s training", flush=True)
    # why it loses, at the largest size: what the first line is, and two changes of the prompt on the same model
    top = max(sizes)
    rows = rows_at[(top, 0)]
    failures = half.failure_table(rows).to_dict("records")
    tokenizer = load_tokenizer(llm)
    dss = [results[k]["ds"] for k in KEYS[args.family]]
    ev = [train_evidence[k] for k in KEYS[args.family]] if train_evidence else None
    tr, _, _ = training_examples(dss, top, "train", tokenizer, CFG, ev)
    va, _, _ = training_examples(dss, MAX_VAL, "val", tokenizer, CFG, ev)
    generator, _ = train_lora_llm(tr, va, cache / f"{tag}-n{top}-s0" / f"{args.family}-answer-generator",
                                  llm, TRAIN, CFG.evidence_tokens + 64, 0)  # finished: reloaded, not trained
    fit = half.fit_lines
    variants = {}
    changes = (("lines reversed", CFG, True), ("budget 512", replace(CFG, evidence_tokens=512), False))
    for label, cfg, reverse in changes:
        generator.cfg = replace(generator.cfg, max_txt_len=cfg.evidence_tokens + 64)
        half.fit_lines = (lambda lines, b, t: (lambda k, d: (k[::-1], d))(*fit(lines, b, t))) if reverse else fit
        try:
            for key, r in results.items():
                v = half.answer_with_evidence(key, r["ds"], r["test_indices"][:args.max_test], r["probs"], generator,
                                              None, ("gnn",), cfg, TRAIN.eval_batch_size)
                base = rows[(rows.dataset == key) & (rows.retriever == "gnn")].set_index("index")
                v = v.set_index("index").loc[base.index]
                lost = base.gold_in_candidates & (base.hit1 == 0)
                c = compare(v.hit1.to_numpy(), base.hit1.to_numpy())
                variants.setdefault(label, {})[key] = {
                    "hit1": round(100 * v.hit1.mean(), 2), "as_trained_hit1": round(100 * base.hit1.mean(), 2),
                    "p_hit1": float(f"{c['p']:.4g}"), "lost_questions": int(lost.sum()),
                    "lost_now_right": int((v.hit1[lost] == 1).sum()),
                    "right_now_lost": int(((base.hit1 == 1) & (v.hit1 == 0)).sum()),
                    "median_tokens": float(np.median(v.input_tokens))}
                v = variants[label][key]
                print(f"{key} {label}: Hit@1 {v['hit1']} vs {v['as_trained_hit1']} (p {c['p']:.3g})", flush=True)
        finally:
            half.fit_lines = fit
    out = {"family": args.family, "keys": list(KEYS[args.family]), "max_test": args.max_test,
           "train_evidence": args.train_evidence,
           "settings": {"train": TRAIN.__dict__, "evidence_tokens": CFG.evidence_tokens, "max_val": MAX_VAL,
                        "llm": llm.model, "reasoners": args.reasoners},
           "curve": curve, "failures": failures, "variants": variants}
    print("wrote", write_result(f"gnn_rag_llm_curve-{tag}", out))


if __name__ == "__main__":
    main()
