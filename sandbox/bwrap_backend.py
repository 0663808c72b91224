"""bubblewrap backend: each command in fresh Linux namespaces over the host's read-only /usr."""

from __future__ import annotations

import ctypes
import functools
import glob
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .base import (
    DATA_MOUNT,
    SANDBOX_UID,
    WORKSPACE_MOUNT,
    Backend,
    ExecResult,
    Limits,
    Sandbox,
    SandboxError,
    readable_by_sandbox,
    resource_name,
    signal_exit_code,
)
from .cgroup import LEAF_PREFIX, Cgroup
from .output import BoundedOutput

INSTALL_HINT = (
    "install bubblewrap (sandbox/images/install_host_packages.sh, or apt-get install bubblewrap "
    "python3-numpy) and allow unprivileged user namespaces"
)
# Read-only views of the host's /etc that programs need (dynamic linking, alternatives such as the
# BLAS numpy loads, Python's site configuration, time zone). The rest of /etc (shadow, ssh keys,
# service configuration) stays out; passwd, group and hosts are generated.
_ETC_ALLOWED = (
    "alternatives",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "nsswitch.conf",
    "os-release",
    "debian_version",
    "mime.types",
    "matplotlibrc",
)
# What the command's shell writes to the harness's pipe once the sandbox is up (see _argv).
_STARTED = b"sandbox-started"
_SYSTEM_DIRECTORIES = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_CLONE_NEWNS = 0x00020000
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
# Loaded up front: the child between fork and exec should not be loading libraries.
_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


@dataclass(frozen=True)
class _CommandEnd:
    """How one command under bwrap ended, as BubblewrapSandbox._wait_for_command saw it."""

    timed_out: bool
    over_quota: str  # why the workspace went over its limits, or ""
    status: bytes  # what bwrap wrote on its JSON status pipe
    command_started: bool  # the command's shell announced itself (see _execute)


