"""Fixtures for the permission tests: three people, an isolated Redis queue, and a small world of
public and hidden runs, attempts and a submission that the pages and exports are checked against.

Hidden things carry markers ("secret:...") that must not appear in what anyone but their owner
and staff receives.
"""
from __future__ import annotations

from dataclasses import dataclass

import pytest
from django.test import Client

from leaderboard.rules import canonical_config, system_slug
from runs.models import Attempt, Run, Submission
from tests.permissions.helpers import HIDDEN_DESCRIPTION, HIDDEN_MODEL, SUBMITTED_MODEL
from tests.replay.factories import make_attempt, make_run, make_sample, make_user
from tests.support import standings_refreshed


@dataclass
class People:
    owner: object
    stranger: object
    staff: object

    def client(self, who: str) -> Client:
        """A client signed in as `who` ("owner", "stranger", "staff"), or anonymous ("anonymous")."""
        client = Client()
        if who != "anonymous":
            client.force_login(getattr(self, who))
        return client


@pytest.fixture
def people(db) -> People:
    return People(owner=make_user(), stranger=make_user(), staff=make_user(is_staff=True))


@dataclass
class World:
    public_run: Run
    public_attempt: Attempt
    hidden_run: Run  # same system as public_run: must not be pooled with it
    hidden_attempt: Attempt
    hidden_solo_run: Run  # a system of its own
    hidden_solo_attempt: Attempt
    submission: Submission  # hidden
    submission_attempt: Attempt
    public_slug: str
    hidden_solo_slug: str


def _slug(run: Run) -> str:
    return system_slug(suite=run.suite.name, agent=run.agent, model=run.model,
                       config_json=canonical_config(run.agent_config), context=run.context)


@pytest.fixture
def world(people) -> World:
    """On one sample: a public run whose attempt passes; a hidden run of the same system whose
    attempt fails (pooled, it would halve the system's Pass@1); a hidden run of another system;
    a hidden submission. Every run is the owner's."""
    sample = make_sample()
    suite = sample.paper.suite
    public_run = make_run(suite=suite, created_by=people.owner)
    public_attempt = make_attempt(sample=sample, run=public_run)
    hidden_run = make_run(suite=suite, created_by=people.owner, hidden=True, description=HIDDEN_DESCRIPTION)
    hidden_attempt = make_attempt(sample=sample, run=hidden_run, answer='{"mean": 99.0, "spread": 0.0}')
    solo = make_run(suite=suite, model=HIDDEN_MODEL, created_by=people.owner, hidden=True)
    solo_attempt = make_attempt(sample=sample, run=solo)
    submitted = make_run(suite=suite, agent="external", model=SUBMITTED_MODEL, created_by=people.owner, hidden=True,
                         agent_config={"submitted": True})
    submission_attempt = make_attempt(sample=sample, run=submitted, reexecuted=None)
    submission = Submission.objects.create(
        run=submitted, uploader=people.owner, model=SUBMITTED_MODEL, agent="external", contact="owner@example.org",
        file_sha256="0" * 64, file_bytes=1, record_count=1,
    )
    standings_refreshed()
    return World(public_run, public_attempt, hidden_run, hidden_attempt, solo, solo_attempt, submission,
                 submission_attempt, _slug(public_run), _slug(solo))
