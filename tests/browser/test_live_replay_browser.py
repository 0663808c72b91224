"""A running attempt's replay in a real headless Chromium: a step the worker streams appears on the
open page without a reload, under the site's CSP, and the page stops following once the attempt ends."""
from django.urls import reverse

from runs.agents.recorder import TrajectoryWriter
from runs.agents.trajectory import Header
from runs.evaluation.claims import Heartbeat
from runs.evaluation.kinds import RUN_ATTEMPT
from runs.models import Attempt
from tests.replay.factories import make_attempt


def test_a_streamed_step_appears_on_the_open_replay_page(page, browser_events, tmp_path):
    attempt = make_attempt(status=Attempt.RUNNING, answer=None, reexecuted=None, tries=1, trajectory=None)
    # The worker's side, as the harness runs it: the recorder saves the file, the heartbeat stores it.
    writer = TrajectoryWriter(tmp_path / "trajectory.json", Header(sample_id=attempt.sample.sample_id, agent="react", model="m"))
    heartbeat = Heartbeat(RUN_ATTEMPT, attempt.pk, attempt.tries, interval=600)
    heartbeat.stream_trajectory(writer.path)
    writer.add_step(writer.new_step(thought="Read the task first."))
    assert heartbeat.store_trajectory()

    page.goto(reverse("replay:attempt", args=[attempt.pk]))
    page.wait_for_selector("#replay.js-ready")
    assert page.locator("#steps > li[data-step]").count() == 1
    assert "running" in page.locator("#live-status").text_content()

    step = writer.new_step(thought="Now <b>run</b> the experiments.")
    step.tool, step.arguments, step.observation, step.exit_code = "command_line", {"command": "python run.py"}, "boom", 1
    writer.add_step(step)
    assert heartbeat.store_trajectory()
    streamed = page.locator("#step-2")
    streamed.wait_for(timeout=15_000)  # polled every 2 s
    assert streamed.locator(".thought").text_content().strip().endswith("Now <b>run</b> the experiments.")  # text, escaped
    assert streamed.get_attribute("data-error") == "1" and "step-error" in streamed.get_attribute("class")
    assert page.locator("#steps > li[data-step]").count() == 2 and page.locator("#steps li.empty").count() == 0

    # replay.js knows the new step: the keys reach it, and "e" finds its error.
    page.keyboard.press("e")
    assert page.evaluate("() => document.querySelector('.step.current').id") == "step-2"

    Attempt.objects.filter(pk=attempt.pk).update(status=Attempt.DONE)
    page.wait_for_function("() => document.getElementById('live-status').textContent.includes('has ended (done)')",
                           timeout=15_000)
    assert page.locator("#live-status a").get_attribute("href") == reverse("replay:attempt", args=[attempt.pk])
    browser_events.assert_clean()
