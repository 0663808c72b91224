"""Docker backend: one locked-down container per sandbox, commands run in it with docker exec."""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import docker
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from docker.models.containers import Container
from docker.types import DeviceRequest, Mount, Ulimit
from docker.utils.socket import frames_iter

from .base import DATA_MOUNT, WORKSPACE_MOUNT, Backend, ExecResult, Limits, Sandbox, SandboxError, resource_name
from .output import BoundedOutput

DEFAULT_IMAGE = "autoexperiment-base:bookworm"
NAME_PREFIX = "autoexperiment-sandbox-"
ENGINE_HINT = "start one with sandbox/images/start_docker_engine.sh (or point DOCKER_HOST at one)"
IMAGE_HINT = "build it with sandbox/images/build_base_image.sh"
UID_LABEL = "org.autoexperiment.sandbox-uid"
# The version of the image's /usr/bin/python3 (build_base_image.sh sets it): an environment made by
# another version cannot run there. Images built before the label are not checked.
PYTHON_LABEL = "org.autoexperiment.python"

# PID 1 of every container, in Python because it must never fork: a fork bomb takes every free
# process slot, and a shell that fails to fork exits, stopping the container. It reaps orphans, and
# on SIGUSR1 (sent through the API, which needs no process slot inside) kills every other process.
# It runs as root with CAP_KILL as its only capability, commands as the sandbox uid with none: so
# no command can signal, trace or replace it (ptrace and signals need the same uid or a capability).
_INIT = """\
import os, signal, time
signal.signal(signal.SIGUSR1, lambda *_: os.kill(-1, signal.SIGKILL))
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
while True:
    try:
        os.waitpid(-1, 0)
    except ChildProcessError:
        time.sleep(1)
"""
# Each command runs under this wrapper (bash, for builtins that need no free process slot): stderr
# joins stdout in order, and once the command returns, whatever it left running is killed, and
# waited for until init has reaped it, before the exec (and its output stream) ends. The wrapper
# runs as the sandbox uid, so a command can kill it: it is the quick path, and the harness checks
# the container's process count itself after every command (_ensure_no_processes_left).
_WRAPPER = """\
"$@" 2>&1; status=$?
kill -KILL -1 2>/dev/null
end=$((SECONDS + 5))
while procs=(/proc/[0-9]*); (( ${#procs[@]} > 2 && SECONDS < end )); do kill -KILL -1 2>/dev/null; done
exit $status
"""
_GRACE = 5.0


def container_name(name: str) -> str:
    """The container's name: deterministic for a given sandbox name, so that a retried attempt
    finds and removes what its crashed predecessor left; random when no name is given."""
    if not name:
        return NAME_PREFIX + uuid.uuid4().hex[:12]
    return NAME_PREFIX + resource_name(name)


# The API version each engine (by DOCKER_HOST) speaks, found by the first client of the process: a
# client given no version asks the engine's GET /version, a round trip on every sandbox opened.
_api_versions: dict[str, str] = {}


def _client() -> docker.DockerClient:
    host = os.environ.get("DOCKER_HOST", "")
    try:
        client = docker.from_env(version=_api_versions.get(host))
        client.ping()
    except DockerException as error:
        _api_versions.pop(host, None)  # the engine may have been replaced by another version
        raise SandboxError(f"no Docker engine answers ({error}); {ENGINE_HINT}") from error
    _api_versions[host] = client.api.api_version
    return client


