"""Who may see a run changes every public page, export and JSON answer in the request that changed it,
with no worker running: the leaderboard's stored numbers (leaderboard.standings) wait for their refresh,
its visibility does not. Everything here goes through the real views; no refresh runs after the change
(a test's transaction never commits, so the change's refresh job is never even queued)."""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass

import pytest
from django.urls import reverse

from leaderboard.models import SystemStanding
from leaderboard.rules import canonical_config, system_slug
from leaderboard.standings import standings_refresh
from runs.models import Attempt, Run, Submission
from tests.replay.factories import make_attempt, make_run, make_sample
from tests.support import standings_refreshed

SOLO_MODEL = "secret:solo-model-k4"  # a system of one run, an upload: hiding it takes its system away
POOLED_MODEL = "openai:pooled-model"  # a system of two runs: hiding one leaves the system, without it
FAILING = '{"mean": 99.0, "spread": 0.0}'
OUTSIDERS = ["anonymous", "stranger"]


def _slug(run: Run) -> str:
    return system_slug(suite=run.suite.name, agent=run.agent, model=run.model,
                       config_json=canonical_config(run.agent_config), context=run.context)


@dataclass
class Board:
    solo: Run  # with a submission
    solo_attempt: Attempt
    kept: Run  # the pooled system's run that stays public
    kept_attempt: Attempt
    other: Run  # the pooled system's run that is hidden in some tests: its attempt fails
    other_attempt: Attempt
    solo_slug: str
    pooled_slug: str


@pytest.fixture
def board(people) -> Board:
    """Three public runs of the owner's on one sample, their numbers refreshed (as a worker left them):
    the solo system passes; the pooled system has Pass@1 1/2 (one pass, one failure)."""
    sample = make_sample()
    suite = sample.paper.suite
    solo = make_run(suite=suite, agent="external", model=SOLO_MODEL, created_by=people.owner,
                    agent_config={"submitted": True})
    solo_attempt = make_attempt(sample=sample, run=solo)
    Submission.objects.create(run=solo, uploader=people.owner, model=SOLO_MODEL, agent="external",
                              contact="owner@example.org", file_sha256="0" * 64, file_bytes=1, record_count=1)
    kept = make_run(suite=suite, model=POOLED_MODEL, created_by=people.owner)
    kept_attempt = make_attempt(sample=sample, run=kept)
    other = make_run(suite=suite, model=POOLED_MODEL, created_by=people.owner)
    other_attempt = make_attempt(sample=sample, run=other, answer=FAILING)
    standings_refreshed()
    return Board(solo, solo_attempt, kept, kept_attempt, other, other_attempt, _slug(solo), _slug(kept))


def _json(client, url: str, **params) -> dict:
    response = client.get(url, {"unverified": "1", **params})
    assert response.status_code == 200, (url, params, response.status_code)
    return response.json()


def _csv(client, url: str, **params) -> list[dict]:
    response = client.get(url, {"unverified": "1", "format": "csv", **params})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    body = b"".join(response.streaming_content) if response.streaming else response.content
    return list(csv.DictReader(io.StringIO(body.decode())))


def _board_rows(client) -> dict[str, dict]:
    """The leaderboard's measured systems as its JSON gives them, by slug (uploads counted)."""
    return {row["slug"]: row for row in _json(client, "/", format="json")["rows"] if not row["reference"]}


def _public_text(client, board: Board) -> str:
    """Everything the public pages and exports give `client`: the leaderboard (HTML, JSON, CSV, the
    default view and the one with uploads), the function table, the pooled system's page, the
    compare page, the explorer and the benchmark pages. Every one must answer."""
    suite, sample = board.kept.suite.name, board.kept_attempt.sample
    paper_url = reverse("leaderboard:benchmark_paper", args=[suite, sample.paper.paper_id])
    system_url = reverse("leaderboard:system", args=[board.pooled_slug])
    urls = [
        ("/", {}), ("/", {"unverified": "1"}), ("/", {"format": "json", "unverified": "1"}),
        ("/", {"format": "csv", "unverified": "1"}),
        (reverse("leaderboard:functions"), {"format": "json", "unverified": "1"}),
        (reverse("leaderboard:functions"), {"format": "csv", "unverified": "1"}),
        (system_url, {"unverified": "1"}), (system_url, {"format": "json", "unverified": "1"}),
        (system_url, {"format": "csv", "table": "runs", "unverified": "1"}),
        (reverse("leaderboard:compare"), {}), (reverse("leaderboard:explore"), {"format": "json"}),
        (reverse("leaderboard:benchmark_samples", args=[suite]), {"format": "json"}),
        (f"{paper_url}functions/0/", {"format": "json"}), (f"{paper_url}experiments/0/", {"format": "json"}),
    ]
    texts = []
    for url, params in urls:
        response = client.get(url, params)
        assert response.status_code == 200, (url, params, response.status_code)
        texts.append(response.content.decode())
    return "\n".join(texts)


