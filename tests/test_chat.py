"""Chat with your graph: reading user graphs, linking, retrieval scope, turns, follow-ups, bad input, the CLI."""
import json
import subprocess
import sys

import numpy as np
import pytest

from gr_core.chat import (ChatConfig, ChatIndex, GraphChat, Turn, find_checkpoint, graph_from_triple_list,
                          read_graph_csv, read_triples)
from gr_core.chat.index import name_key
from gr_core.data import GraphFormatError

MOVIES = [("The Matrix", "directed_by", "Lana Wachowski"), ("The Matrix", "starred_actors", "Keanu Reeves"),
          ("The Matrix", "release_year", "1999"), ("The Matrix", "has_genre", "Action"),
          ("John Wick", "starred_actors", "Keanu Reeves"), ("John Wick", "directed_by", "Chad Stahelski"),
          ("Speed", "starred_actors", "Keanu Reeves"), ("Speed", "directed_by", "Jan de Bont"),
          ("Cloud Atlas", "directed_by", "Lana Wachowski"), ("Cloud Atlas", "starred_actors", "Tom Hanks"),
          ("Big", "starred_actors", "Tom Hanks"), ("Big", "directed_by", "Penny Marshall"),
          ("Up", "has_genre", "Animation"), ("Up", "directed_by", "Pete Docter")]


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------------- reading
def test_triples_files_in_tab_pipe_and_csv_form_with_header_and_comments(tmp_path):
    tab = _write(tmp_path / "kg.tsv", "head\trelation\ttail\n# a comment\nThe Matrix\tdirected_by\tLana Wachowski\n\n"
                                      "Speed\tstarred_actors\tKeanu Reeves\n")
    assert read_triples(tab) == [("The Matrix", "directed_by", "Lana Wachowski"),
                                 ("Speed", "starred_actors", "Keanu Reeves")]
    pipe = _write(tmp_path / "kb.txt", "Kismet|directed_by|William Dieterle\n")
    assert read_triples(pipe) == [("Kismet", "directed_by", "William Dieterle")]
    comma = _write(tmp_path / "kg.csv",
                   'subject,predicate,object\n"Crouching Tiger, Hidden Dragon",directed_by,Ang Lee\n')
    assert read_triples(comma) == [("Crouching Tiger, Hidden Dragon", "directed_by", "Ang Lee")]


@pytest.mark.parametrize("text, message", [
    ("a\tb\tc\nd\te\n", "kg.tsv:2: expected 3 fields"),
    ("a\tb\tc\nd\t\tf\n", "kg.tsv:2: field 'relation' is empty"),
    ("no delimiter here\n", "kg.tsv:1: cannot tell the delimiter"),
    ("\n# only a comment\n", "kg.tsv: no triple found"),
])
def test_malformed_triples_files_name_the_file_and_line(tmp_path, text, message):
    path = _write(tmp_path / "kg.tsv", text)
    with pytest.raises(GraphFormatError, match=message):
        read_triples(path)


def test_unreadable_files_are_named(tmp_path):
    with pytest.raises(GraphFormatError, match="missing.tsv: no such file"):
        read_triples(tmp_path / "missing.tsv")
    bad = tmp_path / "latin1.tsv"
    bad.write_bytes(b"a\tb\tc\nCaf\xe9\tin\tParis\n")
    with pytest.raises(GraphFormatError, match="latin1.tsv:2: not UTF-8"):
        read_triples(bad)
    with pytest.raises(GraphFormatError, match="is a directory"):
        read_triples(tmp_path)


def test_node_and_edge_csv_pair_and_its_errors(tmp_path):
    nodes = _write(tmp_path / "nodes.csv", "node_id,node_attr\n0,cube\n1,sphere\n")
    edges = _write(tmp_path / "edges.csv", "src,edge_attr,dst\n0,left of,1\n")
    g = read_graph_csv(nodes, edges)
    assert g.triples() == [("cube", "left of", "sphere")]
    _write(tmp_path / "bad_edges.csv", "src,edge_attr,dst\n0,left of,1\n1,behind,7\n")
    with pytest.raises(GraphFormatError, match="bad_edges.csv:3: field 'dst' names node 7"):
        read_graph_csv(nodes, tmp_path / "bad_edges.csv")
    _write(tmp_path / "bad_nodes.csv", "node_id,node_attr\n0,cube\nx,sphere\n")
    with pytest.raises(GraphFormatError, match="bad_nodes.csv:3: field 'node_id' must be an integer"):
        read_graph_csv(tmp_path / "bad_nodes.csv", edges)
    _write(tmp_path / "dup.csv", "node_id,node_attr\n0,cube\n0,sphere\n")
    with pytest.raises(GraphFormatError, match="dup.csv:3: field 'node_id' repeats id 0"):
        read_graph_csv(tmp_path / "dup.csv", edges)
    _write(tmp_path / "cols.csv", "id,text\n0,cube\n")
    with pytest.raises(GraphFormatError, match=r"cols.csv:1: header lacks column\(s\) \['node_id', 'node_attr'\]"):
        read_graph_csv(tmp_path / "cols.csv", edges)


# ---------------------------------------------------------------------- index and linking
@pytest.fixture(scope="module")
def movie_index():
    return ChatIndex.build(graph_from_triple_list(MOVIES))


