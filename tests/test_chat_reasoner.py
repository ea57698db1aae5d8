"""A graph nobody wrote questions for: generated questions, a reasoner trained and served on one scope, and the choice
between it and the path ranker on its own held-out questions."""
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gr_core.chat import GenerationConfig, GraphChat, GraphReasonerConfig, generate_questions
from gr_core.chat import scope as scope_module
from gr_core.chat.conversation import DECISION_ALPHA, decide
from gr_core.chat.generate import FRAMES, HELD_OUT_FRAMES, chain_text, reach
from gr_core.gnn_rag import reasoner_meta
from test_chat_paths import kg_of

# a film graph of 16 films, 8 directors, 12 actors, 4 genres: two-word names, every relation a word
FILMS = ([(f"Film {c}", "directed_by", f"Director {i % 8}") for i, c in enumerate("ABCDEFGHIJKLMNOP")]
         + [(f"Film {c}", "starred_actors", f"Actor {(i * 5) % 12}") for i, c in enumerate("ABCDEFGHIJKLMNOP")]
         + [(f"Film {c}", "starred_actors", f"Actor {(i * 7 + 3) % 12}") for i, c in enumerate("ABCDEFGHIJKLMNOP")]
         + [(f"Film {c}", "has_genre", f"Genre {i % 4}") for i, c in enumerate("ABCDEFGHIJKLMNOP")])


def brute_reach(triples, topic: str, path) -> set[str]:
    current = {topic}
    for rel, inverse in path:
        current = {(h if inverse else t) for h, r, t in triples if r == rel and (t if inverse else h) in current}
    return current


def test_generated_questions_have_exact_answers_in_every_form():
    kg = kg_of(FILMS)
    questions = generate_questions(kg, GenerationConfig(num_questions=200, max_hops=3, max_answers=8, seed=1))
    forms = {q.form for q in questions}
    assert {"chain", "two"} <= forms and {q.hops for q in questions} == {1, 2, 3}
    for q in questions:
        path = [(kg.relations[h.relation], h.inverse) for h in q.path]
        reached = brute_reach(FILMS, kg.entities[q.topics[0]], path)
        answers = {kg.entities[a] for a in q.answers}
        if q.form == "chain":
            assert answers == reached - {kg.entities[q.topics[0]]} and len(q.topics) == 1
        elif q.form == "cycle":
            assert answers == reached == {kg.entities[q.topics[0]]}
        else:  # narrowed by a fact with the second entity: some of the chain's answers, not all
            assert len(q.topics) == 2 and answers < reached - {kg.entities[q.topics[0]]}
            assert q.masked.count("it") >= 2 and kg.entities[q.topics[1]] in q.text
        assert 1 <= len(q.answers) <= 8 and q.text.endswith("?") and "who" not in q.text.split()[:1]


def test_no_question_asks_for_others_sharing_a_relation_where_there_are_none():
    # "others with the performed by of Rocket Man", Rocket Man Elton John's only song: the step there and back reached
    # only the song itself, an impossible question that had decided for the reasoner on a user's graph
    songs = [("Rocket Man", "performed_by", "Elton John"), ("Your Song", "performed_by", "Elton John"),
             ("Lonely Song", "performed_by", "Solo Artist"), ("Elton John", "born_in", "Pinner"),
             ("Solo Artist", "born_in", "Leeds"), ("Lonely Song", "has_genre", "Pop"),
             ("Rocket Man", "has_genre", "Pop"), ("Your Song", "has_genre", "Ballad")]
    kg = kg_of(songs)
    questions = generate_questions(kg, GenerationConfig(num_questions=300, max_hops=3, max_answers=8, seed=0))
    def steps_back(q):
        return [(k, q.path[k]) for k in range(len(q.path) - 1) if q.path[k + 1].relation == q.path[k].relation
                and q.path[k + 1].inverse != q.path[k].inverse]
    shared = [q for q in questions if steps_back(q)]
    assert shared  # "the same performer as Rocket Man" (Your Song) is asked
    lonely = kg.entity_id["Lonely Song"]
    for q in shared:  # never from Lonely Song through its performer and back: nothing but Lonely Song is there
        first = steps_back(q)[0][0]
        before = reach(kg, q.topics[0], q.path[:first])
        assert set(reach(kg, q.topics[0], q.path[:first + 2]).tolist()) - set(before.tolist())
    performed = kg.relations.index("performed_by")
    assert not [q for q in shared if q.topics[0] == lonely and q.path[0].relation == performed]


