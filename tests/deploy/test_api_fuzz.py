"""schemathesis over every operation of the OpenAPI description (autoexperiment_site.openapi), against
a real gunicorn (DEBUG off), Postgres and Redis, through scripts/fuzz_api.py: no 5xx, every status
documented, every body matching its schema. The server holds real objects (tests/leaderboard/api_data.py
and an upload), which the script finds through the pages' JSON and gives schemathesis as examples, so
that every operation naming an object by slug or id answers 200 too, not only the 404s of invented ones.
Property-based and bounded: a few examples per operation and a fixed seed, so a run takes about a minute."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.deploy.conftest import BASE_DIR

pytestmark = [pytest.mark.slow]

# The fuzzer sends a few hundred requests from one address; the limits (docs/abuse-limits.md) are
# raised so that it reaches the views instead of the 429s (which are documented, and tested elsewhere).
GENEROUS = {name: "100000/m" for name in (
    "RATE_LIMIT_API_PER_ADDRESS", "RATE_LIMIT_API_BAD_TOKEN_PER_ADDRESS", "RATE_LIMIT_API_PER_USER",
    "RATE_LIMIT_UPLOADS_PER_USER", "RATE_LIMIT_REEXECUTIONS_PER_USER", "RATE_LIMIT_PAGES_PER_ADDRESS",
    "RATE_LIMIT_HEAVY_PAGES_PER_ADDRESS", "RATE_LIMIT_PAGES_PER_USER", "RATE_LIMIT_HEAVY_PAGES_PER_USER",
)}


@pytest.fixture
def published(transactional_db):
    """Two systems' runs on the built-in suite, a submission on it and a token of its uploader,
    committed (gunicorn reads them)."""
    from runs.models import Sample
    from runs.submissions.services import submission_create, token_create
    from tests.leaderboard.api_data import seed_api_data
    from tests.replay.factories import make_user
    from tests.submissions import helpers

    seed_api_data()
    user = make_user()
    sample = Sample.objects.get(paper__suite__name="builtin", sample_id=helpers.SAMPLE)
    submission = submission_create(data=helpers.jsonl(helpers.record(final_answer=helpers.gold_answer(sample))),
                                   filename="fuzz.jsonl", uploader=user)
    _, key = token_create(user=user, name="fuzz")
    return submission, key


def test_every_operation_answers_as_described(start_gunicorn, published):
    server = start_gunicorn(**GENEROUS)
    submission, key = published
    result = subprocess.run(
        [sys.executable, "scripts/fuzz_api.py", "--url", server.url, "--token", key, "--max-examples", "10",
         "--example", f"id={submission.pk}", "--require-found"],
        cwd=BASE_DIR, capture_output=True, text=True, timeout=900,
    )
    output = result.stdout + result.stderr
    print(output)
    assert "Never answered 200" not in output, output[-4000:]
    assert result.returncode == 0, output[-12000:]
    assert "No issues found" in output or "passed" in output, output[-4000:]
