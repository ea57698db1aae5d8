"""The answer without training: relation paths the question's words name (gr_core.chat.paths), on hand-built graphs."""
import numpy as np
import pytest

from gr_core.chat import GraphChat
from gr_core.chat import paths as P
from gr_core.chat.generate import Hop, reach, relation_phrase
from gr_core.kg import KnowledgeGraph

FAMILY = [("Ann Lee", "spouse", "Bob Lee"), ("Bob Lee", "spouse", "Ann Lee"), ("Ann Lee", "nationality", "Canada"),
          ("Bob Lee", "nationality", "France"), ("Ann Lee", "father", "Carl Lee"), ("Ann Lee", "mother", "Dora Lee"),
          ("Carl Lee", "mother", "Eva Lee"), ("Dora Lee", "father", "Fred Moss"), ("Carl Lee", "born_in", "Paris"),
          ("Dora Lee", "born_in", "Rome"), ("Night Train", "starred_actors", "Carl Lee"),
          ("Long Road", "starred_actors", "Dora Lee"), ("Night Train", "directed_by", "Gus Hale"),
          ("Long Road", "directed_by", "Gus Hale"), ("Cold Sea", "starred_actors", "Dora Lee"),
          ("Cold Sea", "directed_by", "Ivy Stone")]


def kg_of(triples) -> KnowledgeGraph:
    ents = list(dict.fromkeys(x for h, _, t in triples for x in (h, t)))
    rels = sorted({r for _, r, _ in triples})
    e, r = {n: i for i, n in enumerate(ents)}, {n: i for i, n in enumerate(rels)}
    return KnowledgeGraph(ents, rels, np.array([e[h] for h, _, _ in triples]), np.array([r[x] for _, x, _ in triples]),
                          np.array([e[t] for _, _, t in triples]))


@pytest.fixture(scope="module")
def family():
    return GraphChat(FAMILY, model="zero_shot")


def answer(chat, question):
    chat.reset()
    return set(chat.ask(question).answer.split(" | "))


@pytest.mark.parametrize("name, phrase", [("directed_by", "directed by"), ("people.person.place_of_birth",
                                          "person place of birth"), ("hasGenre", "has genre"), ("in-language",
                                          "in language"), ("http://x.org/ontology/birthPlace", "birth place"),
                                          ("<http://rdf.freebase.com/ns/people.person.nationality>",
                                           "person nationality"), ("ns:people.person.spouse_s", "person spouse s"),
                                          ("schema:birthPlace", "birth place")])
def test_relation_names_become_words(name, phrase):
    assert relation_phrase(name) == phrase


def test_paths_are_followed_as_sets_both_ways():
    kg = kg_of(FAMILY)
    rid = {r: i for i, r in enumerate(kg.relations)}
    gus = kg.entity_id["Gus Hale"]
    films = kg.follow(np.array([gus]), rid["directed_by"], inverse=True)
    assert {kg.entities[n] for n in films} == {"Night Train", "Long Road"}
    actors = reach(kg, gus, (Hop(rid["directed_by"], True), Hop(rid["starred_actors"])))
    assert {kg.entities[n] for n in actors} == {"Carl Lee", "Dora Lee"}
    assert reach(kg, gus, (Hop(rid["directed_by"], True), Hop(rid["starred_actors"])), max_frontier=1) is None


def test_possessives_are_read_as_the_name_and_the_words_after_it():
    assert P.tokens("Who is X's father's wife?") == ["who", "is", "x", "father", "wife"]
    assert P.asked_kind("Who directed it?") == 1 and P.asked_kind("in what year was it released") == 3
    assert P.asked_kind("what is it") is None


def test_a_path_is_read_in_units_a_mediator_and_a_step_back_each_one(family):
    kg = family.index.kg
    rid = {r: i for i, r in enumerate(kg.relations)}
    phrases, groups = P.relation_phrases(kg), kg.twin_relations()
    back = P.path_units((Hop(rid["directed_by"], True), Hop(rid["directed_by"])), [False, False], phrases, groups)
    assert back == [("rel", ("directed by",)), ("back", ("directed by",))]
    fact = P.path_units((Hop(rid["starred_actors"]), Hop(rid["born_in"])), [True, False], phrases, groups)
    assert fact == [("fact", ("starred actors", "born in"))]  # through a mediator node: one fact
    # spouse is stored both ways (Ann -> Bob and Bob -> Ann): followed forward twice it is no step back
    assert [k for k, _ in P.path_units((Hop(rid["spouse"]), Hop(rid["spouse"])), [False, False], phrases,
                                       groups)] == ["rel", "rel"]


