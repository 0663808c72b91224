"""Task export: a suite's samples as files a submitter runs their own agent on, offline.

An export directory holds
- `manifest.jsonl`: one line per sample (id, paper, n, masked functions, experiments with their
  description, command and answer format), taken from the task.json the harness writes; never gold;
- `samples/<sample_id>.tar.gz`: the sample's workspace exactly as the harness builds it
  (`workspace_build`), under a top directory named after the sample;
- `README.md`: the task, the answer format and the upload format;
- `data/<paper_id>/<name>`: the papers' declared data files up to EXPORT_DATA_MAX_BYTES each (the
  sandboxes bind them at /data/<name>); every data file, larger ones too, is listed in the manifest
  with its source, sha256 and size.

Archives are deterministic (sorted members, fixed times and owners, gzip time 0), so the same suite
version exports the same bytes, and the download cache (`task_archive_cached`) can be rebuilt at any
time without changing what people already downloaded.
"""
import gzip
import io
import json
import os
import re
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from runs.benchmark.datafiles import DataError, DataFile, cached, data_fetch, is_url
from runs.benchmark.workspace import CONTEXT_CONDITIONS, WorkspaceError
from runs.models import Paper, Sample, Suite
from runs.suites.environments import paper_needs
from runs.suites.services import samples_ensure, workspace_build

MANIFEST = "manifest.jsonl"
README = "README.md"
SAMPLES_DIR = "samples"
DATA_DIR = "data"
# Data files up to this size travel in the export; larger ones are listed (source, sha256, size) for
# the submitter to fetch: a 1 MiB file is a few percent of a typical sample archive's download.
EXPORT_DATA_MAX_BYTES = 1 << 20
# Every member's modification time: 2000-01-01, a fixed point (0 makes some tools warn about 1970).
ARCHIVE_MTIME = 946684800


class ExportError(Exception):
    pass


@dataclass(frozen=True)
class ExportSummary:
    dest: Path
    samples: int
    notes: list[str]


def sample_archive_name(sample_id: str) -> str:
    return f"{SAMPLES_DIR}/{sample_id}.tar.gz"


def tasks_export(*, suite: Suite, n_values: list[int], context: str, dest: Path, upload_format: str) -> ExportSummary:
    """Write the export of `suite`'s samples for each n in `n_values` into `dest` (absent or empty).

    `upload_format` is the README's section on the upload format (runs.submissions.format_text, a
    layer above this one). Raises ExportError for an unknown context, no sample at these n, or a
    sample whose workspace cannot be built.
    """
    if context not in CONTEXT_CONDITIONS:
        raise ExportError(f"context {context!r} is not one of {', '.join(CONTEXT_CONDITIONS)}")
    if not n_values or any(n < 1 for n in n_values):
        raise ExportError(f"n must be one or more integers ≥ 1, got {','.join(map(str, n_values)) or 'none'}")
    dest = Path(dest)
    if dest.exists() and any(dest.iterdir()):
        raise ExportError(f"{dest} is not empty; an export is written into a new or empty directory")
    samples = sorted(samples_ensure(suite=suite, n_values=n_values), key=lambda sample: (sample.n, sample.sample_id))
    samples = [sample for sample in samples if sample.paper.code_dir]
    if not samples:
        raise ExportError(f"suite {suite.name} has no sample with n in {','.join(map(str, n_values))}")
    (dest / SAMPLES_DIR).mkdir(parents=True, exist_ok=True)
    notes = []
    manifest_lines = []
    data = {paper.pk: _paper_data(paper, dest, notes) for paper in {sample.paper for sample in samples}}
    with tempfile.TemporaryDirectory(prefix="export-") as scratch:
        for sample in samples:
            workspace = Path(scratch) / sample.sample_id
            try:
                built = workspace_build(sample=sample, dest=workspace, context=context)
            except WorkspaceError as error:
                raise ExportError(f"sample {sample.sample_id}: {error}") from None
            notes.extend(f"{sample.sample_id}: {note}" for note in built.notes)
            task = json.loads((workspace / "task.json").read_text(encoding="utf-8"))
            manifest_lines.append(json.dumps({**_manifest_line(sample, task), "data": data[sample.paper.pk]}, sort_keys=True))
            (dest / sample_archive_name(sample.sample_id)).write_bytes(directory_tar_gz(workspace, top=sample.sample_id))
            shutil.rmtree(workspace)
    (dest / MANIFEST).write_text("\n".join(manifest_lines) + "\n", encoding="utf-8")
    (dest / README).write_text(_readme(suite, n_values, context, upload_format), encoding="utf-8")
    return ExportSummary(dest=dest, samples=len(samples), notes=notes)


