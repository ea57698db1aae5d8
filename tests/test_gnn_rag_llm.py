"""GNN-RAG's LLM half: prompts, RoG relation paths and grounding, evidence unions, GNN prizes for PCST, the LoRA
generators and the retriever evaluation with its bad-input counts (tiny random LLM, synthetic graphs)."""
import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from gr_core.config import LLMConfig
from gr_core.data import TextualGraph
from gr_core.g_retriever.model import GraphLLM, LoRAConfig, ModelConfig
from gr_core.g_retriever.train import TrainConfig
from gr_core.gnn_rag.evidence import (RETRIEVERS, Evidence, GNNRAGConfig, answer_hops, collect_evidence, fact_lines,
                                      format_relation_path, gnn_prizes, ground_relation_paths, parse_relation_path,
                                      relation_sequences)
from gr_core.evaluate import kgqa_scores, normalize
from gr_core.gnn_rag.generation import (answer_examples, answer_kind, fit_lines, ground_reply, named_node, rag_example,
                                        train_lora_llm, training_examples)
from gr_core.prompts import GNN_RAG_INSTRUCTION, gnn_rag_parts
from gr_core.stats import wilson_interval
from gr_core.studies.gnn_rag_llm import (against_gnn, answer_with_evidence, failure_table, hop_table, metrics_record,
                                         one_question, retriever_table, training_table, with_grounded)


def _graph(edges, names=None, q_entities=("jamaica",), extra_nodes=()):
    nodes = sorted({s for s, _, _ in edges} | {d for _, _, d in edges} | set(extra_nodes))
    names = names or {}
    return TextualGraph(pd.DataFrame({"node_id": nodes, "node_attr": [names.get(n, f"n{n}") for n in nodes]}),
                        pd.DataFrame(edges, columns=["src", "edge_attr", "dst"]), q_entities=list(q_entities))


JAMAICA = {0: "jamaica", 1: "english", 2: "kingston", 3: "caribbean"}


def test_prompt_parts_split_prompt_a_and_no_retrieval_has_no_paths_block():
    desc, q = gnn_rag_parts(["a -> r -> b"], "who is b")
    assert desc.startswith(GNN_RAG_INSTRUCTION) and q == "\n\nQuestion:\nwho is b?"
    none_desc, none_q = gnn_rag_parts(None, "who is b?")
    assert "Reasoning Paths" not in none_desc and none_q == "\n\nQuestion:\nwho is b?"
    ex = rag_example("7", "who is b", ["a -> r -> b"], ["B", "c"])
    assert ex.label == "B\nc" and ex.desc == desc


def test_relation_paths_round_trip_and_drop_direction():
    lines = ["jamaica -> location.country.languages_spoken -> english",
             "jamaica <- language.countries_spoken_in <- english -> language.family -> germanic",
             "jamaica -> location.country.languages_spoken -> patois"]
    seqs = relation_sequences(lines)
    assert seqs == [("location.country.languages_spoken",), ("language.countries_spoken_in", "language.family")]
    assert parse_relation_path(format_relation_path(seqs[1])) == seqs[1]
    assert parse_relation_path("<PATH>a<SEP> b <SEP></PATH>") == ("a", "b")
    assert parse_relation_path("a sentence, not a path") == ("a sentence, not a path",)


def test_grounding_follows_the_exact_relation_sequence_either_way_and_keeps_direction():
    g = _graph([(0, "capital", 2), (1, "spoken_in", 0), (2, "near", 3), (0, "near", 3), (3, "near", 0)], JAMAICA)
    assert ground_relation_paths(g, [0], [("spoken_in",)]) == ["jamaica <- spoken_in <- english"]
    two = ground_relation_paths(g, [0], [("capital", "near")])
    assert two == ["jamaica -> capital -> kingston -> near -> caribbean"]
    # two "near" facts between jamaica and caribbean (both directions): both kept; cycles back to jamaica are not
    assert ground_relation_paths(g, [0], [("near", "near")]) == ["jamaica -> near -> caribbean <- near <- kingston",
                                                                 "jamaica <- near <- caribbean <- near <- kingston"]
    # a missing seed or an unknown relation grounds nothing (counted by the caller)
    assert ground_relation_paths(g, [99], [("capital",)]) == [] and ground_relation_paths(g, [0], [("nope",)]) == []
    wide = _graph([(0, "r", k) for k in range(1, 30)], {0: "jamaica"})
    assert len(ground_relation_paths(wide, [0], [("r",)], max_lines=5)) == 5


