import pytest
import torch
from torch_geometric.data import Data

from gr_core.config import LLMConfig
from gr_core.g_retriever.graph_encoder import GNNConfig, GraphEncoder
from gr_core.g_retriever.model import METHODS, Example, GraphLLM, ModelConfig, method_config

SMALL_GNN = GNNConfig(hidden=16, num_layers=2, heads=2)


def _example(n_rows: int, label: str = "bob|alice", seed: int = 0) -> Example:
    g = torch.Generator().manual_seed(seed)
    return Example(uid=str(n_rows), question="Question: who wrote it?\nAnswer: ",
                   desc="node_id,node_attr\n" + "".join(f"{i},entity {i}\n" for i in range(n_rows)),
                   label=label, answers=label.split("|"),
                   data=Data(x=torch.randn(3, 8, generator=g), edge_index=torch.tensor([[0, 1], [1, 2]]),
                             edge_attr=torch.randn(2, 8, generator=g), num_nodes=3))


def _model(tiny_llm_dir, method="g_retriever", **kw) -> GraphLLM:
    torch.manual_seed(0)
    return GraphLLM(method_config(method, llm=LLMConfig(model=tiny_llm_dir), gnn=SMALL_GNN, **kw), in_dim=8)


@pytest.mark.parametrize("kind", ["gt", "gat", "gcn"])
def test_graph_encoder_pools_one_vector_per_graph(kind):
    from torch_geometric.data import Batch

    enc = GraphEncoder(8, GNNConfig(kind=kind, hidden=16, num_layers=3, heads=2))
    b = Batch.from_data_list([_example(1).data, _example(2, seed=1).data])
    out = enc(b.x, b.edge_index, b.edge_attr, b.batch, 2)
    assert out.shape == (2, 16)


def test_a_training_batch_of_one_node_is_normalized_with_running_statistics():
    """A batch whose graphs hold one node in all has no BatchNorm statistics: it trains as evaluation normalizes it."""
    torch.manual_seed(0)
    enc = GraphEncoder(8, GNNConfig(hidden=16, num_layers=3, heads=2))
    x, no_edges = torch.randn(1, 8), torch.zeros(2, 0, dtype=torch.long)
    args = (x, no_edges, torch.zeros(0, 8), torch.zeros(1, dtype=torch.long), 1)
    stats = [n.running_mean.clone() for n in enc.norms]
    out = enc.train()(*args)
    out.sum().backward()
    assert all(p.grad is not None for p in enc.norms[0].parameters())
    assert all(torch.equal(n.running_mean, s) for n, s in zip(enc.norms, stats))
    assert torch.allclose(out, enc.eval()(*args))
    # the same under DDP, whose SyncBatchNorm is no BatchNorm1d (and would fail on one row too)
    sync = torch.nn.SyncBatchNorm.convert_sync_batchnorm(enc).train()
    assert isinstance(sync.norms[0], torch.nn.SyncBatchNorm) and torch.allclose(sync(*args), out)


def test_gt_encoder_uses_edge_features_and_gat_does_not():
    from torch_geometric.data import Batch

    d = _example(1).data
    changed = Data(x=d.x, edge_index=d.edge_index, edge_attr=d.edge_attr + 1.0, num_nodes=3)
    for kind, uses_edges in (("gt", True), ("gat", False)):
        torch.manual_seed(0)
        enc = GraphEncoder(8, GNNConfig(kind=kind, hidden=16, num_layers=2, heads=2)).eval()
        a, b = (Batch.from_data_list([g]) for g in (d, changed))
        diff = (enc(a.x, a.edge_index, a.edge_attr, a.batch, 1)
                - enc(b.x, b.edge_index, b.edge_attr, b.batch, 1)).abs().max()
        assert (diff > 1e-6) == uses_edges, kind


def test_every_method_is_a_configuration_of_the_one_model():
    inference_only = ("question_only", "zero_shot", "zero_cot", "cot_bag", "kaping")
    assert set(inference_only) < set(METHODS)
    for name in METHODS:
        cfg = method_config(name)
        assert isinstance(cfg, ModelConfig)
        assert cfg.trainable == (name not in inference_only), name
    assert method_config("g_retriever").lora is None and method_config("g_retriever_lora").lora.r == 8
    assert method_config("graph_token").use_desc is False and method_config("prompt_tuning").num_soft_tokens == 10
    with pytest.raises(ValueError, match="unknown method"):
        method_config("g_retreiver")


