"""Helpers for tests that need a component of the machine (a sandbox backend, a browser, fixtures)."""
import functools
import os
import shlex
import shutil
import signal
import stat
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest

BUILTIN_SUITE_DIR = Path(__file__).resolve().parents[1] / "runs" / "suites" / "builtin"

# A pure-Python package on this machine's local index (/opt/pypi), so building an environment of it
# needs no network (tests' conftest.built_environment).
TINY_REQUIREMENT = "six==1.17.0"
PYTORCH_SUITE_DIR = Path(__file__).resolve().parents[1] / "runs" / "suites" / "builtin-pytorch"
# Paper environments that take a minute to build (the PyTorch suite's), shared by every test process
# and run on this machine: sandbox.environments builds each content once, under a lock, and the
# sandbox uid can reach it under the system's temporary directory.
SHARED_ENVIRONMENTS_ROOT = Path(os.environ.get("TMPDIR", "/tmp")) / "autoexperiment-test-environments"


def require(condition: bool, how_to_fix: str) -> None:
    """Fail in CI, where every component must be there; skip elsewhere, saying how to install it."""
    if condition:
        return
    if os.environ.get("CI"):
        pytest.fail(f"missing in CI: {how_to_fix}", pytrace=False)
    pytest.skip(how_to_fix)


_BACKEND_HINTS = {
    "bubblewrap": "run sandbox/images/install_host_packages.sh (apt-get install bubblewrap python3-numpy)",
    "docker": "run sandbox/images/start_docker_engine.sh, then sandbox/images/build_base_image.sh",
}


@functools.cache
def _backend_problem(backend: str) -> str | None:
    from sandbox import backend_problem

    return backend_problem(backend)


def require_backend(backend: str) -> None:
    """Skip, or fail under CI, when a sandbox backend cannot run here."""
    problem = _backend_problem(backend)
    require(problem is None, f"{backend} sandbox unavailable: {problem}. To provide it: {_BACKEND_HINTS[backend]}")


def require_patch() -> None:
    """Skip, or fail under CI, when patch(1) is missing: tests check with it that a final patch
    applies with the standard tool, as a submitter's or a reader's would."""
    require(shutil.which("patch") is not None, "patch(1) is not installed: run `make system-packages` (apt-get install patch)")


def import_builtin_suite(samples: str = "1"):
    """The built-in suite imported into the test database, with its samples at each n of `samples`
    ("1", "1,2"); returns the Suite.

    `manage.py import_suite` imports it the first time in this test process (for each `samples`)
    and whenever the database holds the suite already (a re-import is the command's to do); its
    rows are then kept, and later tests get those rows again in a few bulk inserts: the command does
    the same work each time, some 450 queries, which a few hundred tests paid for in their set-up.
    """
    from django.core.management import call_command

    from runs.models import Suite

    rows = _builtin_rows.get(samples)
    there = Suite.objects.filter(name="builtin").exists()
    if rows is None or there:
        call_command("import_suite", str(BUILTIN_SUITE_DIR), "--samples", samples, stdout=StringIO())
        suite = Suite.objects.get(name="builtin")
        if not there:  # what the command makes of an empty database, kept
            _builtin_rows[samples] = _suite_rows(suite)
        return suite
    _rows_restored(rows)
    return Suite.objects.get(name="builtin")


# samples -> the built-in suite's rows as import_suite left them: [(model, [field values of a row])]
_builtin_rows: dict[str, list] = {}


def _suite_models():
    """The models import_suite writes, each with how its rows of one suite are found, parents first."""
    from runs.models import Experiment, Function, HeldOutCheck, Paper, Sample, Suite

    return [
        (Suite, "pk"),
        (Paper, "suite"),
        (Function, "paper__suite"),
        (Experiment, "paper__suite"),
        (Experiment.dependencies.through, "experiment__paper__suite"),
        (HeldOutCheck, "experiment__paper__suite"),
        (Sample, "paper__suite"),
        (Sample.functions.through, "sample__paper__suite"),
    ]


def _suite_rows(suite) -> list:
    return [(model, list(model.objects.filter(**{path: suite.pk}).order_by("pk").values()))
            for model, path in _suite_models()]