class DockerSandbox(Sandbox):
    """Runs commands in a container created for this sandbox and removed on close.

    The container has no network, runs as an unprivileged user with every capability dropped and
    no-new-privileges, has a read-only root filesystem with the workspace bind-mounted read-write
    at /workspace and a size-limited tmpfs /tmp, and is held to memory (no swap), pids and CPU
    limits; file size, CPU time and core limits apply per command through prlimit. The SDK's exec
    has no timeout, so the output is read in a thread while this one watches the clock.

    The engine may be remote (DOCKER_HOST), but the workspace is bind-mounted and file operations
    run locally: the engine's host must see the workspace at the same path (local socket, SSH
    tunnel to this host, or a shared filesystem).

    Root workers run commands as the sandbox uid (SANDBOX_UID, no host account) and chown the
    workspace to it; other workers run them as their own uid, which already owns the workspace.
    """

    backend = Backend.DOCKER

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        *,
        limits: Limits | None = None,
        name: str = "",
        image: str | None = None,
        env: Mapping[str, str] | None = None,
        gpus: str | int | None = None,
        environment: str | os.PathLike[str] | None = None,
        data: Mapping[str, str | os.PathLike[str]] | None = None,
    ) -> None:
        super().__init__(workspace, limits=limits, name=name, env=env, environment=environment, data=data)
        self.image = image or os.environ.get("SANDBOX_IMAGE") or DEFAULT_IMAGE
        self.container_name = container_name(name)
        self._client = _client()
        self._user = f"{self.uid}:{self.gid}"
        try:
            self._start_container(gpus)
        except BaseException:
            self._client.close()
            raise

    @property
    def memory_enforcement(self) -> str:
        return "the container's memory limit (no swap)"

    def _start_container(self, gpus: str | int | None) -> None:
        try:
            image = self._client.images.get(self.image)
        except ImageNotFound:
            raise SandboxError(f"Docker image {self.image} does not exist; {IMAGE_HINT}") from None
        built_for = (image.labels or {}).get(UID_LABEL)
        if os.geteuid() == 0 and built_for != str(self.uid):
            raise SandboxError(
                f"Docker image {self.image} was built for sandbox uid {built_for or 'unknown'}, not {self.uid}; "
                f"rebuild it (FORCE=1 sandbox/images/build_base_image.sh, then any suite image)"
            )
        made_by = _environment_python(self.environment)
        image_python = (image.labels or {}).get(PYTHON_LABEL)
        if made_by and image_python and made_by != image_python:
            raise SandboxError(
                f"environment {self.environment} was made by Python {made_by}, but image {self.image} has Python "
                f"{image_python}: build the environment with the image's interpreter, or use the bubblewrap backend"
            )
        self._prepare_workspace()
        if self.name:  # a random name (no name given) cannot be left over from a crashed worker
            self._remove_container()
        try:
            self._container = self._client.containers.run(
                self.image,
                ["python3", "-c", _INIT],
                name=self.container_name,
                detach=True,
                user="0:0",
                working_dir=WORKSPACE_MOUNT,
                environment=self.env,
                hostname="sandbox",
                network_mode="none",
                cap_drop=["ALL"],
                cap_add=["KILL"],  # init's, to kill every command's processes; commands get none
                security_opt=["no-new-privileges"],
                read_only=True,
                tmpfs={"/tmp": f"rw,nosuid,nodev,size={self.limits.tmp_mb}m,mode=1777"},
                mounts=self._mounts(),
                mem_limit=f"{self.limits.memory_mb}m",
                memswap_limit=f"{self.limits.memory_mb}m",
                pids_limit=self.limits.pids,
                nano_cpus=int(self.limits.cpus * 1e9),
                ulimits=[
                    Ulimit(name="fsize", soft=self._fsize, hard=self._fsize),
                    Ulimit(name="core", soft=0, hard=0),
                ],
                labels={"org.autoexperiment.sandbox": self.name or self.container_name},
                device_requests=_device_requests(gpus),
            )
        except DockerException as error:
            self._remove_container()
            raise SandboxError(f"cannot start container {self.container_name}: {error}") from error
        self._pids_file = _pids_file(self._container)

    def _mounts(self) -> list[Mount]:
        """The workspace, read-write; the environment at its own path (its venv names that path and
        /usr/bin/python3, which the image has too) and the data files, read-only."""
        mounts = [Mount(WORKSPACE_MOUNT, str(self.workspace), type="bind")]
        if self.environment is not None:
            mounts.append(Mount(str(self.environment), str(self.environment), type="bind", read_only=True))
        for name, path in sorted(self.data.items()):
            mounts.append(Mount(f"{DATA_MOUNT}/{name}", str(path), type="bind", read_only=True))
        return mounts

    @property
    def _fsize(self) -> int:
        return self.limits.file_size_mb * 2**20

    def _close(self) -> None:
        self._remove_container()
        self._client.close()

    def _remove_container(self) -> None:
        try:
            self._client.containers.get(self.container_name).remove(force=True, v=True)
        except NotFound:
            pass
        except APIError as error:
            if error.status_code != 409:  # 409: removal already in progress
                raise SandboxError(f"cannot remove container {self.container_name}: {error}") from error

    # -- running ------------------------------------------------------------------------------

    def _execute(self, command: str, *, timeout: float, inner_cwd: str) -> ExecResult:
        output = BoundedOutput(self.limits.output_bytes)
        started = time.monotonic()
        argv = ["/bin/bash", "-c", _WRAPPER, "sandbox", *self._prlimit_args(timeout),
                "/bin/bash", "-c", command]
        try:
            exec_id, stream = self._start_exec(argv, inner_cwd)
        except DockerException as error:
            raise SandboxError(f"cannot run a command in {self.container_name}: {error}") from error
        raw = getattr(stream, "_sock", stream)
        # The client's API timeout would otherwise end a quiet command's stream after 60 s.
        raw.settimeout(None)
        reader = threading.Thread(target=_pump, args=(stream, output), daemon=True)
        reader.start()

        def finished(wait: float) -> bool:
            reader.join(wait)
            return not reader.is_alive()

        try:
            timed_out, over_quota = self._supervise(
                started=started, timeout=timeout, finished=finished, kill=self._kill_all
            )
            if not finished(_GRACE):
                # The container ignored the kill (or something holds the stream): restart it.
                self._restart()
                if not finished(_GRACE):
                    raw.shutdown(socket.SHUT_RDWR)
                    reader.join()
            self._ensure_no_processes_left()
        finally:
            stream.close()
        return self._result(
            output=output,
            exit_code=self._exit_code(exec_id),
            timed_out=timed_out,
            over_quota=over_quota,
            started=started,
        )

    def _start_exec(self, argv: list[str], inner_cwd: str) -> tuple[str, Any]:
        """The exec's id and its output stream (a socket)."""
        api = self._client.api

        def start() -> tuple[str, Any]:
            exec_id = api.exec_create(
                self._container.id, argv, user=self._user, workdir=inner_cwd,
                environment=self.env, stdout=True, stderr=True, stdin=False, tty=False,
            )["Id"]
            return exec_id, api.exec_start(exec_id, socket=True)

        try:
            return start()
        except APIError:
            self._container.reload()
            if self._container.status == "running":
                raise
        # The container stopped (the engine restarted, its init was OOM-killed): bring it back.
        self._restart()
        return start()

    def _prlimit_args(self, timeout: float) -> list[str]:
        return [
            "/usr/bin/prlimit",
            f"--fsize={self._fsize}",
            f"--cpu={self.limits.cpu_seconds_for(timeout)}",
            "--core=0",
            "--",
        ]

    def _ensure_no_processes_left(self) -> None:
        """Nothing a command started may run on once execute() returns: not while the harness
        reads and writes the workspace on the host, not into the next command. The wrapper kills
        leftovers itself, but the command may have killed the wrapper first."""
        try:
            clean = self._process_count() <= 1
        except DockerException:
            clean = False  # not known: make sure
        if not clean:
            self._kill_all()

    def _process_count(self) -> int:
        """Processes in the container, init included; killed ones count until init reaps them."""
        if self._pids_file is not None:
            try:
                with open(self._pids_file) as handle:
                    return int(handle.read())
            except (OSError, ValueError):
                pass
        stats = self._client.api.stats(self._container.id, stream=False, one_shot=True)
        return int((stats.get("pids_stats") or {}).get("current", 0))

    def _kill_all(self) -> None:
        """Kills every process but init, and returns once they are gone (or the container was
        restarted), so the next command has its process slots back."""
        try:
            self._container.kill(signal="SIGUSR1")
            deadline = time.monotonic() + _GRACE
            while time.monotonic() < deadline:
                if self._process_count() <= 1:
                    return
                time.sleep(0.02)
        except DockerException:
            pass
        self._restart()

    def _restart(self) -> None:
        try:
            self._container.restart(timeout=0)
        except DockerException as error:
            raise SandboxError(f"cannot restart container {self.container_name}: {error}") from error

    def _exit_code(self, exec_id: str) -> int:
        # The stream can end a moment before the engine records the exit code.
        deadline = time.monotonic() + _GRACE
        while True:
            info = self._client.api.exec_inspect(exec_id)
            if not info.get("Running") and info.get("ExitCode") is not None:
                return int(info["ExitCode"])
            if time.monotonic() > deadline:
                return 137
            time.sleep(0.01)


