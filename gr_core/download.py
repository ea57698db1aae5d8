"""Verified, resumable transfers for ``./gr data``: one file from an http(s) URL or a local copy into a data folder.

A transfer goes to ``<file>.part`` (a cut one is resumed by the next call with a ``Range`` request) and gets the file's
name only once its size and sha256 match, so a data folder never holds an unverified file under a final name.
"""
from __future__ import annotations

import http.client
import json
import os
import shutil
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .runs import progress, sha256_file

CHUNK = 1 << 16
USER_AGENT = "gr-core-data"


class FetchError(RuntimeError):
    """One file could not be fetched and verified; the message says why and what to do."""


@dataclass
class FetchReport:
    """What a fetch did, per file (paths relative to the data folder)."""

    root: Path
    already: list[str] = field(default_factory=list)  # verified in place before this fetch
    fetched: list[str] = field(default_factory=list)  # downloaded (or copied) and verified
    failed: dict[str, str] = field(default_factory=dict)  # path (or dataset) -> why, and what to do

    @property
    def ok(self) -> bool:
        return not self.failed


def is_url(origin: str) -> bool:
    return origin.startswith(("http://", "https://"))


def join(base: str, *parts: str) -> str:
    """``parts`` (``/``-separated) under ``base``: a URL or a local folder."""
    return "/".join([base.rstrip("/"), *parts]) if is_url(base) else str(Path(base, *parts))


def file_state(path: Path, size: int | None, sha256: str | None) -> tuple[str, str]:
    """``(kind, detail)``: kind ``ok`` (size and sha256 match), ``missing``, ``unverified`` (no sha256 to compare
    with), or ``size`` or ``sha256`` when that differs (detail says how)."""
    if not path.is_file():
        return "missing", "not found"
    if size is not None and (got := path.stat().st_size) != size:
        return "size", f"{got:,} bytes, expected {size:,}"
    if sha256 is None:
        return "unverified", "no sha256 recorded"
    if (digest := sha256_file(path)) != sha256:
        return "sha256", f"sha256 {digest[:12]}..., expected {sha256[:12]}..."
    return "ok", ""


def download(url: str, part: Path, size: int, label: str, timeout: float, show: bool) -> None:
    """Append ``url``'s bytes to ``part``, resuming from its current size with a ``Range`` request."""
    have = part.stat().st_size if part.exists() else 0
    if part.exists() and have == size:  # a complete leftover: verified as it is (an empty file is still requested)
        return
    if have > size:  # an oversized leftover: start again
        part.unlink()
        have = 0
    req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    if have:
        req.add_header("Range", f"bytes={have}-")  # urllib keeps it across redirects (the hub redirects to a CDN)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            if have and resp.status != 206:  # the server ignored the range: start over
                have = 0
            announced = resp.headers.get("Content-Length")
            received = 0
            bar = progress(total=size, initial=have, unit="B", unit_scale=True, desc=label, disable=not show,
                           leave=False)
            with bar, open(part, "ab" if have else "wb") as fh:
                while block := resp.read(CHUNK):
                    fh.write(block)
                    received += len(block)
                    bar.update(len(block))
            # http.client returns b"" when the connection closes early instead of raising: compare with the header
            if announced is not None and received < int(announced):
                raise ConnectionError(f"connection closed after {received:,} of {int(announced):,} announced bytes")
    except urllib.error.HTTPError as err:
        raise FetchError(f"{label}: {url} answered HTTP {err.code} {err.reason}") from err
    except (http.client.IncompleteRead, OSError) as err:  # OSError: also ConnectionError, TimeoutError, URLError
        got = part.stat().st_size if part.exists() else 0
        raise FetchError(f"{label}: transfer from {url} cut after {got:,} of {size:,} bytes ({err}); the part "
                         f"is kept as {part.name}: run the same command again to resume") from err


def fetch_to(origin: str, dest: Path, size: int, sha256: str | None, label: str, timeout: float, show: bool) -> str:
    """Download (or copy) ``origin`` into ``dest`` through ``dest.part``, verify it, move it to its name and return
    its sha256; a FetchError for an HTTP error, a cut transfer (its ``.part`` stays for a resume), a missing local copy,
    or a wrong size or hash (nothing stays)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    if is_url(origin):
        download(origin, part, size, label, timeout, show)
    elif Path(origin).is_file():
        shutil.copyfile(origin, part)
    else:
        raise FetchError(f"{label}: not found in the copy (looked for {origin})")
    kind, detail = file_state(part, size, sha256)
    if kind in ("size", "sha256"):
        part.unlink()
        cause = "is truncated or a different version" if kind == "size" else "changed or the transfer was corrupted"
        raise FetchError(f"{label}: {origin} gave {detail}; rejected, nothing kept (the source {cause})")
    os.replace(part, dest)
    return sha256 or sha256_file(dest)  # hashed once: file_state hashed it when there was a sha256 to compare


def _request(url: str, timeout: float, method: str = "GET", **headers: str) -> tuple[bytes, Any]:
    """The body (empty for a ``HEAD``) and the headers of ``url``'s answer; a FetchError for an HTTP error or an
    unreachable host."""
    req = urllib.request.Request(url, method=method, headers={"User-Agent": USER_AGENT, **headers})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.read(), resp.headers
    except urllib.error.HTTPError as err:
        raise FetchError(f"{url} answered HTTP {err.code} {err.reason}") from err
    except (http.client.HTTPException, OSError) as err:  # URLError is an OSError
        raise FetchError(f"{url}: unreachable ({err}); is the network up, or pass --from SOURCE") from err


def get_json(url: str, timeout: float) -> tuple[Any, str | None]:
    """A JSON document from an http(s) URL or a local path, and the URL of its next page (a ``Link: rel="next"``
    header, as the Hugging Face hub's tree listing pages), or None; a FetchError when it cannot be read or parsed."""
    if not is_url(url):
        try:
            return json.loads(Path(url).read_text(encoding="utf-8")), None
        except (OSError, ValueError) as err:
            raise FetchError(f"{url}: cannot read it as JSON ({err})") from err
    body, headers = _request(url, timeout, Accept="application/json")
    try:
        doc = json.loads(body)
    except ValueError as err:
        raise FetchError(f"{url}: not JSON ({err})") from err
    links = headers.get("Link", "").split(",")
    return doc, next((p.split(";")[0].strip().strip("<>") for p in links if 'rel="next"' in p), None)


def remote_size(url: str, timeout: float) -> int:
    """The size a URL announces (``Content-Length`` of a ``HEAD``), or a local file's size; a FetchError when there is
    none to read."""
    if not is_url(url):
        if not Path(url).is_file():
            raise FetchError(f"{url}: not found")
        return Path(url).stat().st_size
    length = _request(url, timeout, "HEAD")[1].get("Content-Length")
    if length is None:
        raise FetchError(f"{url}: the host announced no size, so the download could not be verified")
    return int(length)
