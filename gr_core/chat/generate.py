"""Questions generated from a graph's own facts, for a graph that comes without questions.

A user's graph has no training questions, so GNN-RAG's reasoner (which the chat uses where one was trained on the
graph's relations) would never run for it. SynthKGQA (Cattaneo et al., 2025) shows that questions generated from a
KG's own facts train retrievers that transfer to real questions; this module generates them the simplest way that
keeps the answers exact:

1. a **topic**: an entity with at least one and at most ``max_topic_degree`` facts (a hub such as a genre or a year
   is rarely what a question is about, and the chat's neighbourhood does not expand hubs either), drawn uniformly or
   (``topic_weight="degree"``) in proportion to its facts: drawn uniformly, most topics are a graph's leaves (on
   WebQSP's mini-graphs the generated topics had a median of 2 facts, the real questions' topics 7), yet drawing them
   by their facts did not measurably help on test (docs/chat.md, "How questions are generated");
2. a **relation path** of 1 to ``max_hops`` hops, walked from the topic: at each node one of its distinct
   ``(relation, direction)`` pairs is drawn uniformly (not one of its facts: a node with 300 ``has_tags`` facts and one
   ``directed_by`` fact would otherwise never teach ``directed_by``), then one fact of it;
3. the **answers**: every node the path reaches from the topic, followed as a set (``directed_by`` then
   ``directed_by`` reversed = every film of the same director), the topic itself removed (cycles; with
   ``unnamed=False`` also nodes named by identifiers, which are then never topics either); a path whose answer set is
   empty or larger than ``max_answers`` (a hub's list, not a question) is dropped, as is a repeated ``(topic, path)``
   or a path whose intermediate set grows past ``max_frontier``;
4. the **question text** from the relation names (:func:`relation_phrase`: ``directed_by`` -> "directed by",
   ``people.person.nationality`` -> "person nationality"), each hop in a frame drawn at random (:func:`mixed_text`),
   or one of the fixed :data:`TEMPLATES`; with ``ask_kind`` the question word says what kind of node the answers are
   (who / where / when, :func:`answer_kinds`), as a real question's does.

Paraphrasing the templates with the embedded 135M LLM (as SynthKGQA does with a large one) is not done: its
rewrites of template questions were not measured to help (a stated gap).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..kg import KnowledgeGraph, connected_groups, is_identifier

TEMPLATES = ("mixed", "of", "which", "verb")
TOPIC_WEIGHTS = ("uniform", "degree")
# "mixed": each hop's frame drawn from these (N: the phrase so far, p: the relation's words). The last hop asks; inner
# hops describe. A relation followed and then followed back reads "the same p as N" (same director, same writer).
LAST_FORWARD = ("what is the {p} of {N}", "{N} {p} what", "who is {N} {p}", "which {p} does {N} have",
                "what {p} is {N}", "{p} of {N}")
LAST_INVERSE = ("what is {p} {N}", "what has {p} {N}", "which ones are {p} {N}", "what {p} {N}", "who {p} {N}")
INNER_FORWARD = ("the {p} of {N}", "{N}'s {p}")
INNER_INVERSE = ("those {p} {N}", "the ones {p} {N}", "things that have {p} {N}")
LAST_SAME = ("what has the same {p} as {N}", "which ones share the {p} of {N}", "same {p} as {N}")
INNER_SAME = ("those with the same {p} as {N}", "the ones sharing the {p} of {N}")
# ask_kind: the kinds of answer a question word asks for, and the texts whose sentence vectors stand for them
# (answer_kinds: a node's kind is the one its name is nearest to; "what" also when nothing else fits)
ASK_KINDS = ("what", "who", "where", "when")
KIND_PROTOTYPES = ("a thing", "a person's name", "a city, country or place")  # what, who, where
DATE = re.compile(r"^(\d{4}|\d{4}-\d\d(-\d\d)?(t[\d:]+z?)?|\d{1,2} [a-z]+ \d{4}|[a-z]+ \d{1,2},? \d{4})$")
ASKED = re.compile(r"^(which ones|what|which|who)\b|\bwhat$")  # a frame's question word


@dataclass(frozen=True)
class GenerationConfig:
    """How many questions and of which shape (defaults: our choices, stated with the measurement in docs/chat.md).

    Attributes:
        num_questions: questions to generate in all, split evenly over 1..``max_hops`` hops (fewer when the graph
            does not hold that many distinct ones).
        max_hops: longest relation path (docs/chat.md: 2, the hops the chat searches, measured against 3).
        max_answers: a path reaching more nodes is dropped (a hub's list, not a question).
        max_topic_degree: topics are entities with 1..this many facts (the chat's ``max_expand_degree``).
        max_frontier: a walk whose intermediate node set grows past this is dropped (hubs in the middle).
        templates: which of :data:`TEMPLATES` are drawn from (``mixed``: a frame per hop, :func:`mixed_text`).
        attempts_per_question: walks tried per question wanted before giving up on a hop count.
        stall_attempts: walks in a row that give no new question also end a hop count: the graph holds no more
            distinct questions of that length (a one-fact graph otherwise spent 44 s on 160,000 repeated walks).
        unnamed: also ask about and answer with nodes named by identifiers (:func:`~gr_core.kg.is_identifier`: a
            Freebase mediator node), which the chat never answers (``ChatConfig.answer_unnamed``). False: a walk
            passes through them, a topic is never one, and a path whose answers are all such nodes is dropped, so the
            reasoner learns to go through a mediator to what it links; not the default (docs/chat.md, "How questions
            are generated").
        topic_weight: how topics are drawn (:data:`TOPIC_WEIGHTS`): ``uniform`` (the default) or ``degree``, in
            proportion to their facts (each fact equally likely to be asked about, from either end).
        ask_kind: the last hop's question word says the answers' most common kind (:func:`answer_kinds`): "who" for
            people, "where" for places, "when" for dates, in half the questions (a coin of its own, so the topics,
            paths and frames drawn are those of ``ask_kind=False``); in the rest the frame's own word, "who" read
            "what", as real questions ask "what city" too; a frame without a question word ("same p as it") says no
            kind. False: the frames' words, whatever the answer (a "who" that says nothing). Needs the nodes' kinds
            (``generate_questions(kinds=...)``). Not the default: level on WebQSP val (docs/chat.md, "A question word
            that says the answer's kind").
        seed: the generator's seed.
    """

    num_questions: int = 8000
    max_hops: int = 2  # the chat's scope is 2 hops; with 3, MetaQA dev Hit fell (1-hop 67 -> 61, 2-hop 58 -> 36)
    max_answers: int = 20
    max_topic_degree: int = 200
    max_frontier: int = 2000
    templates: tuple[str, ...] = ("mixed",)
    attempts_per_question: int = 20
    stall_attempts: int = 2000
    # Both changed on WebQSP val (58.0 -> 66.0, p = 0.005), not confirmed on test (64.0 -> 63.7, p = 1.0) and lower
    # on MetaQA 1-hop (dev 89.0 -> 86.0, test 92.3 -> 88.7, p = 0.007): docs/chat.md "How questions are generated"
    unnamed: bool = True
    topic_weight: str = "uniform"
    ask_kind: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        if min(self.num_questions, self.max_hops, self.max_answers, self.max_topic_degree, self.stall_attempts) < 1:
            raise ValueError("GenerationConfig: num_questions, max_hops, max_answers, max_topic_degree, stall_attempts "
                             ">= 1 required")
        if self.topic_weight not in TOPIC_WEIGHTS:
            raise ValueError(f"GenerationConfig.topic_weight={self.topic_weight!r}: use one of {TOPIC_WEIGHTS}")
        bad = [t for t in self.templates if t not in TEMPLATES]
        if bad or not self.templates:
            raise ValueError(f"GenerationConfig.templates={self.templates!r}: use a non-empty subset of {TEMPLATES}")


@dataclass(frozen=True)
class Hop:
    """One step of a relation path: a relation id, followed from head to tail or (``inverse``) from tail to head."""

    relation: int
    inverse: bool = False


@dataclass
class GeneratedQuestion:
    """A question made from the graph: its topic (node row), relation path, exact answers (node rows) and text."""

    topic: int
    path: tuple[Hop, ...]
    answers: list[int]
    text: str  # with the topic's name
    masked: str  # with the topic written "it" (what a topic-masked reasoner reads)
    template: str

    @property
    def hops(self) -> int:
        return len(self.path)


def relation_phrase(name: str) -> str:
    """A relation's name as words: a URI's last segment, the last two segments of a dotted (Freebase) name, ``_``,
    ``-`` and camelCase split, lower case. ``relation_phrase("directed_by") == "directed by"``,
    ``relation_phrase("people.person.place_of_birth") == "person place of birth"``."""
    text = str(name).strip()
    if " " not in text and ("/" in text or "#" in text):  # a URI: its last segment
        text = re.split(r"[/#]", text.rstrip("/#"))[-1]
    if "." in text and " " not in text:  # a dotted (Freebase) name: its last two segments
        text = " ".join(text.split(".")[-2:])
    text = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", text)
    words = re.sub(r"[_\-.]+", " ", text).lower().split()
    return " ".join(words) or str(name)


def phrase_twins(relations: list[str], groups: np.ndarray) -> dict[str, int]:
    """Each relation's :func:`relation_phrase` -> a twin group (``groups``: per relation,
    :meth:`~gr_core.kg.KnowledgeGraph.twin_relations`); relations that share a phrase are one row of a word fit, so
    their groups are joined."""
    phrases = [relation_phrase(r) for r in relations]
    first: dict[tuple, int] = {}  # each relation linked to the first one of its twin group and of its phrase
    pairs = [(i, first.setdefault(key, i)) for i, (p, g) in enumerate(zip(phrases, np.asarray(groups).tolist()))
             for key in (("group", g), ("phrase", p))]
    joined = connected_groups(len(phrases), pairs)
    return {p: int(joined[first["phrase", p]]) for p in dict.fromkeys(phrases)}


def graph_phrase_twins(kg: KnowledgeGraph) -> dict[str, int]:
    """:func:`phrase_twins` of ``kg``'s relations and their twin groups, computed once per graph (every turn and every
    generated question of the graph reads them)."""
    if "_phrase_twins" not in kg.__dict__:
        kg.__dict__["_phrase_twins"] = phrase_twins(kg.relations, kg.twin_relations())
    return kg.__dict__["_phrase_twins"]


def mixed_text(path: tuple[Hop, ...], relations: list[str], rng: np.random.Generator, topic: str = "it",
               kind: str | None = None) -> str:
    """The question of a relation path from ``topic`` with each hop's frame drawn at random (:data:`LAST_FORWARD` and
    the others): many wordings of one path, so a reasoner learns the relation words rather than one template's form.
    A frame is drawn per question; the same ``rng`` state gives the same text. ``kind`` (one of :data:`ASK_KINDS`,
    ``GenerationConfig.ask_kind``): the kind the last frame's question word says ("what": none, and "who" is read
    "what"); the topic's own name is never rewritten."""
    inner, i = "\0", 0  # the topic written in last, so that a name such as "who framed roger rabbit" stays as it is
    while i < len(path):
        hop = path[i]
        same = i + 1 < len(path) and path[i + 1].relation == hop.relation and path[i + 1].inverse != hop.inverse
        step = 2 if same else 1
        last = i + step >= len(path)
        frames = ((LAST_SAME if last else INNER_SAME) if same else
                  (LAST_INVERSE if last else INNER_INVERSE) if hop.inverse else
                  (LAST_FORWARD if last else INNER_FORWARD))
        inner = frames[int(rng.integers(len(frames)))].format(p=relation_phrase(relations[hop.relation]), N=inner)
        i += step
    if kind is not None:
        # a kind replaces the frame's word; "what" (no kind said) replaces only a "who"
        inner = ASKED.sub(lambda m: kind if kind != "what" or m.group(0) == "who" else m.group(0), inner, count=1)
    return inner.replace("\0", topic) + "?"


