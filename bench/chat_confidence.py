"""Is the default answer's path score a confidence? Hit of the answers at or below each score, per family.

    python bench/chat_confidence.py --families metaqa:dev:100 webqsp_mini:val:300  # outputs/bench/chat_confidence.json

Each question is asked alone (``bench/chat_families.py``'s families and questions); the score is the one the turn
shows beside its best path, to two decimals (``turn.paths``, docs/chat.md "The relation paths"). If low scores marked
wrong answers, a turn could say so; docs/chat.md "Limits" reports how far they do.
"""
from __future__ import annotations

import argparse
import re

import numpy as np
from chat_families import family_questions
from common import write_result

from gr_core.chat import GraphChat
from gr_core.evaluate import kgqa_scores
from gr_core.stats import wilson_interval

SCORE = re.compile(r"\((-?[\d.]+)\)\s*$")  # a path line ends with its score: "X: born in (0.07)"
THRESHOLDS = (-0.1, 0.0, 0.1, 0.2)


def asked(family: str, split: str, size: int) -> list[dict]:
    """Each question's Hit and its best path's score (None: no path)."""
    questions, graphs = family_questions(family, split, size)
    rows, chats = [], {}
    for q in questions:
        if q["graph"] not in chats:  # one graph's chat at a time: it holds the graph's index
            chats = {q["graph"]: GraphChat(graphs[q["graph"]], model="zero_shot")}
        chat = chats[q["graph"]]
        chat.reset()
        turn = chat.ask(q["question"])
        found = SCORE.search(turn.paths[0]) if turn.paths else None
        rows.append({"question": q["question"], "hit": kgqa_scores(turn.answer.split(" | "), q["answers"])["hit"],
                     "score": float(found.group(1)) if found else None})
    return rows


def calibration(rows: list[dict]) -> list[dict]:
    """Per threshold: the answers scoring at or below it, their Hit with its Wilson interval, and the others' Hit."""
    scored = [r for r in rows if r["score"] is not None]
    out = []
    for t in THRESHOLDS:
        low = [r["hit"] for r in scored if r["score"] <= t]
        high = [r["hit"] for r in scored if r["score"] > t]
        ci = [round(100 * x, 1) for x in wilson_interval(sum(low), len(low))] if low else None
        out.append({"threshold": t, "n_low": len(low), "hit_low": round(100 * float(np.mean(low)), 1) if low else None,
                    "ci_low": ci, "n_high": len(high),
                    "hit_high": round(100 * float(np.mean(high)), 1) if high else None})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--families", nargs="+", default=["metaqa:dev:100", "webqsp_mini:val:300"],
                        help="FAMILY:SPLIT:SIZE (bench/chat_families.py)")
    args = parser.parse_args()
    result = {}
    for spec in args.families:
        family, split, size = spec.split(":")
        rows = asked(family, split, int(size))
        result[spec] = {"n": len(rows), "no_path": sum(r["score"] is None for r in rows),
                        "calibration": calibration(rows), "rows": rows}
        print(spec, result[spec]["calibration"], flush=True)
    write_result("chat_confidence", {"families": result})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
