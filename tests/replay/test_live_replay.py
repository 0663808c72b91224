"""The replay of a running attempt: its page follows the steps a worker stores (runs.evaluation.live)
through a small JSON endpoint, under the replay's visibility rules; an ended attempt's page does not."""
import pytest
from django.urls import reverse

from runs.models import Attempt
from tests.replay.factories import make_attempt, make_step, make_trajectory, make_user

pytestmark = pytest.mark.django_db


def _running(**fields):
    fields.setdefault("steps", [make_step(1, thought="first step")])
    return make_attempt(status=Attempt.RUNNING, answer=None, reexecuted=None, tries=1, **fields)


def test_the_live_endpoint_counts_a_running_attempts_stored_steps(client):
    attempt = _running()
    response = client.get(reverse("replay:live", args=[attempt.pk]))
    assert response.status_code == 200
    assert response["Cache-Control"] == "no-store"
    assert response.json() == {"status": "running", "live": True, "steps": 1, "tries": 1}

    # The worker stores one more step.
    steps = [make_step(1, thought="first step"), make_step(2, thought="second step")]
    Attempt.objects.filter(pk=attempt.pk).update(trajectory=make_trajectory(steps=steps, answer=None, final_patch=None))
    assert client.get(reverse("replay:live", args=[attempt.pk])).json()["steps"] == 2

    Attempt.objects.filter(pk=attempt.pk).update(status=Attempt.DONE)
    assert client.get(reverse("replay:live", args=[attempt.pk])).json() == {"status": "done", "live": False, "steps": 2, "tries": 1}


def test_a_running_attempt_without_steps_yet_says_so_and_is_followed(client):
    attempt = _running(trajectory=None)
    assert client.get(reverse("replay:live", args=[attempt.pk])).json()["steps"] == 0
    page = client.get(reverse("replay:attempt", args=[attempt.pk])).content.decode()
    assert "No steps yet: they appear here as the agent records them." in page
    assert f'data-live-url="{reverse("replay:live", args=[attempt.pk])}"' in page and "js/replay_live.js" in page


def test_only_a_queued_or_running_attempts_page_polls(client):
    done = make_attempt()
    page = client.get(reverse("replay:attempt", args=[done.pk])).content.decode()
    assert "data-live-url" not in page and "replay_live.js" not in page and 'id="live-status"' not in page
    running = client.get(reverse("replay:attempt", args=[_running().pk])).content.decode()
    assert 'id="live-status"' in running and "This attempt is running" in running


def test_a_hidden_runs_running_attempt_is_not_found_but_by_its_owner_and_staff(client):
    owner = make_user()
    attempt = _running()
    attempt.run.hidden, attempt.run.created_by = True, owner
    attempt.run.save()
    url = reverse("replay:live", args=[attempt.pk])
    assert client.get(url).status_code == 404
    client.force_login(make_user())
    assert client.get(url).status_code == 404
    client.force_login(owner)
    assert client.get(url).json()["live"] is True
    client.force_login(make_user(is_staff=True))
    assert client.get(url).status_code == 200
