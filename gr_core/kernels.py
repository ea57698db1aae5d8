"""The frozen LLM's CPU kernels, chosen by measurement (docs/precision.md, which gives every number): attention by
phase and width, linear layers on weights packed once, a batch's prompts prefilled in groups of near length.
:func:`gr_core.llm.load_llm` installs them on CPU; on CUDA nothing here runs.
"""
from __future__ import annotations

import types
import weakref
from functools import lru_cache

# Positions from which SDPA's bf16 CPU kernel beats eager attention in training, where eager's (B, H, T, T) fp32
# softmax and its casts dominate; SDPA also keeps no (T, T) tensor for the backward (bench/attention_training.py)
SDPA_FROM = 384
# A prefill's eager attention runs in batch slices whose fp32 scores (rows x H x T x T x 4 bytes) fit this budget, so
# they stay in the CPU's cache; each row's products are eager's own: the same logits (bench/attention_prefill.py)
PREFILL_SLICE_BYTES = 8 * 2 ** 20


def packed_gqa_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """Llama's eager attention on a bf16 CPU, changed by phase: a decode step (one query position, eval mode) reads
    ``query (B, H, 1, D)`` as ``(B, H_kv, H / H_kv, D)``, so each key/value head serves its group of query heads
    without eager's ``repeat_kv`` copies; a prefill (no gradient) runs eager in batch slices of
    :data:`PREFILL_SLICE_BYTES`; a training forward runs eager, SDPA from :data:`SDPA_FROM` positions.

    Returns ``(B, T, H, D)`` and no weights, as transformers' attention functions do.
    """
    import torch  # noqa: PLC0415 deferred: torch (~1.5 s at start-up), needed only here
    from transformers.models.llama.modeling_llama import eager_attention_forward  # noqa: PLC0415 the same

    b, h, t, d = query.shape
    if t > 1 and not torch.is_grad_enabled():  # a prefill: nothing is kept for a backward pass
        rows = max(1, PREFILL_SLICE_BYTES // (h * t * key.shape[2] * 4))
        if rows >= b:
            return eager_attention_forward(module, query, key, value, attention_mask, scaling, dropout, **kwargs)
        per_row = attention_mask is not None and attention_mask.shape[0] == b
        return torch.cat([eager_attention_forward(
            module, query[i:i + rows], key[i:i + rows], value[i:i + rows],
            attention_mask[i:i + rows] if per_row else attention_mask, scaling, dropout, **kwargs)[0]
            for i in range(0, b, rows)]), None
    if t >= SDPA_FROM:  # a wide training batch: SDPA's kernel
        from transformers.integrations.sdpa_attention import sdpa_attention_forward  # noqa: PLC0415 the same

        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, scaling, **kwargs)
    group = getattr(module, "num_key_value_groups", 1)
    if t != 1 or group == 1 or module.training:
        return eager_attention_forward(module, query, key, value, attention_mask, scaling, dropout, **kwargs)
    weights = torch.matmul(query.reshape(b, h // group, group, d), key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        weights = weights + attention_mask  # (B, 1, 1, T) broadcasts over the heads and their groups
    weights = torch.nn.functional.softmax(weights, dim=-1, dtype=torch.float32).to(query.dtype)
    return torch.matmul(weights, value).reshape(b, h, 1, d).transpose(1, 2).contiguous(), None


@lru_cache(maxsize=None)
def register_packed_gqa() -> str:
    """Register :func:`packed_gqa_attention` with transformers (once) and return its name. Its mask is eager's
    additive one: unregistered, transformers would pass the attention no mask at all."""
    from transformers import AttentionInterface  # noqa: PLC0415 deferred: transformers + torch, ~2 s at start-up
    from transformers.masking_utils import AttentionMaskInterface, eager_mask  # noqa: PLC0415 the same

    AttentionInterface.register("gr_packed_gqa", packed_gqa_attention)
    AttentionMaskInterface.register("gr_packed_gqa", eager_mask)
    return "gr_packed_gqa"


# torch's bf16 CPU ``linear`` reorders the (out, in) weight into oneDNN's packed layout on every call, most of a decode
# step's cost; packed once, the same kernel gives bit-equal outputs. The packed copies live here, not on the module:
# opaque oneDNN tensors, which ``copy.deepcopy`` and ``state_dict`` cannot carry.
_PACKED: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # nn.Linear -> (weight's identity, packed copy)


def prepack_linears(model) -> int:
    """Give each ``nn.Linear`` of ``model`` :func:`_prepacked_linear` as its forward; returns how many. A training
    forward (gradients on) runs ``F.linear`` as before."""
    import torch  # noqa: PLC0415 deferred: torch (~1.5 s at start-up), needed only here

    linears = [m for m in model.modules() if type(m) is torch.nn.Linear]
    for m in linears:
        m.forward = types.MethodType(_prepacked_linear, m)  # a bound method: deepcopy rebinds it to the copy
    return len(linears)


def _prepacked_linear(self, x):
    """``nn.Linear.forward`` that, with gradients off, multiplies by the weight packed once for oneDNN; packed anew
    when the weight changes (another tensor, or written in place)."""
    import torch  # noqa: PLC0415 deferred: torch (~1.5 s at start-up), needed only here

    if torch.is_grad_enabled() or x.device.type != "cpu":  # training, or a model moved off the CPU
        return torch.nn.functional.linear(x, self.weight, self.bias)
    key = (self.weight.data_ptr(), self.weight._version)
    held = _PACKED.get(self)
    if held is None or held[0] != key:
        held = _PACKED[self] = (key, torch.ops.mkldnn._reorder_linear_weight(self.weight.detach(), 16))
    return torch.ops.mkldnn._linear_pointwise(x, held[1], self.bias, "none", [], "")


def contiguous_head_input(module, args):
    """Make the vocabulary projection's input contiguous before it runs (a forward pre-hook): a strided
    ``hidden[:, -k:, :]`` ``(B, k, d)`` runs as ``bmm`` against the weight copied B times in bf16 on CPU; contiguous,
    it folds into one ``(B k, d) @ (d, V)`` product, the same values."""
    return (args[0].contiguous(), *args[1:])


# What a separate prefill forward costs, in padded positions, when :func:`length_groups` splits a batch (costs of 0
# to 512 measured alike, bench/grouped_prefill.py; 128 keeps 1-3 forwards a batch of 16); ``inf`` turns grouping off
PREFILL_GROUP_COST = 128


def length_groups(lengths: list[int], cost: float | None = None) -> list[list[int]]:
    """Split rows into groups that minimize (positions each group pads its rows to) + ``cost`` per group.

    Args:
        lengths: each row's number of real tokens.
        cost: a group's fixed cost in positions (default :data:`PREFILL_GROUP_COST`).
    Returns:
        row indices per group, shortest rows first (an exact partition of consecutive lengths, O(B^2)).
    """
    cost = PREFILL_GROUP_COST if cost is None else cost
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    best, cut = [0.0] + [float("inf")] * len(order), [0] * (len(order) + 1)
    for end in range(1, len(order) + 1):  # best[end]: the cheapest split of the ``end`` shortest rows
        for start in range(end):
            c = best[start] + (end - start) * lengths[order[end - 1]] + cost
            if c < best[end]:
                best[end], cut[end] = c, start
    groups, end = [], len(order)
    while end:
        groups.append(order[cut[end]:end])
        end = cut[end]
    return groups[::-1]


def left_padded_positions(attention_mask):
    """Positions ``(B, T)`` that start at 0 on each row's first real token, so left padding changes nothing."""
    return (attention_mask.cumsum(-1) - 1).clamp(min=0)


def prefill_groups(llm, attention_mask) -> list[list[int]] | None:
    """The :func:`length_groups` :func:`grouped_prefill` would prefill a left-padded batch in, or None for the plain
    path: off the CPU (a GPU's steps are launch-bound), one group, a one-token row, cache layers other than full
    attention (a sliding window keeps only its window), a generation config with beams or its own cache type."""
    from transformers import DynamicCache  # noqa: PLC0415 deferred: transformers + torch, ~2 s at start-up
    from transformers.cache_utils import DynamicLayer  # noqa: PLC0415 the same

    if attention_mask.device.type != "cpu":
        return None
    lengths = attention_mask.sum(1).tolist()
    groups = length_groups(lengths) if min(lengths) > 1 else []  # a one-token row leaves nothing to encode
    gen = llm.generation_config
    if len(groups) < 2 or gen.cache_implementation is not None or (gen.num_beams or 1) > 1 \
            or (gen.num_return_sequences or 1) > 1 \
            or any(type(layer) is not DynamicLayer for layer in DynamicCache(config=llm.config).layers):
        return None
    return groups


def grouped_prefill(llm, attention_mask, **inputs):
    """Encode all but the last position of a left-padded batch in :func:`length_groups`, for ``llm.generate``.

    Each group runs over its own longest row only, and its keys and values are written right-aligned into one cache
    of the batch's width (the padding's entries zero, masked as before). Rows see other padding than in the whole
    batch, so bf16 may round them differently (docs/precision.md counts the answers this changes).

    Args:
        llm: a causal LM (transformers, or peft around one).
        attention_mask: ``(B, T)``, 1 on real tokens, left-padded.
        inputs: ``inputs_embeds (B, T, d)`` or ``input_ids (B, T)``.
    Returns:
        a ``DynamicCache`` of ``T - 1`` positions, or None (the plain path) where :func:`prefill_groups` is.
    """
    import torch  # noqa: PLC0415 deferred: torch (~1.5 s at start-up), needed only here
    from transformers import DynamicCache  # noqa: PLC0415 deferred: transformers + torch, ~2 s at start-up

    (name, x), = inputs.items()
    groups = prefill_groups(llm, attention_mask)
    if groups is None:
        return None
    b, t = attention_mask.shape
    lengths = attention_mask.sum(1).tolist()
    keys_values = None  # per layer [keys, values], each (B, H_kv, T - 1, D)
    for rows in groups:
        width = max(lengths[i] for i in rows)
        index = torch.tensor(rows, device=x.device)
        mask = attention_mask[index, t - width:t - 1]
        out = llm(**{name: x[index, t - width:t - 1]}, attention_mask=mask, use_cache=True, logits_to_keep=1,
                  position_ids=left_padded_positions(mask))
        layers = out.past_key_values.layers
        if keys_values is None:
            keys_values = [[kv.new_zeros((b, kv.shape[1], t - 1, kv.shape[3])) for kv in (layer.keys, layer.values)]
                           for layer in layers]
        for (keys, values), layer in zip(keys_values, layers):
            keys[index, :, t - width:] = layer.keys
            values[index, :, t - width:] = layer.values
    return DynamicCache(ddp_cache_data=[tuple(kv) for kv in keys_values], config=llm.config)
