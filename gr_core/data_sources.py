"""The raw data's manifest: every file the builders read, where it came from, and how to check and fetch it.

``data_manifest.json`` (beside this module) lists each raw file of the data folder (:func:`gr_core.paths.data_root`);
``./gr data`` (:func:`main`, docs/data.md) checks a folder against it and fetches what is missing or corrupt.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, fields
from pathlib import Path

from . import data_papers
from .download import FetchError, FetchReport, fetch_to, file_state, is_url, join
from .paths import DataNotFoundError, data_root
from .runs import progress

MANIFEST = Path(__file__).with_name("data_manifest.json")
A_COPY = "a complete copy of the data folder (a folder or an http(s) URL)"


class ManifestError(ValueError):
    """The manifest file is malformed (names the entry and the field)."""


@dataclass(frozen=True)
class RawFile:
    """One raw file of the data folder."""

    path: str  # relative to the data folder, ``/``-separated (``metaqa/kb.txt``)
    dataset: str  # the dataset folder it belongs to
    size: int  # bytes
    sha256: str  # hex digest of the bytes
    licence: str  # the licence it is distributed under (the licence files sit beside the data)
    url: str | None  # a byte-identical public copy, pinned to a commit; None when the file was derived (see source)
    source: str  # provenance in words: ``owner/repo @ commit path``, or how the file was derived from such sources
    used_by: tuple[str, ...] = ()  # what reads it (dataset builders by name, ``metrics check``, ``tests``, ``licence``)


def load_manifest(path: str | Path | None = None) -> list[RawFile]:
    """Read and validate the manifest; a ManifestError names the file, the entry and the field that is wrong."""
    path = Path(path or MANIFEST)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ManifestError(f"{path}: not valid JSON (line {err.lineno}: {err.msg})") from err
    entries = raw.get("files") if isinstance(raw, dict) else None
    if not isinstance(entries, list):
        raise ManifestError(f"{path}: expected an object with a 'files' list")
    out, seen = [], set()
    for i, e in enumerate(entries):
        where = f"{path}: files[{i}]" + (f" ({e.get('path')})" if isinstance(e, dict) and e.get("path") else "")
        if not isinstance(e, dict):
            raise ManifestError(f"{where}: expected an object")
        if missing := [f.name for f in fields(RawFile) if f.name not in e]:
            raise ManifestError(f"{where}: missing field(s) {', '.join(missing)}")
        if not isinstance(e["size"], int) or e["size"] < 0:
            raise ManifestError(f"{where}: field 'size' must be a non-negative integer, got {e['size']!r}")
        sha = e["sha256"]
        if not (isinstance(sha, str) and re.fullmatch("[0-9a-f]{64}", sha)):
            raise ManifestError(f"{where}: field 'sha256' must be 64 lower-case hex digits, got {sha!r}")
        rel = e["path"]
        if not isinstance(rel, str) or not rel or rel.startswith("/") or ".." in rel.split("/"):
            raise ManifestError(f"{where}: field 'path' must be a relative path inside the data folder, got {rel!r}")
        if rel in seen:
            raise ManifestError(f"{where}: path listed twice")
        seen.add(rel)
        if e["url"] is not None and not str(e["url"]).startswith(("https://", "http://")):
            raise ManifestError(f"{where}: field 'url' must be an http(s) URL or null, got {e['url']!r}")
        out.append(RawFile(rel, e["dataset"], e["size"], sha, e["licence"], e["url"], e["source"],
                           tuple(e["used_by"])))
    return out


# ---------------------------------------------------------------------- check
@dataclass(frozen=True)
class Problem:
    """A file of the manifest that is missing or differs from it, with what to do about it."""

    path: str
    kind: str  # "missing" | "size" | "sha256"
    detail: str
    remedy: str

    def __str__(self) -> str:
        return f"{self.kind:8s} {self.path}: {self.detail}. {self.remedy}"


def check_file(f: RawFile, root: Path) -> Problem | None:
    """``None`` when ``root / f.path`` has the manifest's size and sha256, else the :class:`Problem`."""
    kind, detail = file_state(root / f.path, f.size, f.sha256)
    if kind == "ok":
        return None
    cause = {"missing": f"under {root}", "size": "(truncated or a different version)",
             "sha256": "(corrupt or a different version)"}[kind]
    remedy = (f"Fix: ./gr data --fetch {root} (downloads {f.url})" if f.url else
              f"It has no public download of its own ({f.source}); fix: ./gr data --fetch {root} --from SOURCE, "
              f"where SOURCE is {A_COPY}")
    return Problem(f.path, kind, f"{detail} {cause}", remedy)


def check(root: str | Path | None = None, files: list[RawFile] | None = None) -> list[Problem]:
    """The problems of the manifest's files under ``root`` (default :func:`data_root`), by size and sha256, in manifest
    order; files not in the manifest are ignored."""
    root = Path(root) if root is not None else data_root()
    files = load_manifest() if files is None else files
    return [p for f in files if (p := check_file(f, root)) is not None]