def test_the_words_of_one_mention_name_one_relation_and_a_word_left_unnamed_costs(family):
    kg = family.index.kg
    phrases = sorted(set(P.relation_phrases(kg)))
    words = P.read_words(family.vectors, "which films are directed by the starred actors of it", phrases)
    assert words.words == ["films", "directed", "starred actors"]  # "starred actors": one mention
    assert words.position is not None and words.position[2] < words.position[1]  # nearer the entity
    one = P.score_units(words, [("rel", ("starred actors",))])[0]
    two = P.score_units(words, [("rel", ("starred actors",)), ("rel", ("directed by",))])[0]
    assert two > one  # "directed" names the second step: leaving it unnamed costs more than the step


def test_a_path_goes_on_where_a_word_names_its_next_relation(family):
    assert answer(family, "What is the nationality of the spouse of Ann Lee?") == {"France"}  # not the spouse
    assert answer(family, "Who is the spouse of Ann Lee?") == {"Bob Lee"}
    assert answer(family, "What is Ann Lee's spouse's nationality?") == {"France"}
    # possessives in order: the mother's father is not the father's mother
    assert answer(family, "Who is Ann Lee's mother's father?") == {"Fred Moss"}
    assert answer(family, "Who is Ann Lee's father's mother?") == {"Eva Lee"}
    # an inverse chain through a typed middle: the films whose actor was born in Paris
    assert answer(family, "Which films star an actor born in Paris?") == {"Night Train"}
    assert answer(family, "Who directed the films of Ann Lee's mother?") == {"Gus Hale", "Ivy Stone"}


def test_two_named_entities_are_answered_where_their_paths_meet(family):
    assert answer(family, "Which film directed by Gus Hale stars Dora Lee?") == {"Long Road"}
    assert answer(family, "Which film starring Dora Lee did Ivy Stone direct?") == {"Cold Sea"}
    # meet, then one more hop: the director of the film where both are
    chat = GraphChat(FAMILY + [("Long Road", "starred_actors", "Carl Lee")], model="zero_shot")
    assert answer(chat, "Who directed the film starring Dora Lee and Carl Lee?") == {"Gus Hale"}


def test_a_path_back_to_the_entity_answers_the_entity(family):
    # spouse stored both ways: the spouse of Ann's spouse is Ann
    assert answer(family, "Who is the spouse of the spouse of Ann Lee?") == {"Ann Lee"}
    one_way = GraphChat([(h, r, t) for h, r, t in FAMILY if (h, r) != ("Bob Lee", "spouse")], model="zero_shot")
    # stored one way, the second "spouse" names the step back: a word written twice
    assert answer(one_way, "Who is the spouse of the spouse of Ann Lee?") == {"Ann Lee"}
    # a step back not asked for is no answer: "the director that directed" names one relation once
    assert answer(family, "Who is the director that directed Night Train?") == {"Gus Hale"}


def test_the_asked_kind_prefers_answers_of_that_kind(family):
    kinds = family.kinds
    kg = family.index.kg
    assert kinds[kg.entity_id["Paris"]] == 2 and kinds[kg.entity_id["Ann Lee"]] == 1
    assert answer(family, "Where was Carl Lee born?") == {"Paris"}


def test_a_node_named_by_an_identifier_is_passed_through_never_answered():
    mediated = [("Ann Lee", "person.employment", "m.0abc"), ("m.0abc", "employment.company", "Acme Corp"),
                ("Ann Lee", "person.nationality", "Canada")]
    chat = GraphChat(mediated, model="zero_shot")
    turn = chat.ask("Which company employed Ann Lee?")
    assert turn.answer == "Acme Corp" and "person employment employment company" in turn.paths[0]
    lone = GraphChat([("Ann Lee", "person.employment", "m.0abc")], model="zero_shot")
    assert lone.ask("What employment does Ann Lee have?").answer == "m.0abc"  # only an identifier within reach
    # ... also where a one-word name kept aside (a question without capitals) has paths of its own: it never answers
    aside = GraphChat([("Ann Lee", "person.employment", "m.0abc"), ("Acme", "located in", "Canada")], model="zero_shot")
    assert aside.ask("what employment does ann lee have at acme").answer == "m.0abc"


