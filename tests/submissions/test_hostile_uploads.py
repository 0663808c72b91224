"""Uploads whose final patch tries what a text diff must not do, and one that edits the experiment
script to forge its numbers.

A patch is a list of instructions the harness will carry out on a fresh workspace, so an uploader
tries the git headers that would make it do more than change text under code/: rename or copy a
file (a masked file away, or something else in), make a symbolic link, change a mode, carry
binary content, or reach out of code/ with "..". Each is refused at upload, through the service
and the API, naming the line of the patch (placed after an honest first section, so the number is
the patch's own line, not the section's), and nothing is stored. An edit of the experiment script
passes the upload (it is a text change under code/) and is then dropped by the re-execution,
which lists it as out of scope: the forged numbers it prints are never the verdict.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.test import Client

from runs.benchmark.patches import unified_diff
from runs.models import Attempt, Sample
from runs.submissions.problems import SubmissionInvalid
from runs.submissions.selectors import submission_summary
from runs.submissions.services import submission_create, submission_reexecute_sync, token_create
from runs.suites.selectors import sample_experiments
from runs.suites.services import workspace_build
from sandbox import fs
from tests.benchmark.forging import assert_every_form_dropped, with_every_form
from tests.submissions.helpers import SAMPLE, gold_answer, gold_patch, jsonl, record
from tests.support import require_backend

EXPERIMENT_SCRIPT = "calibrate.py"  # what every experiment of the sample runs: python3 calibrate.py ...

# (id, the hostile section, its header line counted from the section's first line, what is refused)
HOSTILE_SECTIONS = [
    ("rename",
     "diff --git a/code/metrics.py b/code/stolen.py\nsimilarity index 100%\nrename from code/metrics.py\nrename to code/stolen.py\n",
     3, '"rename from code/metrics.py": renames are not accepted'),
    ("copy",
     "diff --git a/code/metrics.py b/code/copied.py\nsimilarity index 100%\ncopy from code/metrics.py\ncopy to code/copied.py\n",
     3, '"copy from code/metrics.py": copies are not accepted'),
    ("symlink",
     "diff --git a/code/gold.py b/code/gold.py\nnew file mode 120000\nindex 0000000..e69de29\n--- /dev/null\n+++ b/code/gold.py\n"
     "@@ -0,0 +1 @@\n+/srv/suites/builtin/temperature-scaling/code/metrics.py\n\\ No newline at end of file\n",
     2, '"new file mode 120000": symbolic links are not accepted'),
    ("mode-change",
     "diff --git a/code/calibrate.py b/code/calibrate.py\nold mode 100644\nnew mode 100755\n",
     2, '"old mode 100644": mode changes are not accepted'),
    ("git-binary-patch",
     "diff --git a/code/numpy.so b/code/numpy.so\nnew file mode 100644\nindex 0000000..e69de29\nGIT binary patch\nliteral 3\nKcmZQz00961\n\nliteral 0\nHcmV?d00001\n\n",
     4, '"GIT binary patch": binary changes are not accepted'),
    ("binary-files-differ",
     "diff --git a/code/data.npz b/code/data.npz\nindex 1111111..2222222 100644\nBinary files a/code/data.npz and b/code/data.npz differ\n",
     3, '"Binary files a/code/data.npz and b/code/data.npz differ": binary changes are not accepted'),
    ("dotdot-path",
     "--- a/code/../../etc/passwd\n+++ b/code/../../etc/passwd\n@@ -1 +1 @@\n-root:x:0:0:root:/root:/bin/bash\n+toor::0:0:root:/root:/bin/bash\n",
     1, '"--- a/code/../../etc/passwd": a/code/../../etc/passwd has a "." or ".." component'),
]


@pytest.fixture
def honest_patch(builtin, tmp_path) -> str:
    """The sample's gold patch: a valid first section for the hostile one to follow."""
    return gold_patch(Sample.objects.get(sample_id=SAMPLE), tmp_path)


@pytest.mark.parametrize("case", HOSTILE_SECTIONS, ids=[case[0] for case in HOSTILE_SECTIONS])
def test_git_headers_beyond_text_are_refused_naming_the_patch_line(case, honest_patch, snapshot, user):
    _, section, header_line, refused = case
    patch = honest_patch + section
    line = honest_patch.count("\n") + header_line
    expected = f"line 2: final_patch: line {line}: {refused}"
    data = jsonl(record(final_answer=gold_answer(Sample.objects.get(sample_id=SAMPLE)), final_patch=patch))

    with pytest.raises(SubmissionInvalid) as raised:
        submission_create(data=data, filename="r.jsonl", uploader=user)
    messages = raised.value.messages()
    assert any(message.startswith(expected) for message in messages), f"{expected!r} not in {messages}"
    snapshot.assert_unchanged()

    _, key = token_create(user=user)
    response = Client().post("/api/submissions/", data=data, content_type="application/octet-stream",
                             HTTP_AUTHORIZATION=f"Token {key}", HTTP_X_FILENAME="r.jsonl")
    assert response.status_code == 400, response.content
    assert any(problem.startswith(expected) for problem in response.json()["problems"]), response.json()["problems"]
    snapshot.assert_unchanged()