def test_index_keeps_names_and_links_written_entities(movie_index):
    idx = movie_index
    assert idx.num_nodes == 16 and idx.num_edges == len(MOVIES)
    assert idx.node_emb.shape == (16, 384) and np.allclose(np.linalg.norm(idx.node_emb, axis=1), 1, atol=1e-5)
    names = lambda rows: [idx.kg.entities[r] for r in rows]  # noqa: E731
    assert names(idx.link("who directed the matrix?")) == ["The Matrix"]
    assert names(idx.link("Which films did Keanu Reeves and Tom Hanks star in")) == ["Keanu Reeves", "Tom Hanks"]
    # one-word names only when written capitalized: "big" and "up" in prose are words, not the films
    assert names(idx.link("How big is the cast, what is up")) == []
    assert names(idx.link("Who directed Up?")) == ["Up"]
    assert names(idx.link("what about [Big]")) == ["Big"]
    # a question without any capital letter cannot say which words are names: one-word names link only where no
    # longer name does
    assert names(idx.link("who directed up")) == ["Up"]
    assert names(idx.link("was tom hanks in big")) == ["Tom Hanks"]
    # accents and an abbreviation's period or an apostrophe do not keep a name from linking
    assert name_key("Hugo Chávez") == name_key("hugo chavez") == "hugo chavez"
    assert name_key("George W. Bush") == name_key("george w bush") and name_key("Shays' Rebellion") == "shays rebellion"
    accented = ChatIndex.build(graph_from_triple_list([("Hugo Chávez", "born in", "Sabaneta"), ("Team", "has", "x")]))
    assert [accented.kg.entities[r] for r in accented.link("where was hugo chavez born")] == ["Hugo Chávez"]
    # in a question with capitals, a partial name is looked up by its capitalized words only: not the node "Team"
    heskey = ChatIndex.build(graph_from_triple_list([("Emile Heskey", "plays for", "Aston Villa"),
                                                     ("Team", "member", "Emile Heskey")]))
    assert [heskey.kg.entities[r] for r in heskey.partial_link("What team does Heskey play for?")] == ["Emile Heskey"]
    # what the reasoner and the path ranker read: the linked entity written "it", however the question wrote it
    assert accented.masked("where was hugo chavez born", accented.link("where was hugo chavez born")) == \
        "where was it born"
    assert accented.masked("where was [Hugo Chávez] born?", accented.link("where was [Hugo Chávez] born?")) == \
        "where was it born?"
    assert heskey.masked("What team does Heskey play for?", heskey.partial_link("What team does Heskey play for?")) \
        == "What team does it play for?"
    bush = ChatIndex.build(graph_from_triple_list([("George W. Bush", "spouse", "Laura Bush")]))
    assert bush.masked("who is george w bush married to", bush.link("who is george w bush married to")) == \
        "who is it married to"
    assert idx.masked("Who directed The Matrix?", idx.link("Who directed The Matrix?")) == "Who directed it?"
    assert idx.masked("Who directed The Matrix?", []) == "Who directed The Matrix?"
    hugo = accented.link("hugo chavez")
    assert accented.masked("where was [hugo chavez] born?", hugo) == "where was it born?"  # folded, in brackets
    assert accented.masked("is hugo chavez older than hugo chavez's son", hugo) == "is it older than it's son"
    assert bush.masked("who is the wife of george w bush.", bush.link("george w bush")) == "who is the wife of it."
    # a name written in part: one "it" for the words it shares, joined across stop words
    rings = ChatIndex.build(graph_from_triple_list([("The Lord of the Rings", "written by", "J. R. R. Tolkien")]))
    assert rings.masked("who wrote lord of the rings", rings.partial_link("who wrote lord of the rings")) == \
        "who wrote it"
    two = ChatIndex.build(graph_from_triple_list([("George W. Bush", "spouse", "Laura Bush")]))
    both = two.link("[George W. Bush] [Laura Bush]")
    assert two.masked("what did george bush and laura bush do", both) == "what did it and it do"
    # a node the question does not write (a follow-up's carried entity, a fallback start): only a literal match
    usa = ChatIndex.build(graph_from_triple_list([("United States of America", "borders", "Canada")]))
    assert usa.masked("which states border it?", usa.rows_of(usa.node_ids), written=[]) == "which states border it?"
    assert usa.masked("which states border it?", usa.link("[United States of America]")) == "which it border it?"
    again = ChatIndex.build(graph_from_triple_list(MOVIES))
    assert again.cached and again.digest == idx.digest


def test_the_masking_study_compares_with_the_literal_mask_it_replaced():
    from gr_core.studies.chat_linking import literal_masking

    g = [("Hugo Chávez", "born in", "Sabaneta"), ("Sabaneta", "located in", "Venezuela")]
    new, old = (GraphChat(g, kind="kg", retriever="pcst", answer_mode="paths") for _ in range(2))
    literal_masking(old)
    q = "where was hugo chavez born"
    rows = new.index.link(q)
    assert new.index.masked(q, rows) == "where was it born" and old.index.masked(q, rows) == q
    assert old.index.masked("where was Hugo Chávez born", rows, written=rows) == "where was it born"
    assert new.ask(q).answer == old.ask(q).answer  # both answer: the override takes the path ranker's written=


def test_a_graph_without_nodes_is_refused():
    import pandas as pd

    from gr_core.data import TextualGraph

    empty = TextualGraph(pd.DataFrame({"node_id": [], "node_attr": []}),
                         pd.DataFrame({"src": [], "edge_attr": [], "dst": []}))
    with pytest.raises(GraphFormatError, match="no node"):
        ChatIndex.build(empty)


