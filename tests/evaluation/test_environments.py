"""Attempts, re-execution and gold of a paper that declares an environment and a data file: they run
with both bound; a worker that lacks them fails the attempt at once, naming the command."""
import hashlib
import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from runs.evaluation.selectors import run_progress
from runs.evaluation.services import run_create, run_execute_sync
from runs.models import Attempt
from tests.support import TINY_REQUIREMENT

transactional = pytest.mark.django_db(transaction=True)

NUMBERS = b"1 2 3 4\n"
COMMAND = "python manage.py build_environment envy --paper envy-paper"
TOTAL = '''def total(values):
    """The sum of the values."""
    result = 0
    for value in values:
        result += value
    return result
'''
# Fails outright unless it runs in a virtual environment (the paper's) and reads its data file.
RUN = '''import json
import sys

import six  # noqa: F401 - the environment's package
from total import total

assert sys.prefix != sys.base_prefix, "not in the paper's environment"
with open("/data/numbers.txt") as handle:
    print(json.dumps({"total": float(total(int(word) for word in handle.read().split()))}))
'''


@pytest.fixture
def envy_suite(tmp_path, workspace_root, data_cache, db):
    """Suite "envy": one paper declaring an environment (TINY_REQUIREMENT) and a data file."""
    root = tmp_path / "envy"
    paper_dir = root / "envy-paper"
    (paper_dir / "code").mkdir(parents=True)
    (paper_dir / "data").mkdir()
    (paper_dir / "data" / "numbers.txt").write_bytes(NUMBERS)
    (paper_dir / "code" / "total.py").write_text(TOTAL)
    (paper_dir / "code" / "run.py").write_text(RUN)
    (root / "suite.json").write_text(json.dumps({"name": "envy", "papers": ["envy-paper"],
                                                 "environment": {"requirements": [TINY_REQUIREMENT]}}))
    (paper_dir / "paper.json").write_text(json.dumps({
        "id": "envy-paper", "title": "A Sum",
        "functions": [{"id": 0, "file": "total.py", "name": "total", "description": "The sum."}],
        "experiments": [{"id": 0, "description": "The sum.", "command": "python3 run.py", "answer_format": {"total": 0.0},
                         "depends_on": [0]}],
        "data": [{"name": "numbers.txt", "source": "data/numbers.txt", "sha256": hashlib.sha256(NUMBERS).hexdigest(),
                  "size": len(NUMBERS)}],
    }))
    (paper_dir / "paper.md").write_text("# A Sum\n\nWe add.\n")
    (paper_dir / "gold.json").write_text(json.dumps({"results": {"0": {"total": 10.0}}, "spread": {}}))
    call_command("import_suite", str(root), "--samples", "1", stdout=io.StringIO())
    return root


@transactional
def test_an_attempt_without_its_environment_fails_at_once_naming_the_build_command(envy_suite, settings, tmp_path):
    settings.ENVIRONMENTS_ROOT = tmp_path / "nothing-built-here"
    run = run_create(suite=run_suite(), agent="gold", n_values=[1], enqueue=False)

    run_execute_sync(run=run)

    attempt = run.attempts.get()
    assert (attempt.status, attempt.failure_label) == (Attempt.ERROR, Attempt.NOT_PREPARED)
    assert "paper envy-paper: its environment is not built on this machine" in attempt.failure_detail
    assert f"build it with `{COMMAND}`" in attempt.failure_detail
    assert (attempt.tries, attempt.infra_failures, attempt.infra_history) == (1, 0, [])  # no retry burnt
    assert attempt.trajectory is None and attempt.reexecution_passed is None  # nothing ran
    assert run_progress(run=run).status == "failed"


@transactional
def test_an_attempt_without_its_data_fails_at_once_naming_the_command(envy_suite, built_environment, settings):
    settings.ENVIRONMENTS_ROOT = built_environment[0]  # built, but the data file is not fetched
    run = run_create(suite=run_suite(), agent="gold", n_values=[1], enqueue=False)

    run_execute_sync(run=run)

    attempt = run.attempts.get()
    assert (attempt.status, attempt.failure_label) == (Attempt.ERROR, Attempt.NOT_PREPARED)
    assert f"data file numbers.txt is not fetched on this machine; fetch it with `{COMMAND}`" in attempt.failure_detail


