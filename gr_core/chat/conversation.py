"""The conversation: :class:`GraphChat` links, retrieves, answers and checks each :class:`Turn`.

The turn itself and its views are :mod:`~gr_core.chat.turns`; reading the graphs, the index, the models, the answer
ranking, the generated-question reasoner, the path ranker and the CLI are their own modules of the package.
"""
from __future__ import annotations

import re
import time
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import Data

from ..citations import CitationMatcher, check_response, parse_citations
from ..config import EMBEDDED_TEXT_ENCODER, TextEncoderConfig
from ..data import EDGE_COLUMNS, NODE_COLUMNS, TextualGraph, induced_subgraph
from ..g_retriever.model import Example
from ..g_retriever.retrieval import retrieve_subgraph
from ..g_retriever.textualize import textualize, textualize_triples
from ..gnn_rag import load_reasoner, named_beyond, node_probabilities, reasoning_paths, select_candidates
from ..llm import count_tokens
from ..prompts import cite_question, question_for
from ..text_encoder import load_text_encoder
from .config import (KIND_RELATION_THRESHOLD, KIND_TEMPLATE, WORD_RELATIONS_ANSWER_MODE, ChatConfig,
                     relations_read_as_words)
from .graph_reasoner import (GraphReasonerConfig, TooFewQuestions, question_graph, read_question, reading_twins,
                             scope_tensors, train_graph_reasoner)
from .graphs import graph_from_triple_list, load_graph
from .index import BRACKET, ChatIndex
from .models import find_reasoner, load_answerer, reasoner_label
from .path_ranker import PathScorer, best_paths, path_edges
from .ranking import Candidate, candidate_names, choose, named_nodes, rank_candidates, relation_fit, score_names
from .turns import Turn

# A follow-up question: a leading "and" / "what about", or a pronoun that points back at the last turn
FOLLOW_UP = re.compile(r"^\s*(and|also|what about|how about)\b|\b(it|its|they|them|their|he|him|his|she|her|that|"
                       r"this|those|these|there|the same)\b", re.I)


