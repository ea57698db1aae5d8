"""fp32 against bf16 on this CPU, side by side in one process: G-Retriever's training step (with and without LoRA),
its answers to the 554 ExplaGraphs test questions, and the sentence encoder.

    python bench/precision.py            ->  outputs/bench/precision.json
    python bench/precision.py --steps 4 --answers 64   (a shorter run)

Every figure names its dtype and the CPU; timings from different CPUs are not comparable
(gr_core.precision). The variants of the LLM, each loaded the way its label says:

- ``fp32``: fp32, SDPA attention, peft's own LoRA dropout: what ``dtype="auto"`` ran on CPU before, and still runs
  on CPUs without bf16 units;
- ``fp32_eager``: the same with eager attention (whether the attention choice would pay in fp32 too);
- ``fp32_uniform``: fp32 with ``LoRAConfig(dropout_masks="uniform16")`` (LoRA only: masks from 16-bit draws,
  gr_core.dropout);
- ``bf16_before``: bf16 weights with nothing else changed (SDPA, the strided vocabulary projection that copies its
  weight): the 1.2x first measured;
- ``bf16_sdpa``: bf16 with the projection fixed but SDPA attention (isolates the attention choice);
- ``bf16``: bf16 as ``dtype="auto"`` runs it on a CPU with bf16 units (eager attention, contiguous projection input,
  peft's LoRA dropout, the default);
- ``bf16_uniform``: the same with ``dropout_masks="uniform16"`` (LoRA only).

The training step is the quick preset's G-Retriever (Graph Transformer 256 x 4 layers, no system prompt, lr 1e-3,
batch 8) on the first ExplaGraphs training questions, one warm-up step then ``--steps`` timed steps over the same
batches for every variant. Answers: greedy, 32 new tokens at most, batches of 16, length-sorted, with the weights of
``--checkpoint`` (a trained run answers a word and EOS, as in the task) or untrained ones (seed 0, which mostly write
until the budget); the same weights for every variant, and the tokens each generates are counted. MFU divides the
model FLOPs (4 x non-embedding parameters per real token for a frozen LLM's forward and input-gradient pass, 2 x for
inference, plus the vocabulary projection where computed) by the measured matrix-product peak of the dtype used, and
the best dtype's peak is beside it.
"""
from __future__ import annotations

import argparse
import gc
import statistics
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from common import gemm_peak_gflops, llm_flops, mean_loss, train_step_seconds, write_result
from sentence_transformers import SentenceTransformer
from transformers import AutoModelForCausalLM

from gr_core.config import LLMConfig, TextEncoderConfig
from gr_core.dropout import use_uniform_dropout
from gr_core.g_retriever.examples import build_examples
from gr_core.g_retriever.graph_encoder import GNNConfig
from gr_core.g_retriever.model import SOFT_PROMPT_INIT, GraphLLM
from gr_core.g_retriever.train import TrainConfig, make_run_config, param_groups, predict
from gr_core.graphqa import DatasetConfig, load_dataset
from gr_core.kernels import contiguous_head_input
from gr_core.llm import load_llm, load_tokenizer, model_path
from gr_core.paths import data_root
from gr_core.precision import attention_implementation, cpu_info
from gr_core.text_encoder import embedded_encoder_dir, load_text_encoder

GNN = GNNConfig(kind="gt", hidden=256, num_layers=4, heads=4)  # the quick preset's encoder
TRAIN = TrainConfig(lr=1e-3, batch_size=8, eval_batch_size=16)  # the quick preset's ExplaGraphs runs
# name -> (dtype, attention, contiguous projection input, LoRA dropout masks from 16-bit draws)
VARIANTS = {
    "fp32": (torch.float32, "sdpa", False, False),
    "fp32_eager": (torch.float32, "eager", False, False),
    "fp32_uniform": (torch.float32, "sdpa", False, True),
    "bf16_before": (torch.bfloat16, "sdpa", False, False),
    "bf16_sdpa": (torch.bfloat16, "sdpa", True, False),
    "bf16": (torch.bfloat16, "eager", True, False),
    "bf16_uniform": (torch.bfloat16, "eager", True, True),
}
SHAPES = ((1600, 576, 1536), (1600, 1536, 576), (1600, 576, 576), (16, 576, 49152))  # SmolLM2's products


