"""Malformed uploads: each is rejected with a message saying what is wrong and where (line and
field, or zip member), and nothing is stored or changed, through the service, the upload page and
the API alike."""
from __future__ import annotations

import io
import json
import struct
import zipfile

import pytest
from django.test import Client
from django.utils.html import escape

from runs.models import Experiment, Sample
from runs.submissions.problems import SubmissionInvalid, SubmissionTooLarge
from runs.submissions.services import submission_create, token_create
from tests.submissions import helpers
from tests.submissions.helpers import HEADER, SAMPLE, jsonl, record, zip_bytes

OUTSIDE_PATCH = (
    "--- a/code/../escape.py\n"
    "+++ b/code/../escape.py\n"
    "@@ -0,0 +1 @@\n"
    "+print('out')\n"
)
OTHER_TOP_PATCH = (
    "--- a/task.json\n"
    "+++ b/task.json\n"
    "@@ -1 +1 @@\n"
    "-{}\n"
    "+{\"x\": 1}\n"
)


def _forged_size_zip() -> bytes:
    """A zip whose results.jsonl declares 10 bytes but holds 200 KB (sizes patched in both headers)."""
    content = jsonl(*[record(index=i) for i in range(1)]) + b" " * 200_000
    data = bytearray(zip_bytes({"results.jsonl": content}))
    # local header: uncompressed size at offset 22; central directory entry: at offset 24.
    struct.pack_into("<I", data, 22, 10)
    central = data.find(b"PK\x01\x02")
    struct.pack_into("<I", data, central + 24, 10)
    return bytes(data)


def _header(**changes) -> dict:
    header = dict(HEADER)
    for key, value in changes.items():
        if value is _DROP:
            header.pop(key)
        else:
            header[key] = value
    return header


_DROP = object()


def _trajectory_step(**fields) -> dict:
    """A valid trajectory whose one step has `fields` set as given (any JSON value)."""
    data = helpers.trajectory()
    data["steps"][0].update(fields)
    return data

