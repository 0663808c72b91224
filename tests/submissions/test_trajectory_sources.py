"""The original file of a trajectory converted from another tool's (runs.models.TrajectorySource):
stored byte for byte with the upload, downloadable as an attachment by whoever may see the
attempt's replay, linked from the replay page; none for trajectories in our own format."""
from __future__ import annotations

import hashlib
import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from runs.evaluation.services import runs_set_hidden
from runs.models import TrajectorySource
from runs.submissions.services import submission_create
from tests.replay.factories import make_user
from tests.submissions.helpers import OTHER_SAMPLE, SAMPLE, jsonl, record, trajectory, zip_bytes
from tests.submissions.test_foreign_uploads import FIXTURES, fixture


def attempts_by_key(submission):
    return {(a.sample.sample_id, a.index): a for a in submission.run.attempts.select_related("sample")}


def test_a_zipped_foreign_trajectory_is_kept_byte_for_byte_and_downloadable_by_a_visitor(builtin, user):
    mini = fixture("mini_v11.traj.json")
    swe = fixture("swe_agent.traj")
    members = {
        "results.jsonl": jsonl(
            record(SAMPLE, 0, trajectory_file="trajectories/mini.json"),
            record(SAMPLE, 1, trajectory_file="trajectories/swe.traj"),
            record(OTHER_SAMPLE, 0),
        ),
        "trajectories/mini.json": mini,
        "trajectories/swe.traj": swe,
    }
    attempts = attempts_by_key(submission_create(data=zip_bytes(members), filename="results.zip", uploader=user))
    source = TrajectorySource.objects.get(attempt=attempts[(SAMPLE, 0)])
    assert (source.filename, source.source_format, source.source_version) == ("mini.json", "mini-swe-agent", "mini-swe-agent-1.1")
    assert (source.sha256, source.size) == (hashlib.sha256(mini).hexdigest(), len(mini))
    assert bytes(TrajectorySource.objects.get(attempt=attempts[(SAMPLE, 1)]).content) == swe
    assert not TrajectorySource.objects.filter(attempt=attempts[(OTHER_SAMPLE, 0)]).exists()

    visitor = Client()
    response = visitor.get(reverse("replay:source", args=[attempts[(SAMPLE, 0)].pk]))
    assert response.status_code == 200
    assert hashlib.sha256(response.content).hexdigest() == hashlib.sha256(mini).hexdigest()
    assert response["Content-Type"] == "application/octet-stream"
    assert response["Content-Disposition"] == f'attachment; filename="attempt-{attempts[(SAMPLE, 0)].pk}-mini.json"'
    assert response["X-Content-Type-Options"] == "nosniff"
    html = visitor.get(reverse("replay:attempt", args=[attempts[(SAMPLE, 0)].pk])).content.decode()
    assert "Original trajectory (mini-swe-agent 1.1)" in html
    assert f'href="{reverse("replay:source", args=[attempts[(SAMPLE, 0)].pk])}" download>download</a>' in html
    # An attempt without one: no link, and the download is 404.
    plain = attempts[(OTHER_SAMPLE, 0)].pk
    assert "Original trajectory" not in visitor.get(reverse("replay:attempt", args=[plain])).content.decode()
    assert visitor.get(reverse("replay:source", args=[plain])).status_code == 404


def test_a_hidden_runs_source_is_downloadable_by_its_owner_and_staff_only(builtin, user):
    members = {
        "results.jsonl": jsonl(record(SAMPLE, 0, trajectory_file="trajectories/run.traj")),
        "trajectories/run.traj": fixture("swe_agent.traj"),
    }
    submission = submission_create(data=zip_bytes(members), filename="results.zip", uploader=user)
    runs_set_hidden(runs=[submission.run], hidden=True)
    url = reverse("replay:source", args=[submission.run.attempts.get().pk])
    client = Client()
    assert client.get(url).status_code == 404
    client.force_login(make_user())
    assert client.get(url).status_code == 404
    client.force_login(user)
    assert client.get(url).status_code == 200
    client.force_login(make_user(is_staff=True))
    assert client.get(url).content == fixture("swe_agent.traj")


