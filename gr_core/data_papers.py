"""The papers' own datasets, fetched from their public hosts into the data folder and checked there (docs/data.md).

RoG's WebQSP and CWQ splits (parquet shards of the hub's ``rmanluo/RoG-*``) and GQA's scene graphs and balanced
questions (Stanford's zips); the offline suite runs stand-ins when they are absent (:data:`PAPERS`). Under ``DIR``::

    rog/webqsp/data/<shard>.parquet   rog/cwq/data/<shard>.parquet    the hub repos' data/ folders, names as there
    gqa/{train,val}_sceneGraphs.json  gqa/{train,val}_balanced_questions.json    extracted from GQA's zips
    <folder>/fetched.json             source, revision (pinned on the first fetch), each file's URL, size and sha256

Hosts: ``GR_HF_ENDPOINT`` (else ``HF_ENDPOINT``, as huggingface_hub reads it) and ``GR_GQA_URL``.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Callable

from .download import CHUNK, FetchError, FetchReport, fetch_to, file_state, get_json, join, remote_size
from .paths import GQA_FILES, PAPERS_DATA
from .runs import read_json, write_json

HF_ENDPOINT = "https://huggingface.co"
GQA_URL = "https://downloads.cs.stanford.edu/nlp/data/gqa"
RECORD = "fetched.json"


@dataclass(frozen=True)
class Paper:
    """One of the papers' datasets: where it lives under the data folder, where it comes from, and what the offline
    suite uses instead when it is absent."""

    name: str
    folder: str  # under the data folder
    repo: str  # a Hugging Face dataset repo, or "" for GQA's zips
    about: str
    standin: str
    archives: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (zip, members to extract) on GQA's host


PAPERS: dict[str, Paper] = {p.name: p for p in (
    Paper("rog_webqsp", *PAPERS_DATA["rog_webqsp"][::-1], "RoG's WebQSP split, 2-hop graphs: parquet, ~520 MB",
          "webqsp (the re-split RoG test mini-graphs) and webqsp_full (18 complete RoG test graphs)"),
    Paper("rog_cwq", *PAPERS_DATA["rog_cwq"][::-1], "RoG's CWQ split, 2-hop graphs: parquet, ~2 GB",
          "none: the CWQ rows are skipped"),
    Paper("gqa", *PAPERS_DATA["gqa"][::-1], "GQA scene graphs + balanced questions: zips, ~1.5 GB",
          "clevr for GR Table 3's SceneGraphs rows; gqa_micro (14 scene graphs) in the retrieval study",
          (("sceneGraphs.zip", tuple(scenes for scenes, _ in GQA_FILES)),
           ("questions1.2.zip", tuple(questions for _, questions in GQA_FILES)))),
)}


class UnknownDatasetError(ValueError):
    """A name given to ``--papers`` is none of :data:`PAPERS`."""


def hf_endpoint() -> str:
    return (os.environ.get("GR_HF_ENDPOINT") or os.environ.get("HF_ENDPOINT") or HF_ENDPOINT).rstrip("/")


def human(n: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


# ---------------------------------------------------------------------- the hub
def hub_revision(repo: str, timeout: float) -> str:
    """The commit the hub's ``main`` points at now (pinned in ``fetched.json`` on the first fetch)."""
    url = f"{hf_endpoint()}/api/datasets/{repo}/revision/main"
    doc, _ = get_json(url, timeout)
    sha = doc.get("sha") if isinstance(doc, dict) else None
    if not isinstance(sha, str) or not sha:
        raise FetchError(f"{url}: the answer has no 'sha' (not the hub's revision API?)")
    return sha


def hub_files(repo: str, revision: str, timeout: float) -> list[dict]:
    """``{"path", "size", "sha256"}`` of each file under ``data/`` of a hub dataset at ``revision`` (every page of the
    listing); sha256 is the LFS oid, None for a file stored in git (its ``oid`` is a git blob hash, not a sha256)."""
    url: str | None = f"{hf_endpoint()}/api/datasets/{repo}/tree/{revision}/data"
    out = []
    while url:
        doc, nxt = get_json(url, timeout)
        if not isinstance(doc, list):
            raise FetchError(f"{url}: expected the hub's JSON list of files, got {type(doc).__name__}")
        for e in doc:
            if e.get("type") == "file":
                lfs = e.get("lfs") or {}
                out.append({"path": e["path"], "size": int(lfs.get("size", e["size"])), "sha256": lfs.get("oid")})
        url = nxt
    return out