def test_evidence_union_keeps_the_first_retrievers_order_and_counts():
    a = Evidence(["x -> r -> y", "x -> s -> z"], missing_seed=1)
    b = Evidence(["x -> s -> z", "y <- t <- w"], no_path=2, empty_candidates=True)
    u = a.union(b)
    assert u.lines == ["x -> r -> y", "x -> s -> z", "y <- t <- w"]
    assert (u.missing_seed, u.no_path, u.empty_candidates, u.ungrounded) == (1, 2, True, False)
    assert u.names() == ["x", "y", "z", "w"]


def test_fact_lines_and_answer_hops():
    g = _graph([(0, "capital", 2), (0, "capital", 2), (2, "near", 3)], JAMAICA, extra_nodes=[1])
    assert fact_lines(g) == ["jamaica -> capital -> kingston", "kingston -> near -> caribbean"]
    assert fact_lines(g, [2]) == ["kingston -> near -> caribbean"]
    assert answer_hops(g, [0], [3]) == 2 and answer_hops(g, [0], [1]) is None and answer_hops(g, [], [3]) is None


def test_gnn_prizes_scale_candidates_and_pin_the_question_entities():
    g = _graph([(0, "r", 1), (1, "r", 2), (2, "r", 3)], JAMAICA)
    p = np.array([0.02, 0.08, 0.6, 0.3])
    prizes = gnn_prizes(g, p, top_k=3)
    assert prizes[0] == 3.0 and prizes[2] == pytest.approx(3.0) and prizes[3] == pytest.approx(1.5)
    assert prizes[1] == pytest.approx(0.4)  # the 0.95 set: 0.6 + 0.3 + 0.08 crosses 0.95 at node 1


def test_extra_node_prizes_reach_the_pcst_solver_and_bad_shapes_are_named():
    from gr_core.g_retriever.retrieval import RetrievalConfig, retrieve_subgraph

    g = _graph([(0, "r", 1), (1, "r", 2), (2, "r", 3), (3, "r", 4)], {0: "jamaica"})
    x, e = np.eye(5, 4, dtype=np.float32), np.ones((4, 4), np.float32) * 0.1
    cfg = RetrievalConfig(top_k_nodes=1, top_k_edges=0, edge_cost=0.5)
    q = np.array([1, 0, 0, 0], np.float32)
    plain = retrieve_subgraph(g, x, e, q, cfg)
    boosted = retrieve_subgraph(g, x, e, q, cfg, extra_node_prizes=np.array([0, 0, 0, 0, 5.0], np.float32))
    assert 4 not in plain.node_rows and 4 in boosted.node_rows
    with pytest.raises(ValueError, match="extra_node_prizes has shape"):
        retrieve_subgraph(g, x, e, q, cfg, extra_node_prizes=np.zeros(3, np.float32))


def test_fit_lines_keeps_whole_lines_in_order(tiny_llm_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_llm_dir)
    lines = ["a -> r -> b", "a -> a very long relation name indeed -> c", "d -> r -> e"]
    n = [len(tok(x + "\n", add_special_tokens=False)["input_ids"]) for x in lines]
    kept, dropped = fit_lines(lines, n[0] + n[2], tok)
    assert kept == [lines[0], lines[2]] and dropped == 1
    assert fit_lines([], 10, tok) == ([], 0)


