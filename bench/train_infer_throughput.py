"""Training and batched-inference throughput: our ``GraphLLM`` vs PyG's ``GRetriever``, side by side.

    python bench/train_infer_throughput.py                  ->  outputs/bench/train_infer_throughput.json
    python bench/train_infer_throughput.py --dtype float32  ->  outputs/bench/train_infer_throughput-float32.json
    python bench/train_infer_throughput.py --llm DIR        ->  outputs/bench/train_infer_throughput-<DIR's name>.json

``--llm`` replaces the embedded model on both sides (a Hugging Face directory: the GPU rehearsal passes
SmolLM2-135M's shapes with random weights, whose answers never stop early, so every side decodes the full budget).

Both sides get the same LLM (the embedded SmolLM2-135M-Instruct from the same HF directory, in the dtype
``dtype="auto"`` resolves to on this machine, or ``--dtype``: bf16 on CPUs with bf16 units, gr_core.precision), the
same graph encoder (our Graph Transformer stack, deep-copied so both start from identical weights; PyG pools
with its own scatter-mean), the same WebQSP questions with the same PCST subgraphs and desc strings, the same
labels and batch size (docs/peers.md). Each side runs its own pipeline as a user would:

- ours: length-bucketed batches, the LLM frozen, logits only at label positions, generation with the chat
  template and EOS stopping, length-sorted inference batches;
- PyG as shipped: ``GRetriever(LLM(...), gnn)`` with the legacy prompt (no ``sys_prompt``, as its WebQSP
  example), AdamW over every parameter that requires grad (the whole LLM: it is never frozen, docs/peers.md
  finding 4), batches in dataset order, ``inference`` at its default 128 new tokens and at our 32;
- PyG with the LLM frozen by hand before building the optimizer (the fix its users must apply).

Ours loads the LLM through ``gr_core.llm.load_llm`` (in bf16 on CPU: eager attention and a contiguous input to the
vocabulary projection); PyG's ``LLM`` casts the same weights to the same dtype its own way.

Throughput counts each side's own real (non-pad) input tokens, prompt + label, per second. MFU divides the
model FLOPs of those tokens by the matrix-multiply peak of the dtype used, measured in the same process (the best
dtype's peak is recorded beside it):
4 x N_nonembedding per token for a frozen LLM (forward + activation gradients; no weight gradients),
6 x N for full fine-tuning, plus the vocabulary projection where it is computed (ours: label positions only;
PyG: every position). Attention score FLOPs are left out (< 10% at these lengths). A 135M model on a 2-core
CPU is LLM-bound and not comparable with GPU numbers.
"""
from common import (gemm_peak_gflops, llm_flops, machine, mean_loss, memory_bandwidth_gbs, slug,  # noqa: I001
                    summarize, synchronize, timed, train_step_seconds, write_result)

import argparse
import copy
import time
from pathlib import Path

import torch

from gr_core.config import LLMConfig, resolve_device
from gr_core.g_retriever.graph_encoder import GNNConfig
from gr_core.graphqa import DatasetConfig, load_dataset
from gr_core.kernels import prefill_groups
from gr_core.llm import embedded_llm_dir
from gr_core.g_retriever.model import GraphLLM
from gr_core.precision import cpu_info, dtype_name, resolve_dtype
from gr_core.g_retriever.train import TrainConfig, make_run_config, predict
from gr_core.g_retriever.examples import build_examples, length_batches
from torch_geometric.data import Batch
from torch_geometric.llm.models import LLM, GRetriever

DATASET = "webqsp"
BATCH = 8  # GR code training batch
EVAL_BATCH = 16  # GR code eval batch
TIMED_BATCHES = 32  # per side, after 1 warm-up (a p90 needs more than a handful)
INFER_EXAMPLES = 48
MAX_NEW = 32  # GR code generation budget
GNN = GNNConfig(kind="gt", hidden=256, num_layers=4, heads=4)  # the quick preset's encoder


class NodeGNN(torch.nn.Module):
    """Our encoder's node stack with the ``out_channels`` / ``(x, edge_index, edge_attr=)`` interface PyG expects."""

    def __init__(self, encoder):
        super().__init__()
        self.enc = encoder
        self.out_channels = encoder.out_dim

    def forward(self, x, edge_index, edge_attr=None):
        return self.enc.node_forward(x, edge_index, edge_attr)


