"""The built-in suite as users get it: imported by set-up, gold code passing inside built workspaces."""
import re
from io import StringIO

import pytest
from django.core.management import call_command

from runs.benchmark.execution import run_experiment
from runs.benchmark.scoring import DEFAULT_ATOL, DEFAULT_RTOL, score_experiment
from runs.benchmark.workspace import build_workspace
from runs.models import Experiment, HeldOutCheck, Sample
from runs.suites.selectors import experiment_spec, gold_workspace_spec
from sandbox import open_sandbox
from tests.support import import_builtin_suite, require_backend


@pytest.fixture
def builtin(db):
    """The built-in suite with its samples at n=1 and n=2 (tests/conftest.py's has n=1 only)."""
    return import_builtin_suite(samples="1,2")


def test_builtin_suite_is_big_enough(builtin):
    papers = builtin.papers.all()
    assert papers.count() >= 3
    assert Experiment.objects.filter(paper__suite=builtin).count() >= 12
    assert all(paper.text and paper.functions.count() for paper in papers)
    assert Sample.objects.filter(paper__suite=builtin, n=1).count() >= 20
    assert Sample.objects.filter(paper__suite=builtin, n=2).count() >= 60
    assert not Experiment.objects.filter(paper__suite=builtin, gold_result=None).exists()


@pytest.mark.slow
def test_every_experiment_of_the_gold_code_reproduces_gold_inside_a_built_workspace(builtin, tmp_path):
    require_backend("bubblewrap")
    slow = []
    for paper in builtin.papers.order_by("paper_id"):
        workspace = tmp_path / paper.paper_id
        build_workspace(gold_workspace_spec(paper=paper), workspace)
        with open_sandbox("bubblewrap", workspace, name=f"builtin-{paper.paper_id}") as sandbox:
            for experiment in paper.experiments.order_by("exp_id"):
                outcome = run_experiment(sandbox, experiment_spec(experiment))
                assert outcome.error is None, f"{paper.paper_id} #{experiment.exp_id}: {outcome.error}\n{outcome.output}"
                score = score_experiment(
                    gold=experiment.gold_result,
                    predicted=outcome.result,
                    rtol=experiment.rtol or DEFAULT_RTOL,
                    atol=experiment.atol or DEFAULT_ATOL,
                )
                assert score.passed, f"{paper.paper_id} #{experiment.exp_id}: {score.to_dict()}"
                # Identical code in the same environment: the numbers must be reproduced far within tolerance.
                assert all(n.relative_error is not None and n.relative_error < 1e-6 for n in score.numbers)
                if outcome.duration > 10:
                    slow.append(f"{paper.paper_id} #{experiment.exp_id}: {outcome.duration:.1f} s")
    assert not slow, f"experiments over 10 s: {slow}"


@pytest.mark.slow
def test_audit_leaks_finds_nothing_in_the_builtin_suite(builtin):
    out = StringIO()
    call_command("audit_leaks", "builtin", "--n", "1,2", stdout=out, stderr=out)
    assert " 0 leaks" in out.getvalue()


@pytest.mark.slow
def test_validate_suite_passes_on_the_builtin_suite(builtin, settings):
    require_backend("bubblewrap")
    settings.SANDBOX_BACKEND = "bubblewrap"
    out = StringIO()
    # Every paper at once, each in sandboxes of its own: the report is the same
    # (tests/suites/test_gold_and_validation.py), and both cores of a CI machine are kept busy.
    # Gold's stability over two fresh-sandbox runs rather than the default three: the code is seeded,
    # so a second run shows any drift there is; the third cost a fifth of the check.
    call_command("validate_suite", "builtin", "--jobs", "4", "--repeats", "2", stdout=out)  # raises CommandError if invalid
    table = out.getvalue()
    rows = [line for line in table.splitlines() if "#" in line]
    assert len(rows) >= 20 and all(line.split()[3] == "yes" for line in rows)
    # The mutants' outcome split, which docs/builtin-suites.md quotes.
    tried, crash, wrong, survive = map(int, re.search(
        r"mutants: (\d+) tried: (\d+) crash, (\d+) print wrong numbers, (\d+) survive", table).groups())
    assert crash + wrong + survive == tried and wrong > crash
    # Gold stability over 2 fresh-sandbox runs: the code is seeded, every experiment stable.
    experiments = Experiment.objects.filter(paper__suite=builtin).count()
    variants = HeldOutCheck.objects.filter(experiment__paper__suite=builtin).count()
    stability = [line for line in table.splitlines() if line.startswith("  ") and " experiment " in line]
    assert len(stability) == experiments + variants
    assert all("stable, largest spread 0 of tolerance" in line for line in stability)
    assert "gold stability over 2 runs" in table and f"gold stability: 0 of {experiments} experiments unstable" in table
    # Every experiment has a hidden variant that gold passes, masking fails, and that catches mutants.
    assert variants >= experiments and f"held-out gold stability: 0 of {variants} hidden variants unstable" in table
    assert "gold passes every variant: yes" in table
    functions = len(rows)
    assert f"noop (the function masked) fails its variants: {functions}/{functions} functions" in table
    caught, let_through = map(int, re.search(
        r"mutants the public experiments let through, caught by the variants: (\d+)/(\d+)", table).groups())
    assert let_through == survive and caught <= let_through
    assert not Experiment.objects.filter(paper__suite=builtin, gold_unstable=True).exists()
    assert set(Experiment.objects.filter(paper__suite=builtin).values_list("gold_repeats", flat=True)) == {3}