# ---------------------------------------------------------------------- what to fetch
def read_record(folder: Path) -> dict | None:
    """``folder/fetched.json``, or None when there is none; a FetchError when it cannot be read."""
    path = folder / RECORD
    if not path.is_file():
        return None
    try:
        rec = read_json(path)
    except (OSError, ValueError) as err:
        raise FetchError(f"{path}: unreadable ({err}); delete it and fetch again to re-record") from err
    if not isinstance(rec, dict) or not isinstance(rec.get("files"), dict):
        raise FetchError(f"{path}: no 'files' object; delete it and fetch again to re-record")
    return rec


def _hub_record(paper: Paper, old: dict, timeout: float) -> dict:
    """The hub's file list at the pinned revision: the one recorded (no network: a pinned listing never changes),
    else ``main``'s commit now and its listing."""
    endpoint = hf_endpoint()
    if old.get("revision") and old.get("files"):
        rev, listing = old["revision"], old["files"]
    else:
        rev = hub_revision(paper.repo, timeout)
        listing = {e["path"]: e for e in hub_files(paper.repo, rev, timeout)}
    if not listing:
        raise FetchError(f"{paper.repo} @ {rev}: the hub lists no files under data/")
    files = {rel: {"url": f"{endpoint}/datasets/{paper.repo}/resolve/{rev}/{rel}", "size": e.get("size"),
                   "sha256": e.get("sha256")}  # None for a file stored in git: recorded when it is fetched
             for rel, e in listing.items()}
    return {"dataset": paper.name, "source": f"{endpoint}/datasets/{paper.repo}", "revision": rev, "files": files}


def _gqa_record(paper: Paper, old: dict) -> dict:
    base = (os.environ.get("GR_GQA_URL") or GQA_URL).rstrip("/")
    archives, files = {}, {}
    for name, members in paper.archives:
        prev = old.get("archives", {}).get(name, {})
        archives[name] = {"url": f"{base}/{name}", "size": prev.get("size"), "sha256": prev.get("sha256")}
        for m in members:
            p = old.get("files", {}).get(m, {})
            files[m] = {"url": f"{base}/{name}", "archive": name, "size": p.get("size"), "sha256": p.get("sha256")}
    return {"dataset": paper.name, "source": base, "revision": None, "archives": archives, "files": files}


def _mirror_record(paper: Paper, source: str, timeout: float) -> dict:
    """The file list of a copy of a data folder: its ``<folder>/fetched.json``, each file read from the copy."""
    base = join(source, paper.folder)
    record = join(base, RECORD)
    try:
        doc, _ = get_json(record, timeout)
    except FetchError as err:
        raise FetchError(f"{paper.name}: the copy {source} has no readable {paper.folder}/{RECORD} ({err}); a copy "
                         "made by ./gr data --fetch DIR --papers has one") from err
    if not isinstance(doc, dict) or not isinstance(doc.get("files"), dict):
        raise FetchError(f"{paper.name}: {record} has no 'files' object")
    for rel in doc["files"]:  # each is written under DIR/<folder>/rel: never outside it
        if PurePosixPath(rel).is_absolute() or ".." in PurePosixPath(rel).parts:
            raise FetchError(f"{paper.name}: {record} names the file {rel!r}, outside its folder; refused")
    files = {rel: {"url": join(base, rel), "size": e.get("size"), "sha256": e.get("sha256")}
             for rel, e in doc["files"].items()}
    return {"dataset": paper.name, "source": doc.get("source"), "revision": doc.get("revision"), "via": source,
            "files": files}


