"""The replay page's per-function verdicts and side-by-side implementations in a real headless
Chromium: laid out by the external stylesheet alone (the CSP allows no inline style), no errors."""
from runs.models import Attempt, Transplant
from tests.browser.test_replay_browser import open_attempt
from tests.replay.factories import make_attempt, make_user
from tests.replay.test_transplant_verdicts import agent_patch, gold_code_sample, with_transplants


def test_the_verdicts_and_the_two_implementations_side_by_side(page, login, browser_events, tmp_path):
    sample = gold_code_sample(tmp_path)
    body = '"""The weighted mean."""\nreturn sum(values) / len(values)'
    attempt = with_transplants(
        make_attempt(sample=sample, final_patch=agent_patch(sample, {"weighted_mean_0": body})),
        [(Transplant.Status.DONE, Transplant.Verdict.WRONG), (Transplant.Status.DONE, Transplant.Verdict.RIGHT)], diagnosis=Attempt.ONE_WRONG,
    )
    open_attempt(page, attempt)
    assert page.locator("#functions .diagnosis").text_content() == "One function wrong"
    assert page.locator("#functions tr.function-verdict").count() == 2
    assert page.locator("#implementations").count() == 0  # anonymous, and the suite's gold code is not public

    login(make_user(is_staff=True))
    open_attempt(page, attempt)
    table = page.locator("#implementations table.side-by-side").first
    table.scroll_into_view_if_needed()
    changed = table.locator("tr.sbs-changed").first
    agent, gold = changed.locator("td.side-agent").bounding_box(), changed.locator("td.side-gold").bounding_box()
    # Two columns of about half the table each, the gold body on the right, on one row.
    assert agent["x"] + agent["width"] <= gold["x"] and abs(agent["y"] - gold["y"]) < 1
    assert abs(agent["width"] - gold["width"]) < 2
    assert changed.locator("td.side-agent").text_content() == "return sum(values) / len(values)"
    # The changed lines are coloured by the stylesheet (the CSP forbids inline styles).
    colour = changed.locator("td.side-gold").evaluate("cell => getComputedStyle(cell).backgroundColor")
    assert colour not in ("rgba(0, 0, 0, 0)", "transparent")
    browser_events.assert_clean()
