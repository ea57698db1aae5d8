"""The GPU plan (``--dry-run --profile h100|gpu-24gb``): a 7B's memory and time from its shapes, and the loading
options that make it fit (gradient checkpointing, 8-bit / 4-bit weights), checked against torch on tiny models."""
import json
import os
from dataclasses import replace

import pytest
import torch

from gr_core.config import LLM_ADDED_DEFAULTS, LLMConfig, llm_identity, notebook_parameters
from gr_core.gpu_plan import (GB, PAPER_LLM, PUBLISHED, Step, budget_bytes, fix, gnn_activation_bytes, gnn_params,
                              llm_kept_bytes, llm_shapes, loading_options, lora_params, projector_params,
                              shapes_from_config, weight_bytes)

LLAMA2_7B = PUBLISHED[PAPER_LLM.lower()]


def _saved_bytes(run, model=None, inputs=()) -> int:
    """Bytes of the distinct storages autograd saves for backward while ``run()`` runs, parameters and ``inputs``
    left out: the activations a training step keeps."""
    params = list(model.parameters()) if model is not None else []
    skip = {t.untyped_storage().data_ptr() for t in params + list(inputs)}
    seen = {}

    def pack(t):
        s = t.untyped_storage()
        if s.data_ptr() not in skip:
            seen[s.data_ptr()] = s.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        run()
    return sum(seen.values())


def _llama_config(s, **kw):
    from transformers import LlamaConfig

    return LlamaConfig(vocab_size=s.vocab, hidden_size=s.hidden, intermediate_size=s.intermediate,
                       num_hidden_layers=s.layers, num_attention_heads=s.heads, num_key_value_heads=s.kv_heads,
                       tie_word_embeddings=s.tied, max_position_embeddings=4096, **kw)


def test_llama2_7b_weights_are_its_parameters_times_two_bytes_from_its_published_shapes():
    from transformers import LlamaForCausalLM

    s = llm_shapes(PAPER_LLM)
    assert s == LLAMA2_7B and (s.hidden, s.layers, s.intermediate, s.vocab) == (4096, 32, 11008, 32000)
    assert abs(s.params - 6.74e9) / 6.74e9 < 0.01  # the model card's 6.7B; Meta: 6,738,415,616
    with torch.device("meta"):  # transformers' own model from the same shapes, no memory
        model = LlamaForCausalLM(_llama_config(s))
    assert sum(p.numel() for p in model.parameters()) == s.params
    assert weight_bytes(s) == s.params * 2 and f"{weight_bytes(s) / GB:.1f}" == "13.5"
    # 8-bit / 4-bit: only the decoder's linears shrink (embeddings, norms and the output projection stay bf16)
    linear = s.layers * sum(i * o for i, o in s.linears().values())
    assert weight_bytes(s, 2, "8bit") == linear + (s.params - linear) * 2
    assert 3.5 * GB < weight_bytes(s, 2, "4bit") < weight_bytes(s, 2, "8bit") < weight_bytes(s)


def test_the_embedded_smollm2_is_the_published_one_and_a_local_config_is_read(tmp_path):
    from gr_core.llm import embedded_llm_dir

    if os.environ.get("GR_TOKENIZER_DIR"):
        pytest.skip("no embedded LLM here")
    local = shapes_from_config(json.loads((embedded_llm_dir() / "config.json").read_text()), "x", "y")
    assert replace(local, name="", source="", head_dim=0) == replace(llm_shapes("embedded:smollm2-135m-instruct"),
                                                                      name="", source="")
    (tmp_path / "config.json").write_text(json.dumps({**_llama_config(LLAMA2_7B).to_dict(), "num_hidden_layers": 2}))
    assert llm_shapes(str(tmp_path)).layers == 2 and llm_shapes("no/such-model") is None


def test_24_gb_does_not_fit_a_7b_step_until_checkpointing_and_80_gb_fits_it():
    from gr_core.g_retriever.experiments import preset_run_config
    from gr_core.gpu_plan import step_from_run_config

    cfg = preset_run_config("full", "webqsp", "g_retriever_lora", 0, overrides={"llm_model": PAPER_LLM})
    step = step_from_run_config(cfg)
    assert (step.batch_size, step.label_rows, step.lora_r, step.gnn_hidden) == (8, 33, 8, 1024)
    assert step.seq_len == 64 + 1 + 512 + 33  # prompt allowance, graph token, max_txt_len, label + EOS
    plain, ckpt, int8, nf4 = loading_options(LLAMA2_7B, step)
    assert plain.total <= budget_bytes(80) and "fits" in fix([plain, ckpt, int8, nf4], 80)
    assert plain.total > budget_bytes(24)
    assert ckpt.total <= budget_bytes(24)
    assert fix([plain, ckpt, int8, nf4], 24).endswith(f"-p gradient_checkpointing=true fits ({ckpt.total / GB:.1f} GB)")
    # checkpointing keeps one hidden state per layer and token: the activations shrink >10x, the weights do not
    assert ckpt.terms["LLM activations"] * 10 < plain.terms["LLM activations"]
    weights = [m.terms["LLM weights"] for m in (plain, ckpt, int8, nf4)]
    assert weights[0] == weights[1] > weights[2] > weights[3]
    # docs/notebooks.md's worked example is this computation
    from gr_core.paths import repo_root

    doc = (repo_root() / "docs" / "notebooks.md").read_text()
    for m in (plain, ckpt, int8, nf4):
        assert f"{m.total / GB:.1f} GB" in doc
    # a bigger batch no longer fits with checkpointing alone on 24 GB; 8-bit weights then make room
    wide = replace(step, batch_size=16)
    options = loading_options(LLAMA2_7B, wide)
    assert options[1].total > budget_bytes(24) >= options[2].total
    assert "-p gradient_checkpointing=true -p quantization=8bit fits" in fix(options, 24)


