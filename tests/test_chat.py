"""Chat with your graph: reading graphs, linking, the turn's steps, follow-ups, bad input, the LLM modes, the CLI."""
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch

from gr_core.chat import (ChatConfig, ChatIndex, GraphChat, Turn, candidates_table, find_checkpoint,
                          graph_from_triple_list, read_graph_csv, read_triples, turns_table, write_evidence,
                          write_triples)
from gr_core.chat.index import name_key
from gr_core.chat.link import find_names, link_question, masked, names_the_graph, partial_match, unknown_brackets
from gr_core.config import TextEncoderConfig
from gr_core.data import GraphFormatError
from gr_core.kg import NeighbourhoodConfig
from gr_core.text_encoder import EmbeddingStore, shared_text_encoder

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


def test_triples_as_spreadsheets_and_users_write_them(tmp_path):
    quoted = _write(tmp_path / "q.tsv", 'subject\tverb\tobject\n"Charles Babbage"\t"designed"\t"Analytical Engine"\t\n'
                                       'Ada\twrote about\tThe "Engine"\n')
    assert read_triples(quoted) == [("Charles Babbage", "designed", "Analytical Engine"),  # a header, quotes, a tab
                                    ("Ada", "wrote about", 'The "Engine"')]
    mixed = _write(tmp_path / "m.csv", 'AC|DC,genre,Hard rock\nBjörk, genre, "pop, art"\r\n')
    assert read_triples(mixed) == [("AC|DC", "genre", "Hard rock"), ("Björk", "genre", "pop, art")]
    joined = _write(tmp_path / "j.tsv", "head\trelation\ttail\na\tr\tb\nHead\tRelation\tTail\nc\tr\td\n")
    assert read_triples(joined) == [("a", "r", "b"), ("c", "r", "d")]  # two files concatenated: the header repeated
    tabbed = _write(tmp_path / "tab.csv", '"x\ty",r,"z\tw"\ra,s p o,b\r')  # tabs in quoted CSV fields; CR ends lines
    assert read_triples(tabbed) == [("x\ty", "r", "z\tw"), ("a", "s p o", "b")]
    written = [("David Bowie", "recorded", '"Heroes"'), ("s", "r", "t"), ("Source", "property", "Target"),
               ("a", "says", '"hi" "there"'), ("#MeToo", "started_by", "Tarana Burke"), (" a", "r", "b "),
               ("head", "relation", "tail")]
    assert read_triples(write_triples(written, tmp_path / "w.tsv")) == written  # written triples read back unchanged
    assert read_triples(write_triples(iter(written), tmp_path / "g.tsv")) == written  # a generator is read once
    for bad, message in (([], "no triple to write"), ([(1, "r", "c")], "writes text fields")):
        with pytest.raises(ValueError, match=message):
            write_triples(bad, tmp_path / "bad.tsv")
    odd = _write(tmp_path / "o.tsv", "Form\x0cfeed\tis\tkept\n")
    assert read_triples(odd) == [("Form\x0cfeed", "is", "kept")]  # a line ends at \n only
    tagged = _write(tmp_path / "t.tsv", "# head\trelation\ttail\n#MeToo\tstarted_by\tTarana Burke\n"
                                       '"#MeToo"\tnamed\tmovement\n# a note\tin\tprose\n')
    with pytest.warns(UserWarning, match="1 line.* starting with '#' hold three fields .* line 2"):
        assert read_triples(tagged) == [("#MeToo", "named", "movement")]


def test_the_evidence_of_the_first_turn_that_found_some_is_written_as_a_triples_file(tmp_path):
    # notebook 09 wrote the first turn's evidence: an unrelated first question, or a name with a line break, failed it
    chat = GraphChat([("Nineteen\nEighty-Four", "written_by", "George Orwell"), ("Animal Farm", "written_by",
                                                                                "George Orwell")], model="zero_shot")
    unrelated = chat.ask("How do I reset my wifi router?")
    with pytest.raises(ValueError, match="no turn found evidence"):
        write_evidence([unrelated], tmp_path / "none.tsv")
    turns = [unrelated, chat.ask("What did George Orwell write?")]
    assert not turns[0].triples() and turns[1].triples()
    written = read_triples(write_evidence(turns, tmp_path / "mine.tsv"))
    assert ("Nineteen Eighty-Four", "written_by", "George Orwell") in written


def test_triple_lists_and_table_pairs_refuse_empty_or_malformed_fields(tmp_path):
    assert graph_from_triple_list([("Up", "release_year", 2009)]).triples() == [("Up", "release_year", "2009")]
    with pytest.warns(UserWarning, match="1 repeated triple"):
        assert len(graph_from_triple_list([("a", "r", "b"), ("c", "r", "b"), (" a", "r", "b ")]).edges) == 2
    as_rows = pd.DataFrame({"s": ["Up", "Big"], "p": ["directed_by"] * 2, "o": ["Pete Docter", "Penny Marshall"]})
    for triples in (as_rows, as_rows.to_numpy(), (tuple(r) for r in as_rows.to_numpy())):
        assert graph_from_triple_list(triples).triples() == [("Up", "directed_by", "Pete Docter"),
                                                             ("Big", "directed_by", "Penny Marshall")]
    for triples, message in (([("a", "b")], "triple 0: expected"), ([("a", "b", "c"), ("d", " ", "f")],
                             "triple 1: field 'relation' is empty"), ([("a", None, "c")], "field 'relation' must be"),
                             ([("a", "r", float("nan"))], "field 'tail' must be text, got nan")):
        with pytest.raises(GraphFormatError, match=message):
            graph_from_triple_list(triples)
    nodes = _write(tmp_path / "nodes.csv", "node_id,node_attr\n0,cube\n1,\n")
    edges = _write(tmp_path / "edges.csv", "src,edge_attr,dst\n0,left of,1\n")
    with pytest.raises(GraphFormatError, match="nodes.csv:3: field 'node_attr' is empty"):
        read_graph_csv(nodes, edges)
    with pytest.raises(GraphFormatError, match=r"my,kg.tsv: no such file \(nor the table pair"):
        GraphChat(str(tmp_path / "my,kg.tsv"))


@pytest.mark.parametrize("text, message", [
    ("a\tb\tc\nd\te\n", "kg.tsv:2: expected 3 fields"),
    ("a\tb\tc\nd\t\tf\n", "kg.tsv:2: field 'relation' is empty"),
    ("no delimiter here\n", "kg.tsv:1: cannot tell the delimiter"),
    ("\n# only a comment\n", "kg.tsv: no triple found"),
    ('a,b,c\nThe Matrix,directed_by,"Lana Wachowski\n', "kg.tsv:2: a quoted field is not closed"),
])
def test_malformed_triples_files_name_the_file_and_line(tmp_path, text, message):
    path = _write(tmp_path / "kg.tsv", text)
    with pytest.raises(GraphFormatError, match=message):
        read_triples(path)