def decode_record(model: GraphLLM, batch, prefill_s: float, full_s: float, width: int, dtype) -> dict:
    """The decode loop of one batch against its memory-bandwidth bound: a step reads every decoder weight and the
    output projection once (whatever the batch) plus the batch's KV cache, so its floor is those bytes over the
    copy bandwidth measured in this process. ``width``: the new tokens the timed generation produced per row
    (the prefill gave the first, so the loop ran ``width - 1`` steps)."""
    steps = width - 1
    seconds = full_s - prefill_s
    c = model.llm.config
    n_ne, vocab = llm_flops(model.llm)
    nbytes = torch.finfo(dtype).bits // 8
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    kv_per_position = 2 * c.num_hidden_layers * c.num_key_value_heads * head_dim * nbytes
    mean_context = batch.input_ids.shape[1] + steps / 2
    step_bytes = (n_ne + vocab) * nbytes + batch.input_ids.shape[0] * mean_context * kv_per_position
    bandwidth = memory_bandwidth_gbs()
    step_s = seconds / max(steps, 1)
    floor_s = step_bytes / (bandwidth * 1e9)
    return {"steps": steps, "seconds": round(seconds, 3), "step_ms": round(1e3 * step_s, 2),
            "tokens_per_s": round(batch.input_ids.shape[0] * steps / seconds, 1) if seconds > 0 else None,
            "bytes_per_step_mb": round(step_bytes / 1e6, 1), "memory_bandwidth_gbs": round(bandwidth, 1),
            "bandwidth_bound_step_ms": round(1e3 * floor_s, 2),
            "fraction_of_bandwidth_bound": round(floor_s / step_s, 3)}


def profile_call(fn) -> dict:
    """One call of ``fn()`` under ``torch.profiler``: its wall seconds (profiled, so slower than unprofiled), the aten
    operator calls (nested ones counted too: ``matmul`` and the ``mm`` it calls are two), on CUDA the kernels, their
    summed GPU time and launches, the host synchronisations (a scalar read back, a stream or device synchronize),
    and the operators that cost the most CPU time."""
    from torch.autograd import DeviceType  # noqa: PLC0415 only the profile needs these
    from torch.profiler import ProfilerActivity, profile  # noqa: PLC0415

    cuda = torch.cuda.is_available()
    synchronize()
    with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
        start = time.perf_counter()
        fn()
        synchronize()
        wall = time.perf_counter() - start
    events = prof.key_averages()

    def count(*names: str) -> int:
        return sum(e.count for e in events if e.key in names)

    ops = [e for e in events if e.key.startswith("aten::") and e.device_type == DeviceType.CPU]
    kernels = [e for e in events if e.device_type == DeviceType.CUDA]
    kernel_s = sum(e.self_device_time_total for e in kernels) / 1e6
    return {"wall_s": round(wall, 4), "aten_ops": sum(e.count for e in ops),
            "kernels": sum(e.count for e in kernels), "kernel_s": round(kernel_s, 4),
            "kernel_fraction_of_wall": round(kernel_s / wall, 3) if cuda else None,
            "launches": count("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx"),
            "host_syncs": count("aten::_local_scalar_dense", "cudaStreamSynchronize", "cudaDeviceSynchronize"),
            "top_cpu_ops": [{"op": e.key, "calls": e.count, "self_cpu_ms": round(e.self_cpu_time_total / 1e3, 2)}
                            for e in sorted(ops, key=lambda e: -e.self_cpu_time_total)[:8]],
            "top_kernels": [{"kernel": e.key[:80], "calls": e.count,
                             "ms": round(e.self_device_time_total / 1e3, 2)}
                            for e in sorted(kernels, key=lambda e: -e.self_device_time_total)[:5]]}


def ours_train(model: GraphLLM, examples, tcfg: TrainConfig) -> dict:
    params = list(model.trainable_parameters().values())
    opt = torch.optim.AdamW(params, lr=tcfg.lr, weight_decay=tcfg.weight_decay, betas=tcfg.betas)
    lengths = [ex.num_prompt_tokens + len(ex.label_ids) for ex in examples]
    batches = length_batches(lengths, BATCH, seed=0)
    model.train()
    times, tokens, label_positions, shapes = [], [], [], []
    for k, idx in enumerate(batches):
        batch = model.collate([examples[i] for i in idx], with_label=True).to(model.device)
        dt = train_step_seconds(lambda: mean_loss(model, batch), opt, params, tcfg.grad_clip)
        if k:  # the first batch is warm-up
            times.append(dt)
            tokens.append(batch.num_tokens)
            label_positions.append(len(idx) * (batch.label_width + 1))
            shapes.append({"step": k, "seconds": round(dt, 3), "examples": len(idx), "tokens": batch.num_tokens,
                           "padded_width": int(batch.input_ids.shape[1]), "label_width": batch.label_width,
                           "graph_nodes": int(batch.graphs.num_nodes), "graph_edges": int(batch.graphs.num_edges)})
    profiled = profile_call(lambda: train_step_seconds(lambda: mean_loss(model, batch), opt, params, tcfg.grad_clip))
    return {"seconds": times, "tokens": tokens, "logit_rows": label_positions, "batches": shapes,
            "profile": {"tokens": batch.num_tokens, **profiled}}


