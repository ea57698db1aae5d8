"""Chat without training questions: generated questions, the reasoner trained on them, the path ranker, bad input."""
import numpy as np
import pytest

from gr_core.chat import GraphChat
from gr_core.chat.generate import (ASK_KINDS, GenerationConfig, Hop, answer_kinds, follow, generate_questions,
                                   mixed_text, path_text, reach, relation_phrase)
from gr_core.chat.path_ranker import RankedPath, enumerate_paths, path_edges, path_words, rank_two_entities
from gr_core.kg import KnowledgeGraph

FILMS = [("Alpha", "directed_by", "Ann Lee"), ("Alpha", "starred_actors", "Bo Kim"), ("Alpha", "has_genre", "Drama"),
         ("Beta", "directed_by", "Ann Lee"), ("Beta", "starred_actors", "Cy Dunn"), ("Beta", "has_genre", "Drama"),
         ("Gamma", "directed_by", "Dee Fox"), ("Gamma", "starred_actors", "Bo Kim"), ("Gamma", "has_genre", "Comedy"),
         ("Delta", "directed_by", "Dee Fox"), ("Delta", "starred_actors", "Cy Dunn"), ("Delta", "has_genre", "Drama")]


def kg_of(triples) -> KnowledgeGraph:
    ents = list(dict.fromkeys(x for h, _, t in triples for x in (h, t)))
    rels = sorted({r for _, r, _ in triples})
    e, r = {n: i for i, n in enumerate(ents)}, {n: i for i, n in enumerate(rels)}
    return KnowledgeGraph(ents, rels, np.array([e[h] for h, _, _ in triples]), np.array([r[x] for _, x, _ in triples]),
                          np.array([e[t] for _, _, t in triples]))


def brute_reach(triples, topic: str, path: list[tuple[str, bool]]) -> set[str]:
    current = {topic}
    for rel, inverse in path:
        current = {(h if inverse else t) for h, r, t in triples if r == rel and (t if inverse else h) in current}
    return current


@pytest.mark.parametrize("name, phrase", [("directed_by", "directed by"), ("people.person.place_of_birth",
                                          "person place of birth"), ("hasGenre", "has genre"), ("in-language",
                                          "in language"), ("http://x.org/ontology/birthPlace", "birth place")])
def test_relation_names_become_words(name, phrase):
    assert relation_phrase(name) == phrase


def test_paths_are_followed_as_sets_both_ways():
    kg = kg_of(FILMS)
    rid = {r: i for i, r in enumerate(kg.relations)}
    alpha, ann = kg.entity_id["Alpha"], kg.entity_id["Ann Lee"]
    assert [kg.entities[n] for n in follow(kg, np.array([alpha]), Hop(rid["directed_by"]))] == ["Ann Lee"]
    films = follow(kg, np.array([ann]), Hop(rid["directed_by"], inverse=True))
    assert {kg.entities[n] for n in films} == {"Alpha", "Beta"}
    same_director = reach(kg, alpha, (Hop(rid["directed_by"]), Hop(rid["directed_by"], True)))
    assert {kg.entities[n] for n in same_director} == {"Alpha", "Beta"}  # the topic is removed by the generator
    assert reach(kg, alpha, (Hop(rid["has_genre"]), Hop(rid["has_genre"], True)), max_frontier=2) is None


def test_generated_questions_have_exact_answers_and_no_topic_among_them():
    kg = kg_of(FILMS)
    cfg = GenerationConfig(num_questions=60, max_hops=3, max_answers=3, seed=1)
    questions = generate_questions(kg, cfg)
    assert questions and {q.hops for q in questions} <= {1, 2, 3}
    for q in questions:
        path = [(kg.relations[h.relation], h.inverse) for h in q.path]
        expected = brute_reach(FILMS, kg.entities[q.topic], path) - {kg.entities[q.topic]}
        assert {kg.entities[a] for a in q.answers} == expected
        assert 1 <= len(q.answers) <= cfg.max_answers and q.topic not in q.answers
        assert kg.entities[q.topic] in q.text and kg.entities[q.topic] not in q.masked
    assert len({(q.topic, q.path) for q in questions}) == len(questions)  # no repeated (topic, path)
    again = generate_questions(kg, cfg)
    assert [(q.text, q.answers) for q in again] == [(q.text, q.answers) for q in questions]  # seeded


def test_generation_stops_when_the_graph_has_no_new_question_left_and_loses_none():
    kg = kg_of(FILMS)
    every = {(q.topic, q.path) for q in generate_questions(kg, GenerationConfig(num_questions=3000, max_answers=3,
                                                                                stall_attempts=10**6))}
    stalled = generate_questions(kg, GenerationConfig(num_questions=3000, max_answers=3, stall_attempts=300))
    assert {(q.topic, q.path) for q in stalled} == every  # 12 facts: every distinct question found before stopping
    assert len(every) < 3000  # so the walks ran out of new questions long before the 60,000 attempts
    with pytest.raises(ValueError, match="stall_attempts"):
        GenerationConfig(stall_attempts=0)


def test_generation_can_leave_out_nodes_named_by_identifiers_as_topics_and_answers():
    cvt = [(f"Player {i}", "sports.pro_athlete.teams", f"m.0r{i}") for i in range(6)] + \
          [(f"m.0r{i}", "sports.sports_team_roster.team", f"Team {i % 2}") for i in range(6)]
    kg = kg_of(cvt)
    questions = generate_questions(kg, GenerationConfig(num_questions=200, max_answers=6, unnamed=False))
    assert questions and all(kg.named[q.topic] and kg.named[q.answers].all() for q in questions)
    assert {q.hops for q in questions} == {2}  # one hop reaches only a mediator: no question; two reach the team
    teams = {kg.entities[q.topic]: {kg.entities[a] for a in q.answers} for q in questions if len(q.path) == 2
             and kg.relations[q.path[1].relation].endswith("team")}
    assert teams["Player 3"] == {"Team 1"}
    kept = generate_questions(kg, GenerationConfig(num_questions=200, max_answers=6))  # the default keeps them
    assert any(not kg.named[q.answers].all() for q in kept) and any(not kg.named[q.topic] for q in kept)


def test_topics_are_drawn_by_their_facts_or_uniformly():
    star = [("Hub", f"rel_{i}", f"Leaf {i}") for i in range(20)]  # the hub: 20 facts; each leaf: 1
    kg = kg_of(star)
    hub = kg.entity_id["Hub"]

    def hub_share(weight: str) -> float:
        qs = generate_questions(kg, GenerationConfig(num_questions=10, max_hops=1, topic_weight=weight, seed=3))
        return sum(q.topic == hub for q in qs) / len(qs)

    assert GenerationConfig().topic_weight == "uniform"
    assert hub_share("degree") >= 0.3 > hub_share("uniform")  # drawn with p = 20/40 against 1/21
    with pytest.raises(ValueError, match="topic_weight"):
        GenerationConfig(topic_weight="pagerank")


def test_mixed_frames_read_the_same_with_the_name_and_with_it():
    kg = kg_of(FILMS)
    rid = {r: i for i, r in enumerate(kg.relations)}
    path = (Hop(rid["starred_actors"], True), Hop(rid["directed_by"]))
    for seed in range(5):
        a = mixed_text(path, kg.relations, np.random.default_rng(seed), "Bo Kim")
        b = mixed_text(path, kg.relations, np.random.default_rng(seed), "it")
        assert a.replace("Bo Kim", "it") == b and "starred actors" in b and "directed by" in b
    same = mixed_text((Hop(rid["directed_by"]), Hop(rid["directed_by"], True)), kg.relations,
                      np.random.default_rng(0), "it")
    assert "same directed by" in same or "sharing the directed by" in same or "share the directed by" in same
    assert path_text((Hop(rid["directed_by"]),), kg.relations, "of") == "what is the directed by of it?"


