"""A private suite's gold reaches no one but staff (runs.visibility.gold_access, the one rule): tried
as an attacker would, through the real harness (bubblewrap sandboxes) and every public page, export
and search. The gold and mutant baselines print the gold code's output; an agent whose function
crashes inside the gold body of another function gets a traceback quoting a gold line, in its step
and in the re-execution's output. An anonymous visitor and a signed-in user (sign-up open) then
fetch everything: no line of a gold body, no gold number in full; staff still see them."""
from __future__ import annotations

import html as html_module
import json
import re
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from runs.benchmark.masking import function_body_source
from runs.evaluation.harness import attempt_execute
from runs.evaluation.services import run_create
from runs.models import Attempt, Suite
from tests.evaluation.conftest import suite_imported
from tests.replay.factories import make_user
from tests.support import require_backend

NORMS = '''"""Norms and weights."""
import math


def normalise(x):
    """Divides x by its norm."""
    squared_norm = x * x + 0.5
    norm = math.sqrt(squared_norm)
    return x / norm


def weigh(x):
    """Weighs x by the log of its weight."""
    log_weights = math.log(x + 1.5)
    return x * log_weights
'''
RUN = '''import json

from norms import normalise, weigh

print(json.dumps({"value": weigh(normalise(7.0) + 2.0)}))
'''
PAPER = {
    "id": "norms",
    "title": "Norms and Weights",
    "functions": [
        {"id": 0, "file": "norms.py", "name": "normalise", "description": "Divides x by its norm.", "relevant_paper": "", "line": 5},
        {"id": 1, "file": "norms.py", "name": "weigh", "description": "Weighs x by the log of its weight.",
         "relevant_paper": "", "line": 12},
    ],
    "experiments": [
        {"id": 0, "description": "Seven, normalised, shifted and weighed.", "command": "python3 run.py",
         "answer_format": {"value": 0.0}, "depends_on": [0, 1], "rtol": 0.05, "atol": 0.0, "timeout": 60},
    ],
}
# The agent's normalise returns text: the gold weigh (unmasked in this sample's workspace) raises on
# it, and the traceback quotes `log_weights = math.log(x + 1.5)`.
CRASHING_NORMALISE = {"normalise": "return str(x)"}
HELD_OUT_SECRET = 0.918273645546372


def gold_lines(code_dir: Path) -> list[str]:
    """Every distinctive line of every gold body of the paper (docstrings included)."""
    source = (code_dir / "norms.py").read_text()
    lines = []
    for function in PAPER["functions"]:
        body = function_body_source(source, function["name"], line_hint=function["line"])
        # Not the docstring: the masked stub holds the function's description there, for everyone.
        lines += [line.strip() for line in body.splitlines()
                  if len(line.strip()) > 8 and line.strip() != f'"""{function["description"]}"""']
    return lines


def gold_number_spellings(value: float) -> list[str]:
    return sorted({repr(value), *(f"{value:.{digits}g}" for digits in range(8, 18))})


def readable(markup: str) -> str:
    """The text as fetched and as a reader sees it (tags dropped, entities decoded)."""
    return markup + "\n" + html_module.unescape(re.sub(r"<[^>]+>", "", markup))


def fetch_everything(client: Client, attempts: list[Attempt], suite: Suite) -> str:
    """Every public page, export and search of the suite, as this client."""
    texts = []

    def get(url: str, **params) -> None:
        response = client.get(url, params)
        assert response.status_code in (200, 302, 403, 404), (url, params, response.status_code)
        texts.append(readable(response.content.decode("utf-8", "replace")))

    for attempt in attempts:
        replay = reverse("replay:attempt", args=[attempt.pk])
        get(replay)
        steps = len(attempt.trajectory["steps"])
        get(reverse("replay:steps", args=[attempt.pk]), first=1, last=min(steps, 20))
        get(reverse("replay:patch", args=[attempt.pk]))
        get(reverse("runs:run_detail", args=[attempt.run_id]))
    get(reverse("replay:compare"), a=attempts[0].pk, b=attempts[-1].pk)
    for output in ("html", "json", "csv"):
        get(reverse("leaderboard:home"), format=output)
        get(reverse("leaderboard:functions"), format=output)
        get(reverse("leaderboard:explore"), suite=suite.name, format=output)
        for query in ("log_weights", "math.log", "squared_norm", "sqrt", "Traceback", "value"):
            get(reverse("leaderboard:explore"), suite=suite.name, q=query, format=output)
    benchmark = [reverse("leaderboard:benchmark_suite", args=[suite.name]),
                 reverse("leaderboard:benchmark_samples", args=[suite.name]) + "?n=1",
                 reverse("leaderboard:benchmark_paper", args=[suite.name, "norms"]),
                 reverse("leaderboard:benchmark_function", args=[suite.name, "norms", 0]),
                 reverse("leaderboard:benchmark_function", args=[suite.name, "norms", 1]),
                 reverse("leaderboard:benchmark_experiment", args=[suite.name, "norms", 0])]
    for url in benchmark:
        get(url)
        get(url, format="json")
    # Each system's page (its failure analysis: exceptions and first error lines), from the explorer's own rows.
    rows = json.loads(client.get(reverse("leaderboard:explore"), {"suite": suite.name, "format": "json"}).content)["rows"]
    for slug in sorted({row["slug"] for row in rows}):
        get(reverse("leaderboard:system", args=[slug]))
        get(reverse("leaderboard:system", args=[slug]), format="json")
    return "\n".join(texts)