def pyg_inputs(examples):
    g = Batch.from_data_list([ex.data for ex in examples])
    return dict(question=[ex.question for ex in examples], x=g.x, edge_index=g.edge_index, batch=g.batch,
                edge_attr=g.edge_attr, additional_text_context=[ex.desc for ex in examples])


def pyg_tokens(pyg, examples, with_label: bool) -> int:
    """PyG's own real input tokens for a batch (its prompt stream, plus one graph token per example)."""
    args = pyg_inputs(examples)
    _, mask, _ = pyg.llm._get_embeds(args["question"], args["additional_text_context"], None,
                                     [ex.label for ex in examples] if with_label else None)
    return int(mask.sum()) + len(examples)


def pyg_train(pyg, examples, tcfg: TrainConfig) -> dict:
    params = [p for p in pyg.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=tcfg.lr, weight_decay=tcfg.weight_decay, betas=tcfg.betas)
    pyg.train()
    times, tokens, rows, shapes = [], [], [], []
    for k, start in enumerate(range(0, len(examples), BATCH)):
        chunk = examples[start:start + BATCH]
        args = pyg_inputs(chunk)
        dt = train_step_seconds(lambda: pyg(label=[ex.label for ex in chunk], **args), opt, params, tcfg.grad_clip)
        if k:
            times.append(dt)
            n = pyg_tokens(pyg, chunk, True)
            tokens.append(n)
            rows.append(n)  # PyG computes logits at every position (padding included; counted as real tokens here)
            shapes.append({"step": k, "seconds": round(dt, 3), "examples": len(chunk), "tokens": n,
                           "graph_nodes": int(args["x"].shape[0]), "graph_edges": int(args["edge_index"].shape[1])})
    profiled = profile_call(lambda: train_step_seconds(lambda: pyg(label=[ex.label for ex in chunk], **args), opt,
                                                       params, tcfg.grad_clip))
    return {"seconds": times, "tokens": tokens, "logit_rows": rows, "batches": shapes,
            "trainable_params": sum(p.numel() for p in params), "profile": {"tokens": n, **profiled}}


