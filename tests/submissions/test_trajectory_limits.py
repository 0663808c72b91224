"""The stored limits of a trajectory and a final patch (runs.limits): an upload over any of them is
refused on the upload page and through the API with the record, step and limit named; one at every
limit is stored, and its replay pages render. Limits are lowered so the files stay small."""
from __future__ import annotations

import io
import re

import pytest
from django.test import Client
from django.urls import reverse
from django.utils.html import escape

from runs.agents.trajectory import FileChange, Header, Step, Trajectory
from runs.limits import step_bytes
from runs.models import Attempt, Submission
from runs.submissions.services import token_create
from tests.submissions.helpers import SAMPLE, jsonl, record


@pytest.fixture
def limits(settings):
    settings.TRAJECTORY_MAX_STEPS = 6
    settings.TRAJECTORY_MAX_TEXT_BYTES = 2048
    settings.TRAJECTORY_MAX_STEP_BYTES = 8192
    settings.TRAJECTORY_MAX_STEP_FILES = 3
    settings.TRAJECTORY_MAX_STEP_DIFF_LINES = 20
    settings.TRAJECTORY_MAX_DIFF_LINES = 50
    settings.SUBMISSION_MAX_PATCH_LINES = 30
    settings.REPLAY_STEPS_PER_PAGE = 4
    return settings


def diff(lines: int, name: str = "code/m.py") -> str:
    """A unified diff of exactly `lines` lines."""
    return f"--- a/{name}\n+++ b/{name}\n@@ -0,0 +1,{lines - 3} @@\n" + "".join(f"+x_{i} = {i}\n" for i in range(lines - 3))


def trajectory(*steps: Step, final_patch: str | None = None) -> dict:
    header = Header(sample_id=SAMPLE, agent="external-react", model="test-model-1", exit_status="submitted")
    return Trajectory(header=header, steps=list(steps), final_patch=final_patch).model_dump()


def step(index: int, *, files: list[str] | None = None, **fields) -> Step:
    fields.setdefault("observation", f"output of step {index}")
    changes = [FileChange(path=f"code/f{n}.py", change="modified", diff=text) for n, text in enumerate(files or [])]
    return Step(index=index, started_at="2025-01-01T00:00:00+00:00", tool="command_line", files_changed=changes, **fields)


def over_every_limit() -> tuple[bytes, list[str]]:
    """One record over each limit, and the message each must get."""
    cases = [
        (trajectory(*[step(i) for i in range(1, 8)]), "line 2: trajectory: has 7 steps; a trajectory may hold at most 6 steps"),
        (trajectory(step(1, observation="o" * 3000)),
         "line 3: trajectory: step 1: observation is 2.9 KB (3,000 bytes); each text field of a step may hold at most "
         "2.0 KB (2,048 bytes)"),
        (trajectory(step(1), step(2, thought="é" * 1025)),  # 1,025 characters, 2,050 bytes
         "line 4: trajectory: step 2: thought is 2.0 KB (2,050 bytes)"),
        (trajectory(step(1, files=[diff(4)] * 4)),
         "line 5: trajectory: step 1: files_changed lists 4 files; a step may list at most 3"),
        (trajectory(step(1, files=[diff(21)])),
         "line 6: trajectory: step 1: its diffs hold 21 lines; one step's diffs may hold at most 20 lines"),
        (trajectory(*[step(i, files=[diff(20)]) for i in range(1, 4)]),
         "line 7: trajectory: the steps' diffs hold 60 lines in all; a trajectory's diffs may hold at most 50 lines"),
        (trajectory(step(1), final_patch=diff(31)),
         "line 8: trajectory: final_patch has 31 lines; a final patch may hold at most 30 lines"),
        (trajectory(step(1, thought="t" * 2040, observation="o" * 2040, traceback="x" * 2040, summary="s" * 2040)),
         "line 9: trajectory: step 1: is 8."),
    ]
    records = [record(SAMPLE, index, trajectory=value) for index, (value, _) in enumerate(cases)]
    records.append(record(SAMPLE, len(cases), final_patch=diff(31)))
    messages = [message for _, message in cases]
    messages.append("line 10: final_patch: has 31 lines; a final patch may hold at most 30 lines")
    messages.append("of JSON; a step may hold at most 8.0 KB (8,192 bytes)")
    return jsonl(*records), messages


