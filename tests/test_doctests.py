"""The examples in gr_core's docstrings run as written (``doctest``): a docstring example is documentation that a
test keeps true."""
import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WITH_EXAMPLES = sorted(
    ".".join(path.relative_to(ROOT).with_suffix("").parts)
    for path in (ROOT / "gr_core").rglob("*.py")
    if path.name != "__main__.py" and ">>> " in path.read_text()
)


def test_the_examples_are_found():
    assert "gr_core.stats" in WITH_EXAMPLES and "gr_core.suite" in WITH_EXAMPLES


@pytest.mark.parametrize("name", WITH_EXAMPLES)
def test_docstring_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} docstring examples failed (above)"