def test_spaces_around_closed_csv_quotes_are_read(tmp_path):
    for line in ('a,b,"c" ', 'a,"b" ,c', '"a" ,b,c'):
        assert read_triples(_write(tmp_path / "kg.csv", f"h,r,t\n{line}\n")) == [("a", "b", "c")], line


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
    _write(tmp_path / "comma.csv", "node_id,node_attr\n0,Smith, John\n1,sphere\n")
    with pytest.raises(GraphFormatError, match="comma.csv:2: 3 fields, the header has 2"):
        read_graph_csv(tmp_path / "comma.csv", edges)  # an unquoted comma no longer cuts the name silently
    trailing = _write(tmp_path / "trailing.csv", "node_id,node_attr\n0,cube,\n1,sphere,,\n")  # a spreadsheet's export
    assert read_graph_csv(trailing, edges).triples() == [("cube", "left of", "sphere")]
    _write(tmp_path / "huge.csv", "node_id,node_attr\n99999999999999999999,cube\n")
    with pytest.raises(GraphFormatError, match="huge.csv:2: field 'node_id' = 99999999999999999999 is out of"):
        read_graph_csv(tmp_path / "huge.csv", edges)
    both = _write(tmp_path / "both.csv",
                  "node_id,node_attr,src,edge_attr,dst\n0,cube,0,touches,1\n1,sphere,1,touches,0\n")
    assert read_graph_csv(both, both).triples() == [("cube", "touches", "sphere"), ("sphere", "touches", "cube")]


# ---------------------------------------------------------------------- index and linking
def test_opening_a_chat_loads_its_encoder_so_that_no_turn_does():
    shared_text_encoder.cache_clear()  # as in a new process
    chat = GraphChat(MOVIES, model="zero_shot")
    assert shared_text_encoder.cache_info().currsize == 1  # loaded while opening (2-3 s once a process: docs/chat.md)
    loaded = shared_text_encoder.cache_info().misses
    assert chat.ask("Who directed The Matrix?").answer == "Lana Wachowski"
    assert shared_text_encoder.cache_info().misses == loaded  # the turn loaded none
    typo = chat.ask("Who directed [The Matrx]?")  # a bracketed name that names no node is said
    assert typo.note.startswith("no node is named [The Matrx]")
    assert chat.ask("Who directed [Up] or [Bgi]?").note.startswith("no node is named [Bgi]")
    assert EmbeddingStore(TextEncoderConfig()).encoder is chat.encoder  # indexing a new graph loads no second copy


@pytest.fixture(scope="module")
def movie_index():
    return ChatIndex.build(graph_from_triple_list(MOVIES))


@pytest.mark.data
def test_a_metaqa_entity_spec_opens_its_two_hop_neighbourhood_and_an_unknown_name_is_refused():
    from gr_core.chat.graphs import load_graph
    from gr_core.datasets import load_metaqa_kb

    graph, kind = load_graph("metaqa:Forrest Gump")
    kg, names = load_metaqa_kb(), graph.nodes.node_attr.tolist()
    fg = kg.entity_id["Forrest Gump"]
    one_hop = {kg.entities[n] for n in kg.incidences(np.array([fg]))[0]}
    assert kind == "kg" and graph.graph_id == "metaqa:Forrest Gump" and names[0] == "Forrest Gump"
    assert (len(graph.nodes), len(graph.edges)) == (458, 835)  # the chat's own scope (2 hops, hubs of 200 kept whole)
    assert one_hop <= set(names) and len(names) == len(set(names)) < kg.num_entities
    kb = set(zip(kg.heads.tolist(), kg.rels.tolist(), kg.tails.tolist()))
    for s, r, d in graph.edges[["src", "edge_attr", "dst"]].itertuples(index=False):  # every edge is a KB fact
        assert (kg.entity_id[names[s]], kg.relations.index(r), kg.entity_id[names[d]]) in kb
    with pytest.raises(ValueError, match="no entity named 'forrest gump'"):
        load_graph("metaqa:forrest gump")


def test_index_keeps_names_and_links_written_entities(movie_index, tmp_path, monkeypatch):
    idx = movie_index
    assert idx.num_nodes == 16 and idx.num_edges == len(MOVIES)
    assert idx.node_emb.shape == (16, 384) and np.allclose(np.linalg.norm(idx.node_emb, axis=1), 1, atol=1e-5)
    assert set(idx.phrase_emb) == {"directed by", "starred actors", "release year", "has genre"}
    names = lambda rows: [idx.kg.entities[r] for r in rows]  # noqa: E731
    assert names(find_names(idx, "who directed the matrix?")) == ["The Matrix"]
    assert names(find_names(idx, "Which films did Keanu Reeves and Tom Hanks star in")) == ["Keanu Reeves", "Tom Hanks"]
    # in a question with capitals, one-word names only when written capitalized or with a digit: "big" and "up" in
    # prose are words, not the films (a capital on the first word alone is sentence case: below)
    assert names(find_names(idx, "How big is the cast of Speed, what is up")) == ["Speed"]
    assert names(find_names(idx, "Who directed Up?")) == ["Up"]
    assert names(find_names(idx, "what about [Big]")) == ["Big"]
    assert names(find_names(idx, "Which film came out in 1999?")) == ["1999"]
    # a name in quotes is capitalized all the same (its first letter after the quote)
    assert names(find_names(idx, "Who directed 'Speed'?")) == ["Speed"]
    assert names(find_names(idx, "Who directed ‘Up’ and 'Big'?")) == ["Up", "Big"]
    assert names(partial_match(idx, "Who acted in 'Matrix'?")[0]) == ["The Matrix"]
    # a question without any capital letter cannot say which words are names: one-word names link only where no
    # longer name does
    assert names(find_names(idx, "who directed up")) == ["Up"] and names(find_names(idx, "was tom hanks in big")) == \
        ["Tom Hanks"]
    assert names(find_names(idx, "who directed up", uncased=False)) == []
    # accents, an abbreviation's period, an apostrophe or a possessive do not keep a name from linking
    assert name_key("Hugo Chávez") == name_key("hugo chavez") == "hugo chavez"
    assert name_key("George W. Bush") == name_key("george w bush") and name_key("Shays' Rebellion") == "shays rebellion"
    assert names(find_names(idx, "Who directed Keanu Reeves's films?")) == ["Keanu Reeves"]
    accented = ChatIndex.build(graph_from_triple_list([("Hugo Chávez", "born in", "Sabaneta"), ("Team", "has", "x")]))
    assert [accented.kg.entities[r] for r in find_names(accented, "where was hugo chavez born")] == ["Hugo Chávez"]
    # in a question with capitals, a name in part is looked up by its capitalized words only: not the node "Team"
    heskey = ChatIndex.build(graph_from_triple_list([("Emile Heskey", "plays for", "Aston Villa"),
                                                     ("Team", "member", "Emile Heskey")]))
    rows, shared, size = partial_match(heskey, "What team does Heskey play for?")
    assert [heskey.kg.entities[r] for r in rows] == ["Emile Heskey"] and (shared, size) == (1, 2)
    # the words after "what" ask for the answer's kind, but not where they are all the question says
    assert [heskey.kg.entities[r] for r in partial_match(heskey, "what inspired heskey")[0]] == ["Emile Heskey"]
    # the words asking for the answer's kind ("what language", "what type of music") link no name: the answer
    # "Maasai language" shares two words with the question, the entity "Maasai people" one
    maasai = ChatIndex.build(graph_from_triple_list([("Maasai people", "languages spoken", "Maasai language"),
                                                     ("Mozart", "genre", "Chamber music"), ("Country", "x", "Kenya")]))
    rows, shared, size = partial_match(maasai, "what language do the maasai tribe speak")
    assert [maasai.kg.entities[r] for r in rows] == ["Maasai people"] and (shared, size) == (1, 2)
    assert [maasai.kg.entities[r] for r in find_names(maasai, "what type of music did mozart compose")] == ["Mozart"]
    assert [maasai.kg.entities[r] for r in find_names(maasai, "what country borders kenya")] == ["Kenya"]
    assert [maasai.kg.entities[r] for r in find_names(maasai, "which country borders Kenya")] == ["Kenya"]
    # a name in part covers its content words: "the united states" covers "United States of America" as much as
    # "United States Senator", and the node of higher degree takes it
    usa = ChatIndex.build(graph_from_triple_list([("United States of America", "capital", "Washington, D.C."),
                                                  ("United States of America", "currency", "United States dollar"),
                                                  ("Barack Obama", "office", "United States Senator")]))
    rows, shared, size = partial_match(usa, "what form of government does the united states use")
    assert [usa.kg.entities[r] for r in rows] == ["United States of America"] and (shared, size) == (2, 4)
    again = ChatIndex.build(graph_from_triple_list(MOVIES))
    assert again.cached and again.digest == idx.digest
    # one fact's relation changed: another graph, indexed anew (the cache is keyed by the graph's content)
    monkeypatch.setenv("GR_CACHE_DIR", str(tmp_path))
    assert ChatIndex.build(graph_from_triple_list(MOVIES)).cached is False  # an empty cache: built
    edited = ChatIndex.build(graph_from_triple_list(MOVIES[:-1] + [("Up", "written_by", "Pete Docter")]))
    assert not edited.cached and edited.digest != idx.digest and "written_by" in edited.kg.relations
    assert ChatIndex.build(graph_from_triple_list(MOVIES)).cached  # the unedited one is still found
    # two graphs whose columns, run together, read alike ("0", "51" then "Alice Walker" against "0", "5" then
    # "1Alice Walker") are two indexes: one had served the other's names and ids
    one = tmp_path / "one_nodes.csv"
    one.write_text("node_id,node_attr\n0,Alice Walker\n51,Bob Stone\n")
    two = tmp_path / "two_nodes.csv"
    two.write_text("node_id,node_attr\n0,1Alice Walker\n5,Bob Stone\n")
    edges = tmp_path / "edges.csv"
    edges.write_text("src,edge_attr,dst\n0,knows,0\n")
    first = ChatIndex.build(read_graph_csv(one, edges))
    second = ChatIndex.build(read_graph_csv(two, edges))
    assert first.digest != second.digest and not second.cached
    assert second.kg.entities == ["1Alice Walker", "Bob Stone"] and second.node_ids.tolist() == [0, 5]