def test_enumerating_paths_stays_bounded_on_a_hub():
    hub = [(f"film {i}", "has_genre", "Drama") for i in range(400)] + [(f"film {i}", "starred_actors", f"actor {i}")
                                                                        for i in range(400)]
    kg = kg_of(hub)
    paths = P.enumerate_paths(kg, [kg.entity_id["Drama"]], max_hops=3, max_frontier=100, max_paths=50)
    assert 0 < len(paths) <= 50 and all(len(p.hops) == 1 for p in paths)  # 400 films: not followed further


def test_a_word_fits_the_relation_it_picks_out_among_the_graphs_relations():
    fit = P.margins(P.lexical_similarity(np.array([[0.6, 0.5], [0.3, 0.5]]), ["x", "y"], ["a", "b"], 0.0))
    assert fit.round(2).tolist() == [[0.3, 0.0], [-0.3, 0.0]]
    assert P.lexical_similarity(np.array([[0.1]]), ["acted"], ["starred actors"]).tolist() == [[P.LEXICAL]]
    twins = P.margins(np.array([[0.6], [0.55], [0.2]]), np.array([0, 0, 1]))
    assert twins.round(2).tolist() == [[0.4], [0.35], [-0.4]]  # a and its twin a2 are not each other's rivals
    assert P.shares_stem("acted", "starred actors") and not P.shares_stem("types", "has genre")


def test_the_words_asking_for_the_answers_kind_prefer_answers_near_them(monkeypatch):
    # relations whose names say nothing: only "city", "currency", "organization" can tell the paths apart (the whole
    # question's cosine to such names is noise that can outweigh them: SEMANTIC off, docs/chat.md "Limits")
    monkeypatch.setattr(P, "SEMANTIC", 0.0)
    chat = GraphChat([("Spain", "x1", "Spanish language"), ("Spain", "x2", "Madrid"), ("Spain", "x3", "Euro"),
                      ("Spain", "x4", "United Nations")], model="zero_shot")
    questions = {"which city is the seat of Spain": "Madrid", "what currency does Spain use": "Euro",
                 "what organization is Spain in": "United Nations"}
    assert {q: answer(chat, q) for q in questions} == {q: {a} for q, a in questions.items()}
    rows, fit = np.array([0, 2]), np.array([0.5, 0.0, 0.3, 0.9])  # TYPE x the answers' mean fit
    assert P.TYPE > 0 and P.kind_term(rows, None, None, fit) == pytest.approx(P.TYPE * 0.4)
    assert P.kind_term(rows, None, None) == 0
    monkeypatch.setattr(P, "TYPE", 0.0)
    assert sum(answer(chat, q) == {a} for q, a in questions.items()) < 3


def test_a_mediator_fact_back_to_its_own_subject_is_no_cycle(monkeypatch):
    # X -> roster -> player leads back to X in one fact: no answer (it was one when cycles were counted in hops, and
    # "who does X play for" answered X on WebQSP's mini-graphs)
    # (a second roster each way keeps the two relations apart: not twins, i.e. not one fact stored twice)
    roster = [("Ann Lee", "pro_athlete.teams", "m.01"), ("m.01", "sports_team_roster.player", "Ann Lee"),
              ("m.01", "sports_team_roster.team", "Eagles"), ("Ann Lee", "pro_athlete.teams", "m.02"),
              ("m.02", "sports_team_roster.team", "Hawks"), ("m.09", "sports_team_roster.player", "Bob Ray"),
              ("m.09", "sports_team_roster.team", "Hawks"), ("Ann Lee", "people.person.gender", "Female")]
    kg, ann = kg_of(roster), 0

    def answers_ann() -> bool:  # the path into the roster and out to its player, one fact
        return any(ann in p.reached.tolist() for p in P.enumerate_paths(kg, [ann]) if len(p.hops) == 2
                   and [kg.relations[h.relation] for h in p.hops] == ["pro_athlete.teams", "sports_team_roster.player"])

    assert kg.entities[ann] == "Ann Lee" and not answers_ann()
    assert answer(GraphChat(roster, model="zero_shot"), "Which team does Ann Lee play for?") == {"Eagles"}
    monkeypatch.setattr(P, "FACT_CYCLES", True)  # the rule before: counted in hops, the fact was a cycle of two
    assert answers_ann()