def cpu_record() -> dict:
    """The CPU part of :func:`gr_core.precision.precision_record` (this bench's result has no dtype of its own)."""
    info = asdict(cpu_info())
    info["cpu_model"] = info.pop("model")
    return info


def gemm_rates(dtype) -> dict:
    """GFLOP/s of ``(m, k) @ (k, n)`` at the LLM's shapes."""
    out = {}
    for m, k, n in SHAPES:
        a, b = torch.randn(m, k).to(dtype), torch.randn(k, n).to(dtype)
        a @ b
        best = min(_seconds(lambda: a @ b) for _ in range(5))
        out[f"{m}x{k}x{n}"] = round(2 * m * k * n / best / 1e9, 1)
    return out


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def load_variant(name: str, model: str = LLMConfig.model):
    """The LLM ``model`` loaded as variant ``name`` describes (see the module docstring); variants that are what
    :func:`gr_core.llm.load_llm` does for their dtype load through it, so that they time what ships."""
    dtype, attention, contiguous, _ = VARIANTS[name]
    cfg = LLMConfig(model=model, dtype=str(dtype).removeprefix("torch."))
    if (attention, contiguous) == ((attention_implementation(dtype, "cpu") or "sdpa"), dtype != torch.float32):
        return load_llm(cfg)
    llm = AutoModelForCausalLM.from_pretrained(model_path(cfg), dtype=dtype, attn_implementation=attention)
    if contiguous:
        llm.get_output_embeddings().register_forward_pre_hook(contiguous_head_input)
    llm.eval().requires_grad_(False)
    return llm, load_tokenizer(cfg)


def build_model(name: str, method: str, in_dim: int, model: str = LLMConfig.model) -> GraphLLM:
    torch.manual_seed(0)
    llm, tokenizer = load_variant(name, model)
    cfg = make_run_config("explagraphs", method, gnn=GNN, system_prompt="", llm=LLMConfig(model=model)).model
    graph_llm = GraphLLM(cfg, in_dim=in_dim, llm=llm, tokenizer=tokenizer,
                         soft_prompt_init=SOFT_PROMPT_INIT["explagraphs"])
    if VARIANTS[name][3]:  # what LoRAConfig(dropout_masks="uniform16") does; the same weights and data otherwise
        use_uniform_dropout(graph_llm)
    return graph_llm


def train_steps(model: GraphLLM, examples, steps: int) -> dict:
    """Seconds and real tokens of ``steps`` training steps after one warm-up step (forward, backward, clip, AdamW)."""
    opt = torch.optim.AdamW(param_groups(model, TRAIN), lr=TRAIN.lr, weight_decay=TRAIN.weight_decay, betas=TRAIN.betas)
    params = list(model.trainable_parameters().values())
    model.train()
    seconds, tokens, logit_rows = [], [], []
    torch.manual_seed(1)
    for k in range(steps + 1):
        batch = model.collate(examples[k * TRAIN.batch_size:(k + 1) * TRAIN.batch_size], with_label=True)
        dt = train_step_seconds(lambda: mean_loss(model, batch), opt, params, TRAIN.grad_clip)
        if k:
            seconds.append(dt)
            tokens.append(batch.num_tokens)
            logit_rows.append(batch.input_ids.shape[0] * (batch.label_width + 1))
    return {"seconds": seconds, "tokens": tokens, "logit_rows": logit_rows}


