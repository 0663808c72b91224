"""Tool calls as people read them, in a real headless Chromium: a file written shows as highlighted,
numbered code beside its diff, a command as a shell block, an inspection as the numbered lines it
read, a long thought folded; all styled by the external stylesheet alone (the CSP allows no inline
style), no errors."""
from tests.browser.test_replay_browser import open_attempt
from tests.replay.factories import make_attempt, make_step, make_user
from tests.replay.test_tool_calls import MODULE, tool_steps

TRANSPARENT = ("rgba(0, 0, 0, 0)", "transparent")


def before(locator) -> str:
    """The text the stylesheet puts before an element (a line's number, the shell prompt)."""
    return locator.evaluate("element => getComputedStyle(element, '::before').content")


def test_a_written_file_shows_highlighted_code_and_its_diff(page, browser_events):
    attempt = make_attempt(steps=tool_steps())
    open_attempt(page, attempt)
    step = page.locator("#step-2")
    assert step.locator(".call-file .part-label").text_content() == "File written"
    assert step.locator(".call-file .call-target").text_content() == "code/stats.py"

    code = step.locator(".call-file pre.listing")
    assert code.is_visible()
    lines = code.locator(".cl")
    assert lines.count() == len(MODULE.splitlines())
    # Each line its number before it (from the stylesheet: copying the code copies no numbers).
    assert [before(lines.nth(n)) for n in (0, 4, 7)] == ['"1"', '"5"', '"8"']
    assert lines.nth(4).text_content() == "def weighted_mean(values, weights):"
    keyword = lines.nth(4).locator(".tk-k")
    assert keyword.text_content() == "def"
    assert keyword.evaluate("span => getComputedStyle(span).color") == "rgb(0, 0, 255)"  # Pygments "vs": keywords blue
    docstring = lines.nth(5).locator(".tk-sd")
    assert docstring.evaluate("span => getComputedStyle(span).color") == "rgb(163, 21, 21)"

    # Its diff against what was there before, open beside it, the added lines green.
    diff = step.locator(".file-diff pre.diff")
    assert diff.is_visible()
    added = diff.locator(".dl-add").last
    assert added.text_content() == "+    return total / sum(weights)"
    assert added.evaluate("line => getComputedStyle(line).backgroundColor") not in TRANSPARENT
    assert added.locator(".tk-k").text_content() == "return"
    browser_events.assert_clean()


def test_a_command_an_inspection_and_a_long_thought(page, browser_events):
    attempt = make_attempt(steps=tool_steps())
    open_attempt(page, attempt)

    shell = page.locator("#step-3 pre.shell")
    assert shell.text_content() == 'python3 run.py --name "a b" && echo <done>'  # escaped, not markup
    assert before(shell) == '"$ "'

    read = page.locator("#step-1 details.listing")
    assert read.locator("summary").text_content().strip().endswith("code/stats.py lines 4-6 of 8:")
    lines = read.locator(".cl")
    assert [before(lines.nth(n)) for n in range(3)] == ['"4"', '"5"', '"6"']
    assert lines.nth(1).locator(".tk-k").text_content() == "def"
    assert read.locator(".cl-note").text_content().startswith("[shown 200 lines")

    # The long thought is folded: its first words show; one click shows the whole of it.
    thought = page.locator("#step-3 details.thought-folded")
    whole = thought.locator("p.text")
    assert not whole.is_visible() and thought.locator(".thought-head").text_content().endswith("…")
    thought.locator("summary").click()
    assert whole.is_visible() and whole.text_content() == "Long reasoning. " * 100
    assert not thought.locator(".thought-head").is_visible()

    # A tool this site does not know: its arguments as formatted JSON, escaped.
    assert '"new_str": "<b>y</b>"' in page.locator("#step-4 .call-json pre").text_content()
    assert page.locator("#step-4 b").count() == 0
    browser_events.assert_clean()


def test_a_gold_write_shows_its_path_and_no_code_to_anonymous_visitors(page, login, browser_events):
    attempt = make_attempt(agent="gold", model="", steps=[
        make_step(1, tool="write_file", arguments={"path": "code/stats.py", "content": MODULE},
                  files=[("code/stats.py", "modified", None)], exit_code=None),
    ])
    open_attempt(page, attempt)
    step = page.locator("#step-1")
    assert step.locator(".call-target").text_content() == "code/stats.py"
    assert step.locator(".code-hidden").is_visible() and step.locator("pre.listing").count() == 0
    assert "weighted_mean" not in step.text_content()
    login(make_user(is_staff=True))
    open_attempt(page, attempt)
    assert page.locator("#step-1 pre.listing .cl").nth(4).text_content() == "def weighted_mean(values, weights):"
    browser_events.assert_clean()