def answer_kinds(entities: list[str], node_emb: np.ndarray, prototypes: np.ndarray) -> np.ndarray:
    """Each node's kind, an index into :data:`ASK_KINDS`: "when" for a name that is a date or a year, else the kind
    whose :data:`KIND_PROTOTYPES` text is nearest the name's sentence vector (a person's name, a place, a thing).
    Nodes named by identifiers are things. From the graph alone: of the gold answers of 200 WebQSP validation
    questions, those of "who" questions were read as people 55 times in 68, of "where" questions as places 43 in 51,
    of "when" questions as dates 5 in 9 (:func:`~gr_core.studies.generated_reasoner_seeds.answer_kind_check`).

    Args:
        entities: the node names ``(N,)``; node_emb: their L2-normalized sentence vectors ``(N, dim)``;
        prototypes: the vectors of :data:`KIND_PROTOTYPES` ``(3, dim)``.
    Returns:
        ``(N,)`` int64.
    """
    kinds = np.argmax(node_emb @ prototypes.T, axis=1).astype(np.int64) if len(entities) else np.zeros(0, np.int64)
    for i, name in enumerate(entities):
        if DATE.match(str(name).strip().lower()):
            kinds[i] = ASK_KINDS.index("when")
        elif is_identifier(name):
            kinds[i] = 0
    return kinds