def answer(model: GraphLLM, examples) -> dict:
    model.eval()
    predict(model, examples[:TRAIN.eval_batch_size], TRAIN.eval_batch_size)  # warm-up
    answers, seconds = predict(model, examples, TRAIN.eval_batch_size)
    new_tokens = sum(len(model.tokenizer(a, add_special_tokens=False)["input_ids"]) for a in answers)
    return {"seconds": seconds, "answers": answers, "new_tokens": new_tokens,
            "prompt_tokens": sum(len(model.template.prefix) + model.num_slots + ex.num_prompt_tokens
                                 + len(model.template.suffix) for ex in examples)}


def encoder_rates(names: list[str]) -> dict:
    """names/s of the sentence encoder in fp32, bf16 with SDPA and bf16 as ``TextEncoderConfig(dtype="bfloat16")``
    loads it (eager attention on CPU), and how far the bf16 vectors are from the fp32 ones."""

    path = str(embedded_encoder_dir())
    encoders = {"fp32": load_text_encoder(TextEncoderConfig()),
                "bf16_sdpa": SentenceTransformer(path, device="cpu", model_kwargs={"dtype": torch.bfloat16}),
                "bf16": load_text_encoder(TextEncoderConfig(dtype="bfloat16"))}
    out, vectors = {}, {}
    for name, enc in encoders.items():
        enc.encode(names[:256], batch_size=64)
        start = time.perf_counter()
        vectors[name] = np.asarray(enc.encode(names, batch_size=64, convert_to_numpy=True, normalize_embeddings=True),
                                   np.float32)
        out[name] = {"names_per_s": round(len(names) / (time.perf_counter() - start), 1)}
    for name in ("bf16_sdpa", "bf16"):
        cos = (vectors["fp32"] * vectors[name]).sum(1) / np.linalg.norm(vectors[name], axis=1)
        out[name].update(speedup=round(out[name]["names_per_s"] / out["fp32"]["names_per_s"], 3),
                         min_cosine_to_fp32=round(float(cos.min()), 5), mean_cosine_to_fp32=round(float(cos.mean()), 6))
    return out