def test_a_self_loop_never_answers_not_even_followed_twice():
    # "Loop links_to Loop" followed forward twice had been a cycle of two units, answering Loop (docs/chat.md: never)
    loops = [("Loop", "links_to", "Loop"), ("Loop", "hosted_by", "Acme"), ("Ring", "links_to", "Node")]
    kg = kg_of(loops)
    loop, links = kg.entity_id["Loop"], kg.relations.index("links_to")
    assert not [p for p in P.enumerate_paths(kg, [loop]) if loop in p.reached and all(h.relation == links
                                                                                     for h in p.hops)]
    turn = GraphChat(loops, model="zero_shot").ask("What does Loop link to?")
    assert turn.linked and turn.linked[0] not in list(turn.answer_nodes)
    # a self-loop with a meaning is still a way through: MetaQA's film and writer of one name are one entity
    malcolm = [("Malcolm X", "written_by", "Malcolm X"), ("Malcolm X", "has_genre", "Biography"),
               ("Ali", "written_by", "Stephen J. Rivele"), ("Ali", "has_genre", "Sport")]
    assert answer(GraphChat(malcolm, model="zero_shot"), "what genres are the films written by Malcolm X in") == \
        {"Biography"}


def test_the_relations_in_reach_are_those_a_path_of_at_most_max_hops_can_follow():
    kg = kg_of([("a", "r1", "b"), ("c", "r2", "b"), ("c", "r3", "d"), ("d", "r4", "e"), ("x", "r5", "y")])
    rid = {r: i for i, r in enumerate(kg.relations)}
    for hops, names in ((1, {"r1"}), (2, {"r1", "r2"}), (3, {"r1", "r2", "r3"}), (5, {"r1", "r2", "r3", "r4"})):
        assert set(P.relations_in_reach(kg, [kg.entity_id["a"]], hops).tolist()) == {rid[n] for n in names}
    family_kg = kg_of(FAMILY)  # every path the ranker enumerates follows relations of the set only
    for name in ("Ann Lee", "Gus Hale"):
        start = [family_kg.entity_id[name]]
        reach = set(P.relations_in_reach(family_kg, start, 2).tolist())
        paths = P.enumerate_paths(family_kg, start, 2)
        assert paths and all(h.relation in reach for p in paths for h in p.hops)


def test_a_part_of_the_graph_no_path_reaches_changes_no_answer(family, monkeypatch):
    """Relations far from the question's entity (here in a part of their own, as in a graph of many topics) do not
    lower how well its words name the relations near it (paths.IN_REACH)."""
    far = [("Zed Park", "married_to", "Yan Park"), ("Zed Park", "wife", "Xia Park"), ("Wu Ho", "partner", "Vi Ho"),
           ("Wu Ho", "husband_of", "Una Ho")]
    joined = GraphChat(FAMILY + far, model="zero_shot")
    question = "Who is Ann Lee's spouse?"
    family.reset()
    alone, both = family.ask(question), joined.ask(question)
    assert both.answer == alone.answer == "Bob Lee"
    assert both.candidates == alone.candidates
    monkeypatch.setattr(P, "IN_REACH", False)  # every relation of the graph: the far ones lower the word's fit
    joined.reset()
    assert joined.ask(question).candidates != both.candidates


def test_the_kind_word_of_what_type_of_x_names_no_relation(monkeypatch):
    """"What type of currency": "type" frames the asked kind. Read as a mention, it fit 'marriage type of union' best
    in a graph of Freebase relations where "currency" fits two relations alike, and sent the answer there."""
    chat = GraphChat([("England", "country.currency_used", "Pound Sterling"),
                      ("Pound Sterling", "currency.countries_used", "Gibraltar"),  # another fact: no twin
                      ("Ann Lee", "nationality", "England"), ("Ann Lee", "marriage.type_of_union", "Marriage")],
                     model="zero_shot")
    phrases = ["country currency used", "currency countries used", "nationality", "marriage type of union"]
    question = "what type of currency is it"
    assert P.read_words(chat.vectors, question, phrases).words == ["currency"]
    assert P.read_words(chat.vectors, "which type is it", phrases).words == ["type"]  # not before "of": a mention
    # the trained reasoner's reading (chat/scope.py) keeps the word, as its committed reasoners were trained
    assert P.read_words(chat.vectors, question, phrases, ranker=False).words == ["type", "currency"]
    assert answer(chat, "What type of currency do they use in England?") == {"Pound Sterling"}
    monkeypatch.setattr(P, "KIND_FRAMES", frozenset())  # the rule off: "type" is read, and names the marriage
    assert answer(chat, "What type of currency do they use in England?") == {"Marriage"}