def path_text(path: tuple[Hop, ...], relations: list[str], template: str, topic: str = "it") -> str:
    """The question of a relation path from ``topic``, written with one of the fixed :data:`TEMPLATES`.

    ``of``: "what is the written by of the directed by of it?"; ``which``: "which has directed by it?" (an inverse hop
    reads "has <relation>"); ``verb``: "it directed by what?" / "what directed by it?". Inner hops of an inverse
    step read "those that <relation> ..."."""
    phrases = [relation_phrase(relations[h.relation]) for h in path]
    inner = topic
    for k, (hop, p) in enumerate(zip(path, phrases)):
        last = k == len(path) - 1
        if template == "of":
            inner = (f"the {p} of {inner}" if not hop.inverse else
                     (f"what is {p} {inner}" if last else f"those {p} {inner}"))
        elif template == "which":
            inner = (f"{inner}'s {p}" if not hop.inverse else
                     (f"which has {p} {inner}" if last else f"those that have {p} {inner}"))
        else:  # verb
            inner = (f"{inner} {p} what" if not hop.inverse and last else
                     f"what {p} {inner}" if last else
                     f"the {p} of {inner}" if not hop.inverse else f"those {p} {inner}")
    if template == "of" and not path[-1].inverse:
        inner = f"what is {inner}"
    elif template == "which" and not path[-1].inverse:
        inner = f"which is {inner}"
    return inner + "?"