@dataclass
class Plan:
    """What one dataset's fetch will transfer, known before any byte moves."""

    paper: Paper
    folder: Path
    record: dict = field(default_factory=dict)  # the fetched.json to write
    pending: list[str] = field(default_factory=list)  # files of the record not verified in place
    already: list[str] = field(default_factory=list)  # files of the record verified in place
    error: str | None = None  # the plan itself failed (host unreachable): reported, the others go on

    @property
    def from_zips(self) -> bool:
        return "archives" in self.record

    def pending_in(self, archive: str) -> list[str]:
        return [m for m in self.pending if self.record["files"][m]["archive"] == archive]

    def transfers(self) -> dict[str, int]:
        """Name -> bytes still to move (a ``.part`` left by a cut transfer counts as moved)."""
        if self.from_zips:
            sizes = {n: a["size"] or 0 for n, a in self.record["archives"].items() if self.pending_in(n)}
        else:
            sizes = {rel: self.record["files"][rel]["size"] or 0 for rel in self.pending}
        parts = {n: self.folder / (n + ".part") for n in sizes}
        return {n: max(0, s - (parts[n].stat().st_size if parts[n].is_file() else 0)) for n, s in sizes.items()}


def plan_paper(paper: Paper, root: Path, source: str | None, timeout: float) -> Plan:
    """List ``paper``'s files (from its host, or from a copy's ``fetched.json``) and check those already in place."""
    plan = Plan(paper, root / paper.folder)
    try:
        old = read_record(plan.folder) or {}
        plan.record = (_mirror_record(paper, source, timeout) if source is not None
                       else _hub_record(paper, old, timeout) if paper.repo else _gqa_record(paper, old))
        for rel, e in plan.record["files"].items():
            if file_state(plan.folder / rel, e["size"], e["sha256"])[0] == "ok":
                plan.already.append(f"{paper.folder}/{rel}")
            else:
                plan.pending.append(rel)
        for name, arch in plan.record.get("archives", {}).items():
            if arch["size"] is None and plan.pending_in(name):
                arch["size"] = remote_size(arch["url"], timeout)  # a HEAD: announced, no byte of it moves yet
    except FetchError as err:
        plan.error = str(err)
        plan.pending = []
    return plan


def format_plan(plans: list[Plan], root: Path) -> str:
    """The table printed before any transfer: per dataset what will be downloaded, its size, and the total."""
    lines = [f"gr data: the papers' datasets into {root}, before any transfer:",
             f"  {'dataset':11s} {'to fetch':>9s} {'size':>10s} {'verified':>9s}  source"]
    total = 0
    for p in plans:
        if p.error:
            lines.append(f"  {p.paper.name:11s} cannot list its files: {p.error}")
            continue
        moves = p.transfers()
        total += sum(moves.values())
        what = f"{len(moves)} {'zips' if p.from_zips else 'files'}"
        rev = p.record.get("revision")
        src = f"{p.record.get('via') or p.record.get('source')}" + (f" @ {rev[:12]}" if rev else "")
        lines.append(f"  {p.paper.name:11s} {what:>9s} {human(sum(moves.values())):>10s} {len(p.already):>9d}  {src}")
    free = shutil.disk_usage(root).free
    lines.append(f"  {'total':11s} {'':9s} {human(total):>10s}   ({human(free)} free under {root}"
                 + ("; NOT ENOUGH: free some space first" if total > free else "") + ")")
    if any(p.from_zips and p.pending for p in plans):
        lines.append("  GQA's zips are deleted once their balanced files are extracted; those need room beside them.")
    return "\n".join(lines)


# ---------------------------------------------------------------------- fetch
def extract_member(archive: Path, member: str, dest: Path, sha256: str | None, label: str) -> tuple[int, str]:
    """Extract the member named ``member`` (at any depth) through ``dest.part``; zipfile checks its CRC.

    Returns:
        its size and sha256.
    Raises:
        FetchError: the member is absent, or the zip is unreadable (then the zip is deleted: a rerun downloads it).
    """
    part = dest.with_name(dest.name + ".part")
    try:
        with zipfile.ZipFile(archive) as zf:
            infos = [i for i in zf.infolist() if PurePosixPath(i.filename).name == member and not i.is_dir()
                     and not i.filename.startswith("__MACOSX/")]
            if not infos:
                raise FetchError(f"{label}: {archive.name} holds no {member} (it holds {zf.namelist()[:8]}...); the "
                                 "host's archive changed: tell the maintainers (docs/data.md)")
            sha = hashlib.sha256()  # hashed as it is written: the member (GQA's questions, ~1 GB) is read once
            with zf.open(infos[0]) as src, open(part, "wb") as out:
                while block := src.read(CHUNK):
                    out.write(block)
                    sha.update(block)
            digest = sha.hexdigest()
    except (zipfile.BadZipFile, EOFError) as err:
        part.unlink(missing_ok=True)
        archive.unlink(missing_ok=True)
        raise FetchError(f"{label}: {archive.name} is unreadable or {member} fails its CRC ({err}); the zip was "
                         "deleted: run the same command again to download it anew") from err
    except OSError as err:  # writing the member (disk full, permissions): the verified zip is kept for a rerun
        part.unlink(missing_ok=True)
        raise FetchError(f"{label}: extracting {member} from {archive.name} failed ({err}); the zip is kept: free "
                         "the space or fix the folder, then run the same command again") from err
    if sha256 is not None and digest != sha256:
        part.unlink()
        archive.unlink(missing_ok=True)  # its member disagrees with the record: a rerun must not reuse it
        raise FetchError(f"{label}: extracted sha256 {digest[:12]}..., fetched.json says "
                         f"{sha256[:12]}...; rejected and the zip deleted (if the host's file changed on purpose, "
                         f"delete {archive.parent / RECORD} to record it anew)")
    os.replace(part, dest)
    return dest.stat().st_size, digest