class BubblewrapSandbox(Sandbox):
    """Runs each command with bubblewrap in new namespaces (user, pid, net, ipc, uts, cgroup).

    The host's /usr (and the /bin, /lib... links) is mounted read-only, so what is installed on the
    host (python3, numpy) is what commands get; the workspace is the only writable host directory;
    /tmp and /dev/shm are private tmpfs. A root worker drops to the sandbox uid before starting bwrap, so
    the sandbox never holds real root. Limits: RLIMIT_NPROC, FSIZE, CPU and CORE through prlimit
    inside the new user namespace (so the process count is the sandbox's own, not shared with other
    processes of the uid); memory, process count and CPU share through a cgroup when one can be
    created, else RLIMIT_AS for memory. When the command's shell exits, the pid namespace dies with
    it, taking every process it left behind; whatever happens, the harness kills the namespace's
    init after the command (_kill_namespace), and the command cannot reach that init (/proc/1 is
    hidden, seccomp refuses the syscalls that act on another process).
    """

    backend = Backend.BUBBLEWRAP

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        *,
        limits: Limits | None = None,
        name: str = "",
        env: Mapping[str, str] | None = None,
        gpus: str | int | None = None,
        environment: str | os.PathLike[str] | None = None,
        data: Mapping[str, str | os.PathLike[str]] | None = None,
    ) -> None:
        super().__init__(workspace, limits=limits, name=name, env=env, environment=environment, data=data)
        for path in ([self.environment] if self.environment else []) + list(self.data.values()):
            if problem := readable_by_sandbox(path, self.uid):
                raise SandboxError(f"the sandbox uid {self.uid} cannot read {path}: {problem}")
        bwrap = shutil.which("bwrap", path="/usr/local/bin:/usr/bin:/bin")
        if bwrap is None:
            raise SandboxError(f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}")
        self._bwrap = bwrap
        self._gpus = gpus
        self._prepare_workspace()
        self._root = os.geteuid() == 0
        self._bind_source = str(self.workspace)
        if self._root:
            # bwrap runs as the unprivileged uid, which may not traverse the workspace's parents
            # (e.g. a 0700 /tmp/pytest-of-root). Each command's process, still root, bind-mounts
            # the workspace onto this empty, reachable directory in a mount namespace of its own,
            # so nothing is mounted on the host and nothing is left behind by a crash.
            # Named after the sandbox, so the sweep (sandbox.sweep) can tell whose it is.
            self._bind_source = tempfile.mkdtemp(prefix=f"{LEAF_PREFIX}{resource_name(name)}-")
            os.chmod(self._bind_source, 0o755)
        try:
            self._cgroup = Cgroup.create(name, self.limits) if self._root else None
        except Exception:
            self._remove_bind_source()
            raise

    def _close(self) -> None:
        try:
            if self._cgroup is not None:
                self._cgroup.remove()
        finally:
            self._remove_bind_source()

    def _remove_bind_source(self) -> None:
        if self._root:
            try:
                os.rmdir(self._bind_source)
            except OSError:
                pass

    # -- running ------------------------------------------------------------------------------

    def _execute(self, command: str, *, timeout: float, inner_cwd: str) -> ExecResult:
        output = BoundedOutput(self.limits.output_bytes)
        status_read, status_write = os.pipe()
        started_read, started_write = os.pipe()
        started = time.monotonic()
        try:
            process = self._start_bwrap(command, timeout, inner_cwd, status_fd=status_write, started_fd=started_write)
        except SandboxError:
            os.close(status_read)
            os.close(started_read)
            raise
        ended = self._wait_for_command(
            process, output, status_read=status_read, started_read=started_read, started=started, timeout=timeout
        )
        exit_code = _exit_code(ended.status, process.returncode)
        # bwrap sets the sandbox up in its child and reports nothing when that fails but its own
        # message on stderr, which a command could print too. So the command's shell announces
        # itself on a pipe only the harness reads, before any of the command runs: without that
        # word, the sandbox never came up; with it, all that follows is the command's doing.
        if not ended.command_started:
            raise SandboxError(
                f"bubblewrap could not create the sandbox: {output.text().strip()[:2000]} ({INSTALL_HINT})"
            )
        return self._result(
            output=output,
            exit_code=exit_code,
            timed_out=ended.timed_out,
            over_quota=ended.over_quota,
            started=started,
        )

    def _start_bwrap(
        self, command: str, timeout: float, inner_cwd: str, *, status_fd: int, started_fd: int
    ) -> subprocess.Popen:
        """bwrap started on the command, its output on a pipe; the write ends of the status and start
        pipes, and the pipes the command line opened, are closed here whatever happens."""
        data_fds: list[int] = []
        try:
            argv = self._argv(command, timeout, inner_cwd, data_fds, status_fd, started_fd)
            return subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env={"PATH": "/usr/bin:/bin"},
                pass_fds=[status_fd, started_fd, *data_fds],
                start_new_session=True,
                # Only os-level calls run between fork and exec (see _drop_privileges).
                preexec_fn=self._drop_privileges if self._root else None,  # noqa: PLW1509
            )
        except (OSError, subprocess.SubprocessError) as error:
            raise SandboxError(f"cannot start bwrap: {error}") from error
        finally:
            for fd in (status_fd, started_fd, *data_fds):
                os.close(fd)

    def _wait_for_command(
        self, process: subprocess.Popen, output: BoundedOutput, *, status_read: int, started_read: int,
        started: float, timeout: float,
    ) -> _CommandEnd:
        """Copies the command's output while it runs and supervises it to its end (its deadline, the
        disk cap); then, whatever happened, kills what is left of the sandbox and reads and closes
        both pipes."""
        stdout = process.stdout
        assert stdout is not None  # stdout=PIPE
        stop_reading = threading.Event()
        reader = threading.Thread(target=_pump, args=(stdout.fileno(), output, stop_reading), daemon=True)
        reader.start()

        finished, release = _exit_waiter(process)
        init, status = None, b""
        try:
            init, status = _sandbox_init(process, status_read, deadline=started + timeout)
            timed_out, over_quota = self._supervise(
                started=started, timeout=timeout, finished=finished, kill=lambda: self._kill(process)
            )
        finally:
            release()
            # Normally the pid namespace is already gone with the shell; this covers the rest.
            _kill_namespace(init)
            self._kill(process)
            process.wait()
            stop_reading.set()
            reader.join()
            stdout.close()
            status += _read_all(status_read)
            os.close(status_read)
            command_started = _read_all(started_read) == _STARTED
            os.close(started_read)
        return _CommandEnd(
            timed_out=timed_out, over_quota=over_quota, status=status, command_started=command_started
        )

    def _kill(self, process: subprocess.Popen) -> None:
        # bwrap leads its own session; killing it takes the sandbox down (--die-with-parent and
        # the end of the pid namespace), and the cgroup catches anything left over. Only while
        # bwrap is unreaped: its pid (the group id) cannot have been reused yet.
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self._cgroup is not None:
            self._cgroup.kill()

    def _drop_privileges(self) -> None:
        # Runs in the child between fork and exec, as root: make the workspace reachable (see
        # __init__), join the cgroup, then become an ordinary uid. Staying real root would exempt
        # the sandbox from RLIMIT_NPROC and make any namespace escape an escape to root.
        _check(_libc.unshare(_CLONE_NEWNS))
        _check(_libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None))
        _check(_libc.mount(str(self.workspace).encode(), self._bind_source.encode(), None, _MS_BIND, None))
        if self._cgroup is not None:
            self._cgroup.join()
        os.setgroups([])
        os.setgid(self.gid)
        os.setuid(self.uid)

    # -- command line -------------------------------------------------------------------------

    def _argv(
        self, command: str, timeout: float, inner_cwd: str, data_fds: list[int], status_fd: int, started_fd: int
    ) -> list[str]:
        """bwrap's command line, in the order bwrap applies it: the namespaces, the syscall filter
        and the environment, then the mounts (each later one over the earlier ones, the root made
        read-only last), then the limits and the command. `data_fds` collects the pipes it opens."""
        return [
            self._bwrap,
            *_namespace_options(status_fd),
            *_seccomp_option(data_fds),
            *_environment_options(self.env),
            *_host_system_mounts(data_fds),
            *self._private_mounts(),
            *self._paper_mounts(),
            *_workspace_mount(self._bind_source, inner_cwd),
            *self._prlimit_args(timeout),
            *_announced_command(command, started_fd),
        ]

    def _private_mounts(self) -> list[str]:
        """/proc, /dev and the sandbox's own tmpfs, with the GPUs it was given; /dev read-only."""
        limits = self.limits
        argv = [
            "--proc", "/proc",
            # PID 1 is bwrap's init, of the command's own uid: through /proc/1/mem (ptrace and
            # process_vm_writev are refused by seccomp) a command could write code into it and
            # keep it running past the command. An empty read-only directory hides every entry of
            # it, /proc/1/task/1/mem included; the command has no capability to unmount it.
            "--size", "4096", "--tmpfs", "/proc/1", "--remount-ro", "/proc/1",
            "--dev", "/dev",
            "--size", str(limits.tmp_mb * 2**20), "--tmpfs", "/tmp",
            "--size", str(limits.tmp_mb * 2**20), "--tmpfs", "/dev/shm",
        ]
        for device in _gpu_device_nodes(self._gpus):
            argv += ["--dev-bind-try", device, device]
        # /dev is an unbounded tmpfs; read-only, its devices still work and /dev/shm stays writable.
        argv += ["--remount-ro", "/dev"]
        return argv

    def _paper_mounts(self) -> list[str]:
        """The paper's environment at its own path (its venv names that path) and its data files, both
        read-only: binds over the read-only root, which the agent cannot change or add to."""
        argv: list[str] = []
        if self.environment is not None:
            argv += ["--ro-bind", str(self.environment), str(self.environment)]
        for name, data_file in sorted(self.data.items()):
            argv += ["--ro-bind", str(data_file), f"{DATA_MOUNT}/{name}"]
        return argv

    def _prlimit_args(self, timeout: float) -> list[str]:
        limits = self.limits
        args = [
            "/usr/bin/prlimit",
            f"--nproc={limits.pids}",
            f"--fsize={limits.file_size_mb * 2**20}",
            f"--cpu={limits.cpu_seconds_for(timeout)}",
            "--core=0",
        ]
        if self._cgroup is None:
            # CUDA reserves far more address space than it uses: an address-space limit makes its
            # first allocation fail, so a GPU sandbox without a cgroup limits the data segment.
            args.append(f"--{'data' if self._gpus else 'as'}={limits.memory_mb * 2**20}")
        return [*args, "--"]

    @property
    def memory_enforcement(self) -> str:
        if self._cgroup is not None:
            return f"cgroup v{self._cgroup.version} memory limit on the whole sandbox"
        if self._gpus:
            return "RLIMIT_DATA per process (a GPU sandbox without a cgroup: see $SANDBOX_CGROUP_PARENT)"
        return "RLIMIT_AS per process (no cgroup could be made)"


