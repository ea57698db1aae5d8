"""A large LLM's training on one GPU, planned from its shapes: peak memory of a step and time per epoch.

Arithmetic only (no torch; no file but a local model's ``config.json``), printed by :func:`gr_core.plan.gpu_lines` on
a GPU profile for the preset's LLM and the paper's Llama-2-7B (GR App. B.1) at the preset's largest step,
G-Retriever + LoRA. The terms and formulas are in docs/notebooks.md ("Planning a 7B run"); 1 GB = 1e9 bytes.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .config import EMBEDDED_LLM
from .published import PAPER_STATS

GB = 1e9
FP32 = 4
ADAMW_BYTES = 16  # an fp32 trained parameter: weight, gradient, AdamW exp_avg and exp_avg_sq
# an allowance, not a measurement: the CUDA context (~0.5 GB), the caching allocator's fragmentation, cuBLAS workspaces
RESERVE = 0.10
# tokens of an example besides the graph's text and the label: the chat template (SmolLM2's, with its default system
# turn: 24 + 6) and the question with its prompt words (WebQSP's longest: 20 tokens + "Question: ... Answer:");
# ExplaGraphs' questions reach 108 tokens, but its graphs' texts are short
PROMPT_TOKENS = 64
TEXT_DIM = 384  # the datasets' node and edge vectors: all-MiniLM-L6-v2 (config.TextEncoderConfig)
PAPER_LLM = "meta-llama/Llama-2-7b-chat-hf"  # GR App. B.1: Llama2-7b
QUANT_BITS = {"8bit": 8.0, "4bit": 4.0 + 8 / 64 + 32 / (64 * 256)}  # QLoRA §3: double quantization's 0.127 bits


@dataclass(frozen=True)
class Shapes:
    """A decoder-only LLM of the Llama layout: RMSNorm, rotary positions, a gated (SwiGLU) MLP, grouped-query
    attention with ``kv_heads`` key/value heads of ``head_dim`` (0: ``hidden // heads``)."""

    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    tied: bool
    head_dim: int = 0
    source: str = ""

    @property
    def hd(self) -> int:
        return self.head_dim or self.hidden // self.heads

    def linears(self) -> dict[str, tuple[int, int]]:
        """``(in, out)`` of each linear layer of one decoder layer, by its Hugging Face name."""
        d, q, kv, f = self.hidden, self.heads * self.hd, self.kv_heads * self.hd, self.intermediate
        return {"q_proj": (d, q), "k_proj": (d, kv), "v_proj": (d, kv), "o_proj": (q, d),
                "gate_proj": (d, f), "up_proj": (d, f), "down_proj": (f, d)}

    @property
    def layer_params(self) -> int:
        """Parameters of the decoder layers (``N`` of the FLOP count): linears and the two norms per layer."""
        return self.layers * (sum(i * o for i, o in self.linears().values()) + 2 * self.hidden)

    @property
    def params(self) -> int:
        """Every parameter: the layers, the final norm, the input embedding and (untied) the output projection."""
        return self.layer_params + self.hidden + self.vocab * self.hidden * (1 if self.tied else 2)


# Published config.json values of well-known models that are not here (a local model's own config.json wins).
_LLAMA2 = "config.json of {} on huggingface.co (Touvron et al. 2023, Llama 2, Table 1)"
_LLAMA3 = "config.json of {} on huggingface.co (Meta Llama 3 model card)"
_SMOL = "config.json of {} on huggingface.co (SmolLM2 model card); the embedded GGUF's is the same"
PUBLISHED: dict[str, Shapes] = {}
for _ids, _args, _src in (
        (("meta-llama/Llama-2-7b-hf", "meta-llama/Llama-2-7b-chat-hf"), (4096, 32, 32, 32, 11008, 32000, False),
         _LLAMA2),
        (("meta-llama/Llama-2-13b-hf", "meta-llama/Llama-2-13b-chat-hf"), (5120, 40, 40, 40, 13824, 32000, False),
         _LLAMA2),
        (("meta-llama/Meta-Llama-3-8B", "meta-llama/Meta-Llama-3-8B-Instruct"),
         (4096, 32, 32, 8, 14336, 128256, False), _LLAMA3),
        (("HuggingFaceTB/SmolLM2-135M", "HuggingFaceTB/SmolLM2-135M-Instruct", EMBEDDED_LLM),
         (576, 30, 9, 3, 1536, 49152, True), _SMOL),
        (("HuggingFaceTB/SmolLM2-360M", "HuggingFaceTB/SmolLM2-360M-Instruct"), (960, 32, 15, 5, 2560, 49152, True),
         _SMOL),
        (("HuggingFaceTB/SmolLM2-1.7B", "HuggingFaceTB/SmolLM2-1.7B-Instruct"),
         (2048, 24, 32, 32, 8192, 49152, True), _SMOL)):
    for _id in _ids:
        PUBLISHED[_id.lower()] = Shapes(_id, *_args, source=_src.format(_ids[0]))


def shapes_from_config(config: dict, name: str, source: str) -> Shapes:
    """:class:`Shapes` from a Hugging Face ``config.json`` (a multimodal one's ``text_config``)."""
    c = config.get("text_config") or config
    heads = int(c["num_attention_heads"])
    return Shapes(name, int(c["hidden_size"]), int(c["num_hidden_layers"]), heads,
                  int(c.get("num_key_value_heads") or heads), int(c["intermediate_size"]), int(c["vocab_size"]),
                  bool(c.get("tie_word_embeddings", config.get("tie_word_embeddings", False))),
                  int(c.get("head_dim") or 0), source)


def llm_shapes(model: str) -> Shapes | None:
    """The shapes of LLM ``model`` (an ``LLMConfig.model``): its ``config.json`` when the model is a local folder or
    in the Hugging Face cache, else :data:`PUBLISHED`; None when neither knows it."""
    folder = Path(model).expanduser()
    if not model.startswith("embedded:") and (folder / "config.json").is_file():
        return shapes_from_config(json.loads((folder / "config.json").read_text()), model, str(folder / "config.json"))
    if model.lower() in PUBLISHED:
        return PUBLISHED[model.lower()]
    if "/" in model and not folder.exists():
        try:
            from huggingface_hub import try_to_load_from_cache  # noqa: PLC0415 deferred: a hub id only

            cached = try_to_load_from_cache(model, "config.json")
        except Exception:  # not a valid repo id, no cache: the model is simply not known here
            cached = None
        if isinstance(cached, str):
            return shapes_from_config(json.loads(Path(cached).read_text()), model, f"{cached} (hub cache)")
    return None


@dataclass(frozen=True)
class Step:
    """One training step (:func:`step_from_run_config`): ``seq_len`` the widest example, which the batch is padded
    to; ``label_rows`` the logit rows per example; ``gnn_kind`` / ``lora_r`` None: no graph encoder / LoRA."""

    batch_size: int
    seq_len: int
    label_rows: int
    lora_r: int | None = 8
    lora_targets: tuple[str, ...] = ("q_proj", "v_proj")
    gnn_kind: str | None = "gt"
    gnn_hidden: int = 1024
    gnn_layers: int = 4
    gnn_heads: int = 4
    graph_tokens: int = 1
    in_dim: int = TEXT_DIM
    graph_nodes: float = PAPER_STATS["webqsp"]["mean_nodes"]
    graph_edges: float = PAPER_STATS["webqsp"]["mean_edges"]


def step_from_run_config(cfg) -> Step:
    """The :class:`Step` of a :class:`~gr_core.g_retriever.run_config.RunConfig`: its batch, its token budget
    (:data:`PROMPT_TOKENS` + graph tokens + ``max_txt_len`` + label + EOS), its LoRA and graph encoder."""
    m, gnn = cfg.model, cfg.model.gnn
    label = m.llm.max_new_tokens + 1  # the label is cut to max_new_tokens, then EOS
    graph_tokens = m.num_graph_tokens if gnn is not None else 0
    encoder = (gnn.kind, gnn.hidden, gnn.num_layers, gnn.heads) if gnn else (None, 0, 0, 0)
    return Step(cfg.train.batch_size, PROMPT_TOKENS + graph_tokens + m.max_txt_len + label, label,
                m.lora.r if m.lora else None, tuple(m.lora.targets) if m.lora else (), *encoder, m.num_graph_tokens)


def lora_params(s: Shapes, r: int | None, targets: tuple[str, ...]) -> int:
    """LoRA's ``A (r x in)`` and ``B (out x r)`` on each target of every layer."""
    shapes = s.linears()
    return 0 if r is None else s.layers * sum(r * (shapes[t][0] + shapes[t][1]) for t in targets)


def gnn_params(kind: str | None, in_dim: int, hidden: int, layers: int, heads: int) -> int:
    """Parameters of :class:`~gr_core.g_retriever.graph_encoder.GraphEncoder` (PyG's convolutions, BatchNorm between
    layers)."""
    if kind is None:
        return 0
    total = 2 * hidden * (layers - 1)  # BatchNorm weight and bias
    for i in range(layers):
        d_in = in_dim if i == 0 else hidden
        total += {"gt": 4 * (d_in * hidden + hidden) + in_dim * hidden,
                  "gat": d_in * heads * hidden + 2 * heads * hidden + hidden,
                  "gcn": d_in * hidden + hidden}[kind]
    return total


def projector_params(hidden: int, d_llm: int, graph_tokens: int = 1) -> int:
    """The projector ``Linear(h, 2h), Sigmoid, Linear(2h, d_llm x graph tokens)`` (GR code)."""
    return 0 if not hidden else hidden * 2 * hidden + 2 * hidden + 2 * hidden * d_llm * graph_tokens \
        + d_llm * graph_tokens


def trained_params(s: Shapes, step: Step) -> dict[str, int]:
    """LoRA, graph encoder and projector parameters of ``step`` on LLM ``s``."""
    return {"LoRA": lora_params(s, step.lora_r, step.lora_targets),
            "graph encoder": gnn_params(step.gnn_kind, step.in_dim, step.gnn_hidden, step.gnn_layers, step.gnn_heads),
            "projector": projector_params(step.gnn_hidden if step.gnn_kind else 0, s.hidden, step.graph_tokens)}


def weight_bytes(s: Shapes, dtype_bytes: int = 2, quantization: str | None = None) -> float:
    """The LLM's weights: the decoder layers' linears at :data:`QUANT_BITS` when quantized, the rest in the dtype."""
    linear = s.layers * sum(i * o for i, o in s.linears().values())
    if quantization is None:
        return s.params * dtype_bytes
    return linear * QUANT_BITS[quantization] / 8 + (s.params - linear) * dtype_bytes


def layer_activation_bytes(s: Shapes, seq_len: int, lora_r: int | None = None, lora_targets: tuple[str, ...] = (),
                           dtype_bytes: int = 2) -> float:
    """Bytes autograd keeps per token for one decoder layer's backward pass (eager attention, frozen weights: a
    frozen linear keeps no input): the RMSNorms' fp32 inputs and 1/rms, q and the repeated k, v, the softmax in fp32
    and the dtype, the MLP's gate, up and silu(gate), per LoRA target its fp32 dropout mask, dropped input and
    ``A``'s output."""
    q = s.heads * s.hd
    cast = dtype_bytes if dtype_bytes != FP32 else 0  # an fp32 softmax is not cast again
    saved = 2 * (FP32 * s.hidden + FP32) + 3 * q * dtype_bytes + (FP32 + cast) * s.heads * seq_len \
        + 3 * s.intermediate * dtype_bytes
    if lora_r is not None:
        saved += sum(2 * FP32 * s.linears()[t][0] + FP32 * lora_r for t in lora_targets)
    return saved


def llm_kept_bytes(s: Shapes, step: Step, checkpointing: bool = False, dtype_bytes: int = 2) -> float:
    """What the forward pass keeps for the backward: every layer's activations, or with ``checkpointing`` only each
    layer's input (``d`` values per token), and the final norm's fp32 input, for the batch's padded tokens."""
    tokens = step.batch_size * step.seq_len
    per_layer = (s.hidden * dtype_bytes if checkpointing
                 else layer_activation_bytes(s, step.seq_len, step.lora_r, step.lora_targets, dtype_bytes))
    return tokens * (s.layers * per_layer + FP32 * s.hidden + FP32)


def gnn_activation_bytes(kind: str | None, nodes: float, edges: float, hidden: int, layers: int, heads: int) -> float:
    """Bytes the graph encoder keeps for a batch of ``nodes`` and ``edges`` (fp32), from PyG's saved tensors (checked
    in ``tests/test_gpu_plan.py``); BatchNorm and ReLU keep ``2 x hidden`` per node between layers."""
    if kind is None:
        return 0.0
    per_layer = {"gt": edges * FP32 * (3 * hidden + 3 * heads),
                 "gat": (edges + nodes) * FP32 * heads * (hidden + 5) + nodes * FP32 * heads * (hidden + 2),
                 "gcn": (edges + nodes) * 5 * FP32}[kind]
    return layers * per_layer + (layers - 1) * nodes * 2 * FP32 * hidden


@dataclass(frozen=True)
class Memory:
    """Peak bytes of one training step, by term, and the options it was computed with."""

    terms: dict[str, float]
    quantization: str | None
    checkpointing: bool

    @property
    def total(self) -> float:
        return sum(self.terms.values())

    @property
    def label(self) -> str:
        return (self.quantization or "bf16") + (" + ckpt" if self.checkpointing else "")


def training_memory(s: Shapes, step: Step, quantization: str | None = None, checkpointing: bool = False,
                    dtype_bytes: int = 2) -> Memory:
    """The peak of one training step of ``step`` on LLM ``s``, in bytes by term."""
    trained = sum(trained_params(s, step).values())
    nodes, edges = step.batch_size * step.graph_nodes, step.batch_size * step.graph_edges
    # the backward pass's working set: one layer's activations, two with checkpointing (recomputed, then its gradients)
    layer = layer_activation_bytes(s, step.seq_len, step.lora_r, step.lora_targets, dtype_bytes)
    working = step.batch_size * step.seq_len * layer * (2 if checkpointing else 1)
    return Memory({
        "LLM weights": weight_bytes(s, dtype_bytes, quantization),
        "trained parameters (fp32: weight, gradient, AdamW m and v)": trained * ADAMW_BYTES,
        "LLM activations": llm_kept_bytes(s, step, checkpointing, dtype_bytes) + working,
        # the label rows' logits in the dtype, their fp32 copy and the fp32 log-softmax the loss keeps
        "logits and loss": step.batch_size * step.label_rows * s.vocab * (dtype_bytes + 2 * FP32),
        # with the batch's fp32 node and edge vectors and its int64 edge index
        "graph encoder activations": 0.0 if step.gnn_kind is None else gnn_activation_bytes(
            step.gnn_kind, nodes, edges, step.gnn_hidden, step.gnn_layers, step.gnn_heads)
        + ((nodes + edges) * step.in_dim * FP32 + edges * 2 * 8),
    }, quantization, checkpointing)


def train_flops_per_token(s: Shapes, logit_rows_per_token: float, checkpointing: bool = False) -> float:
    """FLOPs of one trained token through frozen weights: ``4 N`` (forward 2N, backward 2N for the input gradients
    only) + ``4 V d`` per logit row, ``6 N`` with checkpointing; no attention ``T^2`` term, as the bench counts it."""
    return (6 if checkpointing else 4) * s.layer_params + 4 * s.vocab * s.hidden * logit_rows_per_token


def budget_bytes(memory_gb: float) -> float:
    """What a step may use of a card of ``memory_gb``: all but :data:`RESERVE`."""
    return memory_gb * GB * (1 - RESERVE)


def loading_options(s: Shapes, step: Step, configured: tuple[str | None, bool] = (None, False),
                    dtype_bytes: int = 2) -> list[Memory]:
    """The step's peak for the preset's ``(quantization, checkpointing)`` first, then each way to load the LLM from
    the heaviest: as is, with checkpointing, 8-bit and 4-bit with it."""
    ways = [configured] + [w for w in ((None, False), (None, True), ("8bit", True), ("4bit", True)) if w != configured]
    return [training_memory(s, step, q, c, dtype_bytes) for q, c in ways]


def fix(options: list[Memory], memory_gb: float) -> str:
    """What to run: the preset as it is when its step fits, else the first option that fits (as ``-p`` flags)."""
    budget = budget_bytes(memory_gb)
    preset = f"as the preset sets it ({options[0].label}): {options[0].total / GB:.1f} GB"
    if options[0].total <= budget:
        return f"{preset}, fits"
    for m in options[1:]:
        if m.total <= budget:
            flags = " ".join(f for f in ("-p gradient_checkpointing=true" if m.checkpointing else "",
                                         f"-p quantization={m.quantization}" if m.quantization else "") if f)
            return f"{preset}, does not fit; {flags} fits ({m.total / GB:.1f} GB)"
    return (f"does not fit with any option (4bit + ckpt: {options[-1].total / GB:.1f} GB): lower batch_size or "
            "max_txt_len")


def duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"
    return f"{seconds / 60:.1f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def describe_lines(s: Shapes, step: Step) -> list[str]:
    """The LLM's shapes and parameters, what trains, and the step's tokens."""
    trained = trained_params(s, step)
    gnn = f" ({step.gnn_kind}, {step.gnn_layers} layers x {step.gnn_hidden})" if step.gnn_kind else ""
    lora = f" (r {step.lora_r} on {', '.join(step.lora_targets)})" if step.lora_r else ""
    text = step.seq_len - PROMPT_TOKENS - step.graph_tokens - step.label_rows
    return [f"  shapes: d {s.hidden}, {s.layers} layers, {s.heads} heads ({s.kv_heads} kv) x {s.hd}, MLP "
            f"{s.intermediate}, vocab {s.vocab}{', tied' if s.tied else ''} [{s.source}]",
            f"  parameters: {s.params / 1e9:.2f} B (decoder layers {s.layer_params / 1e9:.2f} B); trained: LoRA "
            f"{trained['LoRA'] / 1e6:.2f} M{lora}, graph encoder {trained['graph encoder'] / 1e6:.2f} M{gnn}, "
            f"projector {trained['projector'] / 1e6:.2f} M",
            f"  one G-Retriever + LoRA training step: batch {step.batch_size} x {step.seq_len} tokens "
            f"({PROMPT_TOKENS} prompt + {step.graph_tokens} graph token + {text} graph text + {step.label_rows} "
            f"label), eager attention; the encoder on {step.batch_size} whole WebQSP graphs of GR Table 2's mean size "
            f"({step.graph_nodes:.0f} nodes, {step.graph_edges:.0f} edges)"]


def memory_lines(s: Shapes, step: Step, configured: tuple[str | None, bool], memory_gb: float,
                 dtype_bytes: int = 2, eval_batch: int = 16) -> list[str]:
    """The step's peak by term for each way to load the LLM (the preset's first, marked ``*``) against a card of
    ``memory_gb``, what to run (:func:`fix`), and the answering pass's weights and KV cache."""
    options = loading_options(s, step, configured, dtype_bytes)
    budget = budget_bytes(memory_gb)
    width = max(len(k) for k in options[0].terms) + 2
    lines = ["  " + "GB (1e9 bytes)".ljust(width) + "".join(f"{m.label + (' *' if i == 0 else ''):>14}"
                                                           for i, m in enumerate(options))]
    lines += ["    " + t.ljust(width - 2) + "".join(f"{m.terms[t] / GB:14.2f}" for m in options)
              for t in options[0].terms]
    kv_cache = 2 * s.layers * s.kv_heads * s.hd * dtype_bytes * eval_batch * step.seq_len  # keys and values
    return lines + [
        "    " + "total".ljust(width - 2) + "".join(f"{m.total / GB:14.1f}" for m in options),
        "    " + f"fits {budget / GB:.1f} GB ({memory_gb:.0f} less {RESERVE:.0%})?".ljust(width - 2)
        + "".join(f"{'fits' if m.total <= budget else 'does not fit':>14}" for m in options),
        f"  * {fix(options, memory_gb)}",
        f"  answering: weights {options[0].terms['LLM weights'] / GB:.1f} GB + KV cache "
        f"{kv_cache / GB:.1f} GB (eval batch {eval_batch} x "
        f"{step.seq_len} tokens)"]