# ------------------------------------------------------------ conversations (a tiny random LLM: mechanics, not quality)
@pytest.fixture(scope="module", autouse=True)
def no_saved_reasoners(tmp_path_factory):
    """The chat's retriever="auto" takes a reasoner saved under outputs/ that knows the graph's relations (this
    module's movie graph uses MetaQA's), so these tests read an empty outputs folder unless they set their own."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GR_OUTPUTS_DIR", str(tmp_path_factory.mktemp("no_outputs")))
        yield


@pytest.fixture(scope="module")
def chat(tiny_llm_dir):
    """The LLM-ranked chat (MOVIES' relation names are words: by default the path ranker would answer)."""
    return GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir, max_new_tokens=8, answer_mode="ranked")


def test_a_kg_whose_relations_read_as_words_is_answered_by_the_path_ranker_by_default(tiny_llm_dir):
    words = GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir)
    assert words.config.mode == "paths"
    turn = words.ask("Who directed The Matrix?")
    assert turn.answer == "Lana Wachowski" and turn.model == "relation paths (no model)" and words._llm is None
    follow = words.ask("and who starred in it?")  # "it": the previous start (The Matrix), not its answer
    ids = dict(zip(words.graph.nodes.node_attr, words.graph.nodes.node_id))
    assert follow.follow_up and follow.answer == "Keanu Reeves" and follow.reasoner_seeds == [ids["The Matrix"]]
    words.reset()
    films = words.ask("Which films did Keanu Reeves star in?")
    assert set(films.answer.split(" | ")) == {"The Matrix", "John Wick", "Speed"}
    them = words.ask("and who directed them?")  # the previous answers, followed together (never intersected)
    assert set(them.answer.split(" | ")) == {"Lana Wachowski", "Chad Stahelski", "Jan de Bont"}
    schema = [(h, f"film.film.{r}", t) for h, r, t in MOVIES]  # Freebase-style names: the LLM ranks
    assert GraphChat(schema, model="zero_shot", llm_model=tiny_llm_dir).config.mode == "ranked"
    ids = [(h, f"P{i}", t) for i, (h, _, t) in enumerate(MOVIES)]  # Wikidata-style identifiers: likewise
    assert GraphChat(ids, model="zero_shot", llm_model=tiny_llm_dir).config.mode == "ranked"
    assert GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir, answer_mode="ranked").config.mode == "ranked"


def test_a_lowercase_question_links_its_one_word_topic_unless_told_not_to(tiny_llm_dir):
    chat = GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir)
    ids = dict(zip(chat.graph.nodes.node_attr, chat.graph.nodes.node_id))
    turn = chat.ask("who directed up")  # typed without capitals: "up" is the only name it can mean
    assert turn.linked == [ids["Up"]] and turn.answer == "Pete Docter"
    strict = GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir, link_uncased=False, link_partial=False)
    assert strict.ask("who directed up").linked == []  # the capital-letter rule alone: nothing named
    # a name written in part links where no whole name does, never in a follow-up, and by one word does not make a
    # question about the graph on its own
    chat.reset()
    part = chat.ask("which films did wachowski direct")
    assert part.linked == [ids["Lana Wachowski"]] and set(part.answer.split(" | ")) == {"The Matrix", "Cloud Atlas"}
    assert chat.index.partial_link("How do I reset my wifi router?") == []
    from gr_core.studies.chat_linking import topic_linked  # the study's count: (topic found, nothing linked)
    assert topic_linked(chat, "which films did wachowski direct", "Lana Wachowski", True, True) == (True, False)
    assert topic_linked(chat, "which films did wachowski direct", "Lana Wachowski", True, False) == (False, True)
    follow = chat.ask("and who starred in them?")  # from the last answer: no name of the question is looked up in part
    assert follow.follow_up and follow.reasoner_seeds == [ids["The Matrix"], ids["Cloud Atlas"]]
    assert follow.about == "follow-up"
    assert chat.index.partial_match("where was jan bont born")[1:] == (2, 3)  # "jan", "bont" of "jan de bont"
    chat.reset()  # two words and half of a name make a question about the graph; one word ("bont") does not
    assert chat.retrieve("where was jan bont born").status == "answered"
    assert chat.retrieve("where was bont born").status == "unrelated"
    # a one-word name makes it so only for the graph's hub (The Matrix: degree 4), not for another node (Speed)
    assert chat.retrieve("is the matrix any good").status == "answered"
    assert chat.retrieve("is speed any good").status == "unrelated"
    from gr_core.studies.relevance_gate import why_about  # the study's reasons, one per rule
    assert [why_about(chat, q) for q in ("which films did lana wachowski direct", "where was jan bont born",
                                         "is the matrix any good", "is speed any good")] == \
        ["named", "in part", "hub", "refused"]
    assert chat.ask("Is the speedometer broken?").status == "unrelated"  # "speed" is not a word of it
    assert chat.ask("how do i reset my wifi router").status == "unrelated"  # lowercase small talk stays unrelated
    chat.reset()
    chat.ask("Who directed Big?")
    follow = chat.ask("and who starred in it, up or down")  # a follow-up links no lowercase one-word name ("up")
    assert follow.follow_up and ids["Up"] not in follow.linked


def test_a_turn_returns_answer_evidence_checks_and_timings(chat):
    chat.reset()
    turn = chat.ask("Who directed The Matrix?")
    assert turn.status == "answered" and isinstance(turn.answer, str) and turn.model.startswith("zero-shot")
    ids = dict(zip(chat.graph.nodes.node_attr, chat.graph.nodes.node_id))
    assert turn.linked == [ids["The Matrix"]]
    assert ids["The Matrix"] in set(turn.evidence.nodes.node_id) and turn.evidence.num_edges >= 1
    assert ("The Matrix", "directed_by", "Lana Wachowski") in turn.triples()
    assert "The Matrix | directed_by | Lana Wachowski\n" in turn.desc  # a KG chat writes its evidence as lines
    assert {"encode", "link", "scope", "pcst", "retrieval", "answer", "check", "total"} <= set(turn.timings)
    record = json.loads(json.dumps(turn.to_dict()))
    assert record["evidence_triples"] and record["question"] == "Who directed The Matrix?"
    assert chat.history == [turn]