def test_hubs_self_loops_and_one_relation_graphs():
    hub = [(f"Film {i}", "has_genre", "Drama") for i in range(300)] + [("Film 0", "has_genre", "Film 0")]
    kg = kg_of(hub)
    questions = generate_questions(kg, GenerationConfig(num_questions=30, max_answers=5, max_topic_degree=50))
    drama = kg.entity_id["Drama"]
    assert questions and all(q.topic != drama for q in questions)  # a hub is no topic
    assert all(len(q.answers) <= 5 for q in questions)  # "films of the same genre" reach 299: dropped
    loop = kg.entity_id["Film 0"]  # a self-loop: the topic reaches itself, which is never its own answer
    assert all(loop not in q.answers for q in questions if q.topic == loop)
    with pytest.raises(ValueError, match="no edges"):
        generate_questions(KnowledgeGraph(["a"], ["r"], np.zeros(0, int), np.zeros(0, int), np.zeros(0, int)))
    with pytest.raises(ValueError, match="max_topic_degree"):
        generate_questions(kg_of([("a", "r", "b"), ("b", "r", "a")]), GenerationConfig(max_topic_degree=1))


def test_path_ranker_enumerates_follows_and_intersects():
    kg = kg_of(FILMS)
    bo = kg.entity_id["Bo Kim"]
    paths = enumerate_paths(kg, np.array([bo]), max_hops=2)
    words = {p.text for p in paths}
    assert {"starred actors", "starred actors directed by", "starred actors has genre"} == words  # co-stars: none
    to_dirs = next(p for p in paths if p.text == "starred actors directed by")
    assert {kg.entities[n] for n in to_dirs.reached} == {"Ann Lee", "Dee Fox"}
    edges = path_edges(kg, np.array([bo]), to_dirs.path, np.array([kg.entity_id["Ann Lee"]]))
    assert {(kg.entities[kg.heads[e]], kg.relations[kg.rels[e]], kg.entities[kg.tails[e]]) for e in edges} == {
        ("Alpha", "starred_actors", "Bo Kim"), ("Alpha", "directed_by", "Ann Lee")}
    assert path_words(to_dirs.path, kg.relations) == "starred actors directed by"
    films_of = {name: RankedPath((kg.entity_id[name],), (), follow(kg, np.array([kg.entity_id[name]]), Hop(rel, True)),
                                 "x", score)
                for name, rel, score in (("Ann Lee", kg.relations.index("directed_by"), 0.5),
                                         ("Bo Kim", kg.relations.index("starred_actors"), 0.4))}
    common, used, score = rank_two_entities([[films_of["Ann Lee"]], [films_of["Bo Kim"]]])
    assert [kg.entities[n] for n in common] == ["Alpha"] and len(used) == 2 and score == pytest.approx(0.9)


def test_a_word_of_sameness_names_a_step_followed_there_and_back():
    from gr_core.chat.path_ranker import PathScorer

    kg = kg_of(FILMS)
    paths = {p.text: p for p in enumerate_paths(kg, np.array([kg.entity_id["Gamma"]]), max_hops=2)}
    director, same = paths["directed by"], paths["same directed by"]
    assert (director.back_steps, same.back_steps) == (0, 1) and same.steps == director.steps == ("directed by",)
    scorer = PathScorer(lambda texts: np.full((len(texts), 4), 0.5))  # every cosine 1: only sameness differs
    for question, better in (("which films have the same director as it", same), ("who directed it", director)):
        words = scorer.question_words(question)
        scores = {p.text: scorer.coverage_score(words, [p], tau=0.5, hop_penalty=0.1, same_bonus=0.1)
                  for p in (director, same)}
        assert max(scores, key=scores.get) == better.text, (question, scores)
    assert {kg.entities[n] for n in same.reached} == {"Delta"}


def test_a_question_word_can_say_the_answers_kind():
    """ask_kind: a node's kind is "when" for a date, else the nearest prototype (what, who, where), "what" for an
    identifier; the last hop's word says it in some draws and never says "who" of anything but people; the reading
    keeps "where" and "when" only when asked to."""
    from gr_core.chat.graph_reasoner import read_question
    from gr_core.chat.path_ranker import PathScorer

    names = ["Ann Lee", "Paris", "1994", "March 3, 1994", "m.0abc1", "Drama"]
    emb = np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0], [0, 1, 0], [0, 1, 0], [1, 0, 0]], np.float32)
    kinds = answer_kinds(names, emb, np.eye(3, dtype=np.float32))
    assert [ASK_KINDS[k] for k in kinds] == ["who", "where", "when", "when", "what", "what"]
    kg = kg_of(FILMS)
    rid = {r: i for i, r in enumerate(kg.relations)}
    path = (Hop(rid["directed_by"]),)
    people = [mixed_text(path, kg.relations, np.random.default_rng(s), "it", "who") for s in range(40)]
    things = [mixed_text(path, kg.relations, np.random.default_rng(s), "it", "what") for s in range(40)]
    assert any(t.startswith("who ") for t in people) and not any({"what", "which"} & set(t.split()) for t in people)
    assert not any("who" in t.split() for t in things)
    # the topic's own name is never rewritten, only the frame's question word
    named = mixed_text(path, kg.relations, np.random.default_rng(0), "what women want", "who")
    assert "what women want" in named and named.replace("what women want", "it") == people[0]
    with pytest.raises(ValueError, match="kinds"):
        generate_questions(kg, GenerationConfig(num_questions=10, ask_kind=True))
    people = {"Ann Lee", "Dee Fox", "Bo Kim", "Cy Dunn"}
    person = np.array([1 if e in people else 0 for e in kg.entities])
    typed = generate_questions(kg, GenerationConfig(num_questions=40, ask_kind=True), person)
    plain = generate_questions(kg, GenerationConfig(num_questions=40))
    # the same topics and paths as without ask_kind: only the question word differs
    assert [(q.topic, q.path) for q in typed] == [(q.topic, q.path) for q in plain]
    asked = [q for q in typed if all(kg.entities[a] in people for a in q.answers)]
    assert any("who" in q.masked.split() for q in asked) and any("what" in q.masked.split() for q in asked)
    assert all(all(kg.entities[a] in people for a in q.answers) for q in typed if "who" in q.masked.split())
    scorer = PathScorer(vocab_encoder({"directed by": [1, 0], "direct": [1, 0]}))
    assert read_question(scorer, "where did it direct", ["directed_by"]).text == "did it direct"
    assert read_question(scorer, "where did it direct", ["directed_by"], asking=True).text == "where did it direct"


def vocab_encoder(vocab: dict[str, list[float]]):
    """An encoder over a fixed vocabulary: each text's vector, L2-normalized (unknown texts: the last axis)."""
    dim = len(next(iter(vocab.values())))

    def encode(texts):
        out = np.array([vocab.get(t, [0.0] * (dim - 1) + [1.0]) for t in texts], dtype=np.float64)
        return out / np.linalg.norm(out, axis=1, keepdims=True)
    return encode


def test_the_generated_reasoner_reads_the_words_that_name_relations():
    """What a reasoner trained on generated questions reads (GENERATED_READING): each relation's match (the best word
    fit above NAMED), whether a word asks for "the same", how many relations are named, and the question kept to its
    function words and the words that name relations; a reasoner that reads them refuses a batch without them."""
    import torch
    from torch_geometric.data import Batch

    from gr_core.chat.graph_reasoner import GENERATED_READING, read_question
    from gr_core.chat.path_ranker import PathScorer
    from gr_core.gnn_rag import QuestionGraph, ReaRev

    scorer = PathScorer(vocab_encoder({"directed by": [1, 0, 0, 0], "direct": [1, 0, 0, 0],
                                       "starred actors": [0, 1, 0, 0], "starred": [0, 1, 0, 0], "film": [1, 1, 0, 0]}))
    relations = ["directed_by", "starred_actors"]
    # "film" is as near to both relations: it names neither and leaves the question the reasoner reads
    reading = read_question(scorer, "which film did it direct", relations)
    assert reading.text == "which did it direct"
    assert reading.match.tolist() == [1.0, 0.0] and reading.steps.tolist() == pytest.approx([0.0, 1 / 3])
    reading = read_question(scorer, "who co-starred with it", relations)
    assert reading.match.tolist() == [0.0, 1.0] and reading.steps.tolist() == pytest.approx([1.0, 1 / 3])
    assert reading.text == "who co starred with it"
    assert read_question(scorer, "what is it", relations).steps.tolist() == [0.0, 0.0]  # nothing named
    assert read_question(scorer, "which film did it direct", relations, words_only=False).text == \
        "which film did it direct"  # the question kept whole, read the same
    model = ReaRev(4, GENERATED_READING)
    bare = QuestionGraph(edge_index=torch.tensor([[0], [1]]), rel_table=torch.eye(4)[:2], rel_id=torch.tensor([0]),
                         seed=torch.tensor([True, False]), answer=torch.tensor([False, True]),
                         q_emb=torch.zeros(1, 4), q_masked=torch.zeros(1, 4), num_nodes=2)
    with pytest.raises(ValueError, match="rel_match"):
        model(Batch.from_data_list([bare]))


