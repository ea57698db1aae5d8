"""A ranker that needs no training: the relation path from the question's entity that reads most like the question.

Every relation path of 1 to ``max_hops`` hops from the linked entity is followed as a set (:func:`~.generate.follow`),
each is written as its relation names (``written by directed by``; there and back: ``same directed by``), and the
question, with the entities it names written "it" (:func:`gr_core.gnn_rag.topic_masked`), is compared with each path's
words. ``scorer="sentence"`` (the first version): the sentence encoder's cosine similarity of the two, less
``hop_penalty`` per relation step beyond the first (a longer path's words overlap more of any question). The answer is
the node set of the best path; a candidate's score is the best score among the paths that reach it (ties: the shorter
path).

With ``scorer="coverage"`` (the chat's default, :meth:`PathScorer.score`) a path is scored instead by how well the
question's own words name its relation steps, one word per step (:func:`coverage`): each step scores its word's fit
less ``tau``, so a step no word names costs (the word "films" cannot name both ``directed by`` and ``starred
actors``); a step there and back ("same directed by") is named by its relation's words, and by a word of sameness
("co-starred", "together"; :data:`SAMENESS`). A word's fit to a relation (:func:`word_relation_fit`) is how well it
picks that relation out among the graph's relations: its cosine to the relation's name less its best cosine to any
other, a shared stem counting as ``lexical`` ("acted" names ``starred actors``, "director" ``directed by``). The steps
are read outward from the entity: a path whose named steps take words ever farther from the entity in the question
gains ``order_bonus`` ("who directed the films starring it": ``starred actors`` then ``directed by``), and loses it
otherwise. All chosen on MetaQA's dev questions (docs/chat.md).

A question that names two entities ("a film directed by X that stars Y") is answered by the intersection of what
each entity's paths reach: among the ``pair_top`` best paths of each entity, the pair with the highest score whose
reached sets intersect (:func:`rank_two_entities`); none intersecting, the single best path. A pair's score is the sum
of its paths' similarities, or under coverage the two paths' steps scored together on the question's words, so that
one entity's longer path cannot claim the words that name the other's relation.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import numpy as np
import snowballstemmer

from ..kg import KnowledgeGraph
from .generate import Hop, follow, graph_phrase_twins, relation_phrase


@dataclass
class RankedPath:
    """One relation path from the question's entities: its hops, the nodes it reaches (rows), its words, its score."""

    start: tuple[int, ...]
    path: tuple[Hop, ...]
    reached: np.ndarray
    text: str
    score: float = float("nan")
    steps: tuple[str, ...] = ()  # each step's relation phrase ("same" dropped): what coverage scoring names
    back_steps: int = 0  # steps followed there and back ("same <relation>"): what a word of sameness names

    @property
    def units(self) -> int:
        """Relation steps in the text ("same <relation>" is one)."""
        return len(self.steps)


def path_words(path: tuple[Hop, ...], relations: list[str]) -> str:
    """A path as the words the question is compared with: its relation names in order, a relation followed and then
    followed back written "same <relation>" (``directed_by`` there and back: the films of the same director).
    Chosen on MetaQA's dev questions over the generator's three templates (docs/chat.md)."""
    return " ".join(path_units(path, relations))


def path_units(path: tuple[Hop, ...], relations: list[str]) -> list[str]:
    """The phrases of :func:`path_words`, one per relation step ("same <relation>" counts as one)."""
    return step_texts(path_steps(path, relations))


def step_texts(steps: list[tuple[bool, str]]) -> list[str]:
    """:func:`path_steps` as words: a step there and back written "same <relation>"."""
    return [("same " if back else "") + phrase for back, phrase in steps]


def path_steps(path: tuple[Hop, ...], relations: list[str]) -> list[tuple[bool, str]]:
    """Each relation step of ``path`` as ``(there and back, relation phrase)``: a relation followed and then followed
    back is one step (``directed_by`` there and back: the films of the same director)."""
    steps, i = [], 0
    while i < len(path):
        hop = path[i]
        back = i + 1 < len(path) and path[i + 1].relation == hop.relation and path[i + 1].inverse != hop.inverse
        steps.append((back, relation_phrase(relations[hop.relation])))
        i += 2 if back else 1
    return steps