def test_follow_up_carries_the_previous_entities_and_the_history_is_in_the_prompt(chat):
    chat.reset()
    first = chat.ask("Which films did Tom Hanks star in?")
    follow = chat.ask("and who directed them?")
    ids = dict(zip(chat.graph.nodes.node_attr, chat.graph.nodes.node_id))
    assert follow.follow_up and ids["Tom Hanks"] in follow.linked
    assert {"Big", "Cloud Atlas"} & set(follow.evidence.nodes.node_attr)
    prompt = chat.prompt_question("and who directed them?")
    assert prompt.startswith("Earlier in this conversation:\nQ: Which films did Tom Hanks star in?\nA: ")
    assert prompt.rstrip().endswith("Answer:") and first.answer in prompt
    assert not chat.retrieve("Who directed Speed?").follow_up  # a new question with its own entity, no pronoun
    # the history budget drops old turns first
    small = GraphChat(MOVIES, model="zero_shot", llm_model=chat.llm_model, max_new_tokens=8, history_tokens=5)
    small.history, small._llm, small.model_name = list(chat.history), chat.llm, chat.model_name
    assert small.history_text() == ""


def test_empty_unrelated_and_edgeless_inputs_get_sensible_turns(tiny_llm_dir):
    chat = GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir, max_new_tokens=8)
    empty = chat.ask("   ")
    assert empty.status == "empty_question" and "empty" in empty.note and chat._llm is None and chat.history == []
    off = chat.ask("what is the boiling point of water at sea level?")
    assert off.status == "unrelated" and off.evidence is None and "similarity" in off.note and chat._llm is None
    assert (off.best_similarity < ChatConfig.relevance_threshold
            or off.best_relation_similarity < 0.18) and chat.history == []
    assert chat.ask("Who directed Speed?").status == "answered"  # a one-word title, asked with a relation of the graph
    import pandas as pd

    from gr_core.data import TextualGraph

    lonely = TextualGraph(pd.DataFrame({"node_id": [0, 1, 2], "node_attr": ["Keanu Reeves", "The Matrix", "Speed"]}),
                          pd.DataFrame({"src": pd.Series([], dtype=int), "edge_attr": pd.Series([], dtype=str),
                                        "dst": pd.Series([], dtype=int)}))
    lonely_chat = GraphChat(lonely, model="zero_shot", llm_model=tiny_llm_dir, max_new_tokens=4)
    no_edges = lonely_chat.ask("Who is Keanu Reeves?")
    assert no_edges.status == "no_edges" and no_edges.evidence.num_edges == 0
    assert not lonely_chat.index.names_the_graph([2])  # no edges, no hub: "Speed" is one word like any other
    assert 0 in set(no_edges.evidence.nodes.node_id) and isinstance(no_edges.answer, str)


def test_large_graphs_are_searched_in_the_neighbourhood_of_the_linked_entities(tiny_llm_dir):
    chat = GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir, max_new_tokens=4, whole_graph_edges=3, hops=1,
                     link_k=0)
    turn = chat.retrieve("Who directed Speed?")
    assert turn.searched_nodes == 3 and turn.searched_edges == 2  # Speed, its actor, its director (1 hop)
    assert set(turn.evidence.nodes.node_attr) <= {"Speed", "Keanu Reeves", "Jan de Bont"}


def test_citations_are_checked_and_answer_nodes_found(chat):
    chat.reset()
    turn = chat.retrieve("Who directed The Matrix?")
    turn.answer = ("Lana Wachowski\nEdges:\n* The Matrix -> directed_by -> Lana Wachowski\n"
                   "* The Matrix -> directed_by -> Bob")
    ids = dict(zip(chat.graph.nodes.node_attr, chat.graph.nodes.node_id))
    # the check step alone, on a given answer (generation skipped)
    from gr_core.citations import check_response

    check = check_response(turn.answer, turn.scope)
    assert [c["normalized"] for c in check["citations"]] == [True, False]
    assert chat.answer_nodes(turn.answer, turn.question, turn.scope) == [ids["Lana Wachowski"]]
    # names inside a sentence count; the question's own entity is not an answer
    said = "The Matrix was directed by Lana Wachowski, who also made Cloud Atlas."
    assert chat.answer_nodes(said, turn.question, turn.scope) == [ids["Lana Wachowski"], ids["Cloud Atlas"]]


