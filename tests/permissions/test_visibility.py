"""Hidden runs and hidden submissions appear nowhere for anyone but their owner and staff: queue,
run pages, replay pages and their compare lists, the compare page, the leaderboard's pages and
exports, the API. The leaderboard counts public runs only, whoever looks."""
from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from runs.submissions.services import token_create
from tests.permissions.helpers import HIDDEN_DESCRIPTION, HIDDEN_MODEL, SUBMITTED_MODEL

OUTSIDERS = ["anonymous", "stranger"]
INSIDERS = ["owner", "staff"]
SECRETS = (HIDDEN_MODEL, SUBMITTED_MODEL, HIDDEN_DESCRIPTION)


def _no_secret(text: str) -> None:
    for secret in SECRETS:
        assert secret not in text


def _hidden_runs(world):
    return [world.hidden_run, world.hidden_solo_run, world.submission.run]


def _hidden_attempts(world):
    return [world.hidden_attempt, world.hidden_solo_attempt, world.submission_attempt]


def _csv(response) -> list[dict]:
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(response.getvalue().decode())))  # streamed or not


@pytest.mark.parametrize("who", OUTSIDERS)
def test_run_and_queue_pages_hide_them_from_outsiders(people, world, who):
    client = people.client(who)
    queue = client.get(reverse("runs:queue"))
    if who == "anonymous":
        assert queue.status_code == 302 and "/accounts/login/" in queue["Location"]
    else:
        html = queue.content.decode()
        assert f'id="run-{world.public_run.pk}"' in html
        for run in _hidden_runs(world):
            assert f'id="run-{run.pk}"' not in html
        _no_secret(html)
    for run in _hidden_runs(world):
        response = client.get(reverse("runs:run_detail", args=[run.pk]))
        assert response.status_code == (302 if who == "anonymous" else 404)
        _no_secret(response.content.decode())


@pytest.mark.parametrize("who", INSIDERS)
def test_owner_and_staff_see_them_on_queue_run_and_replay_pages(people, world, who):
    client = people.client(who)
    queue = client.get(reverse("runs:queue")).content.decode()
    for run in _hidden_runs(world):
        assert f'id="run-{run.pk}"' in queue
    run_page = client.get(reverse("runs:run_detail", args=[world.hidden_run.pk]))
    assert run_page.status_code == 200 and HIDDEN_DESCRIPTION in run_page.content.decode()
    assert 'id="hidden-note"' in run_page.content.decode()
    for attempt in _hidden_attempts(world):
        assert client.get(reverse("replay:attempt", args=[attempt.pk])).status_code == 200
        assert client.get(reverse("replay:patch", args=[attempt.pk])).status_code == 200
    # The visible attempt's compare list offers the hidden siblings to them.
    html = client.get(reverse("replay:attempt", args=[world.public_attempt.pk])).content.decode()
    for attempt in _hidden_attempts(world):
        assert f"b={attempt.pk}\"" in html
    compare = client.get(reverse("replay:compare"), {"a": world.public_attempt.pk, "b": world.hidden_attempt.pk})
    assert compare.status_code == 200
    assert client.get(reverse("submissions:detail", args=[world.submission.pk])).status_code == 200


@pytest.mark.parametrize("who", OUTSIDERS)
def test_replay_and_compare_pages_hide_them_from_outsiders(people, world, who):
    client = people.client(who)
    html = client.get(reverse("replay:attempt", args=[world.public_attempt.pk])).content.decode()
    for attempt in _hidden_attempts(world):
        assert f"b={attempt.pk}\"" not in html
    _no_secret(html)
    for attempt in _hidden_attempts(world):
        assert client.get(reverse("replay:attempt", args=[attempt.pk])).status_code == 404
        assert client.get(reverse("replay:patch", args=[attempt.pk])).status_code == 404
        for a, b in ((world.public_attempt, attempt), (attempt, world.public_attempt)):
            response = client.get(reverse("replay:compare"), {"a": a.pk, "b": b.pk})
            assert response.status_code == 404
            _no_secret(response.content.decode())
    assert client.get(reverse("submissions:detail", args=[world.submission.pk])).status_code == 404


@pytest.mark.parametrize("who", ["anonymous", "stranger", "owner", "staff"])
def test_the_leaderboard_counts_public_runs_only_whoever_looks(people, world, who):
    client = people.client(who)
    hidden_ids = {run.pk for run in _hidden_runs(world)}

    home = client.get(reverse("leaderboard:home"))
    _no_secret(home.content.decode())
    rows = [row for row in client.get("/", {"format": "json"}).json()["rows"] if not row["reference"]]
    assert [row["slug"] for row in rows] == [world.public_slug]
    assert rows[0]["runs"] == [world.public_run.pk]
    assert rows[0]["by_n"]["1"]["pass1"] == 1.0 and rows[0]["attempts"] == 1  # the hidden failure is not pooled
    flat = [row for row in _csv(client.get("/", {"format": "csv"})) if row["reference"] == "false"]
    assert [(row["slug"], row["pass1"], row["attempts"]) for row in flat] == [(world.public_slug, "1.0", "1")]

    functions_url = reverse("leaderboard:functions")
    _no_secret(client.get(functions_url).content.decode())
    data = client.get(functions_url, {"format": "json"}).json()["rows"]
    assert [(row["attempts"], row["systems"]) for row in data] == [(1, 1)]
    assert [(row["attempts"], row["systems"]) for row in _csv(client.get(functions_url, {"format": "csv"}))] == [("1", "1")]

    system_url = reverse("leaderboard:system", args=[world.public_slug])
    html = client.get(system_url).content.decode()
    _no_secret(html)
    for attempt in _hidden_attempts(world):
        assert reverse("replay:attempt", args=[attempt.pk]) not in html
    for run in _hidden_runs(world):
        assert reverse("runs:run_detail", args=[run.pk]) not in html
    system = client.get(system_url, {"format": "json"}).json()
    assert [run["id"] for run in system["runs"]] == [world.public_run.pk]
    assert [sample["ended_attempts"] for sample in system["samples"]] == [1]
    runs_csv = _csv(client.get(system_url, {"format": "csv", "table": "runs"}))
    assert [int(row["run"]) for row in runs_csv] == [world.public_run.pk] and not hidden_ids & {int(r["run"]) for r in runs_csv}
    samples_csv = _csv(client.get(system_url, {"format": "csv", "table": "samples"}))
    assert [row["attempt_ids"] for row in samples_csv] == [str(world.public_attempt.pk)]
    by_n = _csv(client.get(system_url, {"format": "csv", "table": "by_n"}))
    assert [(row["n"], row["attempts"], row["pass1"]) for row in by_n] == [("1", "1", "1.0")]

    # A system made of hidden runs only has no public page, in any format.
    for params in ({}, {"format": "json"}, {"format": "csv"}):
        assert client.get(reverse("leaderboard:system", args=[world.hidden_solo_slug]), params).status_code == 404


def test_the_api_shows_a_hidden_submission_to_its_uploader_and_staff_only(people, world):
    url = reverse("submissions:api_detail", args=[world.submission.pk])
    _, stranger_key = token_create(user=people.stranger)
    response = people.client("anonymous").get(url, HTTP_AUTHORIZATION=f"Token {stranger_key}")
    assert response.status_code == 404
    _no_secret(response.content.decode())
    for who in INSIDERS:
        _, key = token_create(user=getattr(people, who))
        response = people.client("anonymous").get(url, HTTP_AUTHORIZATION=f"Token {key}")
        assert response.status_code == 200 and response.json()["hidden"] is True
        assert response.json()["model"] == SUBMITTED_MODEL
