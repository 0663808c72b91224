"""What an agent can leave behind, and how it may attack the harness that reads its workspace.

The agent controls every byte of its workspace and, within a command, every process of the
sandbox. These tests play that agent on both backends: take over or kill what supervises it, keep
a process alive past its command, swap directories for links while the host reads them, leave
FIFOs, sockets and devices, undecodable and multi-line names, thousands of nested directories and
hundreds of thousands of files. Each ends with the harness answering normally, the host untouched
and nothing of the agent left running.
"""
from __future__ import annotations

import os
import shutil
import socket
import stat
import threading
import time
from pathlib import Path

import pytest

from runs.agents.recorder import patch_between, snapshot
from sandbox import Limits, SandboxError, fs, open_sandbox
from sandbox.base import MAX_WORKSPACE_DEPTH
from tests.support import require_backend

SECRET = "gold-result-0.8731"


@pytest.fixture
def outside(tmp_path) -> Path:
    """A host directory beside the workspace holding what the agent must never reach, and a canary."""
    directory = tmp_path / "outside"
    directory.mkdir()
    (directory / "secret.txt").write_text(SECRET)
    (directory / "canary.txt").write_text("untouched")
    return directory


def _untouched(outside: Path) -> None:
    assert sorted(p.name for p in outside.iterdir()) == ["canary.txt", "secret.txt"]
    assert (outside / "canary.txt").read_text() == "untouched"


# --- nothing outlives a command; the supervisor cannot be touched --------------------------------


def test_commands_cannot_kill_trace_or_replace_the_sandboxes_init(sandbox):
    if sandbox.backend == "docker":
        sandbox._container.reload()
        init_before = sandbox._container.attrs["State"]["Pid"]
    attack = r"""
kill -KILL 1; echo "kill=$?"
kill -TERM 1; echo "term=$?"
kill -USR1 1; echo "usr1=$?"
python3 - <<'EOF'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
PTRACE_ATTACH = 16
print("ptrace", libc.ptrace(PTRACE_ATTACH, 1, 0, 0), ctypes.get_errno())
try:
    open("/proc/1/mem", "rb").read(1)
    print("mem readable")
except OSError as error:
    print("mem", error.errno)
EOF
"""
    result = sandbox.execute(attack, timeout=30)
    assert "mem readable" not in result.output
    assert "ptrace -1" in result.output, result.output
    if sandbox.backend == "docker":
        assert "kill=1" in result.output and "term=1" in result.output and "usr1=1" in result.output, result.output
        sandbox._container.reload()
        assert sandbox._container.attrs["State"]["Pid"] == init_before, "the container's init was replaced"
    # The sandbox still works as before.
    assert sandbox.execute("echo alive", timeout=10).output == "alive\n"


def test_nothing_survives_a_command_that_kills_what_runs_it(sandbox):
    """A command that daemonises two loops and then kills its own parent (Docker: the exec wrapper
    that cleans up; bubblewrap: the shell) still leaves no process behind when execute returns."""
    command = (
        "setsid sh -c 'while :; do date +%s%N > survivor-1; sleep 0.05; done' >/dev/null 2>&1 </dev/null &\n"
        "(sh -c 'while :; do date +%s%N > survivor-2; sleep 0.05; done' &) >/dev/null 2>&1\n"
        "while [ ! -s survivor-1 ] || [ ! -s survivor-2 ]; do sleep 0.02; done\n"
        "kill -KILL $PPID; kill -KILL $$"
    )
    sandbox.execute(command, timeout=20)
    if sandbox.backend == "docker":
        assert sandbox._process_count() == 1, "a process of the command outlived it"
    written = [(sandbox.workspace / f"survivor-{n}").read_text() for n in (1, 2)]
    time.sleep(0.5)
    assert [(sandbox.workspace / f"survivor-{n}").read_text() for n in (1, 2)] == written, "a loop still writes"


def test_a_fake_backend_error_message_is_the_commands_own_output(sandbox):
    result = sandbox.execute("echo 'bwrap: Creating new namespace failed: Operation not permitted' >&2; exit 1", timeout=10)
    assert result.exit_code == 1 and "Creating new namespace failed" in result.output


def test_nested_user_namespaces_are_refused(sandbox):
    result = sandbox.execute("unshare --user --map-root-user true && echo made-one", timeout=10)
    assert "made-one" not in result.output


# --- host-side access never follows a link, even one swapped in mid-walk -------------------------


