"""The dataset downloads (leaderboard.datasets), built once per change of what they hold and then
served from files.

A download's version is a digest of what its files are made of, read in a few small queries
whatever the number of attempts:
- the suite's tasks: its row (version, import time) and how many papers, functions, experiments and
  samples it has with their newest ids (samples are also drawn outside imports, when a run asks for
  an n not drawn yet); a re-import that changes anything, even a text in place (a function's
  docstring), moves `imported_at` (runs.suites.importers.common.mark_suite_changed);
- each system's attempts: its standing's count of changes, which leaderboard.standings bumps in the
  transaction of every change to the system's attempts and runs (an attempt settled, uploaded or
  re-executed, a run hidden, shown, moved or deleted), and the ids of its public runs now, so that a
  hidden run leaves at once whatever the standings say;
- FORMAT, for a change of the files themselves.
A system's attempts with a result but no standing were written behind the application's back:
`manage.py refresh_standings --all` counts them as changed, here as on the leaderboard.

Files, under settings.DATASET_CACHE_ROOT (any of them may be deleted: it is built again on request):
    <suite>/dataset/<version>.zip                        the suite's download
    <suite>/samples/<version>.parquet                    its samples with their tasks
    <suite>/systems/<slug>/attempts/<version>.parquet    one system's attempts
    <suite>/systems/<slug>/dataset/<version>.zip         that system's download
The suite's attempts are its systems' files put together: after an attempt settles only its
system's attempts are read from the database again.

Each folder holds the current version of one thing and a lock file. A missing file is written under
the folder's lock (fcntl.flock, which the kernel releases when a process dies), into a temporary file
renamed into place, so that nobody ever reads a partial file and concurrent first requests build it
once: the others wait for it, then read it. The older versions are deleted once the new one is in
place; a request still sending one goes on (an open file outlives its name). Locks are taken in one
order: the suite's download, a system's download, a system's attempts or the samples; a build holds
its download's lock and takes one lock further down at a time, so no two builds wait for each other
for good.

A version is read before the data it stands for, so a file holds what was there when its version was
read, or newer: a file whose version was read before a run was hidden may hold that run's attempts,
but no request that starts after the hiding asks for that version, and the build that replaces it
deletes it.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pandas as pd
import pyarrow.parquet as pq
from django.db.models import Count, Max, Q

from leaderboard.datasets import (
    ATTEMPTS_FILE,
    DatasetError,
    attempts_merge,
    attempts_write,
    dataset_zip_write,
    samples_attempted,
    samples_write,
    suite_card,
    suite_get,
    system_card,
)
from leaderboard.models import SystemStanding
from leaderboard.rules import runs_frame, system_key_q, system_name
from runs.models import Experiment, Function, Paper, Sample, Suite

# Part of every version: a change to what the files hold for the same data (a column, the card)
# bumps it, so that no file of the old format is served after a deployment.
FORMAT = 1
LOCK = ".lock"


def _digest(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, default=str).encode("utf-8")).hexdigest()[:32]


@dataclass(frozen=True)
class _System:
    """One system of a download, and the version of its attempts."""

    slug: str
    version: str


@dataclass(frozen=True, eq=False)
class DatasetVersion:
    """One download as it stands: the suite's, or one system's (`slug`), the versions it is made
    of, its own (`digest`), and the public runs its attempts are of (leaderboard.rules.runs_frame)."""

    suite: Suite
    tasks: str
    systems: tuple[_System, ...]
    slug: str | None
    digest: str
    runs: pd.DataFrame

    @property
    def etag(self) -> str:
        return f'"{self.digest}"'

    @property
    def top(self) -> str:
        """The folder its files are in inside the zip, and the zip's name less ".zip"."""
        return f"autoexperiment-{self.suite.name}" if self.slug is None else f"autoexperiment-system-{self.slug}"

    @property
    def filename(self) -> str:
        return f"{self.top}.zip"

    def folder(self, root: Path) -> Path:
        suite = Path(root) / self.suite.name
        return suite / "dataset" if self.slug is None else suite / "systems" / self.slug / "dataset"

    def path(self, root: Path) -> Path:
        return self.folder(root) / f"{self.digest}.zip"