WORDS = re.compile(r"[a-z0-9']+")
# function words and the masked topic ("it"): they name no relation (the auxiliary "have" would name every "has ...")
STOPWORDS = frozenset("it the a an of is was what which who did in for on and to by that are were be do does with as "
                      "'s have has had".split())
# words that ask for "the same <relation>" (co-starred, directed together, also wrote, share the writer): they name a
# step followed there and back, never a relation (MetaQA dev's 2-hop wordings; docs/chat.md)
SAMENESS = frozenset("same co together also share shares shared sharing".split())


def content_words(text: str) -> list[str]:
    """The lower-case words of ``text`` other than :data:`STOPWORDS` and :data:`SAMENESS`.

    >>> content_words("Who co-starred with it in the same films?")
    ['starred', 'films']
    """
    return word_distances(text)[0]


def sameness_words(text: str) -> int:
    """How many of the words of ``text`` ask for "the same" (:data:`SAMENESS`).

    >>> sameness_words("Who co-starred with it?"), sameness_words("Who directed it?")
    (1, 0)
    """
    return sum(w in SAMENESS for w in WORDS.findall(text.lower()))


def coverage(word_vecs: np.ndarray, step_vecs: np.ndarray) -> np.ndarray:
    """Each relation step's cosine to the question word assigned to it, one word per step (:func:`assign_words`); a
    step left without a word scores 0.

    Args:
        word_vecs: ``(W, d)`` the question's content words, L2-normalized.
        step_vecs: ``(U, d)`` the path's relation steps, L2-normalized.

    Returns:
        ``(U,)`` cosines.

    >>> coverage(np.eye(2), np.array([[1.0, 0.0], [1.0, 0.0]])).tolist()  # one word cannot name two steps
    [1.0, 0.0]
    """
    if len(word_vecs) == 0 or len(step_vecs) == 0:
        return np.zeros(len(step_vecs))
    return assign_words(step_vecs @ word_vecs.T)[0]


