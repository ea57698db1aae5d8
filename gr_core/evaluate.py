"""Metrics exactly as the reference computes them (GR code ``src/utils/evaluate.py``; SPEC.md §1.11)."""
from __future__ import annotations

import re

_STANCE = re.compile(r"support|Support|Counter|counter")


def explagraphs_correct(prediction: str, label: str) -> bool:
    """ExplaGraphs accuracy: the first ``support``/``counter`` match, lowercased, equals the label."""
    match = _STANCE.search(prediction)
    return bool(match) and match.group(0).lower() == label.strip().lower()
