"""An optional cgroup for the bubblewrap backend.

rlimits are per process: a hundred processes may each take the memory limit. A cgroup bounds the
sandbox as a whole (memory, process count, CPU share) and lists every process it holds so all can
be killed. Creating one needs write access to the cgroup tree, which a root worker has on cgroup
v1 hosts and on v2 hosts where our cgroup delegates the controllers; elsewhere the bubblewrap
backend runs with rlimits alone (Cgroup.create returns None).

On a cgroup v2 host whose service cgroup does not delegate the memory and pids controllers (a
worker started by hand in a session's scope, a container runtime's leaf), name a parent with
$SANDBOX_CGROUP_PARENT (a path in the hierarchy, e.g. /autoexperiment): the sandboxes' cgroups are
made under it instead of under our own, the controllers enabled down to it from the hierarchy's root
(which the no-internal-processes rule exempts). That gives GPU sandboxes a memory limit CUDA survives:
without a cgroup only an address-space rlimit is left, and CUDA reserves far more address space
than it uses (sandbox.bwrap_backend then limits the data segment instead).
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import time
from pathlib import Path

from .base import Limits, SandboxError, resource_name

logger = logging.getLogger(__name__)

_PERIOD_US = 100_000
LEAF_PREFIX = "autoexperiment-sandbox-"
PARENT_VARIABLE = "SANDBOX_CGROUP_PARENT"
_CONTROLLERS = ("memory", "pids", "cpu")


def configured_parent() -> str | None:
    """The cgroup path named by $SANDBOX_CGROUP_PARENT (None: under our own cgroup). Raises
    SandboxError for a path that is not absolute or climbs with '..'."""
    value = os.environ.get(PARENT_VARIABLE, "").strip()
    if not value:
        return None
    if not value.startswith("/") or ".." in value.split("/") or "\0" in value:
        raise SandboxError(f"{PARENT_VARIABLE}={value!r} must be an absolute cgroup path such as /autoexperiment")
    return "/" + value.strip("/")


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """(root, mount point, fs type, super options) of every cgroup mount."""
    mounts = []
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            before, _, after = line.partition(" - ")
            fields, tail = before.split(), after.split()
            if len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
                mounts.append((fields[3], fields[4], tail[0], set(tail[2].split(","))))
    return mounts


def _own_paths() -> dict[str, str]:
    """Our cgroup path per v1 controller, and under "" the v2 path."""
    paths = {}
    with open("/proc/self/cgroup") as handle:
        for line in handle:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                paths[controller] = path
    return paths


def _directory(mount_root: str, mount_point: str, path: str) -> Path | None:
    # Inside a container the mount may show only a subtree of the hierarchy.
    if mount_root != "/" and not path.startswith(mount_root):
        return None
    relative = path[len(mount_root) :] if mount_root != "/" else path
    return Path(mount_point) / relative.lstrip("/")


def _write(path: Path, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


def _parent_paths() -> dict[str, str]:
    """Where sandboxes' cgroups are made, per v1 controller and under "" for v2: the configured
    parent in every hierarchy, else our own cgroup."""
    parent = configured_parent()
    own = _own_paths()
    return own if parent is None else dict.fromkeys(own, parent)


def _delegate_v2(root: str, point: str, parent: str) -> None:
    """Make the configured v2 parent and enable the controllers in it and every ancestor. Each
    ancestor must be the hierarchy's root or hold no process itself (else the kernel refuses:
    OSError, and the sandbox runs on rlimits, as without a parent)."""
    directory = _directory(root, point, "/")
    if directory is None:
        raise OSError(f"the cgroup hierarchy's root is not visible to enable controllers down to {parent}")
    parts = [part for part in parent.split("/") if part]
    for depth in range(len(parts) + 1):
        if depth:
            directory = directory / parts[depth - 1]
            directory.mkdir(exist_ok=True)
        available = set((directory / "cgroup.controllers").read_text().split())
        enabled = set((directory / "cgroup.subtree_control").read_text().split())
        missing = [controller for controller in _CONTROLLERS if controller in available and controller not in enabled]
        if missing:
            _write(directory / "cgroup.subtree_control", " ".join(f"+{controller}" for controller in missing))


class Cgroup:
    """One sandbox's cgroup(s): created with the limits applied, joined by each command's process
    before it drops privileges, emptied and removed on close."""

    def __init__(self, directories: list[Path], version: int) -> None:
        self.directories = directories
        self.version = version

    @classmethod
    def create(cls, name: str, limits: Limits) -> Cgroup | None:
        if os.geteuid() != 0:
            return None
        leaf = f"{LEAF_PREFIX}{resource_name(name)}-{secrets.token_hex(4)}"
        try:
            mounts, paths = _mounts(), _parent_paths()
            v1 = {
                controller: (root, point)
                for root, point, fstype, options in mounts
                if fstype == "cgroup"
                for controller in _CONTROLLERS
                if controller in options
            }
            if "memory" in v1 and "pids" in v1:
                return cls._create_v1(v1, paths, leaf, limits)
            for root, point, fstype, _ in mounts:
                if fstype == "cgroup2" and "" in paths:
                    if configured_parent() is not None:
                        _delegate_v2(root, point, paths[""])
                    return cls._create_v2(root, point, paths[""], leaf, limits)
        except OSError as error:
            logger.info("no cgroup for the sandbox (%s); using rlimits only", error)
        return None

    @classmethod
    def _create_v1(cls, v1: dict[str, tuple[str, str]], paths: dict[str, str], leaf: str, limits: Limits) -> Cgroup | None:
        created: list[Path] = []
        try:
            for controller, (root, point) in v1.items():
                parent = _directory(root, point, paths.get(controller, "/"))
                if parent is None:
                    raise OSError(f"our {controller} cgroup is not visible")
                parent.mkdir(parents=True, exist_ok=True)  # a configured parent is made on first use
                directory = parent / leaf
                # Several controllers may share one hierarchy (e.g. "cpu,cpuacct" with "memory").
                if directory not in created:
                    directory.mkdir()
                    created.append(directory)
                if controller == "memory":
                    _write(directory / "memory.limit_in_bytes", str(limits.memory_mb * 2**20))
                    swap = directory / "memory.memsw.limit_in_bytes"
                    if swap.exists():
                        _write(swap, str(limits.memory_mb * 2**20))
                elif controller == "pids":
                    _write(directory / "pids.max", str(limits.pids))
                elif controller == "cpu":
                    _write(directory / "cpu.cfs_period_us", str(_PERIOD_US))
                    _write(directory / "cpu.cfs_quota_us", str(int(limits.cpus * _PERIOD_US)))
        except OSError:
            Cgroup(created, 1).remove()
            raise
        return cls(created, 1)

    @classmethod
    def _create_v2(cls, root: str, point: str, path: str, leaf: str, limits: Limits) -> Cgroup | None:
        parent = _directory(root, point, path)
        if parent is None:
            return None
        enabled = set((parent / "cgroup.subtree_control").read_text().split())
        if not {"memory", "pids"} <= enabled:
            # Enabling them here fails while our own process sits in this cgroup (no internal
            # processes rule); only a delegated tree (systemd Delegate=yes) offers them.
            return None
        directory = parent / leaf
        directory.mkdir()
        group = cls([directory], 2)
        try:
            _write(directory / "memory.max", str(limits.memory_mb * 2**20))
            if (directory / "memory.swap.max").exists():
                _write(directory / "memory.swap.max", "0")
            _write(directory / "pids.max", str(limits.pids))
            if "cpu" in enabled:
                _write(directory / "cpu.max", f"{int(limits.cpus * _PERIOD_US)} {_PERIOD_US}")
        except OSError:
            group.remove()
            raise
        return group

    def join(self) -> None:
        """Moves the calling process in. Runs in the child between fork and exec: no logging,
        no locks."""
        pid = str(os.getpid())
        for directory in self.directories:
            _write(directory / "cgroup.procs", pid)

    def pids(self) -> set[int]:
        found: set[int] = set()
        for directory in self.directories:
            try:
                found |= {int(pid) for pid in (directory / "cgroup.procs").read_text().split()}
            except OSError:
                pass
        return found

    def kill(self, wait: float = 5.0) -> None:
        """SIGKILLs every process in the cgroup, repeating until none is left (forks may race)."""
        if self.version == 2 and (self.directories[0] / "cgroup.kill").exists():
            try:
                _write(self.directories[0] / "cgroup.kill", "1")
            except OSError:
                pass
        deadline = time.monotonic() + wait
        pause = 0.0005
        while (pids := self.pids()) and time.monotonic() < deadline:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            # Most often what is left is a process already on its way out, gone within a
            # millisecond: look again soon, then less often. (A flat 10 ms left every third
            # command of an attempt waiting that long for nothing.)
            time.sleep(pause)
            pause = min(2 * pause, 0.01)

    def remove(self) -> None:
        self.kill()
        for directory in self.directories:
            # rmdir fails with EBUSY until killed processes have fully exited.
            for _ in range(100):
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
            else:
                logger.warning("could not remove cgroup %s", directory)


def leftover_cgroups() -> dict[str, tuple[float, Cgroup]]:
    """Sandbox cgroups under ours, by leaf name: (age in seconds, the group across its controllers).
    For the sweep of sandboxes whose worker died before closing them."""
    if os.geteuid() != 0:
        return {}
    found: dict[str, tuple[float, list[Path], int]] = {}
    try:
        mounts, paths = _mounts(), _parent_paths()
    except (OSError, SandboxError):
        return {}
    for root, point, fstype, options in mounts:
        version = 2 if fstype == "cgroup2" else 1
        own = paths.get("") if version == 2 else next((paths[c] for c in options if c in paths), None)
        parent = _directory(root, point, own) if own is not None else None
        if parent is None or not parent.is_dir():
            continue
        for directory in parent.glob(f"{LEAF_PREFIX}*"):
            try:
                age = time.time() - directory.stat().st_mtime
            except OSError:
                continue
            _, directories, _ = found.setdefault(directory.name, (age, [], version))
            if directory not in directories:
                directories.append(directory)
    return {leaf: (age, Cgroup(directories, version)) for leaf, (age, directories, version) in found.items()}


def sandbox_name_of_leaf(leaf: str) -> str:
    """The sandbox name a cgroup leaf was made for (its random suffix removed)."""
    return leaf[len(LEAF_PREFIX):].rsplit("-", 1)[0]