# (id, file bytes or a callable returning them, filename, expected texts, settings)
CASES = [
    ("bad-json", lambda: jsonl(record(), '{"sample_id": "temperature-scaling_4", "attempt_index": 1,'), "r.jsonl",
     ["line 3: invalid JSON: Expecting property name enclosed in double quotes"], {}),
    ("missing-header", lambda: jsonl(record(), header=None), "r.jsonl",
     ["line 1: type: the header is missing"], {}),
    ("header-not-an-object", lambda: b'["header", "builtin"]\n' + json.dumps(record()).encode() + b"\n", "r.jsonl",
     ["line 1: header: the header must be a JSON object, got a list"], {}),
    ("header-missing-contact", lambda: jsonl(record(), header=_header(contact=_DROP)), "r.jsonl",
     ["line 1: contact: required field is missing"], {}),
    ("header-model-wrong-type", lambda: jsonl(record(), header=_header(model=5)), "r.jsonl",
     ["line 1: model: must be a string, got an integer (5)"], {}),
    ("header-unknown-field", lambda: jsonl(record(), header=_header(modle="x")), "r.jsonl",
     ["line 1: modle: unknown header field"], {}),
    ("header-bad-context", lambda: jsonl(record(), header=_header(context="partial")), "r.jsonl",
     ['line 1: context: must be one of none, full, oracle, got a string ("partial")'], {}),
    ("string-index", lambda: jsonl(record(attempt_index="0")), "r.jsonl",
     ['line 2: attempt_index: must be an integer, got a string ("0")'], {}),
    ("bool-tokens", lambda: jsonl(record(input_tokens=True)), "r.jsonl",
     ["line 2: input_tokens: must be an integer, got a boolean (true)"], {}),
    ("negative-cost", lambda: jsonl(record(cost=-0.5)), "r.jsonl",
     ["line 2: cost: must not be negative, got -0.5"], {}),
    ("nan-seconds", lambda: jsonl(json.dumps(record()).replace('"seconds": 12.5', '"seconds": NaN')), "r.jsonl",
     ["line 2: seconds: must be a finite number, got NaN"], {}),
    ("negative-index", lambda: jsonl(record(index=-1)), "r.jsonl",
     ["line 2: attempt_index: must be at least 0, got -1"], {}),
    ("answer-a-list", lambda: jsonl(record(final_answer=[0.1])), "r.jsonl",
     ["line 2: final_answer: must be an object, a string or null, got a list"], {}),
    ("missing-field", lambda: jsonl({k: v for k, v in record().items() if k != "output_tokens"}), "r.jsonl",
     ["line 2: output_tokens: required field is missing"], {}),
    ("unknown-sample", lambda: jsonl(record(), record(sample_id="no-such-paper_0")), "r.jsonl",
     ["line 3: sample_id: no sample 'no-such-paper_0' in suite 'builtin'"], {}),
    ("duplicate-attempt", lambda: jsonl(record(index=0), record(index=1), record(index=0)), "r.jsonl",
     ["line 4: attempt_index: duplicate attempt: sample 'temperature-scaling_4' attempt 0 is already given on line 2"], {}),
    ("gap-in-indexes", lambda: jsonl(record(index=0), record(index=2)), "r.jsonl",
     ["line 3: attempt_index: sample 'temperature-scaling_4' has attempts 0, 2 but not 1"], {}),
    ("unknown-field", lambda: jsonl(record(final_anwser={"x": 1})), "r.jsonl",
     ["line 2: final_anwser: unknown record field"], {}),
    ("duplicate-key", lambda: jsonl(json.dumps(record())[:-1] + ', "cost": 0.02}'), "r.jsonl",
     ["line 2: cost: the key appears twice in one object"], {}),
    ("oversized-file", lambda: jsonl(record(final_answer="x" * 3000)), "r.jsonl",
     ["larger than the limit of 2.0 KB (2,048 bytes)"], {"SUBMISSION_MAX_BYTES": 2048}),
    ("oversized-patch", lambda: jsonl(record(final_patch="--- a/code/m.py\n+++ b/code/m.py\n@@ -1 +1 @@\n-a\n+" + "b" * 600 + "\n")),
     "r.jsonl", ["line 2: final_patch: is ", "one patch may hold at most 512 bytes"], {"SUBMISSION_MAX_PATCH_BYTES": 512}),
    ("patch-escapes-code", lambda: jsonl(record(final_patch=OUTSIDE_PATCH)), "r.jsonl",
     ['line 2: final_patch: line 1: "--- a/code/../escape.py": a/code/../escape.py has a "." or ".." component'], {}),
    ("patch-outside-code", lambda: jsonl(record(final_patch=OTHER_TOP_PATCH)), "r.jsonl",
     ['line 2: final_patch: line 1: "--- a/task.json": a/task.json is not a file under a/code/'], {}),
    ("patch-not-a-diff", lambda: jsonl(record(final_patch="def f():\n    return 1\n")), "r.jsonl",
     ['line 2: final_patch: line 1: "def f():": not a unified diff'], {}),
    ("invalid-trajectory", lambda: jsonl(record(trajectory={"steps": []})), "r.jsonl",
     ["line 2: trajectory: not a valid trajectory: not an AutoExperiment trajectory"], {}),
    # The replay marks failed steps by these fields, so they hold what they say or nothing.
    ("trajectory-exit-code-as-text", lambda: jsonl(record(trajectory=_trajectory_step(exit_code="1"))), "r.jsonl",
     ['line 2: trajectory: not a valid trajectory: step 1: exit_code must be an integer or null, got "1"'], {}),
    ("trajectory-exit-code-not-whole", lambda: jsonl(record(trajectory=_trajectory_step(exit_code=1.5))), "r.jsonl",
     ["line 2: trajectory: not a valid trajectory: step 1: exit_code must be an integer or null, got 1.5"], {}),
    ("trajectory-exit-code-out-of-range", lambda: jsonl(record(trajectory=_trajectory_step(exit_code=2**40))), "r.jsonl",
     [f"line 2: trajectory: not a valid trajectory: step 1: exit_code must be an integer or null, got {2**40}"], {}),
    ("trajectory-timed-out-as-text", lambda: jsonl(record(trajectory=_trajectory_step(timed_out="no"))), "r.jsonl",
     ['line 2: trajectory: not a valid trajectory: step 1: timed_out must be true or false, got "no"'], {}),
    ("trajectory-of-other-sample", lambda: jsonl(record(trajectory=helpers.trajectory(sample_id="adam-bias-correction_0"))),
     "r.jsonl", ["line 2: trajectory: belongs to sample 'adam-bias-correction_0'"], {}),
    ("trajectory-file-outside-zip", lambda: jsonl(record(trajectory_file="trajectories/a.json")), "r.jsonl",
     ["line 2: trajectory_file: only a zip upload can carry trajectory files"], {}),
    ("invalid-utf8", lambda: jsonl(record()) + b'{"sample_id": "\xff\xfe"}\n', "r.jsonl",
     ["line 3: not valid UTF-8"], {}),
    ("unpaired-surrogate", lambda: jsonl(json.dumps(record()).replace('"final_answer": null', '"final_answer": "a\\ud800b"')), "r.jsonl",
     ["line 2: contains an unpaired surrogate escape (\\ud800)"], {}),
    ("second-header", lambda: jsonl(record(), HEADER), "r.jsonl",
     ["line 3: type: a second header"], {}),
    ("zip-dotdot", lambda: zip_bytes({"results.jsonl": jsonl(record()), "../evil.json": b"{}"}), "r.zip",
     ["../evil.json: the path contains '..' and would escape the archive's root"], {}),
    ("zip-dotdot-inside", lambda: zip_bytes({"results.jsonl": jsonl(record()), "trajectories/../../x.json": b"{}"}), "r.zip",
     ["trajectories/../../x.json: the path contains '..'"], {}),
    ("zip-absolute", lambda: zip_bytes({"results.jsonl": jsonl(record()), "/etc/cron.d/evil": b"x"}), "r.zip",
     ["/etc/cron.d/evil: absolute path"], {}),
    ("zip-symlink", lambda: zip_bytes({"results.jsonl": jsonl(record())}, symlinks={"trajectories/t.json": "/etc/passwd"}), "r.zip",
     ["trajectories/t.json: symbolic links are not accepted"], {}),
    ("zip-bomb-declared", lambda: zip_bytes({"results.jsonl": jsonl(record()), "trajectories/big.json": b"0" * 3_000_000}), "r.zip",
     ["zip: the members declare 2.9 MB (3,000,", "(is this a zip bomb?)"], {"SUBMISSION_MAX_UNCOMPRESSED_BYTES": 1_000_000}),
    ("zip-member-too-large", lambda: zip_bytes({"results.jsonl": jsonl(record()) + b" " * 300_000}), "r.zip",
     ["results.jsonl: declares 293.", "one member may hold at most 200.0 KB"], {"SUBMISSION_MAX_BYTES": 200 * 1024}),
    ("zip-forged-size", _forged_size_zip, "r.zip",
     ["results.jsonl: cannot be read: Bad CRC-32"], {}),
    ("zip-without-results", lambda: zip_bytes({"trajectories/a.json": json.dumps(helpers.trajectory())}), "r.zip",
     ["results.jsonl: missing: the archive must contain exactly one results.jsonl at its root"], {}),
    ("zip-nested-results", lambda: zip_bytes({"out/results.jsonl": jsonl(record())}), "r.zip",
     ["out/results.jsonl: unexpected member", "(results.jsonl must be at the archive's root)"], {}),
    ("zip-missing-trajectory-file", lambda: zip_bytes({"results.jsonl": jsonl(record(trajectory_file="trajectories/a.json"))}),
     "r.zip", ["results.jsonl: line 2: trajectory_file: names 'trajectories/a.json', which is not in the archive"], {}),
    ("zip-unreferenced-trajectory", lambda: zip_bytes({"results.jsonl": jsonl(record()), "trajectories/a.json": json.dumps(helpers.trajectory())}),
     "r.zip", ["trajectories/a.json: not referenced by any record's trajectory_file"], {}),
    # One small member named by every record would be parsed and stored once per record.
    ("zip-trajectory-file-named-twice", lambda: zip_bytes({
        "results.jsonl": jsonl(record(SAMPLE, 0, trajectory_file="trajectories/a.json"),
                               record(SAMPLE, 1, trajectory_file="trajectories/a.json")),
        "trajectories/a.json": json.dumps(helpers.trajectory(sample_id="")),
    }), "r.zip", ["results.jsonl: line 3: trajectory_file: names 'trajectories/a.json', which line 2 names already"], {}),
    ("zip-bad-trajectory-file", lambda: zip_bytes({"results.jsonl": jsonl(record(trajectory_file="trajectories/a.json")), "trajectories/a.json": b'{"format": 1'}),
     "r.zip", ["trajectories/a.json: trajectory: invalid JSON"], {}),
    ("not-a-zip", lambda: b"PK\x03\x04 this is not really a zip", "r.zip",
     ["zip: not a valid zip archive"], {}),
    ("empty-file", lambda: b"", "r.jsonl", ["the file is empty"], {}),
    ("blank-file", lambda: b"\n \n\n", "r.jsonl", ["the file is empty"], {}),
    ("header-only", lambda: jsonl(), "r.jsonl", ["r.jsonl: the file has no records after its header"], {}),
    ("unknown-suite", lambda: jsonl(record(), header=_header(suite="nosuch")), "r.jsonl",
     ["line 1: suite: no suite named 'nosuch' on this site (imported suites: builtin)"], {}),
]


