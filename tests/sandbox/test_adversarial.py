"""Hostile commands, run against every backend: each must be contained and reported, leave the host
healthy, and leave sandboxes (this one and a fresh one) working."""

from __future__ import annotations

import os
import resource
import socket
import textwrap
import time

import pytest

from sandbox import DISK_QUOTA_EXIT_CODE, SandboxError
from sandbox.fs import disk_usage

TOKEN = "GOLD-7f3a9c1e-should-never-be-seen"


@pytest.fixture
def host_files(tmp_path):
    """A fake gold suite and project database on the host, outside any workspace."""
    gold_dir = tmp_path / "gold-suite" / "2205.00048"
    gold_dir.mkdir(parents=True)
    gold = gold_dir / "gold_results.json"
    gold.write_text(f'{{"IoU": 0.731, "token": "{TOKEN}"}}\n')
    database = tmp_path / "project.sqlite3"
    database.write_text(f"SQLite format 3 {TOKEN}\n")
    return {"gold": gold, "gold_dir": gold_dir, "database": database}


def assert_still_works(sandbox, open_fresh=None):
    assert sandbox.execute("echo alive", timeout=30).output == "alive\n"
    if open_fresh is not None:
        with open_fresh() as fresh:
            assert fresh.execute("echo fresh", timeout=30).output == "fresh\n"


def assert_heartbeat_stopped(sandbox, path):
    before = sandbox.read_file(path)
    assert before.strip(), "the background process never ran"
    time.sleep(0.6)  # it beats every 0.1 s
    assert sandbox.read_file(path) == before, "a process kept running after execute() returned"


def test_shell_fork_bomb_is_contained(sandbox, host_health):
    # The bomb detaches from the shell; once the shell is done, everything it spawned is killed.
    result = sandbox.execute("bomb() { bomb | bomb & }; bomb; sleep 2", timeout=10)
    assert result.duration < 15
    assert "Resource temporarily unavailable" in result.output  # the process limit was hit
    host_health.check()
    assert_still_works(sandbox)


@pytest.mark.slow
def test_persistent_fork_bomb_is_contained(sandbox, open_fresh, host_health):
    bomb = textwrap.dedent("""\
        import os
        print("bombing", flush=True)
        while True:
            try:
                os.fork()
            except OSError:
                pass
    """)
    sandbox.write_file("bomb.py", bomb)
    result = sandbox.execute("python3 bomb.py", timeout=5)
    assert result.timed_out and result.exit_code == 137
    assert result.output.startswith("bombing")
    assert result.duration < 15
    host_health.check()
    assert_still_works(sandbox, open_fresh)


@pytest.mark.slow
def test_memory_bomb_is_contained(sandbox, open_fresh, host_health):
    result = sandbox.execute("python3 -c \"hog = b'x' * (4 * 1024**3); print('allocated')\"", timeout=60)
    assert not result.ok and not result.timed_out
    assert "allocated" not in result.output
    # Killed by the cgroup OOM killer, or refused by RLIMIT_AS where no cgroup is available.
    assert result.exit_code == 137 or "MemoryError" in result.output, result
    host_health.check()
    assert_still_works(sandbox, open_fresh)


def test_cpu_loop_is_killed_at_its_timeout(sandbox, host_health):
    result = sandbox.execute("python3 -c 'while True: pass'", timeout=2)
    assert result.timed_out and result.exit_code == 137
    assert 2 <= result.duration < 6
    host_health.check()
    assert_still_works(sandbox)


def test_process_ignoring_sigterm_is_killed_at_timeout(sandbox):
    script = textwrap.dedent("""\
        import os, signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            # Written aside and renamed: killed between truncating and writing, the beat would read empty.
            open('beat-term.new', 'w').write(repr(time.time()))
            os.replace('beat-term.new', 'beat-term')
            time.sleep(0.1)
    """)
    sandbox.write_file("ignore_term.py", script)
    # Long enough for Python to start and beat once on a busy 2-core machine running four test workers
    # (2 s was not, in CI; nor was 5 s in a container beside them).
    result = sandbox.execute("trap '' TERM; python3 ignore_term.py", timeout=10)
    assert result.timed_out and 10 <= result.duration < 14
    assert_heartbeat_stopped(sandbox, "beat-term")