# ---------------------------------------------------------------------- fetch
def fetch(root: str | Path, source: str | None = None, files: list[RawFile] | None = None,
          timeout: float = 60.0, show: bool = True) -> FetchReport:
    """Make ``root`` match the manifest: verify what is there, fetch what is missing or differs. A file that fails is
    reported and the others go on; nothing unverified is left under a manifest name."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    files = load_manifest() if files is None else files
    report = FetchReport(root)
    for f in progress(files, desc="data files", unit="file", disable=not show):
        if check_file(f, root) is None:
            report.already.append(f.path)
            continue
        origin = f.url if source is None else join(source, f.path)  # a copy of the folder holds it under its path
        if origin is None:
            report.failed[f.path] = (f"{f.path}: no public download of this exact file ({f.source}); pass --from "
                                     f"SOURCE, {A_COPY}")
        elif not is_url(origin) and not Path(origin).is_file():
            report.failed[f.path] = f"{f.path}: not found in the copy {source} (looked for {origin})"
        else:
            try:
                fetch_to(origin, root / f.path, f.size, f.sha256, f.path, timeout, show)
                report.fetched.append(f.path)
            except FetchError as err:
                report.failed[f.path] = str(err)
    return report


# ---------------------------------------------------------------------- command line
def _report(report: FetchReport, counts: str) -> int:
    """Print what a fetch did, then each failure with its fix; exit 1 when a file failed."""
    failures = (f"  {why}" for why in report.failed.values())
    print(f"gr data: {report.root}: {counts}, {len(report.failed)} failed", *failures, sep="\n")
    return 0 if report.ok else 1


def main(argv: list[str] | None = None) -> int:
    """``./gr data``: exit 0 when the folder matches the manifest, 1 when a file is missing or wrong, 2 on usage."""
    ap = argparse.ArgumentParser(prog="./gr data", description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--check", nargs="?", const=None, metavar="DIR", help="verify DIR (default: the data folder)")
    mode.add_argument("--fetch", metavar="DIR", help="download missing or corrupt files into DIR and verify them")
    mode.add_argument("--list", action="store_true", help="print the manifest")
    ap.add_argument("--papers", nargs="*", metavar="NAME",
                    help=f"with --fetch: the papers' datasets instead of the manifest ({', '.join(data_papers.PAPERS)};"
                         " default all), from their public hosts")
    ap.add_argument("--from", dest="source", metavar="SOURCE",
                    help="with --fetch: a complete copy of the data folder (folder or http(s) URL) to read from")
    ap.add_argument("--manifest", help="another manifest file (default: the one shipped with gr_core)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per HTTP request (default 60)")
    args = ap.parse_args(argv)
    if args.source and args.fetch is None:
        ap.error("--from needs --fetch DIR")
    if args.papers is not None and args.fetch is None:
        ap.error("--papers needs --fetch DIR (--check and --list show the papers' datasets without it)")
    if args.papers is not None:  # the papers' datasets (gr_core.data_papers), not the manifest
        try:
            report = data_papers.fetch_papers(args.fetch, args.papers, args.source, args.timeout)
        except data_papers.UnknownDatasetError as err:
            print(f"gr data: {err}", file=sys.stderr)
            return 2
        return _report(report, f"the papers' datasets: {len(report.fetched)} files fetched, {len(report.already)} "
                       "already verified")
    try:
        files = load_manifest(args.manifest)
    except (OSError, ManifestError) as err:
        print(f"gr data: {err}", file=sys.stderr)
        return 2
    total = sum(f.size for f in files)
    if args.list:
        print(f"{'path':62s} {'size':>11s}  {'licence':28s} source",
              *(f"{f.path:62s} {f.size:>11,d}  {f.licence[:28]:28s} {f.url or f.source}" for f in files), sep="\n")
        print(f"{len(files)} files, {total / 1e6:.1f} MB; {sum(f.url is None for f in files)} derived (no download)")
        print(data_papers.format_catalogue())
        return 0
    if args.fetch is not None:
        report = fetch(args.fetch, args.source, files, args.timeout)
        return _report(report, f"{len(report.fetched)} fetched, {len(report.already)} already verified")
    if args.check is not None and not args.check.strip():  # an empty $DIR: not the data folder checked instead
        ap.error("--check: name the folder to check (or give none: the data folder)")
    try:
        root = Path(args.check) if args.check else data_root()
    except DataNotFoundError as err:
        print(f"gr data: {err}", file=sys.stderr)
        return 1
    if not root.is_dir():  # one line, as for a GR_DATA_DIR that does not exist
        missing = f"no such folder; ./gr data --fetch {root} downloads the data into it"
        print(f"gr data: {root}: {'a file, not a folder' if root.exists() else missing}", file=sys.stderr)
        return 1
    # exit 1 for a manifest problem or a corrupt file of the papers' data; their absence is fine (offline stand-ins)
    problems = check(root, files)
    if problems:
        print(f"gr data: {root}: {len(problems)} of {len(files)} files missing or corrupt:",
              *(f"  {p}" for p in problems), sep="\n")
    else:
        print(f"gr data: {root}: all {len(files)} files match the manifest ({total / 1e6:.1f} MB, sha256 checked)")
    statuses = [data_papers.paper_status(p, root) for p in data_papers.PAPERS.values()]
    print(data_papers.format_status(statuses, root))
    return 1 if problems or any(s.state == "corrupt" for s in statuses) else 0


if __name__ == "__main__":
    sys.exit(main())