def test_the_whole_question_picks_among_paths_of_the_length_the_words_chose(monkeypatch):
    # no word fits any relation ("zzz" is orthogonal to all), so the words tie the three 1-hop paths; the question read
    # whole is nearest rel c, then rel b: it picks rel b among the 1-hop paths, never the 2-hop one through rel c
    kg = kg_of([("Xeno", "rel_a", "Alpha"), ("Xeno", "rel_b", "Beta"), ("Beta", "rel_c", "Gamma")])
    axes = {"rel a": 0, "rel b": 1, "rel c": 2, "zzz": 3}
    question = np.array([0.1, 0.5, 0.85, 0.0], np.float32)

    def vectors(texts):
        return np.stack([question / np.linalg.norm(question) if t == "zzz it" else np.eye(4, dtype=np.float32)[axes[t]]
                         for t in texts])

    phrases = ["rel a", "rel b", "rel c"]
    words = P.read_words(vectors, "zzz it", phrases)
    assert words.similarity([("rel", ("rel c",))]) > words.similarity([("rel", ("rel b",)), ("rel", ("rel a",))]) > 0
    best = P.rank_paths(kg, [[kg.entity_id["Xeno"]]], words)
    assert [kg.entities[n] for n in best.rows] == ["Beta"] and len(best.paths[0].units) == 1
    monkeypatch.setattr(P, "SEMANTIC", 0.0)  # off: the first of the tied 1-hop paths
    best = P.rank_paths(kg, [[kg.entity_id["Xeno"]]], P.read_words(vectors, "zzz it", phrases))
    assert [kg.entities[n] for n in best.rows] == ["Alpha"]


def test_the_words_of_a_mention_joined_by_of_fit_together(monkeypatch):
    """"Place of death" among place_of_birth, place_of_death and cause_of_death: each word alone fits two relations
    alike (a shared stem), so neither names one, and the path stopped at the children. Read together, their mean
    similarity picks place_of_death out (JOINT)."""
    chat = GraphChat([("John Adams", "children", "John Quincy"), ("John Quincy", "place_of_death", "Washington"),
                      ("John Quincy", "place_of_birth", "Braintree"), ("John Quincy", "cause_of_death", "Stroke"),
                      ("John Adams", "place_of_death", "Quincy")], model="zero_shot")
    phrases = ["children", "place of death", "place of birth", "cause of death"]
    question = "what is the place of death of the children of it"
    fit = P.read_words(chat.vectors, question, phrases).fit["place of death"]
    assert fit[0] > P.TAU and fit[1] > P.TAU  # "place" and "death", each a mention, fit it together
    assert answer(chat, "What is the place of death of the children of John Adams?") == {"Washington"}
    monkeypatch.setattr(P, "JOINT", False)
    assert P.read_words(chat.vectors, question, phrases).fit["place of death"][:2].max() <= 0
    assert answer(chat, "What is the place of death of the children of John Adams?") == {"John Quincy"}


def test_where_asks_for_a_place_and_names_no_relation(monkeypatch):
    """"Where" is read by the asked kind only (KIND_ONLY): read as a word it fit 'location' and sent the path on from
    the spouse's birthplace to its country."""
    chat = GraphChat([("George", "spouse", "Elizabeth"), ("Elizabeth", "place_of_birth", "London"),
                      ("London", "location", "England"), ("George", "place_of_birth", "Sandringham")],
                     model="zero_shot")
    assert answer(chat, "Where was the spouse of George born?") == {"London"}
    monkeypatch.setattr(P, "KIND_ONLY", frozenset())
    assert answer(chat, "Where was the spouse of George born?") == {"England"}


def test_of_joins_two_mentions_fit_only_of_two_stems_and_each_stays_a_mention(family):
    phrases = ["spouse", "nationality", "father", "place of death"]
    read = lambda q: P.read_words(family.vectors, q, phrases)  # noqa: E731
    assert read("nationality of spouse of it").words == ["nationality", "spouse"]  # each its own unit: two hops
    assert read("spouse of spouse of it").repeated.all()  # one stem: a step back ("the spouse of the spouse")