@pytest.mark.parametrize(
    "launch",
    [
        "({loop}) >/dev/null 2>&1 &",  # plain background job
        "setsid sh -c '{loop}' >/dev/null 2>&1 </dev/null &",  # a new session, detached
        "(sh -c '{loop}' &)",  # double fork, still holding the output pipe
    ],
    ids=["background", "setsid", "double-fork-holding-stdout"],
)
def test_background_processes_die_when_the_command_returns(sandbox, launch):
    beat = f"beat-{abs(hash(launch))}"
    loop = f"while :; do date +%s%N > {beat}.new; mv {beat}.new {beat}; sleep 0.1; done"  # renamed: never read half-written
    command = launch.format(loop=loop) + f"\nwhile [ ! -s {beat} ]; do sleep 0.05; done; echo started"
    result = sandbox.execute(command, timeout=20)
    assert result.ok and result.output == "started\n", result
    assert result.duration < 5
    assert_heartbeat_stopped(sandbox, beat)


def test_network_is_unreachable(sandbox):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    probe = textwrap.dedent(f"""\
        import socket
        for host, port in [("127.0.0.1", {port}), ("1.1.1.1", 80), ("8.8.8.8", 53), ("93.184.215.14", 443)]:
            try:
                socket.create_connection((host, port), timeout=3)
                print("CONNECTED", host)
            except OSError as error:
                print("blocked", host, type(error).__name__)
        try:
            print("RESOLVED", socket.getaddrinfo("deb.debian.org", 80))
        except OSError as error:
            print("dns blocked", error)
    """)
    sandbox.write_file("net_probe.py", probe)
    result = sandbox.execute("python3 net_probe.py; cat /proc/net/dev", timeout=30)
    try:
        assert result.output.count("blocked") == 5, result.output
        assert "CONNECTED" not in result.output and "RESOLVED" not in result.output
        interfaces = [line.split(":")[0].strip() for line in result.output.splitlines() if ":" in line and "|" not in line and "blocked" not in line]
        assert interfaces == ["lo"], result.output
        listener.settimeout(0.2)
        with pytest.raises(TimeoutError):
            listener.accept()
    finally:
        listener.close()


def test_host_files_and_worker_environment_are_not_readable(sandbox, host_files, secret_in_environment):
    shadow = sandbox.execute("cat /etc/shadow", timeout=10)
    assert shadow.exit_code != 0  # absent (bubblewrap) or the image's own, root-only (docker)

    host_paths = " ".join(str(path) for path in host_files.values())
    direct = sandbox.execute(f"cat {host_paths}; ls {host_files['gold_dir'].parent}", timeout=10)
    assert direct.exit_code != 0 and "No such file or directory" in direct.output
    assert TOKEN not in direct.output

    search = sandbox.execute(
        "find / \\( -path /proc -o -path /sys \\) -prune -o "
        "\\( -name gold_results.json -o -name project.sqlite3 \\) -print 2>/dev/null; echo searched",
        timeout=60,
    )
    assert search.output == "searched\n"

    environment = sandbox.execute(
        "env; tr '\\0' '\\n' < /proc/1/environ; tr '\\0' '\\n' < /proc/self/environ", timeout=10
    )
    assert "PATH=" in environment.output
    for name, value in secret_in_environment.items():
        assert value not in environment.output and f"{name}=" not in environment.output


def test_writes_outside_the_workspace_fail(sandbox, tmp_path):
    host_tmp = tmp_path / "escape"
    targets = ["/etc/escape", "/usr/escape", "/escape", "/home/escape", "/var/tmp/escape",
               "/root/escape", "/dev/escape", str(host_tmp)]
    result = sandbox.execute(
        " ; ".join(f"(echo x > {target}) 2>/dev/null && echo WROTE {target}" for target in targets)
        + " ; echo private > /tmp/escape-private && cat /tmp/escape-private",
        timeout=20,
    )
    assert "WROTE" not in result.output
    assert result.output.endswith("private\n")  # the sandbox's own /tmp is writable...
    for target in [*targets, "/tmp/escape-private"]:  # ...and none of it reaches the host
        assert not os.path.exists(target), target


