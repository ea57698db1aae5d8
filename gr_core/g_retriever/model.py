"""The soft-prompted LLM (GR paper §5.4, Eq. 9-12; GR code ``src/model/graph_llm.py``; docs/method.md §1.3-1.5).

:class:`GraphLLM` is a frozen causal LM with the parts a :class:`ModelConfig` chooses (every Table 3 method is one:
:data:`METHODS`): a graph encoder and projector giving ``num_graph_tokens`` soft tokens per graph, ``num_soft_tokens``
trainable prompt vectors, LoRA adapters, the textualized subgraph. One example's tokens (tokenized piecewise with
``add_special_tokens=False``, as the GR code)::

    [chat prefix up to the user content] [soft tokens] [desc[:max_txt_len]] [question] [chat suffix]
        | [label[:32]] [EOS]

Prefix and suffix are the tokenizer's chat template (the GR code puts its graph token after ``[INST]``) and EOS the
model's own (SmolLM2: ``<|im_end|>``); a model without a template gets the GR code's ``<s>[INST]`` ... ``[/INST]`` and
``</s>``. Documented deviations (docs/method.md §1.4) that fix PyG's ``[/s]`` label and misplaced soft token
(docs/peers.md 2-3).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace

import torch
from torch import nn
from torch_geometric.data import Batch as PyGBatch

from ..config import LLMConfig, check_choice
from ..dropout import use_uniform_dropout
from ..kernels import grouped_prefill, left_padded_positions
from ..llm import PromptTemplate, hidden_size, load_llm
from .graph_encoder import GNNConfig, GraphEncoder, batch_norm
from .retrieval import DATASET_RETRIEVAL

GRAPH_SOURCES = ("pcst", "full", "kaping", "none")
GRAPH_TOKEN_NORMS = ("none", "batch", "rms")
INSTRUCTIONS = ("", "zero_cot", "cot_bag")
LORA_DROPOUT_MASKS = ("uniform16", "bernoulli")


@dataclass(frozen=True)
class LoRAConfig:
    """LoRA adapters (GR paper App. B.1; GR code ``src/model/graph_llm.py``).

    ``dropout_masks``: ``"bernoulli"``, peft's ``nn.Dropout`` as the GR code trains, or ``"uniform16"``, masks from
    16-bit integers (:class:`gr_core.dropout.UniformDropout`: the same rate, another random stream, a faster CPU step).
    """

    r: int = 8
    alpha: int = 16
    dropout: float = 0.05
    targets: tuple[str, ...] = ("q_proj", "v_proj")
    dropout_masks: str = "bernoulli"

    def __post_init__(self) -> None:
        check_choice("LoRAConfig", "dropout_masks", self.dropout_masks, LORA_DROPOUT_MASKS)


@dataclass(frozen=True)
class ModelConfig:
    """The parts of one :class:`GraphLLM`.

    Attributes:
        llm: the frozen LLM.
        gnn: the graph encoder, or None (no graph soft token).
        projector: MLP ``h -> 2h -> d_l * num_graph_tokens`` (GR code: Linear, Sigmoid, Linear; d_l read from
            the LLM). False is the "w/o projection layer" ablation: the GNN's width must then equal d_l.
        num_graph_tokens: soft tokens per graph (GR: 1).
        num_soft_tokens: trainable prompt vectors (prompt tuning: 10, initialized from the dataset's prompt string).
        lora: LoRA adapters on the LLM, or None (the LLM stays frozen).
        use_desc: put the textualized graph in the prompt.
        graph_source: which graph is textualized / encoded: ``pcst`` (the dataset's retrieval config; the whole
            graph for ExplaGraphs), ``full`` (no retrieval), ``kaping`` (top-k triples), ``none``.
        instruction: ``""``, ``zero_cot`` or ``cot_bag`` (inference-only baselines, docs/method.md §1.7).
        max_txt_len: desc token budget (GR code: 512; the question is never cut).
        kaping_k: triples for ``graph_source="kaping"`` (KAPING's default; the paper gives none).
        top_k: k = k_e of the PCST retrieval (GR Table 10's k); None keeps the dataset's defaults.
        edge_cost: C_e of the PCST retrieval; None keeps the dataset's default.
        graph_token_norm: ``none`` (GR code), ``batch`` (the projected token standardized across the batch, then
            scaled by the token embeddings' per-feature std) or ``rms`` (each token rescaled to the mean norm of a
            token embedding). Measured on ExplaGraphs and not better than ``none`` (docs/explagraphs_learning.md).
        system_prompt: the chat template's system turn; None keeps the template's own (SmolLM2's adds 16 tokens to
            every prompt), ``""`` gives an empty one (the quick preset's ExplaGraphs runs).
    """

    llm: LLMConfig = field(default_factory=LLMConfig)
    gnn: GNNConfig | None = None
    projector: bool = True
    num_graph_tokens: int = 1  # GR code: one graph token
    num_soft_tokens: int = 0
    lora: LoRAConfig | None = None
    use_desc: bool = True
    graph_source: str = "pcst"
    instruction: str = ""
    max_txt_len: int = 512  # GR code src/config.py
    kaping_k: int = 10
    top_k: int | None = None
    edge_cost: float | None = None
    graph_token_norm: str = "none"  # GR code: the projector's output as is
    system_prompt: str | None = None  # None: the chat template's own (SmolLM2: 16 tokens); "": an empty system turn

    def __post_init__(self) -> None:
        check_choice("ModelConfig", "graph_token_norm", self.graph_token_norm, GRAPH_TOKEN_NORMS)
        check_choice("ModelConfig", "graph_source", self.graph_source, GRAPH_SOURCES)
        check_choice("ModelConfig", "instruction", self.instruction, INSTRUCTIONS)
        if (self.top_k is not None and self.top_k < 1) or (self.edge_cost is not None and self.edge_cost < 0):
            raise ValueError(f"ModelConfig: top_k >= 1 and edge_cost >= 0 required "
                             f"(got {self.top_k}, {self.edge_cost})")
        if self.num_soft_tokens < 0 or self.num_graph_tokens < 1 or self.max_txt_len < 0:
            raise ValueError("ModelConfig: num_soft_tokens >= 0, num_graph_tokens >= 1, max_txt_len >= 0 required")

    @property
    def trainable(self) -> bool:
        """Whether this configuration has anything to train (otherwise it is inference-only)."""
        return self.gnn is not None or self.num_soft_tokens > 0 or self.lora is not None

    def retrieval(self, dataset: str):
        """The PCST :class:`~gr_core.g_retriever.retrieval.RetrievalConfig` for ``dataset``: its default, with ``top_k``
        and ``edge_cost`` applied when set."""
        cfg = DATASET_RETRIEVAL[dataset]
        if self.top_k is not None:
            cfg = replace(cfg, top_k_nodes=self.top_k, top_k_edges=self.top_k)
        if self.edge_cost is not None:
            cfg = replace(cfg, edge_cost=self.edge_cost)
        return cfg


# Table 3 (and Table 12's question-only row) as configurations of the one model (GR paper App. B.2-B.3,
# docs/method.md §1.7).
METHODS: dict[str, dict] = {
    "question_only": dict(use_desc=False, graph_source="none"),
    "zero_shot": dict(graph_source="full"),  # "textual graph + question": whole graph cut to 512 tokens
    "zero_cot": dict(graph_source="full", instruction="zero_cot"),
    "cot_bag": dict(graph_source="full", instruction="cot_bag"),
    "kaping": dict(graph_source="kaping"),
    "prompt_tuning": dict(num_soft_tokens=10, graph_source="pcst"),  # GR run.sh: retrieved subgraphs
    "graph_token": dict(gnn=True, use_desc=False, graph_source="full"),  # GNN soft prompt, no text, no retrieval
    "g_retriever": dict(gnn=True, graph_source="pcst"),
    "lora": dict(lora=True, graph_source="full"),  # GR code: full graph text cut to 512 tokens
    "g_retriever_lora": dict(gnn=True, lora=True, graph_source="pcst"),
    # GR Table 6 ablations (App. B.3). "w/o graph encoder" (10 trainable soft tokens + retrieved text) is exactly
    # prompt_tuning above and reuses its run.
    "gr_wo_projector": dict(gnn=True, projector=False, gnn_width="llm"),  # GNN output width = LLM width, no MLP
    "gr_wo_text": dict(gnn=True, use_desc=False, graph_source="pcst"),  # question only as text
    "gr_wo_retrieval": dict(gnn=True, graph_source="full"),  # whole graph (text cut to 512 tokens), no PCST
    # GR Table 7: graph encoders (g_retriever itself is the Graph Transformer)
    "g_retriever_gcn": dict(gnn=True, gnn_kind="gcn", graph_source="pcst"),
    "g_retriever_gat": dict(gnn=True, gnn_kind="gat", graph_source="pcst"),
}


def method_config(method: str, llm: LLMConfig | None = None, gnn: GNNConfig | None = None,
                  lora: LoRAConfig | None = None, **overrides) -> ModelConfig:
    """The :class:`ModelConfig` of a named Table 3 method, with the given LLM / GNN / LoRA settings.

    >>> method_config("g_retriever").gnn.kind
    'gt'
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {sorted(METHODS)}")
    spec = dict(METHODS[method])
    gnn_kind, gnn_width = spec.pop("gnn_kind", None), spec.pop("gnn_width", None)
    spec["gnn"] = (gnn or GNNConfig()) if spec.pop("gnn", False) else None
    if spec["gnn"] is not None and gnn_kind:
        spec["gnn"] = replace(spec["gnn"], kind=gnn_kind)
    if spec["gnn"] is not None and gnn_width == "llm":
        spec["gnn"] = replace(spec["gnn"], hidden=hidden_size(llm or LLMConfig()))
    spec["lora"] = (lora or LoRAConfig()) if spec.pop("lora", False) else None
    return replace(ModelConfig(llm=llm or LLMConfig(), **spec), **overrides)


# Prompt-tuning initialization strings (after the GR code's ``pt_llm`` init prompts).
SOFT_PROMPT_INIT = {
    "explagraphs": "Question: Do argument 1 and argument 2 support or counter each other? "
                   "Answer in one word in the form of 'support' or 'counter'.\n\nAnswer:",
}
DEFAULT_SOFT_PROMPT_INIT = "Please answer the given question."


@dataclass
class Example:
    """One prompt: the textualized graph, the question string, the target, and the encoder's graph.

    ``data`` is a PyG ``Data`` (``x (N, dim)``, ``edge_index (2, E)``, ``edge_attr (E, dim)``) when the
    configuration has a graph encoder. Token ids are filled by :meth:`GraphLLM.tokenize`.
    """

    uid: str
    question: str
    desc: str
    label: str
    answers: list[str]
    data: object = None
    desc_ids: list[int] | None = None
    question_ids: list[int] | None = None
    label_ids: list[int] | None = None

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.desc_ids or []) + len(self.question_ids or [])


@dataclass
class Batch:
    """A left-padded batch. Shapes: ``input_ids``, ``attention_mask``, ``slot_mask``, ``labels``: ``(B, T)``."""

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    slot_mask: torch.Tensor
    labels: torch.Tensor | None
    label_width: int
    graphs: object = None
    num_tokens: int = 0

    def to(self, device) -> "Batch":
        for name in ("input_ids", "attention_mask", "slot_mask", "labels", "graphs"):
            value = getattr(self, name)
            if value is not None:
                setattr(self, name, value.to(device))
        return self


class GraphLLM(nn.Module):
    """G-Retriever and its baselines: a frozen LLM fed ``[soft tokens; text embeddings]`` (GR Eq. 11-12).

    Args:
        cfg: the parts (see :class:`ModelConfig`).
        in_dim: node/edge embedding width, needed when ``cfg.gnn`` is set.
        llm, tokenizer: an already loaded LLM to reuse (its weights are frozen here); loaded from ``cfg.llm``
            otherwise.
        soft_prompt_init: text whose token embeddings initialize the prompt-tuning vectors (repeated or cut).
    """

    def __init__(self, cfg: ModelConfig, in_dim: int | None = None, llm=None, tokenizer=None,
                 soft_prompt_init: str = DEFAULT_SOFT_PROMPT_INIT):
        super().__init__()
        if llm is None:
            llm, tokenizer = load_llm(cfg.llm)
        llm.requires_grad_(False)  # frozen unless LoRA below (PyG's port never freezes, docs/peers.md 1)
        if cfg.lora is not None:
            from peft import LoraConfig, get_peft_model  # noqa: PLC0415 deferred: ~3 s at start-up, LoRA only

            # peft keeps the adapters in fp32 when the LLM is in bf16 (autocast_adapter_dtype), casting their input
            llm = get_peft_model(llm, LoraConfig(r=cfg.lora.r, lora_alpha=cfg.lora.alpha,
                                                 lora_dropout=cfg.lora.dropout, target_modules=list(cfg.lora.targets),
                                                 bias="none", task_type="CAUSAL_LM"))
            if cfg.lora.dropout_masks == "uniform16":
                use_uniform_dropout(llm)  # torch's bernoulli_ masks took 9% of a training step on CPU
        self.cfg = cfg
        self.llm = llm
        self.tokenizer = tokenizer
        self.template = PromptTemplate.from_tokenizer(tokenizer, cfg.system_prompt)
        embedding = llm.get_input_embeddings()
        self.d_llm = embedding.embedding_dim
        self.gnn = self.projector = self.soft_prompt = None
        if cfg.gnn is not None:
            if in_dim is None:
                raise ValueError("GraphLLM: a graph encoder needs in_dim (the node embedding width)")
            self.gnn = GraphEncoder(in_dim, cfg.gnn)
            h, out = self.gnn.out_dim, self.d_llm * cfg.num_graph_tokens
            if cfg.projector:
                self.projector = nn.Sequential(nn.Linear(h, 2 * h), nn.Sigmoid(), nn.Linear(2 * h, out))
            elif h != out:
                raise ValueError(f"without a projector the GNN width ({h}) must equal the LLM width x graph tokens "
                                 f"({out}); set gnn.hidden={out}")
            if cfg.graph_token_norm != "none":
                with torch.no_grad():  # the scale of an ordinary token: per-feature std, mean row norm
                    w = embedding.weight.float()
                    self.register_buffer("token_std", w.std(0).clone(), persistent=False)  # (d_llm,)
                    self.register_buffer("token_norm", w.norm(dim=1).mean().clone(), persistent=False)  # ()
            if cfg.graph_token_norm == "batch":
                self.token_bn = nn.BatchNorm1d(self.d_llm, affine=False)
        if cfg.num_soft_tokens:
            # special tokens included, as the GR code tokenizes it (Llama-2: <s> first; SmolLM2 adds none)
            ids = tokenizer(soft_prompt_init)["input_ids"] or [self.template.pad_id]
            ids = (ids * (cfg.num_soft_tokens // len(ids) + 1))[:cfg.num_soft_tokens]
            with torch.no_grad():
                init = embedding.weight[torch.tensor(ids, device=embedding.weight.device)].float().clone()
            self.soft_prompt = nn.Parameter(init)  # (num_soft_tokens, d_llm)
        self.to(self.device)

    # ------------------------------------------------------------------ bookkeeping
    @property
    def device(self) -> torch.device:
        return self.llm.get_input_embeddings().weight.device

    @property
    def llm_dtype(self) -> torch.dtype:
        """The frozen LLM's dtype (the trainable parts are fp32 whatever it is)."""
        return self.llm.get_input_embeddings().weight.dtype

    @property
    def num_slots(self) -> int:
        """Soft-token positions per example (graph tokens + prompt-tuning tokens)."""
        return (self.cfg.num_graph_tokens if self.gnn is not None else 0) + self.cfg.num_soft_tokens

    def trainable_parameters(self) -> dict[str, torch.Tensor]:
        """Every parameter that trains (GNN, projector, soft prompt, LoRA), by name."""
        return {n: p for n, p in self.named_parameters() if p.requires_grad}

    def trainable_state(self) -> dict[str, torch.Tensor]:
        """What a checkpoint stores: trainable parameters plus the GNN's buffers (BatchNorm statistics)."""
        state = dict(self.trainable_parameters())
        for part in ("gnn", "token_bn"):
            if getattr(self, part, None) is not None:
                state.update({f"{part}.{n}": b for n, b in getattr(self, part).named_buffers()})
        return {n: t.detach().cpu().clone() for n, t in state.items()}

    def load_trainable_state(self, state: dict[str, torch.Tensor]) -> None:
        missing = set(self.trainable_state()) - set(state)
        if missing:
            raise KeyError(f"checkpoint lacks {sorted(missing)[:5]} (a different configuration?)")
        own = dict(self.named_parameters()) | dict(self.named_buffers())
        with torch.no_grad():
            for name, value in state.items():
                own[name].copy_(value)

    # ------------------------------------------------------------------ prompts
    def tokenize(self, examples: list[Example]) -> list[Example]:
        """Fill each example's token ids (desc cut to ``max_txt_len``; label cut to ``max_new_tokens`` + EOS)."""
        tok = self.tokenizer
        max_label = self.cfg.llm.max_new_tokens
        for ex in examples:
            ex.desc_ids = tok(ex.desc, add_special_tokens=False)["input_ids"][:self.cfg.max_txt_len] \
                if self.cfg.use_desc and ex.desc else []
            ex.question_ids = tok(ex.question, add_special_tokens=False)["input_ids"]
            ex.label_ids = tok(ex.label, add_special_tokens=False)["input_ids"][:max_label] + [self.template.eos_id]
        return examples

    def token_stream(self, ex: Example, with_label: bool) -> tuple[list[int], int]:
        """The ids of one example (soft slots hold the pad id) and the index of the first slot."""
        t = self.template
        ids = t.prefix + [t.pad_id] * self.num_slots + ex.desc_ids + ex.question_ids + t.suffix
        return (ids + ex.label_ids if with_label else ids), len(t.prefix)

    def collate(self, examples: list[Example], with_label: bool) -> Batch:
        """Left-pad a list of tokenized examples (and batch their graphs for the GNN)."""
        if examples and examples[0].question_ids is None:
            self.tokenize(examples)
        streams = [self.token_stream(ex, with_label) for ex in examples]
        width = max(len(ids) for ids, _ in streams)
        B = len(examples)
        input_ids = torch.full((B, width), self.template.pad_id, dtype=torch.long)
        attention = torch.zeros((B, width), dtype=torch.long)
        slots = torch.zeros((B, width), dtype=torch.bool)
        labels = torch.full((B, width), -100, dtype=torch.long) if with_label else None
        label_width = 0
        for b, ((ids, first_slot), ex) in enumerate(zip(streams, examples)):
            start = width - len(ids)
            input_ids[b, start:] = torch.tensor(ids)
            attention[b, start:] = 1
            slots[b, start + first_slot:start + first_slot + self.num_slots] = True
            if with_label:
                n = len(ex.label_ids)
                labels[b, width - n:] = torch.tensor(ex.label_ids)
                label_width = max(label_width, n)
        graphs = None
        if self.gnn is not None:
            graphs = PyGBatch.from_data_list([ex.data for ex in examples])
        return Batch(input_ids, attention, slots, labels, label_width, graphs, int(attention.sum()))

    def soft_tokens(self, batch: Batch) -> torch.Tensor | None:
        """The soft-token vectors, ``(B, num_slots, d_llm)``: graph tokens first, then prompt-tuning tokens."""
        parts = []
        B = batch.input_ids.shape[0]
        if self.gnn is not None:
            g = batch.graphs
            h = self.gnn(g.x, g.edge_index, g.edge_attr, g.batch, B)  # (B, hidden)
            h = self.projector(h) if self.projector is not None else h
            h = h.view(B, self.cfg.num_graph_tokens, self.d_llm)
            if self.cfg.graph_token_norm == "batch":  # standardized across graphs, at the token embeddings' scale
                h = batch_norm(self.token_bn, h.reshape(-1, self.d_llm)).view_as(h) * self.token_std
            elif self.cfg.graph_token_norm == "rms":  # each token rescaled to an ordinary token's norm
                h = h * (self.token_norm / h.norm(dim=-1, keepdim=True).clamp(min=1e-6))
            parts.append(h)
        if self.soft_prompt is not None:
            parts.append(self.soft_prompt.unsqueeze(0).expand(B, -1, -1))
        return torch.cat(parts, dim=1) if parts else None

    def embed(self, batch: Batch) -> torch.Tensor:
        """``inputs_embeds (B, T, d_llm)``: token embeddings with the soft tokens written into their slots."""
        embeds = self.llm.get_input_embeddings()(batch.input_ids)
        soft = self.soft_tokens(batch)
        if soft is not None:
            embeds = embeds.masked_scatter(batch.slot_mask.unsqueeze(-1), soft.to(embeds.dtype).reshape(-1))
        return embeds

    position_ids = staticmethod(left_padded_positions)

    # ------------------------------------------------------------------ training and inference
    def forward(self, batch: Batch, with_match: bool = False):
        """Summed next-token loss over the label tokens and their count.

        Logits are computed only for the last ``label_width + 1`` positions (left padding puts every label at
        the end), so the vocabulary projection costs ``B x (label_width + 1)`` rows instead of ``B x T``.

        Returns:
            ``(loss_sum, num_label_tokens)``, both scalars; the mean loss is their ratio. With ``with_match``
            also ``match (B,)`` bool: every label token is the argmax given the label tokens before it, which is
            exactly when greedy decoding starts with the label (so a teacher-forced pass measures greedy accuracy).
        """
        embeds = self.embed(batch)
        keep = batch.label_width + 1
        out = self.llm(inputs_embeds=embeds, attention_mask=batch.attention_mask,
                       position_ids=self.position_ids(batch.attention_mask), logits_to_keep=keep, use_cache=False)
        logits = out.logits[:, :-1].float()  # (B, label_width, V): position t predicts token t + 1
        target = batch.labels[:, -batch.label_width:]
        loss_sum = nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                                               ignore_index=-100, reduction="sum")
        if with_match:
            match = ((logits.argmax(-1) == target) | (target == -100)).all(-1)  # (B,)
            return loss_sum, (target != -100).sum(), match
        return loss_sum, (target != -100).sum()

    @torch.inference_mode()
    def generate_ids(self, batch: Batch, max_new_tokens: int | None = None, **search) -> torch.Tensor:
        """``llm.generate`` from ``inputs_embeds`` (KV cache, no sampling, stops at EOS; greedy on CPU, the prompts
        encoded in groups of near length first: :func:`~gr_core.kernels.grouped_prefill`).

        Returns:
            ``(B * num_return_sequences, W)`` new token ids, EOS-padded after each row's end; ``W`` is the number
            of steps the batch ran (it stops when every row has ended, or at ``max_new_tokens``).
        """
        embeds = self.embed(batch)
        if not search:  # greedy: on CPU the prompts encoded without the batch's padding
            cache = grouped_prefill(self.llm, batch.attention_mask, inputs_embeds=embeds)
            search = {"past_key_values": cache} if cache is not None else {}
        # transformers >= 5 returns only the new tokens when generating from inputs_embeds (docs/environment.md)
        return self.llm.generate(inputs_embeds=embeds, attention_mask=batch.attention_mask,
                                 max_new_tokens=max_new_tokens or self.cfg.llm.max_new_tokens, do_sample=False,
                                 eos_token_id=self.template.eos_id, pad_token_id=self.template.pad_id, **search)

    def generate(self, batch: Batch, max_new_tokens: int | None = None, **search) -> list[str]:
        """Batched greedy decoding (or ``search``, as :meth:`generate_ids`): one answer per example, special tokens
        removed, whitespace stripped."""
        out = self.generate_ids(batch, max_new_tokens, **search)
        return [t.strip() for t in self.tokenizer.batch_decode(out, skip_special_tokens=True)]

    def generate_beams(self, batch: Batch, num_beams: int = 3, max_new_tokens: int | None = None) -> list[list[str]]:
        """Beam search (RoG's relation-path decoding, k beams): per example, ``num_beams`` strings, best first."""
        texts = self.generate(batch, max_new_tokens, num_beams=num_beams, num_return_sequences=num_beams,
                             early_stopping=True)
        return [texts[k:k + num_beams] for k in range(0, len(texts), num_beams)]

    def decode_stream(self, batch: Batch, row: int = 0) -> str:
        """The text of one row of a batch with soft slots shown as ``<soft>`` (for inspection and tests)."""
        real = batch.attention_mask[row].bool()
        tokens = zip(batch.input_ids[row][real].tolist(), batch.slot_mask[row][real].tolist())
        pieces = []
        for soft, run in itertools.groupby(tokens, key=lambda t: t[1]):
            ids = [i for i, _ in run]
            pieces += ["<soft>"] * len(ids) if soft else [self.tokenizer.decode(ids)]
        return "".join(pieces)
