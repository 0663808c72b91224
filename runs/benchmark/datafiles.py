"""A paper's data files: a content-addressed cache, filled once per file and checked on the way in.

A paper declares each file it reads (paper.json "data": name, source, sha256, size; the schema is
runs.suites.importers.schema.DataEntry). `data_fetch` copies a file from the suite, or downloads
it, into a temporary file beside the cache entry, checks its size and sha256, and only then
renames it to `<cache root>/<sha256>`: whatever fails (a wrong hash, a truncated download, a server
that is down) leaves nothing at that path, so a file found there is always the declared one. Two
processes fetching the same file at once each write their own temporary file; the rename is
atomic and both hold the same bytes. The sandboxes bind the cached files read-only at
/data/<name> (sandbox.open_sandbox's `data`).

No Django here: the GPU check script (no database) fetches with the same code.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

DATA_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")
_CHUNK = 1 << 20
# How long a download may stall (connect or between two reads) before it is given up.
DOWNLOAD_TIMEOUT_SECONDS = 60


class DataError(Exception):
    """A data file could not be fetched, or what was fetched is not the declared file."""


@dataclass(frozen=True)
class DataFile:
    """One declared file of a paper; `base` is the paper's directory (local sources are relative to
    it), `within` the suite's (a local source must resolve inside it)."""

    name: str
    source: str
    sha256: str
    size: int
    base: Path | None = None
    within: Path | None = None

    @classmethod
    def from_entry(cls, entry: dict, *, base: Path | None, within: Path | None) -> DataFile:
        return cls(name=entry["name"], source=entry["source"], sha256=entry["sha256"], size=entry["size"],
                   base=base, within=within)

    def as_entry(self) -> dict:
        return {"name": self.name, "source": self.source, "sha256": self.sha256, "size": self.size}


def is_url(source: str) -> bool:
    return source.startswith(("http://", "https://"))


def data_source_problem(source: str) -> str | None:
    """What is wrong with a declared source ("" or None when nothing is): an http(s) URL, or a
    relative path inside the paper's directory."""
    if is_url(source):
        return None if len(source) > len("https://") else "is not a URL"
    if "://" in source:
        return "must be an http(s) URL or a path relative to the paper's directory"
    pure = PurePosixPath(source)
    if not source or pure.is_absolute() or ".." in pure.parts or "\\" in source or "\0" in source:
        return "must be a relative path inside the paper's directory (no '..', not absolute)"
    return None


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def cached_path(root: Path, sha256: str) -> Path:
    """Where the file of this content lives in the cache (present or not)."""
    return Path(root) / sha256


def cached(root: Path, data: DataFile) -> Path | None:
    """The cached file of `data`, or None when it has not been fetched. The cache holds only checked
    files (see data_fetch), so its size is all that is compared here."""
    path = cached_path(root, data.sha256)
    try:
        return path if path.stat().st_size == data.size else None
    except OSError:
        return None


def data_fetch(root: Path, data: DataFile, *, where: str) -> tuple[Path, bool]:
    """(the cached file, whether it was fetched now) for `data`; a no-op when it is cached already.

    `where` names the file's owner in messages ("paper digits-mixup"). Raises DataError naming the
    paper, the file, and what was expected against what came.
    """
    root = Path(root)
    path = cached(root, data)
    if path is not None:
        return path, False
    label = f"{where}: data file {data.name} ({data.source})"
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o755)  # the sandboxes (another uid) read through it
    handle = tempfile.NamedTemporaryFile(dir=root, prefix=f".{data.sha256[:16]}-", suffix=".part", delete=False)
    partial = Path(handle.name)
    try:
        with handle:
            digest, received = _copy_checked(data, handle, label=label)
        if received != data.size or digest != data.sha256:
            raise DataError(
                f"{label}: expected {data.size} bytes with sha256 {data.sha256}, got {received} bytes with sha256 {digest}"
            )
        os.chmod(partial, 0o444)
        os.replace(partial, cached_path(root, data.sha256))
    finally:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
    return cached_path(root, data.sha256), True


def _copy_checked(data: DataFile, target: IO[bytes], *, label: str) -> tuple[str, int]:
    """Copy the source into `target`, (sha256, bytes) of what came; stops a little beyond the
    declared size (a larger file is wrong whatever it holds)."""
    digest = hashlib.sha256()
    received = 0
    try:
        with _open_source(data, label=label) as source:
            while chunk := source.read(_CHUNK):
                digest.update(chunk)
                target.write(chunk)
                received += len(chunk)
                if received > data.size:
                    break
            # http.client ends a body cut short (fewer bytes than its Content-Length) like a whole one.
            if received <= data.size and (missing := getattr(source, "length", None)):
                raise DataError(
                    f"{label}: the download broke off after {received} of {data.size} bytes "
                    f"({missing} bytes the server announced never came)"
                )
    except DataError:
        raise
    except Exception as error:  # noqa: BLE001 - a broken connection has many types (IncompleteRead, OSError, ...)
        raise DataError(
            f"{label}: the download broke off after {received} of {data.size} bytes: {type(error).__name__}: {error}"
        ) from error
    return digest.hexdigest(), received


def _open_source(data: DataFile, *, label: str) -> IO[bytes]:
    if is_url(data.source):
        request = urllib.request.Request(data.source, headers={"User-Agent": "autoexperiment-data-fetch"})
        try:
            return urllib.request.urlopen(request, timeout=DOWNLOAD_TIMEOUT_SECONDS)  # noqa: S310 - http(s) only (is_url)
        except urllib.error.HTTPError as error:
            raise DataError(f"{label}: the server answered {error.code} {error.reason}") from error
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise DataError(f"{label}: cannot download: {reason}") from error
    if data.base is None:
        raise DataError(f"{label}: a local source needs the paper's directory, which is not known here")
    path = (Path(data.base) / data.source).resolve()
    # A symlink in the suite could point anywhere on the server.
    if not path.is_relative_to(Path(data.within or data.base).resolve()):
        raise DataError(f"{label}: the path leads outside the suite")
    try:
        return open(path, "rb")  # noqa: SIM115 - closed by the caller's with
    except OSError as error:
        raise DataError(f"{label}: cannot read {path}: {error.strerror}") from error


def copy_file(path: Path, dest: Path) -> None:
    """Copy a cached file out (task exports), writable again."""
    shutil.copyfile(path, dest)
    os.chmod(dest, 0o644)