def train_step(model, examples, autocast: bool = False) -> torch.Tensor:
    """One AdamW step (lr 1e-2) on ``examples``; returns the summed label loss (bf16 autocast on CUDA if asked)."""
    opt = torch.optim.AdamW(model.trainable_parameters().values(), lr=1e-2)
    batch = model.collate(model.tokenize(examples), with_label=True).to(model.device)
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
        loss, n = model(batch)
    (loss / n).backward()
    opt.step()
    return loss


def test_frozen_llm_really_stays_frozen_and_only_gnn_and_projector_train(tiny_llm_dir):
    model = _model(tiny_llm_dir)
    names = set(model.trainable_parameters())
    assert names and all(n.startswith(("gnn.", "projector.")) for n in names)
    assert not any(p.requires_grad for p in model.llm.parameters())
    llm_before = {n: p.detach().clone() for n, p in model.llm.named_parameters()}
    proj_before = model.projector[0].weight.detach().clone()
    train_step(model, [_example(1), _example(3, seed=1)])
    assert all(torch.equal(p, llm_before[name]) for name, p in model.llm.named_parameters())
    assert not torch.equal(model.projector[0].weight, proj_before)


def test_lora_trains_only_adapters_on_q_and_v(tiny_llm_dir):
    model = _model(tiny_llm_dir, "lora")
    names = list(model.trainable_parameters())
    assert names and all("lora_" in n for n in names)
    assert {n.split(".self_attn.")[1].split(".")[0] for n in names} == {"q_proj", "v_proj"}


def test_projector_width_is_derived_from_the_llm(tiny_llm_dir):
    model = _model(tiny_llm_dir)
    assert model.projector[-1].out_features == model.llm.config.hidden_size == 32
    assert (model.projector[0].in_features == SMALL_GNN.hidden
            and model.projector[0].out_features == 2 * SMALL_GNN.hidden)
    with pytest.raises(ValueError, match="without a projector"):
        _model(tiny_llm_dir, projector=False)
    no_proj = GraphLLM(method_config("g_retriever", llm=LLMConfig(model=tiny_llm_dir),
                                     gnn=GNNConfig(hidden=32, num_layers=2, heads=2), projector=False), in_dim=8)
    assert no_proj.projector is None


def test_token_stream_and_label_mask_are_exact(tiny_llm_dir):
    model = _model(tiny_llm_dir)
    tok = model.tokenizer
    batch = model.collate(model.tokenize([_example(1), _example(4, seed=1)]), with_label=True)
    text = model.decode_stream(batch, 0)
    user = "<|im_start|>user\n"
    assert text.startswith("<|im_start|>system\n") and user + "<soft>node_id,node_attr\n0,entity 0\n" in text
    assert text.endswith("Question: who wrote it?\nAnswer: <|im_end|>\n<|im_start|>assistant\nbob|alice<|im_end|>")
    assert text.count("<soft>") == 1 and "[/s]" not in text
    for row in range(2):
        labels = batch.labels[row]
        kept = labels[labels != -100]
        assert tok.decode(kept) == "bob|alice<|im_end|>"
        assert int(kept[-1]) == tok.eos_token_id  # the real EOS id, not PyG's literal "[/s]"
        # the supervised positions are exactly the last len(label) positions of the row
        assert (labels[-len(kept):] != -100).all() and (labels[:-len(kept)] == -100).all()
    # left padding: the shorter row starts with padding that is masked out
    assert batch.attention_mask[0, 0] == 0 and batch.attention_mask[1].all()


def test_desc_is_cut_to_max_txt_len_and_the_question_never(tiny_llm_dir):
    model = _model(tiny_llm_dir, max_txt_len=5)
    ex = model.tokenize([_example(50)])[0]
    assert len(ex.desc_ids) == 5
    assert model.tokenizer.decode(ex.question_ids) == "Question: who wrote it?\nAnswer: "


def test_labels_are_cut_to_max_new_tokens_plus_eos(tiny_llm_dir):
    model = GraphLLM(method_config("lora", llm=LLMConfig(model=tiny_llm_dir, max_new_tokens=3)), in_dim=8)
    ex = model.tokenize([_example(1, label="a|b|c|d|e|f")])[0]
    assert len(ex.label_ids) == 4 and ex.label_ids[-1] == model.template.eos_id


def test_loss_on_label_logits_only_equals_the_full_hf_loss(tiny_llm_dir):
    model = _model(tiny_llm_dir)
    model.eval()
    batch = model.collate(model.tokenize([_example(1), _example(5, label="carol", seed=1)]), with_label=True)
    loss_sum, n = model(batch)
    full = model.llm(inputs_embeds=model.embed(batch), attention_mask=batch.attention_mask,
                     position_ids=model.position_ids(batch.attention_mask), labels=batch.labels)
    assert torch.allclose(loss_sum / n, full.loss, atol=1e-5)


