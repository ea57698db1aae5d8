"""The conversation: :class:`GraphChat` answers each :class:`~gr_core.chat.Turn` in the pipeline's five steps, one
module each (the package docstring)."""
from __future__ import annotations

import functools
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import Data

from ..config import EMBEDDED_TEXT_ENCODER, TextEncoderConfig, check_choice, usable_device
from ..data import EDGE_COLUMNS, NODE_COLUMNS, TextualGraph, induced_subgraph
from ..g_retriever.model import Example
from ..g_retriever.retrieval import retrieve_subgraph
from ..g_retriever.textualize import textualize, textualize_triples
from ..gnn_rag import load_reasoner, reasoner_meta, reasoning_paths
from ..kg import NeighbourhoodConfig
from ..llm import count_tokens, not_here
from ..prompts import cite_question, question_for
from ..runs import config_hash, read_json, write_json
from ..stats import mcnemar_exact
from ..text_encoder import shared_text_encoder
from .answer import Candidate, candidate_names, choose, rank_candidates, relation_fit, score_names
from .check import check_turn
from .config import (ANSWER_MODES, KIND_ANSWER_MODE, KIND_RELATION_THRESHOLD, KIND_TEMPLATE, MODEL_FREE_MODES,
                     ChatConfig)
from .generate import graph_phrase_twins, relation_phrases
from .graph_reasoner import GraphReasonerConfig, TooFewQuestions, read_for, reasoner_candidates, train_graph_reasoner
from .graphs import graph_from_triple_list, load_graph
from .index import KIND_PROTOTYPES, ChatIndex, WordVectors, answer_kinds, name_key
from .link import Link, about, asked_phrase, has_content, link_question, most_similar, unknown_brackets
from .link import rules as link_rules
from .models import load_answerer, run_directory
from . import paths as path_ranker
from .scope import search_scope
from .turns import Turn

# a trained reasoner is served when it beats the path ranker on its held-out generated questions at this p; at 0.05 a
# MetaQA slice's reasoner won its generated questions (p 0.031) and lost real ones (dev 81.7 against the default's
# 89.6); no family measured decides differently anywhere in (0.00024, 0.031] (CHANGELOG.md)
DECISION_ALPHA = 0.01


