"""The notebook runner: execute the numbered notebooks in order with a preset.

    python -m gr_core.suite --preset quick            # every notebook, outputs/quick/
    python -m gr_core.suite --preset smoke --only 00  # one notebook

Parameters come from ``gr_core/presets/<preset>.yaml`` (``_all`` then the notebook's own
entry, then ``-p key=value`` overrides). Executed notebooks go to
``outputs/<preset>/notebooks/`` (``$GR_OUTPUTS_DIR`` replaces ``outputs``; git-ignored; papermill writes them even when
a cell fails, marked with the error), and a run summary to ``outputs/<preset>/suite.json``. The run stops at the first
failing notebook (``--keep-going`` continues), names the notebook and cell, exits 1, and ends with the line
``N passed, N failed, N skipped``.
"""
from __future__ import annotations

import argparse
import difflib
import json
import logging
import os
import sys
import time
from pathlib import Path

from .config import (PRESETS, annotation_types, is_of, notebook_parameters, papers_data_notes,
                     parameter_annotations)
from .paths import find_notebooks, outputs_root, repo_root
from .plan import default_profile, plan, render
from .runs import check_seed, environment_record, write_json
from .speeds import PROFILE_NAMES, bench_json


def failed_cell(executed: Path) -> str:
    """The cell papermill marked as failed: its index among the source notebook's cells, and its first line."""
    import nbformat  # noqa: PLC0415 deferred: optional: the notebooks extra

    try:
        nb = nbformat.read(executed, as_version=4)
    except Exception:  # the output may be unreadable if the kernel died mid-write
        return "?"
    cells = [c for c in nb.cells if "injected-parameters" not in c.metadata.get("tags", [])
             and "papermill-error-cell-tag" not in c.metadata.get("tags", [])]
    for i, cell in enumerate(cells, 1):
        if cell.metadata.get("papermill", {}).get("status") == "failed":
            first = next((line for line in cell.source.splitlines() if line.strip()), "")
            return f"In [{cell.get('execution_count')}] (cell {i} of the notebook: {first[:80]!r})"
    return "?"


def _parse_override(text: str) -> tuple[str, object]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"-p expects key=value, got {text!r}")
    key, raw = text.split("=", 1)
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return key, value


def check_overrides(notebooks: list[Path], overrides: dict) -> None:
    """Every ``-p`` key is a parameter of one of ``notebooks``, its value of the type that notebook's ``parameters``
    cell annotates; else ValueError naming the key (and the nearest names) or the value and the declared type."""
    if not overrides:
        return
    declared = {nb.stem: parameter_annotations(nb.stem, nb.parent) for nb in notebooks}
    for key, value in overrides.items():
        where = {stem: spec[key] for stem, spec in declared.items() if key in spec}
        if not where:
            close = difflib.get_close_matches(key, sorted({k for spec in declared.values() for k in spec}), n=3)
            raise ValueError(f"-p {key}: not a parameter of {', '.join(declared)}"
                             + (f" (did you mean {' or '.join(close)}?)" if close else ""))
        for stem, annotation in where.items():
            allowed = annotation_types(annotation)
            if allowed and not is_of(value, allowed):
                raise ValueError(f"-p {key}={json.dumps(value)}: {stem} declares {key}: {annotation} (values are "
                                 f"read as JSON: 3, 0.5, true, \"text\", [1, 2], null)")
        if key == "seed":  # every notebook seeds with it: refused here, not at a notebook's first cell
            check_seed(value, "-p seed")
        if key == "preset":  # the notebooks write under outputs/<preset>/: another preset's folder
            raise ValueError("-p preset: the preset is --preset's (-p would send the notebooks' outputs to another "
                             "preset's folder)")
        if key == "num_seeds" and value < 1:
            raise ValueError(f"-p num_seeds={value}: at least 1")


