"""Dropout with cheap masks, for the GNN-RAG reasoner and G-Retriever's LoRA adapters: torch's CPU ``bernoulli_``
draws one double per element, 9% of a G-Retriever + LoRA training step, 45% of a reasoner step (docs/precision.md).
"""
from __future__ import annotations

import torch
from torch import nn


class UniformDropout(nn.Dropout):
    """``nn.Dropout`` with its mask drawn from 16-bit uniform integers, four to each 64-bit word of torch's generator:
    an element is kept when its integer is at or above ``round(p · 65536)`` (the drop rate is ``p`` to within
    1/131072), kept elements scaled by the exact inverse of the keep rate."""

    def __init__(self, p: float = 0.5):
        super().__init__(p)
        self.cut = round(p * 65536)  # integers in [0, cut) are dropped

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.cut == 0:
            return x
        if self.cut == 65536:
            return x * 0.0
        n = x.numel()
        # random_(-2**63, None) draws all 64 bits uniformly (torch's full-range case); as int16 they span
        # [-32768, 32767]
        words = torch.empty((n + 3) // 4, dtype=torch.int64, device=x.device).random_(-2 ** 63, None)
        keep = words.view(torch.int16)[:n].view(x.shape) >= self.cut - 32768
        return x * (keep * (65536.0 / (65536 - self.cut))).to(x.dtype)


def use_uniform_dropout(model: nn.Module) -> int:
    """Replace every ``nn.Dropout`` inside ``model``'s LoRA adapters (peft's ``lora_dropout``) by a
    :class:`UniformDropout` of the same rate; returns how many were replaced."""
    replaced = 0
    for module in model.modules():
        drops = getattr(module, "lora_dropout", None)
        if not isinstance(drops, nn.ModuleDict):
            continue
        for name, drop in list(drops.items()):
            if type(drop) is nn.Dropout:
                drops[name] = UniformDropout(drop.p)
                replaced += 1
    return replaced