def test_left_padding_does_not_change_a_rows_loss(tiny_llm_dir):  # its answer: the next test
    model = _model(tiny_llm_dir)
    model.eval()
    short, long = model.tokenize([_example(1), _example(8, seed=1)])
    alone_sum, alone_n = model(model.collate([short], with_label=True))
    both = model.collate([short, long], with_label=True)
    embeds = model.embed(both)
    out = model.llm(inputs_embeds=embeds, attention_mask=both.attention_mask,
                    position_ids=model.position_ids(both.attention_mask))
    labels = both.labels[0]
    logits = out.logits[0, :-1][labels[1:] != -100]
    row_loss = torch.nn.functional.cross_entropy(logits, labels[1:][labels[1:] != -100], reduction="sum")
    assert torch.allclose(row_loss, alone_sum, atol=1e-4)


def test_batched_generation_with_soft_tokens_matches_one_by_one_on_the_real_llm(llm):
    """Left-padded, KV-cached greedy decoding from inputs_embeds gives each row what it gets alone. In fp32: in bf16
    padding changes the rounding of a row's products, and a near tie may then be decided the other way."""
    if llm[0].dtype != torch.float32:
        from gr_core.llm import load_llm

        llm = load_llm(LLMConfig(dtype="float32"))
    model = GraphLLM(method_config("g_retriever", gnn=SMALL_GNN), in_dim=8, llm=llm[0], tokenizer=llm[1]).eval()
    exs = model.tokenize([_example(1, seed=2), _example(12, seed=3)])
    exs[0].question = "Question: what is the capital of France?\nAnswer: "
    model.tokenize(exs)
    batch = model.collate(exs, with_label=False)
    together = model.generate(batch, 8)
    alone = [model.generate(model.collate([ex], with_label=False), 8)[0] for ex in exs]
    assert together == alone and any(together)
    ids = model.generate_ids(batch, 8)  # the new tokens only, as wide as the steps the batch ran
    assert ids.shape[0] == 2 and 1 <= ids.shape[1] <= 8
    assert [t.strip() for t in model.tokenizer.batch_decode(ids, skip_special_tokens=True)] == together


def test_length_groups_are_the_cheapest_split_of_the_sorted_rows():
    """kernels.length_groups: an exact minimum of padded positions + cost per group over consecutive runs of the
    length-sorted rows (checked against every such split), all rows once; cost 0 splits at every distinct length,
    an infinite cost keeps one group."""
    import itertools
    import random

    from gr_core.kernels import length_groups

    rng = random.Random(0)
    for _ in range(30):
        lengths = [rng.randint(2, 600) for _ in range(rng.randint(1, 7))]
        cost = rng.choice([0, 16, 128, 512])
        s = sorted(lengths)

        def price(groups):
            return sum(len(g) * max(lengths[i] for i in g) + cost for g in groups)

        brute = min(sum(len(s[a:b]) * s[b - 1] + cost for a, b in zip((0, *cuts), (*cuts, len(s))))
                    for k in range(len(s)) for cuts in itertools.combinations(range(1, len(s)), k))
        groups = length_groups(lengths, cost)
        assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
        assert price(groups) == brute
    assert len(length_groups([5, 9, 9, 30], 0)) == 3 and len(length_groups([5, 9, 9, 30], float("inf"))) == 1