class GraphChat:
    """A conversation with one graph.

    Args:
        graph: a :class:`~gr_core.data.TextualGraph`, a spec for :func:`load_graph` (``"metaqa"``,
            ``"metaqa:Forrest Gump"``, a triples file, ``"nodes.csv,edges.csv"``, ``"webqsp_full:0"``), or
            ``(head, relation, tail)`` triples (a list, a generator, an array, a three-column DataFrame).
        model: the LLM modes' model: ``"auto"`` (a trained G-Retriever for this kind of graph from ``outputs/``, else
            zero-shot), ``"zero_shot"``, or a run directory.
        llm_model: the LLM (the embedded SmolLM2-135M-Instruct, or any Hugging Face path).
        reasoner: a trained GNN-RAG reasoner (:class:`~gr_core.gnn_rag.ReaRev`) or its saved file: served as asked.
        train_reasoner: True (or a :class:`~gr_core.chat.GraphReasonerConfig`), no ``reasoner`` given: train one on
            questions generated from this graph's facts (minutes on 2 cores, cached), and serve it only where it
            answers its own held-out questions better than the path ranker (:meth:`decide`). A graph too small to
            generate questions from warns and answers without one.
        config: a :class:`ChatConfig`; keyword arguments override its fields.

    >>> chat = GraphChat("my_kg.tsv")                          # doctest: +SKIP
    >>> print(chat.ask("who directed The Matrix?"))            # doctest: +SKIP
    """

    def __init__(self, graph, model: str = "auto", llm_model: str = "embedded:smollm2-135m-instruct",
                 device: str = "auto", encoder: str | None = None, reasoner=None, config: ChatConfig | None = None,
                 train_reasoner=False, **overrides):
        kind = overrides.pop("kind", None)
        run_directory(model)  # a bad model spec fails now, not at the first LLM turn
        llm_model = str(llm_model)
        # llm.unavailable takes paths as loadable (a plan may name a GPU node's); a chat loads here, so one must exist
        if (why := not_here(llm_model)):
            raise ValueError(f"llm_model={llm_model!r}: {why}")
        usable_device(str(device))  # not an AssertionError at a turn
        if isinstance(reasoner, (str, Path)) and not Path(reasoner).is_file():
            raise FileNotFoundError(f"reasoner={str(reasoner)!r}: no such file (a saved GNN-RAG reasoner, .pt)")
        if graph is None or (isinstance(graph, (str, Path)) and not str(graph).strip()):
            raise ValueError(f"graph={graph!r}: give a graph spec, a triples file, triples or a TextualGraph")
        if isinstance(graph, (str, Path)):
            graph, spec_kind = load_graph(str(graph))
            kind = kind or spec_kind
        elif not isinstance(graph, TextualGraph):  # triples: a list, a generator, an array, a DataFrame
            graph = graph_from_triple_list(graph)
        self.config = replace(config or ChatConfig(), **({"kind": kind} if kind else {}), **overrides)
        self.graph, self.encoder_name = graph, encoder
        self.index = ChatIndex.build(graph, encoder)
        self.model_spec, self.llm_model, self.device = model, llm_model, device
        self._llm, self.model_name = None, ""
        self.history: list[Turn] = []
        self.reasoner = self.reasoner_path = self.trained_reasoner = self.decision = None
        tried = self.reasoner_tried = reasoner is None and bool(train_reasoner) and self.config.kind == "kg"
        if tried:
            cfg = train_reasoner if isinstance(train_reasoner, GraphReasonerConfig) else GraphReasonerConfig()
            try:
                reasoner = self.trained_reasoner = train_graph_reasoner(
                    self.index, cfg, {"whole_graph_edges": self.config.whole_graph_edges, "scope": self.config.scope,
                                      "link_k": self.config.link_k}, encoder)
            except TooFewQuestions as err:  # documented fallback: the path ranker, which needs no training
                warnings.warn(f"no reasoner trained: {err}", stacklevel=2)
        if reasoner is not None:
            self.reasoner_path = str(reasoner) if isinstance(reasoner, (str, Path)) else None
            self.reasoner = load_reasoner(reasoner) if isinstance(reasoner, (str, Path)) else reasoner
            dim = int(self.index.node_emb.shape[1])
            if getattr(self.reasoner, "text_dim", dim) != dim:
                raise ValueError(f"the reasoner reads {self.reasoner.text_dim}-d text embeddings; this graph is "
                                 f"indexed with {dim}-d ones (a different sentence encoder)")
        if self.config.answer_mode == "reasoner" and self.reasoner is None:
            why = ("train_reasoner trained none on this graph (the warning says why)" if tried else
                   "train_reasoner=True trains one on a KG only" if train_reasoner else
                   "or train_reasoner=True on a KG")
            raise ValueError(f"answer_mode='reasoner' needs a reasoner: pass reasoner=<ReaRev or its .pt>; {why}")
        if self.trained_reasoner is not None and self.config.answer_mode == "auto":
            self.decision = self.decide()
        _ = self.encoder  # every turn reads its question with it: loaded now (2-3 s once a process), not in a turn

    # ------------------------------------------------------------------ the parts (but the encoder) load on first use
    @property
    def mode(self) -> str:
        """The answer mode in effect: ``answer_mode``, else a served reasoner, else the kind's default; ``ranked`` on
        a graph without edges for the modes that follow relations."""
        mode = self.config.answer_mode if self.config.answer_mode != "auto" else \
            "reasoner" if self.serves_reasoner else KIND_ANSWER_MODE[self.config.kind]
        return "ranked" if self.index.num_edges == 0 and mode in MODEL_FREE_MODES else mode

    @property
    def serves_reasoner(self) -> bool:
        """A reasoner was given, or trained here and chosen by :meth:`decide` (in the LLM modes, its paths are the
        evidence: GNN-RAG)."""
        return self.reasoner is not None and (self.decision is None or self.decision["served"] == "reasoner")

    @property
    def encoder(self):
        """The sentence encoder, loaded once per process and shared by every chat."""
        return shared_text_encoder(TextEncoderConfig(model=self.encoder_name or EMBEDDED_TEXT_ENCODER))

    def embed(self, texts) -> np.ndarray:
        """Sentence vectors ``(len(texts), dim)`` (one text: ``(dim,)``), L2-normalized."""
        one = isinstance(texts, str)
        out = np.asarray(self.encoder.encode([texts] if one else list(texts), normalize_embeddings=True,
                                             convert_to_numpy=True, batch_size=64), np.float32)
        return out[0] if one else out

    @functools.cached_property
    def vectors(self) -> WordVectors:
        """Word and relation-phrase vectors, each text encoded once a chat."""
        vectors = WordVectors(self.embed)
        vectors.cache.update(self.index.phrase_emb)  # the relations' phrases, embedded with the index
        return vectors

    @functools.cached_property
    def kinds(self) -> np.ndarray:
        """Each node's kind (:func:`~gr_core.chat.index.answer_kinds`), for the path ranker's KIND term."""
        return answer_kinds(self.index.kg.entities, self.index.node_emb, self.embed(list(KIND_PROTOTYPES)))

    @property
    def llm(self):
        """The LLM modes' GraphLLM, loaded on first use."""
        if self._llm is None:
            self._llm, self.model_name, _ = load_answerer(self.model_spec, self.config.kind, self.llm_model,
                                                          self.device, self.config.max_txt_len,
                                                          int(self.index.node_emb.shape[1]))
        return self._llm

    def reuse_model(self, other: "GraphChat") -> None:
        """Answer with ``other``'s already loaded LLM (no second load); it must suit this graph's kind."""
        self._llm, self.model_name = other.llm, other.model_name

    def reset(self) -> None:
        """Forget the conversation (the index and models stay loaded)."""
        self.history = []

    def around(self, node_ids, scope: NeighbourhoodConfig = NeighbourhoodConfig(2, 50, 1500)) -> list[tuple]:
        """The ``(head, relation, tail)`` facts of ``scope`` around the nodes ``node_ids``, to open as a graph."""
        return self.index.subgraph(*self.index.kg.neighbourhood(self.index.rows_of(node_ids), scope)).triples()

    # ------------------------------------------------------------------ one turn
    def ask(self, question: str, mode: str | None = None) -> Turn:
        """One turn: link, scope, candidates, answer, check; it joins the history unless empty or unrelated. ``mode``:
        this turn's answer mode instead of :attr:`mode` (one of :data:`~gr_core.chat.config.ANSWER_MODES`; ``auto``:
        :attr:`mode`)."""
        if question is not None and not isinstance(question, str):
            raise TypeError(f"ask: the question must be a str, got {type(question).__name__}")
        if mode is not None:
            check_choice("ask", "mode", mode, ANSWER_MODES)
            if mode == "reasoner" and self.reasoner is None:
                raise ValueError("ask(mode='reasoner') needs a reasoner: GraphChat(..., reasoner=<ReaRev or its .pt>)"
                                 + ("; train_reasoner trained none on this graph (its warning said why)"
                                    if self.reasoner_tried else " or GraphChat(..., train_reasoner=True) on a KG"))
            mode = None if mode == "auto" else mode
        question = (question or "").strip()
        if not question:
            return Turn(question="", status="empty_question",
                        note="the question is empty: ask something about the graph")
        t0 = time.perf_counter()
        turn, cfg, index = Turn(question=question), self.config, self.index
        turn.mode, turn.decision = mode or self.mode, self.decision
        link = link_question(index, question, self.history[-1] if self.history else None)
        turn.follow_up, turn.linked = link.follow_up, [int(index.node_ids[r]) for r in link.seeds]
        q = self.embed(question)
        node_sim, rel_sim = index.similarities(q)
        turn.best_similarity = float(node_sim.max())
        turn.best_relation_similarity = float(rel_sim.max()) if len(rel_sim) else None
        turn.relation_similarity = rel_sim
        turn.timings["link"] = time.perf_counter() - t0
        threshold = KIND_RELATION_THRESHOLD[cfg.kind] if cfg.relation_threshold is None else cfg.relation_threshold
        turn.about = about(index, question, link, turn.best_similarity, turn.best_relation_similarity,
                           cfg.relevance_threshold, threshold)
        if not turn.about:
            best = index.kg.entities[int(np.argmax(node_sim))]
            why = ("it holds no word but function words" if not has_content(question) else
                   f"the closest node, {best!r}, has similarity {turn.best_similarity:.4g} < {cfg.relevance_threshold}"
                   if turn.best_similarity < cfg.relevance_threshold else
                   f"the closest relation, {index.kg.relations[int(np.argmax(rel_sim))]!r}, has similarity "
                   f"{turn.best_relation_similarity:.4g} < {threshold}")
            turn.status, turn.answer = "unrelated", "I could not find anything about this in the graph."
            turn.note = f"nothing in this graph seems to be about the question: it names no entity of it and {why}"
        else:
            seeds = link.seeds or most_similar(node_sim, cfg.link_k).tolist()
            if index.num_edges == 0:
                self._no_edges(turn, node_sim, seeds)
            elif turn.mode == "paths":
                self._path_answer(turn, link, node_sim)
            else:
                self._scoped_answer(turn, link, seeds, q, node_sim, rel_sim)
            if not turn.answer_nodes and turn.status == "answered" and not turn.note:
                turn.note = "the answer names no node of the graph (it may not be grounded in it)"
            self.history.append(turn)
        if unknown := unknown_brackets(index, question):  # a bracketed name forces an entity: say so when it names none
            named = ", ".join(f"[{span}]" for span in unknown)
            turn.note = f"no node is named {named}" + (f"; {turn.note}" if turn.note else "")
        turn.timings["total"] = time.perf_counter() - t0
        turn.timings = {k: round(v, 4) for k, v in turn.timings.items()}
        return turn

    def ask_many(self, questions: list[str], conversation: bool = True) -> list[Turn]:
        """Each question in turn; ``conversation=False`` resets the history before each one (independent questions)."""
        if isinstance(questions, str):  # it would be asked a character at a time
            raise TypeError("ask_many takes a list of questions; ask(question) asks one")
        out = []
        for q in questions:
            if not conversation:
                self.reset()
            out.append(self.ask(q))
        return out

    def _no_edges(self, turn: Turn, node_sim: np.ndarray, seeds: list[int]) -> None:
        """A graph without edges: the LLM answers on the linked and most similar nodes."""
        top = np.argsort(-node_sim)[:max(self.config.pcst.top_k_nodes, 1)]
        keep = np.unique(np.concatenate([np.asarray(seeds, np.int64), top]))
        turn.scope = turn.evidence = self.index.subgraph(keep, np.zeros(0, np.int64))
        turn.status, turn.note = "no_edges", "the graph has no edges here: the evidence is the most similar nodes"
        turn.mode = "ranked" if turn.mode in MODEL_FREE_MODES else turn.mode
        self._llm_answer(turn, [])

    def _path_answer(self, turn: Turn, link: Link, node_sim: np.ndarray) -> None:
        """``paths``: the best relation path (:mod:`~gr_core.chat.paths`) from each start set of the link (the better
        kept); the evidence is its facts."""
        t = time.perf_counter()
        index, kg = self.index, self.index.kg
        begin = link.starts() or [[int(np.argmax(node_sim))]]
        every = relation_phrases(kg)
        # a one-word name kept aside (a question without capitals) pairs with the one entity named beside it
        also = link.also if len({name_key(kg.entities[r]) for r in link.named}) == 1 else []
        rels = path_ranker.relations_in_reach(kg, [r for s in begin + [also] for r in s], self.config.path_hops) \
            if path_ranker.IN_REACH else range(len(every))
        phrases = list(dict.fromkeys(every[r] for r in rels))
        words = path_ranker.read_words(self.vectors, link.masked, phrases, graph_phrase_twins(kg))
        if path_ranker.TYPE and (phrase := asked_phrase(turn.question)):
            words.answer_fit = index.node_emb @ self.vectors([phrase])[0]  # encoded once a chat, as the words are
        asked = path_ranker.asked_kind(turn.question)
        best, starts = None, []
        for start in begin:
            by_name: dict[str, list[int]] = {}
            for r in start:  # one entity per name as linking reads it ("José" = "Jose"); a carried set is one start
                by_name.setdefault(name_key(kg.entities[r]) if link.named else "", []).append(r)
            found = path_ranker.rank_paths(kg, list(by_name.values()) + ([also] if also else []), words,
                                           self.config.path_hops, self.kinds if asked is not None else None, asked,
                                           optional=bool(also))
            if found is not None and (best is None or found.score > best.score):
                best, starts = found, start
        turn.reasoner_seeds = [int(index.node_ids[r]) for r in starts]
        turn.model = "relation paths (no model)"
        if best is None:
            turn.scope = turn.evidence = index.subgraph(np.asarray(starts, np.int64), np.zeros(0, np.int64))
            turn.note = "no relation path leads anywhere from the question's entities"
            check_turn(index, turn, link.named, [])
            return
        chosen = best.rows.tolist()[:self.config.max_answers]
        turn.candidates = [Candidate(kg.entities[n], [int(index.node_ids[n])], s).to_dict()
                           for n, s in best.candidates[:50]]
        edges = np.unique(np.concatenate([path_ranker.path_edges(kg, p.start, p.hops, np.asarray(best.rows))
                                          for p in best.paths]))
        nodes = np.unique(np.concatenate([kg.heads[edges], kg.tails[edges], np.asarray(starts, np.int64),
                                          np.asarray(chosen, np.int64)]))
        turn.scope = turn.evidence = index.subgraph(nodes, edges)
        turn.paths = [f"{' / '.join(kg.entities[s] for s in p.start)}: {p.text} ({best.score:.2f})"
                      for p in best.paths]
        turn.answer = " | ".join(kg.entities[n] for n in chosen)
        if more := len(best.rows) - len(chosen):  # the answer lists max_answers; say that the path reaches more
            turn.note = f"{more} more node{'s' * (more > 1)} the same path reaches " \
                        f"(max_answers={self.config.max_answers})"
        turn.timings["paths"] = time.perf_counter() - t
        check_turn(index, turn, link.named, [int(index.node_ids[n]) for n in chosen])

    def _scoped_answer(self, turn: Turn, link: Link, seeds: list[int], q: np.ndarray, node_sim: np.ndarray,
                       rel_sim: np.ndarray) -> None:
        """The reasoner and the LLM modes on the scope: the reasoner's candidates and paths, or PCST's evidence."""
        t = time.perf_counter()
        cfg, index = self.config, self.index
        nodes, edges = search_scope(index, seeds, cfg.whole_graph_edges, cfg.scope)
        turn.scope = index.subgraph(nodes, edges)
        turn.searched_nodes, turn.searched_edges = len(nodes), len(edges)
        turn.timings["scope"] = time.perf_counter() - t
        t = time.perf_counter()
        pos = {int(n): i for i, n in enumerate(nodes)}
        ranked: list[Candidate] | None = None
        if turn.mode == "reasoner" or self.serves_reasoner:  # GNN-RAG: the reasoner's candidates and paths
            text, reading = read_for(index, self.vectors, link.masked, self.reasoner.cfg)
            q_masked = self.embed(text) if self.reasoner.cfg.mask_topic else None
            options = [[pos[r] for r in s if r in pos] for s in (link.starts() or [seeds])]
            cands, used, _ = reasoner_candidates(index, self.reasoner, nodes, edges, options, q, q_masked, reading)
            ids = [int(index.node_ids[n]) for n, _ in cands]
            turn.reasoner_seeds = [int(index.node_ids[nodes[u]]) for u in used]
            report = reasoning_paths(turn.scope, turn.reasoner_seeds, ids)
            turn.evidence = induced_subgraph(turn.scope, set(turn.reasoner_seeds) | set(report.nodes))
            turn.paths = report.lines
            ranked = [Candidate(index.kg.entities[n], [i], p) for (n, p), i in zip(cands, ids)]
            turn.candidates = [c.to_dict() for c in ranked]
            turn.timings["gnn"] = time.perf_counter() - t
        else:  # G-Retriever: top-k prizes + PCST on the scope, the linked entities given the top node prize
            extra = np.zeros(len(nodes), np.float32)
            extra[[pos[r] for r in seeds if r in pos]] = max(cfg.pcst.top_k_nodes, 1)
            res = retrieve_subgraph(turn.scope, None, None, None, cfg.pcst, node_sim=node_sim[nodes],
                                    edge_sim=rel_sim[index.kg.rels[edges]], extra_node_prizes=extra)
            turn.evidence = res.graph
            turn.timings["pcst"] = time.perf_counter() - t
        if turn.mode == "reasoner":
            chosen = ranked[:cfg.max_answers]
            label = Path(self.reasoner_path).name if self.reasoner_path else "given"
            turn.answer, turn.model = " | ".join(c.name for c in chosen), f"GNN-RAG reasoner ({label})"
            check_turn(index, turn, link.named, [n for c in chosen for n in c.node_ids])
        else:
            self._llm_answer(turn, link.named)

    # ------------------------------------------------------------------ the LLM modes
    def _llm_answer(self, turn: Turn, asked: list[int]) -> None:
        """``ranked`` (the LLM scores the evidence's node names, :mod:`~gr_core.chat.answer`) or ``free``; then the
        check."""
        t, cfg, ev = time.perf_counter(), self.config, turn.evidence
        write = textualize_triples if cfg.evidence_format == "triples" else textualize
        turn.desc = write(TextualGraph(ev.nodes[NODE_COLUMNS], ev.edges[EDGE_COLUMNS]))
        net = self.llm
        turn.model = self.model_name
        if turn.mode == "free":
            turn.answer = net.generate(self._prompt_batch(turn), cfg.max_new_tokens)[0]
            turn.timings["answer"] = time.perf_counter() - t
            return check_turn(self.index, turn, asked)
        own = [int(self.index.node_ids[r]) for r in asked]  # the named entities; a follow-up's carried ones may answer
        cands = candidate_names(ev.nodes.node_id.tolist(), ev.nodes.node_attr.tolist(), own)
        batch = self._prompt_batch(turn)
        # the names the prompt holds: evidence past max_txt_len tokens is cut, and the LLM cannot rank what it never
        # read (a 30k-edge graph's PCST tie groups gave 1,150 names, 20 s a turn)
        read = net.tokenizer.decode(batch.input_ids[0][batch.attention_mask[0].bool()].tolist())
        cands = [c for c in cands if c.name in read] or cands
        chosen: list[Candidate] = []
        if cands:
            scores, lengths = score_names(net, batch, [c.name for c in cands])
            fit = relation_fit(cands, ev.edges, turn.relation_similarity, self.index.kg.rels)
            ranked = rank_candidates(cands, scores, lengths, fit)
            parts = {c.name: {"loglik": round(float(v), 6), "relation_fit": round(float(f), 6)}
                     for c, v, f in zip(cands, scores, fit)}  # the score's parts: why this answer
            turn.candidates = [c.to_dict() | parts[c.name] for c in ranked]
            chosen = choose(ranked, cfg.max_answers)
        else:
            turn.note = "the evidence has no node to answer with"
        turn.answer = " | ".join(c.name for c in chosen)
        turn.timings["answer"] = time.perf_counter() - t
        check_turn(self.index, turn, asked, [n for c in chosen for n in c.node_ids])

    def history_text(self) -> str:
        """Earlier answered turns, most recent kept first, within ``history_turns`` and ``history_tokens``."""
        cfg, kept, used = self.config, [], 0
        answered = [t for t in self.history if t.status == "answered"]
        for turn in reversed(answered[-cfg.history_turns:] if cfg.history_turns else []):
            text = f"Q: {turn.question}\nA: {turn.answer}\n"
            n = count_tokens(self.llm.tokenizer, [text])[0]
            if used + n > cfg.history_tokens:
                break
            kept.insert(0, text)
            used += n
        return "Earlier in this conversation:\n" + "".join(kept) + "\n" if kept else ""

    def prompt_question(self, question: str, follow_up: bool = True) -> str:
        """The question the LLM reads after the evidence: a follow-up's recent conversation, then the kind's template
        (with the citation request when ``cite``)."""
        dataset = KIND_TEMPLATE[self.config.kind]
        q = cite_question(dataset, question) if self.config.cite else question_for(dataset, question)
        return (self.history_text() if follow_up else "") + q

    def _prompt_batch(self, turn: Turn):
        """The one-example prompt batch of ``turn`` (evidence text, graph token when the model has one, question)."""
        net, ev = self.llm, turn.evidence
        data = None
        if net.gnn is not None:
            rows = ev.nodes.row.to_numpy()
            pos = {int(n): k for k, n in enumerate(ev.nodes.node_id.tolist())}
            kb_edges = ev.edges.kb_edge.to_numpy() if "kb_edge" in ev.edges else np.zeros(0, np.int64)
            ei = np.array([[pos[int(s)] for s in ev.edges.src], [pos[int(d)] for d in ev.edges.dst]], np.int64)
            rel = self.index.rel_emb[self.index.kg.rels[kb_edges]]  # (E, dim); fancy indexing: contiguous copies
            data = Data(x=torch.from_numpy(self.index.node_emb[rows]), edge_index=torch.from_numpy(ei).view(2, -1),
                        num_nodes=len(rows), edge_attr=torch.from_numpy(rel))
        ex = Example(uid="chat", question=self.prompt_question(turn.question, turn.follow_up), desc=turn.desc,
                     label="", answers=[], data=data)
        return net.collate(net.tokenize([ex]), with_label=False).to(net.device)

    # ------------------------------------------------------------------ a trained reasoner earns its place
    def decision_cache(self, meta: dict | None = None) -> Path:
        """Where :meth:`decide` keeps its result: beside the reasoner, keyed by it, the chat's settings and the path
        ranker's and linking's rules as they are now."""
        meta = meta or reasoner_meta(self.trained_reasoner)
        key = config_hash({"reasoner": meta["config_hash"], "chat": repr(self.config), "paths": path_ranker.rules(),
                           "link": link_rules(), "alpha": DECISION_ALPHA})
        return Path(self.trained_reasoner).with_suffix(f".decision-{key}.json")

    def decide(self) -> dict:
        """:func:`decide` for this chat's trained reasoner, cached (:meth:`decision_cache`)."""
        meta = reasoner_meta(self.trained_reasoner)
        cache = self.decision_cache(meta)
        if cache.is_file():
            return read_json(cache)
        out = decide([self], meta)
        write_json(cache, out)
        return out