@pytest.mark.parametrize("checkpointing", [False, True])
def test_the_llm_activation_formula_is_what_torch_saves_for_a_tiny_llama(checkpointing):
    """A 2-layer Llama (grouped-query attention, eager, bf16, LoRA on q and v as GraphLLM trains it): the bytes the
    plan counts per token and layer are the bytes autograd keeps, to 2%."""
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaForCausalLM

    s = replace(LLAMA2_7B, hidden=64, layers=2, heads=4, kv_heads=2, intermediate=176, vocab=1000)
    torch.manual_seed(0)
    llm = LlamaForCausalLM(_llama_config(s, attn_implementation="eager")).to(torch.bfloat16).requires_grad_(False)
    if checkpointing:
        llm.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    model = get_peft_model(llm, LoraConfig(r=8, lora_alpha=16, lora_dropout=0.05, target_modules=["q_proj", "v_proj"],
                                           bias="none", task_type="CAUSAL_LM")).train()
    step = Step(batch_size=2, seq_len=48, label_rows=9, gnn_kind=None)
    embeds = torch.randn(2, 48, 64, dtype=torch.bfloat16, requires_grad=True)  # the soft token's gradient path
    mask = torch.ones(2, 48, dtype=torch.long)
    mask[0, :7] = 0  # left padding, as GraphLLM collates

    def forward():
        out = model(inputs_embeds=embeds, attention_mask=mask, logits_to_keep=9, use_cache=False)
        target = torch.randint(0, 1000, (2, 8))  # GraphLLM.forward's loss: fp32 logits of the label rows
        torch.nn.functional.cross_entropy(out.logits[:, :-1].float().reshape(-1, 1000), target.reshape(-1))

    measured = _saved_bytes(forward, model)  # with checkpointing, the first layer's input is the embeddings
    expected = llm_kept_bytes(s, step, checkpointing) + 2 * 8 * 1000 * 4  # + the fp32 log-softmax of the loss
    assert expected == pytest.approx(measured, rel=0.02)


@pytest.mark.parametrize("kind", ["gt", "gat", "gcn"])
def test_graph_encoder_parameters_and_activations_are_pygs(kind):
    from torch import nn

    from gr_core.g_retriever.graph_encoder import GNNConfig, GraphEncoder

    torch.manual_seed(0)
    n, e, h, layers, heads, in_dim = 150, 500, 32, 3, 4, 24
    enc = GraphEncoder(in_dim, GNNConfig(kind=kind, hidden=h, num_layers=layers, heads=heads)).train()
    assert sum(p.numel() for p in enc.parameters()) == gnn_params(kind, in_dim, h, layers, heads)
    x, edge_attr = torch.randn(n, in_dim), torch.randn(e, in_dim)
    edge_index, batch = torch.randint(0, n, (2, e)), torch.arange(n) * 3 // n
    measured = _saved_bytes(lambda: enc(x, edge_index, edge_attr, batch, 3), enc, [x, edge_attr, edge_index, batch])
    assert gnn_activation_bytes(kind, n, e, h, layers, heads) == pytest.approx(measured, rel=0.03)
    projector = nn.Sequential(nn.Linear(h, 2 * h), nn.Sigmoid(), nn.Linear(2 * h, 64))
    assert sum(p.numel() for p in projector.parameters()) == projector_params(h, 64)


@pytest.fixture(scope="module")
def llama64_dir(tmp_path_factory):
    """A 2-layer Llama of hidden 64 (built from its config, random, nothing downloaded) with SmolLM2's tokenizer."""
    from conftest import save_tiny_llama

    return save_tiny_llama(tmp_path_factory.mktemp("llama64"), hidden=64, intermediate=176, heads=4, kv_heads=2)


