"""The command-line client (client/, package autoexperiment_client) run as a user runs it: a
subprocess, `python -m autoexperiment_client`, with client/ on PYTHONPATH (so these tests need no
install step) and the token in the environment.

The end-to-end test runs it against the site under pytest-django's live_server with a real RQ
worker (manage.py evaluation_worker, a subprocess) that re-executes the upload in a bubblewrap
sandbox: `submit` uploads, waits and prints the verified verdict.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from django.test import Client

from runs.models import Sample, Submission
from runs.submissions.services import token_create
from tests.replay.factories import make_user
from tests.submissions.helpers import SAMPLE, gold_answer, gold_patch, jsonl, record
from tests.support import redis_test_url, require_backend, shared_database_url, standings_refreshed

BASE_DIR = Path(__file__).resolve().parents[2]
CLIENT_DIR = BASE_DIR / "client"


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_client(*argv: str, token: str | None = None, url: str | None = None, home: Path | None = None,
               timeout: float = 300) -> subprocess.CompletedProcess:
    """The client as a subprocess, with nothing of the developer's environment that it reads."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("AUTOEXPERIMENT_")}
    env["PYTHONPATH"] = str(CLIENT_DIR)
    env["XDG_CONFIG_HOME"] = str(home / "config") if home else "/nonexistent"
    env.pop("DJANGO_SETTINGS_MODULE", None)
    if token is not None:
        env["AUTOEXPERIMENT_TOKEN"] = token
    if url is not None:
        env["AUTOEXPERIMENT_URL"] = url
    return subprocess.run([sys.executable, "-m", "autoexperiment_client", *argv], env=env, capture_output=True,
                          text=True, timeout=timeout, cwd=home or BASE_DIR)


# --- the package alone --------------------------------------------------------------------------


