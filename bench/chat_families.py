"""The chat on graph families it was not tuned on, each question asked alone (gr_core.studies.chat_families):

    python bench/chat_families.py --family metaqa --split test --size 300        ->  outputs/bench/chat/metaqa_test.json
    python bench/chat_families.py --family metaqa_slice --split test --size 60   ->  .../metaqa_slice_test.json
    python bench/chat_families.py --family webqsp_mini --split test --size 300 --llm
    python bench/chat_families.py --family webqsp_full --size 6                   (the first 6 of the 18 graphs; 0: all)
    python bench/chat_families.py --family two_entity --split test --size 120

Each file holds every system's Hit with its 95% interval, the exact McNemar pair with the default, the trained
reasoners' decisions and training records, every question's answer, the machine, versions and command. ``--before
FILE``: a file of the same questions answered by an earlier commit (``per_question``), paired with this run's systems.
"""
import argparse
import json

from common import write_result

from gr_core.studies.chat_families import FAMILIES, family_study, paired


def main() -> None:
    p = argparse.ArgumentParser(prog="python bench/chat_families.py", description=__doc__.split("\n")[0])
    p.add_argument("--family", required=True, choices=FAMILIES + ("two_entity",))
    p.add_argument("--split", default="test", help="dev or test (metaqa), val or test (webqsp_mini)")
    p.add_argument("--size", type=int, default=300,
                   help="questions per hop count / per slice / graphs (webqsp_full: 0 or more than 18 for all 18)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--llm", action="store_true", help="also the LLM ranking PCST's evidence (slow)")
    p.add_argument("--before", help="an earlier commit's answers to the same questions (JSON with per_question)")
    args = p.parse_args()
    result = family_study(args.family, args.split, args.size, args.seed, llm=args.llm)
    if args.before:
        before = json.load(open(args.before))
        asked = [r["question"] for r in result["per_question"]["default"]]
        for label, rows in before["per_question"].items():
            name = f"{label} (before: {before.get('commit', 'earlier')})"
            by_text = {r["question"]: r for r in rows}  # the questions of this run, where it asked fewer
            result["per_question"][name] = rows = [by_text[t] for t in asked]
            result["pairs"] += [paired(mine, result["per_question"][mine], name, rows)
                                for mine in ("default", "train_reasoner")]
    split = "" if args.family == "webqsp_full" else f"_{args.split}"
    print("wrote", write_result(f"chat/{args.family}{split}", result))
    for r in result["records"]:
        print(f"  {r['label']}: Hit {r['hit']} [{r['ci_low']}, {r['ci_high']}] n {r['n']}, turn {r['turn_median_s']} s")


if __name__ == "__main__":
    main()