class FakeKGQA:
    """Four WebQSP-shaped questions: a normal one, a question entity missing from its graph, a disconnected graph,
    and a graph whose every node is a question entity (so the GNN has no candidate)."""

    name = "webqsp"

    def __init__(self):
        connected = [(0, "location.country.languages_spoken", 1), (0, "location.country.capital", 2), (2, "near", 3)]
        self.graphs = [
            _graph(connected, JAMAICA),
            _graph(connected, JAMAICA, q_entities=("atlantis",)),
            _graph([(0, "location.country.capital", 2), (1, "near", 3)], JAMAICA),
            _graph([(0, "borders", 1)], {0: "jamaica", 1: "haiti"}, q_entities=("jamaica", "haiti")),
        ]
        self.records = [SimpleNamespace(question=q, answers=a, q_entities=g.q_entities, graph_id=k)
                        for k, (q, a, g) in enumerate(zip(
                            ["what language is spoken in jamaica", "what language is spoken in atlantis",
                             "what sea is jamaica in", "what borders jamaica"],
                            [["english"], ["english"], ["caribbean"], ["cuba"]], self.graphs))]
        self.split = {"train": [0, 2], "val": [0], "test": [0, 1, 2, 3]}
        rng = np.random.default_rng(0)
        self.question_emb = rng.normal(size=(4, 8)).astype(np.float32)
        self.question_emb_masked = rng.normal(size=(4, 8)).astype(np.float32)  # precomputed, as question_emb is
        # one row per node and per edge of each graph, in order: a table of distinct texts, as GraphQADataset's
        self.offsets = np.cumsum([0] + [g.num_nodes + g.num_edges for g in self.graphs])
        self.text_emb = rng.normal(size=(self.offsets[-1], 8)).astype(np.float32)

    def graph(self, i):
        return self.graphs[i]

    def text_rows(self, i, g):
        start, n = self.offsets[i], g.num_nodes
        return np.arange(start, start + n), np.arange(start + n, start + n + g.num_edges)

    def embeddings(self, i, g):
        nodes, edges = self.text_rows(i, g)
        return self.text_emb[nodes], self.text_emb[edges]

    def edge_embeddings(self, i, g):
        return self.embeddings(i, g)[1]

    def prefetch(self, indices, nodes=True):
        return 0  # the vectors are made in memory: nothing to encode


@pytest.fixture(scope="module")
def generator(tiny_llm_dir, tmp_path_factory):
    ds = FakeKGQA()
    train = [rag_example("0", ds.records[0].question, ["jamaica -> location.country.languages_spoken -> english"],
                         ["english"]),
             rag_example("2", ds.records[2].question, [], ["caribbean"])]
    val = [rag_example("0", ds.records[0].question, [], ["english"])]
    run_dir = tmp_path_factory.mktemp("gen")
    model, history = train_lora_llm(train, val, run_dir, LLMConfig(model=tiny_llm_dir, max_new_tokens=6),
                                    TrainConfig(lr=1e-3, num_epochs=1, batch_size=2), max_txt_len=128)
    return model, history, run_dir


def test_a_dataset_of_plain_question_vectors_brings_its_own_masked_ones_or_serves_unmasked_reasoners_only():
    from torch_geometric.data import Batch

    from gr_core.gnn_rag import ReaRev, ReasonerConfig, question_data

    ds = FakeKGQA()
    assert torch.equal(question_data(ds, 0).q_masked, torch.from_numpy(ds.question_emb_masked[0]).view(1, -1))
    del ds.question_emb_masked  # a plain array names no encoder to encode the masked questions with
    bare = Batch.from_data_list([question_data(ds, 0)])
    assert "q_masked" not in bare
    with torch.no_grad():
        assert torch.isfinite(ReaRev(8, ReasonerConfig(entity_dim=8, mask_topic=False)).eval()(bare)).all()
        with pytest.raises(ValueError, match="q_masked"):
            ReaRev(8, ReasonerConfig(entity_dim=8)).eval()(bare)


def test_lora_generator_trains_checkpoints_and_reloads_without_retraining(generator, tiny_llm_dir):
    model, history, run_dir = generator
    table = training_table({"webqsp": {"answer_generator": {"history": history, "train_examples": 2, "val_examples": 1,
                                                            "seconds": 1.0}, "relation_path_seconds": {"webqsp": 0.1}}})
    epoch = history[0]
    assert table.to_dict("records") == [{"family": "webqsp", "model": "answer_generator", "train examples": 2,
                                         "val examples": 1, "epochs": 1, "final val loss": round(epoch["val_loss"], 3),
                                         "epoch seconds": round(epoch["train_seconds"] + epoch["val_seconds"], 1),
                                         "seconds": 1.0}]
    assert len(history) == 1 and (run_dir / "ckpt" / "best.pt").is_file() and (run_dir / "history.json").is_file()
    assert all("lora" in n for n in model.trainable_parameters())
    ds = FakeKGQA()
    train = [rag_example("0", ds.records[0].question, ["jamaica -> location.country.languages_spoken -> english"],
                         ["english"]), rag_example("2", ds.records[2].question, [], ["caribbean"])]
    val = [rag_example("0", ds.records[0].question, [], ["english"])]
    again, history2 = train_lora_llm(train, val, run_dir, LLMConfig(model=tiny_llm_dir, max_new_tokens=6),
                                     TrainConfig(lr=1e-3, num_epochs=1, batch_size=2), max_txt_len=128)
    assert history2 == history  # same config and data: the finished checkpoint is reused, nothing retrains
    for (n, a), b in zip(model.trainable_state().items(), again.trainable_state().values()):
        assert torch.equal(a, b), n