def _tasks_version(suite: Suite) -> str:
    counted = [
        model.objects.filter(**{lookup: suite}).aggregate(count=Count("pk"), newest=Max("pk"))
        for model, lookup in ((Paper, "suite"), (Function, "paper__suite"), (Experiment, "paper__suite"),
                              (Sample, "paper__suite"))
    ]
    return _digest(FORMAT, suite.pk, suite.name, suite.version, suite.imported_at, counted)


def _systems(runs: pd.DataFrame, standings: dict[str, tuple[int, int]]) -> tuple[_System, ...]:
    """The systems of `runs` (public runs), each with the version of its attempts."""
    run_ids: dict[str, list[int]] = {}
    for slug, pk in zip(runs["slug"], runs["run_id"], strict=True):
        run_ids.setdefault(slug, []).append(int(pk))
    return tuple(
        _System(slug=slug, version=_digest(FORMAT, slug, standings.get(slug), sorted(ids))) for slug, ids in sorted(run_ids.items())
    )


def suite_dataset_version(*, suite: str) -> DatasetVersion:
    """The suite's download as it stands (every sample, the attempts of every public run); DatasetError
    when there is no such suite."""
    found = suite_get(suite)
    standings = {slug: (pk, changes) for slug, pk, changes in
                 SystemStanding.objects.filter(suite=found.name).values_list("slug", "pk", "changes")}
    runs = runs_frame(Q(suite=found))
    systems = _systems(runs, standings)
    tasks = _tasks_version(found)
    return DatasetVersion(suite=found, tasks=tasks, systems=systems, slug=None, runs=runs,
                          digest=_digest(FORMAT, tasks, [(system.slug, system.version) for system in systems]))


def system_dataset_version(*, slug: str) -> DatasetVersion:
    """System `slug`'s download as it stands (the attempts of its public runs, the samples they were
    at); DatasetError when it has no public run."""
    standing = SystemStanding.objects.filter(slug=slug).first()
    runs = runs_frame(system_key_q(standing))
    runs = runs[runs["slug"] == slug]
    if runs.empty:
        raise DatasetError(f"no system {slug!r} with a public run")
    suite = Suite.objects.get(name=runs.iloc[0]["suite"])
    systems = _systems(runs, {slug: (standing.pk, standing.changes)} if standing is not None else {})
    tasks = _tasks_version(suite)
    return DatasetVersion(suite=suite, tasks=tasks, systems=systems, slug=slug, runs=runs,
                          digest=_digest(FORMAT, tasks, slug, systems[0].version))


def _current(version: DatasetVersion) -> DatasetVersion:
    if version.slug is None:
        return suite_dataset_version(suite=version.suite.name)
    return system_dataset_version(slug=version.slug)


def dataset_built_at(version: DatasetVersion, *, root: Path) -> float | None:
    """When the file of `version` was written (a timestamp), or None while it is not there."""
    try:
        return version.path(root).stat().st_mtime
    except FileNotFoundError:
        return None


def dataset_open(version: DatasetVersion, *, root: Path) -> tuple[BinaryIO, DatasetVersion]:
    """The zip of `version` opened for reading, and its version. When it is not there (never built,
    or replaced by a newer one since `version` was read), that of the download as it stands now,
    built first. DatasetError when the download is gone meanwhile (a system's runs all hidden)."""
    archive = _open(version.path(root))
    if archive is not None:
        return archive, version
    folder = version.folder(root)
    with _locked(folder):
        # Read again under the lock: a request that waited here for another's build finds it done.
        current = _current(version)
        path = current.path(root)
        archive = _open(path)
        if archive is None:
            archive = _store(folder, path.name, lambda dest: _zip_write(dest, current, root=root))
            if current.slug is None:
                _forget_systems_gone(current, root=root)
    return archive, current


# --- building ------------------------------------------------------------------------------------


