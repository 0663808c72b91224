"""Agent settings as pydantic models: what they refuse and how they say it, and the versions of
the settings a run stores (stored examples of each version in fixtures/agent_configs/)."""

import json
from pathlib import Path

import pytest

from runs.agents import AGENTS, AgentConfig, AgentlessConfig, BaselineConfig, agent_from_name
from runs.agents import settings as agent_settings
from runs.agents.settings import AGENT_CONFIG_VERSION, SettingsInvalid, stored_settings_current

FIXTURES = Path(__file__).parent / "fixtures" / "agent_configs"


def stored_runs(version: int) -> list[dict]:
    return json.loads((FIXTURES / f"v{version}.json").read_text(encoding="utf-8"))["runs"]


def test_every_version_up_to_the_current_one_has_stored_examples():
    assert sorted(path.name for path in FIXTURES.glob("v*.json")) == [f"v{v}.json" for v in range(1, AGENT_CONFIG_VERSION + 1)]


@pytest.mark.parametrize("version", range(1, AGENT_CONFIG_VERSION + 1))
def test_stored_settings_of_every_version_build_their_agent(version):
    for run in stored_runs(version):
        current = stored_settings_current(run["agent_config"], version=version)
        needs = {"gold_bodies": {}} if AGENTS[run["agent"]].needs_gold_bodies else {}
        agent = agent_from_name(run["agent"], **current, **needs)
        recorded = agent.config.as_dict()
        for name, value in current.items():
            assert getattr(agent, name, None) == value or recorded.get(name) == value, (run, name)


def test_a_version_this_code_does_not_know_is_refused_by_number():
    with pytest.raises(SettingsInvalid, match=rf"^agent settings of version {AGENT_CONFIG_VERSION + 1}: this code reads"):
        stored_settings_current({}, version=AGENT_CONFIG_VERSION + 1)
    with pytest.raises(SettingsInvalid, match="version 0"):
        stored_settings_current({}, version=0)


def test_older_versions_are_migrated_one_step_at_a_time(monkeypatch):
    # A made-up history: version 2 renamed `window` to `steps_shown`, version 3 dropped `colour`.
    monkeypatch.setattr(agent_settings, "AGENT_CONFIG_VERSION", 3)
    monkeypatch.setattr(agent_settings, "_MIGRATIONS", {
        1: lambda old: {("steps_shown" if key == "window" else key): value for key, value in old.items()},
        2: lambda old: {key: value for key, value in old.items() if key != "colour"},
    })
    stored = {"window": 4, "colour": "blue", "history": "window"}
    assert stored_settings_current(stored, version=1) == {"steps_shown": 4, "history": "window"}
    assert stored_settings_current({"steps_shown": 4, "colour": "red"}, version=2) == {"steps_shown": 4}
    assert stored_settings_current({"steps_shown": 4}, version=3) == {"steps_shown": 4}
    assert stored == {"window": 4, "colour": "blue", "history": "window"}  # the stored object is left as it was


def test_no_stored_settings_are_no_settings():
    assert stored_settings_current(None, version=1) == {}


@pytest.mark.parametrize(
    ("model", "values", "message"),
    [
        (AgentConfig, {"colour": "blue"}, r"^no setting 'colour'$"),
        (AgentConfig, {"window": 0}, r"^window must be at least 1, got 0$"),
        (AgentConfig, {"history": "all"}, r"^history must be one of full, window, summary; got 'all'$"),
        (AgentConfig, {"max_steps": "many"}, r"^max_steps: input should be a valid integer, unable to parse string as an integer, got 'many'$"),
        (AgentConfig, {"window": 0, "max_cost": -1}, r"^window must be at least 1, got 0; max_cost must be positive, got -1$"),
        (AgentlessConfig, {"paper_k": -1}, r"^paper_k must not be negative, got -1$"),
        (BaselineConfig, {"command_timeout": 0}, r"^command_timeout must be positive, got 0$"),
    ],
)
def test_a_refused_setting_is_named_with_what_is_wrong(model, values, message):
    with pytest.raises(SettingsInvalid, match=message):
        model(**values)


def test_replaced_checks_the_changes_and_keeps_the_rest():
    config = AgentConfig(history="window", window=3)
    assert config.replaced(temperature=0.5).as_dict() == {**config.as_dict(), "temperature": 0.5}
    with pytest.raises(SettingsInvalid, match="^window must be at least 1"):
        config.replaced(window=0)
    assert config.window == 3


def test_settings_as_recorded_in_the_trajectory_header_are_plain_json():
    recorded = AgentConfig(history="summary").as_dict()
    assert json.loads(json.dumps(recorded)) == recorded
    assert set(recorded) == set(AgentConfig.model_fields)