def test_symlinks_out_of_the_workspace_lead_nowhere(sandbox, host_files):
    workspace = sandbox.workspace
    (workspace / "gold-link").unlink(missing_ok=True)
    (workspace / "gold-dir-link").unlink(missing_ok=True)
    (workspace / "gold-link").symlink_to(host_files["gold"])
    (workspace / "gold-dir-link").symlink_to(host_files["gold_dir"], target_is_directory=True)

    inside = sandbox.execute("cat gold-link; ls gold-dir-link/; cat gold-dir-link/gold_results.json", timeout=10)
    assert inside.exit_code != 0 and TOKEN not in inside.output

    for path in ("gold-link", "gold-dir-link/gold_results.json"):
        with pytest.raises(SandboxError):
            sandbox.read_file(path)
        with pytest.raises(SandboxError):
            sandbox.write_file(path, "overwritten")
    with pytest.raises(SandboxError):
        sandbox.list_files("gold-dir-link")
    with pytest.raises(SandboxError):
        sandbox.execute("cat gold_results.json", timeout=10, cwd="gold-dir-link")
    assert TOKEN in host_files["gold"].read_text()
    listing = sandbox.list_files(recursive=True)
    assert "gold-dir-link" in listing and not any(p.startswith("gold-dir-link/") for p in listing)


def test_output_flood_is_bounded(sandbox):
    memory_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = sandbox.execute("head -c 100000000 /dev/zero | tr '\\0' x; echo; echo THE-END >&2", timeout=60)
    limit = sandbox.limits.output_bytes
    assert result.ok and result.truncated
    assert result.output.startswith("xxxx") and result.output.endswith("THE-END\n")
    assert f"\n[... {100_000_009 - limit} bytes truncated ...]\n" in result.output
    assert len(result.output.encode()) <= limit + 100
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - memory_before
    assert grown_kb < 50 * 1024, "the worker buffered the flood"


@pytest.mark.slow
def test_filling_the_disk_is_stopped_and_reported(sandbox, open_fresh, host_health):
    cap = sandbox.limits.disk_mb * 2**20
    fill = "i=0; while :; do head -c 10M /dev/zero > fill-$i || exit 1; i=$((i+1)); done"
    result = sandbox.execute(fill, timeout=60)
    assert result.exit_code == DISK_QUOTA_EXIT_CODE and not result.timed_out, result
    assert "disk quota exceeded" in result.output
    assert result.duration < 30
    assert disk_usage(sandbox.workspace).bytes < cap + 1024 * 2**20  # overshoot bounded by one check interval

    # Over the cap, every command fails; freeing space makes them succeed again, even when freeing it
    # takes longer than a check interval (a slow disk): a command that shrinks the workspace goes on.
    assert sandbox.execute("echo still over", timeout=10).exit_code == DISK_QUOTA_EXIT_CODE
    assert sandbox.execute("rm -f fill-0; sleep 0.8; rm -f fill-*", timeout=30).ok

    one_file = sandbox.execute("head -c 100M /dev/zero > big", timeout=30)
    assert one_file.exit_code == 128 + 25 and "File size limit exceeded" in one_file.output  # SIGXFSZ
    assert (sandbox.workspace / "big").stat().st_size <= sandbox.limits.file_size_mb * 2**20
    sandbox.execute("rm -f big", timeout=10)

    tmp_fill = sandbox.execute("for i in 1 2 3 4 5 6; do head -c 30M /dev/zero > /tmp/fill-$i || break; done; df -m /tmp", timeout=30)
    assert "No space left on device" in tmp_fill.output, tmp_fill.output
    sandbox.execute("rm -f /tmp/fill-*", timeout=10)

    host_health.check()
    assert_still_works(sandbox, open_fresh)
