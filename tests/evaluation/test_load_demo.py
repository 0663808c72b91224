"""manage.py load_demo: the baselines' runs of make demo, waited for or left to the site's workers."""
import io

import pytest
from django.core.management import call_command

from runs.models import Attempt, Run

pytestmark = pytest.mark.django_db(transaction=True)


def test_no_wait_queues_the_baselines_runs_for_the_sites_workers_and_returns(tiny_suite, redis_queue):
    out = io.StringIO()
    call_command("load_demo", "--suite", "tiny", "--n", "1", "--cap", "1", "--no-wait", stdout=out)

    runs = Run.objects.filter(suite=tiny_suite)
    assert sorted(runs.values_list("agent", flat=True)) == ["gold", "mutant", "noop"]
    queued = Attempt.objects.filter(run__in=runs, status=Attempt.QUEUED)
    assert queued.count() == 3 and len(redis_queue.job_ids) == 3  # nothing ran; the jobs wait for a worker
    assert "3 attempts of suite tiny queued for the site's workers" in out.getvalue()

    call_command("load_demo", "--suite", "tiny", "--n", "1", "--cap", "1", "--no-wait", stdout=io.StringIO())
    assert Run.objects.filter(suite=tiny_suite).count() == 3  # a second call keeps the runs it made
