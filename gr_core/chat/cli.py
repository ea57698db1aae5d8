"""``python -m gr_core.chat``: ask questions about a graph from the command line."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..data import GraphFormatError
from .config import ANSWER_MODES, KINDS, MODEL_FREE_MODES, ChatConfig
from .conversation import GraphChat
from .graphs import graph_from_triple_list, read_graph_csv, read_triples
from .turns import save_turns


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gr_core.chat",
                                     description="Ask questions about a graph; prints each answer and its evidence.")
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--triples", help="a file of head<TAB>relation<TAB>tail lines ('|' or ',' also accepted)")
    src.add_argument("--csv", nargs=2, metavar=("NODES", "EDGES"), help="node_id,node_attr and src,edge_attr,dst files")
    src.add_argument("--graph", help="metaqa, metaqa:<entity>, webqsp_full:<i>, explagraphs:<i>, clevr:<i>")
    parser.add_argument("questions", nargs="+", help="one or more questions, asked in order as one conversation")
    parser.add_argument("--model", default="auto", help="auto | zero_shot | a training run directory (default auto)")
    parser.add_argument("--llm", default="embedded:smollm2-135m-instruct", help="LLM (embedded or a HF path)")
    parser.add_argument("--kind", choices=KINDS, help="kind of graph (default: kg for files)")
    parser.add_argument("--reasoner", help="a GNN-RAG reasoner file: answer with it")
    parser.add_argument("--train-reasoner", action="store_true",
                        help="train a reasoner on questions generated from the graph's facts (minutes; cached) and "
                             "answer with it where it beats the path ranker on its held-out questions")
    parser.add_argument("--answer-mode", choices=ANSWER_MODES, default="auto",
                        help="auto (a KG: the relation path the question's words name, or the reasoner; other graphs: "
                             "free) | paths | reasoner | ranked (the LLM picks a node of the evidence) | free (the "
                             "LLM writes)")
    parser.add_argument("--cite", action="store_true", help="also ask the model to list the supporting nodes and edges")
    parser.add_argument("--max-new-tokens", type=int, default=ChatConfig.max_new_tokens)
    parser.add_argument("--independent", action="store_true", help="answer each question on its own (no history)")
    parser.add_argument("--json", help="also write the turns to this JSON file")
    args = parser.parse_args(argv)
    # checked before any work, not when the turns are written (the graph's paths are checked where they are read)
    if args.json is not None and (not args.json.strip() or Path(args.json).is_dir()):
        parser.error(f"--json {args.json!r}: name the file to write")
    graph = args.graph
    try:
        if args.triples is not None:
            graph = graph_from_triple_list(read_triples(args.triples))
        elif args.csv:
            graph = read_graph_csv(*args.csv)
        chat = GraphChat(graph, model=args.model, llm_model=args.llm, reasoner=args.reasoner, cite=args.cite,
                         max_new_tokens=args.max_new_tokens, train_reasoner=args.train_reasoner,
                         answer_mode=args.answer_mode, kind=args.kind)
        if chat.mode not in MODEL_FREE_MODES:  # the LLM modes: their model loaded now, not at the first turn
            _ = chat.llm
        elif args.cite:  # said, not ignored: only an LLM's reply cites; a path's answer is its evidence already
            print(f"note: --cite asks the LLM for citations; the {chat.mode} answer writes none (its evidence is "
                  "the facts shown)", file=sys.stderr)
    except (GraphFormatError, OSError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"graph: {chat.index.num_nodes} nodes, {chat.index.num_edges} edges (indexed in {chat.index.seconds:.1f} s"
          f"{', cached' if chat.index.cached else ''}); answers: {chat.mode}"
          + (f" (held-out questions: reasoner {chat.decision['reasoner_hit']}%, paths {chat.decision['paths_hit']}%)"
             if chat.decision else ""), flush=True)
    turns = []
    for question in args.questions:  # each printed as it is answered
        if args.independent:
            chat.reset()
        turn = chat.ask(question)
        turns.append(turn)
        print(f"\n{turn}")
        print(f"[{turn.status}; {turn.mode or '-'} answer; model: {turn.model or '-'}; "
              f"{turn.timings.get('total', 0) * 1000:.0f} ms]", flush=True)
    if args.json:
        save_turns(turns, args.json, {"graph": args.triples or args.csv or args.graph,  # paths: no LLM loaded
                                      "model": chat.model_name or ", ".join(dict.fromkeys(t.model for t in turns
                                                                                          if t.model))})
    return 0