def run_suite(preset: str, notebooks_dir: Path | None = None, only: list[str] | None = None,
              overrides: dict | None = None, keep_going: bool = False, log_output: bool = False,
              cell_timeout: int | None = None) -> dict:
    """Execute the notebooks; return the summary dict (also written to ``out_dir/suite.json``)."""
    import papermill as pm  # noqa: PLC0415 deferred: optional: the notebooks extra; needed only by the runner

    root = repo_root()
    notebooks_dir = notebooks_dir or root / "notebooks"
    out_dir = outputs_root(preset)  # $GR_OUTPUTS_DIR/<preset>; the kernels inherit the same variable
    (out_dir / "notebooks").mkdir(parents=True, exist_ok=True)
    # Kernels inherit the environment: offline hub, plain progress bars for logs.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("GR_PROGRESS", "plain")
    if log_output:
        logging.basicConfig(level=logging.INFO, format="%(message)s")
    notebooks = find_notebooks(notebooks_dir, only)
    results, failed = [], False
    environment = environment_record()
    print(f"suite {preset} on {describe_precision(environment['precision'])}", flush=True)
    for note in papers_data_notes(preset):
        print(f"  data: {note}", flush=True)
    previous = _previous_seconds(out_dir / "suite.json")
    planned = planned_seconds(preset, overrides) if any(nb.name not in previous for nb in notebooks) else {}
    total_start = time.perf_counter()
    for i, nb in enumerate(notebooks, 1):
        if failed and not keep_going:
            results.append({"notebook": nb.name, "status": "skipped"})
            continue
        params = notebook_parameters(preset, nb.stem, overrides)
        target = out_dir / "notebooks" / nb.name
        print(f"[{i}/{len(notebooks)}] {nb.name}  "
              f"{progress_line(time.perf_counter() - total_start, notebooks[i - 1:], previous, planned)}"
              f"\n      parameters={params}", flush=True)
        start = time.perf_counter()
        record = {"notebook": nb.name,
                  "output": str(target.relative_to(root)) if target.is_relative_to(root) else str(target),
                  "parameters": params}
        # recorded as running first: a suite killed part way leaves this notebook's folder half rewritten, and its
        # record must not stay an earlier run's "passed" (the report warns of any status but passed)
        pending = [later.name for later in notebooks[i:]]  # this run's notebooks still to come (the report skips them)
        _write_progress(out_dir, preset, results + [{**record, "status": "running"}], environment, total_start,
                        pending)
        try:
            pm.execute_notebook(str(nb), str(target), parameters=params, kernel_name="python3", cwd=str(root),
                                log_output=log_output, progress_bar=sys.stderr.isatty() and not log_output,
                                execution_timeout=cell_timeout, request_save_on_cell_execute=True)
            record["status"] = "passed"
        except pm.PapermillExecutionError as err:
            failed = True
            record.update(status="failed", cell=failed_cell(target), error=f"{err.ename}: {err.evalue}")
        except Exception as err:  # kernel death, timeout, missing kernel: still a named failure
            failed = True
            record.update(status="failed", error=f"{type(err).__name__}: {err}")
        except BaseException:  # Ctrl-C: recorded as interrupted, then the suite stops as asked
            record.update(status="interrupted", seconds=round(time.perf_counter() - start, 1))
            _write_progress(out_dir, preset, results + [record], environment, total_start, pending)
            raise
        record["seconds"] = round(time.perf_counter() - start, 1)
        if record["status"] == "passed":
            print(f"      passed in {record['seconds']} s", flush=True)
        else:
            print(f"      FAILED in {record['seconds']} s: notebook {nb.name}, cell {record.get('cell', '?')}: "
                  f"{record['error']}\n      the executed notebook (with the error marked) is at {target}",
                  file=sys.stderr, flush=True)
        results.append(record)
        # written after every notebook, so that a suite stopped part way keeps the records of those it finished
        _write_progress(out_dir, preset, results, environment, total_start, pending)
    seconds = round(time.perf_counter() - total_start, 1)
    summary = _summary(preset, results, environment, seconds)
    if not only:  # the whole suite ran: its time is the suite's total (a partial run never replaces it)
        summary["total_seconds"] = seconds
    write_json(out_dir / "suite.json", _merge_previous(out_dir / "suite.json", summary) if only else summary)
    print(f"suite {preset}: {_minutes(seconds)} in all", flush=True)
    return summary