def _paper_data(paper: Paper, dest: Path, notes: list[str]) -> list[dict]:
    """The manifest's entries of the paper's data files; the small ones are copied into the export
    (from this machine's data cache, filled from the suite's own copy when it has one: an export
    never downloads)."""
    entries = []
    for file in paper_needs(paper).data:
        path = None
        if file.size <= EXPORT_DATA_MAX_BYTES:
            path = _cached_or_local(file, paper, notes)
        relative = f"{DATA_DIR}/{paper.paper_id}/{file.name}" if path is not None else None
        if path is not None:
            (dest / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest / relative)
            os.chmod(dest / relative, 0o644)
        entries.append({**file.as_entry(), "file": relative})
    return entries


def _cached_or_local(file: DataFile, paper: Paper, notes: list[str]) -> Path | None:
    path = cached(settings.DATA_CACHE_ROOT, file)
    if path is not None or is_url(file.source):
        if path is None:
            notes.append(f"{paper.paper_id}: data file {file.name} is not fetched here; listed with its URL only")
        return path
    try:
        return data_fetch(settings.DATA_CACHE_ROOT, file, where=f"paper {paper.paper_id}")[0]
    except DataError as error:
        raise ExportError(str(error)) from None


def _manifest_line(sample: Sample, task: dict) -> dict:
    """What the manifest says of a sample: the task.json's task, never anything of the gold."""
    return {
        "sample_id": sample.sample_id,
        "paper_id": sample.paper.paper_id,
        "paper_title": task["paper_title"],
        "n": sample.n,
        "context": task["context"],
        "masked_functions": [{"file": f["file"], "name": f["name"]} for f in task["missing_functions"]],
        "experiments": [
            {key: experiment[key] for key in ("label", "description", "command", "answer_format")}
            for experiment in task["experiments"]
        ],
        "archive": sample_archive_name(sample.sample_id),
    }


def _readme(suite: Suite, n_values: list[int], context: str, upload_format: str) -> str:
    version = f" version {suite.version}" if suite.version else ""
    n_text = ", ".join(map(str, n_values))
    return "\n".join(
        [
            f"# Tasks of suite {suite.name}{version} (n = {n_text}, context {context})",
            "",
            "## The task",
            "",
            "Each sample is one paper's code with n functions removed: their bodies raise",
            "NotImplementedError. Implement them from the paper and their docstrings, run the",
            "sample's experiments and report the numbers they print.",
            "",
            f"`{MANIFEST}` lists the samples, one JSON object a line: `sample_id`, `paper_id`, `n`, the",
            "masked functions (`file`, qualified `name`) and the experiments (`label`, `description`,",
            "`command`, `answer_format`). The workspace of each sample is",
            f"`{SAMPLES_DIR}/<sample_id>.tar.gz`; it unpacks into `<sample_id>/`, which holds the masked code",
            "under `code/`, `TASK.md` and `task.json` (the task), `refsol.sh` (every experiment's",
            "command; run them from `code/`) and `paper.md` unless the context is `none`.",
            "This is byte for byte the workspace the site's own agents are given.",
            "",
            "## Data files",
            "",
            "A sample's `data` lists the files its paper's code reads from `/data/<name>` (read-only in the",
            "site's sandboxes): `name`, `source` (a URL, or a path in the suite), `sha256` and `size`.",
            f"Files up to {EXPORT_DATA_MAX_BYTES // 2**20} MiB are in this export at `file`",
            f"(`{DATA_DIR}/<paper_id>/<name>`); fetch larger ones from their source and check their sha256.",
            "",
            "## Answer format",
            "",
            'One JSON object keyed "Experiment 1", "Experiment 2", ... in the order of the sample\'s',
            "experiments, each value in the shape of that experiment's `answer_format` with your numbers,",
            'for example `{"Experiment 1": {"accuracy": 0.91}}`.',
            "",
            upload_format,
        ]
    )