def test_twin_relations_are_one_fact_stored_under_two_names_and_do_not_cancel_a_words_fit():
    from gr_core.chat.generate import phrase_twins
    from gr_core.chat.graph_reasoner import read_question
    from gr_core.chat.path_ranker import PathScorer, word_relation_fit

    spoken, spoken_in = "location.country.languages_spoken", "language.human_language.countries_spoken_in"
    kg = kg_of([("Netherlands", spoken, "Dutch"), ("Dutch", spoken_in, "Netherlands"),  # each fact both ways
                ("Netherlands", spoken, "Frisian"), ("Frisian", spoken_in, "Netherlands"),
                ("Netherlands", "location.location.containedby", "Europe"),
                ("Alpha", "directed_by", "Ann"), ("Alpha", "written_by", "Ann"),  # half their facts shared
                ("Beta", "directed_by", "Bo"), ("Beta", "written_by", "Cy")])
    group = dict(zip(kg.relations, kg.twin_relations().tolist()))
    assert group[spoken] == group[spoken_in]
    assert len({group[r] for r in (spoken, "location.location.containedby", "directed_by", "written_by")}) == 4
    loose = dict(zip(kg.relations, kg.twin_relations(share=0.5).tolist()))
    assert loose["directed_by"] == loose["written_by"]  # at a looser share they would be one
    assert group == dict(zip(kg.relations, kg.twin_relations().tolist()))  # recomputed at the default share
    assert (kg_of(FILMS).twin_relations() == np.arange(3)).all()  # no twins: each its own group
    empty = KnowledgeGraph(["a"], ["r", "s"], np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert empty.twin_relations().tolist() == [0, 1]  # no facts: nothing shared
    loops = kg_of([("A", "same_as", "A"), ("A", "equals", "A"), ("A", "near", "B")])
    assert len(set(loops.twin_relations()[[loops.relations.index(r) for r in ("same_as", "equals")]])) == 1
    with pytest.raises(ValueError, match="share"):
        kg.twin_relations(share=0.0)
    # relations sharing a phrase are one row of a word fit: their groups are joined, whichever comes first
    joined = phrase_twins(["a.x.film", "b.x.film", "c.z.cast", "d.w.actor"], np.array([0, 1, 1, 3]))
    assert list(joined) == ["x film", "z cast", "w actor"] and joined["x film"] == joined["z cast"] != joined["w actor"]
    # "language" is as near to both twins: compared with each other its fit is 0; as one group it picks them out
    cos = np.array([[0.7], [0.7], [0.2]])
    phrases = ["country languages spoken", "human language countries spoken in", "location containedby"]
    assert np.allclose(word_relation_fit(cos, ["language"], phrases), [[0.0], [0.0], [-0.5]])
    grouped = word_relation_fit(cos, ["language"], phrases, groups=np.array([0, 0, 1]))
    assert np.allclose(grouped, [[0.5], [0.5], [-0.5]])
    scorer = PathScorer(vocab_encoder({"country languages spoken": [1, 0, 0, 0], "language": [1, 0, 0, 0],
                                       "human language countries spoken in": [1, 0, 0, 0],
                                       "location containedby": [0, 1, 0, 0]}))
    relations = [spoken, spoken_in, "location.location.containedby"]
    alone = read_question(scorer, "what language do they speak in it", relations)
    assert alone.text == "what do in it" and alone.match.tolist() == [0.0, 0.0, 0.0]
    twins = read_question(scorer, "what language do they speak in it", relations,
                          twins=phrase_twins(relations, np.array([group[r] for r in relations])))
    assert twins.text == "what language do in it" and twins.match.tolist() == [1.0, 1.0, 0.0]


def test_the_path_ranker_reads_a_word_naming_a_relation_stored_both_ways():
    from gr_core.chat import ChatConfig
    from gr_core.chat.path_ranker import PathScorer, best_paths

    kg = kg_of([("Alpha", "film.film.directed_by", "Ann Lee"), ("Ann Lee", "film.director.film", "Alpha"),
                ("Alpha", "film.film.starring", "Bo Kim")])
    scorer = PathScorer(vocab_encoder({"film directed by": [1, 0, 0, 0], "director film": [1, 0, 0, 0],
                                       "directed": [1, 0, 0, 0], "film starring": [0, 1, 0, 0]}))
    start, q = [kg.entity_id["Alpha"]], np.full(4, 0.5)
    phrases = [relation_phrase(r) for r in kg.relations]
    apart = scorer.question_words("who directed it", phrases, 0.8).fit
    assert apart["film directed by"].tolist() == [0.0]  # as near to its twin: picked out from nothing
    best = {}
    for twins in (True, False):
        rows, used, _ = best_paths(scorer, kg, start, "who directed it", q, ChatConfig(path_twins=twins, path_hops=1))
        assert [kg.entities[r] for r in rows] == ["Ann Lee"]
        best[twins] = used[0].score
    # the step's word fit (1 with its twin set aside, 0 against it) less the 0.05 threshold: named only with twins
    assert best[True] == pytest.approx(0.95) and best[False] == pytest.approx(-0.05)


def test_a_word_fits_the_relation_it_picks_out_among_the_graphs_relations():
    from gr_core.chat.path_ranker import word_relation_fit
    # "directed" picks out "directed by"; "films" is as near to both relations: it picks out neither
    cos = np.array([[0.8, 0.5], [0.2, 0.5]])  # rows: "directed by", "starred actors"; columns: "directed", "films"
    fit = word_relation_fit(cos, ["directed", "films"], ["directed by", "starred actors"])
    assert np.allclose(fit, [[0.6, 0.0], [-0.6, 0.0]])
    # a shared stem counts as the lexical similarity: "acted" names "starred actors" though its cosine is low
    fit = word_relation_fit(np.array([[0.39], [0.47]]), ["acted"], ["directed by", "starred actors"], lexical=0.8)
    assert fit[1, 0] == pytest.approx(0.8 - 0.39) and fit[0, 0] == pytest.approx(0.39 - 0.8)
    # one relation: nothing to contrast with, the similarity stands
    assert word_relation_fit(np.array([[0.3]]), ["x"], ["only"]).tolist() == [[0.3]]


def test_a_paths_steps_are_read_outward_from_the_entity():
    from gr_core.chat.path_ranker import PathScorer, word_distances
    words, far = word_distances("Who directed the films starring it?")
    assert words == ["directed", "films", "starring"] and far.tolist() == [4, 2, 1]
    assert word_distances("who directed Alpha")[1] is None  # no entity masked: no reading order
    scorer = PathScorer(vocab_encoder({"directed": [1, 0, 0, 0], "directed by": [1, 0, 0, 0], "films": [0, 0, 1, 0],
                                       "starring": [0, 1, 0, 0], "starred actors": [0, 1, 0, 0]}))
    q = scorer.question_words("Who directed the films starring it?", ["directed by", "starred actors"])
    outward = RankedPath((0,), (), np.array([1]), "starred actors directed by", steps=("starred actors", "directed by"))
    inward = RankedPath((0,), (), np.array([1]), "directed by starred actors", steps=("directed by", "starred actors"))
    a, b = (scorer.coverage_score(q, [p], tau=0.05, hop_penalty=0.1, order_bonus=0.02) for p in (outward, inward))
    assert a - b == pytest.approx(0.04)  # the same words, the same fit: only the order differs
    assert scorer.coverage_score(q, [outward], 0.05, 0.1) == scorer.coverage_score(q, [inward], 0.05, 0.1)


def test_a_path_that_returns_to_itself_is_never_followed():
    from gr_core.chat.path_ranker import returns_to_itself
    kg = kg_of(FILMS)
    genre = kg.relations.index("has_genre")
    assert returns_to_itself((Hop(genre), Hop(genre, True), Hop(genre)))
    assert not returns_to_itself((Hop(genre), Hop(genre, True)))  # "same has genre": the films sharing a genre
    paths = enumerate_paths(kg, np.array([kg.entity_id["Alpha"]]), max_hops=3)
    assert "same has genre" in {p.text for p in paths}
    assert not any(returns_to_itself(p.path) for p in paths)


def test_a_node_named_by_an_identifier_is_passed_through_never_answered():
    from gr_core.chat.ranking import candidate_names
    # WebQSP's mediator (CVT) nodes: the team is two hops away, through a node named by a Freebase mid
    cvt = [("Mike Wright", "sports.pro_athlete.teams", "m.0abc1"), ("m.0abc1", "sports.sports_team_roster.team",
                                                                     "New England Patriots"),
           ("m.0abc1", "sports.sports_team_roster.position", "Defensive end")]
    kg = kg_of(cvt)
    assert kg.named.tolist() == [True, False, True, True]
    start = np.array([kg.entity_id["Mike Wright"]])
    named = {p.text: {kg.entities[n] for n in p.reached} for p in enumerate_paths(kg, start, max_hops=2)}
    assert "pro athlete teams" not in named  # reaches only the mid: no answer of its own...
    assert named["pro athlete teams sports team roster team"] == {"New England Patriots"}  # ...followed on
    kept = {p.text for p in enumerate_paths(kg, start, max_hops=2, unnamed=True)}
    assert "pro athlete teams" in kept
    assert [c.name for c in candidate_names([0, 1, 2], ["Mike Wright", "m.0abc1", "New England Patriots"],
                                            exclude=[0])] == ["New England Patriots"]
    assert len(candidate_names([1, 2], ["m.0abc1", "x"], unnamed=True)) == 2
    # where only identifier-named nodes are left, they are the answer rather than none (and still not the asked entity);
    # where only asked entities are left, their named ones before their identifier-named ones
    assert [c.name for c in candidate_names([0, 1], ["Mike Wright", "m.0abc1"], exclude=[0])] == ["m.0abc1"]
    assert [c.name for c in candidate_names([0], ["Mike Wright"], exclude=[0])] == ["Mike Wright"]
    assert [c.name for c in candidate_names([0, 1], ["Mike Wright", "m.0abc1"], exclude=[0, 1])] == ["Mike Wright"]


def test_the_path_ranker_answers_with_an_identifier_only_when_nothing_named_is_within_reach():
    from gr_core.chat import ChatConfig
    from gr_core.chat.path_ranker import PathScorer, best_paths

    scorer = PathScorer(lambda texts: np.full((len(texts), 4), 0.5))
    cfg, q = ChatConfig(path_scorer="sentence", path_hops=2), np.full(4, 0.5)
    dead_end = kg_of([("Mike Wright", "sports.pro_athlete.teams", "m.0abc1"),
                      ("m.0abc1", "sports.sports_team_roster.from", "m.0x2")])
    rows, used, _ = best_paths(scorer, dead_end, [dead_end.entity_id["Mike Wright"]], "who did it play for", q, cfg)
    assert used and {dead_end.entities[r] for r in rows} <= {"m.0abc1", "m.0x2"} and len(rows)
    named = kg_of([("Mike Wright", "sports.pro_athlete.teams", "m.0abc1"),
                   ("m.0abc1", "sports.sports_team_roster.team", "New England Patriots")])
    rows, _, _ = best_paths(scorer, named, [named.entity_id["Mike Wright"]], "who did it play for", q, cfg)
    assert [named.entities[r] for r in rows] == ["New England Patriots"]
    # a caller weighing several start sets (a follow-up) asks without the fallback first
    start = [dead_end.entity_id["Mike Wright"]]
    assert not best_paths(scorer, dead_end, start, "who did it play for", q, cfg, unnamed_fallback=False)[1]


def test_a_reasoner_that_stops_on_a_mediator_answers_with_the_named_nodes_it_links(isolated, tiny_llm_dir,
                                                                                   monkeypatch):
    import gr_core.chat.conversation as conversation
    from gr_core.gnn_rag import ReaRev, ReasonerConfig, named_beyond

    # seed 0 -> mediator 1 -> 2, 3; 4 -> 1, 4 -> 3: a mediator's probability goes to each node it links (either
    # direction), summed over the mediators, ties broken by the nodes' own
    probs = np.array([0.0, 0.9, 0.02, 0.05, 0.03])
    edge_index = np.array([[0, 1, 1, 4, 4], [1, 2, 3, 1, 3]])
    assert named_beyond(probs, [(1, 0.9)], edge_index, {0, 1}) == [(3, 0.9), (4, 0.9), (2, 0.9)]
    assert named_beyond(probs, [(1, 0.5), (4, 0.1)], edge_index, {0, 1, 4}) == [(3, pytest.approx(0.6)), (2, 0.5)]
    assert named_beyond(probs, [(1, 0.9)], edge_index, {0, 1, 2, 3, 4}) == []
    graph = [("Mike Wright", "sports.pro_athlete.teams", "m.0abc1"),
             ("m.0abc1", "sports.sports_team_roster.team", "New England Patriots"),
             ("m.0abc1", "sports.sports_team_roster.position", "Defensive end"),
             ("Mike Wright", "people.person.gender", "Male")]
    scopes = []  # the searched node rows; the reasoner (faked) puts all its mass on the mediator
    real_scope = conversation.scope_tensors
    monkeypatch.setattr(conversation, "scope_tensors", lambda index, nodes, edges: scopes.append(nodes) or
                        real_scope(index, nodes, edges))
    for answer_unnamed, expected in ((False, {"New England Patriots", "Defensive end"}), (True, {"m.0abc1"})):
        chat = GraphChat(graph, model="zero_shot", llm_model=tiny_llm_dir, retriever="gnn", answer_mode="reasoner",
                         reasoner=ReaRev(384, ReasonerConfig(entity_dim=8)), answer_unnamed=answer_unnamed)
        mid = chat.index.kg.entity_id["m.0abc1"]
        monkeypatch.setattr(conversation, "node_probabilities", lambda model, datas: [
            (scopes[-1] == mid).astype(np.float32) for _ in datas])
        turn = chat.ask("Who did Mike Wright play for?")
        assert set(turn.answer.split(" | ")) == expected
        assert all("m.0abc1" in line for line in turn.paths)  # the evidence still shows the step through it


def test_a_follow_up_prefers_a_start_that_reaches_a_named_node(isolated, tiny_llm_dir):
    """Within 3 hops of Xavier there are only identifier-named nodes: the first turn answers with one of them (not
    nothing). Its follow-up is answered from Xavier and from that answer; only the answer's start reaches a named node
    (Paris), and the identifier fallback is taken only when no start does."""
    graph = [("Xavier", "has_part", "m.0a1"), ("m.0a1", "has_part", "m.0a2"), ("m.0a2", "has_part", "m.0a3"),
             ("m.0a3", "located_in", "Paris")]
    chat = GraphChat(graph, model="zero_shot", llm_model=tiny_llm_dir, answer_mode="paths", retriever="pcst")
    first = chat.ask("What part does Xavier have?")
    assert first.answer and all(name.startswith("m.0a") for name in first.answer.split(" | "))
    follow = chat.ask("and where is it located?")
    assert follow.follow_up and follow.answer == "Paris"


def test_a_reasoner_breaks_ties_between_paths_that_read_alike():
    from gr_core.chat import ChatConfig
    from gr_core.chat.path_ranker import PathScorer, best_paths

    kg = kg_of(FILMS)
    alpha = kg.entity_id["Alpha"]
    scorer = PathScorer(lambda texts: np.full((len(texts), 4), 0.5))  # every cosine 1: the words cannot choose
    probs = np.zeros(kg.num_entities)
    probs[kg.entity_id["Bo Kim"]] = 0.9
    support = lambda path: float(probs[path.reached].sum())  # noqa: E731
    for weight, expected in ((0.0, None), (0.5, "Bo Kim")):
        cfg = ChatConfig(path_scorer="coverage", path_reasoner_weight=weight, path_hops=1)
        rows, used, scored = best_paths(scorer, kg, [alpha], "who is in it", None, cfg, support=support)
        if expected:
            assert [kg.entities[r] for r in rows] == [expected] and used[0].text == "starred actors"
            assert scored[0][1] == pytest.approx(used[0].score)
        else:  # without the reasoner the tie stays a tie (broken by order, not by the reasoner)
            assert len({round(s, 6) for _, s, _ in scored[:2]}) == 1


@pytest.fixture(scope="module")
def isolated(tmp_path_factory):
    """Empty outputs/ (no saved reasoner found) and a cache of this module's own (trained reasoners land there)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GR_OUTPUTS_DIR", str(tmp_path_factory.mktemp("outputs")))
        yield


@pytest.mark.parametrize("scorer", ["sentence", "coverage"])
def test_paths_mode_answers_a_question_without_any_model(isolated, tiny_llm_dir, scorer):
    """Under coverage the two entities' paths are scored together: alone, Dee Fox's films would also be reached by
    Cy Dunn's "starred actors, same directed by" path, which claims both "stars" and "directed" (Gamma | Delta)."""
    chat = GraphChat(FILMS, model="zero_shot", llm_model=tiny_llm_dir, answer_mode="paths", retriever="pcst",
                     path_scorer=scorer)
    turn = chat.ask("Who directed Alpha?")
    assert turn.mode == "paths" and turn.answer == "Ann Lee" and turn.model == "relation paths (no model)"
    assert set(turn.evidence.nodes.node_attr) == {"Alpha", "Ann Lee"} and turn.paths
    both = chat.ask("Which film was directed by Dee Fox and stars Cy Dunn?")
    assert both.answer == "Delta"  # the intersection of the two entities' films
    if scorer == "coverage":  # "same": the director followed there and back
        assert chat.ask("Which films have the same director as Gamma?").answer == "Delta"
    assert chat._llm is None  # no LLM was loaded


def test_a_reasoner_is_trained_from_the_graph_cached_and_reused(isolated, tiny_llm_dir, tmp_path, monkeypatch, capsys):
    from dataclasses import replace

    from gr_core.chat.graph_reasoner import GraphReasonerConfig
    from gr_core.chat.models import reasoner_meta

    monkeypatch.setenv("GR_CACHE_DIR", str(tmp_path / "cache"))
    films = FILMS + [(f"Film {i}", "directed_by", f"Person {i % 7}") for i in range(40)] + \
        [(f"Film {i}", "starred_actors", f"Person {(i * 3) % 11}") for i in range(40)]
    cfg = GraphReasonerConfig(generation=GenerationConfig(num_questions=120, seed=0), num_epochs=2,
                              reasoner=replace(GraphReasonerConfig().reasoner, entity_dim=8))
    chat = GraphChat(films, model="zero_shot", llm_model=tiny_llm_dir, train_reasoner=cfg)
    assert chat.trained_reasoner is not None and chat.config.retriever == "gnn" and chat.config.mode == "reasoner"
    assert chat.reasoner.cfg.relation_match and chat.reasoner.cfg.relation_words_only  # it reads the relation words
    meta = reasoner_meta(chat.trained_reasoner)
    assert meta["relations"] == sorted(chat.index.kg.relations) and meta["generated"]["generated"] > 20
    assert len(meta["history"]) == 2 and meta["train_seconds"] >= 0
    turn = chat.ask("Who directed Alpha?")
    assert turn.status == "answered" and turn.mode == "reasoner" and turn.answer_nodes
    # the reasoner's distribution is kept on the turn, and helps the path ranker in paths mode
    assert turn.reasoner_probs.shape == (chat.index.kg.num_entities,)
    assert turn.reasoner_probs.sum() == pytest.approx(1.0, abs=1e-4) and "reasoner_probs" not in turn.to_dict()
    paths = GraphChat(films, model="zero_shot", llm_model=tiny_llm_dir, reasoner=chat.trained_reasoner,
                      retriever="gnn", answer_mode="paths").ask("Who directed Alpha?")
    assert paths.mode == "paths" and paths.answer == "Ann Lee" and paths.reasoner_probs is not None
    # a node named by an identifier is never the reasoner's answer either (a near-uniform reasoner: the 0.95 set holds
    # every node); where only such nodes are left, they come back rather than no answer
    chain = [("Zeta", "directed_by", "m.0xyz2"), ("m.0xyz2", "starred_actors", "m.0q"), ("m.0q", "has_genre", "Drama")]
    for graph, unnamed, expected in ((chain, False, {"Drama"}), (chain, True, {"Drama", "m.0q", "m.0xyz2"}),
                                     (chain[:2] + [("m.0q", "has_genre", "m.0r")], False, {"m.0r", "m.0q", "m.0xyz2"})):
        turn = GraphChat(graph, model="zero_shot", llm_model=tiny_llm_dir, reasoner=chat.trained_reasoner,
                         answer_unnamed=unnamed).ask("Who directed [Zeta]?")
        assert turn.mode == "reasoner" and {c["name"] for c in turn.candidates} == expected
    capsys.readouterr()
    again = GraphChat(films, model="zero_shot", llm_model=tiny_llm_dir, train_reasoner=cfg)
    assert again.trained_reasoner == chat.trained_reasoner and "reusing" in capsys.readouterr().out
    # two reasoners as one: member 0 is the reasoner above (from the cache), member 1 is trained; the chat reads both
    from gr_core.gnn_rag import ReasonerEnsemble

    pair = GraphChat(films, model="zero_shot", llm_model=tiny_llm_dir, train_reasoner=replace(cfg, members=2))
    assert len(pair.trained_reasoner) == 2 and pair.trained_reasoner[0] == chat.trained_reasoner
    assert isinstance(pair.reasoner, ReasonerEnsemble) and pair.config.mode == "reasoner"
    turn = pair.ask("Who directed Alpha?")
    assert turn.status == "answered" and turn.reasoner_probs.sum() == pytest.approx(1.0, abs=1e-4)
    assert turn.model == "GNN-RAG reasoner (" + " + ".join(p.name for p in pair.trained_reasoner) + ")"


def test_a_graph_too_small_to_generate_from_warns_and_answers_without_a_reasoner(isolated, tiny_llm_dir, tmp_path,
                                                                                 monkeypatch):
    monkeypatch.setenv("GR_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.warns(UserWarning, match="only .* questions could be generated"):
        chat = GraphChat([("Alpha", "directed_by", "Ann Lee")], model="zero_shot", llm_model=tiny_llm_dir,
                         train_reasoner=True)
    assert chat.reasoner is None and chat.config.retriever == "pcst"


def test_names_that_differ_only_in_case_are_one_entity_to_the_path_ranker(isolated, tiny_llm_dir):
    triples = [("Paris", "capital_of", "France"), ("paris", "named_after", "Paris of Troy"),
               ("Lyon", "located_in", "France")]
    chat = GraphChat(triples, model="zero_shot", llm_model=tiny_llm_dir, answer_mode="paths", retriever="pcst")
    turn = chat.ask("What is Paris the capital of?")
    assert turn.answer == "France"


def test_the_command_line_takes_train_reasoner(tmp_path):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "gr_core.chat", "--help"], capture_output=True, text=True, timeout=120)
    assert "--train-reasoner" in out.stdout and "paths" in out.stdout