def _write_progress(out_dir: Path, preset: str, results: list[dict], environment: dict, total_start: float,
                    pending: list[str]) -> None:
    """``suite.json`` while the suite runs (``running``; ``pending``: the notebooks this run has yet to run, whose
    records are still an earlier run's), the other notebooks' records kept."""
    write_json(out_dir / "suite.json", _merge_previous(out_dir / "suite.json", dict(
        _summary(preset, results, environment, time.perf_counter() - total_start), running=True, pending=pending)))


def _summary(preset: str, results: list[dict], environment: dict, seconds: float) -> dict:
    """The suite's record of the notebooks run so far (``suite.json``'s layout)."""
    counts = {s: sum(r["status"] == s for r in results) for s in ("passed", "failed", "skipped", "interrupted")}
    return {"preset": preset, "notebooks": results, "counts": counts, "seconds": round(seconds, 1),
            "environment": environment}


def describe_precision(precision: dict) -> str:
    """``"AMD EPYC (AVX512-BF16, no AMX): the LLM runs in bfloat16 on cpu"``, from a precision record (on CUDA, the
    GPU's name instead of the CPU's)."""
    forced = f", set by GR_DTYPE={precision['dtype_override']}" if precision.get("dtype_override") else ""
    if str(precision.get("device", "")).startswith("cuda"):
        return f"{precision.get('gpu', 'a GPU')}: the LLM runs in {precision.get('dtype')} on cuda{forced}"
    units = [name for name, key in (("AMX", "amx"), ("AVX512-BF16", "avx512_bf16")) if precision.get(key)]
    units += [f"no {name}" for name, key in (("AMX", "amx"), ("AVX512-BF16", "avx512_bf16")) if not precision.get(key)]
    return (f"{precision.get('cpu_model', '?')} ({', '.join(units)}): the LLM runs in {precision.get('dtype')} on "
            f"{precision.get('device')}{forced}")


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def _previous_seconds(path: Path) -> dict[str, float]:
    """Seconds per notebook of the last run recorded in ``suite.json`` (passed notebooks only)."""
    return {r["notebook"]: float(r["seconds"]) for r in bench_json(path).get("notebooks", [])
            if r.get("status") == "passed" and "seconds" in r}


def progress_line(elapsed: float, remaining: list[Path], previous: dict[str, float],
                  planned: dict[str, float] | None = None) -> str:
    """``elapsed 3.2 min, about 41 min left`` from the last run's time of each remaining notebook, else the plan's
    estimate (``planned``, named as such); a notebook with neither is named instead of guessed.

    >>> progress_line(90, [Path("01_a.ipynb"), Path("02_b.ipynb")], {"01_a.ipynb": 120.0})
    'elapsed 1.5 min, about 2.0 min left (no earlier time for 02_b)'
    >>> progress_line(90, [Path("01_a.ipynb"), Path("02_b.ipynb")], {}, {"01_a.ipynb": 600.0})
    'elapsed 1.5 min, about 10.0 min left (01_a from the plan; no earlier time for 02_b)'
    """
    planned = planned or {}
    known = [previous[nb.name] for nb in remaining if nb.name in previous]
    from_plan = [nb for nb in remaining if nb.name not in previous and planned.get(nb.name)]
    known += [planned[nb.name] for nb in from_plan]
    unknown = [nb.stem for nb in remaining if nb.name not in previous and not planned.get(nb.name)]
    notes = ([f"{', '.join(nb.stem for nb in from_plan)} from the plan"] if from_plan else []) + (
        [f"no earlier time for {', '.join(unknown)}"] if unknown else [])
    line = f"elapsed {_minutes(elapsed)}"
    if known:
        line += f", about {_minutes(sum(known))} left"
        if notes:
            line += f" ({'; '.join(notes)})"
    elif notes:
        line += ", " + "; ".join(notes)
    return line