def topk_agreement(ds, questions: int, k: int = 3) -> dict:
    """How often the top-k nodes by cosine to the question (the PCST node prizes of GR §5.2, k = 3 for WebQSP) are
    the same set with bf16 vectors as with fp32 ones, over the first ``questions`` WebQSP test questions."""

    encoders = {d: load_text_encoder(TextEncoderConfig(dtype=d)) for d in ("float32", "bfloat16")}
    same, sizes = 0, []
    for i in ds.split["test"][:questions]:
        g = ds.graph(i)
        texts = g.nodes.node_attr.astype(str).tolist()
        sizes.append(len(texts))
        tops = []
        for enc in encoders.values():
            v = enc.encode(texts + [ds.records[i].question], batch_size=64, convert_to_numpy=True,
                           normalize_embeddings=True).astype(np.float32)
            tops.append(set(np.argsort(-(v[:-1] @ v[-1]), kind="stable")[:k].tolist()))
        same += tops[0] == tops[1]
    return {"questions": questions, "k": k, "same_top_k": same, "share_same": round(same / questions, 4),
            "mean_nodes": round(float(np.mean(sizes)), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=6, help="timed training steps per variant (after one warm-up)")
    parser.add_argument("--answers", type=int, default=0, help="test questions to answer (0: all 554; -1: none)")
    parser.add_argument("--names", type=int, default=3000, help="MetaQA KB names for the sentence encoder (0: skip)")
    parser.add_argument("--agreement-questions", type=int, default=100,
                        help="WebQSP questions for the top-k check (0: skip)")
    parser.add_argument("--checkpoint", default=None,
                        help="a G-Retriever run directory of this configuration whose ckpt/best.pt answers (trained "
                             "answers are a word and EOS, as in the real task); default: untrained weights")
    parser.add_argument("--llm", default=LLMConfig.model,
                        help="the LLM (an embedded name or a HF path); another than the default writes "
                             "precision-<name>.json")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated subset of the variants")
    parser.add_argument("--methods", default="g_retriever,g_retriever_lora", help="comma-separated training methods")
    parser.add_argument("--force", action="store_true", help="run even where this CPU has no bf16 support")
    args = parser.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown or "fp32" not in variants:
        raise SystemExit(f"--variants: unknown {unknown} (choose from {list(VARIANTS)}; fp32 is the reference and "
                         "must be among them)")
    if not cpu_info().native_bf16 and not args.force:
        raise SystemExit(f"{cpu_info().model} has neither AMX nor AVX512-BF16: bf16 is emulated here (50-200x "
                         "slower than fp32) and dtype='auto' keeps fp32, so there is no choice to measure "
                         "(--force runs anyway)")
    state = None
    if args.checkpoint:
        path = Path(args.checkpoint) / "ckpt" / "best.pt"
        state = torch.load(path, map_location="cpu", weights_only=False)["model"]

    peaks = {name: round(gemm_peak_gflops(getattr(torch, name), device="cpu"), 1)  # a CPU bench, even beside a GPU
             for name in ("float32", "bfloat16")}
    best_peak = max(peaks.values())
    result = {"cpu": cpu_record(), "gemm_peak_gflops": peaks, "gemm_at_llm_shapes_gflops":
              {"float32": gemm_rates(torch.float32), "bfloat16": gemm_rates(torch.bfloat16)}}
    print(f"peaks: {peaks}; at the LLM's shapes: {result['gemm_at_llm_shapes_gflops']}", flush=True)

    ds = load_dataset(DatasetConfig("explagraphs"))
    in_dim = int(ds.text_emb.shape[1])
    cfg = make_run_config("explagraphs", "g_retriever", gnn=GNN, system_prompt="").model
    train_ex = build_examples(ds, ds.split["train"][:TRAIN.batch_size * (args.steps + 1)], cfg, desc="train")
    test_idx = ds.split["test"][:max(args.answers, 0)] if args.answers else ds.split["test"]
    test_ex = build_examples(ds, test_idx, cfg, desc="test")

    training: dict = {}
    for method in [m for m in args.methods.split(",") if m]:
        training[method] = {}
        for name in variants:
            if VARIANTS[name][3] and method != "g_retriever_lora":
                continue  # without adapters there is no LoRA dropout: the same as the variant without the suffix
            model = build_model(name, method, in_dim, args.llm)
            run = train_steps(model, model.tokenize(train_ex), args.steps)
            n_ne, vocab = llm_flops(model.llm)
            flops = sum(4 * n_ne * t + 4 * vocab * r for t, r in zip(run["tokens"], run["logit_rows"]))
            dtype = "bfloat16" if VARIANTS[name][0] == torch.bfloat16 else "float32"
            total = sum(run["seconds"])
            training[method][name] = {
                "dtype": dtype, "median_step_s": round(statistics.median(run["seconds"]), 3),
                "step_s": [round(s, 3) for s in run["seconds"]], "tokens_per_s": round(sum(run["tokens"]) / total, 1),
                "mfu": round(flops / total / 1e9 / peaks[dtype], 4),
                "mfu_of_best_peak": round(flops / total / 1e9 / best_peak, 4)}
            print(f"{method} {name}: {training[method][name]}", flush=True)
            del model
            gc.collect()
        base = training[method]["fp32"]["median_step_s"]
        for name, row in training[method].items():
            row["speedup_vs_fp32"] = round(base / row["median_step_s"], 3)

    answering: dict = {}
    for name in [v for v in ("fp32", "bf16_before", "bf16_sdpa", "bf16") if v in variants and args.answers >= 0]:
        model = build_model(name, "g_retriever", in_dim, args.llm)
        if state is not None:
            model.load_trainable_state(state)
        run = answer(model, model.tokenize(test_ex))
        n_ne, vocab = llm_flops(model.llm)
        flops = 2 * n_ne * (run["prompt_tokens"] + run["new_tokens"]) + 2 * vocab * (len(test_ex) + run["new_tokens"])
        dtype = "bfloat16" if VARIANTS[name][0] == torch.bfloat16 else "float32"
        answering[name] = {"dtype": dtype, "seconds": round(run["seconds"], 2), "answers": len(test_ex),
                           "answers_per_s": round(len(test_ex) / run["seconds"], 3), "new_tokens": run["new_tokens"],
                           "mfu": round(flops / run["seconds"] / 1e9 / peaks[dtype], 4),
                           "mfu_of_best_peak": round(flops / run["seconds"] / 1e9 / best_peak, 4),
                           "sample": run["answers"][:3], "_answers": run["answers"]}
        print(f"answers {name}: {({k: v for k, v in answering[name].items() if k != '_answers'})}", flush=True)
        del model
        gc.collect()
    if answering:
        ref = answering["fp32"]
        for name, row in answering.items():
            row["speedup_vs_fp32"] = round(ref["seconds"] / row["seconds"], 3)
            same = [a == b for a, b in zip(row["_answers"], ref["_answers"])]
            row["same_answer_as_fp32"] = round(float(np.mean(same)), 4)
        for row in answering.values():
            del row["_answers"]

    encoder, agreement, names = None, None, []
    if args.names:
        with open(data_root() / "metaqa" / "kb.txt", encoding="utf-8") as fh:
            for line in fh:
                head, _, tail = line.rstrip("\n").split("|")
                names += [head, tail]
        names = list(dict.fromkeys(names))[:args.names]
        encoder = encoder_rates(names)
        print(f"encoder: {encoder}", flush=True)
    if args.agreement_questions:
        agreement = topk_agreement(load_dataset(DatasetConfig("webqsp")), args.agreement_questions)
        print(f"top-k agreement: {agreement}", flush=True)

    def speedup(table: dict | None, key: str, name: str = "bf16"):
        return (table or {}).get(key, {}).get(name, {}).get("speedup_vs_fp32")

    result.update({
        "variants": {k: {"dtype": str(v[0]).removeprefix("torch."), "attention": v[1], "contiguous_head_input": v[2],
                         "lora_dropout_masks": "uniform16" if v[3] else "bernoulli"} for k, v in VARIANTS.items()},
        "training": training, "answering": answering, "encoder": encoder, "encoder_topk_agreement": agreement,
        "speedups_bf16_vs_fp32": {
            "g_retriever_step": speedup(training, "g_retriever"),
            "g_retriever_lora_step": speedup(training, "g_retriever_lora"),
            "g_retriever_lora_step_uniform_dropout": speedup(training, "g_retriever_lora", "bf16_uniform"),
            "answers": (answering.get("bf16") or {}).get("speedup_vs_fp32"),
            "sentence_encoder": (encoder or {}).get("bf16", {}).get("speedup")},
        "targets_on_amx": {"g_retriever_step": 2.5, "g_retriever_lora_step": 2.0, "answers": 3.0,
                           "sentence_encoder": 1.7},
        "setup": {"llm": args.llm, "steps": args.steps, "batch_size": TRAIN.batch_size,
                  "eval_batch_size": TRAIN.eval_batch_size,
                  "gnn": GNN.__dict__, "train_questions": len(train_ex), "test_questions": len(test_ex),
                  "encoder_names": len(names), "max_new_tokens": 32,
                  "answer_weights": f"{args.checkpoint}/ckpt/best.pt" if args.checkpoint else "untrained (seed 0)"},
    })
    slug = "" if args.llm == LLMConfig.model else "-" + args.llm.removeprefix("embedded:").replace("/", "_")
    path = write_result("precision" + slug, result)
    print(f"bf16 against fp32 as before, on {result['cpu']['cpu_model']} (AMX {result['cpu']['amx']}, AVX512-BF16 "
          f"{result['cpu']['avx512_bf16']}): {result['speedups_bf16_vs_fp32']}  -> {path}")


if __name__ == "__main__":
    main()