def test_two_entity_questions_have_exact_answers():
    from gr_core.studies.chat_without_questions import two_entity_questions

    kg = kg_of(FILMS + [("Epsilon", "directed_by", "Ann Lee"), ("Epsilon", "starred_actors", "Bo Kim")])
    qs = two_entity_questions(kg, n=10, seed=0)
    assert qs
    for q in qs:
        director, actor = q["topic"], q["second"]
        films = {h for h, r, t in FILMS + [("Epsilon", "directed_by", "Ann Lee"),
                                           ("Epsilon", "starred_actors", "Bo Kim")]
                 if r == "directed_by" and t == director}
        stars = {h for h, r, t in FILMS + [("Epsilon", "directed_by", "Ann Lee"),
                                           ("Epsilon", "starred_actors", "Bo Kim")]
                 if r == "starred_actors" and t == actor}
        assert set(q["answers"]) == films & stars and director in q["question"] and actor in q["question"]


def test_study_records_and_pairs_from_hand_made_rows():
    from gr_core.studies.chat_without_questions import hit_record, paired

    rows_a = [{"question": f"q{i}", "hit": h, "hit1": h, "node_answer": True, "turn_s": 0.1}
              for i, h in enumerate([1, 1, 1, 0, 1, 1, 1, 1, 0, 1])]
    rows_b = [dict(r, hit=h, hit1=h) for r, h in zip(rows_a, [0, 0, 0, 0, 1, 0, 0, 0, 0, 1])]
    rec = hit_record("a", rows_a)
    assert rec["n"] == 10 and rec["hit"] == 80.0 and rec["ci_low"] < 80 < rec["ci_high"]
    committed = hit_record("c", [{k: r[k] for k in ("question", "hit")} for r in rows_a])  # answers of an earlier run
    assert {k: committed[k] for k in ("hit", "ci_low", "hit1", "turn_median_s")} == {
        "hit": 80.0, "ci_low": rec["ci_low"], "hit1": None, "turn_median_s": None}
    p = paired("a", rows_a, "b", rows_b)
    assert (p["a_only"], p["b_only"]) == (6, 0) and p["p"] == pytest.approx(2 * 0.5 ** 6)
    with pytest.raises(ValueError, match="different questions"):
        paired("a", rows_a, "b", rows_b[::-1])


