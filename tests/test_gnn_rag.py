import numpy as np
import pandas as pd
import pytest
import torch
from torch_geometric.data import Data

from gr_core.data import TextualGraph
from gr_core.gnn_rag import (SWITCH_NAMES, ReaRev, ReasonerConfig, ReasonerTrainConfig, evaluate_reasoner,
                             node_probabilities, reasoning_paths, score_questions, select_candidates, train_reasoner)


def _graph(edges, names=None, q_entities=("jamaica",)):
    nodes = sorted({s for s, _, _ in edges} | {d for _, _, d in edges})
    names = names or {}
    return TextualGraph(pd.DataFrame({"node_id": nodes, "node_attr": [names.get(n, f"n{n}") for n in nodes]}),
                        pd.DataFrame(edges, columns=["src", "edge_attr", "dst"]), q_entities=list(q_entities))


def test_paths_keep_direction_and_every_relation_between_a_pair():
    names = {0: "jamaica", 1: "jamaican english", 2: "kingston"}
    g = _graph([(1, "language.human_language.countries_spoken_in", 0), (0, "location.country.languages_spoken", 1),
                (0, "location.country.capital", 2)], names)
    rep = reasoning_paths(g, [0], [1])
    # GNN-RAG's undirected nx.Graph keeps one of the two relations and prints the reversed one forward
    assert sorted(rep.lines) == ["jamaica -> location.country.languages_spoken -> jamaican english",
                                 "jamaica <- language.human_language.countries_spoken_in <- jamaican english"]
    assert rep.no_path == 0 and rep.missing_seed == 0


def test_multi_hop_paths_enumerate_relation_combinations_and_deduplicate():
    g = _graph([(0, "r1", 1), (0, "r2", 1), (1, "r3", 2), (1, "r3", 2)])
    rep = reasoning_paths(g, [0, 0], [2])
    assert sorted(rep.lines) == ["n0 -> r1 -> n1 -> r3 -> n2", "n0 -> r2 -> n1 -> r3 -> n2"]


def test_missing_seed_and_disconnected_target_are_counted_not_raised():
    g = _graph([(0, "r", 1), (2, "s", 3)])
    rep = reasoning_paths(g, [0, 99], [1, 3])
    assert rep.lines == ["n0 -> r -> n1"] and rep.missing_seed == 1 and rep.no_path == 1
    assert reasoning_paths(g, [], [1]).lines == []


def test_candidates_follow_the_cumulative_095_rule_and_exclude_question_entities():
    p = np.array([0.5, 0.3, 0.14, 0.04, 0.02])
    assert select_candidates(p, seeds={0}) == [(1, 0.3), (2, 0.14), (3, 0.04), (4, 0.02)]  # never crosses: all
    low = np.array([0.5, 0.3, 0.195, 0.005])
    assert [c for c, _ in select_candidates(low, seeds={0})] == [1, 2]  # 0.005 < (1 - 0.95) / 4: never a candidate
    q = np.array([0.1, 0.6, 0.36, 0.04])
    assert [c for c, _ in select_candidates(q, seeds=set())] == [1, 2]  # 0.96 crosses 0.95: the crossing one included
    assert select_candidates(np.array([1.0]), seeds={0}) == []  # only the question entity: empty, not an error


def _toy_question(rng, n=8, dim=16):
    """A chain of n nodes from the seed; the answer is the node two hops along relation `a` (not `b`)."""
    rel_a, rel_b = np.ones(dim, np.float32), -np.ones(dim, np.float32)
    src, dst, rel = [], [], []
    for k in range(n - 1):
        src.append(k)
        dst.append(k + 1)
        rel.append(rel_a if k < 2 else rel_b)
    seed = np.zeros(n, bool)
    seed[0] = True
    ans = np.zeros(n, bool)
    ans[2] = True
    q = rng.normal(size=dim).astype(np.float32) * 0.01 + 1
    return Data(edge_index=torch.tensor([src, dst]), rel_emb=torch.from_numpy(np.stack(rel)),
                seed=torch.from_numpy(seed), answer=torch.from_numpy(ans), q_emb=torch.from_numpy(q).view(1, -1),
                q_masked=torch.from_numpy(q).view(1, -1), num_nodes=n)