def test_long_names_and_names_of_common_words_link_where_written():
    title = "A Very Long Paper Title About Deep Learning For Program Repair In The Wild With Many Words"  # 16 words
    kg = GraphChat([(title, "written_by", "Ada Lovelace"), ("Deep Learning", "written_by", "Ian Goodfellow"),
                    ("Her", "directed_by", "Spike Jonze"), ("The Actress", "directed_by", "George Cukor"),
                    ("All of Me", "has_genre", "Comedy"), ("Forrest Gump", "directed_by", "Robert Zemeckis"),
                    ("Acme Corp", "best_quarter", "Q3"), ("Acme Corp", "worst_quarter", "Q1"),
                    ("Q3", "revenue", "5 million"), ("What?", "has_genre", "Comedy"),
                    ("Forrest Gump", "has_genre", "Drama"), ("Forrest Gump", "release_year", "1994"),
                    ("Star", "has_genre", "Drama")], model="zero_shot")
    names = lambda q: [kg.index.kg.entities[r] for r in find_names(kg.index, q)]  # noqa: E731
    assert names(f"Who wrote {title}?") == [title]  # not the shorter name inside it
    assert kg.ask(f"Who wrote {title}?").answer == "Ada Lovelace"
    # a name of function words capitalized after the first word is the film; not so in a headline or all capitals
    assert names("Who directed Her?") == ["Her"] and names("What genre is All of Me?") == ["All of Me"]
    assert names("WHO DIRECTED HER") == [] and names("Who directed her?") == []
    # a capital starting a sentence marks no name ("What?" is a film here), nor does a film word ("Star")
    assert names("Quick question: What genre is Forrest Gump?") == ["Forrest Gump"]
    assert names("Who was the biggest Star in Forrest Gump?") == ["Forrest Gump"]
    kg.reset()
    kg.ask("Who directed Forrest Gump?")
    turn = kg.ask("Who directed Her?")  # the film, not a pronoun pointing back at the last turn
    assert not turn.follow_up and turn.answer == "Spike Jonze"
    assert kg.ask("and what genre is it?").follow_up
    kg.reset()
    kg.ask("Who directed Forrest Gump?")
    turn = kg.ask("OK. What year was it released?")  # "What" starts a sentence: the pronoun points back
    assert turn.follow_up and turn.answer == "1994"
    kg.reset()  # "Q" and digits are names, not Wikidata ids that never answer
    assert kg.ask("What was Acme Corp's best quarter?").answer == "Q3"
    with pytest.raises(ValueError, match=r"ask.mode='bogus' is not one of"):
        kg.ask("Who directed Her?", mode="bogus")
    with pytest.raises(ValueError, match=r"ask\(mode='reasoner'\) needs a reasoner"):
        kg.ask("Who directed Her?", mode="reasoner")
    assert kg.ask("Who directed Her?", mode="auto").mode == "paths"


def test_a_name_written_without_its_end_is_the_longer_name_not_a_shorter_one_inside_it():
    chat = GraphChat([("Martin Luther", "religion", "Lutheranism"), ("Martin Luther King, Jr.", "died_in", "Memphis"),
                      ("Martin Luther King, Jr. Day", "honours", "Martin Luther King, Jr."),
                      ("Martin Luther King III", "child_of", "Martin Luther King, Jr.")], model="zero_shot")
    names = lambda q: [chat.index.kg.entities[r] for r in find_names(chat.index, q)]  # noqa: E731
    assert names("what town was martin luther king assassinated in") == ["Martin Luther King, Jr."]  # the shortest
    assert names("Where did Martin Luther King die?") == ["Martin Luther King, Jr."]
    assert names("What religion did Martin Luther found?") == ["Martin Luther"]
    assert names("Did Martin Luther have a king?") == ["Martin Luther"]  # a function word ends it; "king" lowercase
    assert names("Did Martin Luther King meet Martin Luther at home?") == ["Martin Luther King, Jr.", "Martin Luther"]
    assert chat.ask("what town was martin luther king assassinated in").answer == "Memphis"


