"""Issue 30, attack 3: an upload that is never re-executed must not count on the default leaderboard.

The uploader claims the gold numbers without code that produces them (an empty patch), through the
real ingest service; one upload is never re-executed, the other is, in a real bubblewrap sandbox.
The default leaderboard (`/`, its JSON and CSV, the system pages) counts re-executed attempts alone,
the re-executed upload by its re-execution verdict; the unverified one appears only with
`?unverified=1`, marked as reported numbers, not re-executed.
"""
from __future__ import annotations

import csv
import io

import pytest

from leaderboard.standings import standings_refresh
from runs.models import Sample
from runs.submissions.services import submission_create, submission_reexecute_sync
from tests.submissions.helpers import HEADER, SAMPLE, gold_answer, gold_patch, jsonl, record
from tests.support import require_backend

UNVERIFIED_MODEL = "claims-only-model"
REEXECUTED_MODEL = "reexecuted-model"


@pytest.fixture
def uploads(builtin, user, tmp_path, workspace_root):
    """Two uploads at SAMPLE, both reporting the gold numbers for two attempts: one never re-executed
    (both attempts with an empty patch), one re-executed (attempt 0 with the gold patch, attempt 1
    with an empty patch: its reported numbers pass, its code does not)."""
    require_backend("bubblewrap")
    sample = Sample.objects.get(sample_id=SAMPLE)
    answer = gold_answer(sample)
    claims = jsonl(record(SAMPLE, 0, final_answer=answer), record(SAMPLE, 1, final_answer=answer),
                   header={**HEADER, "model": UNVERIFIED_MODEL})
    unverified = submission_create(data=claims, filename="claims.jsonl", uploader=user)
    mixed = jsonl(record(SAMPLE, 0, final_answer=answer, final_patch=gold_patch(sample, tmp_path)),
                  record(SAMPLE, 1, final_answer=answer), header={**HEADER, "model": REEXECUTED_MODEL})
    reexecuted = submission_create(data=mixed, filename="mixed.jsonl", uploader=user, reexecute=True, enqueue=False)
    submission_reexecute_sync(submission=reexecuted)
    assert sorted(reexecuted.run.attempts.values_list("index", "reexecution_passed")) == [(0, True), (1, False)]
    assert all(unverified.run.attempts.values_list("reported_passed", flat=True))
    standings_refresh()
    return {"unverified": unverified, "reexecuted": reexecuted}


@pytest.fixture
def user(db):
    from tests.replay.factories import make_user

    return make_user()


def _rows(client, **params) -> dict[str, dict]:
    body = client.get("/", {"format": "json", **params}).json()
    return {row["model"]: row for row in body["rows"] if not row["reference"]}


def _csv_rows(client, **params) -> dict[str, dict]:
    response = client.get("/", {"format": "csv", **params})
    assert response.status_code == 200
    return {row["model"]: row for row in csv.DictReader(io.StringIO(response.content.decode())) if row["reference"] == "false"}


# Transactional: the re-execution's heartbeat thread writes on a connection of its own, which must
# see the uploaded attempts.
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_an_upload_never_reexecuted_counts_only_when_asked_for_and_marked(uploads, client):
    # By default: the unverified upload is nowhere; the re-executed one counts by its re-execution.
    html = client.get("/").content.decode()
    assert UNVERIFIED_MODEL not in html and REEXECUTED_MODEL in html
    assert 'id="lb-unverified-toggle"' in html and "unverified=1" in html
    rows = _rows(client)
    assert UNVERIFIED_MODEL not in rows
    counted = rows[REEXECUTED_MODEL]
    assert counted["verified"] is True and counted["by_n"]["1"]["pass1"] == 0.5  # 1 of 2, not the claimed 2 of 2
    assert client.get("/", {"format": "json"}).json()["filters"]["counting"] == "re-executed attempts only"
    table = _csv_rows(client)
    assert UNVERIFIED_MODEL not in table and float(table[REEXECUTED_MODEL]["pass1"]) == 0.5
    # Nor on the per-function table, the comparison or the suite's pages.
    functions = client.get("/functions/", {"format": "json"}).json()["rows"]
    assert sum(row["attempts"] for row in functions) == 2
    system = client.get(f"/systems/{_slug(uploads['unverified'])}/", {"format": "json"}).json()
    assert system["system"]["by_n"] == {} and system["not_reexecuted_attempts"] == 2
    assert 'id="lb-unverified-toggle"' in client.get(f"/systems/{_slug(uploads['unverified'])}/").content.decode()

    # Asked for: there, judged by what it reported, and marked so in every format.
    html = client.get("/", {"unverified": "1"}).content.decode()
    assert UNVERIFIED_MODEL in html and "reported numbers, not re-executed" in html and ">unverified</span>" in html
    rows = _rows(client, unverified="1")
    claimed = rows[UNVERIFIED_MODEL]
    assert claimed["verified"] is False and claimed["unverified_attempts"] == 2
    assert claimed["by_n"]["1"]["pass1"] == 1.0
    assert "reported numbers, not re-executed" in claimed["note"]
    assert rows[REEXECUTED_MODEL]["verified"] is True and rows[REEXECUTED_MODEL]["note"] == ""
    table = _csv_rows(client, unverified="1")
    assert table[UNVERIFIED_MODEL]["verified"] == "false"
    assert "reported numbers, not re-executed" in table[UNVERIFIED_MODEL]["note"]
    system = client.get(f"/systems/{_slug(uploads['unverified'])}/", {"format": "json", "unverified": "1"}).json()
    assert system["system"]["by_n"]["1"]["pass1"] == 1.0 and system["system"]["verified"] is False


def _slug(submission) -> str:
    from leaderboard.rules import canonical_config, system_slug

    run = submission.run
    return system_slug(suite=run.suite.name, agent=run.agent, model=run.model, config_json=canonical_config(run.agent_config),
                       context=run.context)