def test_committed_answers_are_paired_by_question_text_only_when_they_cover_every_question():
    from gr_core.studies.chat_without_questions import with_committed

    questions = [{"question": "q1"}, {"question": "q2"}]
    ours = {"new": [{"question": "q1", "hit": 1}, {"question": "q2", "hit": 0}]}
    committed = {"per_question": {
        "old": [{"question": "q2", "hit": 1}, {"question": "q0", "hit": 0}, {"question": "q1", "hit": 0}],
        "partial": [{"question": "q1", "hit": 1}],  # did not answer q2: cannot be paired
        "new": [{"question": "q1", "hit": 0}, {"question": "q2", "hit": 0}]}}  # ours already: not replaced
    rows = with_committed(ours, questions, committed)
    assert list(rows) == ["new", "old (committed)"]
    assert [r["question"] for r in rows["old (committed)"]] == ["q1", "q2"]  # in our questions' order
    assert [r["hit"] for r in rows["old (committed)"]] == [0, 1]
    assert list(with_committed(ours, questions + questions[:1], committed)) == ["new"]  # a repeated question: none


def test_a_new_generated_reasoner_is_paired_with_the_committed_run_before_it():
    from gr_core.studies.chat_without_questions import GENERATED, PATHS, QUESTION_TRAINED, pair_with_committed

    mine = [{"question": f"q{i}", "hit": 1} for i in range(6)]
    result = {"per_question": {GENERATED: mine, PATHS: mine}, "pairs": [], "generated_reasoner": {}}
    committed = {"per_question": {GENERATED: [dict(r, hit=0) for r in mine][::-1],  # any order: matched by text
                                  f"{QUESTION_TRAINED} (committed)": mine,
                                  PATHS: [dict(r, hit=0) for r in mine],  # rerun here: not paired again
                                  "partial": mine[:3]}}  # did not answer every question: not paired
    row = pair_with_committed(result, committed)["generated_reasoner"]
    assert [p["b"] for p in result["pairs"]] == [f"{GENERATED} (previous run)", f"{QUESTION_TRAINED} (committed)"]
    assert row["previous_hit"] == 0.0 and row["p_vs_previous"] == pytest.approx(2 * 0.5 ** 6)
    assert row["p_vs_question_trained"] == 1.0
    # the committed system's answers are carried forward (a later run without its weights pairs with them), ours stay
    assert result["per_question"][f"{QUESTION_TRAINED} (committed)"] == mine and result["per_question"][PATHS] == mine
    assert f"{GENERATED} (previous run)" not in result["per_question"]
    # the LLM ranking not rerun: its committed answers give the row's p_vs_ranked (a rerun's own p is kept)
    from gr_core.studies.chat_without_questions import RANKED

    for own in (None, 0.5):
        result = {"per_question": {GENERATED: mine}, "pairs": [], "generated_reasoner": {"p_vs_ranked": own}}
        row = pair_with_committed(result, {"per_question": {RANKED: [dict(r, hit=0) for r in mine]}})[
            "generated_reasoner"]
        assert (row["p_vs_ranked"], row.get("n_vs_ranked")) == ((pytest.approx(2 * 0.5 ** 6), 6) if own is None
                                                                 else (0.5, None))


