"""The behaviour every sandbox backend promises, run unchanged against each of them."""

from __future__ import annotations

import os

import docker
import pytest

from sandbox import ExecResult, Limits, SandboxError, open_sandbox
from sandbox.docker_backend import container_name
from tests.support import require_backend


def test_echo_succeeds(sandbox):
    result = sandbox.execute("echo hello", timeout=10)
    assert isinstance(result, ExecResult)
    assert (result.output, result.exit_code, result.timed_out, result.truncated) == ("hello\n", 0, False, False)
    assert result.ok


def test_exit_code_is_reported(sandbox):
    result = sandbox.execute("echo failing; exit 7", timeout=10)
    assert result.exit_code == 7
    assert result.output == "failing\n"
    assert not result.ok


def test_stdout_and_stderr_interleave_in_order(sandbox):
    result = sandbox.execute("echo one; echo two >&2; echo three; echo four >&2", timeout=10)
    assert result.output == "one\ntwo\nthree\nfour\n"


def test_command_runs_in_a_shell(sandbox):
    result = sandbox.execute("for word in a b; do printf '%s-' \"$word\"; done | tr a-z A-Z", timeout=10)
    assert result.output == "A-B-"


def test_runs_in_workspace_and_given_cwd(sandbox):
    sandbox.write_file("nested/dir/marker.txt", "here\n")
    assert sandbox.execute("pwd", timeout=10).output == "/workspace\n"
    result = sandbox.execute("pwd; cat marker.txt", timeout=10, cwd="nested/dir")
    assert result.output == "/workspace/nested/dir\nhere\n"
    assert sandbox.execute("pwd", timeout=10, cwd="/workspace/nested").output == "/workspace/nested\n"


def test_missing_cwd_is_refused(sandbox):
    with pytest.raises(SandboxError):
        sandbox.execute("pwd", timeout=10, cwd="no/such/dir")


def test_timeout_kills_the_command(sandbox):
    result = sandbox.execute("echo started; sleep 30; echo never", timeout=1)
    assert result.timed_out
    assert not result.ok
    assert result.exit_code == 137
    assert result.output == "started\n"
    assert 1.0 <= result.duration < 6.0


def test_duration_is_measured(sandbox):
    result = sandbox.execute("sleep 0.3", timeout=10)
    assert 0.3 <= result.duration < 3.0


def test_long_output_keeps_head_and_tail(sandbox):
    limit = sandbox.limits.output_bytes
    result = sandbox.execute(
        "python3 -c \"import sys; sys.stdout.write('START' + 'x' * 200000 + 'END')\"", timeout=30
    )
    assert result.ok and result.truncated
    assert result.output.startswith("START") and result.output.endswith("END")
    assert f"\n[... {200008 - limit} bytes truncated ...]\n" in result.output
    assert len(result.output.encode()) < limit + 100


def test_short_output_is_not_truncated(sandbox):
    result = sandbox.execute("python3 -c \"print('y' * 1000)\"", timeout=30)
    assert not result.truncated
    assert result.output == "y" * 1000 + "\n"


def test_python_with_numpy_is_available(sandbox):
    result = sandbox.execute("python3 -c 'import numpy; print(numpy.arange(4).sum())'", timeout=60)
    assert result.output == "6\n", result.output


def test_commands_run_unprivileged(sandbox):
    result = sandbox.execute("id -u; id -g", timeout=10)
    uid, gid = result.output.split()
    assert uid != "0" and gid != "0"


def test_write_read_and_list_files(sandbox):
    sandbox.write_file("files/sub/text.txt", "héllo\nwörld\n")
    sandbox.write_file("files/top.py", "print('top')\n")
    assert sandbox.read_file("files/sub/text.txt") == "héllo\nwörld\n"
    assert sandbox.read_file("/workspace/files/top.py") == "print('top')\n"
    assert sandbox.execute("cat files/sub/text.txt", timeout=10).output == "héllo\nwörld\n"
    assert sandbox.list_files("files") == ["files/sub/", "files/top.py"]
    assert sandbox.list_files("files", recursive=True) == ["files/sub/", "files/sub/text.txt", "files/top.py"]
    assert "files/" in sandbox.list_files()


def test_files_written_inside_are_readable_and_host_files_writable_inside(sandbox):
    sandbox.write_file("shared.txt", "from host\n")
    result = sandbox.execute("echo from sandbox >> shared.txt && echo made > made.txt", timeout=10)
    assert result.ok, result.output
    assert sandbox.read_file("shared.txt") == "from host\nfrom sandbox\n"
    assert sandbox.read_file("made.txt") == "made\n"


def test_missing_file_raises(sandbox):
    with pytest.raises(SandboxError):
        sandbox.read_file("does-not-exist.txt")


@pytest.mark.parametrize("path", ["../outside.txt", "a/../../outside.txt", "/etc/passwd", "/workspace/../etc/passwd"])
def test_paths_escaping_the_workspace_are_refused(sandbox, path):
    with pytest.raises(SandboxError):
        sandbox.read_file(path)
    with pytest.raises(SandboxError):
        sandbox.write_file(path, "x")
    with pytest.raises(SandboxError):
        sandbox.list_files(path)
    with pytest.raises(SandboxError):
        sandbox.execute("pwd", timeout=10, cwd=path)
    assert not (sandbox.workspace.parent / "outside.txt").exists()


