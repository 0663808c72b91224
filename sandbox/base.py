"""The interface every sandbox backend implements, and what they share.

Both backends mount a host directory (the workspace) at /workspace inside the sandbox, so file
operations run on the host against that directory; only commands run inside.
"""

from __future__ import annotations

import math
import os
import pwd
import re
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path, PurePosixPath
from typing import ClassVar, Self

from . import fs
from .output import BoundedOutput

WORKSPACE_MOUNT = "/workspace"
# Where a sandbox's data files are (read-only): /data/<name>.
DATA_MOUNT = "/data"
# The unprivileged identity commands run as when the worker is root; the base image creates it as
# user "sandbox". It must not be an account of the host (then a process escaping the sandbox, or a
# file it leaves, would belong to somebody real): opening a sandbox refuses one that is.
# A non-root worker runs commands under its own uid instead.
SANDBOX_UID = 61000
SANDBOX_GID = 61000
# Deeper workspaces are over their limits, like fuller ones (host-side walks hold a descriptor per level).
MAX_WORKSPACE_DEPTH = 256
# EDQUOT: the exit code a command gets when it leaves the workspace over Limits.disk_mb.
DISK_QUOTA_EXIT_CODE = 122
# 128 + SIGKILL: the exit code of a command killed at its timeout.
TIMEOUT_EXIT_CODE = 137
# How often a running command's workspace is measured against Limits.disk_mb; a command can
# overshoot the cap by what it writes in one interval.
_DISK_CHECK_INTERVAL = 0.5

_BASE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    # The root filesystem is read-only in both backends; /tmp is the writable private place.
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_UNSAFE_IN_NAME = re.compile(r"[^A-Za-z0-9_.-]")


class Backend(StrEnum):
    DOCKER = "docker"
    BUBBLEWRAP = "bubblewrap"


class SandboxError(Exception):
    """A sandbox operation failed: backend unavailable, path outside the workspace, bad argument."""


