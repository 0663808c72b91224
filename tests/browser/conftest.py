"""Real-browser tests: headless Chromium (the Debian package) driven by Playwright's sync API
against pytest-django's `live_server`.

Fixtures (use them from any test under tests/browser/):

- `browser` (session): one Chromium for the whole run, launched from `CHROMIUM_PATH` (default
  /usr/bin/chromium) with `CHROMIUM_ARGS`. Skips (fails under CI) with an install hint when
  Chromium or Playwright is missing: `apt-get install -y chromium` / `pip install -e '.[dev]'`
  (`playwright install` is not needed and cannot download here).
- `browser_context`: a fresh context (own cookies and storage) whose `base_url` is the live
  server, so `page.goto("/attempts/1/")` or `page.goto(reverse("replay:attempt", args=[1]))` work.
  Using it (or `page`) starts `live_server`, which makes the test transactional: rows a test
  creates are committed and visible to the server thread, and are flushed afterwards.
- `page`: a page in that context, with a 10 s default timeout (30 s for navigations). Dialogs (alert/confirm/prompt)
  are dismissed and recorded; uncaught JavaScript exceptions fail the test at teardown unless the
  test is marked `@pytest.mark.browser_allows_js_errors`.
- `browser_events`: what happened in `page` so far: `.dialogs` (messages of alert/confirm/prompt),
  `.page_errors` (uncaught exceptions), `.console_errors` (console.error and browser errors such
  as CSP violations "Refused to execute inline script" or a 404 static file, with the URL; the
  favicon request Chromium always makes is ignored). `assert_clean()` asserts all three empty.
- `login`: `login(user=None) -> user` signs a user (a new one by default, password
  "correct-horse-battery") into `page`'s context by setting a real session cookie; reload or
  navigate afterwards.

Example::

    def test_home(page, browser_events):
        page.goto("/")
        assert page.title()
        browser_events.assert_clean()

Mark a test `@pytest.mark.slow` only if it takes more than a few seconds.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support import require

CHROMIUM_PATH = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
# --no-sandbox: Chromium's own sandbox needs user namespaces that containers and CI often lack;
# the rest keep a test run from talking to Google or doing first-run work.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
DEFAULT_TIMEOUT_MS = 10_000
# A navigation waits for the page's "load" event, which on the leaderboard's pages includes parsing
# plotly.js. On CI's two cores, shared with sandboxes and PyTorch runs of other workers, that alone
# has passed 10 s; a navigation that never ends still fails, only later.
NAVIGATION_TIMEOUT_MS = 30_000


def pytest_configure(config):
    config.addinivalue_line("markers", "browser_allows_js_errors: uncaught JavaScript exceptions do not fail the test")


@pytest.fixture(scope="session")
def _playwright() -> Iterator[object]:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        require(False, "Playwright is not installed: pip install -e '.[dev]' (playwright==1.65.2)")
    require(
        Path(CHROMIUM_PATH).is_file() and os.access(CHROMIUM_PATH, os.X_OK),
        f"no Chromium at {CHROMIUM_PATH}: apt-get install -y chromium (or `make system-packages`), "
        "or point CHROMIUM_PATH at a Chromium binary",
    )
    # Playwright's sync API keeps an asyncio loop in this thread, which Django's async-safety check
    # mistakes for async code calling the ORM. Tests here are plain synchronous code: allow it
    # while the browser runs.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    manager = sync_playwright()
    playwright = manager.start()
    try:
        yield playwright
    finally:
        manager.__exit__(None, None, None)
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture(scope="session")
def browser(_playwright):
    """One headless Chromium for the session."""
    from playwright.sync_api import Error as PlaywrightError

    try:
        browser = _playwright.chromium.launch(executable_path=CHROMIUM_PATH, headless=True, args=CHROMIUM_ARGS)
    except PlaywrightError as error:  # the binary is there but does not start
        require(False, f"Chromium at {CHROMIUM_PATH} did not start ({error}); reinstall it: apt-get install -y chromium")
    yield browser
    browser.close()


@pytest.fixture
def browser_context(browser, live_server):
    """A fresh browser context pointed at the live server (`base_url`)."""
    context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(DEFAULT_TIMEOUT_MS)
    context.set_default_navigation_timeout(NAVIGATION_TIMEOUT_MS)
    yield context
    context.close()


@dataclass
class BrowserEvents:
    dialogs: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)

    def assert_clean(self) -> None:
        assert self.dialogs == [], f"dialogs opened: {self.dialogs}"
        assert self.page_errors == [], f"uncaught JavaScript exceptions: {self.page_errors}"
        assert self.console_errors == [], f"console errors: {self.console_errors}"


@pytest.fixture
def browser_events() -> BrowserEvents:
    return BrowserEvents()


@pytest.fixture
def page(request, browser_context, browser_events):
    """A page in `browser_context`; dialogs are dismissed and recorded in `browser_events`."""
    page = browser_context.new_page()

    def on_dialog(dialog):
        browser_events.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    page.on("dialog", on_dialog)
    page.on("pageerror", lambda error: browser_events.page_errors.append(str(error)))
    def on_console(message):
        if message.type != "error":
            return
        url = (message.location or {}).get("url", "")
        if url.endswith("/favicon.ico"):
            return  # Chromium asks every site for one; the site has none
        browser_events.console_errors.append(f"{message.text} ({url})" if url else message.text)

    page.on("console", on_console)
    yield page
    if not request.node.get_closest_marker("browser_allows_js_errors"):
        assert browser_events.page_errors == [], f"uncaught JavaScript exceptions: {browser_events.page_errors}"


@pytest.fixture
def login(browser_context, live_server) -> Callable:
    """`login(user=None)`: sign `user` (default: a new user) into the browser context; returns the user."""
    from django.conf import settings
    from django.test import Client

    from tests.replay.factories import make_user

    def sign_in(user=None):
        user = user or make_user()
        client = Client()
        client.force_login(user)
        cookie = client.cookies[settings.SESSION_COOKIE_NAME]
        browser_context.add_cookies([{"name": settings.SESSION_COOKIE_NAME, "value": cookie.value, "url": live_server.url}])
        return user

    return sign_in
