"""Uploads shaped to crash a request: an answer nested 500 deep, an integer of 5,000 digits (past
Python's int-string limit), a trajectory nested deeper than the interpreter can parse. Each is a
400 that names the line and the field, through the upload page and the API, and stores nothing.
(A body sent chunked is tested against a real gunicorn in test_chunked_bodies.py.)
"""
from __future__ import annotations

import io
import json

import pytest
from django.test import Client

from runs.benchmark.scoring import flatten_numbers
from runs.submissions.json_limits import MAX_DEPTH, MAX_INT_DIGITS
from runs.submissions.problems import SubmissionInvalid
from runs.submissions.services import submission_create, token_create
from tests.submissions.helpers import jsonl, record, zip_bytes

API = "/api/submissions/"
UPLOAD = "/submissions/upload/"
HUGE = "9" * 5000


def nested(depth: int, leaf=0.5):
    value = leaf
    for _ in range(depth):
        value = {"a": value}
    return value


def deep_answer_line() -> str:
    return json.dumps(record(final_answer={"Experiment 1": nested(500)}))


def huge_integer_line(field: str) -> str:
    if field == "final_answer":
        return json.dumps(record(final_answer={"Experiment 1": {"ece": 0}})).replace('"ece": 0', f'"ece": {HUGE}')
    return json.dumps(record()).replace(f'"{field}": 100', f'"{field}": {HUGE}')


# (id, record line, the problem's text as listed: line 2 is the record, line 1 the header)
CRASHING = [
    ("answer-nested-500-deep", deep_answer_line,
     f"line 2: final_answer: nested more than {MAX_DEPTH} levels deep; at most {MAX_DEPTH} levels are accepted "
     "(at Experiment 1 > a > a > a > ...)"),
    ("integer-of-5000-digits-in-a-count", lambda: huge_integer_line("input_tokens"),
     f"line 2: input_tokens: an integer of 5,000 digits; integers of at most {MAX_INT_DIGITS:,} digits are accepted"),
    ("integer-of-5000-digits-in-the-answer", lambda: huge_integer_line("final_answer"),
     f"line 2: final_answer: an integer of 5,000 digits; integers of at most {MAX_INT_DIGITS:,} digits are accepted "
     "(at Experiment 1 > ece)"),
    ("trajectory-deeper-than-python-parses", lambda: json.dumps(record())[:-1] + ', "trajectory": ' + "[" * 100_000 + "]" * 100_000 + "}",
     f"line 2: nested more than {MAX_DEPTH} levels deep; at most {MAX_DEPTH} levels are accepted"),
]


@pytest.mark.parametrize(("line", "problem"), [case[1:] for case in CRASHING], ids=[case[0] for case in CRASHING])
def test_refused_through_the_api_and_the_upload_page(builtin, user, signed_in, snapshot, line, problem):
    data = jsonl(line())
    _, key = token_create(user=user, name="ci")
    response = Client().post(API, data=data, content_type="application/jsonl", HTTP_AUTHORIZATION=f"Token {key}")
    assert response.status_code == 400, response.content[:500]
    body = response.json()
    assert body["problems"] == [problem]
    assert body["error"] == "the submission was not stored: 1 problem(s) found"

    upload = io.BytesIO(data)
    upload.name = "results.jsonl"
    response = signed_in.post(UPLOAD, {"file": upload})
    assert response.status_code == 400
    assert response.context["problems"] == ["The file was not stored: 1 problem(s) found.", problem]
    assert problem.replace("'", "&#x27;").replace(">", "&gt;") in response.content.decode()
    snapshot.assert_unchanged()


def test_a_zip_member_is_checked_the_same_way(builtin, user):
    trajectory = {"format": "autoexperiment.trajectory/1", "header": {}, "steps": [{"arguments": nested(200)}]}
    data = zip_bytes({
        "results.jsonl": jsonl(record(trajectory_file="trajectories/t.json")),
        "trajectories/t.json": json.dumps(trajectory),
    })
    with pytest.raises(SubmissionInvalid) as raised:
        submission_create(data=data, filename="r.zip", uploader=user)
    assert raised.value.messages() == [
        f"trajectories/t.json: trajectory: steps: nested more than {MAX_DEPTH} levels deep; at most {MAX_DEPTH} levels "
        "are accepted (at [0] > arguments > a > a > ...)"
    ]


def test_limits_leave_honest_values_alone(builtin, user):
    """64 levels and 1,000 digits pass; digits inside strings are text, not integers."""
    answer = {"Experiment 1": nested(MAX_DEPTH - 2), "note": HUGE, "count": int("9" * MAX_INT_DIGITS)}
    submission = submission_create(data=jsonl(record(final_answer=answer)), filename="r.jsonl", uploader=user)
    assert submission.record_count == 1


def test_flattening_an_answer_does_not_recurse():
    deep = 1.0
    for _ in range(5000):
        deep = [deep]
    assert flatten_numbers({"x": deep}) == {"x" + "[0]" * 5000: 1.0}
