"""Chat with a graph nobody wrote questions for: a reasoner trained on generated questions, the path ranker.

    python bench/chat_generated.py metaqa       ->  outputs/bench/chat_generated_metaqa.json
    python bench/chat_generated.py webqsp       ->  outputs/bench/chat_generated_webqsp.json
    python bench/chat_generated.py webqsp --split val --generation-pair -> outputs/bench/chat_generated_webqsp_val.json
    python bench/chat_generated.py webqsp --generation-pair -> outputs/bench/chat_generated_webqsp_generation_pair.json
    python bench/chat_generated.py two-entity   ->  outputs/bench/chat_generated_two_entity.json
    python bench/chat_generated.py cost         ->  outputs/bench/chat_generated_cost.json
    python bench/chat_generated.py dev-penalty  ->  outputs/bench/chat_generated_dev_penalty.json
    python bench/chat_generated.py dev-scorers  ->  outputs/bench/chat_generated_dev_scorers.json
    python bench/chat_generated.py dev-sameness ->  outputs/bench/chat_generated_dev_sameness.json
    python bench/chat_generated.py dev-reasoner-weight ->  outputs/bench/chat_generated_dev_reasoner_weight.json
    python bench/chat_generated.py dev-word-fit ->  outputs/bench/chat_generated_dev_word_fit.json
    python bench/chat_generated.py word-fit     ->  outputs/bench/chat_generated_word_fit.json
    python bench/chat_generated.py unnamed --split val|test  ->  outputs/bench/chat_generated_unnamed_SPLIT.json
    python bench/chat_generated.py ranking-llm --split val|test  ->  .../chat_generated_ranking_llm_SPLIT.json
    python bench/chat_generated.py ranking-settings --split val|test  ->  .../chat_generated_ranking_settings_SPLIT.json
    python bench/chat_generated.py ranking-reasoner --split val|test  ->  .../chat_generated_ranking_reasoner_SPLIT.json
    python bench/chat_generated.py linking --split val|test  ->  .../chat_generated_linking_SPLIT.json
    python bench/chat_generated.py masking --split val|test  ->  .../chat_generated_masking_SPLIT.json
    python bench/chat_generated.py linking-metaqa  ->  .../chat_generated_linking_metaqa.json
    python bench/chat_generated.py twins --split val|test [--graphs 300]  ->  .../chat_generated_twins_SPLIT.json
    python bench/chat_generated.py refusals --split val|test [--graphs 300]  ->  .../chat_generated_refusals_SPLIT.json
    python bench/chat_generated.py readings     ->  outputs/bench/chat_generated_readings_dev.json (--split test: _test)
    python bench/chat_generated.py seeds        ->  outputs/bench/chat_generated_seeds.json
    python bench/chat_generated.py generation --graph metaqa|webqsp --split dev|val|test
                                 ->  outputs/bench/chat_generated_generation_GRAPH_SPLIT.json
    python bench/chat_generated.py webqsp-seeds  ->  outputs/bench/chat_generated_webqsp_seeds.json
    python bench/chat_generated.py metaqa|webqsp|seeds|webqsp-seeds --generation-rule both  ->  <file>_both.json
    python bench/chat_generated.py ensemble --graph webqsp|metaqa --split val|dev|test
                                 [--members 3] [--budget S] [--epochs N] [--ask-kind] [--twins]
                                 ->  .../chat_generated_ensemble_GRAPH_SPLIT[_budgetS][_epochsN][_askkind][_twins].json

What each measures: :mod:`gr_core.studies.chat_without_questions` (``dev-scorers``:
:mod:`gr_core.studies.path_scoring`; ``dev-*`` and ``word-fit``: :mod:`gr_core.studies.path_ranker_settings`;
``ranking-*``: :mod:`gr_core.studies.chat_ranking`; ``linking``: :mod:`gr_core.studies.chat_linking`; ``twins``:
:mod:`gr_core.studies.relation_twins`; ``refusals``: :mod:`gr_core.studies.relevance_gate`; ``readings``,
``seeds``, ``generation``, ``webqsp-seeds`` and ``ensemble``: :mod:`gr_core.studies.generated_reasoner_seeds`).
``metaqa`` and ``webqsp`` also write their ``generated_reasoner`` row (graph, n, hit, ci_low, ci_high, p_vs_ranked,
train_seconds, num_generated, ...) into ``outputs/bench/chat.json`` (that key only, that graph's row only). A reasoner
is trained on first use and then loaded from ``.cache/chat/reasoners/`` (keyed by the graphs and settings):
``train_seconds`` is the training's own time, recorded when it ran (on this machine, in this dtype: the reasoner is
fp32). Run alone on the machine.
"""
import argparse
import json
import os
from dataclasses import asdict, replace
from pathlib import Path