def assign_words(fit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Greedy one-to-one assignment of steps to words, the best remaining step-word pair first.

    Args:
        fit: ``(U, W)`` each relation step's fit to each question word.

    Returns:
        ``(U,)`` each step's fit to its word (0 for a step left without one) and ``(U,)`` the word's index (-1).

    >>> [x.tolist() for x in assign_words(np.array([[0.9, 0.2], [0.8, 0.3]]))]
    [[0.9, 0.3], [0, 1]]
    """
    out, word = np.zeros(fit.shape[0]), np.full(fit.shape[0], -1)
    if fit.size == 0:
        return out, word
    used = set()
    for flat in np.argsort(-fit, axis=None, kind="stable"):
        u, w = divmod(int(flat), fit.shape[1])
        if word[u] >= 0 or w in used:
            continue
        out[u], word[u] = fit[u, w], w
        used.add(w)
        if len(used) == min(fit.shape):
            break
    return out, word


_STEMMER = snowballstemmer.stemmer("english")
# the words of relation names that name nothing of their own ("has genre", "in language", "directed by")
RELATION_FILLERS = frozenset("has have had is in of by the a an to for on at with".split())


@functools.lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return _STEMMER.stemWord(word)


def shares_stem(word: str, phrase: str, min_stem: int = 3) -> bool:
    """Whether ``word`` and a word of the relation phrase ``phrase`` share a stem (Snowball English): one stem, at
    least ``min_stem`` letters long, begins the other. Agent nouns and participles meet this way where the sentence
    encoder's word vectors sit far apart (acted / actors 0.59, director / directed by 0.58).

    >>> shares_stem("acted", "starred actors"), shares_stem("director", "directed by")
    (True, True)
    >>> shares_stem("types", "has genre")
    False
    """
    a = _stem(word)
    for x in phrase.split():
        if x in RELATION_FILLERS:
            continue
        short, long_ = sorted((a, _stem(x)), key=len)
        if len(short) >= min_stem and long_.startswith(short):
            return True
    return False


def word_relation_fit(cosines: np.ndarray, words: list[str], phrases: list[str], lexical: float = 0.0,
                      groups: np.ndarray | None = None) -> np.ndarray:
    """How well each question word picks each relation out among the graph's relations: its similarity to the relation
    (the cosine, or ``lexical`` where the two share a stem and the cosine is lower) less its best similarity to any
    other relation of the graph. A word that names one relation scores high there and below 0 elsewhere; a word near
    every relation ("films" in a film KG) scores near 0 everywhere.

    Args:
        cosines: ``(P, W)`` each distinct relation phrase's cosine to each question word.
        words: the ``W`` question words; ``phrases``: the ``P`` relation phrases.
        lexical: the similarity a shared stem counts as (:func:`shares_stem`; 0: stems are not read).
        groups: ``(P,)`` a group id per phrase (None: each its own): a relation is not compared with those of its
            own group, its twins (:meth:`~gr_core.kg.KnowledgeGraph.twin_relations`): "language" names both
            "country languages spoken" and its inverse "human language countries spoken in", and picks that fact out.

    Returns:
        ``(P, W)`` fits; with a single relation (or a single group), its similarities unchanged.

    >>> word_relation_fit(np.array([[0.6, 0.5], [0.3, 0.5]]), ["x", "y"], ["a", "b"]).round(2).tolist()
    [[0.3, 0.0], [-0.3, 0.0]]
    """
    sims = np.array(cosines, dtype=np.float64)
    if lexical:
        for i, phrase in enumerate(phrases):
            for j, w in enumerate(words):
                if sims[i, j] < lexical and shares_stem(w, phrase):
                    sims[i, j] = lexical
    if sims.shape[0] < 2:
        return sims
    ids, member = np.unique(np.arange(len(sims)) if groups is None else np.asarray(groups), return_inverse=True)
    if len(ids) < 2:
        return sims
    group_best = np.full((len(ids), sims.shape[1]), -np.inf)
    np.maximum.at(group_best, member, sims)  # (G, W) each group's best row
    top = np.sort(group_best, axis=0)
    best, second = top[-1], top[-2]
    return sims - np.where(group_best[member] >= best, second, best)  # each row less the best of the other groups


def returns_to_itself(path: tuple[Hop, ...]) -> bool:
    """Whether ``path`` ends with one relation followed there, back and there again (``release year``, back, ``release
    year``: the years of every film of the start's year, a superset of the start's own): such a path reaches nothing
    its first hop does not, only more, so it is never followed."""
    if len(path) < 3:
        return False
    a, b, c = path[-3:]
    return a.relation == b.relation == c.relation and a.inverse == c.inverse != b.inverse


def enumerate_paths(kg: KnowledgeGraph, start: np.ndarray, max_hops: int = 3, max_frontier: int = 2000,
                    max_paths: int = 3000, unnamed: bool = False) -> list[RankedPath]:
    """Every relation path of 1..``max_hops`` hops from the node rows ``start`` with a non-empty reached set outside
    ``start`` (sets larger than ``max_frontier`` are not followed further; at most ``max_paths`` paths), except those
    that return to themselves (:func:`returns_to_itself`). A path's ``reached`` nodes are its answers: named ones only
    (``kg.named``) unless ``unnamed``; a path through unnamed nodes (WebQSP's mediator nodes) is followed on to the
    named nodes beyond them."""
    start = np.unique(np.asarray(start, np.int64))
    out: list[RankedPath] = []
    level = [((), start)]
    for _ in range(max_hops):
        nxt = []
        for prefix, nodes in level:
            _, edges = kg._gather(nodes)
            edges = np.unique(edges)
            inside = np.zeros(kg.num_entities, bool)
            inside[nodes] = True
            for inverse, (src, dst) in ((False, (kg.heads, kg.tails)), (True, (kg.tails, kg.heads))):
                mine = edges[inside[src[edges]]]
                for rel in np.unique(kg.rels[mine]):
                    path = prefix + (Hop(int(rel), inverse),)
                    if returns_to_itself(path):
                        continue
                    reached = np.unique(dst[mine[kg.rels[mine] == rel]])
                    answers = reached[~np.isin(reached, start) & (unnamed or kg.named[reached])]
                    if len(answers):
                        steps = path_steps(path, kg.relations)
                        out.append(RankedPath(tuple(start.tolist()), path, answers, " ".join(step_texts(steps)),
                                              steps=tuple(phrase for _, phrase in steps),
                                              back_steps=sum(back for back, _ in steps)))
                    if len(reached) <= max_frontier:
                        nxt.append((path, reached))
                    if len(out) >= max_paths:
                        return out
        level = nxt
    return out


@dataclass
class QuestionWords:
    """What coverage scoring reads from a masked question: its content words' vectors ``(W, d)``, L2-normalized, and
    how many of its words ask for "the same"; with the graph's relations given, each relation phrase's fit to each
    word ``{phrase: (W,)}`` (:func:`word_relation_fit`) and each word's distance in words from the nearest masked
    entity ``(W,)`` (None when the question names none)."""

    vectors: np.ndarray
    sameness: int = 0
    fit: dict[str, np.ndarray] | None = None
    distance: np.ndarray | None = None


def word_distances(question: str) -> tuple[list[str], np.ndarray | None]:
    """The :func:`content_words` of a masked question and each one's distance in words from the nearest "it" (the
    entities the question names), None when there is none.

    >>> word_distances("who directed the films starring it")
    (['directed', 'films', 'starring'], array([4, 2, 1]))
    """
    tokens = WORDS.findall(question.lower())
    topic = [i for i, t in enumerate(tokens) if t == "it"]
    kept = [(i, t) for i, t in enumerate(tokens) if t not in STOPWORDS and t not in SAMENESS]
    words = [t for _, t in kept]
    if not topic:
        return words, None
    return words, np.array([min(abs(i - j) for j in topic) for i, _ in kept], dtype=np.int64)


class PathScorer:
    """Scores paths against a question with a sentence encoder, each distinct path text encoded once (kept)."""

    def __init__(self, encode):
        """``encode(texts) -> (len(texts), dim)`` L2-normalized vectors."""
        self.encode = encode
        self.cache: dict[str, np.ndarray] = {}

    def vectors(self, texts) -> dict[str, np.ndarray]:
        """Each text's vector, encoding only those not seen before."""
        new = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if new:
            for t, v in zip(new, self.encode(new)):
                self.cache[t] = np.asarray(v, np.float32)
        return {t: self.cache[t] for t in texts}

    def question_words(self, question: str, relations: list[str] | None = None, lexical: float = 0.0,
                       twins: dict[str, int] | None = None) -> QuestionWords:
        """The masked question's :func:`content_words` as vectors and its count of :func:`sameness_words`. With
        ``relations`` (the graph's relation phrases), also each phrase's :func:`word_relation_fit` (``lexical``;
        ``twins``: phrase -> group, a phrase not in it its own) and the words' distances from the masked entity
        (:func:`word_distances`)."""
        words, distance = word_distances(question)
        vec = self.vectors(words)
        vecs = np.stack([vec[x] for x in words]) if words else np.zeros((0, 0), np.float32)  # coverage: all 0
        out = QuestionWords(vecs, sameness_words(question))
        if relations is not None:
            phrases = list(dict.fromkeys(relations))
            pv = self.vectors(phrases)
            cos = (np.stack([pv[x] for x in phrases]) @ vecs.T if words
                   else np.zeros((len(phrases), 0), np.float32))
            groups = None if twins is None else np.array([twins.get(x, -1 - i) for i, x in enumerate(phrases)])
            fit = word_relation_fit(cos, words, phrases, lexical, groups)
            out.fit, out.distance = dict(zip(phrases, fit)), distance
        return out

    def coverage_score(self, words: QuestionWords, paths: list[RankedPath], tau: float, hop_penalty: float,
                       same_bonus: float = 0.0, order_bonus: float = 0.0) -> float:
        """The coverage score of ``paths`` taken together: their relation steps share the question's words, one word
        per step (:func:`assign_words`), each step scoring its word's fit less ``tau`` (the fit: ``words.fit`` where
        the graph's relations were given, else the cosine); less ``hop_penalty`` per relation step beyond each
        path's first. With two entities' paths, a word one path names cannot also name a step of the other ("films"
        cannot serve both "directed by" and "starred actors"). Each step followed there and back gains
        ``same_bonus`` when a word of sameness is left to name it and loses it when none is ("who co-starred with X"
        asks for the same films' actors, "what films did X star in" for X's own films). Each path with two or more
        steps named (fit above ``tau``) gains ``order_bonus`` when its steps' words lie ever farther from the entity
        in the question, and loses it otherwise (needs ``words.distance``)."""
        steps = [x for p in paths for x in p.steps]
        if not steps or len(words.vectors) == 0:
            fit, word = np.zeros(len(steps)), np.full(len(steps), -1)
        elif words.fit is not None:
            fit, word = assign_words(np.stack([words.fit[x] for x in steps]))
        else:
            vec = self.vectors(steps)
            fit, word = assign_words(np.stack([vec[x] for x in steps]) @ words.vectors.T)
        back = sum(p.back_steps for p in paths)
        named = min(back, words.sameness)
        total = (float(np.sum(fit - tau)) - hop_penalty * sum(p.units - 1 for p in paths)
                 + same_bonus * (named - (back - named)))
        if order_bonus and words.distance is not None:
            start = 0
            for p in paths:
                mine = range(start, start + p.units)
                far = [int(words.distance[word[u]]) for u in mine if word[u] >= 0 and fit[u] > tau]
                if len(far) >= 2:
                    total += order_bonus if all(a < b for a, b in zip(far, far[1:])) else -order_bonus
                start += p.units
        return total

    def score(self, q_masked: np.ndarray, paths: list[RankedPath], hop_penalty: float = 0.0, scorer: str = "sentence",
              question: str = "", tau: float = 0.55, same_bonus: float = 0.0, words: QuestionWords | None = None,
              order_bonus: float = 0.0) -> list[RankedPath]:
        """The paths scored, best first (ties: fewer hops).

        ``sentence``: ``score`` = cosine(question, path words); ``coverage``: :meth:`coverage_score` of the path alone
        (``tau``, ``same_bonus``, ``order_bonus``) on ``words`` (default: :meth:`question_words` of ``question``, the
        masked question's text, without the graph's relations). Either less ``hop_penalty`` per relation step beyond
        the first (a longer path's words overlap more of any question).
        """
        if scorer == "coverage":
            words = words if words is not None else self.question_words(question)
            for p in paths:
                p.score = self.coverage_score(words, [p], tau, hop_penalty, same_bonus, order_bonus)
        elif scorer == "sentence":
            vec = self.vectors([p.text for p in paths])
            for p in paths:
                p.score = float(vec[p.text] @ q_masked) - hop_penalty * (p.units - 1)
        else:
            raise ValueError(f"PathScorer.score: scorer={scorer!r} is not 'sentence' or 'coverage'")
        return sorted(paths, key=lambda p: (-p.score, len(p.path)))


def node_scores(ranked: list[RankedPath]) -> list[tuple[int, float, RankedPath]]:
    """Each reached node with the best score among the paths reaching it and that path, best first."""
    best: dict[int, tuple[float, RankedPath]] = {}
    for p in ranked:  # best first: the first path to reach a node is its best
        for n in p.reached.tolist():
            best.setdefault(int(n), (p.score, p))
    return sorted(((n, s, p) for n, (s, p) in best.items()), key=lambda x: (-x[1], len(x[2].path)))


def rank_two_entities(per_entity: list[list[RankedPath]], pair_top: int = 10, pair_score=None
                      ) -> tuple[np.ndarray, list[RankedPath], float] | None:
    """The intersection answer of a question naming two entities (module docstring): ``(node rows, the two paths,
    the pair's score)``, or None when no pair of the ``pair_top`` best paths of the first two entities reaches a
    common node. ``pair_score(a, b)`` scores a pair (default: the sum of the two paths' own scores; the coverage
    scorer scores the two together, :meth:`PathScorer.coverage_score`)."""
    if len(per_entity) < 2:
        return None
    best = None
    for a in per_entity[0][:pair_top]:
        for b in per_entity[1][:pair_top]:
            common = np.intersect1d(a.reached, b.reached)
            if not len(common):
                continue
            score = a.score + b.score if pair_score is None else pair_score(a, b)
            if best is None or score > best[0]:
                best = (score, common, [a, b])
    return None if best is None else (best[1], best[2], best[0])


def best_paths(scorer: PathScorer, kg: KnowledgeGraph, starts: list[int], masked: str, q_masked, cfg,
               one_group: bool = False, support=None, unnamed_fallback: bool = True
               ) -> tuple[np.ndarray, list[RankedPath], list]:
    """The path ranker from the node rows ``starts`` for the question ``masked`` (its entities written "it";
    ``q_masked`` its sentence vector, read by the sentence scorer only), with a :class:`~gr_core.chat.ChatConfig`'s
    ``path_*`` settings.

    Returns:
        ``(the chosen node rows, the paths used, the scored nodes best first as (row, score, path))``.
        ``one_group``: the rows are one start set (a previous turn's answers: their paths followed together, never
        intersected); else each distinct name is an entity of its own, and two are answered by
        :func:`rank_two_entities`.
        ``support(path) -> float``: a trained reasoner's probability mass on the nodes a path reaches; each path's
        score gains ``cfg.path_reasoner_weight`` times it (the words say which relations, the reasoner which of the
        paths that read alike this graph's questions take).
        ``unnamed_fallback``: where no path reaches a named node, the paths to identifier-named ones (unless
        ``cfg.answer_unnamed``, which takes them always); False leaves that to a caller weighing several start sets.
    """
    names: dict[str, list[int]] = {}
    for r in starts:  # one entity per distinct name (a name shared by two nodes is one entity)
        names.setdefault(kg.entities[r].lower(), []).append(r)
    groups = [list(starts)] if one_group else list(names.values())
    words = None
    if cfg.path_scorer == "coverage":  # the question's words, read once for every path (and pair) of every entity
        relations = [relation_phrase(r) for r in kg.relations] if cfg.path_word_fit == "contrast" else None
        twins = graph_phrase_twins(kg) if relations and cfg.path_twins else None
        words = scorer.question_words(masked, relations, cfg.path_lexical_match, twins)
    paths = [enumerate_paths(kg, np.array(g), cfg.path_hops, unnamed=cfg.answer_unnamed) for g in groups]
    if unnamed_fallback and not cfg.answer_unnamed and not any(paths):  # only identifiers within reach: they, not none
        paths = [enumerate_paths(kg, np.array(g), cfg.path_hops, unnamed=True) for g in groups]
    ranked = [scorer.score(q_masked, p, cfg.path_hop_penalty, cfg.path_scorer, masked, cfg.path_coverage_tau,
                           cfg.path_same_bonus, words, cfg.path_order_bonus) for p in paths]
    if support is not None:
        for paths in ranked:
            for p in paths:
                p.score += cfg.path_reasoner_weight * support(p)
        ranked = [sorted(paths, key=lambda p: (-p.score, len(p.path))) for paths in ranked]
    joint = None
    if words is not None:
        joint = lambda a, b: scorer.coverage_score(  # noqa: E731 one call site
            words, [a, b], cfg.path_coverage_tau, cfg.path_hop_penalty, cfg.path_same_bonus, cfg.path_order_bonus)
    pair = rank_two_entities(ranked, pair_score=joint) if len(groups) >= 2 and cfg.path_intersect else None
    if pair is not None:
        chosen_rows, used, pair_score = pair
        return chosen_rows, used, [(int(n), pair_score, used[0]) for n in chosen_rows]
    flat = sorted((p for r in ranked for p in r), key=lambda p: (-p.score, len(p.path)))
    used = flat[:1]
    return used[0].reached if used else np.zeros(0, np.int64), used, node_scores(flat)


def path_edges(kg: KnowledgeGraph, start: np.ndarray, path: tuple[Hop, ...], targets: np.ndarray) -> np.ndarray:
    """The edge rows of every instance of ``path`` from ``start`` that ends in ``targets`` (the evidence to show)."""

    sets = [np.unique(np.asarray(start, np.int64))]
    for hop in path[:-1]:
        sets.append(follow(kg, sets[-1], hop))
    keep = np.unique(np.asarray(targets, np.int64))
    out = []
    for hop, before in zip(reversed(path), reversed(sets)):
        src, dst = (kg.tails, kg.heads) if hop.inverse else (kg.heads, kg.tails)
        _, edges = kg._gather(keep)
        edges = np.unique(edges)
        edges = edges[(kg.rels[edges] == hop.relation) & np.isin(dst[edges], keep) & np.isin(src[edges], before)]
        out.append(edges)
        keep = np.unique(src[edges])
    return np.unique(np.concatenate(out)) if out else np.zeros(0, np.int64)
