"""Chat with your graph: speed, retrieval quality and answers on CPU (the measurements are library code:
:mod:`gr_core.studies.chat_speed`, :mod:`gr_core.studies.chat_answers`; this script runs one and writes its file).

    python bench/chat.py speed            ->  outputs/bench/chat.json
    python bench/chat.py answer-modes     ->  outputs/bench/chat_answer_modes.json
    python bench/chat.py reasoner-modes [--reasoner FILE]  ->  outputs/bench/chat_reasoner_modes[_<name>].json
    python bench/chat.py follow-ups --label COMMIT [--out-dir DIR]  ->  outputs/bench/chat_follow_ups/<label>.json

Each run writes its own file with its machine, versions and command; nothing is merged into another run's file.
``reasoner-modes`` pairs with the default mode's rows in ``chat_answer_modes.json``; ``follow-ups`` pairs this run's
reasoner record with every other label's file in its folder. ``speed`` keeps the ``generated_reasoner`` rows that
``bench/chat_generated.py`` writes into ``chat.json``.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch
from common import result_path, slug, write_result

from gr_core.runs import read_json
from gr_core.studies.chat_answers import (FOLLOW_UPS_WHAT, answer_mode_study, follow_up_records, paired_hit,
                                          reasoner_mode_study, reasoner_name)
from gr_core.studies.chat_speed import metaqa_questions, speed_study


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python bench/chat.py", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="study", required=True)
    sub.add_parser("speed", help="index, retrieval and answer time on a small graph and the MetaQA KB")
    sub.add_parser("answer-modes", help="Hit per answer mode and evidence format, paired")
    rm = sub.add_parser("reasoner-modes", help="GNN-RAG's reasoner as the answer, and ranked over its paths")
    rm.add_argument("--reasoner", type=Path, help="another MetaQA reasoner file (default: the chat's own)")
    fu = sub.add_parser("follow-ups", help="two-turn conversations: Hit of the follow-up")
    fu.add_argument("--label", default="this commit", help="names this run's records and file (e.g. a commit)")
    fu.add_argument("--out-dir", type=Path,
                    help="the folder of follow-up files (default outputs/bench/chat_follow_ups)")
    return p


def main(argv: list[str] | None = None) -> None:
    args = parser().parse_args(argv)
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    if args.study == "speed":
        path = result_path("chat")
        kept = {k: v for k, v in (read_json(path) if path.is_file() else {}).items() if k == "generated_reasoner"}
        print("wrote", write_result("chat", {**speed_study(), **kept}))
    elif args.study == "answer-modes":
        records, tests, rows = answer_mode_study(metaqa_questions())
        print("wrote", write_result("chat_answer_modes", {"answer_modes": records, "answer_mode_tests": tests,
                                                          "answer_mode_questions": rows}))
    elif args.study == "reasoner-modes":
        answers = result_path("chat_answer_modes")
        rows_by_mode = read_json(answers)["answer_mode_questions"] if answers.is_file() else {}
        records, tests, rows = reasoner_mode_study(metaqa_questions(), rows_by_mode, args.reasoner)
        name = "chat_reasoner_modes" + (f"_{slug(reasoner_name(args.reasoner))}" if args.reasoner else "")
        print("wrote", write_result(name, {"answer_modes": records, "answer_mode_tests": tests,
                                           "answer_mode_questions": rows}))
    else:
        folder = args.out_dir or result_path("chat_follow_ups").with_suffix("")
        records = follow_up_records(args.label)
        mine = f"gnn (the chat's reasoner), {args.label}"
        path = folder / f"{slug(args.label)}.json"
        others = {}  # every other record: this run's own without the reasoner, and every other label's file
        for other_file in sorted(folder.glob("*.json")):
            if other_file != path:
                others.update(read_json(other_file).get("records", {}))
        others.update({k: v for k, v in records.items() if k != mine})
        tests = [test for other, rec in others.items()
                 if (test := paired_hit("metaqa follow-ups", mine, records[mine]["rows"], other, rec["rows"]))]
        print("wrote", write_result(f"chat_follow_ups/{slug(args.label)}",
                                    {"what": FOLLOW_UPS_WHAT, "records": records, "tests": tests}, path=path))

if __name__ == "__main__":
    main()
