"""Verifier selections: the oracle and a model-as-verifier, the service and its command."""
import pytest
from django.core.management import CommandError, call_command

from leaderboard.models import VerifierSelection
from leaderboard.rules import LeaderboardFilters
from leaderboard.selectors import leaderboard_get
from leaderboard.services import run_select_with_verifier
from leaderboard.standings import standings_refresh
from runs.agents.verifier import CHOOSE_TOOL
from runs.models import Attempt
from tests.fakes.fake_llm_server import FakeTurn
from tests.leaderboard.factories import REPORTED_PASS, make_attempt

pytestmark = pytest.mark.django_db


def system_a():
    standings_refresh()  # what the job queued by a selection does: only systems marked as changed are recomputed
    return next(row for row in leaderboard_get(filters=LeaderboardFilters()).rows if row.config == {"history": "full"})


def test_oracle_picks_a_passing_attempt_where_there_is_one(board_data):
    report = run_select_with_verifier(run=board_data.run_a, verifier="oracle")
    # s0, s1, s01, s12 have two done attempts; s2 has one (its other attempt is an error).
    assert (report.selected, report.single, report.existing) == (4, 1, 0)
    chosen = {s.sample.sample_id: s.attempt for s in VerifierSelection.objects.select_related("sample", "attempt")}
    assert chosen["p_0"] == board_data.attempts[("A", "s0", 0)]  # the pass, not the mismatch
    assert chosen["p_1,2"] == board_data.attempts[("A", "s12", 0)]  # none passes: the first
    assert all(s.candidates == 2 and s.verifier == "oracle" for s in VerifierSelection.objects.all())


def test_oracle_prefers_a_re_executed_pass_to_an_uploads_reported_one(board_data):
    """The default leaderboard counts re-executed attempts only: an unverified reported pass ahead of a
    re-executed one must not take the oracle's choice (and with it the sample out of its Pass@1)."""
    s0 = board_data.samples["s0"]
    Attempt.objects.filter(pk=board_data.attempts[("A", "s0", 0)].pk).update(index=5)
    claimed = make_attempt(board_data.run_a, s0, 0, REPORTED_PASS)
    run_select_with_verifier(run=board_data.run_a, verifier="oracle")
    chosen = VerifierSelection.objects.get(sample=s0).attempt
    assert chosen == board_data.attempts[("A", "s0", 0)] and chosen != claimed


def test_leaderboard_shows_verifier_selected_pass_at_1(board_data):
    assert system_a().by_n[1].verifier == {}  # blank before any selection
    run_select_with_verifier(run=board_data.run_a, verifier="oracle")
    a = system_a()
    assert a.by_n[1].verifier == {"oracle": 1.0} and a.by_n[1].verifier_samples == {"oracle": 2}
    assert a.by_n[2].verifier == {"oracle": 0.5}


def test_selections_are_kept_unless_replaced(board_data):
    run_select_with_verifier(run=board_data.run_a, verifier="oracle")
    again = run_select_with_verifier(run=board_data.run_a, verifier="oracle")
    assert (again.selected, again.existing) == (0, 4)
    replaced = run_select_with_verifier(run=board_data.run_a, verifier="oracle", replace=True)
    assert replaced.selected == 4
    assert VerifierSelection.objects.count() == 4


def test_command(board_data):
    from io import StringIO

    out = StringIO()
    call_command("select_with_verifier", str(board_data.run_a.pk), "--verifier", "oracle", stdout=out)
    assert "4 sample(s) chosen" in out.getvalue() and "1 with fewer than two done attempts skipped" in out.getvalue()
    with pytest.raises(CommandError, match="no run 999999"):
        call_command("select_with_verifier", "999999", "--verifier", "oracle")
    with pytest.raises(CommandError, match="must be <provider>:<model>"):
        call_command("select_with_verifier", str(board_data.run_a.pk), "--verifier", "gpt4")


def test_model_verifier_through_the_real_sdk(board_data, fake_llm, monkeypatch, tmp_path):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    # The verifier is shown the task the agents' workspaces held, masked from the gold code.
    (tmp_path / "m.py").write_text("".join(f"def f{i}():\n    return {i}\n\n\n" for i in range(3)))
    board_data.paper.code_dir = str(tmp_path)
    board_data.paper.save(update_fields=["code_dir"])
    # The judge always picks the second candidate.
    fake_llm.script([FakeTurn(tool_calls=[(CHOOSE_TOOL.name, {"candidate": 2, "reasoning": "tests pass"})])] * 4)
    spec = f"openai-compatible:judge@{fake_llm.base_url_openai}"
    report = run_select_with_verifier(run=board_data.run_a, verifier=spec)
    assert report.selected == 4 and report.fallbacks == 0
    assert len(fake_llm.requests) == 4
    assert all(s.attempt.index == 1 for s in VerifierSelection.objects.select_related("attempt"))
    # The model saw the task and both candidates.
    assert "Candidate 2" in str(fake_llm.requests[0].json)
    # Shown without its endpoint.
    a = system_a()
    assert a.by_n[1].verifier == {"openai-compatible:judge": 0.5}  # s0 #1 is the mismatch, s1 #1 passes