@dataclass(frozen=True)
class Limits:
    """Resource limits for one sandbox; every command run in it is held to them.

    cpu_seconds caps CPU time per command; left as None it becomes cpus x the command's timeout
    (plus a second), so it only bites a command that escapes the wall-clock timeout.
    disk_mb caps the workspace's size, file_size_mb any single file, output_bytes what a command's
    result keeps of its output (head and tail).
    """

    memory_mb: int = 2048
    pids: int = 256
    cpus: float = 1.0
    cpu_seconds: int | None = None
    file_size_mb: int = 512
    disk_mb: int = 1024
    output_bytes: int = 64_000

    def __post_init__(self) -> None:
        for field in ("memory_mb", "pids", "cpus", "file_size_mb", "disk_mb", "output_bytes"):
            if not getattr(self, field) > 0:
                raise ValueError(f"Limits.{field} must be positive")
        if self.cpu_seconds is not None and self.cpu_seconds <= 0:
            raise ValueError("Limits.cpu_seconds must be positive or None")

    def cpu_seconds_for(self, timeout: float) -> int:
        if self.cpu_seconds is not None:
            return self.cpu_seconds
        return math.ceil(timeout * max(self.cpus, 1.0)) + 1

    @property
    def tmp_mb(self) -> int:
        # /tmp is memory-backed (tmpfs): keep it from taking the whole memory allowance.
        return max(16, min(self.disk_mb, self.memory_mb // 2))


@dataclass(frozen=True)
class ExecResult:
    """What a command produced.

    output: stdout and stderr interleaved, decoded as UTF-8; when longer than Limits.output_bytes,
    its head and tail around a "[... N bytes truncated ...]" marker (and truncated is True).
    exit_code: the shell's exit status; 128+N when killed by signal N (TIMEOUT_EXIT_CODE, 137, after
    a timeout), DISK_QUOTA_EXIT_CODE (122) when the workspace was left over its disk cap.
    """

    output: str
    exit_code: int
    timed_out: bool
    duration: float
    truncated: bool

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


def sandbox_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The complete environment of sandboxed commands: a fixed allow-list plus the caller's extras.

    Nothing is copied from the worker's own environment, so its secrets (DATABASE_URL, API keys)
    cannot reach untrusted code.
    """
    env = dict(_BASE_ENV)
    for key, value in (extra or {}).items():
        if not isinstance(key, str) or not _ENV_NAME.match(key):
            raise SandboxError(f"invalid environment variable name: {key!r}")
        if not isinstance(value, str) or "\0" in value:
            raise SandboxError(f"environment variable {key} must be a string without NUL bytes")
        env[key] = value
    return env


def resource_name(name: str) -> str:
    """A sandbox's name as its container, cgroup and mount point carry it (the sweep reads it back)."""
    return _UNSAFE_IN_NAME.sub("-", name)[:100] or "anonymous"


def _environment_dir(environment: str | os.PathLike[str] | None) -> Path | None:
    """A Python environment (a venv prefix) to bind read-only at its own path, checked."""
    if environment is None:
        return None
    path = Path(environment)
    if not path.is_absolute() or not (path / "bin").is_dir():
        raise SandboxError(f"environment {environment} is not an absolute path of a built environment (no bin/ in it)")
    path = path.resolve()
    if path.parts[1:2] in (("workspace",), ("data",), ("proc",), ("dev",)):
        raise SandboxError(f"environment {path} would be hidden by the sandbox's own /{path.parts[1]}")
    return path


def _data_files(data: Mapping[str, str | os.PathLike[str]] | None) -> dict[str, Path]:
    """name -> host file, each bound read-only at /data/<name>; checked."""
    files = {}
    for name, source in (data or {}).items():
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
            raise SandboxError(f"data file name {name!r} is not a plain file name")
        path = Path(source)
        if not path.is_file():
            raise SandboxError(f"data file {name}: {source} is not a file")
        files[name] = path.resolve()
    return files


def readable_by_sandbox(path: Path, uid: int) -> str | None:
    """Why the sandbox uid cannot reach `path` (a directory to bind, or a file), None when it can:
    a root worker's bubblewrap binds it as that uid, which needs search permission on every
    directory above it and read permission on it."""
    if uid == os.geteuid():
        return None
    for directory in reversed(path.parents):
        if not os.stat(directory).st_mode & 0o001:
            return f"{directory} is not searchable by other users (chmod o+x {directory})"
    if not os.stat(path).st_mode & 0o004:
        return f"{path} is not readable by other users"
    return None


def sandbox_identity() -> tuple[int, int]:
    """The (uid, gid) that commands run as, and that must own the workspace to write it."""
    if os.geteuid() == 0:
        return SANDBOX_UID, SANDBOX_GID
    return os.getuid(), os.getgid()


def _check_identity_is_not_a_host_account(uid: int) -> None:
    if os.geteuid() != 0:
        return  # commands run as the worker's own uid
    try:
        account = pwd.getpwuid(uid)
    except KeyError:
        return
    raise SandboxError(
        f"the sandbox uid {uid} is the host account {account.pw_name!r}; sandboxed code must not run as a "
        "real user of this machine (remove that account, or change sandbox.base.SANDBOX_UID and rebuild the image)"
    )


def signal_exit_code(returncode: int) -> int:
    # subprocess reports death by signal N as -N; the shell convention, used throughout, is 128+N.
    return 128 - returncode if returncode < 0 else returncode


def warm_up() -> None:
    """Pay, in a worker about to fork a work horse per job, what a fresh process's first sandbox costs
    each horse again: the name service modules the uid check loads, the temporary directory's probe.
    A uid that is a host account is reported by the sandboxes themselves, not here."""
    try:
        _check_identity_is_not_a_host_account(sandbox_identity()[0])
    except SandboxError:
        pass
    tempfile.gettempdir()


class Sandbox(ABC):
    """An isolated place to run untrusted commands against one workspace directory.

    Commands see the workspace at /workspace and nothing else of the host; they run without
    network, as an unprivileged user, under Limits, with the environment from sandbox_env().
    Every process a command starts is killed before execute() returns. File operations take
    workspace-relative paths (a leading /workspace/ is accepted) and refuse anything resolving
    outside the workspace, symlinks included; they raise SandboxError. Use as a context manager,
    or call close(), which is idempotent.
    """

    backend: ClassVar[Backend]

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        *,
        limits: Limits | None = None,
        name: str = "",
        env: Mapping[str, str] | None = None,
        environment: str | os.PathLike[str] | None = None,
        data: Mapping[str, str | os.PathLike[str]] | None = None,
    ) -> None:
        path = Path(workspace)
        if not path.is_dir():
            raise SandboxError(f"workspace {workspace} is not a directory")
        self.workspace = path.resolve()
        self.limits = limits or Limits()
        self.name = name
        self.env = sandbox_env(env)
        self.environment = _environment_dir(environment)
        if self.environment is not None:
            # The environment's interpreter and scripts come first; the rest of PATH stays usable.
            self.env["PATH"] = f"{self.environment}/bin:{self.env['PATH']}"
        self.data = _data_files(data)
        self.uid, self.gid = sandbox_identity()
        _check_identity_is_not_a_host_account(self.uid)
        self._lock = threading.Lock()
        self._left_over_quota = False  # the last command ended with the workspace over its disk cap
        self._closed = False
        self._on_close: list[Callable[[], object]] = []
        # The GPUs this sandbox holds (set by whoever leased them: sandbox.gpus) and, once closed,
        # the GPU-seconds it held them for.
        self.gpu_ids: list[str] = []
        self.gpu_seconds = 0.0
        self._opened_at = time.monotonic()

    @property
    @abstractmethod
    def memory_enforcement(self) -> str:
        """How Limits.memory_mb is enforced here, in words (for reports such as scripts/check_gpu.py)."""

    # -- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Kills whatever still runs and releases the backend's resources. Safe to call twice.
        Waits for a command running in another thread to finish (at the latest at its timeout)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._close()
            finally:
                self.gpu_seconds = (time.monotonic() - self._opened_at) * len(self.gpu_ids)
                for callback in self._on_close:
                    callback()

    def call_on_close(self, callback: Callable[[], object]) -> None:
        """Have `callback` called once the sandbox is closed (a lease of what it held released)."""
        self._on_close.append(callback)

    @property
    def closed(self) -> bool:
        return self._closed

    @abstractmethod
    def _close(self) -> None: ...

    # -- commands -----------------------------------------------------------------------------

    def execute(self, command: str, *, timeout: float, cwd: str = ".") -> ExecResult:
        """Runs a shell command in /workspace/<cwd>; kills it (and all it started) at timeout.

        Never raises for what the command does (crash, timeout, flood, disk cap): that is reported
        in the ExecResult. Raises SandboxError for a closed sandbox, a cwd that is not a directory
        inside the workspace, or a backend failure.
        """
        if not isinstance(command, str) or "\0" in command:
            raise SandboxError("command must be a string without NUL bytes")
        if not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
            raise SandboxError("timeout must be a positive, finite number of seconds")
        parts = self._parts(cwd)
        fs.keep_reachable(self.workspace, parts)
        if self.path_kind("/".join(parts)) != fs.FileKind.DIR:
            raise SandboxError(f"cwd {cwd!r} is not a directory in the workspace")
        inner_cwd = str(PurePosixPath(WORKSPACE_MOUNT, *parts))
        with self._lock:
            if self._closed:
                raise SandboxError("sandbox is closed")
            return self._execute(command, timeout=float(timeout), inner_cwd=inner_cwd)

    @abstractmethod
    def _execute(self, command: str, *, timeout: float, inner_cwd: str) -> ExecResult: ...

    def _supervise(
        self,
        *,
        started: float,
        timeout: float,
        finished: Callable[[float], bool],
        kill: Callable[[], None],
    ) -> tuple[bool, str]:
        """Waits for a running command, killing it at its deadline or when the workspace outgrows
        the disk cap. `finished(wait)` blocks up to `wait` seconds. Returns (timed_out, why the
        workspace is over its limits, or "").

        Polling the workspace size bounds how far a command can overshoot disk_mb to what it writes
        in one interval; RLIMIT_FSIZE bounds each single file meanwhile. When the last command left the
        workspace over its cap, this one is measured exactly from its start, and not killed while it
        shrinks the workspace (it may be freeing space, as `rm` of a large tree on a slow disk is; one
        check that finds it no smaller is forgiven, one that finds it larger is not);
        the check when it ends judges it all the same.
        """
        deadline = started + timeout
        next_check = time.monotonic() + _DISK_CHECK_INTERVAL
        exact = self._left_over_quota
        last_bytes = self._disk_check(exact=True)[1] if exact else None
        # Checks in a row that found the workspace over its cap and no smaller. One is forgiven when
        # the command is measured exactly: on a loaded host a command may not have started (docker
        # exec) or may be between two deletions at one check; a workspace that grew is never forgiven.
        stalled = 0
        while True:
            now = time.monotonic()
            if finished(max(0.0, min(deadline, next_check) - now)):
                return False, ""
            now = time.monotonic()
            if now >= deadline:
                kill()
                return True, ""
            if now >= next_check:
                scan_started = time.monotonic()
                over, measured = self._disk_check(exact=exact)
                # A huge workspace takes a while to scan: scan it less often.
                interval = max(_DISK_CHECK_INTERVAL, 10 * (time.monotonic() - scan_started))
                next_check = time.monotonic() + interval
                shrinking = last_bytes is not None and measured < last_bytes
                grew = last_bytes is None or measured > last_bytes
                last_bytes = measured
                stalled = stalled + 1 if over and not shrinking else 0
                if over and (grew or stalled > 1):
                    kill()
                    return False, over

    def _result(
        self,
        *,
        output: BoundedOutput,
        exit_code: int,
        timed_out: bool,
        over_quota: str,
        started: float,
    ) -> ExecResult:
        duration = time.monotonic() - started
        text = output.text()
        if timed_out:
            exit_code = TIMEOUT_EXIT_CODE  # whatever the dying process tree happened to report
        over = over_quota or self._over_disk_quota()
        self._left_over_quota = bool(over)
        if over:
            text += f"\n[sandbox] disk quota exceeded: {over}\n"
            exit_code = DISK_QUOTA_EXIT_CODE
        return ExecResult(
            output=text,
            exit_code=exit_code,
            timed_out=timed_out,
            duration=duration,
            truncated=output.truncated,
        )

    def _over_disk_quota(self) -> str:
        """Why the workspace is over its limits ("" when it is not)."""
        return self._disk_check()[0]

    def _disk_check(self, *, exact: bool = False) -> tuple[str, int]:
        """Why the workspace is over its limits ("" when it is not), and the bytes counted (unless
        `exact`, the walk stops a little above the cap)."""
        cap = self.limits.disk_mb * 2**20
        usage = fs.disk_usage(self.workspace, stop_above=None if exact else cap, max_depth=MAX_WORKSPACE_DEPTH)
        if usage.bytes > cap:
            return f"the workspace is over its {self.limits.disk_mb} MB limit", usage.bytes
        if usage.too_deep:
            return f"the workspace nests directories deeper than {MAX_WORKSPACE_DEPTH} levels", usage.bytes
        if usage.unreadable:
            # Only a command racing the walk (taking permissions away as fast as they are given
            # back) gets here: a tree that cannot be measured is over its limits.
            return f"the workspace holds {fs.display_name(usage.unreadable)}, which the sandbox cannot read to measure it", usage.bytes
        return "", usage.bytes

    # -- files --------------------------------------------------------------------------------
    # All of them go through sandbox.fs: no link is followed at any path component, special files
    # are never opened, any name bytes are accepted, and walks are bounded.

    def read_file(self, path: str) -> str:
        """The file's text (UTF-8, undecodable bytes replaced). Refuses links, FIFOs, sockets and
        devices (anywhere on the path) and files over Limits.file_size_mb."""
        limit = self.limits.file_size_mb * 2**20
        try:
            data, cut = fs.read_bytes(self.workspace, self._relative_path(path), limit=limit)
        except OSError as error:  # fs.UnsafePath included: a link, a special file, a climb out
            raise SandboxError(f"cannot read {path}: {error.strerror}") from None
        if cut:
            raise SandboxError(f"cannot read {path}: it is larger than {self.limits.file_size_mb} MB")
        return data.decode("utf-8", errors="replace")

    def write_file(self, path: str, content: str) -> None:
        """Creates or replaces the file (and missing parent directories) with content as UTF-8."""
        relative = self._relative_path(path)
        if relative == ".":
            raise SandboxError("cannot write the workspace directory itself")
        data = content.encode("utf-8", errors="surrogateescape")
        if len(data) > self.limits.file_size_mb * 2**20:
            raise SandboxError(f"{path} would exceed the {self.limits.file_size_mb} MB file size limit")
        owner = (self.uid, self.gid) if os.geteuid() == 0 else None
        with self._lock:
            if self._closed:
                raise SandboxError("sandbox is closed")
            try:
                fs.write_bytes(self.workspace, relative, data, owner=owner)
            except OSError as error:  # fs.UnsafePath included: a link, a special file, a climb out
                raise SandboxError(f"cannot write {path}: {error.strerror}") from None

    def list_files(self, path: str = ".", recursive: bool = False) -> list[str]:
        """Workspace-relative POSIX paths of the entries under path, sorted; directories end in "/".

        Symlinks are listed, never followed. A recursive listing stops at fs.MAX_WALK_ENTRIES
        entries and fs.MAX_WALK_DEPTH levels, and then ends with a line saying so.
        """
        relative = self._relative_path(path)
        if self.path_kind(relative) != fs.FileKind.DIR:
            raise SandboxError(f"{path} is not a directory in the workspace")
        limits = fs.WalkLimits(max_depth=fs.MAX_WALK_DEPTH if recursive else 1)
        walk = fs.Walk(self.workspace, under="" if relative == "." else relative, limits=limits)
        try:
            entries = [entry.path + ("/" if entry.kind == fs.FileKind.DIR else "") for entry in walk]
        except OSError as error:
            raise SandboxError(f"cannot list {path}: {error.strerror}") from error
        entries.sort()
        if walk.unreadable:
            entries.append(f"[listing incomplete: {fs.display_name(walk.unreadable)} could not be read]")
        elif recursive and walk.incomplete:
            entries.append(f"[listing incomplete: {walk.incomplete}]")
        return entries

    def path_kind(self, path: str) -> fs.FileKind | None:
        """What is at path, or None when nothing is there or the path leads through something that
        is not a directory."""
        try:
            info = fs.lstat(self.workspace, self._relative_path(path))
        except OSError as error:  # a command took permissions away again as they were given back
            raise SandboxError(f"cannot look at {path}: {error.strerror}") from None
        return None if info is None else fs.kind(info)

    def _parts(self, path: str | os.PathLike[str]) -> list[str]:
        """The components of a workspace path (relative, or absolute under /workspace), resolved
        lexically; refuses paths outside the workspace."""
        raw = os.fspath(path)
        if not isinstance(raw, str) or "\0" in raw:
            raise SandboxError(f"invalid path {path!r}")
        if raw.startswith("/"):
            relative = PurePosixPath(raw)
            try:
                raw = str(relative.relative_to(WORKSPACE_MOUNT))
            except ValueError:
                raise SandboxError(f"path {raw!r} is outside the workspace") from None
        try:
            return fs.split_relative(raw)
        except fs.UnsafePath:
            raise SandboxError(f"path {raw!r} is outside the workspace") from None

    def _relative_path(self, path: str | os.PathLike[str]) -> str:
        return "/".join(self._parts(path)) or "."

    def _prepare_workspace(self) -> None:
        """Lets the sandbox user write the workspace: when the worker is root, chown it all to that
        user (the workspace belongs to this sandbox); a non-root worker already owns it."""
        if os.geteuid() == 0:
            fs.chown_tree(self.workspace, self.uid, self.gid)