def test_gnn_retriever_needs_a_reasoner_and_uses_a_saved_one(tmp_path, tiny_llm_dir, monkeypatch):
    import torch

    from gr_core.chat import find_reasoner
    from gr_core.gnn_rag import ReaRev, ReasonerConfig, load_reasoner, save_reasoner

    monkeypatch.setenv("GR_OUTPUTS_DIR", str(tmp_path / "outputs"))  # no saved reasoner there
    with pytest.raises(ValueError, match="needs a trained reasoner"):
        GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir, retriever="gnn")
    torch.manual_seed(0)
    path = save_reasoner(ReaRev(384, ReasonerConfig(entity_dim=8)), tmp_path / "r.pt", {"note": "untrained"})
    assert load_reasoner(path).cfg.entity_dim == 8
    assert find_reasoner(tmp_path / "none") is None
    saved = save_reasoner(ReaRev(384, ReasonerConfig(entity_dim=8)), tmp_path / "quick" / "04_gnn_rag" / "reasoners" /
                          "webqsp.pt")
    assert find_reasoner(tmp_path) == saved
    preset_own = save_reasoner(ReaRev(384, ReasonerConfig(entity_dim=8)),
                               tmp_path / "quick" / "09_chat" / "reasoner" / "metaqa-chat.pt")
    assert find_reasoner(tmp_path) == preset_own  # notebook 09's chat reasoner comes before notebook 04's
    chat_own = save_reasoner(ReaRev(384, ReasonerConfig(entity_dim=8)),
                             tmp_path / "studies" / "chat_reasoner" / "metaqa-chat.pt")
    assert find_reasoner(tmp_path) == chat_own  # and the study's (whole splits) before both
    with pytest.raises(ValueError, match="reads 16-d text embeddings"):
        GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir, retriever="gnn", reasoner=ReaRev(16))
    chat = GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir, retriever="gnn", reasoner=path,
                     max_new_tokens=4)
    seen = []  # the question vector the reasoner reads: the question with the entity it names masked
    real = chat._gnn_evidence
    monkeypatch.setattr(chat, "_gnn_evidence", lambda scope, nodes, edges, q, q_masked, *a: seen.append(q_masked) or
                        real(scope, nodes, edges, q, q_masked, *a))
    turn = chat.ask("Who directed The Matrix?")
    assert np.allclose(seen[0], chat.embed("Who directed it?"), atol=1e-6)
    assert turn.status == "answered" and turn.paths and "gnn" in turn.timings
    assert all(line.startswith("The Matrix") for line in turn.paths)
    assert "The Matrix" in set(turn.evidence.nodes.node_attr)


def test_auto_retriever_takes_a_reasoner_only_when_it_knows_the_graphs_relations(tmp_path, tiny_llm_dir, monkeypatch):
    import torch

    from gr_core.chat import find_reasoner
    from gr_core.gnn_rag import ReaRev, ReasonerConfig, save_reasoner

    monkeypatch.setenv("GR_OUTPUTS_DIR", str(tmp_path))
    assert GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir).config.retriever == "pcst"  # none saved
    with pytest.raises(ValueError, match="answer_mode='reasoner' needs a trained reasoner"):
        GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir, answer_mode="reasoner")
    torch.manual_seed(0)
    path = tmp_path / "studies" / "chat_reasoner" / "metaqa-chat.pt"
    save_reasoner(ReaRev(384, ReasonerConfig(entity_dim=8)), path, {"relations": ["directed_by", "has_genre"]})
    relations = sorted({r for _, r, _ in MOVIES})
    assert find_reasoner(tmp_path) == path and find_reasoner(tmp_path, relations=relations) is None
    assert find_reasoner(tmp_path, relations=["directed_by"]) == path and find_reasoner(tmp_path, relations=[]) is None
    assert GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir).config.retriever == "pcst"  # unknown relations
    save_reasoner(ReaRev(384, ReasonerConfig(entity_dim=8)), path, {"relations": relations + ["written_by"]})
    chat = GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir, max_new_tokens=4)
    assert chat.config.retriever == "gnn" and chat.reasoner_path == str(path)
    assert chat.config.mode == "reasoner"  # the better-measured answer with a reasoner (bench/chat.py)
    turn = chat.ask("Who directed The Matrix?")
    assert turn.status == "answered" and "gnn" in turn.timings and turn.paths and turn.mode == "reasoner"
    assert turn.answer_nodes and set(turn.answer_nodes) <= set(chat.graph.nodes.node_id)
    ids = dict(zip(chat.graph.nodes.node_attr, chat.graph.nodes.node_id))
    assert turn.reasoner_seeds == [ids["The Matrix"]]
    # a follow-up starts the reasoner from the previous topic or from the previous answer, never from both at once
    follow = chat.ask("and who starred in it?")
    assert follow.follow_up and follow.status == "answered"
    assert set(follow.reasoner_seeds) in ({ids["The Matrix"]}, set(turn.answer_nodes))
    assert GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir, retriever="pcst").config.retriever == "pcst"


@pytest.mark.data
def test_checkpoints_are_found_by_kind_with_a_matching_hash_and_never_from_smoke(tmp_path):
    import torch

    from gr_core.g_retriever.train import make_run_config
    from gr_core.runs import config_hash, write_json

    cfg = make_run_config("metaqa", "g_retriever", 0)
    for preset, good in (("smoke", True), ("quick", False), ("full", True)):
        run_dir = tmp_path / preset / "runs" / cfg.name
        write_json(run_dir / "config.json", {"name": cfg.name, **cfg.to_dict()})
        (run_dir / "ckpt").mkdir(parents=True)
        torch.save({"config_hash": config_hash(cfg.to_dict()) if good else "stale", "model": {}},
                   run_dir / "ckpt" / "best.pt")
    assert find_checkpoint("kg", tmp_path) == tmp_path / "full" / "runs" / cfg.name
    assert find_checkpoint("kg", tmp_path, presets=("quick",)) is None  # stale hash
    assert find_checkpoint("kg", tmp_path, llm_model="some/other-llm") is None
    assert find_checkpoint("scene", tmp_path) is None