def follow(kg: KnowledgeGraph, nodes: np.ndarray, hop: Hop) -> np.ndarray:
    """Every node one ``hop`` away from the node rows ``nodes`` (sorted, unique)."""
    nodes = np.unique(np.asarray(nodes, np.int64))
    if len(nodes) == 0:
        return nodes
    _, edges = kg._gather(nodes)
    edges = np.unique(edges[kg.rels[edges] == hop.relation])
    inside = np.zeros(kg.num_entities, bool)
    inside[nodes] = True
    src, dst = (kg.tails, kg.heads) if hop.inverse else (kg.heads, kg.tails)
    return np.unique(dst[edges[inside[src[edges]]]])


def reach(kg: KnowledgeGraph, topic: int | np.ndarray, path: tuple[Hop, ...], max_frontier: int | None = None
          ) -> np.ndarray | None:
    """The node rows ``path`` reaches from ``topic`` (a row or rows), followed as sets; None when an intermediate set
    grows past ``max_frontier``."""
    current = np.atleast_1d(np.asarray(topic, np.int64))
    for hop in path:
        current = follow(kg, current, hop)
        if max_frontier is not None and len(current) > max_frontier:
            return None
        if len(current) == 0:
            break
    return current


def _walk(kg: KnowledgeGraph, topic: int, hops: int, rng: np.random.Generator) -> tuple[Hop, ...] | None:
    """A random relation path of ``hops`` steps from ``topic`` (module docstring, step 2); None at a dead end."""
    node, path = topic, []
    for _ in range(hops):
        start, end = kg.indptr[node], kg.indptr[node + 1]
        if start == end:
            return None
        edges = kg.nbr_edge[start:end]
        nbrs = kg.nbr[start:end]
        inverse = kg.heads[edges] != node  # the node is the fact's tail: walked backwards
        # distinct (relation, direction) pairs as one integer each, in the order of the pairs sorted by relation
        options = np.unique(kg.rels[edges].astype(np.int64) * 2 + inverse)
        rel, inv = divmod(int(options[rng.integers(len(options))]), 2)
        pick = np.flatnonzero((kg.rels[edges] == rel) & (inverse == bool(inv)))
        node = int(nbrs[pick[rng.integers(len(pick))]])
        path.append(Hop(int(rel), bool(inv)))
    return tuple(path)