def _data(case):
    return case[1]() if callable(case[1]) else case[1]


def _apply(settings, overrides):
    for key, value in overrides.items():
        setattr(settings, key, value)


@pytest.mark.parametrize("case", CASES, ids=[case[0] for case in CASES])
def test_rejected_with_line_and_field_and_nothing_stored(case, snapshot, user, signed_in, settings):
    """The same file through the service, the upload page and the API."""
    name, _, filename, expected, overrides = case
    _apply(settings, overrides)
    data = _data(case)

    with pytest.raises((SubmissionInvalid, SubmissionTooLarge)) as raised:
        submission_create(data=data, filename=filename, uploader=user)
    error = raised.value
    text = "\n".join(error.messages()) if isinstance(error, SubmissionInvalid) else str(error)
    for fragment in expected:
        assert fragment in text, f"service, {name}: {fragment!r} not in:\n{text}"
    snapshot.assert_unchanged()

    upload = io.BytesIO(data)
    upload.name = filename
    response = signed_in.post("/submissions/upload/", {"file": upload})
    assert response.status_code in (400, 413), name
    html = response.content.decode()
    assert "Nothing was stored" in html
    for fragment in expected:
        assert escape(fragment) in html, f"upload page, {name}: {fragment!r} not on the page"
    snapshot.assert_unchanged()

    _, key = token_create(user=user)
    response = Client().post(
        "/api/submissions/", data=data, content_type="application/octet-stream",
        HTTP_AUTHORIZATION=f"Token {key}", HTTP_X_FILENAME=filename,
    )
    body = response.json()
    if isinstance(error, SubmissionTooLarge):
        assert response.status_code == 413
        assert body["limit_bytes"] == settings.SUBMISSION_MAX_BYTES
        assert expected[0] in body["error"]
    else:
        assert response.status_code == 400, body
        text = "\n".join(body["problems"])
        for fragment in expected:
            assert fragment in text, f"API, {name}: {fragment!r} not in:\n{text}"
        assert body["problem_count"] == error.count
        assert body["details"][0]["text"] == body["problems"][0]
    snapshot.assert_unchanged()


