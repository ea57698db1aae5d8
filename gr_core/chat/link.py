"""Step 1, **link**: the entities a question names (:func:`link_question`: names written whole, :func:`find_names`,
else in part, :func:`partial_match`; a follow-up's carried ones; the question :func:`masked`), and whether the question
is about the graph (:func:`about`). docs/chat.md, "How a turn is answered"."""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ..datasets import TOPIC_BRACKETS as BRACKET
from ..gnn_rag.training import TOPIC_WORD, topic_masked
from .index import (FUNCTION_WORDS, MAX_NAME_WORDS, STOP_WORDS, WORD, ChatIndex, joined_spans, name_key, scene_name,
                    word_key, word_spans)

# A follow-up question: a leading "and" / "what about", or a pronoun that points back at the last turn
FOLLOW_UP = re.compile(r"^\s*(and|also|what about|how about)\b|\b(it|its|they|them|their|he|him|his|she|her|that|"
                       r"this|those|these|there|the same)\b", re.I)
# Each rule measured on every family (docs/chat.md, "What each rule does"; bench/chat_rules.py sets them).
# The words after "what" / "which" (:func:`asked_type`) name the kind of answer asked for, not the entity asked about:
# they link no one-word name and no name in part ("what language do the maasai tribe speak")
ASKED_TYPE = True
ASKED_TYPE_WORDS = 2  # content words at most: "what music period", "what type of art"; "what country borders slovakia"
# A one-word name beside a longer one in a question without capitals ("... in fc barcelona and is born in rosario") may
# be a second entity or a common word: its paths answer only where they meet the named entity's, and it stays unmasked
UNCASED_PAIRS = True
# Names are capitalized when a word after the first holds a capital ("I" aside): sentence case alone marks no name
SENTENCE_CASE = True
# A name capitalized among lowercase words after the question's first ("who wrote the film Sanctum", "describe The
# Class") makes the question about the graph, as a name of two content words does: a one-word name so written is a
# proper noun (:func:`capitalized`)
CAPITALIZED_NAMES = True
# A name written whole that the question's next content words carry on into a longer name, written without its end,
# is that longer name ("martin luther king" is "Martin Luther King, Jr.", not "Martin Luther"): :func:`longer_name`
LONGER_NAMES = True
# A name written in part covers its content words: "the united states" covers as much of "United States of America" as
# of "United States Senator" (the node of higher degree then takes it), not less for its "of"
CONTENT_COVERAGE = True
# A name written with a hyphen is written whole without it too ("vera ellen" names "Vera-Ellen")
HYPHENS = True


def rules() -> tuple:
    """Linking's rules as they are now: part of the key of a cached decision, as :func:`~gr_core.chat.paths.rules`."""
    return (ASKED_TYPE, ASKED_TYPE_WORDS, UNCASED_PAIRS, SENTENCE_CASE, CAPITALIZED_NAMES, LONGER_NAMES,
            CONTENT_COVERAGE, HYPHENS)


def initial(word: str) -> str:
    """A word's first letter, a quote or period before it aside (``'Sanctum'`` is written capitalized)."""
    return word.lstrip(".'’")[:1]


def headline(words: list[str]) -> bool:
    """Whether a question's words capitalize more than half of its content words after the first (Title or headline
    case, all capitals): there capitals mark no names.

    >>> headline("What Is the Speed of Light".split()), headline("Who directed Her".split())
    (True, False)
    """
    content = [w for w in words[1:] if word_key(w) not in FUNCTION_WORDS]
    return 2 * sum(initial(w).isupper() and w != "I" for w in content) > len(content)


def marked(text: str) -> set[int]:
    """Indices of the words of ``text`` (:data:`~gr_core.chat.index.WORD`) whose capital marks a name: capitalized
    ("I" aside) inside a sentence, not starting one (the first word, or one after a period, question or exclamation
    mark or colon: "OK. What year ..."), in a question with capitals that is not a :func:`headline`.

    >>> sorted(marked("OK. What year was Her made? Quick question: who directed It")), marked("WHO DIRECTED HER")
    ([4, 10], set())
    """
    found = list(WORD.finditer(text))
    words = [m.group() for m in found]
    if not has_capitals(words) or headline(words):
        return set()
    return {k for k, m in enumerate(found) if k and initial(m.group()).isupper() and m.group() != "I"
            and not re.search(r"[.?!:]", text[found[k - 1].end():m.start()]) and not words[k - 1].endswith(".")}