def test_greedy_answers_from_a_grouped_prefill_equal_the_padded_batchs(tiny_llm_dir, monkeypatch, tmp_path):
    """kernels.grouped_prefill, through GraphLLM.generate_ids and llm.generate_text: prompts of very different
    lengths encoded in separate groups (one row each, and groups that pad rows inside them) give the first step's
    scores of one padded prefill (fp32) and the same greedy tokens; one group, a one-token row, a model with
    sliding-window layers or a generation config with beams take the plain path."""
    from transformers import AutoTokenizer, Gemma3ForCausalLM, Gemma3TextConfig

    from gr_core import kernels
    from gr_core.llm import generate_text

    model = _model(tiny_llm_dir).eval()
    batch = model.collate(model.tokenize([_example(n, seed=n) for n in (1, 2, 40, 41, 90)]), with_label=False)
    lengths = batch.attention_mask.sum(1).tolist()
    mixed = next(c for c in (8, 16, 32, 64) if 1 < len(kernels.length_groups(lengths, c)) < len(lengths))

    def first_scores_and_ids(cost):
        monkeypatch.setattr(kernels, "PREFILL_GROUP_COST", cost)
        with torch.inference_mode():
            cache = kernels.grouped_prefill(model.llm, batch.attention_mask, inputs_embeds=model.embed(batch))
            scores = model.llm.generate(inputs_embeds=model.embed(batch), attention_mask=batch.attention_mask,
                                        past_key_values=cache, max_new_tokens=1, do_sample=False, output_scores=True,
                                        return_dict_in_generate=True, pad_token_id=model.template.pad_id).scores[0]
        return scores, model.generate_ids(batch, 6), cache

    padded, padded_ids, none = first_scores_and_ids(float("inf"))
    assert none is None
    for cost in (0, mixed):  # five one-row groups; groups with padding inside them
        grouped, grouped_ids, cache = first_scores_and_ids(cost)
        assert cache.get_seq_length() == batch.input_ids.shape[1]  # T - 1 prefilled, then generate's last position
        assert torch.allclose(grouped, padded, atol=1e-5) and torch.equal(grouped_ids, padded_ids)
    assert kernels.grouped_prefill(model.llm, batch.attention_mask[:1], inputs_embeds=model.embed(batch)[:1]) is None
    monkeypatch.setattr(model.llm.generation_config, "num_beams", 2)
    assert kernels.grouped_prefill(model.llm, batch.attention_mask, inputs_embeds=model.embed(batch)) is None
    monkeypatch.setattr(model.llm.generation_config, "num_beams", 1)
    prompts = ["Hi there, friend", "Name three colours of the rainbow, then three more, then say why the sky is blue."]
    model.tokenizer.padding_side = "left"  # as generate_text pads
    encoded = model.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    monkeypatch.setattr(kernels, "PREFILL_GROUP_COST", 0)
    assert kernels.grouped_prefill(model.llm, encoded["attention_mask"], input_ids=encoded["input_ids"]) is not None
    monkeypatch.setattr(kernels, "PREFILL_GROUP_COST", float("inf"))
    plain = generate_text(model.llm, model.tokenizer, prompts, 5)
    monkeypatch.setattr(kernels, "PREFILL_GROUP_COST", 0)
    assert generate_text(model.llm, model.tokenizer, prompts, 5) == plain
    tok = AutoTokenizer.from_pretrained(tiny_llm_dir)
    torch.manual_seed(0)
    gemma = Gemma3ForCausalLM(Gemma3TextConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, head_dim=16, sliding_window=8, layer_types=["sliding_attention", "full_attention"],
        pad_token_id=tok.pad_token_id)).eval()
    assert kernels.grouped_prefill(gemma, encoded["attention_mask"], input_ids=encoded["input_ids"]) is None
    assert len(generate_text(gemma, tok, prompts, 3)) == 2


def test_prompt_tuning_vectors_start_as_the_init_text_embeddings(tiny_llm_dir):
    torch.manual_seed(0)
    model = GraphLLM(method_config("prompt_tuning", llm=LLMConfig(model=tiny_llm_dir)), in_dim=8,
                     soft_prompt_init="Please answer")
    ids = model.tokenizer("Please answer")["input_ids"]  # with the model's special tokens, as the GR code (none here)
    expected = model.llm.get_input_embeddings().weight[(ids * 10)[:10]]
    assert model.soft_prompt.shape == (10, 32) and torch.equal(model.soft_prompt.data, expected)
    assert list(model.trainable_parameters()) == ["soft_prompt"]
    text = model.decode_stream(model.collate(model.tokenize([_example(1)]), with_label=False))
    assert text.count("<soft>") == 10


def test_prompt_tuning_init_keeps_a_models_begin_token_as_the_gr_code(tiny_llm_dir):
    import copy

    from gr_core.llm import load_llm

    llm, tokenizer = load_llm(LLMConfig(model=tiny_llm_dir))
    tokenizer = copy.deepcopy(tokenizer)  # the loaded one is shared by the process
    tokenizer.add_bos_token = True  # as Llama-2's: the GR code's first prompt vector is <s>
    torch.manual_seed(0)
    model = GraphLLM(method_config("prompt_tuning", llm=LLMConfig(model=tiny_llm_dir)), in_dim=8, llm=llm,
                     tokenizer=tokenizer, soft_prompt_init="Please answer")
    ids = tokenizer("Please answer")["input_ids"]
    assert ids[0] == tokenizer.bos_token_id and len(ids) == 3
    assert torch.equal(model.soft_prompt.data, llm.get_input_embeddings().weight[(ids * 10)[:10]])


