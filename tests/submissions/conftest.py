"""Fixtures for the submission tests: users, signed-in clients, a submission stored before each
test (which bad uploads must leave intact). The built-in suite (`builtin`) is tests/conftest.py's."""
from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client

from runs.models import Attempt, Run, Sample, Submission
from tests.replay.factories import make_user
from tests.submissions import helpers


@pytest.fixture(autouse=True)
def own_workspace_root(workspace_root) -> Path:
    """Every test here builds its workspaces under its own tmp_path (tests/conftest.py)."""
    return workspace_root


@pytest.fixture
def user(db):
    return make_user()


@pytest.fixture
def other_user(db):
    return make_user()


@pytest.fixture
def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def stored(builtin, other_user) -> Submission:
    """A submission stored before the test: one attempt with the gold answer and no patch."""
    from runs.submissions.services import submission_create

    sample = Sample.objects.get(sample_id=helpers.SAMPLE)
    data = helpers.jsonl(helpers.record(final_answer=helpers.gold_answer(sample)))
    return submission_create(data=data, filename="earlier.jsonl", uploader=other_user)


class Snapshot:
    """Row counts and the stored submission's attempts, to check that nothing changed."""

    def __init__(self, stored: Submission) -> None:
        self.stored = stored
        self.counts = self.take_counts()
        self.attempts = self.take_attempts()

    @staticmethod
    def take_counts() -> tuple[int, int, int]:
        return Submission.objects.count(), Run.objects.count(), Attempt.objects.count()

    def take_attempts(self) -> list[tuple]:
        return list(
            Attempt.objects.filter(run=self.stored.run).order_by("pk").values_list(
                "pk", "sample__sample_id", "index", "reported_passed", "final_answer_raw", "final_patch"
            )
        )

    def assert_unchanged(self) -> None:
        assert self.take_counts() == self.counts, "a rejected upload stored something"
        assert self.take_attempts() == self.attempts, "a rejected upload changed the stored submission"
        fresh = Submission.objects.get(pk=self.stored.pk)
        assert (fresh.run_id, fresh.record_count, fresh.file_sha256) == (self.stored.run_id, self.stored.record_count, self.stored.file_sha256)


@pytest.fixture
def snapshot(stored) -> Snapshot:
    return Snapshot(stored)


@pytest.fixture
def private_queue(settings):
    """The evaluation queue under a name of this test alone, on the tests' Redis database: no other
    worker takes its jobs and nothing else there is touched; emptied and deleted afterwards."""
    import uuid

    from tests.support import redis_test_client, redis_test_url

    client = redis_test_client()
    name = f"submissions-test-{uuid.uuid4().hex[:12]}"
    settings.RQ_QUEUES = {**settings.RQ_QUEUES, name: {"URL": redis_test_url(), "DEFAULT_TIMEOUT": 3600}}
    settings.EVALUATION_QUEUE = name
    from runs.evaluation.queue import evaluation_queue

    queue = evaluation_queue()
    yield queue
    for registry in (queue.finished_job_registry, queue.failed_job_registry, queue.started_job_registry):
        for job_id in registry.get_job_ids():
            registry.remove(job_id, delete_job=True)
            client.delete(f"rq:results:{job_id}")
    queue.empty()
    queue.delete(delete_jobs=True)
    client.close()
