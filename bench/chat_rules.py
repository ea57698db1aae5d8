"""What each rule of the path ranker does, on every family (leave one family out: most rules were chosen on MetaQA's
dev questions; docs/chat.md, "What each rule does"):

    python bench/chat_rules.py  ->  outputs/bench/chat_rules.json

Each rule is turned off alone (its weight 0, or its switch False in :mod:`gr_core.chat.paths`) and the default chat asks
every family's questions again; each row is paired with the chat as shipped (exact McNemar on Hit).
"""
import argparse

from common import write_result

import gr_core.chat.paths as paths
from gr_core.chat import GraphChat
from gr_core.studies.chat_families import family_questions, hit_record, paired, run_systems

RULES = {"as shipped": {}, "no cost for unnamed words": {"UNEXPLAINED": 0.0}, "no asked kind": {"KIND": 0.0},
         "no reading order": {"ORDER": 0.0}, "each word a mention": {"MENTIONS": False},
         "no cycles": {"CYCLES": False}, "twins not a step back": {"TWIN_STEPS": False},
         "no cost for a second entity left out": {"ENTITY": 0.0}, "no pairs": {"PAIR_TOP": 0}}
FAMILIES = (("metaqa", "dev", 100), ("metaqa_slice", "test", 60), ("webqsp_mini", "test", 300), ("webqsp_full", "", 0),
            ("two_entity", "test", 120))


def main() -> None:
    argparse.ArgumentParser(prog="python bench/chat_rules.py", description=__doc__.split("\n")[0]).parse_args()
    shipped = {name: getattr(paths, name) for change in RULES.values() for name in change}
    out = {}
    for family, split, size in FAMILIES:
        questions, graphs = family_questions(family, split, size)
        rows = {}
        for label, change in RULES.items():
            for name, value in {**shipped, **change}.items():
                setattr(paths, name, value)
            rows |= run_systems({label: lambda spec: GraphChat(graphs[spec], model="zero_shot")}, questions)
        for name, value in shipped.items():
            setattr(paths, name, value)
        out[f"{family} {split}".strip()] = {
            "records": [hit_record(label, r) for label, r in rows.items()],
            "pairs": [paired(label, r, "as shipped", rows["as shipped"]) for label, r in rows.items()
                      if label != "as shipped"]}
        for p in out[f"{family} {split}".strip()]["pairs"]:
            print(f"{family} {split}: {p['a']} {100 * p['score_a']:.1f} vs {100 * p['score_b']:.1f} (p {p['p']:.3g})")
    print("wrote", write_result("chat_rules", {"rules": RULES, "families": out}))


if __name__ == "__main__":
    main()
