"""Step 3, **candidates** from relation paths: the answer that needs no training (docs/chat.md, "The relation paths":
the whole reading with examples, and where each weight was chosen).

Every relation path of 1 to ``max_hops`` hops from the question's entity is followed as a set, read in **units**
(:func:`path_units`: a hop, a mediator's *fact*, a *back* step); the masked question is read as mentions
(:func:`read_words`), each with a fit to each relation in reach. A path scores:

    sum over its units of (fit of its word - TAU)  -  UNEXPLAINED * sum over the question's words it leaves unnamed of
    max(0, their best fit)  -  HOP * (units - 1)  +  ORDER (units read outward)  +  KIND (answers of the asked kind)

plus TYPE (:func:`kind_term`) and, among the paths of the best one's length, SEMANTIC (:meth:`Words.similarity`); two
named entities are answered where their paths meet (:func:`pairs`).
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

import numpy as np
import snowballstemmer

from ..kg import KnowledgeGraph
from .generate import Hop, reach, relation_phrases
from .index import FUNCTION_WORDS, WordVectors

# the score's weights (module docstring), chosen on MetaQA's dev questions; TYPE (the answers' cosine to the words
# asking for their kind) on WebQSP's val mini-graphs. Each rule below is measured off in docs/chat.md ("What each rule
# does"; bench/chat_rules.py sets them)
TAU, UNEXPLAINED, SAME_FIT, ORDER, HOP, KIND, LEXICAL = 0.05, 0.5, 0.3, 0.02, 0.1, 0.1, 0.8
ENTITY = 0.25  # what a single path loses for a second entity the question names that it leaves out
TYPE = 0.1
# neighbouring words as one mention, a path back to its entity as an answer, twins followed back: a step back
MENTIONS, CYCLES, TWIN_STEPS = True, True, True
# False: a cycle takes two units, so a mediator fact back to its own subject ("X -> roster -> player: X") is none;
# True counts hops, the rule before; chosen on WebQSP's val mini-graphs (docs/chat.md)
FACT_CYCLES = False
PAIR_TOP = 40  # paths per entity tried in pairs, the best by the words they name
IN_REACH = True  # a word's fit is against the relations in reach of the question's entities, not the whole graph's
# "what type (kind, form, sort) of X" asks for an X: the frame word names no relation
KIND_FRAMES = frozenset("type types kind kinds form forms sort sorts".split())
SEMANTIC = 0.6  # the whole question's cosine to a path, among paths of the best one's length (WebQSP's val unions)
# JOINT: words read together (a mention's; two mentions joined by a bare "of": "place of death") also fit by their
# mean; KIND_ONLY: question words read by KIND only ("where" fit 'location' and sent a path on from a birthplace)
JOINT, KIND_ONLY = True, frozenset({"where"})


def rules() -> tuple:
    """The score's weights and the reading's switches as they are now, read at the call (``bench/chat_rules.py`` sets
    them): what a cached decision of the chat is keyed by."""
    return (TAU, UNEXPLAINED, SAME_FIT, ORDER, HOP, KIND, LEXICAL, ENTITY, MENTIONS, CYCLES, TWIN_STEPS, TYPE,
            FACT_CYCLES, PAIR_TOP, IN_REACH, tuple(sorted(KIND_FRAMES)), SEMANTIC, JOINT, tuple(sorted(KIND_ONLY)))

TOKEN = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?")
# words that ask for "the same <relation>" (co-starred, directed together, also wrote, share the writer)
SAMENESS = frozenset("same co together also share shares shared sharing".split())
# the function words (chat/index.py) and the masked entity ("it") name no relation; the question words that ask for a
# kind of answer (a date, a place, a way) and the words of sameness are read, not dropped
STOPWORDS = FUNCTION_WORDS - SAMENESS - {"when", "where", "why", "how"}
QUESTION_WORDS = frozenset("who whom whose what which when where how name list".split())
# the kind a question asks for, by its first question word
ASKED = ((re.compile(r"\b(who|whom|whose)\b"), 1), (re.compile(r"\bwhere\b"), 2),
         (re.compile(r"\bwhen\b|\b(what|which) (year|years|date|dates)\b"), 3))
RELATION_FILLERS = frozenset("has have had is in of by the a an to for on at with".split())
_STEMMER = snowballstemmer.stemmer("english")


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    return _STEMMER.stemWord(word)


def tokens(text: str) -> list[str]:
    """Lower-case words, a possessive's "'s" cut off ("it's director's" -> "it", "director").

    >>> tokens("Who is X's father's wife?")
    ['who', 'is', 'x', 'father', 'wife']
    """
    return [re.sub(r"['’]s?$", "", t) for t in TOKEN.findall(text.lower())]


def asked_kind(question: str) -> int | None:
    """The kind of node the question's first question word asks for (1 a person: who; 2 a place: where; 3 a date:
    when, what year), None for any other.

    >>> asked_kind("Who directed it?"), asked_kind("in what year was it released"), asked_kind("what is it")
    (1, 3, None)
    """
    q = question.lower()
    hits = [(m.start(), kind) for rx, kind in ASKED if (m := rx.search(q))]
    return min(hits)[1] if hits else None


def shares_stem(word: str, phrase: str, min_stem: int = 3) -> bool:
    """Whether ``word`` and a word of the relation phrase ``phrase`` share a stem (Snowball English): one stem, at
    least ``min_stem`` letters long, begins the other (acted / actors, director / directed by).

    >>> shares_stem("acted", "starred actors"), shares_stem("director", "directed by")
    (True, True)
    >>> shares_stem("types", "has genre")
    False
    """
    stems = (sorted((stem(word), stem(x)), key=len) for x in phrase.split() if x not in RELATION_FILLERS)
    return any(len(short) >= min_stem and long_.startswith(short) for short, long_ in stems)


def lexical_similarity(cosines: np.ndarray, words: list[str], phrases: list[str], lexical: float = LEXICAL
                       ) -> np.ndarray:
    """``(P, W)`` each relation phrase's similarity to each question word: the cosine, or ``lexical`` where the two
    share a stem and the cosine is lower."""
    sims = np.array(cosines, dtype=np.float64)
    if lexical:
        for i, phrase in enumerate(phrases):
            for j, w in enumerate(words):
                if sims[i, j] < lexical and shares_stem(w, phrase):
                    sims[i, j] = lexical
    return sims


def margins(sims: np.ndarray, groups: np.ndarray | None = None) -> np.ndarray:
    """``(P, W)`` how well each question word (a column of ``sims`` ``(P, W)``, its similarity to each relation
    phrase) picks each relation out: its similarity less its best to any other relation, its ``groups`` ``(P,)`` mates
    (twins) excepted; with a single relation (or group) the similarities unchanged.

    >>> margins(np.array([[0.6, 0.5], [0.3, 0.5]])).round(2).tolist()
    [[0.3, 0.0], [-0.3, 0.0]]
    """
    ids, member = np.unique(np.arange(len(sims)) if groups is None else np.asarray(groups), return_inverse=True)
    if len(ids) < 2:
        return sims
    group_best = np.full((len(ids), sims.shape[1]), -np.inf)
    np.maximum.at(group_best, member, sims)  # (G, W) each group's best row
    top = np.sort(group_best, axis=0)
    return sims - np.where(group_best[member] >= top[-1], top[-2], top[-1])


@dataclass
class Words:
    """What the ranker reads from a masked question (:func:`read_words`).

    Attributes:
        words: its mentions ``W`` (content words, neighbours joined); ``fit``: relation phrase -> ``(W,)`` fits (the
            phrases it was read against: the path ranker's are those in reach);
            ``relevance`` ``(W,)``: each mention's best fit (at least 0), what leaving it unnamed costs; ``best``: its
            best phrase; ``repeated`` ``(W,)``: a stem of it is written again in another mention;
        position: ``(W,)`` where each mention lies between the entity (0) and the question word (1), None without an
            entity; ``sameness``: the words of sameness; ``runs``: each mention's token positions.
    """

    words: list[str]
    fit: dict[str, np.ndarray]
    relevance: np.ndarray
    best: list[str]
    repeated: np.ndarray
    position: np.ndarray | None = None
    sameness: int = 0
    runs: list[list[int]] = field(default_factory=list)  # each mention's token positions in tokens(masked)
    answer_fit: np.ndarray | None = None  # (N,) each node's cosine to the words asking for the answer's kind, or None
    text: str = ""  # the masked question, read whole (SEMANTIC)
    vectors: WordVectors | None = field(default=None, repr=False)
    _units: dict = field(default_factory=dict, repr=False)

    def unit_fit(self, unit: tuple[str, tuple[str, ...]]) -> np.ndarray:
        """``(W + sameness,)`` how each word fits the unit (a back unit: words of sameness, and a word written twice
        by its relation's fit), -1 where it cannot take it; computed once per question."""
        if unit not in self._units:
            kind, phrases = unit
            row = np.full(len(self.words) + self.sameness, -1.0)
            if self.words:
                f = np.max(np.stack([self.fit[p] for p in phrases]), axis=0)
                row[:len(self.words)] = f if kind != "back" else np.where(self.repeated, f, -1.0)
            if kind == "back":
                row[len(self.words):] = SAME_FIT
            self._units[unit] = row
        return self._units[unit]

    def similarity(self, units: list[tuple[str, tuple[str, ...]]]) -> float:
        """The whole question's best cosine to one of ``units`` (to the mean vector of a unit's relation phrases; 0
        without vectors), each unit's computed once per question."""
        new = [unit for unit in units if ("whole", unit) not in self._units]
        if new and self.vectors is not None:
            q = self.vectors([self.text])[0]
            for unit in new:
                v = self.vectors(list(unit[1])).mean(axis=0)
                self._units["whole", unit] = float(v @ q) / max(float(np.linalg.norm(v)), 1e-9)
        return max((self._units.get(("whole", unit), 0.0) for unit in units), default=0.0)


def read_words(vectors: WordVectors, masked: str, phrases: list[str], twins: dict[str, int] | None = None,
               ranker: bool = True) -> Words:
    """:class:`Words` of the question ``masked`` (its entities written "it") against the relation ``phrases``
    (``twins``: phrase -> twin group). Neighbouring content words are one mention, fitting a relation as its best word
    does; a possessive ends a mention ("its spouse's nationality": two). ``ranker``: the path ranker's reading
    (:data:`KIND_FRAMES`, :data:`JOINT`, :data:`KIND_ONLY`); False: a trained reasoner's, as it was trained."""
    joint = ranker and JOINT
    toks = tokens(masked)
    possessive = [t != raw for t, raw in zip(toks, TOKEN.findall(masked.lower()))]  # "spouse's nationality": two
    framing = {i for i, t in enumerate(toks[:-1]) if ranker and t in KIND_FRAMES and toks[i + 1] == "of"}
    skip = STOPWORDS | SAMENESS | (KIND_ONLY if ranker else frozenset())
    content = [i for i, t in enumerate(toks) if t and t not in skip and i not in framing]
    runs: list[list[int]] = []
    for i in content:
        if MENTIONS and runs and runs[-1][-1] == i - 1 and not possessive[i - 1]:
            runs[-1].append(i)
        else:
            runs.append([i])
    words = [toks[i] for i in content]
    cos = vectors(phrases) @ vectors(words).T if words and phrases else np.zeros((len(phrases), len(words)))
    groups = None if twins is None else np.array([twins.get(x, -1 - i) for i, x in enumerate(phrases)])
    at = {i: k for k, i in enumerate(content)}
    stems = [{stem(toks[i]) for i in run} for run in runs]
    # JOINT: a mention's words, two mentions joined by "of" (not of one stem: a step back), their mean one more column
    together = [] if not joint else [[k] for k, run in enumerate(runs) if len(run) > 1] + [
        [k, k + 1] for k in range(len(runs) - 1) if runs[k][-1] == runs[k + 1][0] - 2
        and toks[runs[k][-1] + 1] == "of" and not possessive[runs[k][-1]] and not stems[k] & stems[k + 1]]
    sims = lexical_similarity(cos, words, phrases, LEXICAL)  # (P, words)
    if together:
        mean = [sims[:, [at[i] for k in g for i in runs[k]]].mean(axis=1) for g in together]
        sims = np.concatenate([sims, np.stack(mean, axis=1)], axis=1)
    per_word = margins(sims, groups)  # (P, words + together)
    cols = [[at[i] for i in run] + [len(words) + j for j, g in enumerate(together) if k in g]
            for k, run in enumerate(runs)]
    fit = np.reshape([per_word[:, c].max(axis=1) for c in cols], (len(runs), len(phrases))).T
    relevance = np.maximum(fit.max(axis=0, initial=0.0), 0.0) if runs else np.zeros(0)
    best = [phrases[int(i)] for i in fit.argmax(axis=0)] if runs and phrases else [""] * len(runs)
    repeated = np.array([any(s & t for j, t in enumerate(stems) if j != k) for k, s in enumerate(stems)], bool)
    position = None
    entity = [i for i, t in enumerate(toks) if t == "it"]
    if entity and runs:
        asks = [i for i, t in enumerate(toks) if t in QUESTION_WORDS]
        d_e = np.array([min(abs(i - j) for j in entity for i in run) for run in runs], float)
        d_q = np.array([min(abs(i - j) for j in asks for i in run) for run in runs], float) if asks else None
        position = d_e / (d_e + d_q) if d_q is not None else d_e
    return Words([" ".join(toks[i] for i in run) for run in runs], dict(zip(phrases, fit)), relevance, best, repeated,
                 position, sum(t in SAMENESS for t in toks), runs, text=masked, vectors=vectors)


@dataclass
class RankedPath:
    """One relation path from the start nodes: its hops, its units (``(kind, phrases)``, kind ``rel``, ``fact`` or
    ``back``), the answers it reaches (node rows), whether it came back to the start, and its score."""

    start: tuple[int, ...]
    hops: tuple[Hop, ...]
    units: list[tuple[str, tuple[str, ...]]]
    reached: np.ndarray
    returns: bool = False
    score: float = float("nan")
    solo: float = float("nan")  # the score without the words it leaves unnamed: how it may serve in a pair

    @property
    def text(self) -> str:
        return " / ".join(("same " if k == "back" else "") + " ".join(p) for k, p in self.units)


def path_units(hops, mediator: list[bool], phrases: list[str], groups: np.ndarray) -> list[tuple[str, tuple]]:
    """The units of ``hops`` (module docstring): ``mediator[i]`` says hop ``i`` ends on identifier-named nodes only;
    ``phrases`` ``(R,)`` each relation's words, ``groups`` ``(R,)`` its twin group."""
    out, i = [], 0
    while i < len(hops):
        hop, nxt = hops[i], hops[i + 1] if i + 1 < len(hops) else None
        back = nxt is not None and groups[nxt.relation] == groups[hop.relation] and (
            nxt.relation != hop.relation or nxt.inverse != hop.inverse)
        if mediator[i] and nxt is not None and not back:
            out.append(("fact", (phrases[hop.relation], phrases[nxt.relation])))
        else:
            out.append(("rel", (phrases[hop.relation],)))
            if back:
                out.append(("back", (phrases[hop.relation],)))
        i += 2 if back or (mediator[i] and nxt is not None) else 1
    return out


def relations_in_reach(kg: KnowledgeGraph, start, max_hops: int = 3) -> np.ndarray:
    """``(R',)`` sorted relation ids of the facts touching a node fewer than ``max_hops`` hops from the node rows
    ``start``: every relation a path of :func:`enumerate_paths` can follow (either way), and more past its caps."""
    frontier = np.unique(np.asarray(start, np.int64))
    seen = np.isin(np.arange(kg.num_entities), frontier)
    met = np.zeros(len(kg.relations), bool)
    for _ in range(max_hops):
        nbrs, edges = kg.incidences(frontier)
        met[kg.rels[edges]] = True
        if met.all():  # a graph of few relations (MetaQA's 9) meets them all in a hop or two
            break
        frontier = np.unique(nbrs[~seen[nbrs]])
        seen[frontier] = True
    return np.flatnonzero(met)


def enumerate_paths(kg: KnowledgeGraph, start, max_hops: int = 3, max_frontier: int = 2000, max_paths: int = 3000,
                    unnamed: bool = False) -> list[RankedPath]:
    """Every relation path of 1..``max_hops`` hops from the node rows ``start`` that reaches a named node other than
    the start (``unnamed``: identifier-named nodes too), or, through two or more units that leave the start, the start
    itself (a cycle: a self-loop fact followed twice never left it).
    Sets larger than ``max_frontier`` are not followed further; a path ending with one relation there, back and there
    again reaches nothing new and is skipped; at most ``max_paths`` paths."""
    start = np.unique(np.asarray(start, np.int64))
    groups, phrases = kg.twin_relations() if TWIN_STEPS else np.arange(len(kg.relations)), relation_phrases(kg)
    at_start = np.isin(np.arange(kg.num_entities), start)
    inside = np.zeros(kg.num_entities, bool)
    out: list[RankedPath] = []
    level = [((), (), start, False)]  # hops, mediators, the set reached, whether a set on the way held another node
    for _ in range(max_hops):
        nxt = []
        for prefix, mediators, nodes, away in level:
            away = away or not at_start[nodes].all()
            _, edges = kg.incidences(nodes)
            inside[nodes] = True
            for inverse, (src, dst) in ((False, (kg.heads, kg.tails)), (True, (kg.tails, kg.heads))):
                mine = np.unique(edges[inside[src[edges]]])
                rels = kg.rels[mine]
                order = np.argsort(rels, kind="stable")
                rels, ends = rels[order], dst[mine[order]]
                cuts = np.flatnonzero(np.diff(rels)) + 1
                for rel, reached in zip(rels[np.r_[0, cuts]] if len(rels) else [], np.split(ends, cuts)):
                    hops = prefix + (Hop(int(rel), inverse),)
                    if len(hops) >= 3 and hops[-1] == hops[-3] and hops[-2].relation == hops[-1].relation:
                        continue
                    reached = np.unique(reached)
                    is_named = kg.named[reached]
                    named = reached if unnamed else reached[is_named]
                    meds = mediators + (not is_named.any(),)
                    if len(named) and (unnamed or not meds[-1]):
                        units = path_units(hops, list(meds), phrases, groups)
                        back = at_start[named]
                        answers = named[~back]
                        if (CYCLES and not len(answers) and back.any() and away
                                and len(hops if FACT_CYCLES else units) >= 2):
                            answers = named[back]  # a cycle (ended by a step back: only where a word asks, score_path)
                        if len(answers):
                            out.append(RankedPath(tuple(start.tolist()), hops, units, answers, bool(back.any())))
                    if len(reached) <= max_frontier:
                        nxt.append((hops, meds, reached, away))
                    if len(out) >= max_paths:
                        return out
            inside[nodes] = False
        level = nxt
    return out


def score_units(words: Words, units: list, paths: int = 1) -> tuple[float, np.ndarray, np.ndarray]:
    """The score of ``units`` (one path's, or ``paths`` paths' together) without ORDER and KIND, the word each unit
    took (-1: none; a greedy one-to-one assignment, the best unit-word pair first) and its fit ``(U,)``."""
    W = len(words.words)
    cols = W + words.sameness
    M = np.array([words.unit_fit(unit) for unit in units]).reshape(len(units), cols)
    word = np.full(len(units), -1)
    taken: set[int] = set()
    for flat in (np.argsort(-M, axis=None, kind="stable") if M.size else []):
        u, w = divmod(int(flat), cols)
        if M[u, w] <= 0 or len(taken) == min(M.shape):
            break
        if word[u] < 0 and w not in taken:
            word[u] = w
            taken.add(w)
    fit = np.array([M[u, w] if w >= 0 else 0.0 for u, w in enumerate(word)])
    mine = {p for _, phrases in units for p in phrases}
    unnamed = sum(float(words.relevance[w]) for w in range(W) if w not in taken and words.best[w] not in mine)
    unnamed += SAME_FIT * sum(1 for w in range(W, cols) if w not in taken)
    return float(np.sum(fit - TAU)) - UNEXPLAINED * unnamed - HOP * max(len(units) - paths, 0), word, fit


def score_path(words: Words, path: RankedPath, kinds: np.ndarray | None = None, asked: int | None = None) -> float:
    """:func:`score_units` of the path, with ORDER and KIND (module docstring); a path back to its start whose back
    unit took a word written twice also answers the start."""
    total, word, fit = score_units(words, path.units)
    path.solo = float(np.sum(fit - TAU)) - HOP * (len(path.units) - 1)
    if words.position is not None:
        far = [float(words.position[w]) for w, f in zip(word, fit) if 0 <= w < len(words.words) and f > TAU]
        if len(far) >= 2:
            total += ORDER if all(a < b for a, b in zip(far, far[1:])) else -ORDER
    total += kind_term(path.reached, kinds, asked, words.answer_fit)
    if CYCLES and path.returns and path.units[-1][0] == "back":  # back at the start by a step back
        asked = 0 <= word[-1] < len(words.words)  # named by a word written twice ("the spouse of the spouse of X")
        if not asked and np.isin(path.reached, path.start).all():
            return -np.inf
        if asked and path.start[0] not in path.reached:
            path.reached = np.append(path.reached, path.start[0])
    return total


def kind_term(rows: np.ndarray, kinds: np.ndarray | None, asked: int | None, answer_fit: np.ndarray | None = None
              ) -> float:
    """KIND times (2 * the share of ``rows`` of the asked kind - 1), 0 when the question asks no kind; plus TYPE times
    the mean of ``answer_fit`` ``(N,)`` over ``rows``, where the question writes its answer's kind ("what language")."""
    kind = 0.0 if kinds is None or asked is None else KIND * (2 * float(np.mean(kinds[rows] == asked)) - 1)
    return kind + (TYPE * float(np.mean(answer_fit[rows])) if answer_fit is not None and len(rows) else 0.0)


@dataclass
class PathAnswer:
    """The ranker's answer: the chosen node rows, the paths behind them (one, or two that meet), its score, and the
    candidates (every node reached, with its best path's score, best first)."""

    rows: np.ndarray
    paths: list[RankedPath]
    score: float
    candidates: list[tuple[int, float]] = field(default_factory=list)


def pairs(kg: KnowledgeGraph, first: list[RankedPath], second: list[RankedPath]):
    """Each ``(a, b, rows)`` where a path ``a`` of the first entity and ``b`` of the second meet (module docstring):
    ``rows`` what both reach, or ``a``'s nodes one hop before its end that ``b`` reaches, followed by ``a``'s last
    hop. Candidates are found through the nodes ``b`` reaches (an inverted index), not by trying every pair."""
    holders: dict[int, list[int]] = {}
    for j, b in enumerate(second):
        for n in b.reached.tolist():
            holders.setdefault(n, []).append(j)
    for a in first:
        for j in sorted({j for n in a.reached.tolist() for j in holders.get(n, ())}):
            yield a, second[j], np.intersect1d(a.reached, second[j].reached)
        if len(a.hops) >= 2:
            middle = reach(kg, a.start, a.hops[:-1])  # the nodes one hop before its end
            for j in sorted({j for n in middle.tolist() for j in holders.get(n, ())}):
                b = second[j]
                ends = kg.follow(np.intersect1d(middle, b.reached), a.hops[-1].relation, a.hops[-1].inverse)
                ends = ends[~np.isin(ends, a.start + b.start)]
                if len(ends):
                    yield a, b, ends


def rank_paths(kg: KnowledgeGraph, groups: list[list[int]], words: Words, max_hops: int = 3,
               kinds: np.ndarray | None = None, asked: int | None = None, optional: bool = False) -> PathAnswer | None:
    """The ranker's answer for the start sets ``groups`` (one per entity the question names; the first two are paired),
    or None when no path leads anywhere; identifier-named nodes answer only where nothing named is in reach.
    ``optional``: the last group may be no entity (:data:`~gr_core.chat.link.UNCASED_PAIRS`): its paths answer only in
    a pair, and a single path loses nothing for leaving it out."""
    def scored(unnamed: bool) -> list[list[RankedPath]]:
        per = []
        for g in groups:
            paths = enumerate_paths(kg, g, max_hops, unnamed=unnamed)
            for p in paths:
                p.score = score_path(words, p, kinds, asked)
            per.append(sorted((p for p in paths if np.isfinite(p.score)), key=lambda p: (-p.score, len(p.hops))))
        return per

    per = scored(False)
    if not any(per[:len(per) - optional]):  # the optional group alone never answers: nothing named is in reach
        per = scored(True)
    flat = sorted((p for paths in per[:len(per) - optional] for p in paths), key=lambda p: (-p.score, len(p.hops)))
    if not flat:
        return None
    top = flat[0].score  # the answer's score, whichever path of that length the whole question picks
    if SEMANTIC:  # the words chose the length; the whole question picks among the paths of that length (first of ties)
        chosen = max((p for p in flat if len(p.units) == len(flat[0].units)),
                     key=lambda p: p.score + SEMANTIC * words.similarity(p.units))
        flat.insert(0, flat.pop(next(i for i, p in enumerate(flat) if p is chosen)))  # by identity: arrays inside
    # a single path leaves the other entity the question names out (not an optional one-word name)
    left_out = ENTITY if len(per) >= 2 and not (optional and len(per) == 2) else 0.0
    best = PathAnswer(flat[0].reached, flat[:1], top - left_out)
    if len(per) >= 2:
        tops = [sorted(paths, key=lambda p: (-p.solo, len(p.hops)))[:PAIR_TOP] for paths in per[:2]]
        for x, y in (tops, tops[::-1]):
            for a, b, rows in pairs(kg, x, y):
                score = score_units(words, a.units + b.units, paths=2)[0] + kind_term(rows, kinds, asked,
                                                                                       words.answer_fit)
                if score > best.score:
                    best = PathAnswer(rows, [a, b], score)
    scores: dict[int, float] = {int(n): best.score for n in best.rows.tolist()}
    for p in flat:
        for n in p.reached.tolist():
            scores.setdefault(int(n), p.score - left_out)
    best.candidates = list(scores.items())
    return best


def path_edges(kg: KnowledgeGraph, start, hops, targets: np.ndarray) -> np.ndarray:
    """The edge rows of every instance of the path ``hops`` from ``start`` that ends in ``targets`` (the evidence)."""
    sets = [np.unique(np.asarray(start, np.int64))]
    for hop in hops[:-1]:
        sets.append(kg.follow(sets[-1], hop.relation, hop.inverse))
    keep = np.unique(np.asarray(targets, np.int64))
    out = []
    for hop, before in zip(reversed(hops), reversed(sets)):
        src = kg.tails if hop.inverse else kg.heads
        edges = kg.hop_edges(keep, hop.relation, not hop.inverse)  # the hop's edges into keep ...
        edges = edges[np.isin(src[edges], before)]  # ... from the set before
        out.append(edges)
        keep = np.unique(src[edges])
    return np.unique(np.concatenate(out)) if out else np.zeros(0, np.int64)