def decide(chats: list[GraphChat], meta: dict) -> dict:
    """A trained reasoner earns its place: its decision questions (generated apart from its training questions, in
    wordings it never saw; saved in its ``meta``) asked through each graph's chat (``chats[k]`` answers the questions
    of graph ``k``), once with the reasoner and once with the path ranker; the reasoner is served only where it
    answers more of them, exact McNemar p < :data:`DECISION_ALPHA`. A hit: an answer node named as a gold one.

    Returns:
        ``{n, paths_hit, reasoner_hit, reasoner_only, paths_only, p, alpha, served}`` (hits in percent).
    """
    hits: dict[str, list[float]] = {"paths": [], "reasoner": []}
    for q in meta.get("decision_questions", []):
        if q["graph"] >= len(chats):
            continue
        chat = chats[q["graph"]]
        gold = {chat.index.kg.entities[a].lower() for a in q["answers"]}
        for mode in hits:
            chat.reset()
            turn = chat.ask(q["question"], mode=mode)
            names = {chat.index.kg.entities[r].lower() for r in chat.index.rows_of(turn.answer_nodes)}
            hits[mode].append(float(bool(names & gold)))
        chat.reset()
    n = len(hits["paths"])
    test = mcnemar_exact(hits["reasoner"], hits["paths"])
    better = n > 0 and sum(hits["reasoner"]) > sum(hits["paths"]) and test["p"] < DECISION_ALPHA
    rate = {mode: round(100 * sum(h) / n, 2) if n else None for mode, h in hits.items()}
    return {"n": n, "paths_hit": rate["paths"], "reasoner_hit": rate["reasoner"], "reasoner_only": test["a_only"],
            "paths_only": test["b_only"], "p": test["p"], "alpha": DECISION_ALPHA,
            "served": "reasoner" if better else "paths"}