def _environment_python(environment: Path | None) -> str | None:
    """The Python version a venv was made by (its pyvenv.cfg's `version`), None when not known."""
    if environment is None:
        return None
    try:
        lines = (environment / "pyvenv.cfg").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in lines:
        key, _, value = line.partition("=")
        if key.strip() in ("version", "version_info"):
            return value.strip()
    return None


def _pids_file(container: Container) -> str | None:
    """The host's pids.current of the container's cgroup (v1 or v2), read after every command
    because a file read costs microseconds where the stats API costs tens of milliseconds; None
    when the engine is not on this host (then the API answers)."""
    try:
        container.reload()
        pid = container.attrs["State"]["Pid"]
        with open(f"/proc/{pid}/cgroup") as handle:
            lines = handle.read().splitlines()
    except (OSError, KeyError, DockerException):
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(","):
            candidate = f"/sys/fs/cgroup/pids{path}/pids.current"
        elif controllers == "":
            candidate = f"/sys/fs/cgroup{path}/pids.current"
        else:
            continue
        if os.path.isfile(candidate):
            return candidate
    return None


def sandbox_containers() -> Iterator[tuple[Container, str, float]]:
    """(container, sandbox name, age in seconds) of every sandbox container, for the sweep
    (sandbox.sweep), which removes those of dead workers. Raises SandboxError without an engine."""
    client = _client()
    try:
        # ignore_removed: the SDK lists ids, then inspects each; a container another worker removed
        # in between is not a leftover (the listing raised NotFound, and the sweep skipped the rest).
        for container in client.containers.list(all=True, filters={"label": "org.autoexperiment.sandbox"}, ignore_removed=True):
            created = datetime.fromisoformat(container.attrs["Created"])
            name = container.labels.get("org.autoexperiment.sandbox", "")
            yield container, name, (datetime.now(UTC) - created).total_seconds()
    finally:
        client.close()


def _pump(stream: Any, output: BoundedOutput) -> None:
    try:
        for _, data in frames_iter(stream, tty=False):
            output.feed(data)
    except OSError:
        pass  # the socket was shut down to abandon a stuck stream


def _device_requests(gpus: str | int | None) -> list[DeviceRequest] | None:
    if not gpus:
        return None
    if gpus == "all":
        return [DeviceRequest(count=-1, capabilities=[["gpu"]])]
    if isinstance(gpus, int):
        return [DeviceRequest(count=gpus, capabilities=[["gpu"]])]
    return [DeviceRequest(device_ids=str(gpus).split(","), capabilities=[["gpu"]])]


def probe(image: str | None = None) -> str | None:
    """None when an engine answers and the image exists, else what is missing and how to fix it."""
    image = image or DEFAULT_IMAGE
    try:
        client = _client()
    except SandboxError as error:
        return str(error)
    try:
        client.images.get(image)
    except ImageNotFound:
        return f"Docker image {image} does not exist; {IMAGE_HINT}"
    finally:
        client.close()
    return None