from common import result_path, write_result  # noqa: I001

from gr_core.chat import ChatIndex, GraphChat, load_graph
from gr_core.chat.generate import GenerationConfig
from gr_core.chat.graph_reasoner import GraphReasonerConfig, train_graph_reasoner, training_record
from gr_core.config import LLMConfig
from gr_core.llm import load_llm
from gr_core.paths import repo_relative, repo_root
from gr_core.runs import read_json, write_json
from gr_core.studies import chat_linking, chat_ranking, relation_twins, relevance_gate
from gr_core.studies import generated_reasoner_seeds as seeds
from gr_core.studies import chat_without_questions as study
from gr_core.studies import path_ranker_settings as settings
from gr_core.studies import path_scoring

# The question-trained reasoners compared with: the chat's MetaQA reasoner (notebook 09, trained on 3,000 MetaQA
# training questions of 1 and 2 hops on the chat's scope) and notebook 04's WebQSP reasoner (the re-split's training
# questions); git-ignored weights, present where the quick preset ran.
METAQA_QUESTION_REASONER = Path("outputs", "quick", "09_chat", "reasoner", "metaqa-chat.pt")
WEBQSP_QUESTION_REASONER = Path("outputs", "quick", "04_gnn_rag", "reasoners", "webqsp.pt")


def reasoner_config(args) -> GraphReasonerConfig:
    """The library's defaults (what ``GraphChat(train_reasoner=True)`` trains) unless an option overrides them."""
    gen = GenerationConfig()
    gen = GenerationConfig(num_questions=args.questions or gen.num_questions, max_hops=args.max_hops or gen.max_hops)
    base = GraphReasonerConfig()
    return seeds.rule_config(args.generation_rule, GraphReasonerConfig(
        generation=gen, num_epochs=args.epochs or base.num_epochs,
        time_budget_s=base.time_budget_s if args.budget is None else args.budget))


def rule_suffix(args) -> str:
    """``_<rule>`` for questions generated by another rule than the default's (another file; chat.json untouched)."""
    return "" if seeds.rule_config(args.generation_rule) == GraphReasonerConfig() else f"_{args.generation_rule}"


def update_chat_json(row: dict) -> None:
    """Replace this graph's row of ``generated_reasoner`` in ``outputs/bench/chat.json`` (nothing else changes)."""
    path = result_path("chat")
    data = read_json(path) if path.is_file() else {}
    rows = [r for r in data.get("generated_reasoner", []) if r.get("graph") != row["graph"]]
    data["generated_reasoner"] = sorted(rows + [row], key=lambda r: r["graph"])
    write_json(path, data)


def hop_hits(result: dict) -> dict:
    """The generated reasoner's Hit per hop count for its ``chat.json`` row (the targets are per hop count)."""
    by_hop = result.get("by_hop", {}).get(study.GENERATED, {})
    return {"hit_by_hop": {h: {k: r[k] for k in ("n", "hit", "ci_low", "ci_high")} for h, r in by_hop.items()}} \
        if by_hop else {}


def existing(path: Path) -> str | None:
    return str(path) if (repo_root() / path).is_file() else None


def rule_option(p) -> None:
    p.add_argument("--generation-rule", choices=tuple(seeds.RULES), default="first",
                   help="how the questions are generated (generated_reasoner_seeds.RULES; default: the library's); "
                        "another rule writes <file>_<rule>.json")


def sample_options(p):
    """The real questions a study asks: MetaQA's (``--split dev|test``, ``--per-hop``) or WebQSP's mini-graphs
    (``--split val|test``, ``--graphs``)."""
    p.add_argument("--graph", choices=("metaqa", "webqsp"), default="webqsp")
    p.add_argument("--split", choices=("dev", "val", "test"), default="val", help="MetaQA: dev|test; WebQSP: val|test")
    p.add_argument("--per-hop", type=int, default=300, help="MetaQA questions per hop count")
    p.add_argument("--graphs", type=int, default=200, help="WebQSP mini-graphs")
    return p