def has_capitals(words: list[str]) -> bool:
    """Whether a question's words (:data:`~gr_core.chat.index.WORD`) mark names by capitals (:data:`SENTENCE_CASE`).

    >>> [has_capitals(q.split()) for q in ("Who directed up", "Who directed Up", "Where can I find it")]
    [False, True, False]
    """
    rest = [w for w in words[1:] if re.split("['’]", w)[0] != "I"] if SENTENCE_CASE else words
    return any(c.isupper() for w in rest for c in w)


@dataclass
class Link:
    """What a turn's question names (node rows of the index).

    Attributes:
        named: the entities the question writes, in the order it writes them.
        also: one-word names a question without capitals writes beside a longer name (:data:`UNCASED_PAIRS`), several
            taken as one start set: paired with the named entity (where it is one) only, never a start alone.
        previous_start, previous_answers: a follow-up's entities from the previous turn: where its answer started and
            its answers (the pronoun points at one or the other: "and who starred in it?", "and who directed them?").
        in_part: ``named`` came from a name written in part: ``(words shared, words of the name)``, else ``(0, 0)``.
        masked: the question with the named entities written "it".
        follow_up: the question continues the previous answered turn.
    """

    named: list[int] = field(default_factory=list)
    also: list[int] = field(default_factory=list)
    previous_start: list[int] = field(default_factory=list)
    previous_answers: list[int] = field(default_factory=list)
    in_part: tuple[int, int] = (0, 0)
    masked: str = ""
    follow_up: bool = False

    @property
    def seeds(self) -> list[int]:
        """Every linked row, named first."""
        return list(dict.fromkeys(self.named + self.previous_start + self.previous_answers))

    def starts(self) -> list[list[int]]:
        """The start sets to try: the named entities, else (a follow-up naming none) the previous start and the
        previous answers, each a set of its own."""
        return [self.named] if self.named else [s for s in (self.previous_start, self.previous_answers) if s]


def asked_type(words: list[str]) -> set[int]:
    """Positions in ``words`` (a question's words) of the phrase after its first "what" / "which" that names the kind
    of answer asked for: up to :data:`ASKED_TYPE_WORDS` words, joined by "of", ended by any other function word or, in
    a question with capitals, by a capitalized word ("which Tom Hanks film"); its last content word left out where the
    question has no other ("what inspired steinbeck", "what capital of austria": the entity). Empty when
    :data:`ASKED_TYPE` is off.

    >>> sorted(asked_type("what type of music did mozart compose".split()))
    [1, 2, 3]
    >>> sorted(asked_type("Which Tom Hanks film won".split())), sorted(asked_type("what did it do".split()))
    ([], [])
    >>> sorted(asked_type("what capital of austria".split())), sorted(asked_type("what inspired steinbeck".split()))
    ([1], [1])
    >>> sorted(asked_type("what currency is it".split()))  # a kind asked of a pronoun: kept
    [1]
    """
    low = [word_key(w) for w in words]
    start = next((i for i, w in enumerate(low) if w in ("what", "which")), None)
    if not ASKED_TYPE or start is None:
        return set()
    cased = has_capitals(words)
    out: set[int] = set()
    content = 0
    for i in range(start + 1, len(words)):
        if low[i] == "of" and out and i + 1 < len(words) and low[i + 1] not in FUNCTION_WORDS:
            out.add(i)
            continue
        if low[i] in FUNCTION_WORDS or (cased and initial(words[i]).isupper()) or content == ASKED_TYPE_WORDS:
            break
        out.add(i)
        content += 1
    if content > 1 and all(i in out or w in FUNCTION_WORDS for i, w in enumerate(low)):  # it holds the entity too
        last = max(i for i in out if low[i] != "of")
        out -= {last, last - 1} if low[last - 1] == "of" else {last}
    return out


def asked_phrase(question: str) -> str:
    """The words of ``question`` that ask for the answer's kind (:func:`asked_type`), "of" left out.

    >>> asked_phrase("What type of music did Mozart compose?"), asked_phrase("who directed it")
    ('type music', '')
    """
    words = WORD.findall(BRACKET.sub(r"\1", question))
    return " ".join(words[i] for i in sorted(asked_type(words)) if word_key(words[i]) != "of")


def unknown_brackets(index: ChatIndex, question: str) -> list[str]:
    """The ``[Name]`` spans of ``question`` that name no node (a typo: the turn then links as if unbracketed)."""
    return [span for span in BRACKET.findall(question) if not _bracketed(index, span)]


