"""Questions generated from a graph's own facts, for a graph that comes without questions (SynthKGQA, Cattaneo et al.,
2025: such questions train retrievers that transfer to real ones); docs/chat.md, "A reasoner for a graph without
questions".

- **chains** of 1 to ``max_hops`` hops walked from a **topic** (a named entity with 1 to ``max_topic_degree`` facts),
  either direction at each hop (:func:`walk`); the answers are every named node the path reaches, followed as sets, the
  topic removed; a path reaching nothing else, more than ``max_answers`` nodes, or passing a set larger than
  ``max_frontier`` is dropped, and so is one whose relation followed there and back ("the same {p} as {N}") reaches
  nothing but where it started (:func:`others_reached`: "others with the director of X" where X is the director's
  only film has no answer);
- **two entities** (a share ``two_entity``): a chain's answers narrowed by a fact with a second named entity
  (:func:`narrowed`: "what did X direct that stars Y?");
- **cycles**: a chain of two or more hops over different relations back to the topic alone answers the topic.

Each hop is written in a frame drawn at random from :data:`FRAMES` with the relation's words (:func:`relation_phrase`),
many wordings of one path, so that a reasoner learns the relation words rather than one template.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ..kg import KnowledgeGraph, connected_groups

# "{N}": the phrase so far (the topic first), "{p}": the relation's words; the last hop asks, inner hops describe; a
# relation followed there and back reads "the same {p} as {N}". No frame says "who", "where" or "when": a frame cannot
# know the answer's kind.
FRAMES = {
    "last": ("what is the {p} of {N}", "{N} {p} what", "which {p} does {N} have", "what {p} is {N}",
             "what is {N}'s {p}", "{p} of {N}"),
    "last_inverse": ("what is {p} {N}", "what has {p} {N}", "which ones are {p} {N}", "what {p} {N}",
                     "name something whose {p} is {N}"),
    "inner": ("the {p} of {N}", "{N}'s {p}"),
    "inner_inverse": ("those {p} {N}", "the ones {p} {N}", "things that have {p} {N}", "whatever has {N} as its {p}"),
    "last_same": ("what has the same {p} as {N}", "which ones share the {p} of {N}", "same {p} as {N}"),
    "inner_same": ("those with the same {p} as {N}", "the ones sharing the {p} of {N}"),
    # a second entity narrowing the answers: {C} the chain's question, {q} the fact's words, {M} the second entity
    "and": ("{C} that {q} {M}", "{C} with {q} {M}", "{C}, and {q} {M}"),
    "and_inverse": ("{C} that is {q} of {M}", "{C}, {q} of {M}"),
}
# Other wordings, never trained on: the questions that decide between a trained reasoner and the path ranker are
# written in these, so that the reasoner is judged on wordings it has not learned, as a user's are
HELD_OUT_FRAMES = {
    "last": ("tell me the {p} of {N}", "give the {p} of {N}", "{N} has which {p}"),
    "last_inverse": ("name one that is {p} {N}", "list what is {p} {N}", "which is {p} {N}"),
    "inner": ("the {p} that {N} has",),
    "inner_inverse": ("whatever is {p} {N}", "those that are {p} {N}"),
    "last_same": ("what else has the {p} of {N}", "list others with the {p} of {N}"),
    "inner_same": ("others with the {p} of {N}",),
    "and": ("{C} and also {q} {M}",),
    "and_inverse": ("{C} that is also {q} of {M}",),
}
ATTEMPTS, STALL = 20, 2000  # walks tried per question wanted; walks in a row that give nothing new end a kind


@dataclass(frozen=True)
class GenerationConfig:
    """How many questions and of which shape (defaults: the chat's budget, docs/chat.md).

    Attributes:
        num_questions: questions in all, chains split evenly over 1..``max_hops`` hops, two-entity questions
            ``two_entity`` of them (fewer when the graph does not hold that many distinct ones).
        max_hops: longest chain; 2, the hops the chat's scope searches around a large graph's entities.
        max_answers, max_topic_degree, max_frontier: see the module docstring; seed: the generator's seed.
    """

    num_questions: int = 8000
    max_hops: int = 2
    max_answers: int = 20
    max_topic_degree: int = 200
    max_frontier: int = 2000
    # chosen on WebQSP val (CHANGELOG.md; not 0: users ask two-entity questions), reported on the others (docs/chat.md)
    two_entity: float = 0.1
    seed: int = 0

    def __post_init__(self) -> None:
        if min(self.num_questions, self.max_hops, self.max_answers, self.max_topic_degree) < 1:
            raise ValueError("GenerationConfig: num_questions, max_hops, max_answers, max_topic_degree >= 1 required")
        if not 0.0 <= self.two_entity <= 1.0:
            raise ValueError(f"GenerationConfig.two_entity={self.two_entity} must be in [0, 1]")


@dataclass(frozen=True)
class Hop:
    """One step of a relation path: a relation id, followed from head to tail or (``inverse``) from tail to head."""

    relation: int
    inverse: bool = False


@dataclass
class GeneratedQuestion:
    """A question made from the graph: its topics (node rows: one, or two for a two-entity question), the topic's
    relation path, its exact answers (node rows), its text and the text with every topic written "it", and its form
    (``chain``, ``two``, ``cycle``)."""

    topics: tuple[int, ...]
    path: tuple[Hop, ...]
    answers: list[int]
    text: str
    masked: str
    form: str = "chain"

    @property
    def hops(self) -> int:
        return len(self.path)


def relation_phrase(name: str) -> str:
    """A relation's name as words: a URI's last segment (a prefix such as ``ns:`` dropped), the last two segments of a
    dotted (Freebase) name, ``_``, ``-`` and camelCase split, lower case ("people.person.place_of_birth" -> "person
    place of birth")."""
    text = str(name).strip().strip("<>")
    if " " not in text:  # a name, not words already
        text = re.sub(r"^[A-Za-z][\w-]*:(?!//)(?=\S)", "", text)  # a prefix ("ns:", "schema:"), not a URI's scheme
        text = re.split(r"[/#]", text.rstrip("/#"))[-1]
        text = " ".join(text.split(".")[-2:])
    text = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", text)
    return " ".join(re.sub(r"[_\-.]+", " ", text).lower().split()) or str(name)


def graph_phrase_twins(kg: KnowledgeGraph) -> dict[str, int]:
    """Each relation phrase of ``kg`` -> a twin group (:meth:`~gr_core.kg.KnowledgeGraph.twin_relations`), relations
    sharing a phrase joined; computed once per graph."""
    def make() -> dict[str, int]:
        phrases = relation_phrases(kg)
        first: dict[tuple, int] = {}
        pairs = [(i, first.setdefault(key, i)) for i, (p, g) in enumerate(zip(phrases, kg.twin_relations().tolist()))
                 for key in (("group", g), ("phrase", p))]
        joined = connected_groups(len(phrases), pairs)
        return {p: int(joined[first["phrase", p]]) for p in dict.fromkeys(phrases)}
    return kg.derived("phrase_twins", make)


def relation_phrases(kg: KnowledgeGraph) -> list[str]:
    """Each relation's :func:`relation_phrase`, computed once per graph."""
    return kg.derived("phrases", lambda: [relation_phrase(r) for r in kg.relations])


def chain_text(path: tuple[Hop, ...], relations: list[str], rng: np.random.Generator, topic: str, frames: dict) -> str:
    """The question of a relation path from ``topic``, each hop in a frame drawn from ``frames``."""
    inner, i = "\0", 0  # the topic written in last, so that its name is never read as a frame
    while i < len(path):
        hop, same = path[i], step_back_at(path, i)
        i += 2 if same else 1
        kind = ("last" if i >= len(path) else "inner") + ("_same" if same else "_inverse" if hop.inverse else "")
        inner = frames[kind][int(rng.integers(len(frames[kind])))].format(p=relation_phrase(relations[hop.relation]),
                                                                          N=inner)
    return inner.replace("\0", topic)


def reach(kg: KnowledgeGraph, topic, path: tuple[Hop, ...], max_frontier: int | None = None) -> np.ndarray | None:
    """The node rows ``path`` reaches from ``topic`` (rows), followed as sets; None past ``max_frontier``."""
    current = np.atleast_1d(np.asarray(topic, np.int64))
    for hop in path:
        current = kg.follow(current, hop.relation, hop.inverse)
        if max_frontier is not None and len(current) > max_frontier:
            return None
        if len(current) == 0:
            break
    return current


def step_back_at(path: tuple[Hop, ...], i: int) -> bool:
    """Whether hop ``i`` of ``path`` and the next are one relation followed there and back ("the same {p} as")."""
    return i + 1 < len(path) and path[i + 1].relation == path[i].relation and path[i + 1].inverse != path[i].inverse


def others_reached(kg: KnowledgeGraph, topic: int, path: tuple[Hop, ...]) -> bool:
    """Whether each relation of ``path`` followed there and back (paired as :func:`chain_text` writes "the same {p}
    as") reaches a node outside the set it started from."""
    if not any(step_back_at(path, i) for i in range(len(path))):
        return True
    current, i = np.array([topic], np.int64), 0
    while i < len(path):
        hop = path[i]
        if step_back_at(path, i):
            after = reach(kg, current, path[i:i + 2])
            if not len(np.setdiff1d(after, current)):
                return False
            current, i = after, i + 2
        else:
            current, i = kg.follow(current, hop.relation, hop.inverse), i + 1
    return True


def walk(kg: KnowledgeGraph, node: int, hops: int, rng: np.random.Generator) -> tuple[Hop, ...] | None:
    """A random relation path of ``hops`` steps from ``node``, one of the node's distinct ``(relation, direction)``
    pairs drawn uniformly, then one of its facts; None at a dead end."""
    path = []
    for _ in range(hops):
        start, end = kg.indptr[node], kg.indptr[node + 1]
        if start == end:
            return None
        edges, nbrs = kg.nbr_edge[start:end], kg.nbr[start:end]
        inverse = kg.heads[edges] != node  # the node is the fact's tail: walked backwards
        options = np.unique(kg.rels[edges].astype(np.int64) * 2 + inverse)
        rel, inv = divmod(int(options[rng.integers(len(options))]), 2)
        pick = np.flatnonzero((kg.rels[edges] == rel) & (inverse == bool(inv)))
        node = int(nbrs[pick[rng.integers(len(pick))]])
        path.append(Hop(int(rel), bool(inv)))
    return tuple(path)


def narrowed(kg: KnowledgeGraph, answers: np.ndarray, topic: int, rng: np.random.Generator
             ) -> tuple[Hop, int, np.ndarray] | None:
    """A fact of one of ``answers`` with a second named entity that holds for some of them but not all: ``(the hop
    from the second entity to the answers, its row, the answers it keeps)``, or None."""
    y = int(answers[rng.integers(len(answers))])
    start, end = kg.indptr[y], kg.indptr[y + 1]
    if start == end:
        return None
    k = int(rng.integers(start, end))
    edge, other = int(kg.nbr_edge[k]), int(kg.nbr[k])
    if other == topic or other in answers or not kg.named[other]:
        return None
    hop = Hop(int(kg.rels[edge]), inverse=bool(kg.heads[edge] == y))  # from the second entity to y
    kept = np.intersect1d(answers, kg.follow(np.array([other]), hop.relation, hop.inverse))
    return (hop, other, kept) if 0 < len(kept) < len(answers) else None


def topic_pool(kg: KnowledgeGraph, cfg: GenerationConfig) -> np.ndarray:
    """``(T,)`` the entities a question may be about: named, 1 to ``max_topic_degree`` facts."""
    return np.flatnonzero(kg.named & (kg.degree >= 1) & (kg.degree <= cfg.max_topic_degree))


def generate_questions(kg: KnowledgeGraph, cfg: GenerationConfig = GenerationConfig(), held_out: bool = False,
                       avoid: Iterable[int] = ()) -> list[GeneratedQuestion]:
    """Questions with exact answers from ``kg``'s own facts (module docstring), chains balanced over hop counts;
    ``held_out``: worded in :data:`HELD_OUT_FRAMES`; ``avoid``: entities never drawn as a question's topic (another
    set's topics; none left: no question).

    Raises:
        ValueError: the graph has no fact, or no entity is a possible topic (every entity a hub).
    """
    if kg.num_edges == 0:
        raise ValueError("the graph has no edges: no question can be generated from its facts")
    topics = topic_pool(kg, cfg)
    if len(topics) == 0:
        raise ValueError("no topic to ask about: every named entity has more than max_topic_degree="
                         f"{cfg.max_topic_degree} facts (raise GenerationConfig.max_topic_degree)")
    topics = np.setdiff1d(topics, np.fromiter(avoid, np.int64))
    if len(topics) == 0:
        return []
    rng = np.random.default_rng(cfg.seed)
    frames = HELD_OUT_FRAMES if held_out else FRAMES
    two = int(round(cfg.two_entity * cfg.num_questions))
    wanted = [(form, h, n // cfg.max_hops + (h <= n % cfg.max_hops))
              for form, n in (("chain", cfg.num_questions - two), ("two", two)) for h in range(1, cfg.max_hops + 1)]
    seen: set = set()
    out: list[GeneratedQuestion] = []
    for form, hops, count in wanted:
        made = stalled = 0
        for _ in range(count * ATTEMPTS):
            if made >= count or stalled >= STALL:
                break
            stalled += 1
            topic = int(topics[rng.integers(len(topics))])
            path = walk(kg, topic, hops, rng)
            if path is None or (form, topic, path) in seen:
                continue
            seen.add((form, topic, path))
            reached = reach(kg, topic, path, cfg.max_frontier)
            if reached is None or len(reached) == 0 or not others_reached(kg, topic, path):
                continue
            answers, kind = reached[reached != topic], "chain"
            if len(answers) == 0:  # back at the topic, not by a relation followed back: a cycle
                a, b = path[-2:] if hops >= 2 else (path[0], path[0])
                groups = kg.twin_relations()
                if hops < 2 or (groups[a.relation] == groups[b.relation]
                                and (a.relation != b.relation or a.inverse != b.inverse)):
                    continue
                answers, kind = reached, "cycle"
            answers = answers[kg.named[answers]]  # the chat never answers an identifier (a mediator): none asked for
            if len(answers) == 0 or len(answers) > cfg.max_answers:
                continue
            state = rng.bit_generator.state  # the same frames with the name and with "it"
            text = chain_text(path, kg.relations, rng, kg.entities[topic], frames)
            rng.bit_generator.state = state
            masked = chain_text(path, kg.relations, rng, "it", frames)
            topics_of = (topic,)
            if form == "two":
                second = narrowed(kg, answers, topic, rng) if kind == "chain" else None
                if second is None:
                    continue
                hop, other, answers = second
                options = frames["and" if hop.inverse else "and_inverse"]  # (answer, q, M) reads "that q M"
                frame = options[int(rng.integers(len(options)))]
                q = relation_phrase(kg.relations[hop.relation])
                text = frame.format(C=text, q=q, M=kg.entities[other])
                masked = frame.format(C=masked, q=q, M="it")
                topics_of, kind = (topic, other), "two"
            out.append(GeneratedQuestion(topics_of, path, sorted(answers.tolist()), text + "?", masked + "?", kind))
            made, stalled = made + 1, 0
    return out


def generation_summary(questions: list[GeneratedQuestion]) -> dict:
    """Counts per hop and form, the mean number of answers, the relations covered."""
    return {"n": len(questions), "by_hops": dict(sorted(Counter(str(q.hops) for q in questions).items())),
            "by_form": dict(Counter(q.form for q in questions)),
            "relations_covered": len({h.relation for q in questions for h in q.path}),
            "mean_answers": float(np.mean([len(q.answers) for q in questions])) if questions else 0.0}
