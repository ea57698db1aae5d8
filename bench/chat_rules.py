"""What each rule of the path ranker does, on every family (leave one family out: most rules were chosen on MetaQA's
dev questions; docs/chat.md, "What each rule does"):

    python bench/chat_rules.py  ->  outputs/bench/chat_rules.json
    python bench/chat_rules.py --rules "the asked kind's words link names" --families webqsp_mini:val:300
        ->  outputs/bench/chat_rules-the_asked_kind_s_words_link_names-webqsp_mini_val_300.json (where it was chosen)

Each rule is turned off alone (its weight 0, or its switch False in :mod:`gr_core.chat.paths`, or in
:mod:`gr_core.chat.link` for a name written ``link.NAME``) and the default chat asks every family's questions again;
each row is paired with the chat as shipped (exact McNemar on Hit).
"""
import argparse

from chat_families import family_questions, hit_record, paired, run_systems
from common import slug, write_result

import gr_core.chat.link as link
import gr_core.chat.paths as paths
from gr_core.chat import GraphChat

RULES = {"as shipped": {}, "no cost for unnamed words": {"UNEXPLAINED": 0.0}, "no asked kind": {"KIND": 0.0},
         "no reading order": {"ORDER": 0.0}, "each word a mention": {"MENTIONS": False},
         "no cycles": {"CYCLES": False}, "twins not a step back": {"TWIN_STEPS": False},
         "no cost for a second entity left out": {"ENTITY": 0.0}, "no pairs": {"PAIR_TOP": 0},
         "the asked kind's words link names": {"link.ASKED_TYPE": False},
         "no fit of the answers to the asked kind's words": {"TYPE": 0.0},
         "a fact back to its subject is a cycle": {"FACT_CYCLES": True},
         "fit against every relation of the graph": {"IN_REACH": False},
         "the kind word of what type of X names a relation": {"KIND_FRAMES": frozenset()},
         "no pairs with a lowercase question's one-word names": {"link.UNCASED_PAIRS": False},
         "a capital on the first word marks names": {"link.SENTENCE_CASE": False},
         "a capitalized one-word name is no reason": {"link.CAPITALIZED_NAMES": False},
         "no longer names carried on by the next words": {"link.LONGER_NAMES": False},
         "a name in part covers its function words too": {"link.CONTENT_COVERAGE": False},
         "a hyphen's name only with its hyphen": {"link.HYPHENS": False},
         "no joint fit of a mention's words": {"JOINT": False},
         "where names a relation": {"KIND_ONLY": frozenset()},
         "when and how read by the asked kind only too": {"KIND_ONLY": frozenset({"where", "when", "how"})},
         "no whole-question similarity": {"SEMANTIC": 0.0}, "whole-question similarity 0.2": {"SEMANTIC": 0.2},
         "whole-question similarity 1.0": {"SEMANTIC": 1.0}, "whole-question similarity 2.0": {"SEMANTIC": 2.0},
         # the path ranker's own stop-word list, before the chat had one list of function words (2026-11-27); linking's
         # list (with have/has/had since) is the same in both runs, and no trained reasoner reads here
         "own stop words": {"STOPWORDS": frozenset("it the a an of is was what which who whom whose did in for on and "
                                                   "to by that are were be do does with as have has had".split())}}


def where(name: str) -> tuple:
    """The module and attribute of a rule's setting: ``NAME`` in :mod:`gr_core.chat.paths`, ``link.NAME`` in
    :mod:`gr_core.chat.link`."""
    module, _, attr = name.rpartition(".")
    return (link if module == "link" else paths), attr


FAMILIES = (("metaqa", "dev", 100), ("metaqa_slice", "test", 60), ("webqsp_mini", "test", 300),
            ("webqsp_union", "test", 300), ("webqsp_full", "", 0), ("two_entity", "test", 120))


def main() -> None:
    parser = argparse.ArgumentParser(prog="python bench/chat_rules.py", description=__doc__.split("\n")[0])
    parser.add_argument("--rules", nargs="+", choices=list(RULES), help="only these rules (and the chat as shipped); "
                        "the result goes to outputs/bench/chat_rules-<first rule>.json")
    parser.add_argument("--families", nargs="+", metavar="FAMILY:SPLIT:SIZE",
                        help="other families than the report's, e.g. webqsp_mini:val:300 where a rule was chosen")
    args = parser.parse_args()
    rules = {"as shipped": {}} | {k: RULES[k] for k in args.rules} if args.rules else RULES
    families = [(f, s, int(n)) for f, s, n in (x.split(":") for x in args.families)] if args.families else FAMILIES
    shipped = {name: getattr(*where(name)) for change in rules.values() for name in change}
    out = {}
    for family, split, size in families:
        questions, graphs = family_questions(family, split, size)
        rows = {}
        for label, change in rules.items():
            for name, value in {**shipped, **change}.items():
                setattr(*where(name), value)
            rows |= run_systems({label: lambda spec: GraphChat(graphs[spec], model="zero_shot")}, questions)
        for name, value in shipped.items():
            setattr(*where(name), value)
        out[f"{family} {split}".strip()] = {
            "records": [hit_record(label, r) for label, r in rows.items()],
            "pairs": [paired(label, r, "as shipped", rows["as shipped"]) for label, r in rows.items()
                      if label != "as shipped"]}
        for p in out[f"{family} {split}".strip()]["pairs"]:
            print(f"{family} {split}: {p['a']} {100 * p['score_a']:.1f} vs {100 * p['score_b']:.1f} (p {p['p']:.3g})")
    name = f"chat_rules-{slug(args.rules[0])}" if args.rules else "chat_rules"
    name += f"-{slug('-'.join(args.families))}" if args.families else ""
    listed = {k: {n: sorted(v) if isinstance(v, frozenset) else v for n, v in c.items()} for k, c in rules.items()}
    print("wrote", write_result(name, {"rules": listed, "families": out}))


if __name__ == "__main__":
    main()