def _zip_write(dest: Path, version: DatasetVersion, *, root: Path) -> None:
    samples_folder = Path(root) / version.suite.name / "samples"
    with _cached(samples_folder, f"{version.tasks}.parquet", lambda path: samples_write(path, version.suite)) as samples:
        if version.slug is None:
            merged = dest.with_name(f"{dest.name}.{ATTEMPTS_FILE}")
            try:
                attempts = attempts_merge(merged, _parts(version, root=root))
                card = suite_card(version.suite, samples=pq.ParquetFile(samples).metadata.num_rows, attempts=attempts)
                samples.seek(0)
                with merged.open("rb") as merged_file:
                    dataset_zip_write(dest, top=version.top, samples=samples, attempts=merged_file, card=card)
            finally:
                merged.unlink(missing_ok=True)
            return
        with _part(version, version.systems[0], root=root) as attempts:
            table = samples_attempted(samples, attempts)
            attempts.seek(0)
            first = version.runs.iloc[0]
            card = system_card(version.suite, slug=version.slug, name=system_name(model=first["model"], agent=first["agent"]),
                               samples=table.num_rows, attempts=pq.ParquetFile(attempts).metadata.num_rows)
            attempts.seek(0)
            dataset_zip_write(dest, top=version.top, samples=table, attempts=attempts, card=card)


def _part(version: DatasetVersion, system: _System, *, root: Path) -> BinaryIO:
    """The system's attempts file, opened (built first when it is not there)."""
    folder = Path(root) / version.suite.name / "systems" / system.slug / "attempts"
    return _cached(folder, f"{system.version}.parquet",
                   lambda path: attempts_write(path, version.runs[version.runs["slug"] == system.slug]))


def _parts(version: DatasetVersion, *, root: Path) -> Iterator[BinaryIO]:
    """Each system's attempts file, opened one at a time: the previous is closed when the next is asked for."""
    for system in version.systems:
        with _part(version, system, root=root) as part:
            yield part


def _forget_systems_gone(version: DatasetVersion, *, root: Path) -> None:
    """Delete the files of the suite's systems that are no longer in its download (their runs
    hidden or deleted): no request asks for them any more."""
    systems = Path(root) / version.suite.name / "systems"
    kept = {system.slug for system in version.systems}
    for folder in sorted(systems.iterdir()) if systems.is_dir() else []:
        if folder.name not in kept:
            for kind in ("dataset", "attempts"):
                if (folder / kind).is_dir():
                    with _locked(folder / kind):
                        _forget(folder / kind, keep=None)


# --- files under a lock ----------------------------------------------------------------------------


@contextmanager
def _locked(folder: Path):
    """Hold `folder`'s lock (created with the folder when missing), waiting for whoever holds it."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / LOCK, "ab") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _open(path: Path) -> BinaryIO | None:
    try:
        return path.open("rb")
    except FileNotFoundError:
        return None


def _store(folder: Path, name: str, write: Callable[[Path], object]) -> BinaryIO:
    """Under `folder`'s lock (the caller holds it): `write` the file `name` into a temporary path,
    rename it into place, open it, and delete every other file of the folder."""
    partial = folder / f".{name}.partial"
    try:
        write(partial)
        os.replace(partial, folder / name)
    finally:
        partial.unlink(missing_ok=True)
    opened = (folder / name).open("rb")
    _forget(folder, keep=name)
    return opened


def _cached(folder: Path, name: str, write: Callable[[Path], object]) -> BinaryIO:
    """The file `name` of `folder` opened for reading, written first by `write` when it is not there."""
    opened = _open(folder / name)
    if opened is not None:
        return opened
    with _locked(folder):
        return _open(folder / name) or _store(folder, name, write)


def _forget(folder: Path, *, keep: str | None) -> None:
    """Delete the files of `folder` but its lock and `keep`: older versions, a dead build's leftovers."""
    for path in folder.iterdir():
        if path.name not in (LOCK, keep) and path.is_file():
            path.unlink(missing_ok=True)
