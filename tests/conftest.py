import os

# Before any Hugging Face import: models load from local paths only (ECOSYSTEM.md §5.3).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("GR_PROGRESS", "off")

import pytest  # noqa: E402


@pytest.fixture(scope="session")
def llm():
    """The embedded SmolLM2 (built into the cache on first use), shared by the tests."""
    from gr_core.llm import load_llm

    return load_llm()