def test_no_retrieval_answers_come_from_the_untuned_llm(tiny_llm_dir):
    tuned = GraphLLM(ModelConfig(llm=LLMConfig(model=tiny_llm_dir), lora=LoRAConfig(), graph_source="none"))
    with torch.no_grad():
        for n, p in tuned.trainable_parameters().items():
            p.add_(torch.randn_like(p) * 0.5)  # make the adapters matter
    base = GraphLLM(ModelConfig(llm=LLMConfig(model=tiny_llm_dir), graph_source="none"))
    ex = [rag_example("0", "what is spoken in jamaica", None, ["english"])]
    batch = base.collate(base.tokenize(ex), with_label=True)
    with torch.no_grad():
        base_loss = base(batch)[0]
        tuned_loss = tuned(tuned.collate(tuned.tokenize(ex), with_label=True))[0]
        with tuned.llm.disable_adapter():
            disabled_loss = tuned(tuned.collate(ex, with_label=True))[0]
    assert torch.allclose(disabled_loss, base_loss) and not torch.allclose(tuned_loss, base_loss)
    assert answer_examples(tuned, ex, 1, adapters=False)[0] == answer_examples(base, ex, 1)[0]


def test_beam_search_returns_every_beam(generator):
    model, _, _ = generator
    from gr_core.gnn_rag.generation import generate_relation_paths

    ex = model.tokenize([rag_example("0", "q", [], ["a"]), rag_example("1", "another q", [], ["b"])])
    beams = model.generate_beams(model.collate(ex, with_label=False), num_beams=3, max_new_tokens=4)
    assert len(beams) == 2 and all(len(b) == 3 for b in beams)
    paths = generate_relation_paths(model, ["q one", "q two", "q three"], beams=3, batch_size=2)
    assert len(paths) == 3 and all(isinstance(p, list) and len(p) <= 3 for p in paths)


def test_every_retriever_answers_and_bad_input_is_counted_not_raised(generator):
    model, _, _ = generator
    ds = FakeKGQA()
    probs = [np.array([0.01, 0.9, 0.05, 0.04]), np.array([0.01, 0.9, 0.05, 0.04]),
             np.array([0.01, 0.01, 0.08, 0.9]), np.array([0.5, 0.5])]
    rel = [[("location.country.languages_spoken",)], [("location.country.languages_spoken",)], [("nope",)], []]
    rows = answer_with_evidence("webqsp", ds, [0, 1, 2, 3], probs, model, rel, RETRIEVERS, GNNRAGConfig(), batch_size=4)
    assert len(rows) == 4 * len(RETRIEVERS) and set(rows.retriever) == set(RETRIEVERS)
    by = {(r.retriever, r.index): r for r in rows.itertuples()}
    assert by[("gnn", 0)].coverage == 1.0 and by[("gnn", 0)].hops == 1 and by[("rog", 0)].coverage == 1.0
    # RoG's one line is also one of the GNN's: deduplicated in the union
    assert by[("gnn+rog", 0)].evidence_lines == by[("gnn", 0)].evidence_lines == 2
    assert by[("none", 0)].evidence_lines == 0 and by[("none", 0)].coverage == 0.0
    assert all(by[(r, 1)].missing_seed == 1 for r in RETRIEVERS)  # "atlantis" is not in its graph
    assert by[("gnn", 1)].no_path >= 1 and by[("rog", 1)].ungrounded
    # disconnected: caribbean (p 0.9) has no path from jamaica, kingston (0.08) has one
    assert by[("gnn", 2)].no_path == 1 and by[("gnn", 2)].evidence_lines == 1 and by[("rog", 2)].ungrounded
    assert by[("gnn", 3)].empty_candidates and by[("gnn_pcst", 3)].empty_candidates
    assert np.isnan(by[("gnn", 3)].hops)  # cuba is not in the graph: unreachable
    assert (rows.input_tokens > 0).all() and rows.prediction.map(lambda p: isinstance(p, str)).all()
    # what the grounded rule and the failure table read: the GNN's top candidate and the kind of the first line
    assert by[("gnn", 0)].gnn_top == "english" and by[("gnn", 0)].gold_in_candidates and pd.isna(by[("gnn", 3)].gnn_top)
    assert set(rows.answer_kind) <= {"gold", "another candidate", "evidence node", "outside the evidence", "no node",
                                     "empty"}
    assert rows.grounded_fallback.map(lambda f: isinstance(f, bool)).all()
    table = retriever_table(rows)
    gnn = table[table.retriever == "gnn"].iloc[0]
    assert gnn["questions"] == 4 and gnn["empty candidate sets"] == 1 and gnn["missing question entities"] == 1
    assert gnn["paper Hit"] == 85.7 and table.set_index("retriever").loc["rog", "LLM calls"] == 4
    low, high = wilson_interval(gnn["Hit@1"] / 100 * 4, 4)  # Hit@1 over its 4 questions, in percent
    assert (gnn["Hit@1 low"], gnn["Hit@1 high"]) == (round(100 * low, 1), round(100 * high, 1))
    hops = hop_table(rows)
    assert set(hops.hops) == {"1", "unreachable"} and (hops.questions > 0).all()
    metrics = metrics_record(rows)
    assert set(metrics["webqsp"]) == set(RETRIEVERS) and {"Hit", "Hit@1", "F1"} <= set(metrics["webqsp"]["gnn"])
    view = one_question(rows, "webqsp", 2)
    assert list(view.retriever) == list(RETRIEVERS) and (rows.loc[view.index, "index"] == 2).all()


