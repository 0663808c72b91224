"""Uploads carrying trajectories of other tools (runs.agents.foreign): converted on the way in,
stored in our format with their source recorded, shown by the replay; a malformed one refused
with the member, the format and the problem named."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.urls import reverse

from runs.submissions.problems import SubmissionInvalid
from runs.submissions.services import submission_create
from tests.agents.test_foreign import inspect_eval
from tests.submissions.helpers import OTHER_SAMPLE, SAMPLE, jsonl, record, zip_bytes

FIXTURES = Path(__file__).parent.parent / "agents" / "foreign_fixtures"


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def test_a_zip_of_foreign_trajectories_is_converted_stored_and_replayed(builtin, user, signed_in):
    inspect_sample = json.loads(fixture("inspect.json"))["samples"][0]
    members = {
        "results.jsonl": jsonl(
            record(SAMPLE, 0, trajectory_file="trajectories/upstream.txt"),
            record(SAMPLE, 1, trajectory_file="trajectories/swe.traj"),
            record(SAMPLE, 2, trajectory_file="trajectories/inspect.eval"),
            record(OTHER_SAMPLE, 0, trajectory_file="trajectories/mini.json"),
        ),
        "trajectories/upstream.txt": fixture("autoexperiment.txt"),
        "trajectories/swe.traj": fixture("swe_agent.traj"),
        "trajectories/inspect.eval": inspect_eval(inspect_sample, zstd_members=True),
        "trajectories/mini.json": fixture("mini_v11.traj.json"),
    }
    submission = submission_create(data=zip_bytes(members), filename="results.zip", uploader=user)
    attempts = {(a.sample.sample_id, a.index): a for a in submission.run.attempts.select_related("sample")}
    sources = {key: attempt.trajectory["header"]["versions"]["source_format"] for key, attempt in attempts.items()}
    assert sources == {
        (SAMPLE, 0): "autoexperiment-text-log", (SAMPLE, 1): "swe-agent", (SAMPLE, 2): "inspect-eval",
        (OTHER_SAMPLE, 0): "mini-swe-agent",
    }
    upstream = attempts[(SAMPLE, 0)]
    assert upstream.trajectory["header"]["sample_id"] == SAMPLE
    assert [step["arguments"] for step in upstream.trajectory["steps"]] == [
        {"command": "ls code"}, {"command": "python code/run.py", "timeout": 60}, {"file_name": "nope.py"},
    ]
    html = signed_in.get(reverse("replay:attempt", args=[upstream.pk])).content.decode()
    assert "I should look at the code first." in html and "python code/run.py" in html and "stats.py" in html
    html = signed_in.get(reverse("replay:attempt", args=[attempts[(SAMPLE, 1)].pk])).content.decode()
    assert "+x = 2" in html


def test_an_inline_foreign_trajectory_is_converted(builtin, user):
    inline = json.loads(fixture("mini_v1.traj.json"))
    submission = submission_create(data=jsonl(record(SAMPLE, 0, trajectory=inline)), filename="r.jsonl", uploader=user)
    stored = submission.run.attempts.get().trajectory
    assert [step["exit_code"] for step in stored["steps"]] == [0, 2]
    assert stored["header"]["versions"]["source_version"] == "mini-swe-agent-1"


@pytest.mark.parametrize(("member", "content", "message"), [
    ("trajectories/swe.traj", b'{"trajectory": [{"thought": "t"}], "info": {}}',
     "trajectories/swe.traj: trajectory: swe-agent: step 1: has neither 'action' nor 'observation'"),
    ("trajectories/log.txt", b"SYSTEM PROMPT\n#############\nStep: 0\n\nThought:\nx\n\nAction:\nls\n\nObservation:\ny\n",
     "trajectories/log.txt: trajectory: autoexperiment-text-log: step 1 (line 3): the action is not a tool call"),
    ("trajectories/mini.json", b'{"trajectory_format": "mini-swe-agent-1", "messages": [{"content": "x"}]}',
     "trajectories/mini.json: trajectory: mini-swe-agent: message 1: 'role' is missing"),
])
def test_a_malformed_foreign_member_is_refused_naming_member_format_and_problem(builtin, user, member, content, message):
    members = {"results.jsonl": jsonl(record(SAMPLE, 0, trajectory_file=member)), member: content}
    with pytest.raises(SubmissionInvalid) as raised:
        submission_create(data=zip_bytes(members), filename="results.zip", uploader=user)
    assert any(text.startswith(message) for text in raised.value.messages()), raised.value.messages()


def test_the_upload_page_documents_each_format_with_an_example_that_converts(signed_in):
    from django.utils.html import escape

    from runs.agents.foreign import FORMATS, detect_and_convert

    html = signed_in.get(reverse("submissions:upload")).content.decode()
    assert 'id="foreign-trajectories"' in html
    for kind in FORMATS:
        assert escape(kind.title) in html and escape(kind.example) in html
        if kind.name != "inspect-eval":  # that one describes a zip; the others are the file itself
            converted = detect_and_convert(kind.example.encode(), "example")
            assert converted.source_format == kind.name and converted.steps


def test_import_trajectory_prints_a_summary_and_refuses_a_malformed_file(tmp_path):
    from io import StringIO

    from django.core.management import CommandError, call_command

    out = StringIO()
    call_command("import_trajectory", str(FIXTURES / "swe_agent.traj"), "--print", stdout=out)
    assert out.getvalue().strip() == (
        "swe_agent.traj: swe-agent 1.0.1, 2 steps, 0 with errors, 12,000 input and 800 output tokens, cost $0.3000"
    )
    bad = tmp_path / "bad.traj.json"
    bad.write_text('{"trajectory_format": "mini-swe-agent-1", "messages": "none"}')
    with pytest.raises(CommandError, match=r"bad.traj.json: mini-swe-agent: 'messages' must be a list"):
        call_command("import_trajectory", str(bad))


def test_import_trajectory_into_an_attempt_of_a_submission(builtin, user):
    from io import StringIO

    from django.core.management import CommandError, call_command

    submission = submission_create(data=jsonl(record(SAMPLE, 0)), filename="r.jsonl", uploader=user)
    out = StringIO()
    call_command("import_trajectory", str(FIXTURES / "autoexperiment.txt"), "--into", str(submission.pk),
                 "--sample", SAMPLE, "--index", "0", stdout=out)
    stored = submission.run.attempts.get().trajectory
    assert [step["tool"] for step in stored["steps"]] == ["execute_bash", "execute_bash", "read_file"]
    assert stored["header"]["sample_id"] == SAMPLE
    with pytest.raises(CommandError, match=r"has no attempt 1 at sample"):
        call_command("import_trajectory", str(FIXTURES / "autoexperiment.txt"), "--into", str(submission.pk),
                     "--sample", SAMPLE, "--index", "1")