def webqsp_split(sub, name: str, text: str) -> argparse.ArgumentParser:
    """A WebQSP study's subcommand with ``--split val|test`` and ``--graphs`` (200 validation graphs; test: pass
    ``--graphs 300``)."""
    p = sub.add_parser(name, help=text)
    p.add_argument("--split", choices=("val", "test"), default="val")
    p.add_argument("--graphs", type=int, default=200)
    return p


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="study", required=True)
    for name in ("metaqa", "webqsp"):
        p = sub.add_parser(name)
        p.add_argument("--questions", type=int, help="generated questions in all (default: GenerationConfig's)")
        p.add_argument("--max-hops", type=int, help="longest generated path (default: GenerationConfig's)")
        p.add_argument("--epochs", type=int, help="default: GraphReasonerConfig's")
        p.add_argument("--budget", type=float, help="training time budget, seconds (default: GraphReasonerConfig's)")
        p.add_argument("--seed", type=int, default=0, help="the test sample's seed")
        p.add_argument("--no-question-reasoner", action="store_true")
        rule_option(p)
        if name == "metaqa":
            p.add_argument("--per-hop", type=int, default=300)
            p.add_argument("--llm-per-hop", type=int, default=300, help="questions per hop for the LLM-ranked chat")
        else:
            p.add_argument("--graphs", type=int, default=300)
            p.add_argument("--no-llm", action="store_true")
            p.add_argument("--split", choices=("val", "test"), default="test",
                           help="val: a choice's check (-> chat_generated_webqsp_val.json, chat.json untouched)")
            p.add_argument("--generation-pair", action="store_true",
                           help="also a reasoner trained on questions with identifier-named topics and answers")
    p = sub.add_parser("two-entity")
    p.add_argument("--n", type=int, default=200)
    p.add_argument("--generated-reasoner", action="store_true",
                   help="also the reasoner trained on questions generated from the KB (the library's defaults; "
                        "loaded from the cache when bench metaqa trained it)")
    p = sub.add_parser("cost", help="train_reasoner on a ~15k-triple MetaQA neighbourhood: seconds and Hit")
    p.add_argument("--max-nodes", type=int, default=6000)
    p.add_argument("--max-expand-degree", type=int, default=400)
    p = sub.add_parser("dev-penalty")
    p.add_argument("--per-hop", type=int, default=100)
    p = sub.add_parser("dev-sameness", help="word coverage's bonus for 'same <relation>' steps on MetaQA dev")
    p.add_argument("--per-hop", type=int, default=100)
    p = sub.add_parser("dev-word-fit", help="the coverage scorer's word fit (contrast, stems, reading order) on dev")
    p.add_argument("--per-hop", type=int, default=100)
    p = sub.add_parser("word-fit", help="the word fit chosen on dev against the first coverage scorer, once on test")
    p.add_argument("--per-hop", type=int, default=300)
    p = webqsp_split(sub, "unnamed", "WebQSP answers named by identifiers (Freebase mids) left out or kept")
    p = webqsp_split(sub, "ranking-llm", "WebQSP: the LLM that ranks the evidence, SmolLM2 against Gemma 3 270M")
    p.add_argument("--llms", nargs="+", default=["embedded:smollm2-135m-instruct", "embedded:gemma3-270m"])
    p = webqsp_split(sub, "ranking-settings", "WebQSP: the LLM ranking's relation prior and length norm, replayed")
    p = webqsp_split(sub, "ranking-reasoner", "WebQSP: the LLM ranking helped by the generated-question reasoner")
    p = sub.add_parser("dev-reasoner-weight", help="the path ranker helped by the generated reasoner, on MetaQA dev")
    p.add_argument("--per-hop", type=int, default=100)
    p = webqsp_split(sub, "linking", "WebQSP: lowercase questions' one-word names linked or not (link_uncased)")
    p.add_argument("--no-llm", action="store_true")
    p = webqsp_split(sub, "masking", "WebQSP: linked names masked as the question wrote them, or literally")
    p = webqsp_split(sub, "twins", "WebQSP: the path ranker with relations stored twice read as one, or not")
    p = webqsp_split(sub, "refusals", "WebQSP and off-topic questions: which rule takes each as about the graph")
    p = sub.add_parser("linking-metaqa", help="MetaQA: the path ranker under the same linking rules")
    p.add_argument("--per-hop", type=int, default=300)
    p = sub.add_parser("readings", help="MetaQA: the generated reasoner by how it reads a question (chosen on dev)")
    p.add_argument("--split", choices=("dev", "test"), default="dev")
    p.add_argument("--per-hop", type=int, default=300)
    p = sub.add_parser("seeds", help="MetaQA: the generated reasoner over seeds, on the same test questions")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--per-hop", type=int, default=300)
    rule_option(p)
    sample_options(sub.add_parser("generation", help="how questions are generated: topics drawn by their facts, "
                                                     "identifier nodes"))
    p = sub.add_parser("webqsp-seeds", help="WebQSP: the generated reasoner over seeds, on the same test questions")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--graphs", type=int, default=300)
    rule_option(p)
    p = sample_options(sub.add_parser("ensemble", help="several generated-question reasoners as one, each alone"))
    p.add_argument("--members", type=int, default=3)
    p.add_argument("--budget", type=float, help="each member's training budget, seconds (-> <file>_budgetS.json)")
    p.add_argument("--epochs", type=int, help="each member's epochs (-> <file>_epochsN.json)")
    p.add_argument("--ask-kind", action="store_true", help="question words that say the answers' kind (-> "
                   "<file>_askkind.json, paired with <file>.json)")
    p.add_argument("--twins", action="store_true", help="a word's fit not lowered by a relation's twins, the chat's "
                   "default reading (-> <file>_twins.json, paired with <file>.json, read without them)")
    p = sub.add_parser("dev-scorers", help="other path scorers on MetaQA dev (word coverage, LLM channel)")
    p.add_argument("--per-hop", type=int, default=100)
    p.add_argument("--top", type=int, default=10, help="candidate paths re-scored per question")
    p.add_argument("--no-llm", action="store_true")
    args = parser.parse_args()
    if {getattr(args, "graph", None), getattr(args, "split", None)} in ({"metaqa", "val"}, {"webqsp", "dev"}):
        parser.error(f"--graph {args.graph} has no {args.split} split (MetaQA: dev|test; WebQSP: val|test)")
    os.chdir(repo_root())

    if args.study in ("metaqa", "webqsp"):
        cfg = reasoner_config(args)
        earlier = result_path(f"chat_generated_{args.study}")  # the question-trained answers, when the weights are gone
        committed = read_json(earlier) if earlier.is_file() else {}
        if args.study == "metaqa":
            ref = None if args.no_question_reasoner else existing(METAQA_QUESTION_REASONER)
            result = study.pair_with_committed(study.metaqa_study(cfg, args.per_hop, args.llm_per_hop, args.seed, ref),
                                               committed)
        else:
            ref = None if args.no_question_reasoner else existing(WEBQSP_QUESTION_REASONER)
            result = study.webqsp_study(cfg, args.graphs, args.seed, ref, llm=not args.no_llm, committed=committed,
                                        split=args.split, generation_pair=args.generation_pair)
            if args.split == "test":
                study.pair_with_committed(result, committed)
        result["reasoner_config"] = asdict(cfg)
        carried = any(k.endswith("(committed)") for k in result["per_question"])
        result["question_reasoner"] = ref or ("its answers committed by the previous run" if carried else None)
        # a choice's check (val) or the generation rule's pair: not the reported row
        aside = "_val" if args.study == "webqsp" and args.split == "val" else \
            "_generation_pair" if args.study == "webqsp" and args.generation_pair else rule_suffix(args)
        out = write_result(f"chat_generated_{args.study}{aside}", result)
        if not aside:
            update_chat_json({**result["generated_reasoner"], "result_file": repo_relative(out), **hop_hits(result)})
    elif args.study == "readings":
        out = write_result(f"chat_generated_readings_{args.split}", seeds.reading_study(args.split, args.per_hop))
    elif args.study == "seeds":
        result = seeds.seeds_study(tuple(args.seeds), per_hop=args.per_hop, cfg=seeds.rule_config(args.generation_rule))
        out = write_result(f"chat_generated_seeds{rule_suffix(args)}", result)
    elif args.study == "generation":  # chosen on MetaQA dev and WebQSP val, then test once
        result = seeds.generation_study(args.graph, args.split, args.per_hop, args.graphs)
        out = write_result(f"chat_generated_generation_{args.graph}_{args.split}", result)
    elif args.study == "webqsp-seeds":
        result = seeds.webqsp_seeds_study(tuple(args.seeds), num_graphs=args.graphs,
                                          cfg=seeds.rule_config(args.generation_rule))
        out = write_result(f"chat_generated_webqsp_seeds{rule_suffix(args)}", result)
    elif args.study == "ensemble":  # chosen on MetaQA dev and WebQSP val, then test once
        base = GraphReasonerConfig()
        cfg = replace(base, time_budget_s=base.time_budget_s if args.budget is None else args.budget,
                      num_epochs=args.epochs or base.num_epochs)
        if args.ask_kind:
            cfg = replace(cfg, generation=replace(cfg.generation, ask_kind=True),
                          reasoner=replace(cfg.reasoner, asking_words=True))
        # twins are the default reading since this study measured them; its plain runs (the committed files without
        # the suffix) read without them, as when they were made
        cfg = replace(cfg, reasoner=replace(cfg.reasoner, twin_relations=args.twins))
        result = seeds.ensemble_study(args.graph, args.split, args.members, args.per_hop, args.graphs, cfg)
        name = f"chat_generated_ensemble_{args.graph}_{args.split}" + \
            ("" if args.budget is None else f"_budget{args.budget:g}") + \
            ("" if args.epochs is None else f"_epochs{args.epochs}")
        if args.ask_kind or args.twins:  # a change, paired with the committed run without it
            plain = result_path(name)
            result["pairs_vs_plain"] = seeds.pair_runs(result, read_json(plain)) if plain.is_file() else []
            if not result["pairs_vs_plain"]:  # no plain run, or one on other questions (--graphs, --per-hop)
                print(f"warning: nothing paired: {plain} is missing or asked other questions")
        if args.ask_kind and args.graph == "webqsp":  # how the kinds read the real questions' answers
            result["answer_kinds_by_question_word"] = seeds.answer_kind_check(args.split, args.graphs)
        name += "_askkind" * args.ask_kind + "_twins" * args.twins
        out = write_result(name, result)
    elif args.study == "two-entity":
        reasoner = None
        if args.generated_reasoner:
            reasoner = train_graph_reasoner(ChatIndex.build(load_graph("metaqa")[0]), GraphReasonerConfig())
        result = study.two_entity_study(args.n, generated_reasoner=reasoner)
        out = write_result("chat_generated_two_entity", result)
    elif args.study == "cost":
        result = study.cost_study(args.max_nodes, args.max_expand_degree)
        out = write_result("chat_generated_cost", result)
    elif args.study == "dev-sameness":
        kb, kind, _ = load_graph("metaqa")
        chat = GraphChat(kb, kind=kind, retriever="pcst", answer_mode="paths")
        result = settings.choose_same_bonus(chat, study.metaqa_sample("dev", args.per_hop, seed=1))
        out = write_result("chat_generated_dev_sameness", result)
    elif args.study == "dev-word-fit":  # chosen on one dev sample (the other dev studies'), checked on a second
        kb, kind, _ = load_graph("metaqa")
        chat = GraphChat(kb, kind=kind, retriever="pcst", answer_mode="paths")
        result = settings.choose_word_fit(chat, study.metaqa_sample("dev", args.per_hop, seed=1),
                                       study.metaqa_sample("dev", args.per_hop, seed=2))
        out = write_result("chat_generated_dev_word_fit", result)
    elif args.study == "word-fit":  # paired with the other systems' committed answers to the same test questions
        result = settings.word_fit_study(read_json(result_path("chat_generated_metaqa")),
                                      read_json(result_path("chat_generated_webqsp")), args.per_hop)
        out = write_result("chat_generated_word_fit", result)
    elif args.study == "unnamed":  # val first (the rule's check), then test once
        result = study.unnamed_answers_study(args.split, args.graphs)
        out = write_result(f"chat_generated_unnamed_{args.split}", result)
    elif args.study == "ranking-llm":  # val first, then test once
        result = chat_ranking.ranking_llm_study(args.split, args.graphs, llms=tuple(args.llms))
        out = write_result(f"chat_generated_ranking_llm_{args.split}", result)
    elif args.study == "ranking-settings":  # chosen on val
        result = chat_ranking.ranking_settings_study(args.split, args.graphs)
        out = write_result(f"chat_generated_ranking_settings_{args.split}", result)
    elif args.study == "ranking-reasoner":  # on val; nothing was chosen, so never on test (docs/chat.md)
        result = chat_ranking.reasoner_help_study(GraphReasonerConfig(), args.split, args.graphs)
        out = write_result(f"chat_generated_ranking_reasoner_{args.split}", result)
    elif args.study == "linking":  # val first, then test once
        result = chat_linking.linking_study(GraphReasonerConfig(), args.split, args.graphs,
                                            llm=not args.no_llm)
        out = write_result(f"chat_generated_linking_{args.split}", result)
    elif args.study == "masking":  # val first, then test once
        result = chat_linking.masking_study(GraphReasonerConfig(), args.split, args.graphs)
        out = write_result(f"chat_generated_masking_{args.split}", result)
    elif args.study == "twins":  # val first, then test once
        result = relation_twins.path_twins_study(args.split, args.graphs)
        out = write_result(f"chat_generated_twins_{args.split}", result)
    elif args.study == "refusals":
        result = relevance_gate.relevance_gate_study(args.split, args.graphs)
        out = write_result(f"chat_generated_refusals_{args.split}", result)
    elif args.study == "linking-metaqa":
        result = chat_linking.metaqa_linking_check(args.per_hop)
        out = write_result("chat_generated_linking_metaqa", result)
    elif args.study == "dev-reasoner-weight":
        kb, kind, _ = load_graph("metaqa")
        chat = GraphChat(kb, kind=kind, retriever="gnn", train_reasoner=True)
        result = settings.choose_reasoner_weight(chat, study.metaqa_sample("dev", args.per_hop, seed=1))
        result["reasoner"] = training_record(chat.trained_reasoner)
        out = write_result("chat_generated_dev_reasoner_weight", result)
    elif args.study == "dev-scorers":
        kb, kind, _ = load_graph("metaqa")
        chat = GraphChat(kb, kind=kind, retriever="pcst", answer_mode="paths")
        rows = path_scoring.dev_candidates(chat, study.metaqa_sample("dev", args.per_hop, seed=1), args.top)
        llm = None if args.no_llm else load_llm(LLMConfig())
        result = path_scoring.compare_scorers(rows, lambda t: chat.encoder.encode(
            t, normalize_embeddings=True, convert_to_numpy=True, batch_size=128), llm)
        result.update(best=path_scoring.best_settings(result), n=len(rows), top=args.top,
                      llm=llm and LLMConfig().model, llm_dtype=llm and str(llm[0].dtype))
        out = write_result("chat_generated_dev_scorers", result)
    else:
        kb, kind, _ = load_graph("metaqa")
        chat = GraphChat(kb, kind=kind, retriever="pcst", answer_mode="paths")
        result = settings.choose_hop_penalty(chat, study.metaqa_sample("dev", args.per_hop, seed=1))
        out = write_result("chat_generated_dev_penalty", result)
    summary = {k: v for k, v in result.items() if k in ("records", "pairs", "generated_reasoner", "hit_by_penalty",
                                                           "chosen", "triples", "call_seconds", "train_seconds",
                                                           "best", "top_k_recall", "hit_by_bonus",
                                                           "hit_by_bonus_and_hop", "hit_by_weight",
                                                           "hit_by_weight_and_hop", "reasoner_alone",
                                                           "hit_by_setting", "confirm",
                                                           "answers_all_unnamed", "replay_matches", "asked", "reasoner",
                                                           "pairs_hit1", "questions_masked_differently",
                                                           "metaqa_test_questions_masked_differently", "spread")}
    if args.study == "word-fit":
        summary = {k: {"hit": result[k]["hit"], "pairs": result[k]["pairs"]}
                   for k in ("metaqa", "two_entity", "webqsp")}
        summary["by_hop"] = result["metaqa"]["by_hop"]
    print(json.dumps(summary, indent=1, default=str))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
