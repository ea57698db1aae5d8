"""The data manifest, ``./gr data --check`` and ``--fetch`` (against an HTTP server on 127.0.0.1, offline)."""
from __future__ import annotations

import hashlib
import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gr_core import data_sources as ds
from gr_core.data_papers import PAPERS
from gr_core.graphqa import RAW_FILES
from gr_core.paths import DataNotFoundError, data_file, data_root


# ---------------------------------------------------------------------- a loopback server
class _Handler(BaseHTTPRequestHandler):
    """Serves ``server.files`` (path -> bytes) with ``Range`` support; paths in ``server.cut`` announce their whole
    length but send half and close (an interrupted transfer)."""

    def do_GET(self):  # noqa: N802 (http.server's naming)
        path = self.path.lstrip("/")
        rng = self.headers.get("Range")
        self.server.log.append((path, rng) if self.command == "GET" else (self.command, path))
        body = self.server.files.get(path)
        if body is None:
            self.send_error(404)
            return
        start = int(rng.split("=")[1].rstrip("-")) if rng else 0
        data = body[start:]
        self.send_response(206 if rng else 200)
        if rng:
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
        self.send_header("Content-Length", str(len(data)))
        for key, value in self.server.headers.get(path, {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command == "HEAD":
            return
        if path in self.server.cut:
            self.server.cut.discard(path)  # only the first request is cut
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(data)

    do_HEAD = do_GET  # noqa: N815 (the same answer without its body)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.files, srv.cut, srv.log, srv.headers = {}, set(), [], {}
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}"
    yield srv
    srv.shutdown()
    srv.server_close()


def _entry(path: str, body: bytes, url: str | None = None) -> ds.RawFile:
    return ds.RawFile(path, path.split("/")[0], len(body), hashlib.sha256(body).hexdigest(), "test", url,
                      "made up for a test", ("tests",))


def _leftovers(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


# ---------------------------------------------------------------------- the manifest
def test_the_shipped_manifest_is_valid_and_covers_every_builder_input():
    files = ds.load_manifest()
    paths = {f.path for f in files}
    for dataset, rels in RAW_FILES.items():
        if dataset in PAPERS:  # the papers' own data: fetched with --papers into its folder, not in the manifest
            assert all(rel.startswith(PAPERS[dataset].folder + "/") for rel in rels), dataset
            continue
        assert set(rels) <= paths, f"{dataset}: raw files missing from the manifest: {set(rels) - paths}"
    for f in files:
        assert f.licence and f.source
        assert f.url is None or f.url.startswith("https://raw.githubusercontent.com/")


def test_a_malformed_manifest_names_the_entry_and_field(tmp_path):
    good = {"path": "a/b.txt", "dataset": "a", "size": 1, "sha256": "0" * 64, "licence": "x", "url": None,
            "source": "s", "used_by": []}
    cases = [({**good, "sha256": "xyz"}, "sha256"), ({**good, "size": -1}, "size"),
             ({k: v for k, v in good.items() if k != "licence"}, "licence"), ({**good, "path": "../etc"}, "path"),
             ({**good, "url": "ftp://x"}, "url")]
    for entry, fld in cases:
        path = tmp_path / "m.json"
        path.write_text(json.dumps({"files": [good | {"path": "ok.txt"}, entry]}))
        with pytest.raises(ds.ManifestError, match=rf"files\[1\].*{fld}"):
            ds.load_manifest(path)
    path.write_text("{not json")
    with pytest.raises(ds.ManifestError, match="line 1"):
        ds.load_manifest(path)


# ---------------------------------------------------------------------- check
@pytest.mark.data
def test_check_passes_on_the_shared_data_folder(capsys):
    assert ds.check() == []
    assert ds.main(["--check"]) == 0
    assert "match the manifest" in capsys.readouterr().out
    with pytest.raises(SystemExit) as stop:  # an empty $DIR is refused, not read as "the data folder"
        ds.main(["--check", " "])
    assert stop.value.code == 2 and "--check: name the folder" in capsys.readouterr().err


@pytest.mark.data
def test_check_names_each_missing_or_corrupt_file_of_a_damaged_copy(tmp_path, capsys):
    files = {f.path: f for f in ds.load_manifest()}
    picked = ["explagraphs/relations.txt", "explagraphs/split/val_indices.txt", "scene_graphs/gqa_micro/questions.csv",
              "metaqa/LICENSE_MetaQA"]
    for rel in picked:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(data_root() / rel, tmp_path / rel)
    (tmp_path / picked[1]).write_bytes((data_root() / picked[1]).read_bytes()[:-10])  # truncated
    raw = bytearray((data_root() / picked[2]).read_bytes())
    raw[100] ^= 1  # one bit flipped: same size
    (tmp_path / picked[2]).write_bytes(bytes(raw))
    (tmp_path / picked[3]).unlink()
    problems = ds.check(tmp_path, [files[r] for r in picked])
    assert [(p.path, p.kind) for p in problems] == [(picked[1], "size"), (picked[2], "sha256"), (picked[3], "missing")]
    assert all("./gr data --fetch" in str(p) for p in problems)
    # the command line checks the whole manifest: every other file is missing, these three among them
    assert ds.main(["--check", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f"{len(files) - 1} of {len(files)} files missing or corrupt" in out
    assert ds.main(["--check", str(tmp_path / "nowhere")]) == 1  # a folder that is not there: one line
    assert capsys.readouterr().err.strip() == (f"gr data: {tmp_path / 'nowhere'}: no such folder; ./gr data --fetch "
                                               f"{tmp_path / 'nowhere'} downloads the data into it")
    (tmp_path / "afile").write_text("x")
    assert ds.main(["--check", str(tmp_path / "afile")]) == 1
    assert capsys.readouterr().err.strip() == f"gr data: {tmp_path / 'afile'}: a file, not a folder"
    for rel in picked[1:]:
        assert rel in out


def test_builders_name_the_data_command_when_a_file_is_missing(monkeypatch, tmp_path):
    monkeypatch.setenv("GR_DATA_DIR", str(tmp_path))
    with pytest.raises(DataNotFoundError, match=r"metaqa/kb\.txt.*\./gr data"):
        data_file("metaqa", "kb.txt")
    monkeypatch.setenv("GR_DATA_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(DataNotFoundError, match=r"\./gr data --fetch"):
        data_file("metaqa", "kb.txt")


# ---------------------------------------------------------------------- fetch
def test_fetch_keeps_verified_files_and_rejects_truncated_and_wrong_ones(server, tmp_path):
    good, short, wrong = b"good bytes\n" * 500, b"truncated on the server\n" * 300, b"changed upstream\n" * 200
    files = [_entry("a/good.txt", good), _entry("a/short.txt", short), _entry("b/wrong.txt", wrong)]
    server.files = {"a/good.txt": good, "a/short.txt": short[:-100], "b/wrong.txt": wrong[:-1] + b"?"}
    report = ds.fetch(tmp_path, server.url, files, show=False)
    assert report.fetched == ["a/good.txt"] and not report.ok
    assert "expected 7,200" in report.failed["a/short.txt"] and "rejected" in report.failed["a/short.txt"]
    assert "sha256" in report.failed["b/wrong.txt"]
    assert _leftovers(tmp_path) == ["a/good.txt"]  # nothing half-written, no .part files
    assert (tmp_path / "a/good.txt").read_bytes() == good
    # a second run downloads nothing that is already verified
    server.log.clear()
    again = ds.fetch(tmp_path, server.url, files[:1], show=False)
    assert again.already == ["a/good.txt"] and server.log == []


def test_an_interrupted_download_is_kept_as_a_part_and_resumed(server, tmp_path):
    body = bytes(range(256)) * 400
    f = _entry("metaqa/kb.txt", body, url=f"{server.url}/metaqa/kb.txt")
    server.files, server.cut = {"metaqa/kb.txt": body}, {"metaqa/kb.txt"}
    first = ds.fetch(tmp_path, None, [f], show=False)  # from the entry's own URL
    assert "run the same command again to resume" in first.failed["metaqa/kb.txt"]
    part = tmp_path / "metaqa/kb.txt.part"
    assert part.stat().st_size == len(body) // 2 and not (tmp_path / "metaqa/kb.txt").exists()
    second = ds.fetch(tmp_path, None, [f], show=False)
    assert second.fetched == ["metaqa/kb.txt"]
    assert server.log[-1] == ("metaqa/kb.txt", f"bytes={len(body) // 2}-")  # only the rest was asked for
    assert (tmp_path / "metaqa/kb.txt").read_bytes() == body and not part.exists()


def test_an_empty_file_is_downloaded_and_verified(server, tmp_path):
    f = _entry("a/empty.txt", b"")
    server.files = {"a/empty.txt": b""}
    report = ds.fetch(tmp_path, server.url, [f], show=False)
    assert report.fetched == ["a/empty.txt"] and (tmp_path / "a/empty.txt").read_bytes() == b""


def test_fetch_from_a_local_copy_and_files_without_a_download(tmp_path):
    body = b"derived by the curators\n"
    copy = tmp_path / "copy"
    (copy / "webqsp").mkdir(parents=True)
    (copy / "webqsp/minigraphs.jsonl").write_bytes(body)
    f = _entry("webqsp/minigraphs.jsonl", body)  # url None: no public download of its own
    no_source = ds.fetch(tmp_path / "data", None, [f], show=False)
    assert "no public download" in no_source.failed[f.path] and "--from" in no_source.failed[f.path]
    from_copy = ds.fetch(tmp_path / "data", str(copy), [f], show=False)
    assert from_copy.fetched == [f.path]
    assert (tmp_path / "data" / f.path).read_bytes() == body


def test_an_http_error_is_reported_per_file(server, tmp_path):
    f = _entry("a/missing.txt", b"x")
    report = ds.fetch(tmp_path, server.url, [f], show=False)
    assert "HTTP 404" in report.failed["a/missing.txt"] and _leftovers(tmp_path) == []


@pytest.mark.data
def test_fetch_real_files_from_a_loopback_copy_with_the_shipped_manifest(server, tmp_path, capsys):
    files = {f.path: f for f in ds.load_manifest()}
    picked = ["explagraphs/relations.txt", "explagraphs/split/test_indices.txt", "scene_graphs/gqa_micro/questions.csv"]
    server.files = {rel: (data_root() / rel).read_bytes() for rel in picked}
    server.files[picked[2]] = server.files[picked[2]][:-1]  # a truncated copy on the server
    report = ds.fetch(tmp_path, server.url, [files[r] for r in picked], show=False)
    assert report.fetched == picked[:2] and list(report.failed) == [picked[2]]
    assert ds.check(tmp_path, [files[r] for r in picked[:2]]) == []
    assert _leftovers(tmp_path) == sorted(picked[:2])


def test_the_command_line_fetches_from_a_copy_with_another_manifest(tmp_path, capsys):
    body = b"one line\n"
    (tmp_path / "copy/a").mkdir(parents=True)
    (tmp_path / "copy/a/x.txt").write_bytes(body)
    f = _entry("a/x.txt", body)
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps({"files": [{**f.__dict__, "used_by": list(f.used_by)}]}))
    argv = ["--manifest", str(manifest)]
    assert ds.main(argv + ["--check", str(tmp_path / "data")]) == 1
    assert "no such folder" in capsys.readouterr().err
    (tmp_path / "data").mkdir()
    assert ds.main(argv + ["--check", str(tmp_path / "data")]) == 1
    assert "missing  a/x.txt" in capsys.readouterr().out
    assert ds.main(argv + ["--fetch", str(tmp_path / "data"), "--from", str(tmp_path / "copy")]) == 0
    assert "1 fetched" in capsys.readouterr().out
    assert ds.main(argv + ["--check", str(tmp_path / "data")]) == 0
    with pytest.raises(SystemExit) as err:
        ds.main(["--from", str(tmp_path)])
    assert err.value.code == 2


# ---------------------------------------------------------------------- the papers' datasets (a fake hub and host)
REV = "9583a106" * 5


def _parquet_like(seed: int, n: int = 3000) -> bytes:
    """Bytes that look like a parquet file (nothing here parses them)."""
    return b"PAR1" + hashlib.sha256(str(seed).encode()).digest() * (n // 32) + b"PAR1"


def _fake_hub(server, repo: str, files: dict[str, bytes], rev: str = REV) -> None:
    """The hub's revision and tree APIs for ``repo`` and its files under ``resolve/``; ``.parquet`` files are LFS
    (the tree gives their sha256 as ``lfs.oid``), the others are stored in git (a sha1 ``oid`` only)."""
    entries = [{"type": "directory", "path": "data/extra", "oid": "0" * 40, "size": 0}]
    for path, body in files.items():
        entry = {"type": "file", "path": path, "size": len(body), "oid": hashlib.sha1(body).hexdigest()}
        if path.endswith(".parquet"):
            entry["lfs"] = {"oid": hashlib.sha256(body).hexdigest(), "size": len(body), "pointerSize": 134}
        entries.append(entry)
        server.files[f"datasets/{repo}/resolve/{rev}/{path}"] = body
    server.files[f"api/datasets/{repo}/revision/main"] = json.dumps({"id": repo, "sha": rev}).encode()
    server.files[f"api/datasets/{repo}/tree/{rev}/data"] = json.dumps(entries).encode()


WEBQSP = {"data/test-00000-of-00001-9ee8d68f7d951e1f.parquet": _parquet_like(1),
          "data/train-00000-of-00001-d810a36ed97bc2cc.parquet": _parquet_like(2, 5000),
          "data/notes.txt": b"a small file stored in git, not LFS\n"}


@pytest.fixture
def hub(server, monkeypatch):
    monkeypatch.setenv("GR_HF_ENDPOINT", server.url)
    monkeypatch.setenv("GR_GQA_URL", f"{server.url}/gqa")
    monkeypatch.setenv("GR_PROGRESS", "off")
    _fake_hub(server, "rmanluo/RoG-webqsp", WEBQSP)
    return server


def _empty_manifest(tmp_path: Path) -> list[str]:
    path = tmp_path / "empty_manifest.json"
    path.write_text(json.dumps({"files": []}))
    return ["--manifest", str(path)]


def test_papers_sizes_are_printed_before_any_transfer_and_each_file_is_recorded(hub, tmp_path, capsys):
    from gr_core import data_papers as dp

    printed = []
    report = dp.fetch_papers(tmp_path / "data", ["rog_webqsp", "rog_cwq"], show=False,
                             out=lambda text: printed.append((text, [e for e in hub.log if "resolve" in e[0]])))
    (table, transfers_before), = printed
    assert transfers_before == []  # not one file byte had moved when the table was printed
    total = sum(map(len, WEBQSP.values()))
    assert f"rog_webqsp  {'3 files':>9s} {dp.human(total):>10s}" in table and f"@ {REV[:12]}" in table
    assert "rog_cwq     cannot list its files" in table and "HTTP 404" in report.failed["rog_cwq"]  # others go on
    assert sorted(report.fetched) == sorted(f"rog/webqsp/{p}" for p in WEBQSP)
    folder = tmp_path / "data/rog/webqsp"
    record = json.loads((folder / "fetched.json").read_text())
    assert record["revision"] == REV and record["source"] == f"{hub.url}/datasets/rmanluo/RoG-webqsp"
    for path, body in WEBQSP.items():
        assert (folder / path).read_bytes() == body
        assert record["files"][path] == {"url": f"{hub.url}/datasets/rmanluo/RoG-webqsp/resolve/{REV}/{path}",
                                         "size": len(body), "sha256": hashlib.sha256(body).hexdigest()}
    # the second fetch reads the pinned listing from fetched.json: it asks the hub nothing and transfers nothing
    hub.log.clear()
    again = dp.fetch_papers(tmp_path / "data", ["rog_webqsp"], show=False, out=lambda text: None)
    assert len(again.already) == 3 and again.fetched == [] and again.ok and hub.log == []
    assert ds.main(_empty_manifest(tmp_path) + ["--check", str(tmp_path / "data")]) == 0
    out = capsys.readouterr().out
    assert "rog_webqsp  complete       3" in out and "3 of 3" in out and "rog_cwq     absent" in out


def test_the_hub_listing_with_and_without_lfs_over_pages(server, monkeypatch):
    from gr_core import data_papers as dp

    monkeypatch.setenv("GR_HF_ENDPOINT", server.url)
    first, second = "api/datasets/o/r/tree/abc/data", "api/datasets/o/r/tree/abc/data?cursor=p2"
    server.files[first] = json.dumps([
        {"type": "directory", "path": "data/sub", "oid": "1" * 40, "size": 0},
        {"type": "file", "path": "data/a.parquet", "size": 99, "oid": "2" * 40,
         "lfs": {"oid": "a" * 64, "size": 99, "pointerSize": 132}}]).encode()
    server.headers[first] = {"Link": f'<{server.url}/{second}>; rel="next"'}
    server.files[second] = json.dumps([{"type": "file", "path": "data/b.json", "size": 5, "oid": "3" * 40}]).encode()
    assert dp.hub_files("o/r", "abc", timeout=5) == [{"path": "data/a.parquet", "size": 99, "sha256": "a" * 64},
                                                     {"path": "data/b.json", "size": 5, "sha256": None}]
    server.files["api/datasets/o/r/revision/main"] = b'{"id": "o/r"}'
    with pytest.raises(ds.FetchError, match="no 'sha'"):
        dp.hub_revision("o/r", timeout=5)


def test_a_cut_papers_transfer_is_resumed_with_a_range_request(hub, tmp_path):
    from gr_core import data_papers as dp

    path = "data/train-00000-of-00001-d810a36ed97bc2cc.parquet"
    url_path = f"datasets/rmanluo/RoG-webqsp/resolve/{REV}/{path}"
    hub.cut = {url_path}
    first = dp.fetch_papers(tmp_path, ["rog_webqsp"], show=False, out=lambda text: None)
    assert "run the same command again to resume" in first.failed[f"rog/webqsp/{path}"]
    part = tmp_path / "rog/webqsp" / (path + ".part")
    half = len(WEBQSP[path]) // 2
    assert part.stat().st_size == half and not (tmp_path / "rog/webqsp" / path).exists()
    printed = []
    second = dp.fetch_papers(tmp_path, ["rog_webqsp"], show=False, out=printed.append)
    assert dp.human(len(WEBQSP[path]) - half) in printed[0]  # the table counts only what is left to move
    assert second.fetched == [f"rog/webqsp/{path}"] and len(second.already) == 2
    assert (url_path, f"bytes={half}-") in hub.log
    assert (tmp_path / "rog/webqsp" / path).read_bytes() == WEBQSP[path] and not part.exists()


def test_a_wrong_sha256_from_the_hub_is_rejected_and_the_other_files_go_on(hub, tmp_path):
    from gr_core import data_papers as dp

    path = "data/test-00000-of-00001-9ee8d68f7d951e1f.parquet"
    url_path = f"datasets/rmanluo/RoG-webqsp/resolve/{REV}/{path}"
    hub.files[url_path] = hub.files[url_path][:-1] + b"!"  # same size, not the bytes whose sha256 the hub lists
    report = dp.fetch_papers(tmp_path, ["rog_webqsp"], show=False, out=lambda text: None)
    why = report.failed[f"rog/webqsp/{path}"]
    assert "sha256" in why and "rejected, nothing kept" in why and len(report.fetched) == 2
    assert _leftovers(tmp_path / "rog/webqsp") == sorted(["fetched.json", *(p for p in WEBQSP if p != path)])


def test_a_recorded_sha256_is_checked_by_later_fetches_and_by_check(hub, tmp_path, capsys):
    from gr_core import data_papers as dp

    dp.fetch_papers(tmp_path, ["rog_webqsp"], show=False, out=lambda text: None)
    notes = tmp_path / "rog/webqsp/data/notes.txt"
    url_path = f"datasets/rmanluo/RoG-webqsp/resolve/{REV}/data/notes.txt"
    recorded = json.loads((tmp_path / "rog/webqsp/fetched.json").read_text())["files"]["data/notes.txt"]["sha256"]
    assert recorded == hashlib.sha256(WEBQSP["data/notes.txt"]).hexdigest()  # not LFS: recorded on first fetch
    notes.write_bytes(b"A" + WEBQSP["data/notes.txt"][1:])  # damaged in place, same size
    assert ds.main(_empty_manifest(tmp_path) + ["--check", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "rog_webqsp  corrupt" in out and "corrupt rog/webqsp/data/notes.txt: sha256" in out
    assert f"./gr data --fetch {tmp_path} --papers rog_webqsp" in out
    # the host now serves other bytes of the same size: the recorded digest rejects them
    hub.files[url_path] = b"B" + WEBQSP["data/notes.txt"][1:]
    changed = dp.fetch_papers(tmp_path, ["rog_webqsp"], show=False, out=lambda text: None)
    assert "sha256" in changed.failed["rog/webqsp/data/notes.txt"] and not notes.with_name("notes.txt.part").exists()
    hub.files[url_path] = WEBQSP["data/notes.txt"]
    assert dp.fetch_papers(tmp_path, ["rog_webqsp"], show=False, out=lambda text: None).fetched == \
        ["rog/webqsp/data/notes.txt"]
    assert ds.main(_empty_manifest(tmp_path) + ["--check", str(tmp_path)]) == 0


def _zip(members: dict[str, bytes]) -> bytes:
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, body in members.items():
            zf.writestr(name, body)
    return buf.getvalue()


GQA_FILES = {"train_sceneGraphs.json": b'{"2370799": {"objects": {}}}', "val_sceneGraphs.json": b'{"1": {}}',
             "train_balanced_questions.json": b'{"q1": {"question": "what?"}}' * 40,
             "val_balanced_questions.json": b'{"q2": {}}'}


def test_gqa_zips_are_resumed_verified_and_only_the_balanced_files_extracted(hub, tmp_path, capsys):
    from gr_core import data_papers as dp

    scenes = _zip({k: v for k, v in GQA_FILES.items() if "scene" in k})
    questions = _zip({"train_balanced_questions.json": GQA_FILES["train_balanced_questions.json"],
                      "questions1.2/val_balanced_questions.json": GQA_FILES["val_balanced_questions.json"],
                      "train_all_questions/train_all_questions_0.json": b"{}" * 500, "readme.txt": b"GQA"})
    hub.files.update({"gqa/sceneGraphs.zip": scenes, "gqa/questions1.2.zip": questions})
    hub.cut = {"gqa/questions1.2.zip"}
    printed = []
    first = dp.fetch_papers(tmp_path, ["gqa"], show=False, out=printed.append)
    assert "2 zips" in printed[0] and dp.human(len(scenes) + len(questions)) in printed[0]
    assert hub.log[:2] == [("HEAD", "gqa/sceneGraphs.zip"), ("HEAD", "gqa/questions1.2.zip")]  # sizes first
    assert sorted(first.fetched) == ["gqa/train_sceneGraphs.json", "gqa/val_sceneGraphs.json"]
    assert all("resume" in why for why in first.failed.values()) and len(first.failed) == 2
    second = dp.fetch_papers(tmp_path, ["gqa"], show=False, out=lambda text: None)
    assert ("gqa/questions1.2.zip", f"bytes={len(questions) // 2}-") in hub.log and len(second.already) == 2
    assert _leftovers(tmp_path / "gqa") == sorted(["fetched.json", *GQA_FILES])  # zips deleted, nothing else
    for name, body in GQA_FILES.items():
        assert (tmp_path / "gqa" / name).read_bytes() == body
    record = json.loads((tmp_path / "gqa/fetched.json").read_text())
    assert record["archives"]["questions1.2.zip"]["sha256"] == hashlib.sha256(questions).hexdigest()
    assert record["files"]["val_balanced_questions.json"]["size"] == len(GQA_FILES["val_balanced_questions.json"])
    assert ds.main(_empty_manifest(tmp_path) + ["--check", str(tmp_path)]) == 0
    assert "gqa         complete       4" in capsys.readouterr().out


def test_a_zip_without_a_named_member_is_reported_and_kept_for_the_next_run(hub, tmp_path):
    from gr_core import data_papers as dp

    hub.files["gqa/sceneGraphs.zip"] = _zip({"train_sceneGraphs.json": GQA_FILES["train_sceneGraphs.json"]})
    hub.files["gqa/questions1.2.zip"] = _zip({"readme.txt": b"GQA"})
    report = dp.fetch_papers(tmp_path, ["gqa"], show=False, out=lambda text: None)
    assert report.fetched == ["gqa/train_sceneGraphs.json"]
    assert "holds no val_sceneGraphs.json" in report.failed["gqa/val_sceneGraphs.json"]
    assert (tmp_path / "gqa/sceneGraphs.zip").is_file()  # verified and kept: a rerun extracts without downloading


def test_an_unreadable_zip_is_deleted_and_each_of_its_members_says_so(hub, tmp_path):
    from gr_core import data_papers as dp

    hub.files["gqa/sceneGraphs.zip"] = b"not a zip archive" * 20
    hub.files["gqa/questions1.2.zip"] = _zip({"readme.txt": b"GQA"})
    report = dp.fetch_papers(tmp_path, ["gqa"], show=False, out=lambda text: None)
    for name in ("train_sceneGraphs.json", "val_sceneGraphs.json"):
        assert "is unreadable" in report.failed[f"gqa/{name}"] and "was deleted" in report.failed[f"gqa/{name}"]
    assert not (tmp_path / "gqa/sceneGraphs.zip").exists()


def test_unknown_papers_datasets_are_refused_with_the_names_to_use(tmp_path, capsys):
    assert ds.main(["--fetch", str(tmp_path / "data"), "--papers", "rog_webqsp", "webqsp2"]) == 2
    err = capsys.readouterr().err
    assert "unknown dataset(s) 'webqsp2'" in err and "rog_webqsp, rog_cwq, gqa" in err
    assert not (tmp_path / "data").exists()
    with pytest.raises(SystemExit) as exit_:
        ds.main(["--papers", "gqa"])
    assert exit_.value.code == 2


def test_check_and_list_name_the_papers_datasets_and_their_stand_ins(tmp_path, capsys):
    assert ds.main(_empty_manifest(tmp_path) + ["--check", str(tmp_path)]) == 0  # absent is not an error
    out = capsys.readouterr().out
    assert out.count(" absent ") == 3 and "webqsp_full (18 complete RoG test graphs)" in out
    assert "none: the CWQ rows are skipped" in out and "gqa_micro (14 scene graphs)" in out
    (tmp_path / "rog/cwq/data").mkdir(parents=True)
    (tmp_path / "rog/cwq/data/train-00000-of-00018-x.parquet").write_bytes(_parquet_like(3))
    assert ds.main(_empty_manifest(tmp_path) + ["--check", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "rog_cwq     unrecorded     1" in out and "no fetched.json" in out and "--papers rog_cwq" in out
    assert ds.main(_empty_manifest(tmp_path) + ["--list"]) == 0
    assert "huggingface.co/datasets/rmanluo/RoG-cwq" in capsys.readouterr().out


def test_papers_datasets_from_a_copy_of_a_data_folder(hub, tmp_path, capsys):
    from gr_core import data_papers as dp

    dp.fetch_papers(tmp_path / "a", ["rog_webqsp"], show=False, out=lambda text: None)
    hub.log.clear()
    assert ds.main(["--fetch", str(tmp_path / "b"), "--papers", "rog_webqsp", "--from", str(tmp_path / "a")]) == 0
    assert "3 files fetched" in capsys.readouterr().out and hub.log == []  # no host asked
    for path, body in WEBQSP.items():
        assert (tmp_path / "b/rog/webqsp" / path).read_bytes() == body
    record = json.loads((tmp_path / "b/rog/webqsp/fetched.json").read_text())
    assert record["revision"] == REV and record["via"] == str(tmp_path / "a")
    # the same copy served over http
    for path in [*WEBQSP, "fetched.json"]:
        hub.files[f"copy/rog/webqsp/{path}"] = (tmp_path / "a/rog/webqsp" / path).read_bytes()
    report = dp.fetch_papers(tmp_path / "c", ["rog_webqsp"], f"{hub.url}/copy", show=False, out=lambda text: None)
    assert report.ok and len(report.fetched) == 3
    missing = dp.fetch_papers(tmp_path / "d", ["gqa"], str(tmp_path / "a"), show=False, out=lambda text: None)
    assert "has no readable gqa/fetched.json" in missing.failed["gqa"]