def pyg_infer(pyg, examples, max_out_tokens: int) -> dict:
    pyg.eval()
    t0 = time.perf_counter()
    answers = []
    for start in range(0, len(examples), EVAL_BATCH):
        answers += pyg.inference(**pyg_inputs(examples[start:start + EVAL_BATCH]), max_out_tokens=max_out_tokens)
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "answers_per_s": len(examples) / seconds,
            "mean_answer_chars": sum(len(a) for a in answers) / len(answers), "sample": answers[:3]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dtype", choices=("auto", "float32", "bfloat16"), default="auto",
                        help="the LLM's dtype on both sides (auto: what this machine resolves)")
    parser.add_argument("--llm", default=None, help="a Hugging Face model directory for both sides (default: the "
                        "embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--train-batches", type=int, default=TIMED_BATCHES, help="timed training batches per side")
    args = parser.parse_args()
    llm_dir = args.llm or str(embedded_llm_dir())
    dtype = resolve_dtype(args.dtype, resolve_device("auto"))
    torch.manual_seed(0)
    # bf16 is emulated (and its 2048^3 products take minutes) where the CPU has no bf16 support: its peak is not fp32's
    native = cpu_info().native_bf16 or torch.cuda.is_available()
    names = dict.fromkeys(("float32", "bfloat16") if native else ("float32", dtype_name(dtype)))  # the used one too
    peaks = {name: round(gemm_peak_gflops(getattr(torch, name)), 2) for name in names}
    peak = peaks[dtype_name(dtype)]
    ds = load_dataset(DatasetConfig(DATASET))
    cfg = make_run_config(DATASET, "g_retriever", gnn=GNN,
                          llm=LLMConfig(dtype=args.dtype, **({"model": args.llm} if args.llm else {})))
    tcfg = TrainConfig()
    ours = GraphLLM(cfg.model, in_dim=int(ds.text_emb.shape[1]))
    train_ex = ours.tokenize(build_examples(ds, ds.split["train"][:BATCH * (args.train_batches + 1)], cfg.model))
    test_ex = ours.tokenize(build_examples(ds, ds.split["test"][:INFER_EXAMPLES], cfg.model))
    n_ne, vocab_macs = llm_flops(ours.llm)

    def mfu(run: dict, per_token: int) -> tuple[float, float]:
        flops = sum(per_token * n_ne * t + per_token * vocab_macs * r for t, r in zip(run["tokens"], run["logit_rows"]))
        tps = sum(run["tokens"]) / sum(run["seconds"])
        return tps, flops / sum(run["seconds"]) / 1e9 / peak

    def make_pyg(frozen: bool):
        torch.manual_seed(0)
        llm = LLM(llm_dir, num_params=0.135, dtype=dtype)
        if frozen:
            llm.llm.requires_grad_(False)
        return GRetriever(llm, NodeGNN(copy.deepcopy(ours.gnn)))

    # ---- training: ours, PyG as shipped, PyG frozen by hand
    r_ours = ours_train(ours, train_ex, tcfg)
    pyg = make_pyg(frozen=False)
    r_pyg = pyg_train(pyg, train_ex, tcfg)
    del pyg
    pyg_frozen = make_pyg(frozen=True)
    r_pyg_frozen = pyg_train(pyg_frozen, train_ex, tcfg)
    ours_tps, ours_mfu = mfu(r_ours, 4)
    peer_tps, peer_mfu = mfu(r_pyg, 6)
    frozen_tps, frozen_mfu = mfu(r_pyg_frozen, 4)

    # ---- inference (fresh, untrained adapters on both sides; same GNN weights)
    predict(ours, test_ex[:EVAL_BATCH], EVAL_BATCH)  # warm-up
    answers, ours_s = predict(ours, test_ex, EVAL_BATCH)
    # where one inference batch goes: prefill (1 new token) vs the whole 32-token generation
    split_batch = ours.collate(test_ex[:EVAL_BATCH], with_label=False).to(ours.device)
    prefill_s = min(timed(ours.generate_ids, split_batch, 1)[1] for _ in range(2))
    generated, full_s = timed(ours.generate_ids, split_batch, MAX_NEW)
    # the positions the prefill computes: its length groups' (kernels.grouped_prefill), or the padded batch's
    lengths = split_batch.attention_mask.sum(1).tolist()
    groups = prefill_groups(ours.llm, split_batch.attention_mask)
    prefill_positions = sum(len(g) * max(lengths[i] for i in g) for g in groups) if groups \
        else split_batch.input_ids.numel()
    prefill_gflops = 2 * (n_ne * prefill_positions + vocab_macs * EVAL_BATCH) / 1e9
    decode = decode_record(ours, split_batch, prefill_s, full_s, int(generated.shape[1]), dtype)
    r_inf_32 = pyg_infer(pyg_frozen, test_ex, MAX_NEW)
    r_inf_default = pyg_infer(pyg_frozen, test_ex, 128)
    profiles = {side: r.pop("profile") for side, r in
                (("ours_train_step", r_ours), ("peer_train_step", r_pyg), ("peer_frozen_train_step", r_pyg_frozen))}
    profiles["ours_generate_batch"] = {"examples": EVAL_BATCH,
                                       **profile_call(lambda: ours.generate_ids(split_batch, MAX_NEW))}
    pyg_frozen.eval()
    profiles["peer_inference_batch"] = {"examples": EVAL_BATCH, **profile_call(
        lambda: pyg_frozen.inference(**pyg_inputs(test_ex[:EVAL_BATCH]), max_out_tokens=MAX_NEW))}
    ours_aps = len(test_ex) / ours_s

    sides = {"ours": r_ours, "peer": r_pyg, "peer_frozen": r_pyg_frozen}
    result = {
        "dataset": DATASET, "batch_size": BATCH, "eval_batch_size": EVAL_BATCH, "gnn": GNN.__dict__,
        "timed_train_batches": len(r_ours["seconds"]), "infer_examples": len(test_ex), "max_new_tokens": MAX_NEW,
        "dtype": dtype_name(dtype), "gemm_peak_gflops": peak, "gemm_peak_gflops_by_dtype": peaks,
        "best_dtype_peak_gflops": max(peaks.values()),
        "mfu_of_best_peak": round(ours_mfu * peak / max(peaks.values()), 4),
        "ours_train_tokens_per_s": round(ours_tps, 1), "peer_train_tokens_per_s": round(peer_tps, 1),
        "train_speedup": round(ours_tps / peer_tps, 3),
        "peer_frozen_train_tokens_per_s": round(frozen_tps, 1),
        "train_speedup_vs_frozen_peer": round(ours_tps / frozen_tps, 3),
        "ours_train_step_s": summarize(r_ours["seconds"]), "peer_train_step_s": summarize(r_pyg["seconds"]),
        "peer_frozen_train_step_s": summarize(r_pyg_frozen["seconds"]),
        "ours_tokens_per_batch": sum(r_ours["tokens"]) / len(r_ours["tokens"]),
        "peer_tokens_per_batch": sum(r_pyg["tokens"]) / len(r_pyg["tokens"]),
        "ours_trainable_params": sum(p.numel() for p in ours.trainable_parameters().values()),
        "peer_trainable_params": r_pyg["trainable_params"],
        "peer_frozen_trainable_params": r_pyg_frozen["trainable_params"],
        "mfu": round(ours_mfu, 4), "peer_mfu": round(peer_mfu, 4), "peer_frozen_mfu": round(frozen_mfu, 4),
        "ours_infer_answers_per_s": round(ours_aps, 3),
        "peer_infer_answers_per_s": round(r_inf_32["answers_per_s"], 3),
        "infer_speedup": round(ours_aps / r_inf_32["answers_per_s"], 3),
        "peer_default_128_infer_answers_per_s": round(r_inf_default["answers_per_s"], 3),
        "infer_speedup_vs_peer_default": round(ours_aps / r_inf_default["answers_per_s"], 3),
        "ours_mean_answer_chars": sum(len(a) for a in answers) / len(answers),
        "inference_batch_split": {"prefill_s": round(prefill_s, 3), "generate_32_s": round(full_s, 3),
                                  "prefill_fraction": round(prefill_s / full_s, 3),
                                  "prefill_positions": prefill_positions, "prompt_tokens": int(sum(lengths)),
                                  "padded_positions": split_batch.input_ids.numel(),
                                  "prefill_fraction_of_gemm_peak": round(prefill_gflops / prefill_s / peak, 3),
                                  "decode": decode},
        "peer_mean_answer_chars": r_inf_32["mean_answer_chars"], "ours_sample": answers[:3],
        "peer_sample": r_inf_32["sample"],
        "mfu_formula": "model FLOPs / s / gemm_peak of the dtype used: (4 frozen | 6 full) x (N_nonembedding x tokens "
                       "+ vocab MACs x logit rows)",
        "targets": {"train_speedup": 2.0, "infer_speedup": 3.0},
        "llm": args.llm or "embedded:smollm2-135m-instruct", "profiles": profiles,
        # every timed batch's shape, and the slow ones (over twice the side's median) named apart
        "train_batches": {side: r["batches"] for side, r in sides.items()},
        "slow_train_batches": {side: [b for b in r["batches"] if b["seconds"] > 2 * summarize(r["seconds"])["median_s"]]
                               for side, r in sides.items()},
    }
    name = "train_infer_throughput" + ("" if args.dtype == "auto" else f"-{args.dtype}")
    path = write_result(name + (f"-{slug(Path(args.llm).name)}" if args.llm else ""), result)
    print(f"{dtype_name(dtype)} on {machine()['cpu_model']}: GEMM peak {peak:.1f} GFLOP/s (peaks {peaks})")
    print(f"train tokens/s: ours {ours_tps:.0f} (MFU {ours_mfu:.1%}) | PyG as shipped {peer_tps:.0f} "
          f"(MFU {peer_mfu:.1%}) -> {ours_tps / peer_tps:.2f}x | PyG frozen by hand {frozen_tps:.0f} "
          f"-> {ours_tps / frozen_tps:.2f}x")
    print(f"inference answers/s: ours {ours_aps:.2f} | PyG at 32 tokens {r_inf_32['answers_per_s']:.2f} -> "
          f"{ours_aps / r_inf_32['answers_per_s']:.2f}x | PyG default 128 {r_inf_default['answers_per_s']:.2f} -> "
          f"{ours_aps / r_inf_default['answers_per_s']:.2f}x   -> {path}")
    print(f"one inference batch of {EVAL_BATCH}: prefill {prefill_s:.2f} s of {full_s:.2f} s "
          f"({prefill_s / full_s:.0%}), prefill at {prefill_gflops / prefill_s / peak:.0%} of the GEMM peak; decode "
          f"{decode['steps']} steps of {decode['step_ms']} ms ({decode['tokens_per_s']} tokens/s) against a "
          f"bandwidth floor of {decode['bandwidth_bound_step_ms']} ms ({decode['memory_bandwidth_gbs']} GB/s)")


if __name__ == "__main__":
    main()