def planned_seconds(preset: str, overrides: dict | None = None) -> dict[str, float]:
    """Notebook file name -> the plan's estimate of its runs left (:func:`gr_core.plan.plan`); {} when the plan
    cannot be made here (a progress hint: the suite runs without it)."""
    try:
        _, notebooks = plan(preset, default_profile(preset), overrides=overrides)
    except Exception as err:  # a plan error must not stop the suite; say why the hint is missing
        print(f"      (no plan estimate: {type(err).__name__}: {err})", flush=True)
        return {}
    # a notebook estimated at 0 has neither runs left nor a measured time for its other work: unknown, not free
    return {f"{r.notebook}.ipynb": float(r.estimate_seconds) for r in notebooks.itertuples() if r.estimate_seconds}


def _merge_previous(path: Path, summary: dict) -> dict:
    """With ``--only``, keep the other notebooks' records and the whole-suite ``total_seconds`` of the previous run."""
    previous = bench_json(path)
    if not previous:
        return summary
    ran = {r["notebook"] for r in summary["notebooks"]}
    kept = [dict(r, from_previous_run=True) for r in previous.get("notebooks", []) if r["notebook"] not in ran]
    merged = dict(summary, notebooks=sorted(summary["notebooks"] + kept, key=lambda r: r["notebook"]))
    if "total_seconds" in previous:
        merged["total_seconds"] = previous["total_seconds"]
        merged["total_seconds_from"] = previous.get("total_seconds_from",
                                                    previous.get("environment", {}).get("git_commit"))
    return merged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gr_core.suite", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="quick", choices=PRESETS)
    parser.add_argument("--only", nargs="+",
                        help="run only these notebooks: numbers (0 2 or 00 02) or the starts of their names")
    parser.add_argument("-p", "--param", action="append", type=_parse_override, default=[],
                        help="override a parameter for every notebook: key=value (value JSON-decoded)")
    parser.add_argument("--keep-going", action="store_true", help="run the remaining notebooks after a failure")
    parser.add_argument("--log-output", action="store_true", help="stream every cell's output to the terminal")
    parser.add_argument("--cell-timeout", type=int, default=None, help="seconds per cell (default: none)")
    parser.add_argument("--notebooks-dir", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--dry-run", action="store_true", help="print the plan (each notebook, each run, its "
                        "estimated time from measured speeds: gr_core.plan) and run nothing")
    parser.add_argument("--profile", default=None, choices=PROFILE_NAMES, help="with --dry-run: where to estimate for "
                        "(default: h100 for full, else this CPU's); a GPU adds the memory plan")
    args = parser.parse_args(argv)
    if args.cell_timeout is not None and args.cell_timeout <= 0:  # nbclient would read it as no limit at all
        parser.error(f"--cell-timeout {args.cell_timeout}: seconds, at least 1 (leave it out for no limit)")
    if args.profile and not args.dry_run:
        parser.error("--profile names where --dry-run estimates for; a run runs here")
    try:
        check_overrides(find_notebooks(args.notebooks_dir or repo_root() / "notebooks", args.only), dict(args.param))
    except ValueError as err:
        parser.error(str(err))
    if args.dry_run:
        try:
            print(render(args.preset, args.profile or default_profile(args.preset), overrides=dict(args.param),
                         only=args.only))
        except ValueError as err:  # a setting the methods' configs refuse (a negative epoch count, an unknown dataset)
            parser.error(f"the plan cannot be made with these settings: {err}")
        return 0
    summary = run_suite(args.preset, args.notebooks_dir, args.only, dict(args.param),
                        args.keep_going, args.log_output, args.cell_timeout)
    c = summary["counts"]
    print(f"{c['passed']} passed, {c['failed']} failed, {c['skipped']} skipped")
    return 1 if c["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