def directory_tar_gz(root: Path, *, top: str) -> bytes:
    """`root`'s files as a .tar.gz under the directory `top`, the same bytes for the same files.

    Members are sorted, directories come before their contents, and times, owners and modes are
    fixed (files 0644, or 0755 when executable; directories 0755); symlinks stay symlinks.
    """
    root = Path(root)
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0) as compressed:
        with tarfile.open(fileobj=compressed, mode="w", format=tarfile.PAX_FORMAT) as archive:
            archive.addfile(_member(f"{top}", tarfile.DIRTYPE, 0o755))
            for path in sorted(root.rglob("*"), key=lambda p: p.relative_to(root).parts):
                name = f"{top}/{path.relative_to(root).as_posix()}"
                if path.is_symlink():
                    archive.addfile(_member(name, tarfile.SYMTYPE, 0o777, linkname=os.readlink(path)))
                elif path.is_dir():
                    archive.addfile(_member(name, tarfile.DIRTYPE, 0o755))
                else:
                    data = path.read_bytes()
                    mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
                    archive.addfile(_member(name, tarfile.REGTYPE, mode, size=len(data)), io.BytesIO(data))
    return buffer.getvalue()


def _member(name: str, kind: bytes, mode: int, *, size: int = 0, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.size, info.linkname = kind, mode, size, linkname
    info.mtime, info.uid, info.gid, info.uname, info.gname = ARCHIVE_MTIME, 0, 0, "", ""
    return info


# --- the download cache ---------------------------------------------------------------------------


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "unversioned"


def task_archive_path(*, suite: Suite, n: int, context: str, cache_root: Path) -> Path:
    """Where the cached download of (suite, its version and import time, n, context) lives.

    A re-import changes `imported_at`, so a changed suite never serves an old archive.
    """
    version = f"{_slug(suite.version)}-{suite.imported_at.strftime('%Y%m%dT%H%M%S%f')}"
    return Path(cache_root) / suite.name / version / f"n{n}-{context}.tar.gz"


def task_archive_cached(*, suite: Suite, n: int, context: str, cache_root: Path, upload_format: str) -> Path:
    """The path of the one-archive download (manifest, README, sample archives) for `suite`, n and
    `context`, built on first request.

    Two requests building at once each write their own temporary file and rename it into place:
    rename is atomic, both hold the same bytes, so neither ever serves a half-written archive.
    Archives of the suite's older versions are removed once the new one is in place.
    """
    path = task_archive_path(suite=suite, n=n, context=context, cache_root=cache_root)
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    top = f"{suite.name}-n{n}-{context}"
    with tempfile.TemporaryDirectory(prefix=".build-", dir=path.parent) as scratch:
        export_dir = Path(scratch) / top
        tasks_export(suite=suite, n_values=[n], context=context, dest=export_dir, upload_format=upload_format)
        partial = Path(scratch) / path.name
        partial.write_bytes(directory_tar_gz(export_dir, top=top))
        os.replace(partial, path)
    for older in path.parent.parent.iterdir():
        if older != path.parent and older.is_dir():
            shutil.rmtree(older, ignore_errors=True)
    return path