def test_the_frames_read_the_same_with_the_name_and_with_it_and_held_out_frames_differ():
    kg = kg_of(FILMS)
    path = generate_questions(kg, GenerationConfig(num_questions=20, max_hops=2, seed=0))[-1].path
    for frames in (FRAMES, HELD_OUT_FRAMES):
        a = chain_text(path, kg.relations, np.random.default_rng(3), "Film A", frames)
        b = chain_text(path, kg.relations, np.random.default_rng(3), "it", frames)
        assert a.replace("Film A", "it") == b
    assert not set(FRAMES["last"]) & set(HELD_OUT_FRAMES["last"]) and set(FRAMES) == set(HELD_OUT_FRAMES)
    assert reach(kg, [], path).size == 0


def test_a_graph_too_small_to_generate_from_warns_and_answers_with_the_path_ranker(tmp_path, monkeypatch):
    monkeypatch.setenv("GR_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.warns(UserWarning, match="only .* questions could be generated"):
        chat = GraphChat([("Film A", "directed_by", "Ann Lee")], model="zero_shot", train_reasoner=True)
    assert chat.reasoner is None and chat.mode == "paths" and chat.ask("Who directed Film A?").answer == "Ann Lee"
    with pytest.raises(ValueError, match="train_reasoner trained none on this graph"):
        chat.ask("Who directed Film A?", mode="reasoner")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A small reasoner trained on FILMS' generated questions (cached under a temporary cache folder), and the scope
    calls made while training."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GR_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
        calls = []
        real = scope_module.search_scope

        def spy(index, seeds, whole_graph_edges, scope):
            calls.append((whole_graph_edges, scope))
            return real(index, seeds, whole_graph_edges, scope)

        mp.setattr("gr_core.chat.graph_reasoner.search_scope", spy)
        chat = GraphChat(FILMS, model="zero_shot", train_reasoner=_small(), whole_graph_edges=10)
        yield chat, calls


def test_the_reasoner_is_trained_on_the_scope_it_is_served_on(trained):
    chat, calls = trained
    assert calls and set(calls) == {(10, chat.config.scope)}  # the chat's rule and caps: 64 edges > 10, neighbourhoods
    meta = reasoner_meta(chat.trained_reasoner)
    assert meta["identity"]["scope"]["whole_graph_edges"] == 10 and len(meta["history"]) == 3
    served = []
    real = scope_module.search_scope
    chat.ask("Who directed Film C?", mode="reasoner")  # a turn cuts its scope by the same function
    import gr_core.chat.conversation as conversation

    original = conversation.search_scope
    conversation.search_scope = lambda *a: served.append(a[2:]) or real(*a)
    try:
        turn = chat.ask("Who directed Film C?", mode="reasoner")
    finally:
        conversation.search_scope = original
    assert served == [(10, chat.config.scope)] and turn.searched_edges < len(FILMS)


def _small() -> GraphReasonerConfig:
    """The module's reasoner: 400 generated questions, 3 epochs, 16-d entities."""
    return GraphReasonerConfig(generation=GenerationConfig(num_questions=400, seed=0), num_epochs=3, lr=5e-3,
                               val_fraction=0.3, reasoner=replace(GraphReasonerConfig().reasoner, entity_dim=16))


def test_a_cached_reasoner_cut_short_is_trained_again(trained, capsys):
    chat, _ = trained
    path = Path(chat.trained_reasoner)
    whole = path.read_bytes()
    path.write_bytes(whole[:200])  # an interrupted save: it had failed every later open
    again = GraphChat(FILMS, model="zero_shot", train_reasoner=_small(), whole_graph_edges=10)
    assert Path(again.trained_reasoner) == path and reasoner_meta(path)["history"]
    assert "reusing" not in capsys.readouterr().out
    path.write_bytes(whole)  # the module's other tests read the first training


def test_held_out_generated_questions_asked_through_the_chat_score_as_in_training(trained):
    chat, _ = trained
    meta = reasoner_meta(chat.trained_reasoner)
    hits = []
    for q in meta["val_questions"]:
        chat.reset()
        turn = chat.ask(q["question"], mode="reasoner")
        first = chat.index.rows_of(turn.answer_nodes[:1])
        hits.append(float(bool(first) and first[0] in q["answers"]))
    served = 100 * float(np.mean(hits))
    assert len(hits) >= 30 and abs(served - meta["val_h1"]) <= 10, (served, meta["val_h1"])
    from gr_core.chat.graph_reasoner import training_record

    record = training_record(chat.trained_reasoner)  # what notebook 09 prints: the score with its n and interval
    low, high = record["held_out_h1_ci"]
    assert record["num_val"] == meta["num_val"] and low <= record["held_out_h1"] <= high and high - low > 5


def test_a_trained_reasoner_is_served_only_where_it_beats_the_path_ranker_on_its_held_out_questions(trained):
    chat, _ = trained
    d = chat.decision
    assert d is not None and d["n"] >= 5 and d["reasoner_only"] + d["paths_only"] <= d["n"]
    assert d["alpha"] == DECISION_ALPHA  # the threshold it was decided at is recorded
    better = d["reasoner_hit"] > d["paths_hit"] and d["p"] < DECISION_ALPHA
    assert d["served"] == ("reasoner" if better else "paths") and chat.mode == d["served"]
    assert chat.ask("Who directed Film C?").decision == d  # each turn records the choice
    meta = reasoner_meta(chat.trained_reasoner)
    assert all(q["question"] not in {v["question"] for v in meta["val_questions"]} for q in meta["decision_questions"])
    assert {q["hops"] for q in meta["decision_questions"]} == {1, 2, 3}  # every hop count, however small the graph
    again = decide([chat], meta)  # asked again: the same answers
    assert again == d


def test_the_decision_is_remade_when_a_rule_of_linking_or_of_the_path_ranker_changes(trained, monkeypatch):
    import gr_core.chat.link as link
    import gr_core.chat.paths as paths

    chat, _ = trained
    shipped = chat.decision_cache()
    monkeypatch.setattr(link, "ASKED_TYPE", False)
    off_link = chat.decision_cache()
    monkeypatch.setattr(paths, "TYPE", 0.0)  # set at run time, as bench/chat_rules.py sets a rule
    assert len({shipped, off_link, chat.decision_cache()}) == 3
    monkeypatch.undo()
    assert chat.decision_cache() == shipped


def test_no_question_is_about_or_answered_by_an_identifier():
    kg = kg_of([("Ann Lee", "person.position", "m.0abc"), ("m.0abc", "position.title", "Mayor"),
                ("m.0abc", "position.city", "Springfield"), ("Bob Ray", "person.position", "m.0def"),
                ("m.0def", "position.title", "Mayor"), ("Bob Ray", "person.spouse", "Ann Lee")])
    questions = generate_questions(kg, GenerationConfig(num_questions=60, max_hops=2, seed=0))
    assert questions and all(kg.named[q.topics].all() and kg.named[q.answers].all() for q in questions)


def test_decision_topics_are_never_training_topics():
    kg = kg_of(FILMS)
    held = generate_questions(kg, GenerationConfig(num_questions=30, max_hops=3, seed=5), held_out=True)
    avoid = {t for q in held for t in q.topics}
    trained = generate_questions(kg, GenerationConfig(num_questions=200, seed=0), avoid=avoid)
    assert trained and not {q.topics[0] for q in trained} & avoid
    assert generate_questions(kg, GenerationConfig(num_questions=20), avoid=range(kg.num_entities)) == []