@pytest.mark.slow
@transactional
@pytest.mark.parametrize("backend", ["bubblewrap", "docker"])
def test_once_prepared_gold_passes_with_the_environment_and_data_on_both_backends(
    envy_suite, built_environment, settings, backend
):
    from tests.support import require_backend

    require_backend(backend)
    settings.ENVIRONMENTS_ROOT = built_environment[0]
    out = io.StringIO()
    call_command("build_environment", "envy", stdout=out)  # the environment exists: only the data is fetched
    assert "environment " + str(built_environment[1]) + ": already built" in out.getvalue()
    assert "data file numbers.txt: fetched" in out.getvalue()

    gold = run_create(suite=run_suite(), agent="gold", n_values=[1], enqueue=False, sandbox_backend=backend)
    noop = run_create(suite=run_suite(), agent="noop", n_values=[1], enqueue=False, sandbox_backend=backend)
    run_execute_sync(run=gold)
    run_execute_sync(run=noop)

    attempt = gold.attempts.get()
    assert attempt.passed, (attempt.failure_detail, attempt.reexecution_output)
    assert noop.attempts.get().passed is False


@transactional
def test_make_gold_refuses_an_unprepared_suite_before_running_anything(envy_suite, settings, tmp_path):
    settings.ENVIRONMENTS_ROOT = tmp_path / "nothing-built-here"

    with pytest.raises(CommandError, match=r"not prepared on this machine:\npaper envy-paper: its environment is not built"):
        call_command("make_gold", "envy", "--repeats", "2", stdout=io.StringIO())
    with pytest.raises(CommandError, match=r"build it with `python manage.py build_environment envy --paper envy-paper`"):
        call_command("validate_suite", "envy", stdout=io.StringIO())


def run_suite():
    from runs.models import Suite

    return Suite.objects.get(name="envy")


@pytest.mark.django_db
def test_debian_packages_are_refused_on_docker_with_the_way_out(envy_suite):
    from runs.models import Paper
    from runs.suites.environments import NotPrepared, paper_provisions

    paper = Paper.objects.select_related("suite").get(paper_id="envy-paper")
    paper.environment = {"requirements": [TINY_REQUIREMENT], "debian_packages": ["libgomp1"]}

    with pytest.raises(NotPrepared, match=r"declares Debian packages \(libgomp1\), which the Docker backend does not "
                                          r"install: run it on the bubblewrap backend"):
        paper_provisions(paper, backend="docker")


@pytest.mark.slow
@pytest.mark.django_db
def test_build_environment_names_the_paper_and_the_requirement_that_failed(tmp_path, settings, native_suite_writer,
                                                                           native_paper):
    import os

    settings.ENVIRONMENTS_ROOT = root = tmp_path / "environments"
    native_paper["environment"] = {"requirements": [TINY_REQUIREMENT, "idna==99.0"]}
    suite_dir = native_suite_writer(tmp_path / "toy", paper=native_paper)

    with pytest.raises(CommandError) as raised:
        call_command("build_environment", str(suite_dir), "--paper", "toy-paper", stdout=io.StringIO())

    assert str(raised.value).startswith("paper toy-paper: the environment could not be built: pip install failed for "
                                        "idna==99.0 (exit 1); its last lines:")
    assert [name for name in os.listdir(root) if not name.endswith(".lock")] == []
    with pytest.raises(CommandError, match="suite toy has no paper 'nope'"):
        call_command("build_environment", str(suite_dir), "--paper", "nope", stdout=io.StringIO())


@pytest.mark.slow
@transactional
def test_make_gold_and_validate_suite_run_with_the_environment_and_data(envy_suite, built_environment, settings):
    settings.ENVIRONMENTS_ROOT = built_environment[0]
    call_command("fetch_data", "envy", stdout=io.StringIO())

    out = io.StringIO()
    call_command("make_gold", "envy", "--repeats", "2", stdout=out)  # run.py fails outside the environment
    assert "Gold results stored for suite envy" in out.getvalue()
    assert json.loads((envy_suite / "envy-paper" / "gold.json").read_text())["results"] == {"0": {"total": 10.0}}

    out = io.StringIO()
    call_command("validate_suite", "envy", "--repeats", "1", stdout=out)  # raises when gold fails or a mask breaks nothing
    assert "gold stability: 0 of 1 experiments unstable" in out.getvalue()