def test_every_problem_is_reported_at_once(snapshot, user):
    data = jsonl(
        record(index=0, cost=-1),
        record(index="1", input_tokens=1.5),
        "{not json}",
        record(sample_id="nope_1", index=0, seconds=float("inf")),
        record(index=0),
    )
    with pytest.raises(SubmissionInvalid) as raised:
        submission_create(data=data, filename="r.jsonl", uploader=user)
    texts = raised.value.messages()
    assert "line 2: cost: must not be negative, got -1" in texts
    assert 'line 3: attempt_index: must be an integer, got a string ("1")' in texts
    assert "line 3: input_tokens: must be an integer, got a number (1.5)" in texts
    assert any(text.startswith("line 4: invalid JSON") for text in texts)
    assert "line 5: seconds: must be a finite number, got Infinity" in texts
    assert any(text.startswith("line 6: attempt_index: duplicate attempt") and "line 2" in text for text in texts)
    snapshot.assert_unchanged()


def test_problem_list_is_capped_with_a_count_of_the_rest(snapshot, user, settings):
    settings.SUBMISSION_MAX_PROBLEMS = 5
    data = jsonl(*[record(index=i, cost=-1) for i in range(12)])
    with pytest.raises(SubmissionInvalid) as raised:
        submission_create(data=data, filename="r.jsonl", uploader=user)
    texts = raised.value.messages()
    assert len(texts) == 6
    assert texts[-1].startswith("... and 7 more problem(s)")
    snapshot.assert_unchanged()