def test_rearev_distribution_sums_to_one_per_graph():
    from torch_geometric.data import Batch

    rng = np.random.default_rng(0)
    b = Batch.from_data_list([_toy_question(rng), _toy_question(rng, n=5)])
    log_p = ReaRev(16, ReasonerConfig(entity_dim=8, num_iter=2, num_gnn=2)).eval()(b)
    sums = torch.zeros(2).index_add_(0, b.batch, log_p.exp())
    assert torch.allclose(sums, torch.ones(2), atol=1e-5)


def test_rearev_learns_a_two_hop_answer_on_toy_graphs():
    rng = np.random.default_rng(0)
    data = [_toy_question(rng) for _ in range(32)]
    model, history = train_reasoner(data[:24], data[24:], 16, ReasonerConfig(entity_dim=16, dropout=0.0),
                                    ReasonerTrainConfig(lr=1e-2, num_epochs=15))
    scores = evaluate_reasoner(model, data[24:])
    assert scores["h1"] == 100.0 and history[0]["train_loss"] > history[-1]["train_loss"]
    # F1's recall counts every gold answer, as GNN-RAG's evaluator: a second one the graph lacks halves it
    rows = score_questions(model, data[24:])
    assert score_questions(model, data[24:], probs=node_probabilities(model, data[24:])) == rows  # the caller's probs
    for d in data[24:]:
        d.num_answers = 2
    for old, new in zip(rows, score_questions(model, data[24:])):
        precision = 1 / old["candidates"]  # the one gold node among the candidates
        assert old["f1"] == pytest.approx(2 * precision / (precision + 1))
        assert new["f1"] == pytest.approx(2 * precision * 0.5 / (precision + 0.5)) and new["h1"] == old["h1"]


SWITCHES = list(SWITCH_NAMES)
FIRST = {s: False for s in SWITCHES}  # the first version: every switch off


@pytest.mark.parametrize("switch", SWITCHES + ["all"])
def test_each_rearev_switch_keeps_a_distribution_per_graph_and_learns_the_two_hop_answer(switch):
    from torch_geometric.data import Batch

    on = {} if switch == "all" else FIRST | {switch: True}  # "all": the defaults, ReaRev as released
    rng = np.random.default_rng(0)
    b = Batch.from_data_list([_toy_question(rng), _toy_question(rng, n=5)])
    log_p = ReaRev(16, ReasonerConfig(entity_dim=8, num_iter=2, num_gnn=2, **on)).eval()(b)
    sums = torch.zeros(2).index_add_(0, b.batch, log_p.exp())
    assert torch.allclose(sums, torch.ones(2), atol=1e-5)
    data = [_toy_question(rng) for _ in range(32)]
    model, _ = train_reasoner(data[:24], data[24:], 16, ReasonerConfig(entity_dim=16, dropout=0.0, **on),
                              ReasonerTrainConfig(lr=1e-2, num_epochs=15))
    assert evaluate_reasoner(model, data[24:])["h1"] == 100.0


def test_topic_masked_replaces_each_named_entity_on_word_boundaries_without_case():
    from gr_core.gnn_rag import topic_masked

    assert topic_masked("who directed [Titanic]", ["Titanic"]) == "who directed it"
    assert topic_masked("who did tom landry play for", ["Tom Landry"]) == "who did it play for"
    assert topic_masked("genres of the movies written by The Rose writers", ["The Rose", "Rose"]) == \
        "genres of the movies written by it writers"  # the longest name first
    assert topic_masked("what is rosebud about", ["Rose"]) == "what is rosebud about"  # not inside a word
    assert topic_masked("who starred in Up and Big", ["Up", "Big", ""]) == "who starred in it and it"
    assert topic_masked("when did annie open", ["someone else"]) == "when did annie open"


@pytest.mark.parametrize("mask_topic", [True, False])
def test_the_reasoner_makes_its_instructions_from_the_masked_question_only_when_told(mask_topic):
    from torch_geometric.data import Batch

    d = _toy_question(np.random.default_rng(0))
    model = ReaRev(16, ReasonerConfig(entity_dim=8, mask_topic=mask_topic)).eval()
    one = lambda **fields: Batch.from_data_list([Data(**fields)])  # noqa: E731
    with torch.no_grad():
        base = model(one(**d.to_dict()))
        changed = {key: not torch.allclose(model(one(**{**d.to_dict(), key: d[key] + 1.0})), base)
                   for key in ("q_emb", "q_masked")}
        assert changed == {"q_masked": mask_topic, "q_emb": not mask_topic}
        without = one(**{k: v for k, v in d.to_dict().items() if k != "q_masked"})
        if mask_topic:
            with pytest.raises(ValueError, match="q_masked"):
                model(without)
        else:
            assert torch.equal(model(without), base)