class _Swapper(threading.Thread):
    """Plays an agent process racing the harness: swaps `code/` between a directory and a symlink
    to a host directory holding files of the same names, as fast as it can."""

    def __init__(self, workspace: Path, target: Path) -> None:
        super().__init__(daemon=True)
        self.workspace, self.target = workspace, target
        self.stop = threading.Event()

    def run(self) -> None:
        real, parked, link = self.workspace / "code", self.workspace / "code.real", self.workspace / "code.link"
        while not self.stop.is_set():
            try:
                os.rename(real, parked)
                os.rename(link, real)  # code -> the host directory
                os.rename(real, link)
                os.rename(parked, real)
            except OSError:
                self._repair(real, parked, link)

    @staticmethod
    def _repair(real: Path, parked: Path, link: Path) -> None:
        # The harness made code/ while it was away (write_file makes missing parents): drop that
        # one, put everything back in place, and go on swapping.
        for _ in range(1000):
            try:
                if real.is_symlink():
                    os.rename(real, link)
                elif real.is_dir() and parked.is_dir():
                    shutil.rmtree(real, ignore_errors=True)
                elif not real.exists() and parked.is_dir():
                    os.rename(parked, real)
                if real.is_dir() and not real.is_symlink() and link.is_symlink() and not parked.exists():
                    return
            except OSError:
                pass


def _race_workspace(root: Path, outside: Path) -> Path:
    workspace = root / "workspace"
    (workspace / "code").mkdir(parents=True)
    (workspace / "code" / "secret.txt").write_text("agent's own file\n")
    (workspace / "code.link").symlink_to(outside)
    return workspace


def test_the_swap_race_is_real_for_code_that_follows_links(tmp_path, outside):
    """The control: plain path-based reads, as the harness did before, do reach the host file."""
    workspace = _race_workspace(tmp_path, outside)
    swapper = _Swapper(workspace, outside)
    swapper.start()
    leaked = False
    deadline = time.monotonic() + 20
    try:
        while not leaked and time.monotonic() < deadline:
            try:
                leaked = (workspace / "code" / "secret.txt").read_text() == SECRET
            except OSError:
                pass
    finally:
        swapper.stop.set()
        swapper.join()
    assert leaked, "the race was never won: the test below would prove nothing"


def test_host_side_access_never_follows_a_swapped_link(open_fresh, tmp_path, outside):
    workspace = _race_workspace(tmp_path, outside)
    box = open_fresh(workspace=workspace)
    swapper = _Swapper(workspace, outside)
    swapper.start()
    seen: set[str] = set()
    deadline = time.monotonic() + 5
    rounds = 0
    try:
        while time.monotonic() < deadline:
            rounds += 1
            for action in (
                lambda: seen.add(box.read_file("code/secret.txt")),
                lambda: box.write_file("code/written.txt", "x"),
                lambda: seen.update(box.list_files("code", recursive=True)),
                lambda: seen.add(box.path_kind("code/secret.txt") or ""),
                lambda: seen.update(e.text or "" for e in snapshot(workspace).values()),
                lambda: seen.add(patch_between(snapshot(workspace, under="code"), {})),
            ):
                try:
                    action()
                except (SandboxError, OSError):
                    pass  # refused mid-swap: what a link must give
    finally:
        swapper.stop.set()
        swapper.join()
    assert rounds > 100
    assert not any(SECRET in text for text in seen), "host content was read through a swapped link"
    _untouched(outside)


# --- special files, odd names, deep and wide trees ------------------------------------------------