def _namespace_options(status_fd: int) -> list[str]:
    """New namespaces of every kind for the command, as the sandbox uid, with no environment."""
    return [
        "--unshare-all",  # user, pid, network, ipc, uts, cgroup namespaces
        "--unshare-user",
        # No nested user namespaces: they would give the command capabilities over new
        # namespaces of its own, kernel attack surface the experiments never need.
        "--disable-userns",
        "--uid", str(SANDBOX_UID),
        "--gid", str(SANDBOX_UID),
        "--hostname", "sandbox",
        "--die-with-parent",
        "--new-session",
        "--json-status-fd", str(status_fd),
        "--clearenv",
    ]


def _seccomp_option(data_fds: list[int]) -> list[str]:
    """The syscall filter (_seccomp_program), where this machine's architecture has one."""
    program = _seccomp_program()
    return ["--seccomp", str(_data_fd(program, data_fds))] if program else []


def _environment_options(env: Mapping[str, str]) -> list[str]:
    argv: list[str] = []
    for key, value in env.items():
        argv += ["--setenv", key, value]
    return argv


def _host_system_mounts(data_fds: list[int]) -> list[str]:
    """The host's /usr, its /bin, /lib... (links or directories), the allowed part of /etc, read-only,
    and the generated /etc files."""
    argv = ["--ro-bind", "/usr", "/usr"]
    for name in _SYSTEM_DIRECTORIES:
        host = f"/{name}"
        if os.path.islink(host):
            argv += ["--symlink", os.readlink(host), host]
        elif os.path.isdir(host):
            argv += ["--ro-bind", host, host]
    for name in _ETC_ALLOWED:
        argv += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    for path in sorted(glob.glob("/etc/python3*")):
        argv += ["--ro-bind", path, path]
    for path, content in _generated_etc().items():
        argv += ["--ro-bind-data", str(_data_fd(content, data_fds)), path]
    return argv