def test_symlink_escape_is_refused(sandbox):
    result = sandbox.execute("ln -sf /etc/passwd passwd-link && ln -sfn / root-link", timeout=10)
    assert result.ok, result.output
    for path in ("passwd-link", "root-link/etc/hostname"):
        with pytest.raises(SandboxError):
            sandbox.read_file(path)
        with pytest.raises(SandboxError):
            sandbox.write_file(path, "overwritten")
    with pytest.raises(SandboxError):
        sandbox.list_files("root-link")
    assert "passwd-link" in sandbox.list_files()


def test_environment_is_an_allow_list(sandbox, secret_in_environment, extra_env):
    result = sandbox.execute("env", timeout=10)
    env = dict(line.split("=", 1) for line in result.output.splitlines() if "=" in line)
    for name, value in secret_in_environment.items():
        assert os.environ[name] == value  # set in the worker...
        assert name not in env and value not in result.output  # ...never inside
    for name, value in extra_env.items():
        assert env[name] == value
    assert env["HOME"] == "/tmp" and env["PYTHONUNBUFFERED"] == "1" and env["LANG"] == "C.UTF-8"
    # The shell itself adds PWD, SHLVL and _; Docker adds HOSTNAME.
    assert set(env) <= {"PATH", "HOME", "LANG", "PYTHONDONTWRITEBYTECODE", "PYTHONUNBUFFERED",
                        *extra_env, "PWD", "SHLVL", "_", "HOSTNAME"}


def test_bad_arguments_are_refused(sandbox):
    with pytest.raises(SandboxError):
        sandbox.execute("true", timeout=0)
    with pytest.raises(SandboxError):
        open_sandbox("no-such-backend", sandbox.workspace)
    with pytest.raises(ValueError):
        Limits(memory_mb=0)


def test_context_manager_closes(sandbox, open_fresh, backend):
    with open_fresh(name="") as box:
        assert box.execute("echo inside", timeout=10).output == "inside\n"
        if backend == "docker":  # two unnamed sandboxes alive at once, under different names
            assert box.container_name != sandbox.container_name
    assert box.closed
    with pytest.raises(SandboxError):
        box.execute("echo again", timeout=10)
    box.close()  # idempotent
    if backend == "docker":
        client = docker.from_env()
        with pytest.raises(docker.errors.NotFound):
            client.containers.get(box.container_name)
    else:
        assert box._cgroup is None or not any(d.exists() for d in box._cgroup.directories)


def test_unnamed_sandboxes_get_unique_names(sandbox, backend):
    assert container_name("") != container_name("")
    assert container_name("attempt-17") == container_name("attempt-17")
    assert "attempt-17" in container_name("attempt-17")
    if backend == "docker":
        assert sandbox.container_name.startswith("autoexperiment-sandbox-")


def test_leftover_container_with_the_same_name_is_removed(tmp_path):
    require_backend("docker")
    client = docker.from_env()
    first = open_sandbox("docker", tmp_path, name="attempt-contract-leftover")
    first_id = first._container.id  # the worker "crashes": first is never closed
    with open_sandbox("docker", tmp_path, name="attempt-contract-leftover") as second:
        assert second.container_name == first.container_name == "autoexperiment-sandbox-attempt-contract-leftover"
        with pytest.raises(docker.errors.NotFound):
            client.containers.get(first_id)
        assert second.execute("echo replaced", timeout=10).output == "replaced\n"
    with pytest.raises(docker.errors.NotFound):
        client.containers.get(second.container_name)


def test_output_that_comes_just_before_the_reader_is_stopped_is_kept(monkeypatch):
    """bubblewrap's output reader, stopped once the command has ended: output written between its
    last wait for data and its look at the stop signal (a reader thread kept waiting for the
    interpreter on a busy machine, or by sandboxes run from other threads) is read, not dropped.
    Seen as an experiment that printed its JSON and exited 0 reported as "printed no JSON object"."""
    import select
    import threading

    from sandbox import bwrap_backend
    from sandbox.output import BoundedOutput

    read_end, write_end = os.pipe()
    stop = threading.Event()

    class LateOutput:
        """select, as the reader sees it when the command's last words come right after it returned."""

        @staticmethod
        def select(readers, writers, errors, timeout):
            ready = select.select(readers, writers, errors, 0)
            os.write(write_end, b'{"loss": 0.25}\n')
            stop.set()  # the command has ended meanwhile
            return ready

    monkeypatch.setattr(bwrap_backend, "select", LateOutput)
    output = BoundedOutput(1024)
    try:
        bwrap_backend._pump(read_end, output, stop)  # the write end stays open: no EOF ends it
    finally:
        os.close(read_end)
        os.close(write_end)
    assert output.text() == '{"loss": 0.25}\n'
