"""Uploading results in a real headless Chromium: a file with an error shows the line and field of
each problem and stores nothing; a good file lands on its submission page; uploaded content is
escaped, so a <script> in it never runs."""
from __future__ import annotations

import json

from runs.models import Run, Sample, Submission

HEADER = {"type": "header", "suite": "builtin", "model": "browser-model", "agent": "browser-agent",
          "contact": "browser@example.org", "description": "<script>window.__injected = 1</script>"}


def _record(sample_id: str, index: int, **fields) -> dict:
    return {"sample_id": sample_id, "attempt_index": index, "final_answer": None, "final_patch": "",
            "input_tokens": 1, "output_tokens": 1, "cost": None, "seconds": None, **fields}


def _file(*records: dict) -> bytes:
    return ("\n".join(json.dumps(line) for line in [HEADER, *records]) + "\n").encode()


def _upload(page, data: bytes, name: str = "results.jsonl") -> None:
    page.goto("/submissions/upload/")
    page.set_input_files("input[name=file]", files=[{"name": name, "mimeType": "application/jsonl", "buffer": data}])
    page.click("#upload-form button[type=submit]")
    page.wait_for_load_state()


def test_upload_with_errors_shows_line_and_field(page, login, builtin, browser_events):
    login()
    sample = Sample.objects.filter(n=1).order_by("sample_id").first().sample_id
    data = _file(_record(sample, 0), _record(sample, 1, cost=-2), _record("no-such-sample_0", 0, attempt_index="0"))
    _upload(page, data)

    problems = page.locator("#upload-problems li")
    texts = problems.all_inner_texts()
    assert "line 3: cost: must not be negative, got -2" in texts
    assert 'line 4: attempt_index: must be an integer, got a string ("0")' in texts
    assert any(text.startswith("line 4: sample_id: no sample 'no-such-sample_0' in suite 'builtin'") for text in texts)
    assert page.locator("#problems-title").inner_text() == "Nothing was stored"
    assert Submission.objects.count() == 0 and Run.objects.count() == 0
    # The rejected upload is answered with status 400, which Chromium logs; nothing else may be.
    assert browser_events.dialogs == [] and browser_events.page_errors == []
    assert all("status of 400" in message for message in browser_events.console_errors), browser_events.console_errors


def test_good_upload_in_the_browser_lands_on_its_page_and_scripts_do_not_run(page, login, builtin, browser_events):
    login()
    sample = Sample.objects.filter(n=1).order_by("sample_id").first().sample_id
    _upload(page, _file(_record(sample, 0, final_answer="<script>window.__injected = 2</script>")))

    submission = Submission.objects.get()
    assert page.url.endswith(f"/submissions/{submission.pk}/")
    assert "1 attempt(s) scored against the gold results" in page.inner_text("main")
    assert page.inner_text("#submission-description") == HEADER["description"]
    assert page.evaluate("window.__injected") is None
    assert page.locator("#attempts tbody tr").count() == 1
    browser_events.assert_clean()
