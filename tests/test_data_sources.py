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
from gr_core.graphqa import RAW_FILES
from gr_core.paths import DataNotFoundError, data_file, data_root


# ---------------------------------------------------------------------- a loopback server
class _Handler(BaseHTTPRequestHandler):
    """Serves ``server.files`` (path -> bytes) with ``Range`` support; paths in ``server.cut`` announce their whole
    length but send half and close (an interrupted transfer)."""

    def do_GET(self):  # noqa: N802 (http.server's naming)
        path = self.path.lstrip("/")
        rng = self.headers.get("Range")
        self.server.log.append((path, rng))
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
        self.end_headers()
        if path in self.server.cut:
            self.server.cut.discard(path)  # only the first request is cut
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.files, srv.cut, srv.log = {}, set(), []
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
    assert "missing  a/x.txt" in capsys.readouterr().out
    assert ds.main(argv + ["--fetch", str(tmp_path / "data"), "--from", str(tmp_path / "copy")]) == 0
    assert "1 fetched" in capsys.readouterr().out
    assert ds.main(argv + ["--check", str(tmp_path / "data")]) == 0
    with pytest.raises(SystemExit) as err:
        ds.main(["--from", str(tmp_path)])
    assert err.value.code == 2