def test_a_name_with_a_hyphen_is_written_whole_without_it():
    chat = GraphChat([("Vera-Ellen", "cause_of_death", "Cancer"), ("Spider-Man 2", "directed_by", "Sam Raimi"),
                      ("Spider", "is_a", "Animal"), ("Speed", "has_tags", "Non-Stop"), ("Speed", "has_tags", "Sci-Fi"),
                      ("Harrison Ford", "starred_in", "Blade Runner"), ("Blade Runner", "has_tags", "Sci-Fi")],
                     model="zero_shot")
    names = lambda q: [chat.index.kg.entities[r] for r in find_names(chat.index, q)]  # noqa: E731
    assert names("what did vera ellen die from") == ["Vera-Ellen"]
    # a one-word name typed without its hyphen keeps the one-word rules: capitalized mid-sentence, else kept aside
    assert names("Who starred in the non stop thriller Speed?") == ["Speed"]
    assert names("What sci fi movies did Harrison Ford star in?") == ["Harrison Ford"]
    assert names("Is Speed a Non Stop film") == ["Speed", "Non-Stop"]
    assert names("Who directed Spider Man 2?") == ["Spider-Man 2"] == names("who directed spider-man 2")
    assert link_question(chat.index, "who directed spider man 2").masked == "who directed it"
    assert names("who directed [spider man 2]") == ["Spider-Man 2"]
    assert not unknown_brackets(chat.index, "who directed [spider man 2]")
    assert chat.ask("who directed spider man 2").answer == "Sam Raimi"


def test_names_equal_but_for_accents_are_one_entity_and_candidates_score_as_the_answer():
    chat = GraphChat([("José", "born_in", "Madrid"), ("Jose", "born_in", "Lima"), ("Tom Hanks", "acted_in", "Big"),
                      ("Big", "directed_by", "Penny Marshall"), ("Meg Ryan", "acted_in", "Sleepless"),
                      ("Sleepless", "directed_by", "Nora Ephron")], model="zero_shot")
    turn = chat.ask("Where was Jose born?")  # both nodes of the name, as linking reads them: no entity left out
    assert set(turn.answer.split(" | ")) == {"Madrid", "Lima"}
    chat.reset()
    turn = chat.ask("Who directed the film of Tom Hanks and Meg Ryan?")  # no path meets: one path leaves one out
    table = candidates_table(turn)
    assert table[table.chosen].score.min() >= table[~table.chosen].score.max()  # the chosen ones score highest


def test_turn_views_replace_an_earlier_call_s(tmp_path):
    from gr_core.chat.turns import show_turns

    chat = GraphChat([("Forrest Gump", "directed_by", "Robert Zemeckis")], model="zero_shot")
    for name in ("turn1.html", "turn1.png", "turn7.png", "notes.txt"):
        (tmp_path / name).write_text("from an earlier conversation")
    show_turns([chat.ask("Who directed Forrest Gump?"), chat.ask("What is the weather today?")], tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "turn0.html", "turn0.png"]


def test_an_answer_cut_to_max_answers_says_how_many_more_the_path_reaches():
    chat = GraphChat([(f"Person {i}", "lives_in", "Hub City") for i in range(10)], model="zero_shot")
    turn = chat.ask("Who lives in Hub City?")
    assert len(turn.answer.split(" | ")) == 3 and turn.note.startswith("7 more nodes the same path reaches")
    assert "note: 7 more nodes" in str(turn) and len(turn.candidates) == 10


def test_the_question_is_read_with_its_entities_written_it():
    accented = ChatIndex.build(graph_from_triple_list([("Hugo Chávez", "born in", "Sabaneta")]))
    hugo = find_names(accented, "where was hugo chavez born")
    assert masked(accented, "where was hugo chavez born", hugo) == "where was it born"
    assert masked(accented, "where was [Hugo Chávez] born?", hugo) == "where was it born?"
    assert masked(accented, "is hugo chavez older than hugo chavez's son", hugo) == "is it older than it's son"
    bush = ChatIndex.build(graph_from_triple_list([("George W. Bush", "spouse", "Laura Bush")]))
    george = find_names(bush, "george w bush")
    assert masked(bush, "who is george w bush married to", george) == "who is it married to"
    assert masked(bush, "who is the wife of george w bush.", george) == "who is the wife of it."
    both = find_names(bush, "[George W. Bush] [Laura Bush]")
    assert masked(bush, "what did george bush and laura bush do", both) == "what did it and it do"
    # a name written in part: one "it" for the words it shares, joined across stop words
    rings = ChatIndex.build(graph_from_triple_list([("The Lord of the Rings", "written by", "J. R. R. Tolkien")]))
    link = link_question(rings, "who wrote lord of the rings")
    assert link.masked == "who wrote it" and link.in_part == (2, 5)
    # a node the question does not write is masked only where written literally
    usa = ChatIndex.build(graph_from_triple_list([("United States of America", "borders", "Canada")]))
    assert masked(usa, "which states border it?", usa.rows_of(usa.node_ids), written=[]) == "which states border it?"


CLUBS = [("lionel_messi", "plays_in_club", "fc_barcelona"), ("lionel_messi", "is_born_in", "rosario"),
         ("neymar", "plays_in_club", "fc_barcelona"), ("neymar", "is_born_in", "mogi_das_cruzes"),
         ("fc_barcelona", "based_in", "barcelona"), ("m.0b_x1", "is_born_in", "rosario")]


def test_underscores_join_a_names_words_and_a_second_entity_without_capitals_is_paired(monkeypatch):
    idx = ChatIndex.build(graph_from_triple_list(CLUBS))
    names = lambda rows: [idx.kg.entities[r] for r in rows]  # noqa: E731
    assert name_key("Lionel_Messi") == "lionel messi" and name_key("m.0b_x1") == "m.0b_x1"  # an identifier: one word
    assert names(find_names(idx, "where was [m.0b_x1] born")) == ["m.0b_x1"]  # ... in the question too
    for q in ("where is the club of lionel_messi based", "where is the club of Lionel Messi based"):
        link = link_question(idx, q)
        assert names(link.named) == ["lionel_messi"] and link.masked == "where is the club of it based"
    # a question without capitals: the one-word "rosario" beside the longer "fc barcelona" is kept aside, unmasked
    q = "which player plays in fc barcelona and is born in rosario?"
    link = link_question(idx, q)
    assert names(link.named) == ["fc_barcelona"] and names(link.also) == ["rosario"]
    assert link.masked == "which player plays in it and is born in rosario?"
    chat = GraphChat(CLUBS, model="zero_shot")
    turn = chat.ask(q)  # answered where the two meet, not by every player of the club
    assert turn.answer == "lionel_messi" and [p.split(":")[0] for p in turn.paths] == ["fc_barcelona", "rosario"]
    chat.reset()
    assert set(chat.ask("which players play in fc barcelona?").answer.split(" | ")) == {"lionel_messi", "neymar"}
    # a capital on the first word only is sentence case, not a name: read as a question without capitals
    sentence = "Who plays in fc barcelona and was born in rosario?"
    assert names(link_question(idx, "Where was neymar born?").named) == ["neymar"]
    assert names(link_question(idx, sentence).also) == ["rosario"]
    chat.reset()
    assert chat.ask(sentence).answer == "lionel_messi"
    import gr_core.chat.link as chat_link
    monkeypatch.setattr(chat_link, "UNCASED_PAIRS", False)
    monkeypatch.setattr(chat_link, "SENTENCE_CASE", False)
    chat.reset()
    assert chat.ask(q).paths[0].startswith("fc_barcelona") and not link_question(idx, q).also
    assert not link_question(idx, sentence).also and not link_question(idx, "Where was neymar born?").named