def test_sample_without_gold_cannot_be_scored(snapshot, user):
    sample = Sample.objects.get(sample_id=SAMPLE)
    experiment = Experiment.objects.filter(paper=sample.paper, dependencies__in=sample.functions.all()).first()
    Experiment.objects.filter(pk=experiment.pk).update(gold_result=None)
    with pytest.raises(SubmissionInvalid) as raised:
        submission_create(data=jsonl(record()), filename="r.jsonl", uploader=user)
    assert any(
        text.startswith(f"line 2: sample_id: sample '{SAMPLE}' cannot be scored: experiment(s) {experiment.exp_id}")
        and "no gold result" in text
        for text in raised.value.messages()
    )
    snapshot.assert_unchanged()


def test_oversized_multipart_upload_is_stopped_with_a_clear_message(snapshot, signed_in, settings):
    settings.SUBMISSION_MAX_BYTES = 4096
    upload = io.BytesIO(b"x" * 200_000)
    upload.name = "big.jsonl"
    response = signed_in.post("/submissions/upload/", {"file": upload})
    assert response.status_code == 413
    html = response.content.decode()
    assert "larger than the limit of 4.0 KB (4,096 bytes)" in html
    assert "nothing was stored" in html
    snapshot.assert_unchanged()


def test_api_rejects_a_body_over_the_default_limit_before_reading_it(snapshot, user):
    _, key = token_create(user=user)
    body = b"{" + b" " * (20 * 2**20) + b"}"
    response = Client().post("/api/submissions/", data=body, content_type="application/jsonl", HTTP_AUTHORIZATION=f"Token {key}")
    assert response.status_code == 413
    assert response.json()["limit_bytes"] == 20 * 2**20
    assert "20.0 MB (20,971,520 bytes)" in response.json()["error"]
    snapshot.assert_unchanged()


def test_zip_with_too_many_members(snapshot, user, settings):
    settings.SUBMISSION_MAX_ZIP_MEMBERS = 3
    members = {"results.jsonl": jsonl(record())} | {f"trajectories/{i}.json": b"{}" for i in range(5)}
    with pytest.raises(SubmissionInvalid) as raised:
        submission_create(data=zip_bytes(members), filename="r.zip", uploader=user)
    assert len(raised.value.messages()) == 1
    assert raised.value.messages()[0].startswith("zip: the archive has 6 members (")
    assert raised.value.messages()[0].endswith("bytes of directory); at most 3 are accepted")
    snapshot.assert_unchanged()


def test_zip_that_is_empty(snapshot, user):
    buffer = io.BytesIO()
    zipfile.ZipFile(buffer, "w").close()
    with pytest.raises(SubmissionInvalid) as raised:
        submission_create(data=buffer.getvalue(), filename="r.zip", uploader=user)
    assert raised.value.messages() == ["results.jsonl: missing: the archive must contain exactly one results.jsonl at its root"]
    snapshot.assert_unchanged()


def test_zip64_directory_is_refused_before_parsing(snapshot, user):
    data = bytearray(zip_bytes({"results.jsonl": jsonl(record())}))
    end = data.rfind(b"PK\x05\x06")
    struct.pack_into("<HH", data, end + 8, 0xFFFF, 0xFFFF)
    with pytest.raises(SubmissionInvalid) as raised:
        submission_create(data=bytes(data), filename="r.zip", uploader=user)
    assert raised.value.messages() == ["zip: ZIP64 archives are not accepted (they are for more members or bytes than a submission may hold)"]
    snapshot.assert_unchanged()