def _workspace_mount(bind_source: str, inner_cwd: str) -> list[str]:
    """The workspace, the one writable host directory; then the rest of the root made read-only."""
    return [
        "--bind", bind_source, WORKSPACE_MOUNT,
        # Last: everything outside the mounts above (the sandbox's own root) becomes read-only.
        "--remount-ro", "/",
        "--chdir", inner_cwd,
        "--",
    ]


def _announced_command(command: str, started_fd: int) -> list[str]:
    # The shell writes the start word and closes the pipe before the command's first line runs
    # (bash executes a -c script line by line), so nothing the command starts can write to it.
    announce = f"printf {_STARTED.decode()} >&{started_fd}; exec {started_fd}>&-\n"
    return [_shell(), "-c", announce + command]


def _gpu_device_nodes(gpus: str | int | None) -> list[str]:
    """The device nodes a sandbox with `gpus` sees: every NVIDIA node for "all"; else the driver's
    shared nodes (nvidiactl, nvidia-uvm, ...) and the numbered nodes of the GPUs it was given (ids
    "0,2", or a count: the first ones), so that a GPU leased to another sandbox cannot be opened."""
    if not gpus:
        return []
    nodes = sorted(glob.glob("/dev/nvidia*"))
    if gpus == "all":
        return [*nodes, "/dev/dri"]
    numbered = {node[len("/dev/nvidia"):]: node for node in nodes if node[len("/dev/nvidia"):].isdigit()}
    wanted = sorted(numbered, key=int)[: int(gpus)] if isinstance(gpus, int) else str(gpus).split(",")
    return [node for node in nodes if node not in numbered.values()] + [f"/dev/nvidia{gpu}" for gpu in wanted]


