"""bench/gpu_rehearsal.py without a GPU (issue 60 item 5): its dry run writes the record a GPU run writes, every step
skipped, with the notebooks' parameters checked through papermill; steps are chosen by name; a step is stopped at
its deadline. The GPU run itself: docs/environment.md, "GPU rehearsal"."""
import json
import sys
import time

import pytest


def test_the_dry_run_writes_the_record_with_every_step_skipped_and_the_parameters_checked(bench, tmp_path):
    rehearsal = bench("gpu_rehearsal")
    rc = rehearsal.main(["--dry-run", "--quick", "--out", str(tmp_path), "--steps", "pytest_gpu,notebooks"])
    record = json.loads((tmp_path / "gpu_rehearsal.json").read_text())
    assert record["schema"] == "gpu_rehearsal/1" and record["mode"] == "dry-run" and record["finished"]
    assert record["run_command"] == {"command": rehearsal.RUN_COMMAND, "carry": [".cache/gpu_carry"], "timeout_s": 590}
    steps = record["steps"]
    assert list(steps) == ["env", "throughput_gpu", "decode_gpu", "precision_gpu", "pytest_gpu", "notebooks",
                           "precision_cpu"]
    assert {n: s["status"] for n, s in steps.items() if n in ("pytest_gpu", "notebooks")} == {
        "pytest_gpu": "skipped: no CUDA", "notebooks": "skipped: no CUDA"}
    assert all(steps[n]["status"] == "skipped: not selected" for n in ("throughput_gpu", "decode_gpu", "precision_gpu"))
    assert all(s["command"] for s in steps.values())
    # the two speed benches get SmolLM2-135M's shapes with random weights, the decode variants by name
    assert "--llm" in steps["throughput_gpu"]["command"] and "--llm" in steps["decode_gpu"]["command"]
    # the notebooks run the smoke preset with the full preset's GPU settings and the rehearsal's LLM, as -p values
    command = steps["notebooks"]["command"]
    assert command[command.index("--preset") + 1] == "smoke"
    assert {"gnn_hidden=1024", "gnn_layers=4", "max_txt_len=512", "device=cuda"} <= set(command)
    checks = {c["check"]: c for c in record["checks"]}
    notebooks = checks["notebook_parameters"]
    assert notebooks["ok"], notebooks["detail"]
    assert len(notebooks["detail"]["notebooks"]) == 10
    assert {row["injected_cell"] for row in notebooks["detail"]["notebooks"]} == {"compiles"}
    assert checks["precision_bench_api"]["ok"], checks["precision_bench_api"]["detail"]
    assert checks["carry"]["ok"] in (True, None)  # None: not packed on this machine (`--pack` needs pip)
    if record["carry"].get("tree_bytes") is not None:
        assert record["carry"]["limit_bytes"] == 64 * 2 ** 20
    assert rc == 0 and record["summary"]["checks_failed"] == []


def test_steps_are_chosen_by_name(bench):
    import argparse

    rehearsal = bench("gpu_rehearsal")
    assert rehearsal.parse_steps("notebooks, pytest_gpu") == ["notebooks", "pytest_gpu"]
    with pytest.raises(argparse.ArgumentTypeError, match="unknown steps"):
        rehearsal.parse_steps("notebooks,tests")


def test_the_overrides_go_through_the_suites_own_parser(bench):
    from gr_core.suite import _parse_override

    rehearsal = bench("gpu_rehearsal")
    overrides = {"gnn_hidden": 1024, "lr": 1e-5, "device": "cuda", "llm_model": "/tmp/x/tiny-llama",
                 "citing_llms": ["/tmp/x/tiny-llama"], "quantization": None}
    args = rehearsal.p_args(overrides)
    assert args[::2] == ["-p"] * len(overrides)
    assert dict(_parse_override(a) for a in args[1::2]) == overrides


@pytest.mark.slow  # starts a process
def test_a_step_is_stopped_at_its_deadline_and_its_log_kept(bench, tmp_path):
    rehearsal = bench("gpu_rehearsal")
    log = tmp_path / "slow.log"
    proc = rehearsal.Proc("slow", [sys.executable, "-c", "print('started', flush=True); import time; time.sleep(60)"],
                          None, log, time.time() + 1.5)
    start = time.time()
    while (rc := proc.poll()) is None:
        time.sleep(0.1)
    assert proc.timed_out and rc != 0 and time.time() - start < 20
    assert "started" in log.read_text()


def test_the_record_is_replaced_whole(bench, tmp_path):
    rehearsal = bench("gpu_rehearsal")
    path = tmp_path / "r.json"
    rehearsal.write_json_atomic(path, {"a": 1})
    rehearsal.write_json_atomic(path, {"a": 2})
    assert json.loads(path.read_text()) == {"a": 2} and [p.name for p in tmp_path.iterdir()] == ["r.json"]