def generate_questions(kg: KnowledgeGraph, cfg: GenerationConfig = GenerationConfig(),
                       kinds: np.ndarray | None = None) -> list[GeneratedQuestion]:
    """Questions with exact answers from ``kg``'s own facts (module docstring), balanced over hop counts. ``kinds``:
    each node's :func:`answer_kinds` (needed with ``cfg.ask_kind``; a question's kind is its answers' most common).

    Raises:
        ValueError: the graph has no fact, or no entity is a possible topic (every entity a hub), or ``ask_kind``
            without ``kinds``.
    """
    if cfg.ask_kind and (kinds is None or len(kinds) != kg.num_entities):
        raise ValueError("GenerationConfig.ask_kind needs every node's kind: generate_questions(kg, cfg, "
                         "kinds=answer_kinds(...))")
    if kg.num_edges == 0:
        raise ValueError("the graph has no edges: no question can be generated from its facts")
    topics = np.flatnonzero((kg.degree >= 1) & (kg.degree <= cfg.max_topic_degree) & (cfg.unnamed | kg.named))
    if len(topics) == 0:
        raise ValueError(f"no topic to ask about: every entity has more than max_topic_degree={cfg.max_topic_degree} "
                         "facts or is named by an identifier (raise GenerationConfig.max_topic_degree, or set "
                         "GenerationConfig.unnamed)")
    rng = np.random.default_rng(cfg.seed)
    coins = np.random.default_rng([cfg.seed, 1])  # ask_kind: whether a question says its kind, apart from ``rng``
    cumulative = np.cumsum(kg.degree[topics].astype(np.float64))  # topic_weight="degree": drawn by their facts
    cumulative /= cumulative[-1]
    per_hop = [cfg.num_questions // cfg.max_hops + (h < cfg.num_questions % cfg.max_hops) for h in range(cfg.max_hops)]
    seen: set = set()
    out: list[GeneratedQuestion] = []
    for hops, wanted in zip(range(1, cfg.max_hops + 1), per_hop):
        made, stalled = 0, 0
        for _ in range(wanted * cfg.attempts_per_question):
            if made >= wanted or stalled >= cfg.stall_attempts:
                break
            stalled += 1
            pick = rng.integers(len(topics)) if cfg.topic_weight == "uniform" else \
                min(int(np.searchsorted(cumulative, rng.random(), side="right")), len(topics) - 1)
            topic = int(topics[pick])
            path = _walk(kg, topic, hops, rng)
            if path is None or (topic, path) in seen:
                continue
            seen.add((topic, path))
            answers = reach(kg, topic, path, cfg.max_frontier)
            if answers is None:
                continue
            answers = answers[(answers != topic) & (cfg.unnamed | kg.named[answers])]
            if len(answers) == 0 or len(answers) > cfg.max_answers:
                continue
            template = cfg.templates[int(rng.integers(len(cfg.templates)))]
            name = kg.entities[topic]
            if template == "mixed":  # the same frames with the name and with "it"
                kind = ASK_KINDS[int(np.bincount(kinds[answers]).argmax())] if cfg.ask_kind else None
                kind = kind if kind in (None, "what") or coins.random() < 0.5 else "what"
                state = rng.bit_generator.state
                text = mixed_text(path, kg.relations, rng, name, kind)
                rng.bit_generator.state = state
                masked = mixed_text(path, kg.relations, rng, "it", kind)
            else:
                text, masked = (path_text(path, kg.relations, template, t) for t in (name, "it"))
            out.append(GeneratedQuestion(topic, path, answers.tolist(), text, masked, template))
            made, stalled = made + 1, 0
    return out


def generation_summary(questions: list[GeneratedQuestion]) -> dict:
    """Counts per hop and template, the mean number of answers, the relations covered."""
    by_hop: dict[int, int] = {}
    by_template: dict[str, int] = {}
    rels: set = set()
    for q in questions:
        by_hop[q.hops] = by_hop.get(q.hops, 0) + 1
        by_template[q.template] = by_template.get(q.template, 0) + 1
        rels.update(h.relation for h in q.path)
    return {"n": len(questions), "by_hops": {str(k): v for k, v in sorted(by_hop.items())},
            "by_template": by_template, "relations_covered": len(rels),
            "mean_answers": float(np.mean([len(q.answers) for q in questions])) if questions else 0.0}