def test_a_graph_without_nodes_is_refused():

    from gr_core.data import TextualGraph

    empty = TextualGraph(pd.DataFrame({"node_id": [], "node_attr": []}),
                         pd.DataFrame({"src": [], "edge_attr": [], "dst": []}))
    with pytest.raises(GraphFormatError, match="no node"):
        ChatIndex.build(empty)


# ---------------------------------------------------------------------- the default: relation paths, no model
def test_a_kg_is_answered_by_the_relation_paths_its_words_name_without_any_model(tiny_llm_dir):
    chat = GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir)
    assert chat.mode == "paths"
    turn = chat.ask("Who directed The Matrix?")
    assert turn.answer == "Lana Wachowski" and turn.model == "relation paths (no model)" and chat._llm is None
    assert turn.paths == ["The Matrix: directed by (" + turn.paths[0].split("(")[1]]
    assert ("The Matrix", "directed_by", "Lana Wachowski") in turn.triples() and turn.answer_nodes
    assert {"link", "paths", "total"} <= set(turn.timings) and turn.about == "named"  # "The Matrix": capitalized
    ids = dict(zip(chat.graph.nodes.node_attr, chat.graph.nodes.node_id))
    follow = chat.ask("and who starred in it?")  # "it": the previous start (The Matrix), not its answer
    assert follow.follow_up and follow.answer == "Keanu Reeves" and follow.reasoner_seeds == [ids["The Matrix"]]
    chat.reset()
    films = chat.ask("Which films did Keanu Reeves star in?")
    assert set(films.answer.split(" | ")) == {"The Matrix", "John Wick", "Speed"}
    them = chat.ask("and who directed them?")  # the previous answers, followed together (never intersected)
    assert set(them.answer.split(" | ")) == {"Lana Wachowski", "Chad Stahelski", "Jan de Bont"}
    record = json.loads(json.dumps(them.to_dict()))
    assert record["evidence_triples"] and record["question"] == "and who directed them?"
    # Freebase-style relation names are read by their last two segments: one pipeline for every KG
    schema = GraphChat([(h, f"film.film.{r}", t) for h, r, t in MOVIES], model="zero_shot", llm_model=tiny_llm_dir)
    assert schema.mode == "paths" and schema.ask("Who directed The Matrix?").answer == "Lana Wachowski"


def test_the_relevance_gate_and_the_links_that_make_a_question_about_the_graph(tiny_llm_dir):
    chat = GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir)
    ids = dict(zip(chat.graph.nodes.node_attr, chat.graph.nodes.node_id))
    turn = chat.ask("who directed up")  # typed without capitals: "up" is the only name it can mean
    assert turn.linked == [ids["Up"]] and turn.answer == "Pete Docter"
    chat.reset()
    part = chat.ask("which films did wachowski direct")  # a name in part links where no whole name does
    assert part.linked == [ids["Lana Wachowski"]] and set(part.answer.split(" | ")) == {"The Matrix", "Cloud Atlas"}
    follow = chat.ask("and who starred in them?")  # from the last answer: no name of the question looked up in part
    assert follow.follow_up and follow.about == "follow-up"
    assert set(follow.reasoner_seeds) == {ids["The Matrix"], ids["Cloud Atlas"]}
    chat.reset()  # two words and half of a name make a question about the graph; one word ("bont") does not
    assert chat.ask("where was jan bont born").about == "in part"
    assert chat.ask("where was bont born").status == "unrelated"
    # a one-word name makes it so only for the graph's hub (The Matrix: degree 4), not for another node (Speed)
    assert chat.ask("is the matrix any good").about == "hub"
    assert chat.ask("is speed any good").status == "unrelated"
    chat.reset()  # written with a capital after the first word, a one-word name is a proper noun: named
    assert chat.ask("Is Speed any good?").about == "named" and chat.ask("Speed, any good?").status == "unrelated"
    assert chat.ask("which films did lana wachowski direct").about == "named"
    assert chat.ask("Is the speedometer broken?").status == "unrelated"  # "speed" is not a word of it
    assert chat.ask("how do i reset my wifi router").status == "unrelated"
    chat.reset()
    chat.ask("Who directed Big?")
    follow = chat.ask("and who starred in it, up or down")  # a follow-up links no lowercase one-word name ("up")
    assert follow.follow_up and ids["Up"] not in follow.linked
    assert not link_question(chat.index, "Who directed Speed?", chat.history[-1]).follow_up  # no pronoun


def test_no_gpu_refuses_cuda_and_the_command_line_reports_a_model_that_fails_to_load(tmp_path, capsys, monkeypatch):
    from gr_core.chat import conversation
    from gr_core.chat.cli import main

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="device='cuda': this torch sees no GPU"):  # before any work
        GraphChat(MOVIES, device="cuda")

    def no_model(*args, **kwargs):
        raise OSError("someone/model is not in the cache")

    monkeypatch.setattr(conversation, "load_answerer", no_model)
    kg = _write(tmp_path / "kg.tsv", "".join(f"{h}\t{r}\t{t}\n" for h, r, t in MOVIES))
    assert main(["--triples", str(kg), "--answer-mode", "free", "Who directed The Matrix?"]) == 2
    printed = capsys.readouterr()
    assert "someone/model is not in the cache" in printed.err and "graph:" not in printed.out  # before the chat opens


def test_empty_unrelated_and_edgeless_inputs_get_sensible_turns(tiny_llm_dir):
    chat = GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir, max_new_tokens=8)
    empty = chat.ask("   ")
    assert empty.status == "empty_question" and "empty" in empty.note and chat._llm is None and chat.history == []
    with pytest.raises(TypeError, match="must be a str"):
        chat.ask(42)
    with pytest.raises(TypeError, match="list of questions"):
        chat.ask_many("Who directed Speed?")  # not one turn per character
    for nothing in (None, "", " "):
        with pytest.raises(ValueError, match="give a graph spec"):
            GraphChat(nothing)
    off = chat.ask("what is the boiling point of water at sea level?")
    assert off.status == "unrelated" and off.evidence is None and "similarity" in off.note and chat._llm is None
    assert (off.best_similarity < ChatConfig.relevance_threshold
            or off.best_relation_similarity < 0.18) and chat.history == []
    assert chat.ask("Who directed Speed?").status == "answered"  # a one-word title, asked with a relation of the graph
    open_gate = GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir, relevance_threshold=-1.0,
                          relation_threshold=-1.0)  # every similarity passes: only the words decide
    # no content word: such a question is near some node of a large graph by chance
    for noise in ("???", "the the the", "Who is it?", "What's that?"):
        turn = open_gate.ask(noise)
        assert turn.status == "unrelated" and "no word but function words" in turn.note, noise
    assert open_gate.ask("Who directed Speed?").status == "answered"

    from gr_core.data import TextualGraph

    lonely = TextualGraph(pd.DataFrame({"node_id": [0, 1, 2], "node_attr": ["Keanu Reeves", "The Matrix", "Speed"]}),
                          pd.DataFrame({"src": pd.Series([], dtype=int), "edge_attr": pd.Series([], dtype=str),
                                        "dst": pd.Series([], dtype=int)}))
    lonely_chat = GraphChat(lonely, model="zero_shot", llm_model=tiny_llm_dir, max_new_tokens=4)
    no_edges = lonely_chat.ask("Who is Keanu Reeves?")
    assert no_edges.status == "no_edges" and no_edges.evidence.num_edges == 0
    assert lonely_chat.mode == no_edges.mode == "ranked"  # the chat says the mode its turns answer in
    assert not names_the_graph(lonely_chat.index, [2])  # no edges, no hub: "Speed" is one word like any other
    assert 0 in set(no_edges.evidence.nodes.node_id) and isinstance(no_edges.answer, str)