def test_turn_view_colours_question_and_answer_nodes(chat, tmp_path):
    chat.reset()
    turn = chat.ask("Who directed The Matrix?")
    turn.answer_nodes = [int(turn.evidence.nodes.node_id.iloc[-1])]
    page = turn.show(out_html=tmp_path / "turn.html")
    assert "#2ca02c" in page and "#d62728" in page and "cdn.jsdelivr" not in page
    assert 'id="legend"' in page and "question entity" in page and '"label": "directed_by"' in page
    roles = turn.roles()
    assert roles[turn.linked[0]] == "question entity" and roles[turn.answer_nodes[0]] == "answer"
    # a cap on the drawn nodes keeps the marked ones and says how many more there are
    from gr_core.viz import draw_evidence, evidence_html, focus_nodes, save_figure

    whole = chat.graph
    marked = {int(whole.nodes.node_id.iloc[-1]): "answer", int(whole.nodes.node_id.iloc[0]): "question entity"}
    keep = focus_nodes(whole, marked, 4)
    assert len(keep) == 4 and keep[:2] == [int(whole.nodes.node_id.iloc[-1]), int(whole.nodes.node_id.iloc[0])]
    small = evidence_html(whole, marked, max_nodes=4)
    assert f"{whole.num_nodes - 4} more nodes not drawn" in small and small.count('"shape": "dot"') == 4
    png = save_figure(draw_evidence(whole, marked, max_nodes=4, title="t"), tmp_path, "ev", show=False)[0]
    assert png.stat().st_size > 1000
    assert Turn(question="x", status="unrelated").show() == ""


def test_cli_answers_a_triples_file_and_names_a_bad_line(tmp_path, tiny_llm_dir):
    kg = _write(tmp_path / "my_kg.tsv", "".join(f"{h}\t{r}\t{t}\n" for h, r, t in MOVIES))
    out = tmp_path / "turns.json"
    res = subprocess.run([sys.executable, "-m", "gr_core.chat", "--triples", str(kg), "--model", "zero_shot", "--llm",
                          tiny_llm_dir, "--max-new-tokens", "4", "--json", str(out), "Who directed The Matrix?"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "Q: Who directed The Matrix?" in res.stdout and "(The Matrix | directed_by | Lana Wachowski)" in res.stdout
    saved = json.loads(out.read_text())
    assert saved["turns"][0]["status"] == "answered" and saved["turns"][0]["evidence_triples"]
    bad = _write(tmp_path / "bad.tsv", "a\tb\tc\nbroken line\twith two\n")
    res = subprocess.run([sys.executable, "-m", "gr_core.chat", "--triples", str(bad), "question"], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 2 and "bad.tsv:2: expected 3 fields" in res.stderr


# ---------------------------------------------------------------------- constrained (ranked) answers
def _full_log_likelihood(net, batch, name):
    """Reference: one uncached forward over prompt + name + EOS, summing the name's and the EOS's log-probabilities."""
    import torch

    ids = net.tokenizer(name, add_special_tokens=False)["input_ids"] + [net.template.eos_id]
    with torch.inference_mode():
        prompt = net.embed(batch)
        tail = net.llm.get_input_embeddings()(torch.tensor([ids]))
        logits = net.llm(inputs_embeds=torch.cat([prompt, tail], 1)).logits[0].float()
    logp = torch.log_softmax(logits, -1)
    P = prompt.shape[1]
    return sum(float(logp[P - 1 + k, t]) for k, t in enumerate(ids))


def test_names_are_scored_as_whole_replies_with_the_prompt_cache(tiny_llm_dir):
    from gr_core.chat.ranking import score_names

    chat = GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir, answer_mode="ranked")
    turn = chat.retrieve("Who starred in The Matrix?")
    batch = chat._prompt_batch(turn)
    # "Tom" and "Tom Hanks" share their first token: the EOS after the name tells them apart
    names = ["Tom", "Tom Hanks", "Keanu Reeves", "1999", "Lana Wachowski"]
    scores, lengths = score_names(chat.llm, batch, names, chunk=2)  # chunks of 2: the cache is cut back after each
    expected = [_full_log_likelihood(chat.llm, batch, n) for n in names]
    assert np.allclose(scores, expected, atol=1e-4), (scores, expected)
    assert scores[0] != scores[1] and lengths.tolist() == [len(chat.llm.tokenizer(n)["input_ids"]) for n in names]
    # the flash-attention fallback (no 4-D mask) scores one name per forward, with the same result
    one_by_one, _ = score_names(chat.llm, batch, names, packed=False)
    assert np.allclose(one_by_one, expected, atol=1e-4)


def test_names_are_scored_exactly_by_an_llm_with_sliding_window_layers(tiny_llm_dir, tmp_path):
    """Gemma 3's local layers keep only the last window of the prompt in their cache: the packed names could not be
    cut off it again (transformers raises), so such an LLM scores one name per forward, with the full forward's
    result on a prompt longer than the window."""
    import torch
    from transformers import AutoTokenizer, Gemma3ForCausalLM, Gemma3TextConfig

    from gr_core.chat.ranking import score_names

    tok = AutoTokenizer.from_pretrained(tiny_llm_dir)
    torch.manual_seed(0)
    cfg = Gemma3TextConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=2, num_key_value_heads=1, head_dim=16, sliding_window=8,
                           layer_types=["sliding_attention", "full_attention"], max_position_embeddings=2048,
                           bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    Gemma3ForCausalLM(cfg).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    chat = GraphChat(MOVIES, model="zero_shot", llm_model=str(tmp_path), answer_mode="ranked")
    turn = chat.retrieve("Who starred in The Matrix?")
    batch = chat._prompt_batch(turn)
    assert batch.attention_mask.shape[1] > 8  # the prompt is longer than the window
    names = ["Tom", "Tom Hanks", "Keanu Reeves", "Lana Wachowski"]
    scores, _ = score_names(chat.llm, batch, names)
    expected = [_full_log_likelihood(chat.llm, batch, n) for n in names]
    assert np.allclose(scores, expected, atol=1e-4), (scores, expected)
    assert chat.ask("Who starred in The Matrix?").answer  # the whole ranked turn


def test_a_ranked_answer_is_always_a_node_of_the_evidence_and_never_the_question_entity(tiny_llm_dir):
    chat = GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir, answer_mode="ranked", max_answers=2)
    turn = chat.ask("Who directed The Matrix?")
    ev = dict(zip(turn.evidence.nodes.node_id.tolist(), turn.evidence.nodes.node_attr.tolist()))
    assert turn.mode == "ranked" and turn.candidates and 1 <= len(turn.answer_nodes) <= 2
    assert set(turn.answer_nodes) <= set(ev) and not set(turn.answer_nodes) & set(turn.linked)
    assert turn.answer == " | ".join(ev[n] for n in turn.answer_nodes)
    assert "The Matrix" not in {c["name"] for c in turn.candidates}
    scores = [c["score"] for c in turn.candidates]
    assert (scores == sorted(scores, reverse=True)
            and {c["name"] for c in turn.candidates} == set(ev.values()) - {"The Matrix"})
    # a follow-up carries the ranked answer's nodes
    follow = chat.ask("and what else did they direct?")
    assert follow.follow_up and set(turn.answer_nodes) <= set(follow.linked)


def test_a_ranked_turn_keeps_its_score_parts_and_a_replay_gives_its_answer(tiny_llm_dir):
    from gr_core.studies.chat_ranking import replay_ranking

    chat = GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir, answer_mode="ranked", relation_prior=20.0)
    turn = chat.ask("Who directed The Matrix?")
    for c in turn.candidates:  # score = log-likelihood + relation_prior x relation fit
        assert c["score"] == pytest.approx(c["loglik"] + 20.0 * c["relation_fit"], abs=1e-3)
        assert 0.0 <= c["relation_fit"] <= 1.0
    record = {"candidates": turn.candidates, "hit": 0.0}
    n = len(turn.answer.split(" | "))
    for gold, hit in ((turn.answer.split(" | ")[0], 1.0), ("Nobody At All", 0.0)):
        assert replay_ranking([record | {"answers": [gold]}], 20.0, False) == [{"hit": hit, "hit1": hit, "answers": n}]
    assert max(c["relation_fit"] for c in turn.candidates) > 0  # the relation prior takes part
    # a prior so large that only the relation fit counts: the best-fitting candidate comes first
    best_fit = max(turn.candidates, key=lambda c: (c["relation_fit"], c["loglik"]))["name"]
    assert replay_ranking([record | {"answers": [best_fit]}], 1e6, False, max_answers=1)[0]["hit1"] == 1.0
    not_ranked = {"candidates": [], "hit": 1.0, "hit1": 0.0, "answers": ["x"]}
    assert replay_ranking([not_ranked], 0.0, False) == [{"hit": 1.0, "hit1": 0.0, "answers": 0}]
    # a calibrated chat keeps each candidate's no-evidence prior, and the replay subtracts it as the chat does
    calibrated = GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir, answer_mode="ranked", calibrate=True,
                           relation_prior=20.0).ask("Who directed The Matrix?")
    for c in calibrated.candidates:
        assert c["score"] == pytest.approx(c["loglik"] - c["prior"] + 20.0 * c["relation_fit"], abs=1e-3)
    first = calibrated.answer.split(" | ")[0]
    replayed = replay_ranking([{"candidates": calibrated.candidates, "hit": 0.0, "answers": [first]}], 20.0, False)
    assert replayed[0]["hit1"] == 1.0 and replayed[0]["answers"] == len(calibrated.answer.split(" | "))


