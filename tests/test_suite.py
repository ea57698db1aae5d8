import json
import os
import re
import subprocess
import sys

import nbformat
import pytest


def _notebook(path, *sources, parameters="x: int = 1"):
    nb = nbformat.v4.new_notebook()
    cells = [nbformat.v4.new_code_cell(parameters, metadata={"tags": ["parameters"]})]
    cells += [nbformat.v4.new_code_cell(src) for src in sources]
    nb.cells = cells
    nb.metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    nbformat.write(nb, path)


def _run_suite(tmp_path, *args):
    env = dict(os.environ, GR_OUTPUTS_DIR=str(tmp_path / "out"))
    return subprocess.run([sys.executable, "-m", "gr_core.suite", "--preset", "smoke",
                           "--notebooks-dir", str(tmp_path / "nbs"), *args],
                          capture_output=True, text=True, env=env, timeout=300)


@pytest.fixture
def toy_suite(tmp_path):
    (tmp_path / "nbs").mkdir()
    _notebook(tmp_path / "nbs" / "00_first.ipynb", "print('first', x)")
    _notebook(tmp_path / "nbs" / "01_breaks.ipynb", "y = 2", "raise ValueError('boom in cell')")
    _notebook(tmp_path / "nbs" / "02_after.ipynb", "print('after')")
    return tmp_path


@pytest.mark.slow
def test_suite_stops_at_the_first_failure_naming_notebook_and_cell(toy_suite):
    res = _run_suite(toy_suite)
    assert res.returncode == 1
    # In [4]: papermill's injected-parameters cell runs third; cell 3 counts the source notebook's cells
    assert ("notebook 01_breaks.ipynb, cell In [4] (cell 3 of the notebook: \"raise ValueError('boom in cell')\"): "
            "ValueError: boom in cell") in res.stderr
    assert res.stdout.strip().splitlines()[-1] == "1 passed, 1 failed, 1 skipped"
    executed = toy_suite / "out" / "smoke" / "notebooks"
    assert (executed / "01_breaks.ipynb").is_file()  # kept, with the error marked
    assert not (executed / "02_after.ipynb").exists()
    summary = json.loads((toy_suite / "out" / "smoke" / "suite.json").read_text())
    assert [n["status"] for n in summary["notebooks"]] == ["passed", "failed", "skipped"]