def test_the_word_fit_is_chosen_on_one_sample_and_checked_on_another(isolated, tiny_llm_dir):
    from gr_core.studies.path_ranker_settings import FIRST_COVERAGE, choose_word_fit, setting_label

    chat = GraphChat(FILMS, model="zero_shot", llm_model=tiny_llm_dir, answer_mode="paths", retriever="pcst")
    dev = [{"hop": 1, "question": "Who directed Alpha?", "answers": ["Ann Lee"]},
           {"hop": 2, "question": "Which actors starred in the films directed by Ann Lee?", "answers": ["Bo Kim"]}]
    out = choose_word_fit(chat, dev, dev[:1], lexicals=(0.8,), orders=(0.02,), taus=(0.05,), more_lexicals=(0.7,))
    assert list(out["hit_by_setting"]) == [setting_label(FIRST_COVERAGE), "contrast/lex 0.8/order 0.02/tau 0.05",
                                           "contrast/lex 0.7/order 0.02/tau 0.05"]
    assert out["hit_by_setting"][setting_label(out["chosen"])]["all"] == 100.0  # both questions answered
    assert out["confirm"]["n"] == 1 and out["confirm"]["pair"]["n"] == 1
    assert chat.config.path_word_fit == "contrast" and chat.config.path_lexical_match == 0.8  # the chat restored


def test_iterating_all_hops_stays_bounded_on_a_hub():
    hub = [(f"Film {i}", "has_genre", "Drama") for i in range(10_000)] + [("Film 1", "directed_by", "Ann Lee")]
    kg = kg_of(hub)
    paths = enumerate_paths(kg, np.array([kg.entity_id["Film 1"]]), max_hops=3, max_frontier=2000)
    same = [p for p in paths if p.text == "same has genre"]
    assert same and len(same[0].reached) == 9_999  # every other film of the genre is reached...
    assert not any(len(p.path) == 3 and p.path[:2] == same[0].path for p in paths)  # ...and never expanded further


def test_word_coverage_needs_a_word_per_relation_step():
    from gr_core.chat.path_ranker import content_words, coverage
    assert content_words("What films did it direct?") == ["films", "direct"]
    words = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])  # "direct", "actors"
    one_step = coverage(words, np.array([[1.0, 0.0, 0.0]]))
    two_steps = coverage(words, np.array([[1.0, 0.0, 0.0], [0.0, 0.6, 0.8]]))
    assert one_step.tolist() == [1.0] and np.allclose(two_steps, [1.0, 0.6])
    assert coverage(words[:1], np.eye(3)[:2]).tolist() == [1.0, 0.0]  # the one word is spent on the first step