def _rows_restored(rows: list) -> None:
    """Insert the rows again with their primary keys. Postgres' sequences only ever move on (a
    rolled-back test or a flush between transactional tests leaves them where they were), so these
    keys, drawn from them by the first import, are below anything drawn since; a sequence that is
    not (one reset) is moved past them, so that rows made later draw no key of theirs."""
    from django.db import connection

    for model, values in rows:
        model.objects.bulk_create([model(**row) for row in values])
        if connection.vendor == "postgresql" and values:
            table, column = model._meta.db_table, model._meta.pk.column
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_get_serial_sequence(%s, %s)", [connection.ops.quote_name(table), column])
                (sequence,) = cursor.fetchone()
                if sequence:
                    cursor.execute(f"SELECT last_value FROM {sequence}")
                    (last,) = cursor.fetchone()
                    highest = max(row[model._meta.pk.attname] for row in values)
                    if last < highest:
                        cursor.execute("SELECT setval(%s, %s)", [sequence, highest])


def shared_database_url() -> str:
    """The test database as a URL other processes (workers, gunicorn) can use. They need Postgres:
    fails in CI, or skips, under any other database."""
    from django.db import connection

    db = connection.settings_dict
    require(db["ENGINE"].endswith("postgresql"), "tests that start other processes need Postgres: set DATABASE_URL=postgres://...")
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    return f"postgres://{db['USER']}{password}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def redis_test_url() -> str:
    """The Redis database of the tests: REDIS_URL's server, database TEST_REDIS_DB (default 15),
    never a developer's. Concurrent test runs on one machine each set their own TEST_REDIS_DB."""
    from urllib.parse import urlsplit, urlunsplit

    base = urlsplit(os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0")
    return urlunsplit((base.scheme, base.netloc, f"/{int(os.environ.get('TEST_REDIS_DB', '15'))}", "", ""))


def redis_test_client():
    """A client of redis_test_url(); fails in CI, or skips, saying how to start Redis when it is down."""
    import redis

    url = redis_test_url()
    client = redis.Redis.from_url(url)
    try:
        client.ping()
    except redis.exceptions.ConnectionError as error:
        require(False, f"Redis is not reachable at {url} ({error}); start it: scripts/ensure_services.sh")
    return client


def standings_refreshed() -> None:
    """What the leaderboard's refresh job does after a change (leaderboard.standings), for tests that
    write attempts and runs with the ORM directly, which announces nothing: every system recomputed."""
    from leaderboard.standings import standings_refresh

    standings_refresh(everything=True)


def in_fresh_django(code: str) -> list[str]:
    """The lines `code` prints in a new interpreter after django.setup() (DEBUG on), for what only a
    fresh process can show, such as which modules start-up imports. Fails the test if it fails."""
    environment = {**os.environ, "DEBUG": "1", "DJANGO_SETTINGS_MODULE": "autoexperiment_site.settings"}
    result = subprocess.run(
        [sys.executable, "-c", f"import django\ndjango.setup()\n{code}"],
        cwd=Path(__file__).resolve().parent.parent, env=environment, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


# --- an ordinary user as the worker ---------------------------------------------------------------

# The account hostile tests run a worker as when the test process is root (CI): a system account
# made on first use, never SANDBOX_UID (a root worker refuses a sandbox uid that is a host account).
ORDINARY_WORKER = "autoexperiment-worker"


@functools.cache
def ordinary_worker_identity() -> tuple[int, int]:
    """(uid, gid) of an ordinary user to run a worker as: this process's own when it is not root,
    else ORDINARY_WORKER's, created as a system account (useradd) if missing."""
    import pwd

    if os.geteuid() != 0:
        return os.getuid(), os.getgid()
    try:
        account = pwd.getpwnam(ORDINARY_WORKER)
    except KeyError:
        account = _ordinary_worker_created()
    return account.pw_uid, account.pw_gid


def _ordinary_worker_created():
    """ORDINARY_WORKER made with useradd, one process at a time: the workers of one test run (pytest
    -n) and other test runs on the machine may all find it missing at once, and a second useradd
    fails (the account exists, or /etc/passwd is locked by the first)."""
    import fcntl
    import pwd
    import tempfile

    useradd = shutil.which("useradd")
    require(useradd is not None, "useradd is missing: install the passwd package (the hostile tests run a worker as an ordinary user)")
    with open(Path(tempfile.gettempdir()) / f"{ORDINARY_WORKER}.useradd.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return pwd.getpwnam(ORDINARY_WORKER)  # made by whoever held the lock before
        except KeyError:
            subprocess.run(
                [useradd, "--system", "--no-create-home", "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", ORDINARY_WORKER],
                check=True, capture_output=True, timeout=60,
            )
            return pwd.getpwnam(ORDINARY_WORKER)


def _first_locked_ancestor(path: Path) -> Path | None:
    """The shallowest directory above `path` that only its owner may traverse (a 0700 /root)."""
    for ancestor in reversed(path.parents):
        if ancestor != Path("/") and not ancestor.stat().st_mode & stat.S_IXOTH:
            return ancestor
    return None


def ordinary_user_argv(argv: list[str], *, reachable: list[Path]) -> list[str]:
    """`argv` to run as an ordinary user: as this process when it is not root, else as
    ORDINARY_WORKER, in a mount namespace of its own in which this interpreter and each path of
    `reachable` (each traversable itself) can be reached. A test machine may keep them under a
    directory only root can pass (the interpreter under a 0700 /root, tmp_path under a 0700
    pytest-of-root), where a real worker's would not be: there, such a directory is replaced by an
    empty tmpfs into which the paths are bound, nothing else of the host changes."""
    if os.geteuid() != 0:
        return argv
    uid, gid = ordinary_worker_identity()
    for tool in ("unshare", "mount", "setpriv"):
        require(shutil.which(tool) is not None, f"{tool} is missing: install util-linux and mount")
    paths = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), *(path.resolve() for path in reachable)}
    locked: dict[Path, list[Path]] = {}
    for path in sorted(paths):
        ancestor = _first_locked_ancestor(path)
        if ancestor is not None:
            locked.setdefault(ancestor, []).append(path)
    quote = shlex.quote
    script = ["set -eu", "stage=$(mktemp -d)"]
    moves = []
    for number, (ancestor, inside) in enumerate(sorted(locked.items())):
        for index, path in enumerate(inside):
            staged = f'"$stage/{number}-{index}"'
            script += [f"mkdir {staged}", f"mount --bind {quote(str(path))} {staged}"]
            moves += [f"mkdir -p {quote(str(path))}", f"mount --move {staged} {quote(str(path))}"]
        script.append(f"mount -t tmpfs -o mode=755 autoexperiment-reach {quote(str(ancestor))}")
    script += moves
    script.append(f"exec setpriv --reuid={uid} --regid={gid} --clear-groups -- " + " ".join(map(quote, argv)))
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", "\n".join(script)]


def run_sandbox_script(script: str, *, as_ordinary_user: bool, scratch: Path, timeout: float = 120) -> dict:
    """Runs `script` (Python that may import the sandbox package, which needs no Django) in a worker
    process of its own, as root or as an ordinary user , in `scratch` (from the
    `worker_scratch` fixture, given to that user), and returns the JSON document it prints last."""
    import json

    if not as_ordinary_user and os.geteuid() != 0:
        pytest.skip("a root worker needs the tests to run as root (CI does)")
    # The first line it prints says who ran it: the test checks it ran as whom it says.
    (scratch / "script.py").write_text(f"import os\nprint('worker uid', os.getuid(), os.geteuid())\n{script}")
    repository = Path(__file__).resolve().parents[1]
    argv = [sys.executable, "-s", str(scratch / "script.py")]
    if as_ordinary_user:
        if os.geteuid() == 0:
            os.chown(scratch, *ordinary_worker_identity())
        argv = ordinary_user_argv(argv, reachable=[repository, scratch])
    result = subprocess.run(
        argv, cwd=scratch, env={"PATH": "/usr/bin:/bin", "HOME": str(scratch), "PYTHONPATH": str(repository)},
        capture_output=True, text=True, timeout=timeout,
    )
    assert result.returncode == 0, f"the worker script failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    lines = result.stdout.strip().splitlines()
    _, _, uid, euid = lines[0].split()
    expected = ordinary_worker_identity()[0] if as_ordinary_user else 0
    assert int(uid) == int(euid) == expected, f"the worker ran as uid {uid} (effective {euid}), not {expected}"
    return json.loads(lines[-1])


@pytest.fixture
def worker_scratch():
    """A fresh directory under the system's temporary directory (which any user can traverse, unlike
    a 0700 pytest-of-root) for run_sandbox_script; removed afterwards, whatever a worker left in it."""
    import tempfile

    from sandbox import fs

    directory = Path(tempfile.mkdtemp(prefix="autoexperiment-worker-"))
    os.chmod(directory, 0o755)
    yield directory
    # A sandbox process that outlived its worker (the attack of a test that failed) still mounts a
    # workspace in here: end it, so a failed test leaves nothing running.
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if str(directory) in Path(f"/proc/{pid}/mountinfo").read_text():
                os.kill(int(pid), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass
    fs.remove_tree(directory)