def test_on_a_private_suite_the_source_goes_to_its_uploader_and_staff_only(builtin, user):
    """The file is kept as uploaded, so it may quote gold lines the replay withholds (runs.visibility.gold_access)."""
    from runs.models import Suite

    Suite.objects.filter(pk=builtin.pk).update(gold_public=False)
    members = {"results.jsonl": jsonl(record(SAMPLE, 0, trajectory_file="trajectories/run.traj")),
               "trajectories/run.traj": fixture("swe_agent.traj")}
    attempt = submission_create(data=zip_bytes(members), filename="results.zip", uploader=user).run.attempts.get()
    url, page = reverse("replay:source", args=[attempt.pk]), reverse("replay:attempt", args=[attempt.pk])
    client = Client()
    assert client.get(url).status_code == 403 and "Original trajectory" not in client.get(page).content.decode()
    client.force_login(make_user())
    assert client.get(url).status_code == 403
    client.force_login(user)
    assert client.get(url).content == fixture("swe_agent.traj")
    client.force_login(make_user(is_staff=True))
    assert client.get(url).status_code == 200 and "Original trajectory" in client.get(page).content.decode()


def test_an_inline_foreign_trajectory_is_kept_and_ours_keeps_none(builtin, user):
    inline = json.loads(fixture("mini_v1.traj.json"))
    ours = trajectory()
    data = jsonl(record(SAMPLE, 0, trajectory=inline), record(SAMPLE, 1, trajectory=ours))
    attempts = attempts_by_key(submission_create(data=data, filename="r.jsonl", uploader=user))
    source = TrajectorySource.objects.get(attempt=attempts[(SAMPLE, 0)])
    assert json.loads(bytes(source.content)) == inline
    assert source.filename.endswith(".json") and source.source_version == "mini-swe-agent-1"
    assert attempts[(SAMPLE, 1)].trajectory["header"]["agent"] == "external-react"
    assert not TrajectorySource.objects.filter(attempt=attempts[(SAMPLE, 1)]).exists()


def test_import_trajectory_into_an_attempt_keeps_the_file_in_place_of_the_former(builtin, user):
    members = {
        "results.jsonl": jsonl(record(SAMPLE, 0, trajectory_file="trajectories/run.traj")),
        "trajectories/run.traj": fixture("swe_agent.traj"),
    }
    submission = submission_create(data=zip_bytes(members), filename="results.zip", uploader=user)
    call_command("import_trajectory", str(FIXTURES / "autoexperiment.txt"), "--into", str(submission.pk),
                 "--sample", SAMPLE, "--index", "0", stdout=StringIO())
    source = TrajectorySource.objects.get()
    assert (source.filename, source.source_format) == ("autoexperiment.txt", "autoexperiment-text-log")
    assert bytes(source.content) == fixture("autoexperiment.txt")


@pytest.mark.parametrize(("stored_name", "sent_name"), [
    ('a"b\r\nX-Evil: 1.traj', "a_b_X-Evil_1.traj"),
    ("../../etc/passwd", "etc_passwd"),
    ("données é.traj", "donn_es_.traj"),
    ("...", "trajectory"),
])
def test_the_download_name_is_made_safe(builtin, user, stored_name, sent_name):
    members = {
        "results.jsonl": jsonl(record(SAMPLE, 0, trajectory_file="trajectories/run.traj")),
        "trajectories/run.traj": fixture("swe_agent.traj"),
    }
    attempt = submission_create(data=zip_bytes(members), filename="results.zip", uploader=user).run.attempts.get()
    TrajectorySource.objects.filter(attempt=attempt).update(filename=stored_name)
    response = Client().get(reverse("replay:source", args=[attempt.pk]))
    assert response["Content-Disposition"] == f'attachment; filename="attempt-{attempt.pk}-{sent_name}"'