def test_scorers_are_compared_on_the_same_candidates_with_hand_computed_hits():
    from gr_core.studies.path_scoring import best_settings, compare_scorers
    vocab = {"direct": [1.0, 0.0], "directed by": [1.0, 0.0], "starred actors": [0.0, 1.0], "films": [0.6, 0.8]}
    encode = lambda texts: np.array([vocab[t] for t in texts])  # noqa: E731
    # a 1-hop question whose sentence score prefers the 2-step path (the "films" pull), and a 2-hop one
    rows = [{"hop": 1, "masked": "what films did it direct", "paths": [
                {"units": ["directed by", "starred actors"], "steps": ["directed by", "starred actors"],
                 "sentence": 0.9, "hit": False},
                {"units": ["directed by"], "steps": ["directed by"], "sentence": 0.7, "hit": True}]},
            {"hop": 2, "masked": "what films did it direct", "paths": [
                {"units": ["directed by", "starred actors"], "steps": ["directed by", "starred actors"],
                 "sentence": 0.9, "hit": True},
                {"units": ["directed by"], "steps": ["directed by"], "sentence": 0.7, "hit": False}]}]
    out = compare_scorers(rows, encode, hop_penalties=(0.0, 0.3), taus=(0.5, 0.9), alphas=(0.0,))
    assert out["top_k_recall"] == {"1": 100.0, "2": 100.0, "all": 100.0}
    assert out["sentence"]["0.0"] == {"1": 0.0, "2": 100.0, "all": 50.0}  # 0.9 > 0.7
    assert out["sentence"]["0.3"] == {"1": 100.0, "2": 0.0, "all": 50.0}  # 0.6 < 0.7
    # coverage: "direct" names "directed by" (1.0), "films" names "starred actors" (0.8):
    # tau 0.5 -> 2 steps 0.5 + 0.3 = 0.8 > 1 step 0.5; tau 0.9 -> 0.1 - 0.1 = 0.0 < 0.1
    assert out["word_coverage"]["0.0/0.5/0.0"]["1"] == 0.0 and out["word_coverage"]["0.0/0.9/0.0"]["1"] == 100.0
    assert "llm_channel" not in out
    assert best_settings(out)["sentence"]["setting"] == "0.0"


def test_dev_candidates_are_the_chats_own_ranked_paths_with_their_hits(isolated, tiny_llm_dir):
    from gr_core.studies.path_scoring import dev_candidates
    chat = GraphChat(FILMS, model="zero_shot", llm_model=tiny_llm_dir, answer_mode="paths", retriever="pcst",
                     path_scorer="sentence")
    q = {"hop": 1, "question": "Who directed Alpha?", "answers": ["Ann Lee"]}
    [row] = dev_candidates(chat, [q], top=3)
    assert row["masked"] == "Who directed it?" and 1 <= len(row["paths"]) <= 3
    turn = chat.ask(q["question"])  # the chat answers with the best of the same paths
    best = row["paths"][0]
    assert best["hit"] == ("Ann Lee" in turn.answer) and best["units"][0] in turn.paths[0]
    assert any(p["hit"] for p in row["paths"]) and all(p["hops"] >= 1 for p in row["paths"])


def test_the_coverage_scorer_wants_a_question_word_for_every_relation_step(isolated, tiny_llm_dir):
    # the 1-step path for a question naming one relation; the 2-step path only when a second word names its step
    chat = GraphChat(FILMS, model="zero_shot", llm_model=tiny_llm_dir, answer_mode="paths", retriever="pcst",
                     path_scorer="coverage")
    turn = chat.ask("Which films did Ann Lee direct?")
    assert set(turn.answer.split(" | ")) == {"Alpha", "Beta"} and "directed by (" in turn.paths[0]
    turn = chat.ask("Which actors starred in the films directed by Ann Lee?")
    assert set(turn.answer.split(" | ")) == {"Bo Kim", "Cy Dunn"}
    assert (chat.config.path_word_fit, chat.config.path_coverage_tau) == ("contrast", 0.05)
    first = GraphChat(FILMS, model="zero_shot", llm_model=tiny_llm_dir, answer_mode="paths", retriever="pcst",
                      path_word_fit="cosine", path_coverage_tau=0.55, path_lexical_match=0, path_order_bonus=0)
    assert set(first.ask("Which films did Ann Lee direct?").answer.split(" | ")) == {"Alpha", "Beta"}
    with pytest.raises(ValueError, match="path_word_fit"):
        GraphChat(FILMS, model="zero_shot", llm_model=tiny_llm_dir, answer_mode="paths", path_word_fit="lexical")
    with pytest.raises(ValueError, match="path_scorer"):
        GraphChat(FILMS, model="zero_shot", llm_model=tiny_llm_dir, answer_mode="paths", path_scorer="llm")


def test_the_seed_and_reading_studies_pair_runs_on_the_same_questions(monkeypatch):
    """The studies' bookkeeping on hand-made answers: one training per seed (generator and training seeded alike) and
    per reading, every run asked the same questions, the spread per hop count and the pairs with the first run."""
    import gr_core.studies.generated_reasoner_seeds as study

    questions = [{"hop": h, "question": f"q{h}{i}", "answers": ["x"]} for h in (1, 2) for i in range(4)]
    trained = []
    monkeypatch.setattr(study, "load_graph", lambda spec: (None, "kg", None))
    monkeypatch.setattr(study, "GraphChat", lambda *a, **k: type("C", (), {"index": None})())
    monkeypatch.setattr(study, "metaqa_sample", lambda split, per_hop, seed, hops: questions)
    monkeypatch.setattr(study, "train_graph_reasoner", lambda index, cfg: trained.append(cfg) or len(trained) - 1)
    monkeypatch.setattr(study, "training_record", lambda path: {"path": path})
    hits = {0: [1, 1, 1, 1, 1, 0, 0, 0], 1: [0, 0, 0, 0, 1, 1, 1, 1], 2: [1, 1, 1, 1, 1, 1, 1, 1]}
    monkeypatch.setattr(study, "_ask", lambda path, kb, kind, qs: [
        {"question": q["question"], "answer": "x", "hit": h, "hit1": h, "node_answer": True, "turn_s": 0.1}
        for q, h in zip(qs, hits[path])])
    out = study.seeds_study((0, 1, 2), hops=(1, 2))
    assert [(c.seed, c.generation.seed) for c in trained] == [(0, 0), (1, 1), (2, 2)]
    assert out["spread_by_hop"]["1"] == {"mean": pytest.approx(200 / 3, abs=0.01), "min": 0.0, "max": 100.0,
                                         "std": pytest.approx(57.74, abs=0.01)}
    assert [(p["a"], p["a_only"], p["b_only"]) for p in out["pairs"]] == [("seed 1", 3, 4), ("seed 2", 3, 0)]
    trained.clear()
    out = study.reading_study(hops=(1, 2))
    assert [c.reasoner for c in trained] == list(study.READINGS.values())
    assert [(p["hop"], p["a_only"], p["b_only"]) for p in out["pairs"]] == [(1, 0, 4), (2, 3, 0), (1, 0, 0), (2, 3, 0)]