def named_by(index: ChatIndex, key: str) -> tuple[list[int], bool]:
    """The node rows whose name is ``key`` (words as :func:`~gr_core.chat.index.name_key` writes them), also typed
    without its hyphens (:data:`HYPHENS`: "spider man 2"), and whether that name is one word ("non stop" is "Non-Stop",
    one word under the one-word rules)."""
    if rows := index.names.get(key):
        return rows, " " not in key
    rows = index.spaced_names[0].get(key, []) if HYPHENS else []
    return rows, bool(rows) and all(" " not in name_key(scene_name(index.kg.entities[r])) for r in rows)


def _bracketed(index: ChatIndex, span: str) -> list[int]:
    """Node rows named by a ``[span]`` (the name table's key: case, accents and punctuation aside)."""
    return named_by(index, " ".join(map(word_key, WORD.findall(span))))[0]


def find_names(index: ChatIndex, question: str, uncased: bool = True) -> list[int]:
    """Node rows whose name the question writes, in its order: ``[Name]`` spans, else the longest word n-grams equal
    to a node name (not overlapping; a one-word name only when it is not a stop word nor in :func:`asked_type`, and is
    capitalized mid-sentence or written with a digit, or, ``uncased``, in a question without capitals when no longer
    name links: half of WebQSP's lowercase questions linked nothing otherwise, CHANGELOG.md)."""
    return written_names(index, question, uncased)[0]


def written_names(index: ChatIndex, question: str, uncased: bool = True) -> tuple[list[int], list[int]]:
    """:func:`find_names`'s rows, and the one-word names of a question without capitals that a longer name kept out
    ("... plays in fc barcelona and is born in rosario": "rosario", a second entity or a mere word)."""
    if found := [r for span in BRACKET.findall(question) for r in _bracketed(index, span)]:
        return list(dict.fromkeys(found)), []
    text = BRACKET.sub(r"\1", question)
    words = WORD.findall(text)
    low = [word_key(w) for w in words]
    cased = has_capitals(words)
    asked = asked_type(words)
    names = marked(text)  # a capital inside a sentence ("Who directed Her?"), not one starting it ("OK. What ...")
    taken = [False] * len(words)
    hits: list[tuple[int, list[int]]] = []
    single: list[tuple[int, list[int]]] = []
    longest = max(index.max_name_words, index.spaced_names[1] if HYPHENS else 0)
    for n in range(min(longest, MAX_NAME_WORDS, len(words)), 0, -1):
        for s in range(len(words) - n + 1):
            if any(taken[s:s + n]):
                continue
            rows, one = named_by(index, " ".join(low[s:s + n]))
            if not rows or (one and (s in asked or low[s] in STOP_WORDS - FUNCTION_WORDS)) or (
                    all(w in FUNCTION_WORDS for w in low[s:s + n]) and s not in names):
                continue  # a name of function words ("Her", "All of Me") only where capitals mark it as one
            if one and not cased and uncased:
                single.append((s, rows))
                continue
            if one and not any(c.isdigit() for c in words[s]) and (not initial(words[s]).isupper() or s == 0):
                continue  # one-word names ("Up", "drama") only capitalized mid-sentence; a number ("1994") always
            width = n  # the words the name takes: more where a longer name carries it on
            if LONGER_NAMES and (longer := longer_name(index, words, low, s, n, taken, asked, cased)):
                rows, width = longer
            hits.append((s, rows))
            taken[s:s + width] = [True] * width
    named = list(dict.fromkeys(r for _, rows in sorted(hits or single) for r in rows))
    return named, list(dict.fromkeys(r for _, rows in sorted(single) for r in rows if hits and r not in named))


def longer_name(index: ChatIndex, words: list[str], low: list[str], s: int, n: int, taken: list[bool], asked: set[int],
                cased: bool) -> tuple[list[int], int] | None:
    """Where the name written whole at ``words[s:s + n]`` goes on with the question's next content words (capitalized
    in a question with capitals, none of :func:`asked_type`'s) into the first words of longer node names: the rows of
    the shortest of those names (then of highest degree) and the words the question writes of it; else None.

    "what town was martin luther king assassinated in" writes "Martin Luther King, Jr." without its end, not "Martin
    Luther" and a word.
    """
    best, end = None, s + n
    while end < len(words) and not taken[end] and end not in asked and low[end] not in FUNCTION_WORDS and (
            not cased or initial(words[end]).isupper()):
        prefix = " ".join(low[s:end + 1]) + " "
        longer = [k for k in index.name_words.get(low[end], ()) if k.startswith(prefix)]
        if not longer:
            break
        key = min(longer, key=lambda k: (len(k.split()), -max(int(index.kg.degree[r]) for r in index.names[k]), k))
        best, end = (list(index.names[key]), end + 1 - s), end + 1
    return best