def test_fifos_sockets_and_devices_are_reported_never_opened(sandbox, outside):
    result = sandbox.execute(
        "mkfifo fifo && python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.bind('sock')\" && echo made",
        timeout=20,
    )
    assert result.output.strip() == "made", result.output
    if os.geteuid() == 0:  # no agent can make a device node (no capability); the host can, to test it
        os.mknod(sandbox.workspace / "device", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    started = time.monotonic()
    for name in ("fifo", "sock", "device"):
        if name == "device" and os.geteuid() != 0:
            continue
        with pytest.raises(SandboxError, match="not a regular file|a (fifo|socket|device)"):
            sandbox.read_file(name)
        with pytest.raises(SandboxError):
            sandbox.write_file(name, "x")
        assert sandbox.path_kind(name) in ("fifo", "socket", "device")
    entries = snapshot(sandbox.workspace)
    assert {entries[name].kind for name in ("fifo", "sock")} == {"special"}
    assert time.monotonic() - started < 5, "a special file was waited on"
    sandbox.execute("rm -f fifo sock", timeout=10)
    if (sandbox.workspace / "device").exists():
        os.unlink(sandbox.workspace / "device")


def test_any_file_name_bytes_are_handled(sandbox):
    result = sandbox.execute("touch \"$(printf 'bad\\377name')\" \"$(printf 'new\\nline')\" plain && echo ok", timeout=10)
    assert result.output == "ok\n"
    listing = sandbox.list_files(".")  # names as the bytes are; the agent's tool shows them escaped
    assert os.fsdecode(b"bad\xffname") in listing and "new\nline" in listing and "plain" in listing
    before = snapshot(sandbox.workspace)
    sandbox.execute("echo changed > \"$(printf 'bad\\377name')\"; echo changed > plain", timeout=10)
    after = snapshot(sandbox.workspace)
    patch = patch_between(before, after)
    assert "plain" in patch and "bad" not in patch  # an unrepresentable name never enters a diff
    patch.encode("utf-8")  # and everything recorded is storable text
    sandbox.execute("rm -f -- * ", timeout=10)


@pytest.mark.slow
def test_five_thousand_nested_directories(open_fresh, tmp_path):
    box = open_fresh()
    result = box.execute("for i in $(seq 5000); do mkdir d && cd d || exit 9; done; echo deep", timeout=120)
    # Over the workspace's depth limit: the command is stopped like one over its disk quota.
    assert result.exit_code == 122 and f"deeper than {MAX_WORKSPACE_DEPTH} levels" in result.output, result.output[-500:]
    recorded = snapshot(box.workspace)
    assert recorded.incomplete.startswith("directories deeper than")
    assert box.list_files(".", recursive=True)[-1].startswith("[listing incomplete")
    workspace = box.workspace
    box.close()
    fs.remove_tree(workspace)
    assert not workspace.exists()


@pytest.mark.slow
def test_more_files_than_a_walk_visits(open_fresh):
    box = open_fresh(limits=Limits(disk_mb=2048))  # room for them: 60,000 entries count 240 MB
    # Hard links to a few empty files: more entries than any walk visits (how many more does not
    # matter: it stops at the cap), made in seconds (new inodes take minutes under Docker's storage driver).
    count = fs.MAX_WALK_ENTRIES + 10_000
    result = box.execute(
        f"python3 -c \"import os\nos.mkdir('many')\nfor i in range({count}):\n"
        "    source = f'many/{i - i % 60000}'\n"
        "    os.link(source, f'many/{i}') if i % 60000 else open(source, 'w').close()\" && echo made",
        timeout=300,
    )
    assert result.output.strip().endswith("made"), result.output[-500:]
    started = time.monotonic()
    recorded = snapshot(box.workspace)
    assert recorded.incomplete == f"stopped after {fs.MAX_WALK_ENTRIES:,} entries"
    assert len(recorded) <= fs.MAX_WALK_ENTRIES
    assert time.monotonic() - started < 60
    workspace = box.workspace
    box.close()
    fs.remove_tree(workspace)
    assert not workspace.exists()


def test_remove_tree_takes_apart_what_an_agent_leaves(tmp_path, outside):
    root = tmp_path / "left"
    deep = root
    for _ in range(300):
        deep = deep / "d"
    deep.mkdir(parents=True)
    (deep / "file").write_text("x")
    (root / "link-out").symlink_to(outside)
    (root / "d" / "link-dir").symlink_to(outside, target_is_directory=True)
    os.mkfifo(root / "fifo")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(root / "sock"))
    listener.close()
    (root / "locked").mkdir()
    (root / "locked" / "inside").write_text("x")
    os.chmod(root / "locked", 0)
    (root / os.fsdecode(b"bad\xffname")).write_text("x")
    fs.remove_tree(root)
    assert not root.exists()
    _untouched(outside)


def test_taking_permissions_away_from_the_workspace_does_not_break_the_sandbox(sandbox):
    result = sandbox.execute("mkdir -p code && chmod 000 code . ; echo done", timeout=10)
    assert result.output.strip().endswith("done")
    # Starting in a directory the command locked itself out of is its own doing, not a broken sandbox.
    assert sandbox.execute("echo inside", timeout=10, cwd="code").output == "inside\n"
    assert sandbox.execute("ls -d .", timeout=10).output == ".\n"


def test_fallocate_cannot_reserve_past_the_disk_cap_in_an_instant(tmp_path):
    """fallocate reserves gigabytes at once, before the watchdog looks. bubblewrap's seccomp filter
    refuses it, and posix_fallocate falls back to writing (Docker's default profile allows it: there
    the disk cap is the watchdog alone, as docs/security.md says)."""
    require_backend("bubblewrap")
    with open_sandbox("bubblewrap", tmp_path) as box:
        result = box.execute(
            "fallocate -l 2G big; echo status=$?; python3 -c \"import os; "
            "os.posix_fallocate(os.open('small', os.O_CREAT | os.O_WRONLY), 0, 4096)\" && echo fell-back",
            timeout=30,
        )
    assert "status=1" in result.output and "fell-back" in result.output, result.output
    assert (tmp_path / "small").stat().st_size == 4096
    assert not (tmp_path / "big").exists() or (tmp_path / "big").stat().st_blocks == 0