def test_large_graphs_are_searched_in_the_neighbourhood_of_the_linked_entities(tiny_llm_dir):
    chat = GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir, max_new_tokens=4, whole_graph_edges=3,
                     scope=NeighbourhoodConfig(1, 200, 2000), link_k=0, answer_mode="ranked")
    turn = chat.ask("Who directed Speed?")
    assert turn.searched_nodes == 3 and turn.searched_edges == 2  # Speed, its actor, its director (1 hop)
    assert set(turn.evidence.nodes.node_attr) <= {"Speed", "Keanu Reeves", "Jan de Bont"}
    whole = GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir, answer_mode="ranked")
    assert whole.ask("Who directed Speed?").searched_edges == len(MOVIES)  # at most whole_graph_edges: all of it


# ---------------------------------------------------------------------- the LLM modes (a tiny random LLM: mechanics)
@pytest.fixture(scope="module", autouse=True)
def no_outputs(tmp_path_factory):
    """The LLM modes take a trained checkpoint from outputs/ with model="auto": these tests read an empty folder."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GR_OUTPUTS_DIR", str(tmp_path_factory.mktemp("no_outputs")))
        yield


@pytest.fixture(scope="module")
def chat(tiny_llm_dir):
    """The LLM-ranked chat."""
    return GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir, max_new_tokens=8, answer_mode="ranked")


def test_a_ranked_turn_returns_answer_evidence_checks_and_timings(chat):
    chat.reset()
    turn = chat.ask("Who directed The Matrix?")
    assert turn.status == "answered" and isinstance(turn.answer, str) and turn.model.startswith("zero-shot")
    ids = dict(zip(chat.graph.nodes.node_attr, chat.graph.nodes.node_id))
    assert turn.linked == [ids["The Matrix"]]
    assert ids["The Matrix"] in set(turn.evidence.nodes.node_id) and turn.evidence.num_edges >= 1
    assert ("The Matrix", "directed_by", "Lana Wachowski") in turn.triples()
    assert "The Matrix | directed_by | Lana Wachowski\n" in turn.desc  # a KG chat writes its evidence as lines
    assert {"link", "scope", "pcst", "answer", "total"} <= set(turn.timings)
    row = turns_table([turn]).iloc[0]  # the table's retrieval time is the evidence steps' (scope and PCST here)
    assert row["retrieval ms"] == round(1000 * (turn.timings["scope"] + turn.timings["pcst"]), 1) > 0
    assert chat.history == [turn]


def test_the_llm_ranks_only_the_names_its_prompt_holds(tiny_llm_dir):
    short = GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir, answer_mode="ranked", max_txt_len=12,
                      whole_graph_edges=100)
    turn = short.ask("Who starred in The Matrix?")  # the whole graph's evidence, cut to 12 tokens in the prompt
    tok = short.llm.tokenizer
    read = tok.decode(tok(turn.desc, add_special_tokens=False)["input_ids"][:12])
    names = [c["name"] for c in turn.candidates]
    assert names and all(n in read or n in turn.question for n in names)
    assert len(names) < len(set(turn.evidence.nodes.node_attr)) - 1  # the evidence holds more than the prompt


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
    small = GraphChat(MOVIES, model="zero_shot", llm_model=chat.llm_model, max_new_tokens=8, history_tokens=5)
    small.history, small._llm, small.model_name = list(chat.history), chat.llm, chat.model_name
    assert small.history_text() == ""  # the history budget drops old turns first


def test_citations_are_checked_and_answer_nodes_found(chat):
    from gr_core.chat.check import named_nodes
    from gr_core.citations import check_response

    chat.reset()
    turn = chat.ask("Who directed The Matrix?")
    answer = ("Lana Wachowski\nEdges:\n* The Matrix -> directed_by -> Lana Wachowski\n"
              "* The Matrix -> directed_by -> Bob")
    ids = dict(zip(chat.graph.nodes.node_attr, chat.graph.nodes.node_id))
    assert [c["normalized"] for c in check_response(answer, turn.scope)["citations"]] == [True, False]
    asked = chat.index.rows_of([ids["The Matrix"]])
    assert named_nodes(chat.index, answer, asked, turn.scope) == [ids["Lana Wachowski"]]
    said = "The Matrix was directed by Lana Wachowski, who also made Cloud Atlas."  # a sentence; not the question's own
    assert named_nodes(chat.index, said, asked, turn.scope) == [ids["Lana Wachowski"], ids["Cloud Atlas"]]


def test_a_given_reasoner_answers_with_its_candidates_and_paths(tmp_path, tiny_llm_dir):
    from gr_core.gnn_rag import ReaRev, ReasonerConfig, load_reasoner, save_reasoner

    with pytest.raises(ValueError, match="needs a reasoner.*or train_reasoner=True on a KG"):
        GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir, answer_mode="reasoner")
    with pytest.raises(ValueError, match="train_reasoner=True trains one on a KG only"):
        GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir, answer_mode="reasoner", kind="scene",
                  train_reasoner=True)
    with pytest.warns(UserWarning, match="no reasoner trained"), \
            pytest.raises(ValueError, match="train_reasoner trained none on this graph"):
        GraphChat([("Up", "directed_by", "Pete Docter")], model="zero_shot", llm_model=tiny_llm_dir,
                  answer_mode="reasoner", train_reasoner=True)  # too few facts to generate questions from
    with pytest.raises(ValueError, match="reads 16-d text embeddings"):
        GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir, reasoner=ReaRev(16))
    torch.manual_seed(0)
    path = save_reasoner(ReaRev(384, ReasonerConfig(entity_dim=8)), tmp_path / "r.pt", {"note": "untrained"})
    assert load_reasoner(path).cfg.entity_dim == 8
    chat = GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir, reasoner=path)
    assert chat.mode == "reasoner" and chat.decision is None  # given: served as asked
    turn = chat.ask("Who directed The Matrix?")
    ids = dict(zip(chat.graph.nodes.node_attr, chat.graph.nodes.node_id))
    assert turn.status == "answered" and turn.paths and "gnn" in turn.timings and turn.mode == "reasoner"
    assert all(line.startswith("The Matrix") for line in turn.paths) and turn.reasoner_seeds == [ids["The Matrix"]]
    assert turn.answer_nodes and set(turn.answer_nodes) <= set(chat.graph.nodes.node_id)
    follow = chat.ask("and who starred in it?")  # from the previous start or from its answer, never both at once
    assert follow.follow_up and set(follow.reasoner_seeds) in ({ids["The Matrix"]}, set(turn.answer_nodes))
    assert chat.ask("Who directed The Matrix?", mode="paths").answer == "Lana Wachowski"  # a turn's own mode


@pytest.mark.data
def test_checkpoints_are_found_by_kind_with_a_matching_hash_and_never_from_smoke(tmp_path):
    import torch

    from gr_core.g_retriever.train import make_run_config
    from gr_core.runs import config_hash, write_json

    cfg = make_run_config("metaqa", "g_retriever", 0)
    for preset, good, finished in (("smoke", True, True), ("quick", False, True), ("full", True, True),
                                   ("cpu", True, False)):
        run_dir = tmp_path / preset / "runs" / cfg.name
        write_json(run_dir / "config.json", {"name": cfg.name, **cfg.to_dict()})
        if finished:
            write_json(run_dir / "metrics.json", {"config_hash": config_hash(cfg.to_dict())})
        (run_dir / "ckpt").mkdir(parents=True)
        torch.save({"config_hash": config_hash(cfg.to_dict()) if good else "stale", "model": {}},
                   run_dir / "ckpt" / "best.pt")
    assert find_checkpoint("kg", tmp_path) == tmp_path / "full" / "runs" / cfg.name
    assert find_checkpoint("kg", tmp_path, presets=("quick",)) is None  # stale hash
    assert find_checkpoint("kg", tmp_path, presets=("cpu",)) is None  # a training not finished (no metrics.json)
    assert find_checkpoint("kg", tmp_path, llm_model="some/other-llm") is None
    assert find_checkpoint("scene", tmp_path) is None


def test_turn_view_colours_question_and_answer_nodes(chat, tmp_path, monkeypatch, capsys):
    chat.reset()
    turn = chat.ask("Who directed The Matrix?")
    turn.answer_nodes = [int(turn.evidence.nodes.node_id.iloc[-1])]
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    assert turn.show() and (tmp_path / "gr-evidence.html").is_file()  # outside a notebook: a file, its path printed
    assert f"written to {tmp_path / 'gr-evidence.html'}" in capsys.readouterr().out
    page = turn.show(out_html=tmp_path / "turn.html")
    assert "#2ca02c" in page and "#d62728" in page and "cdn.jsdelivr" not in page
    assert 'id="legend"' in page and "question entity" in page and '"label": "directed_by"' in page
    roles = turn.roles()
    assert roles[turn.linked[0]] == "question entity" and roles[turn.answer_nodes[0]] == "answer"
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


def test_the_command_line_refuses_a_bad_model_llm_reasoner_or_graph_in_one_line(tmp_path, capsys):
    from gr_core.chat.cli import main

    kg = _write(tmp_path / "kg.tsv", "".join(f"{h}\t{r}\t{t}\n" for h, r, t in MOVIES))
    not_a_reasoner = _write(tmp_path / "r.pt", "text")
    for args, message in ((["--model", "zeroshot"], "model='zeroshot' is not 'auto', 'zero_shot' or a training run"),
                          (["--llm", str(tmp_path / "nollm")], "nollm': no such folder here"),
                          (["--reasoner", str(tmp_path / "none.pt")], "none.pt': no such file"),
                          (["--reasoner", str(not_a_reasoner)], "is not a saved GNN-RAG reasoner"),
                          (["--max-new-tokens", "-3"], "ChatConfig.max_new_tokens=-3 must be >= 1")):
        assert main(["--triples", str(kg), "Who directed Up?", *args]) == 2, args
        assert message in capsys.readouterr().err, args
    assert main(["--graph", "bogus", "Who?"]) == 2
    assert "bogus: no such file, nor a graph name (metaqa, metaqa:<entity>" in capsys.readouterr().err
    # an empty path would be the current folder: refused where files are read, so by the library as by the CLI
    for args, message in ((["--triples", ""], "an empty path"), (["--csv", " ", str(kg)], "an empty path"),
                          (["--graph", ""], "give a graph spec")):
        assert main([*args, "Who directed Up?"]) == 2, args
        assert message in capsys.readouterr().err, args
    for read in (lambda: read_triples(""), lambda: read_graph_csv(" ", kg)):
        with pytest.raises(GraphFormatError, match="an empty path"):
            read()
    with pytest.raises(SystemExit) as stop:  # checked before any work, not when the turns are written
        main(["--triples", str(kg), "--json", str(tmp_path), "Who directed Up?"])
    assert stop.value.code == 2 and "--json" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_answers_a_triples_file_and_names_a_bad_line(tmp_path, tiny_llm_dir):
    kg = _write(tmp_path / "my_kg.tsv", "".join(f"{h}\t{r}\t{t}\n" for h, r, t in MOVIES))
    out = tmp_path / "turns.json"
    res = subprocess.run([sys.executable, "-m", "gr_core.chat", "--triples", str(kg), "--model", "zero_shot", "--llm",
                          tiny_llm_dir, "--json", str(out), "--cite", "Who directed The Matrix?",
                          "and who starred in it?"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "Q: Who directed The Matrix?" in res.stdout and "(The Matrix | directed_by | Lana Wachowski)" in res.stdout
    assert "answers: paths" in res.stdout and "A: Keanu Reeves" in res.stdout
    saved = json.loads(out.read_text())
    assert saved["turns"][0]["answer"] == "Lana Wachowski" and saved["turns"][1]["follow_up"]
    assert saved["meta"]["model"] == "relation paths (no model)" and "--cite asks the LLM" in res.stderr  # not ignored
    bad = _write(tmp_path / "bad.tsv", "a\tb\tc\nbroken line\twith two\n")
    res = subprocess.run([sys.executable, "-m", "gr_core.chat", "--triples", str(bad), "question"], capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 2 and "bad.tsv:2: expected 3 fields" in res.stderr


@pytest.mark.slow
@pytest.mark.data
def test_cli_chats_with_the_whole_metaqa_kb(tmp_path):
    # the quick preset's notebook 09 graph: 43k names indexed (about a minute), a turn searches a neighbourhood
    out = tmp_path / "turns.json"
    res = subprocess.run([sys.executable, "-m", "gr_core.chat", "--graph", "metaqa", "--json", str(out),
                          "Who directed Forrest Gump?", "and who starred in it?"], capture_output=True, text=True,
                         timeout=900)
    assert res.returncode == 0, res.stderr[-2000:]
    saved = json.loads(out.read_text())
    assert [t["answer"] for t in saved["turns"]] == ["Robert Zemeckis", "Tom Hanks | Sally Field"]
    assert saved["turns"][1]["follow_up"]


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
    from gr_core.chat.answer import score_names

    chat = GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir, answer_mode="ranked")
    turn = chat.ask("Who starred in The Matrix?")
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

    from gr_core.chat.answer import score_names

    tok = AutoTokenizer.from_pretrained(tiny_llm_dir)
    torch.manual_seed(0)
    cfg = Gemma3TextConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=2, num_key_value_heads=1, head_dim=16, sliding_window=8,
                           layer_types=["sliding_attention", "full_attention"], max_position_embeddings=2048,
                           bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    Gemma3ForCausalLM(cfg).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    chat = GraphChat(MOVIES, model="zero_shot", llm_model=str(tmp_path), answer_mode="ranked")
    turn = chat.ask("Who starred in The Matrix?")
    batch = chat._prompt_batch(turn)
    assert batch.attention_mask.shape[1] > 8  # the prompt is longer than the window
    names = ["Tom", "Tom Hanks", "Keanu Reeves", "Lana Wachowski"]
    scores, _ = score_names(chat.llm, batch, names)
    expected = [_full_log_likelihood(chat.llm, batch, n) for n in names]
    assert np.allclose(scores, expected, atol=1e-4), (scores, expected)
    assert chat.ask("Who starred in The Matrix?").answer  # the whole ranked turn


def test_a_ranked_answer_is_a_node_of_the_evidence_scored_with_its_relation_prior(tiny_llm_dir):
    chat = GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir, answer_mode="ranked", max_answers=2)
    turn = chat.ask("Who directed The Matrix?")
    ev = dict(zip(turn.evidence.nodes.node_id.tolist(), turn.evidence.nodes.node_attr.tolist()))
    assert turn.mode == "ranked" and turn.candidates and 1 <= len(turn.answer_nodes) <= 2
    assert set(turn.answer_nodes) <= set(ev) and not set(turn.answer_nodes) & set(turn.linked)
    assert turn.answer == " | ".join(ev[n] for n in turn.answer_nodes)
    assert "The Matrix" not in {c["name"] for c in turn.candidates}
    scores = [c["score"] for c in turn.candidates]
    assert scores == sorted(scores, reverse=True) and {c["name"] for c in turn.candidates} == set(ev.values()) - {
        "The Matrix"}
    for c in turn.candidates:  # score = log-likelihood + 20 x the relation fit (answer.RELATION_PRIOR)
        assert c["score"] == pytest.approx(c["loglik"] + 20.0 * c["relation_fit"], abs=1e-3)
    follow = chat.ask("and what else did they direct?")  # a follow-up carries the ranked answer's nodes
    assert follow.follow_up and set(turn.answer_nodes) <= set(follow.linked)


def test_candidates_choice_and_the_empty_evidence():
    from gr_core.chat.answer import Candidate, candidate_names, choose, rank_candidates

    cands = candidate_names([1, 2, 3, 4], ["Tom", "Tom Hanks", "Big", "Tom"], exclude=[3])
    assert [(c.name, c.node_ids) for c in cands] == [("Tom", [1, 4]), ("Tom Hanks", [2])]  # same name: one candidate
    for scores, best in (([-1.0, -3.0], "Tom"), ([-3.0, -1.0], "Tom Hanks")):
        ranked = rank_candidates(candidate_names([1, 2], ["Tom", "Tom Hanks"]), np.array(scores), np.array([1, 2]),
                                 np.zeros(2))
        assert choose(ranked, 1, 0.0)[0].name == best
    ranked = rank_candidates([Candidate("a", [1]), Candidate("b", [2]), Candidate("c", [3])],
                             np.array([-1.0, -1.5, -9.0]), np.array([1, 1, 1]), np.array([0.0, 0.0, 0.45]))
    assert [c.name for c in ranked] == ["c", "a", "b"] and [c.name for c in choose(ranked, 3, 1.0)] == ["c", "a"]
    assert candidate_names([], []) == [] and choose([], 3, 1.0) == []
    assert [c.name for c in candidate_names([5], ["Up"], exclude=[5])] == ["Up"]  # only the question's entity: kept


def test_an_edgeless_graph_with_nothing_to_rank_gives_a_clear_note(tiny_llm_dir):

    from gr_core.data import TextualGraph

    lonely = TextualGraph(pd.DataFrame({"node_id": [0], "node_attr": [" "]}),
                          pd.DataFrame({"src": pd.Series([], dtype=int), "edge_attr": pd.Series([], dtype=str),
                                        "dst": pd.Series([], dtype=int)}))
    chat = GraphChat(lonely, model="zero_shot", llm_model=tiny_llm_dir, answer_mode="ranked", relevance_threshold=-1.0)
    turn = chat.ask("Who is the author?")
    assert turn.answer == "" and turn.answer_nodes == [] and "no node to answer with" in turn.note


def test_answer_modes_are_checked():
    with pytest.raises(ValueError, match="answer_mode"):
        ChatConfig(answer_mode="beam")
    with pytest.raises(ValueError, match="max_answers"):
        ChatConfig(max_answers=0)
    for field, value in (("max_answers", 2.5), ("path_hops", 2.0), ("relevance_threshold", "0.3")):
        with pytest.raises(ValueError, match=f"ChatConfig.{field}={value!r} must be"):  # not at the first turn
            ChatConfig(**{field: value})
    assert ChatConfig().evidence_format == "triples" and ChatConfig(kind="scene").evidence_format == "csv"
    assert ChatConfig(kind="scene").pcst.top_k_edges == 3 and ChatConfig().pcst.top_k_edges == 5


def test_triples_evidence_spells_out_names():

    from gr_core.data import TextualGraph
    from gr_core.g_retriever.textualize import textualize_triples

    g = TextualGraph(pd.DataFrame({"node_id": [0, 1, 2], "node_attr": ["The Matrix", "Lana Wachowski", "Alone"]}),
                     pd.DataFrame({"src": [0], "edge_attr": ["directed_by"], "dst": [1]}))
    assert textualize_triples(g) == "The Matrix | directed_by | Lana Wachowski\nAlone\n"


def test_long_names_are_cut_without_eos_and_a_follow_up_may_answer_with_carried_nodes(tiny_llm_dir):
    from gr_core.chat.answer import score_names

    chat = GraphChat(MOVIES, model="zero_shot", llm_model=tiny_llm_dir, answer_mode="ranked")
    turn = chat.ask("Who starred in The Matrix?")
    batch = chat._prompt_batch(turn)
    n = len(chat.llm.tokenizer("Keanu Reeves", add_special_tokens=False)["input_ids"])
    exact, _ = score_names(chat.llm, batch, ["Keanu Reeves"], max_name_tokens=n)  # exactly the cap: EOS kept
    assert np.isclose(exact[0], _full_log_likelihood(chat.llm, batch, "Keanu Reeves"), atol=1e-4)
    cut, lengths = score_names(chat.llm, batch, ["Keanu Reeves"], max_name_tokens=n - 1)  # cut: no EOS term
    assert lengths.tolist() == [n - 1] and cut[0] != exact[0]
    with pytest.raises(ValueError, match="no token"):
        score_names(chat.llm, batch, ["Keanu Reeves"], max_name_tokens=0)
    chat.reset()
    first = chat.ask("Which films did Tom Hanks star in?")
    assert first.mode == "ranked" and first.candidates
    chat.history[-1].answer_nodes = [dict(zip(chat.graph.nodes.node_attr, chat.graph.nodes.node_id))["Big"]]
    follow = chat.ask("and which of them did Penny Marshall direct?")
    names = {c["name"] for c in follow.candidates}
    assert follow.follow_up and "Big" in names and "Penny Marshall" not in names  # carried: allowed; named: not