def test_dropout_from_16_bit_draws_drops_p_scales_the_rest_and_follows_the_seed():
    from gr_core.dropout import UniformDropout

    drop = UniformDropout(0.2).train()
    x = torch.ones(1_000_003, requires_grad=True)  # not a multiple of the 4 draws in a 64-bit word
    torch.manual_seed(0)
    y = drop(x)
    kept = y > 0
    assert abs(float(kept.float().mean()) - 0.8) < 3e-3  # 4 sigma of a binomial with n = 1e6
    assert torch.allclose(y[kept], torch.full_like(y[kept], 65536 / (65536 - round(0.2 * 65536))))
    assert abs(float(y.mean()) - 1.0) < 5e-3  # the expectation is kept
    y.sum().backward()
    assert torch.equal(x.grad, y.detach())  # the gradient is the same mask and scale
    torch.manual_seed(0)
    assert torch.equal(drop(x), y)  # seeded like any torch draw
    lanes = kept[:1_000_000].view(-1, 4).float().mean(0)  # every 16-bit lane of a 64-bit word is uniform
    assert torch.allclose(lanes, torch.full((4,), 0.8), atol=6e-3)
    assert torch.equal(drop.eval()(x), x) and torch.equal(UniformDropout(0.0).train()(x), x)
    assert float(UniformDropout(1.0).train()(x).abs().sum()) == 0.0


def test_masked_seeds_hold_no_probability_after_reasoning_and_a_seed_only_graph_stays_finite():
    from torch_geometric.data import Batch

    rng = np.random.default_rng(0)
    only_seed = Data(edge_index=torch.tensor([[0], [0]]), rel_emb=torch.ones(1, 16), seed=torch.tensor([True]),
                     answer=torch.tensor([False]), q_emb=torch.ones(1, 16), q_masked=torch.ones(1, 16),
                     num_nodes=1)
    b = Batch.from_data_list([_toy_question(rng), only_seed])
    with torch.no_grad():
        p = ReaRev(16, ReasonerConfig(entity_dim=8)).eval()(b).exp()  # the default masks the seeds
        first = ReaRev(16, ReasonerConfig(entity_dim=8, **FIRST)).eval()(b).exp()
    assert float(p[b.seed & (b.batch == 0)].sum()) < 1e-6
    assert torch.isfinite(p).all() and abs(float(p[b.batch == 1].sum()) - 1.0) < 1e-6
    # without the switch the seed keeps part of the mass (the first version's behaviour the change table measures)
    assert float(first[b.seed & (b.batch == 0)].sum()) > 1e-6


def test_switches_add_only_their_own_parameters_and_old_saved_reasoners_load_as_the_first_version(tmp_path):
    from gr_core.gnn_rag import load_reasoner, reasoner_meta, save_reasoner

    names = lambda cfg: {n.split(".")[0] for n, _ in ReaRev(16, cfg).named_parameters()}  # noqa: E731
    base = names(ReasonerConfig(entity_dim=8, **FIRST))
    assert names(ReasonerConfig(entity_dim=8, **FIRST | {"self_loops": True})) - base == {"self_rel"}
    assert names(ReasonerConfig(entity_dim=8, **FIRST | {"split_directions": True})) - base == {"rel_layer"}
    assert names(ReasonerConfig(entity_dim=8, **FIRST | {"fusion_reform": True})) ^ base == {"fusion", "reform"}
    assert names(ReasonerConfig(entity_dim=8, **FIRST | {"mask_seeds": True, "keep_states": True})) == base
    model = ReaRev(16, ReasonerConfig(entity_dim=8, **FIRST))
    path = save_reasoner(model, tmp_path / "r.pt")
    blob = torch.load(path, weights_only=False)
    for key in SWITCHES + ["mask_topic"]:  # a file written before the switches existed
        del blob["config"][key]
    torch.save(blob, path)
    assert load_reasoner(path).cfg == ReasonerConfig(entity_dim=8, **FIRST, mask_topic=False)
    assert ReasonerConfig() == ReasonerConfig(**{s: True for s in SWITCHES})  # ReaRev as released by default
    # a file from elsewhere is read with weights_only: a pickle that would run code is refused, never run
    torch.save(blob | {"meta": _RunsCode(tmp_path / "ran")}, path)
    with pytest.raises(ValueError, match="is not a saved GNN-RAG reasoner"):
        load_reasoner(path)
    assert not (tmp_path / "ran").exists()
    path.write_bytes(path.read_bytes()[:100])  # cut short: both readers say so
    for read in (load_reasoner, reasoner_meta):
        with pytest.raises(ValueError, match="is not a saved GNN-RAG reasoner"):
            read(path)