def test_the_reasoners_help_is_replayed_as_a_score_term_on_hand_computed_candidates():
    from gr_core.studies.chat_ranking import replay_with_reasoner

    # Paris: loglik -5, relation fit 0.1 (prior 20 -> -3); Lyon: -4, 0.1 (-2): Lyon leads by 1 nat
    cands = [{"name": "Paris", "node_ids": [1], "loglik": -5.0, "relation_fit": 0.1, "tokens": 1, "reasoner_p": 0.9},
             {"name": "Lyon", "node_ids": [2], "loglik": -4.0, "relation_fit": 0.1, "tokens": 1, "reasoner_p": 0.1}]
    record = {"candidates": cands, "hit": 0.0, "answers": ["Paris"]}
    # no help: both within the 2-nat margin, Lyon first -> Hit 1, Hit@1 0
    assert replay_with_reasoner([record], 0.0, False) == [{"hit": 1.0, "hit1": 0.0, "answers": 2}]
    # 2 x p: Paris -3 + 1.8 = -1.2, Lyon -2 + 0.2 = -1.8: Paris first
    assert replay_with_reasoner([record], 2.0, False)[0]["hit1"] == 1.0
    # 1 x log p: Paris -3 + log 0.9 = -3.105, Lyon -2 + log 0.1 = -4.303: Paris first, Lyon 1.2 nats behind
    assert replay_with_reasoner([record], 1.0, True) == [{"hit": 1.0, "hit1": 1.0, "answers": 2}]
    # 5 x log p: Paris -3.53, Lyon -13.51: 10 nats behind, out of the answer
    assert replay_with_reasoner([record], 5.0, True)[0]["answers"] == 1
    assert replay_with_reasoner([{"candidates": [], "hit": 1.0, "answers": ["x"]}], 5.0, True)[0]["hit"] == 1.0