def _forged_script_patch(sample: Sample, scratch: Path) -> str:
    """A patch that replaces the experiment script with one printing each experiment's gold numbers
    (read from the database, standing in for a leak), keyed by the experiment's arguments."""
    workspace = scratch / "masked"
    workspace_build(sample=sample, dest=workspace)
    original = (workspace / "code" / EXPERIMENT_SCRIPT).read_text()
    fs.remove_tree(workspace)
    prefix = f"python3 {EXPERIMENT_SCRIPT} "
    forged_results = {}
    for experiment in sample_experiments(sample=sample):
        assert experiment.command.startswith(prefix), experiment.command
        forged_results[experiment.command[len(prefix):]] = experiment.gold_result
    forged = (
        "import json\nimport sys\n\n"
        f"RESULTS = {json.dumps(forged_results)}\n"
        'print(json.dumps(RESULTS[" ".join(sys.argv[1:])]))\n'
    )
    return unified_diff(f"code/{EXPERIMENT_SCRIPT}", original, forged)


def test_an_edited_experiment_script_is_accepted_then_dropped_by_the_reexecution(builtin, user, tmp_path, claims_in_the_test_transaction):
    require_backend("bubblewrap")
    sample = Sample.objects.get(sample_id=SAMPLE)
    patch = _forged_script_patch(sample, tmp_path)
    data = jsonl(record(final_answer=gold_answer(sample), final_patch=patch))

    submission = submission_create(data=data, filename="forged.jsonl", uploader=user, reexecute=True, enqueue=False)
    attempt = submission.run.attempts.get()
    assert attempt.reported_passed is True and attempt.final_patch == patch  # stored as uploaded, reported numbers pass

    submission_reexecute_sync(submission=submission)

    attempt.refresh_from_db()
    assert attempt.reexecution_passed is False, attempt.reexecution_output[-2000:]
    assert attempt.passed is False and attempt.mismatch is True
    assert attempt.failure_label == Attempt.WRONG_ANSWER
    assert [edit["path"] for edit in attempt.out_of_scope_edits] == [f"code/{EXPERIMENT_SCRIPT}"]
    assert "RESULTS" in attempt.out_of_scope_edits[0]["diff"]  # the dropped edit is kept for the record
    assert "NotImplementedError" in attempt.reexecution_output  # the original script ran the masked stub
    summary = submission_summary(submission=submission)
    assert (summary.reexecuted, summary.passed, summary.mismatches) == (1, 0, 1)


@pytest.mark.slow
def test_an_uploaded_stub_whose_new_code_runs_at_import_is_not_reproduced(builtin, user, tmp_path, claims_in_the_test_transaction):
    """A non-staff upload whose patch leaves the masked bodies as stubs and adds, to a file with masked
    functions, code that prints each experiment's gold numbers at import (every form of
    tests/benchmark/forging.py): re-executed, it does not pass."""
    require_backend("bubblewrap")
    sample = Sample.objects.get(sample_id=SAMPLE)
    assert not user.is_staff
    function = sample.functions.order_by("func_id").first()
    path = f"code/{function.file}"
    workspace = tmp_path / "masked"
    workspace_build(sample=sample, dest=workspace)
    masked = (workspace / path).read_text()
    fs.remove_tree(workspace)
    prefix = f"python3 {EXPERIMENT_SCRIPT} "
    results = {experiment.command[len(prefix):]: json.dumps(experiment.gold_result) for experiment in sample_experiments(sample=sample)}
    stub = masked + f"\n\n_RESULTS = {results!r}\n"
    forged = with_every_form(stub, function=function.name.split(".")[-1], output='_RESULTS[" ".join(sys.argv[1:])]')
    patch = unified_diff(path, masked, forged)
    data = jsonl(record(final_answer=gold_answer(sample), final_patch=patch))

    submission = submission_create(data=data, filename="stub.jsonl", uploader=user, reexecute=True, enqueue=False)
    outcomes = submission_reexecute_sync(submission=submission)

    attempt = submission.run.attempts.get()
    assert attempt.reported_passed is True  # the numbers it reports pass...
    assert attempt.reexecution_passed is False, (outcomes, attempt.reexecution_output[-2000:])  # ...the harness's run does not
    assert attempt.passed is False and attempt.mismatch is True and attempt.failure_label == Attempt.WRONG_ANSWER
    [edit] = attempt.out_of_scope_edits
    assert edit["path"] == path
    assert_every_form_dropped(edit["reason"])
    assert "NotImplementedError" in attempt.reexecution_output
    summary = submission_summary(submission=submission)
    assert (summary.reexecuted, summary.passed, summary.mismatches) == (1, 0, 1)
    submission.refresh_from_db()
    assert submission.status_detail == "every attempt re-executed; 1 reported result(s) not reproduced"