def test_the_package_imports_with_the_standard_library_alone():
    """-S: no site-packages (no Django, no httpx); -I: no PYTHONPATH, no current directory."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "import autoexperiment_client.cli, autoexperiment_client.api, autoexperiment_client.config;"
        "print(sorted(name for name in sys.modules if name.split('.')[0] in ('django', 'runs', 'leaderboard', 'httpx')))"
    )
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(CLIENT_DIR)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("argv", [["--token", "aex_secret", "status", "1"], ["status", "1", "--token", "aex_secret"],
                                  ["--tok", "aex_secret", "status", "1"]])
def test_there_is_no_token_option(argv):
    done = run_client(*argv, url=f"http://127.0.0.1:{closed_port()}")
    assert done.returncode == 2
    assert "aex_secret" not in done.stdout


def test_a_token_file_other_users_can_read_is_refused(tmp_path):
    port = closed_port()
    config = tmp_path / "config" / "autoexperiment" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'url = "http://127.0.0.1:{port}"\ntoken = "aex_from_the_file"\n')
    config.chmod(0o640)
    done = run_client("status", "7", home=tmp_path)
    assert done.returncode == 2
    assert f"{config} holds a token but other users can read it (mode 640)" in done.stderr
    assert f"chmod 600 {config}" in done.stderr

    config.chmod(0o600)  # now it is used: the request goes out, and the closed port is named
    done = run_client("status", "7", home=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == f"error: could not reach http://127.0.0.1:{port}/api/v1/submissions/7/: Connection refused"


def test_missing_settings_say_where_to_put_them(tmp_path):
    done = run_client("status", "7", home=tmp_path)
    assert done.returncode == 2 and "no server URL: pass --url, set AUTOEXPERIMENT_URL" in done.stderr
    done = run_client("--url", "http://127.0.0.1:9", "status", "7", home=tmp_path)
    assert done.returncode == 2 and "no API token: set AUTOEXPERIMENT_TOKEN" in done.stderr
    done = run_client("--url", "http://127.0.0.1:9", "submit", str(tmp_path / "nothing.jsonl"), token="aex_x", home=tmp_path)
    assert done.returncode == 2 and f"{tmp_path / 'nothing.jsonl'}: no such file" in done.stderr
    port = closed_port()  # --url after the command as well as before it
    done = run_client("status", "7", "--url", f"http://127.0.0.1:{port}", token="aex_x", home=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == f"error: could not reach http://127.0.0.1:{port}/api/v1/submissions/7/: Connection refused"


# --- against a real server ----------------------------------------------------------------------


@pytest.fixture
def worker(tmp_path, workspace_root, redis_queue):
    """One long-running evaluation worker (a subprocess) on the test database and Redis database,
    which takes the re-execution jobs the live server enqueues."""
    require_backend("bubblewrap")
    log = tmp_path / "worker.log"
    env = {
        **os.environ, "DEBUG": "1", "DATABASE_URL": shared_database_url(), "REDIS_URL": redis_test_url(),
        "WORKSPACE_ROOT": str(workspace_root), "SANDBOX_BACKEND": "bubblewrap", "LOG_LEVEL": "WARNING",
        "PYTHONUNBUFFERED": "1",
    }
    with open(log, "w") as handle:
        process = subprocess.Popen([sys.executable, "manage.py", "evaluation_worker", "--skip-checks"], cwd=BASE_DIR,
                                   env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
    yield log
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)  # its own session: the work horse it forked goes too
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.mark.slow  # a worker's start, one sandboxed re-execution and a task archive's build
@pytest.mark.django_db(transaction=True)
def test_submit_waits_for_the_verified_verdict_and_every_command_works(builtin, live_server, worker, tmp_path, settings):
    settings.TASK_EXPORT_ROOT = tmp_path / "exports"
    user = make_user()
    _, key = token_create(user=user, name="cli")
    url = live_server.url
    sample = Sample.objects.get(sample_id=SAMPLE)
    good = tmp_path / "good.jsonl"
    good.write_bytes(jsonl(record(SAMPLE, 0, final_answer=gold_answer(sample), final_patch=gold_patch(sample, tmp_path))))

    # A bad token: the server's words, nothing stored.
    done = run_client("--url", url, "submit", str(good), token="aex_not-a-real-key")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == "error: invalid token"
    assert Submission.objects.count() == 0

    # A bad file: the server's message and each of its problems, as the API words them.
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(jsonl(record(SAMPLE, 0, cost=-1), record("no-such-sample", 0)))
    expected = Client().post("/api/v1/submissions/", data=bad.read_bytes(), content_type="application/jsonl",
                             HTTP_AUTHORIZATION=f"Bearer {key}").json()
    assert expected["problem_count"] >= 2
    done = run_client("--url", url, "submit", "--no-reexecute", str(bad), token=key)
    assert done.returncode == 1, done.stderr
    assert f"error: {expected['error']}" in done.stderr
    for problem in expected["problems"]:
        assert f"  {problem}\n" in done.stderr
    assert Submission.objects.count() == 0

    # The good file: uploaded, re-executed by the worker, and the verdict printed once verified.
    done = run_client("--url", url, "submit", "--interval", "0.5", "--timeout", "240", str(good), token=key)
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n{worker.read_text()[-4000:]}"
    submission = Submission.objects.get()
    assert submission.verified and submission.status == Submission.Status.VERIFIED
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"submission {submission.pk}: verified")
    assert "  verified: yes" in lines
    assert "  passed (reported and reproduced): 1, mismatches: 0" in lines
    assert f"  {url}/submissions/{submission.pk}/" in lines
    # stderr is no terminal here: one line per stage, not a bar per poll.
    stages = done.stderr.splitlines()
    assert stages[0] == "uploading" and stages[-1] == "verified", stages
    assert len(stages) == len(set(stages))

    done = run_client("--url", url, "status", str(submission.pk), token=key)
    assert done.returncode == 0 and "  verified: yes" in done.stdout.splitlines()
    done = run_client("--url", url, "status", "--json", str(submission.pk), token=key)
    body = json.loads(done.stdout)
    assert (body["id"], body["status"], body["verified"]) == (submission.pk, "verified", True)
    done = run_client("--url", url, "status", str(submission.pk + 1000), token=key)
    assert done.returncode == 1 and done.stderr.strip() == f"error: no submission {submission.pk + 1000}"

    # The leaderboard in its three formats, the new system in each.
    standings_refreshed()
    done = run_client("--url", url, "leaderboard", "--suite", "builtin", "--format", "json")
    assert done.returncode == 0, done.stderr
    board = json.loads(done.stdout)
    assert board["filters"]["suite"] == "builtin"
    assert any(row.get("model") == "test-model-1" for row in board["rows"])
    done = run_client("--url", url, "leaderboard", "--suite", "builtin", "--format", "csv")
    header, *rows = done.stdout.splitlines()
    assert header.startswith("reference,system,slug,suite,") and any("test-model-1" in row for row in rows)
    done = run_client("--url", url, "leaderboard", "--suite", "builtin")
    table = done.stdout.splitlines()
    assert table[0].split() == ["system", "suite", "context", "verified", "n", "samples", "attempts", "pass1", "passk", "cost_mean"]
    assert any("test-model-1" in line for line in table[2:])
    done = run_client("--url", url, "leaderboard", "--format", "yaml")
    assert done.returncode == 2 and "invalid choice: 'yaml'" in done.stderr

    # The tasks: saved as a tarball (no token needed: the built-in suite's gold is public).
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    done = run_client("--url", url, "download", "tasks", "--suite", "builtin", "--n", "1", "--context", "oracle",
                      "--output", str(downloads))
    assert done.returncode == 0, done.stderr
    saved = Path(done.stdout.strip())
    assert saved == downloads / "builtin-n1-oracle.tar.gz"
    with tarfile.open(saved) as archive:
        assert "builtin-n1-oracle/manifest.jsonl" in archive.getnames()
    assert [path.name for path in downloads.iterdir()] == [saved.name]  # no .part left behind
    done = run_client("--url", url, "download", "tasks", "--suite", "nosuch", "--n", "1", "--context", "oracle",
                      "--output", str(downloads))
    assert done.returncode == 1
    assert f"error: HTTP 404 Not Found from {url}/benchmark/nosuch/tasks/n1-oracle.tar.gz" in done.stderr


def test_the_progress_bar_redraws_one_line_on_a_terminal_and_logs_stages_elsewhere():
    import io

    sys.path.insert(0, str(CLIENT_DIR))
    try:
        from autoexperiment_client.cli import Progress
    finally:
        sys.path.remove(str(CLIENT_DIR))

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    bar = Progress(terminal)
    for done in (0, 1, 2):
        bar.update("re-executing", done, 4, " attempts")
    bar.done()
    assert terminal.getvalue().count("\n") == 1  # one line, redrawn with \r
    assert "\rre-executing [" + "#" * 15 + "-" * 15 + "] 2/4 attempts" in terminal.getvalue()

    log = io.StringIO()
    lines = Progress(log)
    for label in ("uploading", "uploading", "re-executing", "re-executing", "verified"):
        lines.update(label, 1, 2)
    lines.done()
    assert log.getvalue() == "uploading\nre-executing\nverified\n"