def test_graph_token_has_no_text_graph_and_question_only_has_no_desc(tiny_llm_dir):
    for method in ("graph_token", "question_only"):
        model = _model(tiny_llm_dir, method)
        text = model.decode_stream(model.collate(model.tokenize([_example(3)]), with_label=False))
        assert "node_id" not in text and "Question: who wrote it?" in text
        assert text.count("<soft>") == (1 if method == "graph_token" else 0)


def test_trainable_state_round_trips_including_batchnorm_statistics(tiny_llm_dir):
    model = _model(tiny_llm_dir)
    state = model.trainable_state()
    assert any(k.endswith("running_mean") for k in state)
    other = _model(tiny_llm_dir)
    with torch.no_grad():
        for p in other.trainable_parameters().values():
            p.add_(1.0)
    other.load_trainable_state(state)
    assert all(torch.equal(other.trainable_state()[k], v) for k, v in state.items())
    with pytest.raises(KeyError, match="checkpoint lacks"):
        other.load_trainable_state({})


@pytest.mark.parametrize("norm", ["batch", "rms"])
def test_graph_token_norm_options_put_the_graph_token_at_an_ordinary_tokens_scale(tiny_llm_dir, norm):
    model = _model(tiny_llm_dir, graph_token_norm=norm)
    batch = model.collate([_example(1), _example(2, seed=1), _example(3, seed=2)], with_label=False)
    soft = model.soft_tokens(batch)  # (B, 1, d)
    assert soft.shape == (3, 1, model.d_llm)
    if norm == "rms":
        assert torch.allclose(soft.norm(dim=-1), model.token_norm.expand(3, 1), atol=1e-4)
    else:  # standardized across the batch, then scaled by the embeddings' per-feature std
        assert torch.allclose(soft.mean(0), torch.zeros(1, model.d_llm), atol=1e-4)
    assert any(k.startswith("token_bn.") for k in model.trainable_state()) == (norm == "batch")
    model.train()  # a training batch of one graph (the last, partial one): no batch statistics, no failure
    assert model.soft_tokens(model.collate([_example(1)], with_label=False)).shape == (1, 1, model.d_llm)
    with pytest.raises(ValueError, match="graph_token_norm"):
        ModelConfig(graph_token_norm="layer")


def test_an_empty_system_prompt_drops_the_templates_default(tiny_llm_dir):
    default, empty = _model(tiny_llm_dir), _model(tiny_llm_dir, system_prompt="")
    text = default.tokenizer.decode(default.template.prefix)
    assert "You are a helpful AI assistant" in text
    assert "You are a helpful" not in empty.tokenizer.decode(empty.template.prefix)
    assert len(default.template.prefix) - len(empty.template.prefix) == 16  # SmolLM2's system prompt
    assert empty.template.suffix == default.template.suffix


def test_each_graphs_token_lands_in_its_own_example(tiny_llm_dir):
    model = _model(tiny_llm_dir).eval()
    examples = [_example(1), _example(4, seed=1), _example(2, seed=2)]  # different lengths: different left padding
    batch = model.collate(examples, with_label=False)
    with torch.no_grad():
        soft = model.soft_tokens(batch)  # (3, 1, d)
        embeds = model.embed(batch)
    for b in range(3):
        (pos,) = batch.slot_mask[b].nonzero().flatten().tolist()
        assert torch.equal(embeds[b, pos], soft[b, 0])
    assert not torch.allclose(soft[0], soft[1])  # the graphs differ, so do their tokens


def test_a_model_without_a_chat_template_gets_bos_and_the_gr_codes_inst_markers(tiny_llm_dir):
    """A base model (Gemma's GGUF, a Llama-2 checkpoint): the prompt is BOS + the text, and training wraps the user
    content in the GR code's [INST] ... [/INST] as plain text (the optional Gemma test runs the model itself)."""
    from gr_core.llm import PromptTemplate, chat_prompt, load_tokenizer

    tok = load_tokenizer(LLMConfig(model=tiny_llm_dir))
    assert tok.chat_template and "<|im_start|>" in chat_prompt(tok, "x")  # the tiny model's own template first
    tok.chat_template = None
    assert chat_prompt(tok, "The capital of France is") == (tok.bos_token or "") + "The capital of France is"
    t = PromptTemplate.from_tokenizer(tok)
    assert tok.decode(t.prefix) == (tok.bos_token or "") + "[INST]" and tok.decode(t.suffix) == "[/INST]"
    assert t.eos_id == tok.eos_token_id