def _fetch_archive(plan: Plan, name: str, report: FetchReport, timeout: float, show: bool) -> None:
    """Download a GQA zip, extract its pending members, delete it (the 1.4 GB questions zip holds much more)."""
    arch, zpath = plan.record["archives"][name], plan.folder / name
    members = plan.pending_in(name)
    try:
        # a verified zip is only ever under its name (fetch_to), kept when an extraction failed: reuse it
        if not (zpath.is_file() and zpath.stat().st_size == arch["size"]):
            arch["sha256"] = fetch_to(arch["url"], zpath, arch["size"], arch["sha256"],
                                      f"{plan.paper.folder}/{name}", timeout, show)
            write_json(plan.folder / RECORD, plan.record)
    except FetchError as err:
        report.failed.update({f"{plan.paper.folder}/{m}": str(err) for m in members})
        return
    done = 0
    for k, m in enumerate(members):
        label = f"{plan.paper.folder}/{m}"
        try:
            size, sha = extract_member(zpath, m, plan.folder / m, plan.record["files"][m]["sha256"], label)
        except FetchError as err:
            report.failed[label] = str(err)
            if not zpath.exists():  # deleted as unreadable: its other members wait for the next fetch as well
                report.failed.update({f"{plan.paper.folder}/{r}": str(err) for r in members[k + 1:]})
                break
            continue
        plan.record["files"][m].update(size=size, sha256=sha)
        write_json(plan.folder / RECORD, plan.record)
        report.fetched.append(label)
        done += 1
    if done == len(members):
        zpath.unlink(missing_ok=True)  # its size and sha256 stay in fetched.json; a later fetch checks against them


def run_plan(plan: Plan, report: FetchReport, timeout: float = 60.0, show: bool = True) -> None:
    """Transfer ``plan``'s pending files, recording each verified one in ``fetched.json`` as it lands."""
    report.already += plan.already
    if not plan.pending:
        return
    # written first: it pins the hub revision, so a resumed fetch asks for the same files
    write_json(plan.folder / RECORD, plan.record)
    if plan.from_zips:
        for name in plan.transfers():
            _fetch_archive(plan, name, report, timeout, show)
        return
    for rel in plan.pending:
        e, label = plan.record["files"][rel], f"{plan.paper.folder}/{rel}"
        if e["size"] is None:
            report.failed[label] = (f"{label}: the copy's {RECORD} records no size for it; fetch it into the copy "
                                    "first, or fetch without --from")
            continue
        try:
            e["sha256"] = fetch_to(e["url"], plan.folder / rel, e["size"], e["sha256"], label, timeout, show)
        except FetchError as err:
            report.failed[label] = str(err)
            continue
        write_json(plan.folder / RECORD, plan.record)
        report.fetched.append(label)