class GraphChat:
    """A conversation with one graph.

    Args:
        graph: a :class:`~gr_core.data.TextualGraph`, a spec for :func:`load_graph` (``"metaqa"``, a triples file,
            ``"nodes.csv,edges.csv"``, ``"webqsp_full:0"``), or a list of ``(head, relation, tail)`` tuples.
        model: ``"auto"`` (a trained G-Retriever for this kind of graph from ``outputs/``, else zero-shot),
            ``"zero_shot"``, or a run directory.
        llm_model: the LLM (the embedded SmolLM2-135M-Instruct, or any Hugging Face path).
        reasoner: a trained GNN-RAG reasoner (:class:`~gr_core.gnn_rag.ReaRev`), its saved file or a list of files
            (their ensemble), for ``retriever="gnn"``; when not given, the one :func:`find_reasoner` finds.
        train_reasoner: True (or a :class:`~gr_core.chat.graph_reasoner.GraphReasonerConfig`), no ``reasoner``
            given: answer (``retriever="gnn"``) with a reasoner trained on questions generated from this graph's own
            facts, not a saved one (:func:`~gr_core.chat.graph_reasoner.train_graph_reasoner`: minutes on 2 cores,
            cached by the graph's content and the settings). A graph too small for that warns and answers without one.
        config: a :class:`ChatConfig`; keyword arguments override its fields.

    >>> chat = GraphChat("my_kg.tsv")                          # doctest: +SKIP
    >>> print(chat.ask("who directed The Matrix?"))            # doctest: +SKIP
    """

    def __init__(self, graph, model: str = "auto", llm_model: str = "embedded:smollm2-135m-instruct",
                 device: str = "auto", encoder: str | None = None, reasoner=None, config: ChatConfig | None = None,
                 train_reasoner=False, **overrides):
        kind = overrides.pop("kind", None)
        source = "graph"
        if isinstance(graph, (str, Path)):
            graph, spec_kind, source = load_graph(str(graph))
            kind = kind or spec_kind
        elif isinstance(graph, list):
            graph, source = graph_from_triple_list(graph), "triples"
        self.config = replace(config or ChatConfig(), **({"kind": kind} if kind else {}), **overrides)
        self.source = source
        self.graph = graph
        self.index = ChatIndex.build(graph, encoder)
        self.encoder_name = encoder
        self._encoder = None
        self.model_spec, self.llm_model, self.device = model, llm_model, device
        self._llm = None
        self.model_name = ""
        self.trained_reasoner = None
        if reasoner is None and train_reasoner and self.config.retriever != "pcst":
            reasoner = self.trained_reasoner = self._train_reasoner(train_reasoner)
        if self.config.retriever == "auto":  # GNN-RAG when a reasoner knows this graph's relations (ChatConfig)
            if reasoner is None:
                reasoner = find_reasoner(relations=self.index.kg.relations)
            if reasoner is None and self.config.answer_mode == "reasoner":
                raise ValueError("answer_mode='reasoner' needs a trained reasoner and none saved in outputs/ knows "
                                 "this graph's relations: pass reasoner=<ReaRev or its .pt>")
            self.config = replace(self.config, retriever="gnn" if reasoner is not None else "pcst")
        if reasoner is None and self.config.retriever == "gnn":
            reasoner = find_reasoner()
        self.reasoner_path = str(reasoner) if isinstance(reasoner, (str, Path)) else None
        self.reasoner_label = reasoner_label(reasoner)
        self.reasoner = self._load_reasoner(reasoner) if reasoner is not None else None
        dim = int(self.index.node_emb.shape[1])
        if self.reasoner is not None and getattr(self.reasoner, "text_dim", dim) != dim:
            raise ValueError(f"the reasoner reads {self.reasoner.text_dim}-d text embeddings; this graph is indexed "
                             f"with {dim}-d ones (a different sentence encoder)")
        if self.config.retriever == "gnn" and self.reasoner is None:
            raise ValueError("retriever='gnn' needs a trained reasoner and none was found in outputs/ (python -m "
                             "gr_core.gnn_rag chat trains the MetaQA chat's; notebook 04 saves one per dataset): "
                             "pass reasoner=<ReaRev or its .pt>")
        if (self.config.answer_mode is None and self.config.mode == "ranked"
                and relations_read_as_words(self.index.kg.relations)):
            self.config = replace(self.config, answer_mode=WORD_RELATIONS_ANSWER_MODE)
        self.history: list[Turn] = []
        self._path_scorer = None  # paths mode: path texts encoded once per chat

    def _train_reasoner(self, spec) -> Path | None:
        """A reasoner trained on questions generated from this graph (cached): ``spec`` True or a config."""

        cfg = spec if isinstance(spec, GraphReasonerConfig) else GraphReasonerConfig()
        try:
            return train_graph_reasoner(self.index, cfg, self.config.neighbourhood, self.encoder_name)
        except TooFewQuestions as err:  # documented fallback: the chat answers without a reasoner
            warnings.warn(f"no reasoner trained: {err}", stacklevel=3)
            return None

    # ------------------------------------------------------------------ lazy parts
    @staticmethod
    def _load_reasoner(reasoner):
        if isinstance(reasoner, (str, Path, list, tuple)):  # a list: an ensemble's files
            return load_reasoner(reasoner)
        return reasoner

    @property
    def path_scorer(self) -> PathScorer:
        """Word and path vectors for the path ranker and a reasoner's ``rel_match``, each text encoded once a chat."""
        if self._path_scorer is None:
            self._path_scorer = PathScorer(lambda texts: self.encoder.encode(
                texts, normalize_embeddings=True, convert_to_numpy=True, batch_size=64))
        return self._path_scorer

    @property
    def encoder(self):
        if self._encoder is None:
            self._encoder = load_text_encoder(TextEncoderConfig(model=self.encoder_name or EMBEDDED_TEXT_ENCODER))
        return self._encoder

    @property
    def llm(self):
        """The answering GraphLLM, loaded on first use."""
        if self._llm is None:
            self._llm, self.model_name, _ = load_answerer(self.model_spec, self.config.kind, self.llm_model,
                                                          self.device, self.config.max_txt_len,
                                                          int(self.index.node_emb.shape[1]))
        return self._llm

    def reuse_model(self, other: "GraphChat") -> None:
        """Answer with ``other``'s already loaded model (no second load); it must suit this graph's kind."""
        self._llm, self.model_name = other.llm, other.model_name

    def reset(self) -> None:
        """Forget the conversation (the index and models stay loaded)."""
        self.history = []

    def embed(self, text: str) -> np.ndarray:
        """The question's sentence embedding ``(dim,)``, L2-normalized."""
        return np.asarray(self.encoder.encode([text], normalize_embeddings=True, convert_to_numpy=True)[0], np.float32)

    # ------------------------------------------------------------------ retrieval
    def retrieve(self, question: str) -> Turn:
        """Steps 1-2 for ``question`` in the current conversation: a :class:`Turn` with its evidence, not answered."""
        cfg, index = self.config, self.index
        turn = Turn(question=question)
        t0 = time.perf_counter()
        prev = self.history[-1] if self.history else None
        turn.follow_up = prev is not None and prev.status == "answered" and bool(FOLLOW_UP.search(question))
        # a follow-up's entities come through the last turn: no lowercase one-word ("language") or partial names
        linked = index.link(question, cfg.link_uncased and not turn.follow_up)
        by_name, shared, size = bool(linked), 0, 0
        if not linked and cfg.link_partial and not turn.follow_up:
            linked, shared, size = index.partial_match(question)
        # A follow-up is read with the question before it, except by the reasoner, whose seeds carry the context and
        # whose instructions would otherwise follow the previous question's relation too (docs/chat.md).
        query_text = f"{prev.question} {question}" if turn.follow_up and cfg.retriever != "gnn" else question
        t = time.perf_counter()
        q = self.embed(query_text)
        turn.timings["encode"] = time.perf_counter() - t
        t = time.perf_counter()
        node_sim, rel_sim = index.similarities(q)
        carried = index.rows_of(prev.linked + prev.answer_nodes) if turn.follow_up else []
        seeds = list(dict.fromkeys(linked + carried))
        k = min(cfg.link_k, index.num_nodes)
        top = np.argpartition(-node_sim, k - 1)[:k] if k else np.zeros(0, np.int64)
        turn.best_similarity = float(node_sim.max())
        turn.linked = [int(index.node_ids[r]) for r in seeds]
        turn.timings["link"] = time.perf_counter() - t
        turn.best_relation_similarity = float(rel_sim.max()) if len(rel_sim) else None
        turn.relation_similarity = rel_sim
        rel_threshold = KIND_RELATION_THRESHOLD[cfg.kind] if cfg.relation_threshold is None else cfg.relation_threshold
        asks_relation = turn.best_relation_similarity is None or turn.best_relation_similarity >= rel_threshold
        reasons = {"follow-up": turn.follow_up,  # the rules that take a question as about the graph, in this order
                   "named": by_name and (bool(BRACKET.search(question)) or index.names_the_graph(linked, hub=False)),
                   "similar": turn.best_similarity >= cfg.relevance_threshold and asks_relation,
                   "in part": shared >= 2 and 2 * shared >= size,  # "stanley matthews" for "Sir Stanley Matthews"
                   "hub": by_name and index.names_the_graph(linked)}
        turn.about = next((why for why, holds in reasons.items() if holds), "")
        if not turn.about:
            turn.status, best = "unrelated", index.kg.entities[int(np.argmax(node_sim))]
            why = (f"the closest node, {best!r}, has similarity {turn.best_similarity:.2f} < {cfg.relevance_threshold}"
                   if turn.best_similarity < cfg.relevance_threshold else
                   f"the closest relation, {index.kg.relations[int(np.argmax(rel_sim))]!r}, has similarity "
                   f"{turn.best_relation_similarity:.2f} < {rel_threshold}")
            turn.note = f"nothing in this graph seems to be about the question: it names no entity of it and {why}"
            turn.timings["retrieval"] = time.perf_counter() - t0
            return turn
        t = time.perf_counter()
        # The neighbourhood grows from the linked entities (GNN-RAG: entity linking, then k hops); the most similar
        # nodes seed it only when nothing is linked, since a similar hub (a genre, a tag) would fill the node cap.
        nodes, edges = index.scope(np.asarray(seeds, np.int64) if seeds else top, cfg.neighbourhood,
                                   cfg.whole_graph_edges)
        scope = index.subgraph(nodes, edges)
        turn.searched_nodes, turn.searched_edges = len(nodes), len(edges)
        turn.timings["scope"] = time.perf_counter() - t
        t = time.perf_counter()
        local_seeds = np.flatnonzero(np.isin(nodes, seeds))
        if len(edges) == 0:
            similar = np.argsort(-node_sim[nodes])[:max(cfg.retrieval.top_k_nodes, 1)]
            keep = np.unique(np.concatenate([local_seeds, similar]))
            turn.evidence = TextualGraph(scope.nodes.iloc[keep], scope.edges.iloc[:0])
            turn.status = "no_edges"
            turn.note = "the graph has no edges here: the evidence is the most similar nodes"
        elif cfg.retriever == "gnn":
            options = [local_seeds]
            if turn.follow_up:
                # The reasoner was trained on one topic per question, and a follow-up's pronoun points at the previous
                # topic ("and who starred in it?") or at its answer ("and who directed them?"): start once from each,
                # with the entities the question names itself, and keep the start the reasoner is surer of.
                options = [np.flatnonzero(np.isin(nodes, linked + index.rows_of(start)))
                           for start in (prev.reasoner_seeds or prev.linked, prev.answer_nodes)]
            masked, rcfg = index.masked(question, linked), self.reasoner.cfg  # the entities it names written "it"
            reading = None
            if rcfg.relation_match or rcfg.relation_words_only:  # read as it was trained (generated_dataset)
                reading = read_question(self.path_scorer, masked, index.kg.relations, rcfg.relation_words_only,
                                        rcfg.asking_words, reading_twins(index.kg, rcfg))
                masked = reading.text
            q_masked = self.embed(masked) if rcfg.mask_topic else None
            turn.evidence, turn.paths, turn.candidates, used, probs = self._gnn_evidence(
                scope, nodes, edges, q, q_masked, options, node_sim, reading if rcfg.relation_match else None)
            turn.reasoner_probs = np.bincount(nodes, probs, index.kg.num_entities).astype(np.float32)  # nodes: unique
            turn.reasoner_seeds = [int(index.node_ids[nodes[r]]) for r in used]
            turn.timings["gnn"] = time.perf_counter() - t
        else:
            extra = np.zeros(len(nodes), np.float32)
            extra[local_seeds] = max(cfg.retrieval.top_k_nodes, 1)  # linked entities: the top node prize
            edge_sim = rel_sim[index.kg.rels[edges]]
            if cfg.edge_tiebreak:
                # Edges carry their relation's similarity (GR Eq. 4), so a KB with few relations has tie groups of
                # hundreds of edges whose shared prize is tiny, and the "at least one edge" clamp lowers C_e to it.
                # Ordering each tie group by how close the edge's endpoints are to the question keeps the relation
                # order and gives the top k_e edges real prizes (bench/chat.py: smaller evidence, less coverage).
                ends = node_sim[index.kg.heads[edges]] + node_sim[index.kg.tails[edges]]
                edge_sim = edge_sim + np.float32(cfg.edge_tiebreak) * ends
            res = retrieve_subgraph(scope, None, None, None, cfg.retrieval, node_sim=node_sim[nodes],
                                    edge_sim=edge_sim, extra_node_prizes=extra)
            turn.evidence = res.graph
            turn.timings["pcst"] = time.perf_counter() - t

        write = textualize_triples if cfg.desc_format == "triples" else textualize
        turn.desc = write(TextualGraph(turn.evidence.nodes[NODE_COLUMNS], turn.evidence.edges[EDGE_COLUMNS]))
        turn.scope = scope
        turn.timings["retrieval"] = time.perf_counter() - t0
        return turn

    def _gnn_evidence(self, scope: TextualGraph, nodes: np.ndarray, edges: np.ndarray, q: np.ndarray,
                      q_masked: np.ndarray | None, seed_options: list[np.ndarray], node_sim: np.ndarray,
                      reading=None
                      ) -> tuple[TextualGraph, list[str], list[dict], np.ndarray, np.ndarray]:
        """GNN-RAG on the searched graph: node probabilities, the 0.95 candidate set, shortest paths from the seeds
        (the most similar node when there is none); the evidence is the subgraph the paths run through.
        ``q``, ``q_masked``: the question's vector as asked and with the entities it names masked (None for a reasoner
        that does not read it; :meth:`ReaRev.question <gr_core.gnn_rag.ReaRev.question>` picks); ``reading``: how
        its words name the relations, for a reasoner that reads it (:func:`.graph_reasoner.read_question`).
        ``seed_options``: one or more seed sets (positions in ``nodes``); the reasoner runs from each and the one
        whose best non-seed node is most probable is kept.
        Returns the evidence, the paths' lines, the candidates (best first, score = the reasoner's probability; beyond
        a mediator, :func:`named_beyond`'s), the seed positions used and the node distribution ``(len(nodes),)``."""

        options = [o for o in seed_options if len(o)] or [np.array([int(np.argmax(node_sim[nodes]))])]
        shared = scope_tensors(self.index, nodes, edges)
        datas = [question_graph(self.index, nodes, edges, local_seeds, q, q_masked, shared=shared, reading=reading)
                 for local_seeds in options]
        all_probs = node_probabilities(self.reasoner, datas)
        confidence = [float(np.delete(p, o).max(initial=0.0)) for p, o in zip(all_probs, options)]
        best = int(np.argmax(confidence))
        probs, local_seeds = all_probs[best], options[best]
        ids, seeds = scope.nodes.node_id.to_numpy(), set(local_seeds.tolist())
        # a node named by an identifier (a WebQSP mediator) is a step of a path, never an answer (answer_unnamed)
        unnamed = set() if self.config.answer_unnamed else set(np.flatnonzero(~self.index.kg.named[nodes]).tolist())
        ranked = select_candidates(probs, seeds | unnamed)
        if not ranked:  # the reasoner stopped on such nodes: the named nodes they link, else (none) the nodes
            mids = select_candidates(probs, seeds)
            ranked = named_beyond(probs, mids, shared["edge_index"].numpy(), seeds | unnamed) or mids
        ranked = ranked[:5]
        cands = [int(ids[c]) for c, _ in ranked]
        report = reasoning_paths(scope, [int(ids[s]) for s in local_seeds], cands)
        keep = set(int(ids[s]) for s in local_seeds) | set(report.nodes)
        sub = induced_subgraph(scope, keep)
        names = scope.nodes.node_attr.to_numpy()
        records = [Candidate(str(names[c]), [int(ids[c])], float(p)).to_dict() for c, p in ranked]
        return TextualGraph(sub.nodes, sub.edges), report.lines, records, local_seeds, probs

    # ------------------------------------------------------------------ answering
    def history_text(self) -> str:
        """Earlier answered turns, most recent kept first, within ``history_turns`` and ``history_tokens``."""

        cfg = self.config
        kept: list[str] = []
        used = 0
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
        """The question string the LLM reads after the evidence: the recent conversation (for a follow-up only: a new
        question stands alone, as its retrieval does), then the kind's template (with the citation request when
        ``cite``)."""

        dataset = KIND_TEMPLATE[self.config.kind]
        q = cite_question(dataset, question) if self.config.cite else question_for(dataset, question)
        return (self.history_text() if follow_up else "") + q

    def answer(self, turn: Turn) -> Turn:
        """Step 3-4: answer from the turn's evidence (:attr:`ChatConfig.mode`: generated, or ranked among the
        evidence's node names), then check the answer against the searched graph."""

        mode = turn.mode = self.config.mode
        t = time.perf_counter()
        ev = turn.evidence
        chosen: list[Candidate] | None = None
        if mode == "reasoner":
            ranked = [Candidate(c["name"], c["node_ids"], c["score"]) for c in turn.candidates]
            chosen = ranked[:self.config.max_answers]
            turn.model = f"GNN-RAG reasoner ({self.reasoner_label})"
        elif mode == "ranked":
            chosen = self._ranked_answer(turn)
        elif mode == "paths":
            chosen = self._path_answer(turn)
        else:
            net = self.llm
            turn.answer = net.generate(self._prompt_batch(turn), self.config.max_new_tokens)[0]
            turn.model = self.model_name
        if chosen is not None:
            turn.answer = " | ".join(c.name for c in chosen)
            if not chosen:
                turn.note = "the evidence has no node to answer with"
        turn.timings["answer"] = time.perf_counter() - t
        t = time.perf_counter()
        scope = TextualGraph(turn.scope.nodes[NODE_COLUMNS], turn.scope.edges[EDGE_COLUMNS])
        scope_index = CitationMatcher(scope)  # one matcher for the citations and the answer's names
        check = check_response(turn.answer, scope, index=scope_index)
        turn.citations = check["citations"]
        turn.fully_valid = check["fully_valid_normalized"] if turn.citations else None
        evidence = TextualGraph(ev.nodes[NODE_COLUMNS], ev.edges[EDGE_COLUMNS])
        nodes, edge_rows = CitationMatcher(evidence).evidence(parse_citations(turn.answer))
        turn.cited_nodes, turn.cited_edges = sorted(nodes), sorted(edge_rows)
        if chosen is not None:  # the answer's nodes are known by construction
            turn.answer_nodes = list(dict.fromkeys(n for c in chosen for n in c.node_ids))
        else:
            turn.answer_nodes = self.answer_nodes(turn.answer, turn.question, scope, scope_index)
        turn.timings["check"] = time.perf_counter() - t
        if not turn.answer_nodes and turn.status == "answered":
            turn.note = turn.note or "the answer names no node of the graph (it may not be grounded in it)"
        return turn

    def _prompt_batch(self, turn: Turn, with_evidence: bool = True):
        """The one-example prompt batch of ``turn`` (evidence text, graph token when the model has one, question)."""

        net = self.llm
        ev = turn.evidence
        data = None
        if net.gnn is not None:
            rows = ev.nodes.row.to_numpy()
            pos = {int(n): k for k, n in enumerate(ev.nodes.node_id.tolist())}
            kb_edges = ev.edges.kb_edge.to_numpy() if "kb_edge" in ev.edges else np.zeros(0, np.int64)
            ei = np.array([[pos[int(s)] for s in ev.edges.src], [pos[int(d)] for d in ev.edges.dst]], np.int64)
            data = Data(x=torch.from_numpy(np.ascontiguousarray(self.index.node_emb[rows])),
                        edge_index=torch.from_numpy(ei).view(2, -1),
                        edge_attr=torch.from_numpy(np.ascontiguousarray(self.index.rel_emb[self.index.kg.rels[kb_edges]])),
                        num_nodes=len(rows))
        ex = Example(uid="chat", question=self.prompt_question(turn.question, turn.follow_up),
                     desc=turn.desc if with_evidence else "", label="", answers=[], data=data)
        return net.collate(net.tokenize([ex]), with_label=False).to(net.device)

    def _ranked_answer(self, turn: Turn) -> list[Candidate]:
        """The evidence's node names (the question's entities excluded) scored by the LLM as its reply; the best
        ones (:func:`~gr_core.chat.ranking.choose`) with every candidate's score kept on the turn."""
        cfg, net, ev = self.config, self.llm, turn.evidence
        # the entities this question names are not its answer; nodes carried from the previous turn may be (a
        # follow-up such as "which of them won an award?" answers with some of the last answer's nodes)
        own = not turn.follow_up
        asked = [int(self.index.node_ids[r]) for r in self.index.link(turn.question, cfg.link_uncased and own,
                                                                          cfg.link_partial and own)]
        cands = candidate_names(ev.nodes.node_id.tolist(), ev.nodes.node_attr.tolist(), asked, cfg.answer_unnamed)
        if not cands:
            turn.candidates = []
            return []
        names = [c.name for c in cands]
        scores, lengths = score_names(net, self._prompt_batch(turn), names)
        prior = score_names(net, self._prompt_batch(turn, with_evidence=False), names)[0] if cfg.calibrate else None
        fit = relation_fit(cands, ev.edges, turn.relation_similarity, self.index.kg.rels)
        parts = {c.name: {"loglik": round(float(v), 6), "relation_fit": round(float(f), 6)}
                 | ({"prior": round(float(prior[k]), 6)} if prior is not None else {})
                 for k, (c, v, f) in enumerate(zip(cands, scores, fit))}  # the score's parts, kept: why this answer
        ranked = rank_candidates(cands, scores, lengths, prior, cfg.length_norm, cfg.relation_prior * fit)
        turn.candidates = [c.to_dict() | parts[c.name] for c in ranked]
        turn.model = self.model_name
        return choose(ranked, cfg.max_answers, cfg.answer_margin)

    def _path_answer(self, turn: Turn) -> list[Candidate]:
        """``paths`` mode (:mod:`gr_core.chat.path_ranker`): the nodes of the relation path from the question's entity
        whose relation names read most like the question (two entities named: the intersection of their paths); the
        evidence becomes those paths' facts. A follow-up that names no entity ("and who starred in it?") starts once
        from the previous turn's start and once from its answer, and keeps the better path (as the reasoner does)."""

        cfg, index, kg = self.config, self.index, self.index.kg
        own = not turn.follow_up
        named = index.link(turn.question, cfg.link_uncased and own, cfg.link_partial and own)
        options = [named]
        one_group = False
        prev = self.history[-1] if turn.follow_up and self.history else None
        if not options[0] and prev is not None:  # each a start set of its own: followed together, not intersected
            options = [o for o in (index.rows_of(prev.reasoner_seeds or prev.linked),
                                   index.rows_of(prev.answer_nodes)) if o]
            one_group = True
        options = [o for o in options if o] or [index.rows_of(turn.linked)]
        if not options[0]:  # nothing named: the node most similar to the question
            options = [[int(np.argmax(index.similarities(self.embed(turn.question))[0]))]]
        support = ((lambda path: float(turn.reasoner_probs[path.reached].sum()))  # the reasoner's mass on its answers
                   if turn.reasoner_probs is not None and cfg.path_reasoner_weight else None)
        def from_starts(starts, fallback):
            masked = index.masked(turn.question, starts, written=named)  # carried or fallback starts: literal only
            q_masked = self.embed(masked) if cfg.path_scorer == "sentence" else None  # coverage reads words only
            return (starts, *best_paths(self.path_scorer, kg, starts, masked, q_masked, cfg, one_group, support,
                                        fallback))
        results = [from_starts(s, False) for s in options]
        if not any(r[3] for r in results):  # no start reaches a named node: identifier-named ones, not no answer
            results = [from_starts(s, True) for s in options]
        starts, chosen_rows, used, scored = max(results, key=lambda r: r[3][0][1] if r[3] else -np.inf)
        turn.reasoner_seeds = [int(index.node_ids[r]) for r in starts]
        by_name: dict[str, Candidate] = {}
        for n, score, _ in scored:
            c = by_name.setdefault(kg.entities[n], Candidate(kg.entities[n], [], score))
            c.node_ids.append(int(index.node_ids[n]))
        cands = list(by_name.values())
        turn.candidates = [c.to_dict() for c in cands[:50]]
        keep = {kg.entities[n] for n in chosen_rows.tolist()}
        chosen = [c for c in cands if c.name in keep][:cfg.max_answers]
        if used:  # the evidence shown: the facts of the used paths that end in the chosen answers
            targets = np.array(index.rows_of([n for c in chosen for n in c.node_ids]), np.int64)
            edges = np.unique(np.concatenate([path_edges(kg, np.array(p.start), p.path, targets) for p in used]))
            nodes = np.unique(np.concatenate([kg.heads[edges], kg.tails[edges], np.array(starts)]))
            turn.evidence = index.subgraph(nodes, edges)
            turn.paths = [f"{' / '.join(kg.entities[s] for s in p.start)}: {p.text} ({p.score:.2f})" for p in used]
        turn.model = "relation paths (no model)"
        return chosen

    def answer_nodes(self, answer: str, question: str, graph: TextualGraph, graph_index=None) -> list[int]:
        """Node ids of ``graph`` the answer names (:func:`~gr_core.chat.ranking.named_nodes`), the question's own
        entities excluded. ``graph_index``: ``graph``'s :class:`~gr_core.citations.CitationMatcher` when built."""
        return named_nodes(self.index, answer, question, graph, graph_index, self.config.link_uncased,
                           self.config.link_partial)

    def ask(self, question: str) -> Turn:
        """One turn: retrieve, answer, check; the turn joins the history (empty and unrelated questions do not)."""
        question = (question or "").strip()
        if not question:
            return Turn(question="", status="empty_question",
                        note="the question is empty: ask something about the graph")
        t0 = time.perf_counter()
        turn = self.retrieve(question)
        if turn.status in ("answered", "no_edges"):
            self.answer(turn)
        else:
            turn.answer = "I could not find anything about this in the graph."
        turn.timings["total"] = time.perf_counter() - t0
        turn.timings = {k: round(v, 4) for k, v in turn.timings.items()}
        if turn.status != "unrelated":
            self.history.append(turn)
        return turn

    def ask_many(self, questions: list[str], conversation: bool = True) -> list[Turn]:
        """Each question in turn; ``conversation=False`` resets the history before each one (independent questions)."""
        out = []
        for q in questions:
            if not conversation:
                self.reset()
            out.append(self.ask(q))
        return out
