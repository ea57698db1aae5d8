
import pytest

from gr_core.config import PRESETS, load_preset, notebook_parameters, parameter_defaults, used_parameters
from gr_core.paths import repo_root


def test_every_preset_loads_and_names_only_existing_notebooks():
    stems = {p.stem for p in (repo_root() / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    for preset in PRESETS:
        table = load_preset(preset)
        blocks = {"_all", "_training", "_papers_data"}
        assert set(table) - blocks <= stems, f"{preset}.yaml names a notebook that does not exist"
        assert set(table["_training"]["notebooks"]) <= stems
        # the papers' datasets -> an offline stand-in (or None: rows left out)
        from gr_core.graphqa import DATASETS, PAPERS_DATA
        for name, standin in (table.get("_papers_data") or {}).items():
            assert name in PAPERS_DATA and (standin is None or standin in set(DATASETS) - set(PAPERS_DATA)), preset


def test_a_preset_is_parsed_once_per_text_and_each_caller_gets_its_own_copy():
    import yaml

    from gr_core import config

    config._parse_yaml.cache_clear()
    first = load_preset("quick")
    first["_all"]["seed"] = -1  # a caller's change stays its own
    second = load_preset("quick")
    assert second["_all"].get("seed") != -1 and config._parse_yaml.cache_info().hits == 1
    folder = repo_root() / "gr_core" / "presets"
    for preset in PRESETS:  # libyaml's parse where built: the same mapping as the pure-Python parser's
        assert load_preset(preset) == yaml.safe_load((folder / f"{preset}.yaml").read_text())
    misses = config._parse_yaml.cache_info().misses
    config._parse_yaml((folder / "quick.yaml").read_text() + "\n# edited\n")  # another text: parsed anew
    assert config._parse_yaml.cache_info().misses == misses + 1


def test_notebooks_that_share_runs_get_the_same_training_parameters_from_one_block():
    for preset in PRESETS:
        listed = load_preset(preset)["_training"]["notebooks"]
        keys = set(load_preset(preset)["_training"]) - {"notebooks"}
        shared = [{k: notebook_parameters(preset, nb)[k] for k in keys} for nb in listed]
        assert all(s == shared[0] for s in shared), f"{preset}: notebooks {listed} would train different runs"


def test_overrides_win_over_the_preset():
    params = notebook_parameters("quick", "00_quickstart", {"seed": 3})
    assert params["preset"] == "quick" and params["seed"] == 3


def _parameters_cell_defaults(notebook):
    return parameter_defaults(notebook.stem, notebook.parent)


@pytest.mark.parametrize("notebook", sorted((repo_root() / "notebooks").glob("[0-9][0-9]_*.ipynb")),
                         ids=lambda p: p.stem)
def test_notebook_defaults_are_the_smoke_preset(notebook):
    # nbval runs the stored defaults and cannot inject parameters, so they must be CI-sized.
    defaults = _parameters_cell_defaults(notebook)
    assert defaults.get("preset") == "smoke"
    for key, value in notebook_parameters("smoke", notebook.stem).items():
        assert key in defaults, f"{notebook.name} has no parameter {key!r} that smoke.yaml sets"
        assert defaults[key] == value, f"{notebook.name}: default {key}={defaults[key]!r}, smoke.yaml says {value!r}"


@pytest.mark.parametrize("preset", [p for p in PRESETS if p != "smoke"])
def test_every_preset_sets_only_parameters_the_notebooks_have(preset):
    """papermill injects an unknown parameter without complaint; the notebook would then silently ignore it.
    (``_all`` is shared by every notebook, so only each notebook's own block is checked.)"""
    table = load_preset(preset)
    for notebook in sorted((repo_root() / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        defaults = _parameters_cell_defaults(notebook)
        shared = table["_training"] if notebook.stem in table["_training"]["notebooks"] else {}
        for key in {**shared, **(table.get(notebook.stem) or {})}:
            if key != "notebooks":
                assert key in defaults, f"{preset}.yaml sets {key!r}, which {notebook.name} has no parameter for"


def test_parameter_defaults_read_the_cell_as_papermill_runs_it(tmp_path):
    """The cell's literals in order; a non-literal, or no parameters cell, is a clear error naming the file."""
    import nbformat

    def write(source, tags=("parameters",)):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source, metadata={"tags": list(tags)})])
        nbformat.write(nb, tmp_path / "99_x.ipynb")

    write('preset: str = "smoke"  # comment\nplan: dict = {"a": [1, 2]}\nwarmup = None\n')
    assert parameter_defaults("99_x", tmp_path) == {"preset": "smoke", "plan": {"a": [1, 2]}, "warmup": None}
    write("n = len([1])\n")
    with pytest.raises(ValueError, match="line 1: n is not a literal"):
        parameter_defaults("99_x", tmp_path)
    write("n = 1\n", tags=())
    with pytest.raises(ValueError, match="no cell is tagged"):
        parameter_defaults("99_x", tmp_path)


def test_used_parameters_records_every_parameter_as_executed():
    params = parameter_defaults("03_training")
    namespace = {**params, "max_train": 7, "unrelated": 1}
    used = used_parameters(namespace, "03_training")
    assert list(used) == list(params) and used["max_train"] == 7 and "unrelated" not in used
    with pytest.raises(KeyError, match="not defined"):
        used_parameters({"preset": "smoke"}, "03_training")


@pytest.mark.parametrize("notebook", sorted((repo_root() / "notebooks").glob("[0-9][0-9]_*.ipynb")),
                         ids=lambda p: p.stem)
def test_a_notebooks_llm_model_reaches_every_chat_it_builds(notebook):
    """A notebook with an ``llm_model`` parameter passes it to each ``GraphChat``: notebook 09's sections 3 and 4 had
    loaded the embedded model whatever the parameter named (found on a GPU node, where it names another model)."""
    import ast

    import nbformat

    if "llm_model" not in _parameters_cell_defaults(notebook):
        pytest.skip("no llm_model parameter")
    calls = [node for cell in nbformat.read(notebook, as_version=4).cells if cell.cell_type == "code"
             for node in ast.walk(ast.parse(cell.source)) if isinstance(node, ast.Call)
             and "GraphChat" in (getattr(node.func, "id", None), getattr(node.func, "attr", None))]
    for call in calls:  # a **kwargs call may pass it: counted as passing
        assert {"llm_model", None} & {k.arg for k in call.keywords}, f"{notebook.name}: {ast.unparse(call)[:120]}"