def fetch_papers(root: str | Path, names: list[str] | None = None, source: str | None = None,
                 timeout: float = 60.0, show: bool = True, out: Callable[[str], None] = print) -> FetchReport:
    """Fetch the papers' datasets ``names`` (default all) into ``root``: list every file and print the sizes with
    ``out`` first, then transfer; a file that fails is reported and the others go on. An unknown name raises
    :class:`UnknownDatasetError` before anything is listed."""
    if unknown := [n for n in names or () if n not in PAPERS]:
        raise UnknownDatasetError(f"unknown dataset(s) {', '.join(map(repr, unknown))} for --papers; the papers' "
                                  f"datasets are {', '.join(PAPERS)} (none named: all of them)")
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    plans = [plan_paper(PAPERS[n], root, source, timeout) for n in (list(dict.fromkeys(names)) if names else PAPERS)]
    out(format_plan(plans, root))
    report = FetchReport(root)
    for plan in plans:
        if plan.error:
            report.failed[plan.paper.name] = plan.error
        else:
            run_plan(plan, report, timeout, show)
    return report


# ---------------------------------------------------------------------- check
@dataclass
class PaperStatus:
    """One dataset of the papers in a data folder: ``absent``, ``unrecorded`` (files but no ``fetched.json``),
    ``incomplete``, ``complete`` or ``corrupt`` (a file differs from ``fetched.json``: ``problems`` say which)."""

    paper: Paper
    state: str
    files: int = 0
    size: int = 0
    verified: int = 0
    listed: int = 0  # files in fetched.json
    problems: list[str] = field(default_factory=list)


def paper_status(paper: Paper, root: Path) -> PaperStatus:
    """Check ``paper``'s files under ``root`` against its ``fetched.json`` (size and sha256; no network)."""
    folder, fix = root / paper.folder, f"fix: ./gr data --fetch {root} --papers {paper.name}"
    try:
        rec = read_record(folder)
    except FetchError as err:
        return PaperStatus(paper, "corrupt", problems=[str(err)])
    if rec is None:
        found = list((folder / "data").glob("*.parquet")) if paper.repo else \
            [folder / m for _, ms in paper.archives for m in ms if (folder / m).is_file()]
        return PaperStatus(paper, "unrecorded" if found else "absent", len(found), sum(p.stat().st_size for p in found))
    st = PaperStatus(paper, "complete", listed=len(rec["files"]))
    for rel, e in rec["files"].items():
        kind, detail = file_state(folder / rel, e.get("size"), e.get("sha256"))
        if kind == "missing":
            continue
        st.files += 1
        st.size += (folder / rel).stat().st_size
        st.verified += kind == "ok"
        if kind in ("size", "sha256"):
            st.problems.append(f"{paper.folder}/{rel}: {detail} (fetched.json); {fix}")
    st.state = "corrupt" if st.problems else "complete" if st.verified == st.listed else "incomplete"
    return st


def format_status(statuses: list[PaperStatus], root: Path) -> str:
    """The ``--check`` table: which of the papers' datasets are here, and which stand-in runs when one is not."""
    lines = [f"papers' datasets under {root} (optional: absent, the suite runs the offline stand-in):",
             f"  {'dataset':11s} {'state':10s} {'files':>5s} {'size':>9s}  {'sha256 checked':16s} stand-in when absent"]
    for s in statuses:
        checked = ("no fetched.json" if s.state == "unrecorded" else "-" if s.state == "absent"
                   else f"{s.verified} of {s.listed}")
        lines.append(f"  {s.paper.name:11s} {s.state:10s} {s.files:>5d} {human(s.size) if s.files else '-':>9s}  "
                     f"{checked:16s} {s.paper.standin}")
        lines += [f"    corrupt {p}" for p in s.problems]
        if s.state in ("incomplete", "unrecorded"):
            lines.append(f"    to fetch the rest and record sha256: ./gr data --fetch {root} --papers {s.paper.name}")
    return "\n".join(lines)


def format_catalogue() -> str:
    """The ``--list`` table of the papers' datasets (what ``--fetch DIR --papers`` brings, from where)."""
    lines = ["papers' datasets (./gr data --fetch DIR --papers [NAME ...]):"]
    for p in PAPERS.values():
        src = f"{HF_ENDPOINT}/datasets/{p.repo}" if p.repo else f"{GQA_URL}/{{{','.join(a for a, _ in p.archives)}}}"
        lines.append(f"  {p.name:11s} {p.folder + '/':12s} {p.about}; {src}")
        lines.append(f"  {'':11s} {'':12s} stand-in when absent: {p.standin}")
    return "\n".join(lines)
