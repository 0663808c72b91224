"""The interface every sandbox backend implements, and what they share.

Both backends mount a host directory (the workspace) at /workspace inside the sandbox, so file
operations run on the host against that directory; only commands run inside.
"""

from __future__ import annotations

import math
import os
import re
import stat
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Self

from .output import BoundedOutput

WORKSPACE_MOUNT = "/workspace"
# The unprivileged identity commands run as when the worker is root; the base image creates it as
# user "sandbox". A non-root worker runs commands under its own uid instead.
SANDBOX_UID = 1000
SANDBOX_GID = 1000
# EDQUOT: the exit code a command gets when it leaves the workspace over Limits.disk_mb.
DISK_QUOTA_EXIT_CODE = 122
# 128 + SIGKILL: the exit code of a command killed at its timeout.
TIMEOUT_EXIT_CODE = 137
# How often a running command's workspace is measured against Limits.disk_mb; a command can
# overshoot the cap by what it writes in one interval.
_DISK_CHECK_INTERVAL = 0.5
# Each file counts at least one block, so a flood of empty files is also bounded.
_MIN_ENTRY_BYTES = 4096

_BASE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    # The root filesystem is read-only in both backends; /tmp is the writable private place.
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


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


def sandbox_identity() -> tuple[int, int]:
    """The (uid, gid) that commands run as, and that must own the workspace to write it."""
    if os.geteuid() == 0:
        return SANDBOX_UID, SANDBOX_GID
    return os.getuid(), os.getgid()


def signal_exit_code(returncode: int) -> int:
    # subprocess reports death by signal N as -N; the shell convention, used throughout, is 128+N.
    return 128 - returncode if returncode < 0 else returncode