def _assert_off_the_leaderboard(client, board: Board) -> None:
    """The solo system is not on the leaderboard, in its exports, its function table or at its own address."""
    assert set(_board_rows(client)) == {board.pooled_slug}
    assert board.solo_slug not in client.get("/", {"format": "csv", "unverified": "1"}).content.decode()
    assert SOLO_MODEL not in client.get("/", {"unverified": "1"}).content.decode()
    assert [row["systems"] for row in _json(client, reverse("leaderboard:functions"), format="json")["rows"]] == [1]
    for params in ({}, {"format": "json"}, {"format": "csv"}, {"format": "csv", "table": "runs"}):
        assert client.get(reverse("leaderboard:system", args=[board.solo_slug]), params).status_code == 404


def test_a_run_hidden_by_its_owner_leaves_every_public_page_in_the_same_request(people, board):
    assert board.solo_slug in _board_rows(people.client("anonymous"))
    people.client("owner").post(reverse("runs:hide", args=[board.solo.pk]))
    assert SystemStanding.objects.get(slug=board.solo_slug).stale  # no refresh has run since
    for who in ("owner", "staff"):  # the leaderboard is the public view, whoever looks
        assert set(_board_rows(people.client(who))) == {board.pooled_slug}
    for who in OUTSIDERS:
        client = people.client(who)
        _assert_off_the_leaderboard(client, board)
        text = _public_text(client, board)
        assert SOLO_MODEL not in text and board.solo_slug not in text
        assert f"/attempts/{board.solo_attempt.pk}/" not in text and f"/runs/{board.solo.pk}/" not in text
        compared = client.get(reverse("leaderboard:compare"), {"a": board.solo_slug, "b": board.pooled_slug, "format": "json"})
        assert compared.status_code == 404 and "no system" in compared.json()["error"]
        assert client.get(reverse("replay:attempt", args=[board.solo_attempt.pk])).status_code == 404
        assert client.get(reverse("runs:run_detail", args=[board.solo.pk])).status_code in (302, 404)  # 302: sign in
        assert client.get(reverse("submissions:detail", args=[board.solo.submission.pk])).status_code in (302, 404)


def _admin(people):
    """Staff with the admin's permissions on runs and submissions (a superuser, for short)."""
    people.staff.is_superuser = True
    people.staff.save(update_fields=["is_superuser"])
    return people.client("staff")


def _hide_by_submission_page(people, board: Board) -> None:
    people.client("owner").post(reverse("submissions:hide", args=[board.solo.submission.pk]))


def _hide_by_admin_run_action(people, board: Board) -> None:
    _admin(people).post(reverse("admin:runs_run_changelist"), {"action": "hide", "_selected_action": [board.solo.pk]})


def _hide_by_admin_submission_action(people, board: Board) -> None:
    _admin(people).post(reverse("admin:runs_submission_changelist"),
                        {"action": "hide", "_selected_action": [board.solo.submission.pk]})


WITHDRAWALS = {
    "upload hidden by its uploader": _hide_by_submission_page,
    "run hidden by staff": _hide_by_admin_run_action,
    "upload hidden by staff": _hide_by_admin_submission_action,
}


@pytest.mark.parametrize("withdraw", WITHDRAWALS.values(), ids=WITHDRAWALS.keys())
def test_every_way_of_hiding_a_run_takes_it_off_the_leaderboard_in_the_same_request(people, board, withdraw):
    withdraw(people, board)
    assert Run.objects.get(pk=board.solo.pk).hidden and SystemStanding.objects.get(slug=board.solo_slug).stale
    for who in OUTSIDERS:
        _assert_off_the_leaderboard(people.client(who), board)