def test_collect_evidence_requires_probabilities_for_gnn_retrievers_and_rejects_unknown_names(generator):
    ds = FakeKGQA()
    with pytest.raises(ValueError, match="node probabilities"):
        collect_evidence(ds, 0, None, None, ("gnn",))
    assert collect_evidence(ds, 0, None, [("location.country.capital",)], ("none", "rog", "pcst"))["rog"].lines == \
        ["jamaica -> location.country.capital -> kingston"]
    # GNN-RAG+RA: RoG's lines first, then the GNN's not among them (the evidence budget cuts from the end)
    ev = collect_evidence(ds, 0, np.array([0.01, 0.04, 0.05, 0.9]), [("location.country.capital",)],
                          ("gnn", "rog", "gnn+rog"))
    assert ev["rog"].lines and [x for x in ev["gnn"].lines if x not in ev["rog"].lines]  # each brings its own
    assert ev["gnn+rog"].lines == ev["rog"].lines + [x for x in ev["gnn"].lines if x not in ev["rog"].lines]
    with pytest.raises(ValueError, match="unknown retrievers"):
        answer_with_evidence("webqsp", ds, [0], None, generator[0], None, ("bm25",))


def test_a_stopped_llm_half_resumes_after_its_last_finished_key(tiny_llm_dir, tmp_path, monkeypatch):
    import gr_core.studies.gnn_rag_llm as llm_half

    ds = FakeKGQA()
    ds.config = "fake"  # the data key of a real dataset is its cache key; here a constant
    monkeypatch.setattr(llm_half, "cache_key", lambda config: config)
    probs = [np.array([0.01, 0.9, 0.05, 0.04]), np.array([0.01, 0.9, 0.05, 0.04]),
             np.array([0.01, 0.01, 0.08, 0.9]), np.array([0.5, 0.5])]
    results = {"webqsp": {"ds": ds, "test_indices": [0, 1, 2, 3], "probs": probs}}
    kw = dict(llm=LLMConfig(model=tiny_llm_dir, max_new_tokens=4), train=TrainConfig(lr=1e-3, num_epochs=1,
              batch_size=2, eval_batch_size=4), retrievers=("none", "gnn"))
    first = llm_half.run_gnn_rag(results, tmp_path, **kw)
    answered, loaded = [], []
    real, real_train = llm_half.answer_with_evidence, llm_half.train_lora_llm
    monkeypatch.setattr(llm_half, "answer_with_evidence", lambda *a, **k: answered.append(1) or real(*a, **k))
    monkeypatch.setattr(llm_half, "train_lora_llm", lambda *a, **k: loaded.append(1) or real_train(*a, **k))
    again = llm_half.run_gnn_rag(results, tmp_path, **kw)
    assert not answered and not loaded  # every key finished: reloaded, and no generator loaded to say so
    pd.testing.assert_frame_equal(again["rows"], first["rows"])
    kept = json.loads(json.dumps(first["training"]))["webqsp"]  # as the record kept it; no seconds spent this time
    assert again["training"]["webqsp"] == {**kept, "answer_generator": {**kept["answer_generator"], "seconds": 0.0}}
    other = {"webqsp": {**results["webqsp"], "probs": [p[::-1].copy() for p in probs]}}
    llm_half.run_gnn_rag(other, tmp_path, **kw)
    assert answered == [1]  # another reasoner's probabilities: answered again
    from gr_core.config import resolve_device  # noqa: PLC0415
    from gr_core.precision import dtype_name, resolve_dtype  # noqa: PLC0415

    # "auto" resolved to another precision (GR_DTYPE, another machine): answers made in the first were reloaded
    monkeypatch.setenv("GR_DTYPE", "float32" if dtype_name(resolve_dtype("auto", resolve_device("auto"))) != "float32"
                       else "bfloat16")
    llm_half.run_gnn_rag(other, tmp_path, **kw)  # the answers on file are other's
    assert answered == [1, 1]