class Sandbox(ABC):
    """An isolated place to run untrusted commands against one workspace directory.

    Commands see the workspace at /workspace and nothing else of the host; they run without
    network, as an unprivileged user, under Limits, with the environment from sandbox_env().
    Every process a command starts is killed before execute() returns. File operations take
    workspace-relative paths (a leading /workspace/ is accepted) and refuse anything resolving
    outside the workspace, symlinks included; they raise SandboxError. Use as a context manager,
    or call close(), which is idempotent.
    """

    backend = ""

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        *,
        limits: Limits | None = None,
        name: str = "",
        env: Mapping[str, str] | None = None,
    ) -> None:
        path = Path(workspace)
        if not path.is_dir():
            raise SandboxError(f"workspace {workspace} is not a directory")
        self.workspace = path.resolve()
        self.limits = limits or Limits()
        self.name = name
        self.env = sandbox_env(env)
        self.uid, self.gid = sandbox_identity()
        self._lock = threading.Lock()
        self._closed = False

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
            self._close()

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
        directory = self._host_path(cwd)
        if not directory.is_dir():
            raise SandboxError(f"cwd {cwd!r} is not a directory in the workspace")
        inner_cwd = str(PurePosixPath(WORKSPACE_MOUNT) / directory.relative_to(self.workspace))
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
    ) -> tuple[bool, bool]:
        """Waits for a running command, killing it at its deadline or when the workspace outgrows
        the disk cap. `finished(wait)` blocks up to `wait` seconds. Returns (timed_out, over_quota).

        Polling the workspace size bounds how far a command can overshoot disk_mb to what it writes
        in one interval; RLIMIT_FSIZE bounds each single file meanwhile.
        """
        deadline = started + timeout
        next_check = time.monotonic() + _DISK_CHECK_INTERVAL
        while True:
            now = time.monotonic()
            if finished(max(0.0, min(deadline, next_check) - now)):
                return False, False
            now = time.monotonic()
            if now >= deadline:
                kill()
                return True, False
            if now >= next_check:
                scan_started = time.monotonic()
                over = self._over_disk_quota()
                # A huge workspace takes a while to scan: scan it less often.
                interval = max(_DISK_CHECK_INTERVAL, 10 * (time.monotonic() - scan_started))
                next_check = time.monotonic() + interval
                if over:
                    kill()
                    return False, True

    def _result(
        self,
        *,
        output: BoundedOutput,
        exit_code: int,
        timed_out: bool,
        over_quota: bool,
        started: float,
    ) -> ExecResult:
        duration = time.monotonic() - started
        text = output.text()
        if timed_out:
            exit_code = TIMEOUT_EXIT_CODE  # whatever the dying process tree happened to report
        if over_quota or self._over_disk_quota():
            text += (
                f"\n[sandbox] disk quota exceeded: the workspace is over its "
                f"{self.limits.disk_mb} MB limit\n"
            )
            exit_code = DISK_QUOTA_EXIT_CODE
        return ExecResult(
            output=text,
            exit_code=exit_code,
            timed_out=timed_out,
            duration=duration,
            truncated=output.truncated,
        )

    def _over_disk_quota(self) -> bool:
        return disk_usage(self.workspace, stop_above=self.limits.disk_mb * 2**20) > (
            self.limits.disk_mb * 2**20
        )

    # -- files --------------------------------------------------------------------------------

    def read_file(self, path: str) -> str:
        """The file's text (UTF-8, undecodable bytes replaced)."""
        target = self._host_path(path)
        try:
            with open(target, "rb") as handle:
                return handle.read().decode("utf-8", errors="replace")
        except OSError as error:
            raise SandboxError(f"cannot read {path}: {error.strerror}") from error

    def write_file(self, path: str, content: str) -> None:
        """Creates or replaces the file (and missing parent directories) with content as UTF-8."""
        target = self._host_path(path)
        if target == self.workspace:
            raise SandboxError("cannot write the workspace directory itself")
        data = content.encode("utf-8")
        if len(data) > self.limits.file_size_mb * 2**20:
            raise SandboxError(f"{path} would exceed the {self.limits.file_size_mb} MB file size limit")
        with self._lock:
            if self._closed:
                raise SandboxError("sandbox is closed")
            try:
                self._make_parents(target.parent)
                # No process of the sandbox runs between commands, so the resolved path cannot be
                # swapped for a symlink meanwhile; O_NOFOLLOW still refuses a final symlink.
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                self._give_to_sandbox(target)
            except OSError as error:
                raise SandboxError(f"cannot write {path}: {error.strerror}") from error

    def list_files(self, path: str = ".", recursive: bool = False) -> list[str]:
        """Workspace-relative POSIX paths of the entries under path, sorted; directories end in "/".

        Symlinks are listed, never followed.
        """
        root = self._host_path(path)
        if not root.is_dir():
            raise SandboxError(f"{path} is not a directory in the workspace")
        entries: list[str] = []
        try:
            pending = [root]
            while pending:
                with os.scandir(pending.pop()) as scan:
                    for entry in scan:
                        is_dir = entry.is_dir(follow_symlinks=False)
                        entries.append(self._relative(Path(entry.path)) + ("/" if is_dir else ""))
                        if is_dir and recursive:
                            pending.append(Path(entry.path))
        except OSError as error:
            raise SandboxError(f"cannot list {path}: {error.strerror}") from error
        return sorted(entries)

    def _relative(self, path: Path) -> str:
        return path.relative_to(self.workspace).as_posix()

    def _host_path(self, path: str | os.PathLike[str]) -> Path:
        """The real host path for a workspace path, refusing anything that resolves outside."""
        raw = os.fspath(path)
        if not isinstance(raw, str) or "\0" in raw:
            raise SandboxError(f"invalid path {path!r}")
        relative = PurePosixPath(raw)
        if relative.is_absolute():
            try:
                relative = relative.relative_to(WORKSPACE_MOUNT)
            except ValueError:
                raise SandboxError(f"path {raw!r} is outside the workspace") from None
        resolved = (self.workspace / relative).resolve()
        if resolved != self.workspace and self.workspace not in resolved.parents:
            raise SandboxError(f"path {raw!r} is outside the workspace")
        return resolved

    def _make_parents(self, directory: Path) -> None:
        missing = []
        while not directory.exists():
            missing.append(directory)
            directory = directory.parent
        for created in reversed(missing):
            created.mkdir()
            self._give_to_sandbox(created)

    def _give_to_sandbox(self, path: Path) -> None:
        # A root worker writes files the sandbox user (uid 1000) must be able to modify.
        if os.geteuid() == 0:
            os.lchown(path, self.uid, self.gid)

    def _prepare_workspace(self) -> None:
        """Lets the sandbox user write the workspace: when the worker is root, chown it all to that
        user (the workspace belongs to this sandbox); a non-root worker already owns it."""
        if os.geteuid() != 0:
            return
        for directory, dirnames, filenames in os.walk(self.workspace):
            os.lchown(directory, self.uid, self.gid)
            for name in dirnames + filenames:
                os.lchown(os.path.join(directory, name), self.uid, self.gid)


def disk_usage(root: Path, *, stop_above: int | None = None) -> int:
    """Bytes allocated under root (not following symlinks), stopping early above stop_above."""
    total = 0
    stack = [str(root)]
    while stack:
        try:
            scan = os.scandir(stack.pop())
        except OSError:
            continue
        with scan:
            for entry in scan:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                total += max(info.st_blocks * 512, _MIN_ENTRY_BYTES)
                if stat.S_ISDIR(info.st_mode):
                    stack.append(entry.path)
                if stop_above is not None and total > stop_above:
                    return total
    return total