def partial_match(index: ChatIndex, question: str) -> tuple[list[int], int, int]:
    """Where no name is written whole: the nodes whose name shares the most content words with the question (3 letters
    or more, not stop words nor :func:`asked_type`'s; with capitals only words capitalized mid-sentence: "heskey" ->
    "Emile Heskey"); ties go to the name the question covers most of, then to the node of highest degree. Returns
    ``(rows, words shared, words of the name)``, ``([], 0, 0)`` when none is shared."""
    raw = WORD.findall(BRACKET.sub(r"\1", question))
    cased = has_capitals(raw)
    asked = asked_type(raw)
    words = {k for i, w in enumerate(raw) if (not cased or (i > 0 and initial(w).isupper())) and i not in asked
             if len(k := word_key(w)) >= 3 and k not in STOP_WORDS}
    shared = Counter(key for w in words for key in index.name_words.get(w, ()))
    if not shared:
        return [], 0, 0
    def size(key: str) -> int:  # the words a name has to cover
        return max(1, sum(w not in FUNCTION_WORDS for w in key.split())) if CONTENT_COVERAGE else len(key.split())

    best = max(shared, key=lambda k: (shared[k], shared[k] / size(k),
                                      max(int(index.kg.degree[r]) for r in index.names[k])))
    return list(index.names[best]), shared[best], len(best.split())


def names_the_graph(index: ChatIndex, rows, hub: bool = True) -> bool:
    """Whether writing the names of the nodes ``rows`` makes a question about this graph: one of them has a name of two
    or more content words, or (``hub``) is the node of highest degree (a WebQSP mini-graph's topic); another one-word
    name ("up", "speed" in a film KG) is common in any question."""
    degree = index.kg.degree
    top = int(degree.max()) if len(degree) and hub else 0
    return any(top and degree[r] == top or sum(w not in STOP_WORDS for w in WORD.findall(
        index.kg.entities[r].lower())) >= 2 for r in rows)


def masked(index: ChatIndex, question: str, rows, written=None) -> str:
    """``question`` with the mentions of the nodes ``rows`` written "it": every name as
    :func:`~gr_core.gnn_rag.topic_masked` matches it; then, for the nodes the question writes (``written``, default all
    ``rows``), a run of words that is the name written another way ("hugo chavez" for "Hugo Chávez"), then the name's
    content words ("Heskey" for "Emile Heskey"), neighbours joined by stop words one "it"; a possessive keeps its
    "'s"."""
    names = sorted({scene_name(index.kg.entities[r]) for r in rows}, key=lambda n: (-len(n), n))
    loose = {scene_name(index.kg.entities[r]) for r in (rows if written is None else written)}
    out, left = question, []
    for name in names:
        literal = topic_masked(out, [name])
        if literal == out and name in loose:
            left.append(name)
        out = literal
    cased = has_capitals(WORD.findall(question))
    for whole in (True, False):
        for name in list(left):
            keys = [k for k in map(word_key, WORD.findall(name)) if k]
            spans = word_spans(out)
            if whole:
                cut = []
                for written in (keys, " ".join(keys).replace("-", " ").split() if HYPHENS else []):  # "spider man"
                    s = 0
                    while written and s + len(written) <= len(spans):
                        hit = [k for *_, k in spans[s:s + len(written)]] == written
                        cut += [(spans[s][0], spans[s + len(written) - 1][1])] if hit else []
                        s += len(written) if hit else 1
                    if cut:
                        break
            else:
                own = {k for k in keys if len(k) >= 3 and k not in STOP_WORDS}
                cut = joined_spans(out, [(a, b) for i, (a, b, k) in enumerate(spans)
                                         if k in own and (not cased or (i > 0 and out[a].isupper()))])
            if cut:
                left.remove(name)
                for a, b in reversed(cut):
                    a, b = (a - 1, b + 1) if out[a - 1:a] == "[" and out[b:b + 1] == "]" else (a, b)
                    out = out[:a] + TOPIC_WORD + out[b:]
    return out


def follows(index: ChatIndex, question: str) -> bool:
    """Whether ``question`` reads as a follow-up (:data:`FOLLOW_UP`), a pronoun capitalized after the first word that
    is a node's name aside ("Who directed Her?" asks about the film)."""
    starts = [m.start() for m in WORD.finditer(question)]
    names = {starts[k] for k in marked(question)}
    return any(not (m.start() in names and name_key(m.group()) in index.names) for m in FOLLOW_UP.finditer(question))