def search_hits(client: Client, attempt: Attempt, query: str) -> list[int]:
    return client.get(reverse("replay:search", args=[attempt.pk]), {"q": query, "first": 1, "last": 5}).json()["steps"]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_private_suites_gold_reaches_staff_alone(tmp_path, workspace_root, redis_queue, settings):
    require_backend("bubblewrap")
    settings.SIGNUP_ENABLED = True  # an account vouches for nobody
    suite = suite_imported(tmp_path / "secret-suite", name="secret", paper=PAPER, files={"norms.py": NORMS, "run.py": RUN})
    assert not suite.gold_public
    attempts = []
    for agent, config in (("gold", {}), ("mutant", {}), ("planted_gold", {"bodies": CRASHING_NORMALISE})):
        run = run_create(suite=suite, agent=agent, agent_config=config, n_values=[1], enqueue=False)
        attempt = run.attempts.get(sample__sample_id="norms_0")
        run.attempts.exclude(pk=attempt.pk).delete()
        attempt_execute(attempt_id=attempt.pk, requeue=False)
        attempt.refresh_from_db()
        assert attempt.status == Attempt.DONE, attempt.exit_message
        attempts.append(attempt)
    gold_run, mutant, crashed = attempts
    Attempt.objects.filter(pk=crashed.pk).update(held_out_scores={"Experiment 1": {"variant 1": HELD_OUT_SECRET}})
    code_dir = Path(crashed.sample.paper.code_dir)
    secrets = gold_lines(code_dir)
    gold_value = crashed.sample.paper.experiments.get(exp_id=0).gold_result["value"]
    numbers = gold_number_spellings(gold_value) + gold_number_spellings(HELD_OUT_SECRET)
    assert "log_weights = math.log(x + 1.5)" in secrets and len(repr(gold_value)) > 12
    # The attack worked: the gold code's output and a traceback quoting a gold line are stored.
    stored = json.dumps([crashed.trajectory, crashed.reexecution_output])
    assert "log_weights = math.log(x + 1.5)" in stored
    assert repr(gold_value) in json.dumps(gold_run.trajectory)

    anonymous, member = Client(), Client()
    member.force_login(make_user())
    for client in (anonymous, member):
        everything = fetch_everything(client, attempts, suite)
        assert "Norms and Weights" in everything and "Traceback" in everything  # the pages were there
        leaked_lines = [line for line in secrets if line in everything]
        leaked_numbers = [number for number in numbers if number in everything]
        contexts = [everything[max(0, everything.index(n) - 300): everything.index(n) + 80] for n in leaked_lines + leaked_numbers]
        assert leaked_lines == [] and leaked_numbers == [], (leaked_lines, leaked_numbers, contexts)
        assert "[gold source line withheld]" in everything
        assert search_hits(client, crashed, "log_weights") == []

    # Staff see the gold: the line in the crashed attempt's step and output, the numbers in the table.
    staff = Client()
    staff.force_login(make_user(username="staff-member", is_staff=True))
    page = readable(staff.get(reverse("replay:attempt", args=[crashed.pk])).content.decode())
    steps = readable(staff.get(reverse("replay:steps", args=[crashed.pk]), {"first": 1, "last": 5}).content.decode())
    assert "log_weights = math.log(x + 1.5)" in page + steps
    assert repr(gold_value) in page
    assert search_hits(staff, crashed, "log_weights") != []
    gold_page = readable(staff.get(reverse("replay:attempt", args=[gold_run.pk])).content.decode())
    assert repr(gold_value) in gold_page and "squared_norm = x * x + 0.5" in gold_page