def test_reasoner_inputs_of_another_shape_are_named():
    rng = np.random.default_rng(0)
    model = ReaRev(16, ReasonerConfig(entity_dim=8))
    with pytest.raises(ValueError, match="ReaRev reads 16-d text embeddings; these questions are 8-d"):
        node_probabilities(model, [_toy_question(rng, dim=8)])
    empty = Data(edge_index=torch.zeros(2, 0, dtype=torch.long), rel_emb=torch.zeros(0, 16),
                 seed=torch.zeros(0, dtype=torch.bool), answer=torch.zeros(0, dtype=torch.bool),
                 q_emb=torch.ones(1, 16), q_masked=torch.ones(1, 16), num_nodes=0)
    assert [p.shape for p in node_probabilities(model, [empty])] == [(0,)]  # alone as in a batch
    with pytest.raises(ValueError, match="train_reasoner: no training questions"):
        train_reasoner([], [], 16)
    from gr_core.gnn_rag.evidence import gnn_evidence

    g = _graph([(0, "r", 1), (1, "r", 2)], {0: "jamaica"})
    with pytest.raises(ValueError, match="probs has 2 entries, the graph 3 nodes"):
        gnn_evidence(g, np.ones(2) / 2)


class _RunsCode:
    """Unpickled, it would create the file ``path``."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return type(self.path).touch, (self.path,)


def test_questions_without_an_answer_in_their_graph_are_masked_from_the_loss():
    rng = np.random.default_rng(0)
    d = _toy_question(rng)
    d.answer = torch.zeros_like(d.answer)
    from torch_geometric.data import Batch

    model = ReaRev(16, ReasonerConfig(entity_dim=8))
    b = Batch.from_data_list([d])
    loss, n = model.loss(model(b), b)
    assert n == 0 and float(loss) == 0.0
    with pytest.raises(ValueError, match="label_smooth"):
        ReasonerConfig(label_smooth=1.5)


def test_gnn_rag_prompt_a_layout():
    from gr_core.prompts import gnn_rag_parts

    text = "".join(gnn_rag_parts(["Jamaica -> location.country.languages_spoken -> Jamaican English"],
                                 "what does jamaican people speak"))
    assert text == ("Based on the reasoning paths, please answer the given question. Please keep the answer as simple "
                    "as possible and return all the possible answers as a list.\n\nReasoning Paths:\n"
                    "Jamaica -> location.country.languages_spoken -> Jamaican English\n\nQuestion:\n"
                    "what does jamaican people speak?")
    assert "".join(gnn_rag_parts([], "who?")).endswith("Reasoning Paths:\n\n\nQuestion:\nwho?")


def test_reference_verbalizer_reproduces_gnn_rag_defects_and_the_comparison_counts_them():
    from gr_core.gnn_rag import compare_path_styles, reference_paths

    names = {0: "jamaica", 1: "jamaican english", 2: "kingston"}
    g = _graph([(1, "language.human_language.countries_spoken_in", 0), (0, "location.country.languages_spoken", 1)],
               names)
    ref = reference_paths(g, [0], [1])
    # the first relation was overwritten
    assert ref == ["jamaica -> location.country.languages_spoken -> jamaican english"]
    g2 = _graph([(1, "language.human_language.countries_spoken_in", 0)], names)
    ref2 = reference_paths(g2, [0], [1])
    assert ref2 == ["jamaica -> language.human_language.countries_spoken_in -> jamaican english"]  # printed forward
    diff = compare_path_styles(g2, reasoning_paths(g2, [0], [1]).lines, ref2)
    assert diff["reference_reversed_hops"] == 1 and diff["relations_only_in_ours"] == 0
    ours = reasoning_paths(g, [0], [1]).lines
    assert compare_path_styles(g, ours, ref)["relations_only_in_ours"] == 1


def test_missing_entities_counts_names_not_nodes():
    from gr_core.gnn_rag import missing_entities

    g = _graph([(0, "r", 1), (2, "r", 1)], {0: "jamaica", 1: "x", 2: "jamaica"})
    assert missing_entities(g, ["jamaica"]) == 0  # two nodes share the name: still one entity found
    assert missing_entities(g, ["jamaica", "Cuba"]) == 1
    assert missing_entities(g, ["Jamaica"]) == 1  # matching is exact: another case is another name


def test_reasoner_training_is_bit_reproducible():
    rng = np.random.default_rng(1)
    data = [_toy_question(rng) for _ in range(16)]
    runs = [train_reasoner(data[:12], data[12:], 16, ReasonerConfig(entity_dim=8), ReasonerTrainConfig(num_epochs=2))
            for _ in range(2)]
    a, b = (dict(m.state_dict()) for m, _ in runs)
    assert all(torch.equal(a[k], b[k]) for k in a)
    strip = [[{k: v for k, v in h.items() if k != "seconds"} for h in hist] for _, hist in runs]
    assert strip[0] == strip[1]
    assert not torch.are_deterministic_algorithms_enabled()  # restored after training
    # without validation questions there is no epoch to choose: the last one is kept (it had kept the first)
    one, two = (train_reasoner(data[:12], [], 16, ReasonerConfig(entity_dim=8), ReasonerTrainConfig(num_epochs=n))
                for n in (1, 2))
    assert [h["val_h1"] for h in two[1]] == [None, None]
    first, last = one[0].state_dict(), two[0].state_dict()
    assert not all(torch.equal(first[k], last[k]) for k in first)


def test_dataset_keys_run_metaqa_once_per_hop_set():
    from gr_core.studies.gnn_rag import dataset_keys

    assert dataset_keys(["webqsp", "metaqa"], [1, 3]) == [("webqsp", "webqsp", 2), ("metaqa-1hop", "metaqa", 1),
                                                          ("metaqa-3hop", "metaqa", 3)]
    assert dataset_keys(["webqsp"], [1]) == [("webqsp", "webqsp", 2)]


def test_exact_case_matching_keeps_two_names_that_differ_only_in_case_apart():
    from gr_core.data import question_nodes
    from gr_core.gnn_rag import gold_ids

    nodes = pd.DataFrame({"node_id": [0, 1, 2, 3], "node_attr": ["Heat", "heat", "Drama", "drama"]})
    edges = pd.DataFrame({"src": [0, 0, 1], "edge_attr": ["has_genre", "has_tags", "has_genre"], "dst": [2, 3, 2]})
    g = TextualGraph(nodes=nodes, edges=edges, question="what genre is Heat", answers=["Drama"], q_entities=["Heat"])
    seeds = question_nodes(g)
    assert seeds == [0] and gold_ids(g, g.answers, seeds) == [2]


def test_a_relation_table_gives_the_same_distribution_as_per_fact_relation_texts():
    from torch_geometric.data import Batch

    from gr_core.gnn_rag import QuestionGraph

    rng = np.random.default_rng(0)
    per_fact = [_toy_question(rng), _toy_question(rng, n=5)]
    tabled = []
    for d in per_fact:  # the toy relations are two texts: +1 and -1 vectors
        table, rel_id = torch.unique(d.rel_emb, dim=0, return_inverse=True)
        tabled.append(QuestionGraph(edge_index=d.edge_index, rel_table=table, rel_id=rel_id, seed=d.seed,
                                    answer=d.answer, q_emb=d.q_emb, q_masked=d.q_masked,
                                    num_nodes=d.num_nodes))
    b = Batch.from_data_list(tabled)
    assert b.rel_table.shape[0] == 4 and int(b.rel_id.max()) == 3  # ids offset per graph when batched
    model = ReaRev(16, ReasonerConfig(entity_dim=8)).eval()
    with torch.no_grad():
        assert torch.allclose(model(b), model(Batch.from_data_list(per_fact)), atol=1e-5)


def test_a_time_budget_stops_training_before_an_epoch_that_would_overrun_it():
    rng = np.random.default_rng(0)
    data = [_toy_question(rng) for _ in range(16)]
    _, history = train_reasoner(data[:12], data[12:], 16, ReasonerConfig(entity_dim=8),
                                ReasonerTrainConfig(num_epochs=50, time_budget_s=1e-6))
    assert len(history) == 1  # the first epoch always runs; the second would end past the budget


def test_node_probabilities_come_back_one_array_per_graph_in_order():
    rng = np.random.default_rng(1)
    data = [_toy_question(rng, n=n) for n in (3, 8, 5, 4, 7)]
    model = ReaRev(16, ReasonerConfig(entity_dim=8, num_iter=2, num_gnn=2)).eval()
    probs = node_probabilities(model, data, batch_size=2)
    assert [len(p) for p in probs] == [3, 8, 5, 4, 7]
    assert all(np.isclose(p.sum(), 1.0, atol=1e-5) for p in probs)
    alone = [node_probabilities(model, [d])[0] for d in data]
    assert all(np.allclose(a, b, atol=1e-6) for a, b in zip(probs, alone))


@pytest.mark.data
def test_a_reasoner_sees_a_one_hop_question_on_a_wider_two_hop_scope():
    from gr_core.gnn_rag import question_data, reasoner_dataset
    from gr_core.graphqa import DatasetConfig, load_dataset
    from gr_core.kg import NeighbourhoodConfig

    ds = load_dataset(DatasetConfig("metaqa", hops=1, max_questions=6))
    idx = list(ds.split["test"])[:4]
    scoped = reasoner_dataset(ds, idx, "scoped", NeighbourhoodConfig(2, 200, 2000))
    for i, d in zip(idx, scoped):
        own = question_data(ds, i)  # the 1-hop dataset's own neighbourhood
        assert d.num_nodes >= own.num_nodes and d.edge_index.size(1) >= own.edge_index.size(1)
        assert int(d.seed.sum()) == int(own.seed.sum()) == 1
        assert int(d.answer.sum()) >= int(own.answer.sum()) > 0  # 1-hop answers stay inside 2 hops
        assert torch.equal(d.q_emb, own.q_emb) and torch.equal(d.q_masked, own.q_masked)
        assert not torch.equal(d.q_emb, d.q_masked)  # MetaQA questions name their topic entity


@pytest.mark.data
def test_two_saved_reasoners_are_compared_on_the_same_test_questions(bench, tmp_path):
    import json

    from gr_core.gnn_rag import save_reasoner

    paired_reasoners = bench("reasoner_studies").paired_reasoners

    paths = {}
    for seed in (0, 1):  # two untrained reasoners: different weights, the same questions
        torch.manual_seed(seed)
        paths[f"seed {seed}"] = str(save_reasoner(ReaRev(384, ReasonerConfig(entity_dim=8)), tmp_path / f"{seed}.pt"))
    out = paired_reasoners("metaqa-1hop", paths, tmp_path / "paired.json", max_test=12)
    saved = json.loads((tmp_path / "paired.json").read_text())
    assert saved["n"] == out["n"] == 12 and saved["reasoners"] == paths
    test = saved["mcnemar"]
    right = {label: round(h * 12 / 100) for label, h in saved["h1"].items()}
    assert right["seed 0"] - right["seed 1"] == test["a_only"] - test["b_only"] and 0 <= test["p"] <= 1
    with pytest.raises(ValueError, match="two reasoners"):
        paired_reasoners("metaqa-1hop", {"one": paths["seed 0"]}, tmp_path / "x.json")


@pytest.mark.parametrize("switch", ["first", "self_loops", "split_directions", "all", "relation_match"])
def test_relation_factorized_layers_equal_fact_by_fact_messages_and_their_gradients(bench, switch):
    """The reasoner sums each layer's messages per (graph, relation) before one batched product (RelationHops);
    on graphs of different sizes and relation counts, with repeated facts, a relation table and per-fact texts, its
    distribution and every parameter's gradient equal the fact-by-fact computation (also with ``relation_match``,
    whose scores follow the table rows through batching)."""
    from torch_geometric.data import Batch

    from gr_core.gnn_rag import QuestionGraph

    on = {"first": FIRST, "all": {}, "relation_match": {"relation_match": True}}.get(switch, FIRST | {switch: True})
    gen = torch.Generator().manual_seed(0)

    def tabled(n, facts, relations):
        seed = torch.zeros(n, dtype=torch.bool)
        seed[0] = True
        return QuestionGraph(edge_index=torch.randint(0, n, (2, facts), generator=gen),
                             rel_table=torch.randn(relations, 16, generator=gen),
                             rel_id=torch.randint(0, relations, (facts,), generator=gen), seed=seed,
                             answer=torch.zeros(n, dtype=torch.bool), q_emb=torch.randn(1, 16, generator=gen),
                             q_masked=torch.randn(1, 16, generator=gen), num_nodes=n,
                             rel_match=torch.rand(relations, generator=gen), q_steps=torch.rand(1, 2, generator=gen))

    def per_fact(data):  # a relation text per fact: its score per fact too
        data.rel_match, data.q_steps = torch.rand(data.rel_emb.shape[0], generator=gen), torch.rand(1, 2, generator=gen)
        return data

    rng = np.random.default_rng(0)
    batches = [Batch.from_data_list([tabled(9, 30, 3), tabled(4, 6, 5), tabled(12, 2, 1)]),
               Batch.from_data_list([per_fact(_toy_question(rng)), per_fact(_toy_question(rng, n=5))])]
    torch.manual_seed(0)
    model = ReaRev(16, ReasonerConfig(entity_dim=8, num_iter=2, num_gnn=2, **on)).eval()
    for b in batches:
        ours, ref = model(b), bench("reasoner_step").per_fact_forward(model, b)
        assert torch.allclose(ours, ref, atol=1e-5, rtol=1e-4)
        grads = []
        for out in (ours, ref):
            model.zero_grad()
            (out.exp() * torch.arange(out.numel())).sum().backward(retain_graph=True)
            grads.append({n: q.grad.clone() for n, q in model.named_parameters() if q.grad is not None})
        assert grads[0].keys() == grads[1].keys()
        assert ("match_fwd.weight" in grads[0]) == (switch == "relation_match")
        for name in grads[0]:
            assert torch.allclose(grads[0][name], grads[1][name], atol=1e-5, rtol=1e-4), name


def test_run_reasoners_applies_per_key_settings_and_names_unknown_ones(monkeypatch):
    import gr_core.studies.gnn_rag as studies
    from gr_core.gnn_rag import ReasonerConfig, ReasonerTrainConfig
    from gr_core.studies.gnn_rag import run_reasoners

    calls = {}
    monkeypatch.setattr(studies, "run_reasoner", lambda name, hops, tr, va, te, cfg, tcfg, save_path: calls.setdefault(
        (name, hops), (tr, va, te, tcfg.num_epochs)))
    run_reasoners(["webqsp", "metaqa"], [1, 3], 976, 50, 200, ReasonerConfig(), ReasonerTrainConfig(num_epochs=5),
                  {"metaqa-3hop": {"max_train": 0, "num_epochs": 3}})
    assert calls[("webqsp", 2)] == (976, 50, 200, 5) and calls[("metaqa", 1)] == (976, 50, 200, 5)
    assert calls[("metaqa", 3)] == (None, 50, 200, 3)  # 0 keeps the whole split
    with pytest.raises(ValueError, match="metaqa-2hop"):
        run_reasoners(["metaqa"], [1], 8, 8, 8, ReasonerConfig(), ReasonerTrainConfig(), {"metaqa-2hop": {}})
    with pytest.raises(ValueError, match="epochs"):
        run_reasoners(["metaqa"], [1], 8, 8, 8, ReasonerConfig(), ReasonerTrainConfig(), {"metaqa-1hop": {"epochs": 2}})


@pytest.mark.data
def test_a_saved_reasoner_is_reloaded_under_the_same_settings_and_retrained_under_others(tmp_path, monkeypatch):
    import gr_core.studies.gnn_rag as studies
    from gr_core.gnn_rag import reasoner_meta

    kw = dict(max_train=8, max_val=4, max_test=4, cfg=ReasonerConfig(entity_dim=8),
              save_path=tmp_path / "reasoners" / "webqsp.pt")
    first = studies.run_reasoner("webqsp", 2, tcfg=ReasonerTrainConfig(num_epochs=1, lr=2e-3), **kw)
    assert reasoner_meta(kw["save_path"])["num_train"] == 8  # saved as soon as it is trained
    trained = []
    real = studies.train_reasoner
    monkeypatch.setattr(studies, "train_reasoner", lambda *a, **k: trained.append(1) or real(*a, **k))
    again = studies.run_reasoner("webqsp", 2, tcfg=ReasonerTrainConfig(num_epochs=1, lr=2e-3), **kw)
    assert not trained and again["history"] == first["history"] and again["metrics"] == first["metrics"]
    assert all(np.array_equal(a, b) for a, b in zip(again["probs"], first["probs"]))
    studies.run_reasoner("webqsp", 2, tcfg=ReasonerTrainConfig(num_epochs=1, lr=1e-3), **kw)
    assert trained == [1]  # another learning rate: trained again, and the file now holds that reasoner
    assert reasoner_meta(kw["save_path"])["identity"]["train"]["lr"] == 1e-3


@pytest.mark.data
def test_the_change_table_of_a_finished_key_is_reloaded_not_retrained(tmp_path, monkeypatch):
    import gr_core.studies.gnn_rag as studies

    calls = []

    def table(name, hops, max_train, max_val, cfg, tcfg, changes):
        calls.append((name, hops, len(changes)))
        return (pd.DataFrame({"change": [c for c, _ in changes], "val H@1": 50.0, "difference": 0.0}),
                pd.DataFrame({"qtype": "all", "change": [c for c, _ in changes]}))  # columns not in sorted order

    monkeypatch.setattr(studies, "reasoner_change_table", table)
    kw = dict(max_train=8, max_val=4, cfg=ReasonerConfig(), tcfg=ReasonerTrainConfig(num_epochs=1))
    first, first_by_type = studies.reasoner_change_tables(["metaqa-1hop"], cache_dir=tmp_path, **kw)
    again, by_type = studies.reasoner_change_tables(["metaqa-1hop"], cache_dir=tmp_path, **kw)
    assert calls == [("metaqa", 1, len(studies.REASONER_CHANGES))]
    pd.testing.assert_frame_equal(again, first)
    pd.testing.assert_frame_equal(by_type, first_by_type)
    studies.reasoner_change_tables(["metaqa-1hop"], cache_dir=tmp_path, first_and_last=("metaqa-1hop",), **kw)
    assert calls[-1] == ("metaqa", 1, 2)  # other changes: another key, computed




def test_paths_from_one_search_per_seed_are_networkx_all_shortest_paths():
    """reasoning_paths builds every target's shortest paths from one search per seed with networkx's own builder;
    pinned against ``nx.all_shortest_paths`` (same paths, same order) on random graphs with ties."""
    import networkx as nx

    from gr_core.gnn_rag.reasoning_paths import _build_paths_from_predecessors

    for seed in range(5):
        g = nx.gnm_random_graph(30, 60, seed=seed)
        for s in (0, 7):
            pred = nx.predecessor(g, s)
            for t in g.nodes:
                if t != s and t in pred:
                    assert list(_build_paths_from_predecessors({s}, t, pred)) == list(nx.all_shortest_paths(g, s, t))


def test_the_command_line_checks_every_key_and_reasoner_file_before_training(bench, tmp_path, capsys):
    main = bench("reasoner_studies").main

    for args, message in ((["test", "--keys", "webqsp,webqsb"], "dataset key 'webqsb' is not one of"),
                          (["llm-half", "--reasoners", "bogus"], "expected KEY=FILE.pt items"),
                          (["llm-half", "--reasoners", f"webqsp={tmp_path / 'none.pt'}"], "no such file"),
                          (["paired", "--keys", "webqsp", "--reasoners", "a=x.pt"], "paired compares two reasoners")):
        with pytest.raises(SystemExit) as stop:
            main([*args, "--out", str(tmp_path / "out")])
        assert stop.value.code == 2 and message in capsys.readouterr().err, args
    assert not (tmp_path / "out").exists()