@pytest.mark.slow
def test_keep_going_then_a_partial_run_with_an_override_merges_keeps_the_total_and_prints_what_is_left(toy_suite):
    # one --keep-going run, then an --only run (each run starts a kernel per notebook: shared to keep CI short)
    first = _run_suite(toy_suite, "--keep-going")
    assert first.returncode == 1
    assert first.stdout.strip().splitlines()[-1] == "2 passed, 1 failed, 0 skipped"  # the rest ran
    total = json.loads((toy_suite / "out" / "smoke" / "suite.json").read_text())["total_seconds"]
    assert "[1/3] 00_first.ipynb  elapsed 0 s, no earlier time for 00_first, 01_breaks, 02_after" in first.stdout
    again = _run_suite(toy_suite, "--only", "00", "02", "-p", "x=41")  # an override, injected
    assert again.returncode == 0, again.stderr
    # the second run knows the first run's times: elapsed and an estimate of what is left
    assert "[1/2] 00_first.ipynb  elapsed 0 s, about " in again.stdout and " left" in again.stdout
    assert "suite smoke:" in again.stdout
    executed = nbformat.read(toy_suite / "out" / "smoke" / "notebooks" / "00_first.ipynb", as_version=4)
    printed = "".join(o.get("text", "") for c in executed.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "first 41" in printed
    summary = json.loads((toy_suite / "out" / "smoke" / "suite.json").read_text())
    assert summary["total_seconds"] == total  # the partial run's own seconds do not replace the whole run's
    names = [(n["notebook"], n.get("from_previous_run", False)) for n in summary["notebooks"]]
    assert names == [("00_first.ipynb", False), ("01_breaks.ipynb", True), ("02_after.ipynb", False)]
    assert summary["counts"] == {"passed": 2, "failed": 0, "skipped": 0, "interrupted": 0}  # this run's only


def test_progress_line_estimates_from_the_last_run():
    from pathlib import Path

    from gr_core.suite import progress_line

    assert progress_line(30, [Path("05_x.ipynb")], {"05_x.ipynb": 600.0}) == "elapsed 30 s, about 10.0 min left"
    assert progress_line(0, [Path("05_x.ipynb")], {}) == "elapsed 0 s, no earlier time for 05_x"


@pytest.mark.slow
def test_a_suite_stopped_part_way_keeps_the_records_of_the_notebooks_it_finished(tmp_path):
    (tmp_path / "nbs").mkdir()
    _notebook(tmp_path / "nbs" / "00_first.ipynb", "print('first', x)")
    # the kernel's parent is the suite: killing it is a suite stopped by hand, by a time limit or by the machine
    _notebook(tmp_path / "nbs" / "01_stops.ipynb", "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)")
    res = _run_suite(tmp_path)
    assert res.returncode == -9
    summary = json.loads((tmp_path / "out" / "smoke" / "suite.json").read_text())
    # the one it was running stays "running" (an earlier run's "passed" had stood for its half-rewritten folder)
    assert [(n["notebook"], n["status"]) for n in summary["notebooks"]] == [("00_first.ipynb", "passed"),
                                                                          ("01_stops.ipynb", "running")]
    assert summary["running"] is True and "total_seconds" not in summary  # never mistaken for a whole run
    # stopped by Ctrl-C: recorded as interrupted, and the suite stops
    _notebook(tmp_path / "nbs" / "01_stops.ipynb", "import os, signal, time\nos.kill(os.getppid(), signal.SIGINT)\n"
                                                  "time.sleep(30)")
    res = _run_suite(tmp_path)
    assert res.returncode != 0
    summary = json.loads((tmp_path / "out" / "smoke" / "suite.json").read_text())
    assert [(n["notebook"], n["status"]) for n in summary["notebooks"]] == [("00_first.ipynb", "passed"),
                                                                          ("01_stops.ipynb", "interrupted")]


def test_only_and_parameters_are_checked_against_the_notebooks_before_anything_runs(tmp_path, capsys):
    from gr_core.paths import find_notebooks
    from gr_core.suite import check_overrides, main

    (tmp_path / "nbs").mkdir()
    _notebook(tmp_path / "nbs" / "00_first.ipynb", "print(x)",
              parameters="x: int = 1\nrate: float = 0.5\nname: str = 'a'\nlimit: int | None = None\nfree = 1\n"
                         "seed: int = 0\npreset: str = 'smoke'\nnum_seeds: int = 1")
    for args, message in ((["--only", "00", "07"], "--only 07: no notebook in .* the notebooks: 00_first"),
                          (["--only", ""], "--only : no notebook in"),  # an empty prefix would match every one
                          (["-p", "nmae=\"b\""], r"-p nmae: not a parameter of 00_first \(did you mean name\?\)"),
                          (["-p", "x=two"], r"-p x=\"two\": 00_first declares x: int"),
                          (["-p", "x=true"], "00_first declares x: int"),
                          (["-p", "limit=\"all\""], "00_first declares limit: int | None"),
                          (["-p", "seed=-1"], "-p seed=-1: seeds are integers from 0 to 2"),
                          (["-p", "preset=\"full\""], "-p preset: the preset is --preset's"),
                          (["-p", "num_seeds=0"], "-p num_seeds=0: at least 1"),
                          (["--cell-timeout", "0"], "--cell-timeout 0: seconds, at least 1")):
        with pytest.raises(SystemExit) as stop:
            main(["--preset", "smoke", "--notebooks-dir", str(tmp_path / "nbs"), "--dry-run", *args])
        assert stop.value.code == 2 and re.search(message, capsys.readouterr().err), args
    notebooks = find_notebooks(tmp_path / "nbs", ["00_first.ipynb"])  # a file name is a prefix too
    for name in ("01_second", "10_tenth"):
        (tmp_path / "nbs" / f"{name}.ipynb").write_text((tmp_path / "nbs" / "00_first.ipynb").read_text())
    pick = {o: [nb.stem for nb in find_notebooks(tmp_path / "nbs", [o])] for o in ("0", "1", "01", "10", "01_s")}
    # a number picks by number, not every name that starts with its digit
    assert pick == {"0": ["00_first"], "1": ["01_second"], "01": ["01_second"], "10": ["10_tenth"],
                    "01_s": ["01_second"]}
    check_overrides(notebooks, {"x": 3, "rate": 1, "name": "b", "limit": None, "free": "anything"})  # 1 is a float


def test_a_dry_run_the_methods_refuse_says_why_in_one_line(capsys):
    from gr_core.suite import main

    for args, message in ((["-p", "metaqa_hops=[7]"], r"metaqa_hops \[7\]: MetaQA has \[1, 2, 3\]-hop questions"),
                          (["-p", 'datasets=["nonexist"]'], r"datasets \['nonexist'\]: the reasoner trains on"),
                          (["-p", "num_epochs=-3"], "num_epochs must be an integer >= 0"),
                          (["--only", "3", "-p", 'per_dataset={"webqsq": {"max_train": 3}}'],  # a typo, as 03 says
                           r"per-dataset settings name datasets that are not in the plan: \['webqsq'\]")):
        with pytest.raises(SystemExit) as stop:
            main(["--preset", "quick", "--dry-run", *args])
        err = capsys.readouterr().err
        assert stop.value.code == 2 and re.search(f"the plan cannot be made with these settings: .*{message}", err)
        assert "Traceback" not in err, args
