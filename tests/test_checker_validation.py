import numpy as np
import pandas as pd

from gr_core.data import TextualGraph
from gr_core.studies.checker_validation import (FALSE_CASES, TRUE_CASES, acceptance_by_case, checker_scores, cited_name,
                                                constructed_cases, judge)


def _graph():
    nodes = pd.DataFrame({"node_id": [0, 1, 2, 3], "node_attr": ["barack obama", "united states of america",
                                                                 "honolulu", "michelle obama"]})
    edges = pd.DataFrame({"src": [0, 0, 0], "edge_attr": ["people.person.nationality", "people.person.place_of_birth",
                                                          "people.person.spouse_s"], "dst": [1, 2, 3]})
    return TextualGraph(nodes=nodes, edges=edges)


def test_every_case_is_constructed_with_its_truth_and_a_parsable_response():
    cases = constructed_cases(_graph(), ["paris", "angela merkel"], np.random.default_rng(0))
    assert {c["case"] for c in cases} == set(TRUE_CASES) | set(FALSE_CASES)
    assert all(c["truth"] == (c["case"] in TRUE_CASES) for c in cases)
    rows = judge(_graph(), cases)
    assert all(r["parsed"] for r in rows)


def test_exact_level_accepts_only_true_citations_and_fuzzy_trades_precision_for_recall():
    rows = pd.DataFrame([{"dataset": "toy", **r} for seed in range(5)
                         for r in judge(_graph(), constructed_cases(_graph(), ["paris", "angela merkel"],
                                                                    np.random.default_rng(seed)))])
    scores = checker_scores(rows).set_index("level")
    assert scores.loc["exact", "precision_%"] == 100.0  # nothing false is ever accepted exactly
    assert scores.loc["normalized", "recall_%"] == 100.0  # case, articles, plurals, short relations accepted
    assert scores.loc["fuzzy", "precision_%"] < 100.0  # reversed edges and partial names pass by design
    by_case = acceptance_by_case(rows).set_index("case")
    assert by_case.loc["reversed edge", "fuzzy"] == 100.0 and by_case.loc["reversed edge", "normalized"] == 0.0
    assert by_case.loc["renamed node", "fuzzy"] == 0.0 and by_case.loc["invented edge", "normalized"] == 0.0


def test_scene_graph_objects_are_cited_by_attributes_and_name():
    assert cited_name("name: cube; attribute: large, red; (x,y,w,h): (1, 2, 3, 4)") == "large red cube"
    assert cited_name("honolulu") == "honolulu"