def test_an_upload_over_each_limit_is_refused_naming_the_record_step_and_limit(builtin, user, signed_in, limits):
    data, messages = over_every_limit()

    upload = io.BytesIO(data)
    upload.name = "results.jsonl"
    response = signed_in.post(reverse("submissions:upload"), {"file": upload})
    assert response.status_code == 400
    html = response.content.decode()
    for message in messages:
        assert escape(message) in html, message

    _, key = token_create(user=user)
    response = Client().post(reverse("submissions:api_create"), data=data, content_type="application/jsonl",
                             HTTP_AUTHORIZATION=f"Token {key}")
    assert response.status_code == 400
    problems = "\n".join(response.json()["problems"])
    for message in messages:
        assert message in problems, message
    assert Submission.objects.count() == 0


def test_the_upload_page_states_every_limit(signed_in, limits):
    html = signed_in.get(reverse("submissions:upload")).content.decode()
    table = html[html.index('id="trajectory-limits"'):]
    for what, value in [("Steps per trajectory", "6"), ("Per text field of a step", "2.0 KB"),
                        ("Per step, as JSON", "8.0 KB"), ("Files in one step", "3"), ("Diff lines in one step", "20"),
                        ("Diff lines in all steps of one trajectory", "50"), ("Per final patch", "1.0 MB"),
                        ("Lines per final patch", "30"), ("Per trajectory, as JSON", "10.0 MB")]:
        assert re.search(f"<td>{re.escape(what)}[^<]*</td><td class=\"num\">{re.escape(value)}</td>", table), what


def test_an_upload_at_every_limit_is_stored_and_its_replay_pages_render(builtin, signed_in, client, limits):
    steps = [
        step(1, observation="o" * 2048, thought="t" * 2048),
        step(2, files=[diff(5), diff(5), diff(10)]),  # three files, 20 lines
        step(3, files=[diff(20)]),
        step(4, files=[diff(10)]),  # 50 lines in all
        step(5, observation="Traceback (most recent call last):\nValueError: x\n[exit code 1; 0.1 s; cwd code]"),
        step(6, thought="t" * 2048, observation="o" * 2048, arguments={"content": "a" * 2000}, summary=""),
    ]
    # Step 6 exactly at the step limit.
    steps[5].summary = "s" * (8192 - step_bytes(steps[5]))
    assert step_bytes(steps[5]) == 8192
    data = jsonl(record(SAMPLE, 0, trajectory=trajectory(*steps, final_patch=diff(30)), final_patch=diff(30)))
    upload = io.BytesIO(data)
    upload.name = "results.jsonl"
    response = signed_in.post(reverse("submissions:upload"), {"file": upload})
    assert response.status_code == 302, re.findall(r"<li class=\"error\">(.*?)</li>", response.content.decode())

    attempt = Attempt.objects.get(run__submission__isnull=False)
    url = reverse("replay:attempt", args=[attempt.pk])
    first = client.get(url).content.decode()
    assert first.count('<li class="step') == 4 and "o" * 2048 in first
    assert 'href="?page=2#step-5" data-action="first-error"' in first and 'data-errors="5"' in first
    second = client.get(url, {"page": 2}).content.decode()
    assert second.count('<li class="step') == 2 and 'id="step-6" data-step="6"' in second
    assert 'href="#step-5" data-action="first-error"' in second
    assert client.get(url, {"page": 3}).status_code == 404


def test_the_upload_pages_example_answer_is_no_gold_result(builtin, signed_in):
    # An example answer copied from a real sample's gold would be a passing answer handed to every visitor.
    from runs.benchmark.scoring import flatten_numbers
    from runs.models import Experiment

    html = signed_in.get(reverse("submissions:upload")).content.decode()
    # Each gold number to 4 decimals (what an example would show), if that many digits are left to match.
    gold_numbers = {
        f"{round(value, 4)}" for gold in Experiment.objects.values_list("gold_result", flat=True)
        for value in flatten_numbers(gold).values() if isinstance(value, float)
    }
    shown = [number for number in gold_numbers if len(number.split(".")[-1]) == 4 and number in html]
    assert not shown, f"gold numbers on the upload page: {shown}"