def test_a_hidden_run_leaves_its_pooled_system_at_once_and_the_numbers_follow_at_the_refresh(people, board):
    anonymous = people.client("anonymous")
    assert _board_rows(anonymous)[board.pooled_slug]["runs"] == [board.kept.pk, board.other.pk]
    people.client("owner").post(reverse("runs:hide", args=[board.other.pk]))

    for who in OUTSIDERS:
        client = people.client(who)
        row = _board_rows(client)[board.pooled_slug]
        assert row["runs"] == [board.kept.pk] and row["stale"] is True  # gone at once; its numbers marked stale
        assert row["by_n"]["1"]["pass1"] == 0.5  # the numbers wait for the refresh
        assert [int(line["run"]) for line in _csv(client, reverse("leaderboard:system", args=[board.pooled_slug]), table="runs")] == [board.kept.pk]
        system = _json(client, reverse("leaderboard:system", args=[board.pooled_slug]), format="json")
        assert system["system"]["runs"] == [board.kept.pk] and [run["id"] for run in system["runs"]] == [board.kept.pk]
        samples = _csv(client, reverse("leaderboard:system", args=[board.pooled_slug]), table="samples")
        assert [line["attempt_ids"] for line in samples] == [str(board.kept_attempt.pk)]
        text = _public_text(client, board)
        assert f"/attempts/{board.other_attempt.pk}/" not in text and f"/runs/{board.other.pk}/" not in text

    standings_refresh()  # what the worker does next
    row = _board_rows(anonymous)[board.pooled_slug]
    assert (row["runs"], row["stale"], row["by_n"]["1"]["pass1"]) == ([board.kept.pk], False, 1.0)


@pytest.mark.parametrize("refreshed_while_hidden", [False, True], ids=["no refresh between", "refreshed while hidden"])
def test_a_run_shown_again_is_back_at_once_with_its_last_numbers_marked_stale(people, board, refreshed_while_hidden):
    owner, anonymous = people.client("owner"), people.client("anonymous")
    owner.post(reverse("runs:hide", args=[board.solo.pk]))
    owner.post(reverse("runs:hide", args=[board.other.pk]))
    assert set(_board_rows(anonymous)) == {board.pooled_slug}
    if refreshed_while_hidden:
        standings_refresh()
        assert set(_board_rows(anonymous)) == {board.pooled_slug}

    owner.post(reverse("runs:unhide", args=[board.solo.pk]))
    owner.post(reverse("runs:unhide", args=[board.other.pk]))
    for who in OUTSIDERS:
        client = people.client(who)
        rows = _board_rows(client)
        assert set(rows) == {board.solo_slug, board.pooled_slug}
        assert (rows[board.solo_slug]["runs"], rows[board.solo_slug]["stale"]) == ([board.solo.pk], True)
        assert rows[board.solo_slug]["by_n"]["1"]["pass1"] == 1.0
        assert SOLO_MODEL in client.get("/", {"unverified": "1"}).content.decode()
        assert client.get(reverse("leaderboard:system", args=[board.solo_slug])).status_code == 200
        assert client.get(reverse("replay:attempt", args=[board.solo_attempt.pk])).status_code == 200

    standings_refresh()
    rows = _board_rows(anonymous)
    assert rows[board.pooled_slug]["runs"] == [board.kept.pk, board.other.pk] and not rows[board.pooled_slug]["stale"]
    assert rows[board.pooled_slug]["by_n"]["1"]["pass1"] == 0.5


def test_deleted_runs_leave_every_public_page_in_the_same_request(people, board):
    admin = _admin(people)
    admin.post(reverse("admin:runs_run_delete", args=[board.other.pk]), {"post": "yes"})
    assert not Run.objects.filter(pk=board.other.pk).exists()
    for who in OUTSIDERS:
        client = people.client(who)
        assert _board_rows(client)[board.pooled_slug]["runs"] == [board.kept.pk]
        system = _json(client, reverse("leaderboard:system", args=[board.pooled_slug]), format="json")
        assert [run["id"] for run in system["runs"]] == [board.kept.pk] and system["system"]["runs"] == [board.kept.pk]

    admin.post(reverse("admin:runs_run_delete", args=[board.kept.pk]), {"post": "yes"})  # the system's last run
    for who in OUTSIDERS:
        client = people.client(who)
        assert set(_board_rows(client)) == {board.solo_slug}
        assert POOLED_MODEL not in client.get("/", {"unverified": "1"}).content.decode()
        assert board.pooled_slug not in client.get("/", {"format": "csv", "unverified": "1"}).content.decode()
        assert [row["systems"] for row in _json(client, reverse("leaderboard:functions"), format="json")["rows"]] == [1]
        assert client.get(reverse("leaderboard:system", args=[board.pooled_slug]), {"format": "json"}).status_code == 404


def test_the_admin_hides_runs_only_through_its_actions(people, board):
    """A run saved with its hidden box ticked would announce nothing (runs.evaluation.services.runs_set_hidden
    does): the box is read-only on the run's form."""
    form = _admin(people).get(reverse("admin:runs_run_change", args=[board.solo.pk])).context["adminform"].form
    assert "hidden" not in form.fields and "agent" in form.fields