def test_a_family_answered_over_two_runs_reloads_without_an_llm_and_keeps_each_keys_path_time(tiny_llm_dir, tmp_path,
                                                                                               monkeypatch):
    import gr_core.studies.gnn_rag_llm as llm_half

    ds = FakeKGQA()
    ds.config = "fake"
    monkeypatch.setattr(llm_half, "cache_key", lambda config: config)
    probs = [np.array([0.01, 0.9, 0.05, 0.04]), np.array([0.01, 0.9, 0.05, 0.04]),
             np.array([0.01, 0.01, 0.08, 0.9]), np.array([0.5, 0.5])]
    key = lambda rows: {"ds": ds, "test_indices": rows, "probs": [probs[i] for i in rows]}  # noqa: E731
    kw = dict(llm=LLMConfig(model=tiny_llm_dir, max_new_tokens=4), train=TrainConfig(lr=1e-3, num_epochs=1,
              batch_size=2, eval_batch_size=4), retrievers=("none", "rog"))
    llm_half.run_gnn_rag({"webqsp": key([0, 1])}, tmp_path, **kw)  # a stop after the first key
    both = {"webqsp": key([0, 1]), "webqsp-b": key([2, 3])}  # one family: the same dataset name
    full = llm_half.run_gnn_rag(both, tmp_path, **kw)
    loaded = []
    real = llm_half.train_lora_llm
    monkeypatch.setattr(llm_half, "train_lora_llm", lambda *a, **k: loaded.append(1) or real(*a, **k))
    again = llm_half.run_gnn_rag(both, tmp_path, **kw)
    assert not loaded and set(again["relation_paths"]) == {"webqsp", "webqsp-b"}
    pd.testing.assert_frame_equal(again["rows"], full["rows"])
    records = {k: json.loads((tmp_path / f"{k}-answers.json").read_text()) for k in both}
    times = again["training"]["webqsp"]["relation_path_seconds"]
    assert times == {k: records[k]["value"]["relation_path_seconds"] for k in both}  # each key's own, as recorded
    assert again["training"]["webqsp"]["relation_generator"]["seconds"] == 0.0


def test_a_reply_line_names_the_longest_node_it_contains_and_the_first_line_is_classified():
    names = {normalize(n): n for n in ("Since Otar Left", "Otar", "New York City", "York")}
    assert named_node("since otar left.", names) == "Since Otar Left"
    assert named_node("It is New York City, I think", names) == "New York City"  # the longest, not "York"
    assert named_node("Yorkshire", names) is None and named_node("  ", names) is None  # whole words only
    gold, cands, shown, graph = ["Whip It"], ["Whip It", "Lucky You"], ["Drew Barrymore", "Whip It", "Lucky You"], \
        ["Drew Barrymore", "Whip It", "Lucky You", "Firestarter"]
    kinds = {reply: answer_kind(reply, gold, cands, shown, graph) for reply in
             ("whip it\nlucky you", "Lucky You\nWhip It", "Drew Barrymore", "Firestarter", "Bruce\nBruce", "\n\n")}
    assert kinds == {"whip it\nlucky you": "gold", "Lucky You\nWhip It": "another candidate",
                     "Drew Barrymore": "evidence node", "Firestarter": "outside the evidence",
                     "Bruce\nBruce": "no node", "\n\n": "empty"}