def _sandbox_init(process: subprocess.Popen, status_fd: int, *, deadline: float) -> tuple[int | None, bytes]:
    """(a pidfd of the sandbox's PID 1, what was read of bwrap's JSON status meanwhile).

    bwrap reports its child, PID 1 of the new pid namespace, on the status pipe before the command
    starts. Killing that process from outside takes down everything in the namespace, whatever runs
    there: the one kill that needs no cgroup, so a non-root worker has it too. The pidfd is taken
    only while the process is still bwrap's child (bwrap, not yet reaped by us, cannot have been
    replaced), so it can never name a stranger that reused the pid. None when bwrap exits first or
    the kernel has no pidfds (there root's cgroup still kills everything).
    """
    received = b""
    while b"\n" not in received and time.monotonic() < deadline:
        readable, _, _ = select.select([status_fd], [], [], 0.05)
        if readable:
            chunk = os.read(status_fd, 65536)
            if not chunk:
                break
            received += chunk
        elif process.poll() is not None:
            break
    first = received.partition(b"\n")[0]
    try:
        pid = int(json.loads(first)["child-pid"])
    except (ValueError, KeyError, TypeError):
        return None, received
    try:
        init = os.pidfd_open(pid)
    except (OSError, AttributeError):
        return None, received
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            parent = int(handle.read().rpartition(b")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        parent = None
    if parent != process.pid:
        os.close(init)
        return None, received
    return init, received


def _kill_namespace(init: int | None, wait: float = 5.0) -> None:
    """SIGKILLs the sandbox's PID 1 through its pidfd and waits for it to end: the kernel then ends
    every process of its pid namespace. Closes the pidfd."""
    if init is None:
        return
    try:
        signal.pidfd_send_signal(init, signal.SIGKILL)
        select.select([init], [], [], wait)  # readable once the process has exited
    except ProcessLookupError:
        pass
    finally:
        os.close(init)


def _exit_waiter(process: subprocess.Popen) -> tuple[Callable[[float], bool], Callable[[], None]]:
    """(finished(wait), release): `finished` blocks up to `wait` seconds for `process` to exit and
    says whether it did. It wakes the moment the process exits (a pidfd, Linux 5.3+), where
    Popen.wait(timeout) polls with sleeps of up to 50 ms: that much added to every command."""
    try:
        descriptor = os.pidfd_open(process.pid)
    except OSError:  # an older kernel: poll as Popen does

        def polled(wait: float) -> bool:
            try:
                process.wait(timeout=wait)
                return True
            except subprocess.TimeoutExpired:
                return False

        return polled, lambda: None

    def woken(wait: float) -> bool:
        select.select([descriptor], [], [], wait)
        return process.poll() is not None

    return woken, lambda: os.close(descriptor)


# What a pipe can hold when its writers are gone, in reads of 64 KiB (Linux's largest pipe is 1 MiB).
_PIPE_CHUNKS_LEFT = 16


def _pump(fd: int, output: BoundedOutput, stop: threading.Event) -> None:
    """Copies the pipe into output until EOF, or until stop is set and nothing is left to read."""
    while True:
        readable, _, _ = select.select([fd], [], [], 0.1)
        if readable:
            data = os.read(fd, 65536)
            if not data:
                return
            output.feed(data)
        elif stop.is_set():
            # The command's last output may have come between the select and this check (a
            # thread waiting for the interpreter meanwhile: a busy machine, sandboxes run from
            # several threads): take what is left, without waiting for an EOF that a process
            # still holding the pipe would delay, and no more than a full pipe holds.
            output.feed(_read_all(fd, max_chunks=_PIPE_CHUNKS_LEFT))
            return


def _read_all(fd: int, *, max_chunks: int | None = None) -> bytes:
    """What `fd` holds now (up to `max_chunks` reads of 64 KiB), without waiting for more."""
    os.set_blocking(fd, False)
    chunks: list[bytes] = []
    while max_chunks is None or len(chunks) < max_chunks:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def _exit_code(status: bytes, returncode: int) -> int:
    """The command's exit status from bwrap's JSON status, else from bwrap's own return code."""
    for line in status.decode(errors="replace").splitlines():
        try:
            document = json.loads(line)
        except ValueError:
            continue
        if isinstance(document, dict) and "exit-code" in document:
            return signal_exit_code(int(document["exit-code"]))
    return signal_exit_code(returncode)


def _data_fd(content: str | bytes, fds: list[int]) -> int:
    """A pipe whose read end holds content, for --ro-bind-data and --seccomp (small enough for the
    pipe buffer)."""
    read_end, write_end = os.pipe()
    os.write(write_end, content.encode() if isinstance(content, str) else content)
    os.close(write_end)
    fds.append(read_end)
    return read_end


# Refused with EPERM: syscalls that act on another process's memory, execution or descriptors; with
# them a command could stop or take over the sandbox's PID 1 (bwrap's init, same uid) and keep a
# process alive past the command. Refused with EOPNOTSUPP: fallocate, which reserves gigabytes in an instant,
# far past the disk cap before its watchdog looks; posix_fallocate then falls back to writing.
# (audit arch, the x32 bit or 0, {number: errno}) per machine; elsewhere no filter is installed.
_EPERM, _EOPNOTSUPP = 1, 95
_SECCOMP_ARCHES = {
    # ptrace, process_vm_readv, process_vm_writev, pidfd_getfd, process_madvise; fallocate
    "x86_64": (0xC000003E, 0x40000000, {101: _EPERM, 310: _EPERM, 311: _EPERM, 438: _EPERM, 440: _EPERM, 285: _EOPNOTSUPP}),
    "aarch64": (0xC00000B7, 0, {117: _EPERM, 270: _EPERM, 271: _EPERM, 438: _EPERM, 440: _EPERM, 47: _EOPNOTSUPP}),
}


@functools.cache
def _seccomp_program() -> bytes:
    """A classic BPF seccomp filter for bwrap --seccomp: the errors above for their syscalls, EPERM
    for the x32 ABI and for any foreign architecture (a 32-bit binary would reach ptrace by another
    number); everything else allowed."""
    import platform
    import struct

    arch = _SECCOMP_ARCHES.get(platform.machine())
    if arch is None:
        return b""
    audit_arch, x32_bit, refused = arch
    load, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_JMP|JGE|K, BPF_RET|K
    allow, errno = 0x7FFF0000, 0x00050000  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO (| the errno)
    deny = errno | _EPERM
    program = [
        (load, 0, 0, 4),  # seccomp_data.arch
        (jeq, 1, 0, audit_arch),
        (ret, 0, 0, deny),
        (load, 0, 0, 0),  # seccomp_data.nr
    ]
    if x32_bit:
        program += [(jge, 0, 1, x32_bit), (ret, 0, 0, deny)]
    for number, error in sorted(refused.items()):
        # On a match fall through to the return of its errno; otherwise skip it.
        program += [(jeq, 0, 1, number), (ret, 0, 0, errno | error)]
    program.append((ret, 0, 0, allow))
    return b"".join(struct.pack("HBBI", *instruction) for instruction in program)


@functools.cache
def _generated_etc() -> dict[str, str]:
    return {
        "/etc/passwd": (
            "root:x:0:0:root:/root:/bin/sh\n"
            f"sandbox:x:{SANDBOX_UID}:{SANDBOX_UID}:sandbox:/tmp:/bin/bash\n"
            "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        ),
        "/etc/group": f"root:x:0:\nsandbox:x:{SANDBOX_UID}:\nnogroup:x:65534:\n",
        "/etc/hosts": "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost ip6-loopback\n",
    }


@functools.cache
def _shell() -> str:
    return "/bin/bash" if os.path.exists("/usr/bin/bash") or os.path.exists("/bin/bash") else "/bin/sh"


def probe() -> str | None:
    """None when bubblewrap can create a sandbox here, else why not and how to fix it."""
    import tempfile

    with tempfile.TemporaryDirectory() as workspace:
        try:
            with BubblewrapSandbox(workspace, name="probe") as sandbox:
                result = sandbox.execute("python3 -c 'import numpy'", timeout=30)
        except SandboxError as error:
            return str(error)
    if not result.ok:
        return f"python3 with numpy does not run under bubblewrap: {result.output.strip()} ({INSTALL_HINT})"
    return None