def test_the_generation_and_webqsp_seed_studies_pair_runs_on_the_same_questions(monkeypatch):
    """How questions are generated: the first rule (the default), each change alone and both; on MetaQA only the first
    rule and both (its KB names no node by an identifier). WebQSP seeds: one training per seed, every
    reasoner asked the same questions on one chat per graph, the spread and the pairs with the first seed."""
    import gr_core.studies.generated_reasoner_seeds as study
    from gr_core.chat.graph_reasoner import GraphReasonerConfig

    questions = [{"question": f"q{i}", "answers": ["x"], "graph": f"g{i % 2}"} for i in range(4)]
    trained, chats = [], []
    monkeypatch.setattr(study, "webqsp_sample", lambda n, seed, split: (questions, {"g0": "G0", "g1": "G1"}))
    monkeypatch.setattr(study, "GraphChat", lambda g, **k: chats.append((g, k)) or type("C", (), {"index": g})())
    monkeypatch.setattr(study, "train_graph_reasoner", lambda index, cfg: trained.append(cfg) or len(trained) - 1)
    monkeypatch.setattr(study, "load_reasoner", lambda path: path)
    monkeypatch.setattr(study, "training_record", lambda path: {"path": path})
    hits = iter([1, 1, 0, 0, 1, 1, 1, 1, 0, 0, 0, 1])
    import gr_core.studies.chat_without_questions as systems  # run_systems asks through its module's ask_alone
    monkeypatch.setattr(systems, "ask_alone", lambda chat, q: {
        "question": q["question"], "answer": "x", "hit": next(hits), "hit1": 0, "node_answer": True, "turn_s": 0.1})
    out = study.webqsp_seeds_study((0, 1, 2))
    assert [(c.seed, c.generation.seed) for c in trained] == [(0, 0), (1, 1), (2, 2)]
    assert sum(k.get("reasoner") is not None for _, k in chats) == 6  # one chat per graph and seed
    assert out["spread"] == {"mean": 58.33, "std": 38.19, "min": 25.0, "max": 100.0}  # 50, 100, 25
    assert [(p["a"], p["a_only"], p["b_only"]) for p in out["pairs"]] == [("seed 1", 2, 0), ("seed 2", 1, 2)]
    trained.clear()
    hits = iter([1] * 16)
    study.generation_study("webqsp")
    assert trained[0] == GraphReasonerConfig() and len(trained) == 4  # the first rule is the default
    assert [(c.generation.topic_weight, c.generation.unnamed) for c in trained] == [
        ("uniform", True), ("degree", True), ("uniform", False), ("degree", False)]
    trained.clear()
    monkeypatch.setattr(study, "load_graph", lambda spec: (None, "kg", None))
    monkeypatch.setattr(study, "metaqa_sample", lambda split, per_hop, seed, hops: [dict(q, hop=1) for q in questions])
    monkeypatch.setattr(study, "_ask", lambda path, kb, kind, qs: [
        {"question": q["question"], "answer": "x", "hit": 1, "hit1": 1, "node_answer": True, "turn_s": 0.1}
        for q in qs])
    out = study.generation_study("metaqa", "dev")
    assert [c.generation.topic_weight for c in trained] == ["uniform", "degree"] and len(out["by_config"]) == 2
    # several reasoners as one: each member alone (member 0 is the default's reasoner), then the three together
    trained.clear()
    out = study.ensemble_study("metaqa", "dev", members=3)
    assert trained[0] == GraphReasonerConfig() and [(c.seed, c.members) for c in trained] == [
        (0, 1), (1, 1), (2, 1), (0, 3)]
    assert list(out["by_config"])[-1] == "3 reasoners as one" and len(out["pairs"]) == 3 * 2  # vs member 0, per hop
    # a change paired with the committed run without it, label by label, by question text; seeds pooled
    def run(hits):
        return {"per_question": [{"question": f"q{i}", "hit": h} for i, h in enumerate(hits)]}
    changed = {"by_config": {"member 0 alone (seed 0)": run([1, 1, 0, 1]), "member 1 alone (seed 1)": run([1, 0, 0, 1]),
                             "3 reasoners as one": run([1, 1, 1, 1]), "other": run([1])},
               "configs": {"member 0 alone (seed 0)": {"members": 1}, "member 1 alone (seed 1)": {"members": 1},
                           "3 reasoners as one": {"members": 3}, "other": {"members": 1}}}
    reordered = {"per_question": run([0, 1, 0, 1])["per_question"][::-1]}  # matched by text, not position
    plain = {"by_config": {"member 0 alone (seed 0)": reordered, "member 1 alone (seed 1)": run([1, 1, 0, 0]),
                           "3 reasoners as one": run([1, 1, 1, 1])}}
    pairs = {p["a"]: p for p in study.pair_runs(changed, plain)}
    assert set(pairs) == {"member 0 alone (seed 0)", "member 1 alone (seed 1)", "3 reasoners as one",
                          "the single reasoners, pooled over seeds"}  # "other" has no run to pair with
    assert (pairs["member 0 alone (seed 0)"]["a_only"], pairs["member 0 alone (seed 0)"]["b_only"]) == (1, 0)
    pooled = pairs["the single reasoners, pooled over seeds"]
    assert (pooled["seeds"], pooled["a_only"], pooled["b_only"]) == (2, 2, 1)


def test_the_kinds_of_real_answers_are_counted_by_question_word(monkeypatch):
    from gr_core.studies import generated_reasoner_seeds as study

    questions = [{"question": "who directed it", "answers": ["Ann Lee", "1994"]},
                 {"question": "where is it", "answers": ["Paris"]}, {"question": "what is it", "answers": ["Drama"]}]
    monkeypatch.setattr(study, "webqsp_sample", lambda n, seed, split: (questions, {}))
    vectors = {"Ann Lee": [0, 1, 0], "Paris": [0, 0, 1], "Drama": [1, 0, 0], "1994": [1, 0, 0], "a thing": [1, 0, 0],
               "a person's name": [0, 1, 0], "a city, country or place": [0, 0, 1]}

    class Store:  # the sentence vectors of these names and of KIND_PROTOTYPES
        def __init__(self, cfg):
            pass

        def encode(self, texts):
            return np.array([vectors[t] for t in texts], np.float32), 0
    monkeypatch.setattr(study, "EmbeddingStore", Store)
    out = study.answer_kind_check()
    assert out["who"] == {"what": 0, "who": 1, "where": 0, "when": 1} and out["where"]["where"] == 1
    assert out["other"]["what"] == 1 and sum(out["when"].values()) == 0


def test_an_ensembles_members_are_seeded_apart_and_member_0_is_the_single_reasoners_cache(tmp_path):
    from dataclasses import replace

    from gr_core.chat import ChatConfig
    from gr_core.chat.graph_reasoner import GraphReasonerConfig, member_configs, reasoner_cache_path

    class Index:  # what the cache key reads of an index
        digest = "abc"

    cfg = GraphReasonerConfig(seed=4, generation=GenerationConfig(seed=7))
    members = member_configs(replace(cfg, members=3))
    assert [(m.seed, m.generation.seed, m.members) for m in members] == [(4, 7, 1), (5, 8, 1), (6, 9, 1)]
    assert members[0] == cfg and member_configs(cfg) == [cfg]
    key = reasoner_cache_path([Index()], cfg, ChatConfig().neighbourhood, "enc")[1]
    # the field does not enter a file's key: reasoners cached before it existed are found again
    assert reasoner_cache_path([Index()], replace(cfg, members=3), ChatConfig().neighbourhood, "enc")[1] == key
    assert reasoner_cache_path([Index()], members[1], ChatConfig().neighbourhood, "enc")[1] != key
    # fields added later enter the key only when on (ask_kind, asking_words, twin_relations): keys made before them
    # stay valid for their settings
    identity = reasoner_cache_path([Index()], cfg, ChatConfig().neighbourhood, "enc")[2]["config"]
    assert "ask_kind" not in identity["generation"] and "asking_words" not in identity["reasoner"]
    assert identity["reasoner"]["twin_relations"]  # the default reading
    typed = replace(cfg, generation=replace(cfg.generation, ask_kind=True))
    assert reasoner_cache_path([Index()], typed, ChatConfig().neighbourhood, "enc")[1] != key
    apart = replace(cfg, reasoner=replace(cfg.reasoner, twin_relations=False))
    assert "twin_relations" not in reasoner_cache_path([Index()], apart, ChatConfig().neighbourhood, "enc")[2][
        "config"]["reasoner"]
    with pytest.raises(ValueError, match="members >= 1"):
        GraphReasonerConfig(members=0)