def test_a_grounded_reply_keeps_the_evidence_nodes_it_names_or_falls_back_to_the_gnn_top_candidate():
    shown = ["Whip It", "Lucky You"]
    assert ground_reply("Lucky You!\nBruce\nlucky you\nWhip It", shown, "Whip It") == ("Lucky You\nWhip It", False)
    assert ground_reply("Bruce\nBruce", shown, "Whip It") == ("Whip It", True)
    assert ground_reply("", shown, None) == ("", True)  # no candidate either: an empty answer, flagged


def test_grounded_rows_failures_and_the_paired_table_against_the_gnn_alone():
    rows = pd.DataFrame({
        "dataset": ["webqsp"] * 4, "retriever": ["gnn"] * 4, "index": [0, 1, 2, 3],
        "prediction": ["Lucky You\nWhip It", "Bruce", "Whip It", ""], "grounded": ["Lucky You\nWhip It", "Whip It",
                                                                                 "Whip It", "Whip It"],
        "grounded_fallback": [False, True, False, True], "answers": [["Whip It"]] * 4,
        "gold_in_candidates": [True, True, True, False],
        "answer_kind": ["another candidate", "no node", "gold", "empty"],
        "gnn_h1": [1.0, 1.0, 1.0, 0.0], "gnn_f1": [0.5, 0.5, 0.5, 0.0]})
    rows = pd.concat([rows, pd.DataFrame([kgqa_scores(p, a) for p, a in zip(rows.prediction, rows.answers)])], axis=1)
    both = with_grounded(rows)
    grounded = both[both.retriever == "gnn grounded"].set_index("index")
    assert len(both) == 8 and list(grounded.hit1) == [0.0, 1.0, 1.0, 1.0]  # the fallback to the GNN's top answers
    assert (both[both.retriever == "gnn"].prediction == rows.prediction).all()  # the free-text rows are kept as is
    fail = failure_table(both).set_index("retriever").loc["gnn"]
    assert fail["gold among candidates"] == 3 and fail["first line not gold"] == 2
    assert fail["another candidate"] == 50.0 and fail["no node"] == 50.0 and fail["gold later"] == 50.0
    assert fail["GNN right"] == 100.0
    versus = against_gnn(both).set_index("retriever")
    assert versus.loc["gnn", "Hit@1"] == 25.0 and versus.loc["gnn", "GNN H@1"] == 75.0
    assert versus.loc["gnn", "GNN only right"] == 2 and versus.loc["gnn grounded", "Hit@1"] == 75.0


def test_the_generator_can_train_on_a_held_out_reasoners_paths_instead_of_gold_paths(tiny_llm_dir):
    from gr_core.gnn_rag import ReasonerConfig, ReasonerTrainConfig
    from gr_core.llm import load_tokenizer
    from gr_core.studies.gnn_rag import crossfit_evidence, generator_evidence

    ds = FakeKGQA()
    cfg, tcfg = ReasonerConfig(entity_dim=8), ReasonerTrainConfig(num_epochs=1, seed=0)
    evidence = crossfit_evidence(ds, [0, 2], [3], cfg, tcfg)
    assert set(evidence) == {0, 2, 3} and all(isinstance(v, list) for v in evidence.values())
    assert evidence[3] == []  # every node a question entity: no candidate, no line
    tok = load_tokenizer(LLMConfig(model=tiny_llm_dir))
    gold_ex, gold_rel, gold_counts = training_examples([ds], None, "train", tok)  # question 2 has no gold path
    assert len(gold_ex) == 1 and gold_counts == {"questions": 2, "without_gold_path": 1}
    seen = ["jamaica -> location.country.capital -> kingston",
            "jamaica -> location.country.languages_spoken -> english"]
    ex, rel, counts = training_examples([ds], None, "train", tok, evidence=[{0: seen}])
    assert [e.desc for e in ex] == [gnn_rag_parts(seen, "q")[0]] != [e.desc for e in gold_ex]
    assert [e.label for e in ex] == ["english"] and rel == gold_rel  # relation paths still come from gold paths
    assert counts == gold_counts | {"gold_not_in_evidence": 0}
    ex, _, counts = training_examples([ds], None, "train", tok, evidence=[{0: seen[:1]}])
    assert ex == [] and counts["gold_not_in_evidence"] == 1  # a label the evidence cannot support: left out
    assert generator_evidence("gold", {}, 96, 24, cfg, tcfg) is None
    with pytest.raises(ValueError, match="llm_train_evidence"):
        generator_evidence("silver", {}, 96, 24, cfg, tcfg)