def link_question(index: ChatIndex, question: str, previous=None) -> Link:
    """The :class:`Link` of ``question`` after the turn ``previous`` (None: a new conversation). A follow-up ("and who
    starred in it?") carries the previous turn's start and answers; its own names are read whole only (a lowercase
    one-word name or a name in part would rather be the pronoun's referent)."""
    follow = previous is not None and previous.status == "answered" and follows(index, question)
    (named, also), in_part = written_names(index, question, uncased=not follow), (0, 0)
    if not named and not follow:
        named, *in_part = partial_match(index, question)
    link = Link(named, also=also if UNCASED_PAIRS else [], in_part=tuple(in_part),
                masked=masked(index, question, named), follow_up=follow)
    if follow:
        link.previous_start = index.rows_of(previous.reasoner_seeds or previous.linked)
        link.previous_answers = index.rows_of(previous.answer_nodes)
    return link


def capitalized(question: str, name: str) -> bool:
    """Whether ``question`` writes ``name`` (any case) beginning with a capital after its first word, and the words
    written with capitals there (up to punctuation) are the name alone, in a question that capitalizes at most half
    of its content words after the first: Title and headline case ("What Is the Weather in London"), all capitals,
    or a longer name ("a Big Mac" for "Big") mark nothing.

    >>> [capitalized(q, "Speed") for q in ("Is Speed any good?", "who directed Speed.", "is Speed's cast good",
    ...                                    "did the film Speed, Keanu's best film, win an award", "Speed is good",
    ...                                    "is speed good", "IS SPEED GOOD", "What Speed Does Light Travel At?",
    ...                                    "What is the Speed of Light", "Where can I buy Speed Mac?")]
    [True, True, True, True, False, False, False, False, False, False]
    """
    if not re.search(r"[^\W\d_]", question) or question.upper() == question:
        return False
    words = word_spans(question)  # (start, end, word_key): the words as the linker compares them
    marks = [question[a:b][:1].isupper() and question[a:b] != "I" for a, b, _ in words]  # capitalized ("I": no name)
    if headline([question[a:b] for a, b, _ in words]):  # capitals mark no names here
        return False

    def joined(k: int, j: int) -> bool:  # words k and j capitalized with no punctuation between them
        return marks[k] and marks[j] and not re.search(r"[,;:?!()\[\]\"]", question[words[k][1]:words[j][0]])

    keys = name_key(name).split()
    for first in range(1, len(words) - len(keys) + 1):  # the name's words as the linker matches them, after the first
        last = first + len(keys) - 1
        if keys and [w[2] for w in words[first:last + 1]] == keys and marks[first] and \
                (first == 1 or not joined(first - 1, first)) and (last + 1 == len(words) or not joined(last, last + 1)):
            return True
    return False


def has_content(question: str) -> bool:
    """Whether ``question`` holds a word that is no function word (``"Who is it?"`` holds none)."""
    return any(word_key(w) not in FUNCTION_WORDS for w in WORD.findall(question))


def similar(content: bool, node_sim: float, relation_sim: float | None, relevance_threshold: float,
            relation_threshold: float) -> bool:
    """:func:`about`'s ``similar`` rule: a content word, and the best node and relation cosines at the thresholds."""
    return content and node_sim >= relevance_threshold and (relation_sim is None or relation_sim >= relation_threshold)


def about(index: ChatIndex, question: str, link: Link, node_sim: float, relation_sim: float | None,
          relevance_threshold: float, relation_threshold: float) -> str:
    """The first rule that takes ``question`` as about the graph: ``follow-up``; ``named`` (a ``[Name]`` or a name of
    two or more content words written whole); ``similar`` (its best node and relation similarities at or above the
    thresholds, and a word that is no function word: "???" or "the the the" is near some node of a large graph by
    chance, and no question of the datasets lacks one); ``in part`` (two or more words and at least half of a name);
    ``hub`` (a one-word name of the graph's hub); "" when none holds. A name :func:`capitalized` is ``named`` too."""
    whole = bool(link.named) and link.in_part == (0, 0)
    shared, size = link.in_part
    reasons = {"follow-up": link.follow_up,
               "named": whole and (bool(BRACKET.search(question)) or names_the_graph(index, link.named, hub=False) or
                                   CAPITALIZED_NAMES and any(capitalized(question, index.kg.entities[r])
                                                             for r in link.named)),
               "similar": similar(has_content(question), node_sim, relation_sim, relevance_threshold,
                                  relation_threshold),
               "in part": shared >= 2 and 2 * shared >= size,
               "hub": whole and names_the_graph(index, link.named)}
    return next((why for why, holds in reasons.items() if holds), "")


def most_similar(node_sim: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` nodes most similar to the question (seeds when it names none)."""
    k = min(k, len(node_sim))
    return np.argpartition(-node_sim, k - 1)[:k] if k else np.zeros(0, np.int64)