def test_gradient_checkpointing_gives_the_same_lora_step_with_less_kept(llama64_dir):
    """The option as a preset sets it (LLMConfig -> load_llm): one G-Retriever + LoRA training step gives the same
    loss and gradients with checkpointing on as off, and keeps fewer activations."""
    from torch_geometric.data import Data

    from gr_core.g_retriever.graph_encoder import GNNConfig
    from gr_core.g_retriever.model import Example, GraphLLM, method_config

    def step(checkpointing: bool):
        torch.manual_seed(0)
        llm = LLMConfig(model=llama64_dir, dtype="float32", gradient_checkpointing=checkpointing)
        model = GraphLLM(method_config("g_retriever_lora", llm=llm, gnn=GNNConfig(hidden=16, num_layers=2, heads=2)),
                         in_dim=8)
        g = torch.Generator().manual_seed(1)
        examples = [Example(uid=str(k), question=f"Question: who wrote book {k}?\nAnswer: ", label="bob",
                            answers=["bob"], desc="node_id,node_attr\n" + "".join(f"{i},e {i}\n" for i in range(k)),
                            data=Data(x=torch.randn(3, 8, generator=g), edge_index=torch.tensor([[0, 1], [1, 2]]),
                                      edge_attr=torch.randn(2, 8, generator=g), num_nodes=3)) for k in (2, 6)]
        batch = model.collate(model.tokenize(examples), with_label=True)
        model.train()
        torch.manual_seed(2)  # LoRA's dropout masks: checkpointing replays the same ones in its recomputation
        out = {}
        kept = _saved_bytes(lambda: out.update(loss=model(batch)), model)
        (out["loss"][0] / out["loss"][1]).backward()
        assert model.llm.get_base_model().is_activation_checkpointing == checkpointing
        return out["loss"][0].detach(), {n: p.grad for n, p in model.trainable_parameters().items()}, kept

    loss, grads, kept = step(False)
    loss_ckpt, grads_ckpt, kept_ckpt = step(True)
    assert torch.allclose(loss, loss_ckpt)
    assert grads.keys() == grads_ckpt.keys() and any("lora_B" in n for n in grads)
    for name, grad in grads.items():
        assert torch.allclose(grad, grads_ckpt[name], atol=1e-6), name
    assert kept_ckpt < kept / 2
    # LoRA's count from the shapes is peft's
    model_lora = sum(g.numel() for n, g in grads.items() if "lora_" in n)
    assert model_lora == lora_params(replace(LLAMA2_7B, hidden=64, layers=2, heads=4, kv_heads=2, intermediate=176),
                                     8, ("q_proj", "v_proj"))


def test_quantization_without_bitsandbytes_names_the_option_and_the_install(llama64_dir, monkeypatch):
    import importlib.util

    from gr_core.llm import load_llm

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "bitsandbytes"
                        else real(name, *a))
    for q in ("8bit", "4bit"):
        with pytest.raises(ModuleNotFoundError, match=f"quantization='{q}'.*pip install bitsandbytes"):
            load_llm(LLMConfig(model=llama64_dir, quantization=q))
    with pytest.raises(ValueError, match="quantization"):
        LLMConfig(quantization="3bit")


def test_the_options_are_preset_parameters_that_leave_recorded_hashes_alone():
    from gr_core.g_retriever.experiments import preset_run_config
    from gr_core.g_retriever.run_config import RunConfig
    from gr_core.paths import repo_root
    from gr_core.runs import config_hash, read_json

    assert {k: notebook_parameters("full", "03_training")[k] for k in LLM_ADDED_DEFAULTS} == LLM_ADDED_DEFAULTS
    run = repo_root() / "outputs/full/runs/explagraphs-g_retriever-seed0/config.json"
    recorded = read_json(run)
    cfg = RunConfig.read(run)
    assert config_hash(cfg.to_dict()) == recorded["config_hash"] and not set(LLM_ADDED_DEFAULTS) & set(recorded
                                                                                                        ["model"]["llm"])
    on = preset_run_config("full", "webqsp", "g_retriever", 0, overrides={"gradient_checkpointing": True,
                                                                          "quantization": "4bit"})
    assert (on.model.llm.gradient_checkpointing, on.model.llm.quantization) == (True, "4bit")
    assert on.to_dict()["model"]["llm"]["quantization"] == "4bit" and RunConfig.from_dict(on.to_dict()) == on
    off = preset_run_config("full", "webqsp", "g_retriever", 0)
    assert config_hash(on.to_dict()) != config_hash(off.to_dict())
    assert llm_identity({"model": "m", **LLM_ADDED_DEFAULTS}) == {"model": "m"}


def test_full_dry_run_prints_the_7b_plan_for_both_cards():
    from gr_core.plan import render

    text = render("full", "h100")
    assert "GPU plan: meta-llama/Llama-2-7b-chat-hf (the paper's LLM" in text and "6.74 B" in text
    assert "13.48" in text and "time per RoG-webqsp epoch 2826 questions x 610 tokens" in text
    small = render("full", "gpu-24gb", overrides={"llm_model": PAPER_LLM})  # a hub id not downloaded here
    assert "(the preset's LLM) on gpu-24gb, 24 GB" in small and small.count("GPU plan:") == 1
    assert "does not fit; -p gradient_checkpointing=true fits" in small
    assert "GPU plan" not in render("quick", "cpu-fp32")