def test_candidates_choice_and_the_empty_evidence():
    from gr_core.chat.ranking import Candidate, candidate_names, choose, rank_candidates

    cands = candidate_names([1, 2, 3, 4], ["Tom", "Tom Hanks", "Big", "Tom"], exclude=[3])
    assert [(c.name, c.node_ids) for c in cands] == [("Tom", [1, 4]), ("Tom Hanks", [2])]  # same name: one candidate
    # both names of a shared prefix are reachable: whichever scores higher wins
    for scores, best in (([-1.0, -3.0], "Tom"), ([-3.0, -1.0], "Tom Hanks")):
        ranked = rank_candidates(candidate_names([1, 2], ["Tom", "Tom Hanks"]), np.array(scores), np.array([1, 2]))
        assert choose(ranked, 1, 0.0)[0].name == best
    ranked = rank_candidates([Candidate("a", [1]), Candidate("b", [2]), Candidate("c", [3])],
                             np.array([-1.0, -1.5, -9.0]), np.array([1, 1, 1]), prior=np.array([0.0, 0.0, -9.0]))
    assert [c.name for c in ranked] == ["c", "a", "b"]  # calibrated: c is far likelier than its prior
    assert [c.name for c in choose(ranked, 3, 1.0)] == ["c", "a"]
    assert [c.name for c in rank_candidates([Candidate("ab", [1]), Candidate("a", [2])], np.array([-4.0, -3.0]),
                                            np.array([3, 1]), length_norm=True)] == ["ab", "a"]  # -1.0 vs -1.5
    assert candidate_names([], []) == [] and choose([], 3, 1.0) == []
    assert [c.name for c in candidate_names([5], ["Up"], exclude=[5])] == ["Up"]  # only the question's entity: kept


def test_an_edgeless_graph_with_nothing_to_rank_gives_a_clear_note(tiny_llm_dir):
    import pandas as pd

    from gr_core.data import TextualGraph

    lonely = TextualGraph(pd.DataFrame({"node_id": [0], "node_attr": [" "]}),
                          pd.DataFrame({"src": pd.Series([], dtype=int), "edge_attr": pd.Series([], dtype=str),
                                        "dst": pd.Series([], dtype=int)}))
    chat = GraphChat(lonely, model="zero_shot", llm_model=tiny_llm_dir, answer_mode="ranked", relevance_threshold=-1.0)
    turn = chat.ask("Who is it?")
    assert turn.answer == "" and turn.answer_nodes == [] and "no node to answer with" in turn.note


def test_answer_modes_and_evidence_formats_are_checked():
    with pytest.raises(ValueError, match="answer_mode"):
        ChatConfig(answer_mode="beam")
    with pytest.raises(ValueError, match="needs retriever='gnn'"):
        ChatConfig(answer_mode="reasoner", retriever="pcst")
    with pytest.raises(ValueError, match="evidence_format"):
        ChatConfig(evidence_format="xml")
    assert ChatConfig().mode == "ranked" and ChatConfig(kind="scene").mode == "free"
    assert (ChatConfig(retriever="gnn").mode == "reasoner"
            and ChatConfig(retriever="gnn", answer_mode="free").mode == "free")
    assert ChatConfig().desc_format == "triples" and ChatConfig(kind="scene").desc_format == "csv"


def test_triples_evidence_spells_out_names():
    import pandas as pd

    from gr_core.data import TextualGraph
    from gr_core.g_retriever.textualize import textualize_triples

    g = TextualGraph(pd.DataFrame({"node_id": [0, 1, 2], "node_attr": ["The Matrix", "Lana Wachowski", "Alone"]}),
                     pd.DataFrame({"src": [0], "edge_attr": ["directed_by"], "dst": [1]}))
    assert textualize_triples(g) == "The Matrix | directed_by | Lana Wachowski\nAlone\n"


def test_long_names_are_cut_without_eos_and_a_follow_up_may_answer_with_carried_nodes(tiny_llm_dir):
    from gr_core.chat.ranking import score_names

    chat = GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir, answer_mode="ranked", calibrate=True)
    turn = chat.retrieve("Who starred in The Matrix?")
    batch = chat._prompt_batch(turn)
    n = len(chat.llm.tokenizer("Keanu Reeves", add_special_tokens=False)["input_ids"])
    exact, _ = score_names(chat.llm, batch, ["Keanu Reeves"], max_name_tokens=n)  # exactly the cap: EOS kept
    assert np.isclose(exact[0], _full_log_likelihood(chat.llm, batch, "Keanu Reeves"), atol=1e-4)
    cut, lengths = score_names(chat.llm, batch, ["Keanu Reeves"], max_name_tokens=n - 1)  # cut: no EOS term
    assert lengths.tolist() == [n - 1] and cut[0] != exact[0]
    with pytest.raises(ValueError, match="no token"):
        score_names(chat.llm, batch, ["Keanu Reeves"], max_name_tokens=0)
    first = chat.ask("Which films did Tom Hanks star in?")  # calibrated scoring runs end to end
    assert first.mode == "ranked" and first.candidates
    chat.history[-1].answer_nodes = [dict(zip(chat.graph.nodes.node_attr, chat.graph.nodes.node_id))["Big"]]
    follow = chat.ask("and which of them did Penny Marshall direct?")
    names = {c["name"] for c in follow.candidates}
    assert follow.follow_up and "Big" in names and "Penny Marshall" not in names  # carried: allowed; named: not
