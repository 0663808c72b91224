"""LLM adapters through the real openai / anthropic SDKs, against the fake LLM server on loopback."""

from __future__ import annotations

import json
import time

import pytest

from runs.agents.llm import (
    INVALID_JSON_KEY,
    AnthropicModel,
    Completion,
    Message,
    MissingAPIKey,
    ModelError,
    OpenAIChatModel,
    ToolCall,
    ToolSpec,
    Usage,
    model_from_name,
    pricing,
    provider_module,
)
from runs.agents.llm.base import PLACEHOLDER_API_KEY
from runs.agents.llm.openai_chat import parse_arguments
from tests.fakes import FakeError, FakeLLMServer, FakeTurn
from tests.support import in_fresh_django

KEY = "sk-test-key"
LIST_FILES = ToolSpec(
    name="list_files",
    description="List the files in a directory.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
RUN_BASH = ToolSpec(
    name="execute_bash_script",
    description="Run a bash script in the workspace.",
    parameters={"type": "object", "properties": {"script": {"type": "string"}}, "required": ["script"]},
)
TOOLS = [LIST_FILES, RUN_BASH]


def openai_model(fake, model="gpt-4o", **kwargs):
    return OpenAIChatModel(model, api_key=KEY, base_url=fake.base_url_openai, **{"max_retries": 2, **kwargs})


def anthropic_model(fake, model="claude-3-5-sonnet-20241022", **kwargs):
    return AnthropicModel(model, api_key=KEY, base_url=fake.base_url_anthropic, **{"max_retries": 2, **kwargs})


def conversation() -> list[Message]:
    """A ReAct episode two steps in: parallel tool calls, then a call without text, then a note."""
    return [
        Message.system("You are a careful research engineer."),
        Message.user("Implement the masked function and report the IoU."),
        Message.assistant(
            "Let me look around first.",
            [
                ToolCall("call_1", "list_files", {"path": "."}),
                ToolCall("call_2", "execute_bash_script", {"script": "cat README.md"}),
            ],
        ),
        Message.tool("call_1", "README.md\nsrc/"),
        Message.tool("call_2", "# Project"),
        Message.assistant("", [ToolCall("call_3", "execute_bash_script", {"script": "python run.py"})]),
        Message.tool("call_3", '{"IoU": 0.5}'),
        Message.user("You have 10 steps left."),
    ]


# --- round trips --------------------------------------------------------------------------------


def test_openai_round_trips_text_tool_calls_and_usage(fake_llm):
    fake_llm.script(
        [FakeTurn(text="Listing.", tool_calls=[("list_files", {"path": "src"})], input_tokens=1200, output_tokens=300)]
    )
    completion = openai_model(fake_llm).complete(
        [Message.system("sys"), Message.user("go")], tools=TOOLS, max_tokens=512, temperature=0.2
    )

    assert completion == Completion(
        text="Listing.",
        tool_calls=[ToolCall("call_fake_1_0", "list_files", {"path": "src"})],
        usage=Usage(input_tokens=1200, output_tokens=300),
        cost=pytest.approx((1200 * 2.50 + 300 * 10.00) / 1e6),
        model="gpt-4o",
        raw_stop_reason="tool_calls",
    )
    [request] = fake_llm.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.json == {
        "model": "gpt-4o",
        "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "go"}],
        "tools": [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
            }
            for t in TOOLS
        ],
        "max_tokens": 512,
        "temperature": 0.2,
    }


def test_anthropic_round_trips_text_tool_calls_and_usage(fake_llm):
    fake_llm.script(
        [
            FakeTurn(
                text="Listing.",
                tool_calls=[("list_files", {"path": "src"}), ("execute_bash_script", {"script": "ls"})],
                input_tokens=2000,
                output_tokens=100,
            )
        ]
    )
    completion = anthropic_model(fake_llm).complete(
        [Message.system("sys"), Message.user("go")], tools=TOOLS, max_tokens=512
    )

    assert completion == Completion(
        text="Listing.",
        tool_calls=[
            ToolCall("toolu_fake_1_0", "list_files", {"path": "src"}),
            ToolCall("toolu_fake_1_1", "execute_bash_script", {"script": "ls"}),
        ],
        usage=Usage(input_tokens=2000, output_tokens=100),
        cost=pytest.approx((2000 * 3.00 + 100 * 15.00) / 1e6),
        model="claude-3-5-sonnet-20241022",
        raw_stop_reason="tool_use",
    )
    [request] = fake_llm.requests
    assert request.path == "/v1/messages"
    assert request.headers["authorization"] == f"Bearer {KEY}"  # how anthropic 2.x sends the key
    assert request.json == {
        "model": "claude-3-5-sonnet-20241022",
        "max_tokens": 512,
        "system": "sys",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "go"}]}],
        "tools": [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in TOOLS],
    }


def test_plain_text_answers_have_no_tool_calls(fake_llm):
    fake_llm.script([FakeTurn(text='{"IoU": 0.71}'), FakeTurn(text='{"IoU": 0.71}')])
    for model in (openai_model(fake_llm), anthropic_model(fake_llm)):
        completion = model.complete([Message.user("answer")], tools=[])
        assert (completion.text, completion.tool_calls) == ('{"IoU": 0.71}', [])
        assert completion.raw_stop_reason in ("stop", "end_turn")
    # No tools offered: the key is left out (OpenAI rejects an empty list).
    assert all("tools" not in r.json for r in fake_llm.requests)


# --- message conversion ------------------------------------------------------------------------


def test_openai_multi_step_conversation_is_sent_as_chat_messages(fake_llm):
    fake_llm.script([FakeTurn(text="ok")])
    openai_model(fake_llm).complete(conversation(), tools=TOOLS)

    assert fake_llm.requests[0].json["messages"] == [
        {"role": "system", "content": "You are a careful research engineer."},
        {"role": "user", "content": "Implement the masked function and report the IoU."},
        {
            "role": "assistant",
            "content": "Let me look around first.",
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "list_files", "arguments": '{"path": "."}'}},
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "execute_bash_script", "arguments": '{"script": "cat README.md"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "README.md\nsrc/"},
        {"role": "tool", "tool_call_id": "call_2", "content": "# Project"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_3",
                    "type": "function",
                    "function": {"name": "execute_bash_script", "arguments": '{"script": "python run.py"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_3", "content": '{"IoU": 0.5}'},
        {"role": "user", "content": "You have 10 steps left."},
    ]


def test_anthropic_multi_step_conversation_is_sent_as_content_blocks(fake_llm):
    fake_llm.script([FakeTurn(text="ok")])
    anthropic_model(fake_llm).complete(conversation(), tools=TOOLS)

    body = fake_llm.requests[0].json
    assert body["system"] == "You are a careful research engineer."
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Implement the masked function and report the IoU."}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look around first."},
                {"type": "tool_use", "id": "call_1", "name": "list_files", "input": {"path": "."}},
                {"type": "tool_use", "id": "call_2", "name": "execute_bash_script", "input": {"script": "cat README.md"}},
            ],
        },
        # Both results in one user message.
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "README.md\nsrc/"},
                {"type": "tool_result", "tool_use_id": "call_2", "content": "# Project"},
            ],
        },
        # No empty text block when the assistant only called a tool.
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "call_3", "name": "execute_bash_script", "input": {"script": "python run.py"}}
            ],
        },
        # The note after a tool result joins its user turn: roles keep alternating.
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_3", "content": '{"IoU": 0.5}'},
                {"type": "text", "text": "You have 10 steps left."},
            ],
        },
    ]


def test_anthropic_keeps_a_later_system_message_in_place_and_drops_empty_turns(fake_llm):
    fake_llm.script([FakeTurn(text="ok")])
    anthropic_model(fake_llm).complete(
        [
            Message.system("rules"),
            Message.system("more rules"),
            Message.user("task"),
            Message.assistant(""),  # the model said nothing: the API would reject empty content
            Message.system("Summary of earlier steps: ..."),
        ],
        tools=[],
    )
    body = fake_llm.requests[0].json
    assert body["system"] == "rules\n\nmore rules"
    assert body["messages"] == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "task"}, {"type": "text", "text": "Summary of earlier steps: ..."}],
        }
    ]


def test_completion_as_message_continues_the_conversation(fake_llm):
    fake_llm.script(
        [
            FakeTurn(tool_calls=[("list_files", {"path": "."})]),
            FakeTurn(text="done"),
            FakeTurn(tool_calls=[("list_files", {"path": "."})]),
            FakeTurn(text="done"),
        ]
    )
    for model in (openai_model(fake_llm), anthropic_model(fake_llm)):
        history = [Message.user("go")]
        first = model.complete(history, tools=TOOLS)
        history += [first.as_message(), Message.tool(first.tool_calls[0].id, "a.py")]
        assert model.complete(history, tools=TOOLS).text == "done"  # the strict fake accepted the pairing


# --- cost ----------------------------------------------------------------------------------------


def test_unknown_model_costs_none_and_the_call_still_succeeds(fake_llm):
    fake_llm.script([FakeTurn(text="hi", input_tokens=50, output_tokens=7), FakeTurn(text="hi")])
    local = OpenAIChatModel("llama3.1:8b", base_url=fake_llm.base_url_openai)
    completion = local.complete([Message.user("hi")], tools=[])
    assert (completion.text, completion.usage, completion.cost) == ("hi", Usage(50, 7), None)
    assert anthropic_model(fake_llm, model="claude-from-the-future").complete([Message.user("hi")], tools=[]).cost is None


def test_cost_uses_the_dated_snapshot_the_server_reports(fake_llm):
    fake_llm.script([FakeTurn(text="hi", model="gpt-4o-mini-2024-07-18", input_tokens=1_000_000, output_tokens=0)])
    completion = openai_model(fake_llm, model="gpt-4o-mini").complete([Message.user("hi")], tools=[])
    assert completion.model == "gpt-4o-mini-2024-07-18"
    assert completion.cost == pytest.approx(0.15)


@pytest.mark.parametrize(
    "model, expected",
    [
        ("gpt-4o", (2.50, 10.00)),
        ("gpt-4o-2024-08-06", (2.50, 10.00)),  # dated snapshot: prefix
        ("gpt-4o-2024-05-13", (5.00, 15.00)),  # exact entry wins over the prefix
        ("gpt-4o-mini-2024-07-18", (0.15, 0.60)),  # longest prefix, not gpt-4o
        ("gpt-4.1-2025-04-14", (2.00, 8.00)),  # not gpt-4
        ("gpt-4-0613", (30.00, 60.00)),
        ("o3-mini-2025-01-31", (1.10, 4.40)),
        ("claude-3-5-sonnet-20241022", (3.00, 15.00)),
        ("claude-3-7-sonnet-latest", (3.00, 15.00)),
        ("claude-sonnet-4-20250514", (3.00, 15.00)),
        ("claude-opus-4-1-20250805", (15.00, 75.00)),
        ("gpt-4oops", None),
        ("gpt-4-32k", None),  # not a snapshot of gpt-4: a different model with its own price
        ("claude-opus-4-7", None),  # not claude-opus-4's $15/$75
        ("claude-sonnet-4-6", (3.00, 15.00)),
        ("claude-opus-5-5", (4.00, 20.00)),
        ("llama3.1:8b", None),
    ],
)
def test_price_lookup(model, expected):
    price = pricing.price_for(model)
    assert (price and (price.input, price.output)) == expected


def test_cost_arithmetic_and_unknown_model():
    assert pricing.cost("claude-3-7-sonnet-20250219", Usage(10_000, 2_000)) == pytest.approx(0.03 + 0.03)
    assert pricing.cost("my-model", Usage(10_000, 2_000)) is None


def test_prices_file_extends_and_overrides_the_table(tmp_path, monkeypatch, fake_llm):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"qwen2.5-coder-32b": {"input": 0.2, "output": 0.6}, "gpt-4o": {"input": 1, "output": 2}}))
    monkeypatch.setenv("LLM_PRICES_FILE", str(prices))

    assert pricing.cost("gpt-4o", Usage(1_000_000, 1_000_000)) == pytest.approx(3.0)
    assert pricing.cost("gpt-4o-mini", Usage(1_000_000, 0)) == pytest.approx(0.15)  # built-ins stay
    fake_llm.script([FakeTurn(text="hi", input_tokens=1_000_000, output_tokens=1_000_000)])
    completion = OpenAIChatModel("qwen2.5-coder-32b", base_url=fake_llm.base_url_openai).complete(
        [Message.user("hi")], tools=[]
    )
    assert completion.cost == pytest.approx(0.8)


def test_prices_file_is_read_once(tmp_path, monkeypatch):
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"mine": {"input": 1, "output": 1}}))
    monkeypatch.setenv("LLM_PRICES_FILE", str(prices))
    assert pricing.cost("mine", Usage(1_000_000, 0)) == pytest.approx(1.0)
    prices.write_text(json.dumps({"mine": {"input": 9, "output": 9}}))
    assert pricing.cost("mine", Usage(1_000_000, 0)) == pytest.approx(1.0)
    pricing.reload_prices()
    assert pricing.cost("mine", Usage(1_000_000, 0)) == pytest.approx(9.0)


@pytest.mark.parametrize(
    "content", ["{not json", json.dumps(["a list"]), json.dumps({"m": {"input": "cheap"}}), None]
)
def test_a_broken_prices_file_is_ignored_with_a_warning(tmp_path, monkeypatch, caplog, content):
    prices = tmp_path / "prices.json"
    if content is not None:  # None: the file does not exist
        prices.write_text(content)
    monkeypatch.setenv("LLM_PRICES_FILE", str(prices))
    assert pricing.cost("m", Usage(1, 1)) is None
    assert pricing.cost("gpt-4o", Usage(1_000_000, 0)) == pytest.approx(2.5)
    assert "LLM_PRICES_FILE" in caplog.text


# --- keys ----------------------------------------------------------------------------------------


def test_missing_openai_key_names_the_environment_variable():
    with pytest.raises(MissingAPIKey, match="OPENAI_API_KEY") as caught:
        OpenAIChatModel("gpt-4o")
    assert caught.value.retryable is False and caught.value.env_var == "OPENAI_API_KEY"
    with pytest.raises(MissingAPIKey, match="OPENAI_API_KEY"):
        model_from_name("openai:gpt-4o")


def test_missing_anthropic_key_names_the_environment_variable():
    with pytest.raises(MissingAPIKey, match="ANTHROPIC_API_KEY"):
        AnthropicModel("claude-3-5-sonnet-20241022")
    with pytest.raises(MissingAPIKey, match="ANTHROPIC_API_KEY"):
        model_from_name("anthropic:claude-3-5-sonnet-20241022")


def test_keys_come_from_the_environment(fake_llm, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env")
    fake_llm.script([FakeTurn(text="a"), FakeTurn(text="b")])
    OpenAIChatModel("gpt-4o", base_url=fake_llm.base_url_openai).complete([Message.user("x")], tools=[])
    AnthropicModel("claude-sonnet-4-6", base_url=fake_llm.base_url_anthropic).complete(
        [Message.user("x")], tools=[]
    )
    assert fake_llm.requests[0].headers["authorization"] == "Bearer sk-from-env"
    assert fake_llm.requests[1].headers["authorization"] == "Bearer sk-ant-from-env"


def test_a_local_server_needs_no_key(fake_llm):
    fake_llm.script([FakeTurn(text="hi")])
    model = model_from_name(f"openai-compatible:qwen2.5:7b@{fake_llm.base_url_openai}")
    assert model.complete([Message.user("hi")], tools=[]).text == "hi"
    assert fake_llm.requests[0].headers["authorization"] == f"Bearer {PLACEHOLDER_API_KEY}"
    assert fake_llm.requests[0].json["model"] == "qwen2.5:7b"


# --- retries and errors --------------------------------------------------------------------------


@pytest.mark.parametrize("make_model", [openai_model, anthropic_model])
def test_rate_limit_then_success_is_retried_transparently(fake_llm, make_model):
    fake_llm.script([FakeError(429), FakeTurn(text="after the wait")])
    started = time.monotonic()
    assert make_model(fake_llm).complete([Message.user("hi")], tools=TOOLS).text == "after the wait"
    assert time.monotonic() - started < 2  # retry-after-ms: 1 replaced the SDK's 0.5 s+ backoff
    first, second = fake_llm.requests
    assert first.json == second.json
    assert second.headers["x-stainless-retry-count"] == "1"


@pytest.mark.parametrize("make_model", [openai_model, anthropic_model])
def test_persistent_server_errors_end_in_a_retryable_model_error(fake_llm, make_model):
    fake_llm.script([FakeError(500, times=10, message="upstream exploded")])
    with pytest.raises(ModelError, match="upstream exploded") as caught:
        make_model(fake_llm, max_retries=3).complete([Message.user("hi")], tools=[])
    assert (caught.value.retryable, caught.value.status) == (True, 500)
    assert "after 3 retries" in str(caught.value)
    assert len(fake_llm.requests) == 4  # the first attempt and three retries
    assert fake_llm.remaining == 6


@pytest.mark.parametrize("make_model, env_var", [(openai_model, "OPENAI_API_KEY"), (anthropic_model, "ANTHROPIC_API_KEY")])
def test_authentication_failure_is_not_retried(fake_llm, make_model, env_var):
    fake_llm.script([FakeError(401, times=5, message="invalid x-api-key")])
    with pytest.raises(ModelError) as caught:
        make_model(fake_llm).complete([Message.user("hi")], tools=[])
    error = caught.value
    assert (error.retryable, error.status) == (False, 401)
    assert "invalid x-api-key" in str(error) and env_var in str(error)
    assert len(fake_llm.requests) == 1


@pytest.mark.parametrize("make_model", [openai_model, anthropic_model])
def test_bad_request_is_not_retryable(fake_llm, make_model):
    fake_llm.script([FakeError(400, message="prompt is too long")])
    with pytest.raises(ModelError, match="prompt is too long") as caught:
        make_model(fake_llm).complete([Message.user("hi")], tools=[])
    assert (caught.value.retryable, caught.value.status) == (False, 400)


def test_unreachable_server_is_a_retryable_model_error():
    with FakeLLMServer() as gone:
        base_url = gone.base_url_openai
    with pytest.raises(ModelError) as caught:
        OpenAIChatModel("gpt-4o", base_url=base_url, max_retries=0).complete([Message.user("hi")], tools=[])
    assert caught.value.retryable is True and caught.value.status is None


def test_a_slow_answer_past_the_timeout_is_a_retryable_model_error(fake_llm):
    fake_llm.script([FakeTurn(text="too late", delay=0.6)])
    model = openai_model(fake_llm, timeout=0.2, max_retries=0)
    with pytest.raises(ModelError, match="timed out") as caught:
        model.complete([Message.user("hi")], tools=[])
    assert caught.value.retryable is True and caught.value.status is None


# --- malformed tool calls ------------------------------------------------------------------------


def test_invalid_tool_call_json_is_handed_to_the_agent_not_raised(fake_llm):
    raw = '{"script": "echo hi'
    fake_llm.script(
        [
            FakeTurn(tool_calls=[("execute_bash_script", raw), ("list_files", "[1, 2]")]),
            FakeTurn(text="fixed it"),
        ]
    )
    model = openai_model(fake_llm)
    completion = model.complete([Message.user("go")], tools=TOOLS)
    bad, not_an_object = completion.tool_calls
    assert bad.arguments == {"__invalid_json__": raw} and bad.invalid_arguments == raw
    assert not_an_object.invalid_arguments == "[1, 2]"

    # The agent reports the problem; the call goes back into the history as valid JSON.
    history = [
        Message.user("go"),
        completion.as_message(),
        Message.tool(bad.id, "error: arguments are not valid JSON"),
        Message.tool(not_an_object.id, "error: arguments must be a JSON object"),
    ]
    assert model.complete(history, tools=TOOLS).text == "fixed it"
    sent = fake_llm.requests[1].json["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert json.loads(sent) == {"__invalid_json__": raw}


@pytest.mark.parametrize(
    "raw, expected",
    [("", {}), (None, {}), ('{"a": 1}', {"a": 1}), ("null", {"__invalid_json__": "null"})],
)
def test_parse_arguments(raw, expected):
    assert parse_arguments(raw) == expected


# --- request parameters --------------------------------------------------------------------------


def test_official_openai_endpoint_gets_max_completion_tokens_and_reasoning_models_no_temperature():
    gpt = OpenAIChatModel("gpt-4o", api_key=KEY)
    params = gpt.request_params([Message.user("x")], tools=[], max_tokens=100, temperature=0.0)
    assert (params["max_completion_tokens"], params["temperature"]) == (100, 0.0)
    assert "max_tokens" not in params
    reasoning = OpenAIChatModel("o3-mini", api_key=KEY)
    assert "temperature" not in reasoning.request_params([Message.user("x")], tools=[], max_tokens=100, temperature=0.0)


def test_anthropic_temperature_only_on_request(fake_llm):
    fake_llm.script([FakeTurn(text="a"), FakeTurn(text="b")])
    anthropic_model(fake_llm).complete([Message.user("x")], tools=[], temperature=0.3)
    anthropic_model(fake_llm, send_temperature=True).complete([Message.user("x")], tools=[], temperature=0.3)
    assert "temperature" not in fake_llm.requests[0].json
    assert fake_llm.requests[1].json["temperature"] == 0.3


# --- model_from_name -----------------------------------------------------------------------------


def test_model_from_name_openai_and_anthropic():
    gpt = model_from_name("openai:gpt-4o", api_key=KEY, max_retries=1)
    assert isinstance(gpt, OpenAIChatModel)
    assert (gpt.model, gpt.base_url, gpt.max_retries, gpt.name) == ("gpt-4o", None, 1, "openai:gpt-4o")
    claude = model_from_name(" anthropic:claude-3-5-sonnet-20241022 ", api_key=KEY)
    assert isinstance(claude, AnthropicModel)
    assert (claude.model, claude.name) == ("claude-3-5-sonnet-20241022", "anthropic:claude-3-5-sonnet-20241022")


def test_model_from_name_openai_compatible():
    ollama = model_from_name("openai-compatible:llama3.1:8b@http://localhost:11434/v1")
    assert isinstance(ollama, OpenAIChatModel)
    assert (ollama.model, ollama.base_url) == ("llama3.1:8b", "http://localhost:11434/v1")
    assert ollama.name == "openai-compatible:llama3.1:8b@http://localhost:11434/v1"
    assert model_from_name(ollama.name).name == ollama.name  # names round-trip

    vllm = model_from_name("openai-compatible:Qwen/Qwen2.5-Coder-32B", base_url="http://gpu:8000/v1")
    assert (vllm.model, vllm.base_url) == ("Qwen/Qwen2.5-Coder-32B", "http://gpu:8000/v1")
    # A URL with credentials still splits at the first "@http".
    proxied = model_from_name("openai-compatible:m@https://user:pw@proxy.example/v1")
    assert (proxied.model, proxied.base_url) == ("m", "https://user:pw@proxy.example/v1")
    gateway = model_from_name("anthropic:claude-sonnet-4-20250514@http://gateway:4000")
    assert (gateway.base_url, gateway.name) == ("http://gateway:4000", "anthropic:claude-sonnet-4-20250514@http://gateway:4000")


@pytest.mark.parametrize(
    "spec, message",
    [
        ("gemini:gemini-2.0-flash", "unknown LLM provider 'gemini'.*openai, anthropic, openai-compatible"),
        ("gpt-4o", "must be <provider>:<model>.*openai, anthropic, openai-compatible"),
        ("openai:", "must be <provider>:<model>"),
        ("openai-compatible:llama3", "needs a base URL"),
    ],
)
def test_model_from_name_rejects_bad_specs(spec, message):
    with pytest.raises(ValueError, match=message):
        model_from_name(spec)


@pytest.mark.parametrize(
    "spec, module",
    [
        ("openai:gpt-4o", "runs.agents.llm.openai_chat"),
        (" anthropic:claude-3-5-sonnet-20241022 ", "runs.agents.llm.anthropic_messages"),
        ("openai-compatible:llama3.1:8b@http://localhost:11434/v1", "runs.agents.llm.openai_chat"),
        ("anthropic:claude-sonnet-4-20250514@http://gateway:4000", "runs.agents.llm.anthropic_messages"),
        ("", None),
        ("gpt-4o", None),
        ("openai:", None),
        ("gemini:gemini-2.0-flash", None),
    ],
)
def test_provider_module_names_the_adapter_a_spec_needs(spec, module):
    assert provider_module(spec) == module


def test_the_sdks_are_imported_only_when_a_model_of_their_provider_is_built():
    # A fresh interpreter: this one imported both SDKs long ago.
    lines = in_fresh_django("""
import sys
import runs.agents, runs.evaluation.worker, runs.evaluation.services, leaderboard.views
from runs.agents.llm import model_from_name
loaded = lambda: [sdk for sdk in ("anthropic", "openai") if sdk in sys.modules]
print(loaded())
model_from_name("anthropic:claude-3-5-sonnet-20241022", api_key="x")
print(loaded())
from runs.agents.llm import OpenAIChatModel
print(loaded(), OpenAIChatModel.__name__)
""")
    assert lines[-3:] == ["[]", "['anthropic']", "['anthropic', 'openai'] OpenAIChatModel"]


# --- the fake server itself ----------------------------------------------------------------------


def test_an_exhausted_script_fails_clearly_and_is_not_retried(fake_llm):
    fake_llm.script([FakeTurn(text="only one")])
    model = openai_model(fake_llm)
    model.complete([Message.user("1")], tools=[])
    with pytest.raises(ModelError, match="script exhausted at request #2"):
        model.complete([Message.user("2")], tools=[])
    assert len(fake_llm.requests) == 2


def test_reactive_script_and_delay(fake_llm):
    def echo_last(request):
        return FakeTurn(text=f"you said {request['messages'][-1]['content']}", delay=0.3)

    fake_llm.script([echo_last])
    started = time.monotonic()
    assert openai_model(fake_llm).complete([Message.user("ping")], tools=[]).text == "you said ping"
    assert time.monotonic() - started >= 0.3


@pytest.mark.parametrize("make_model", [openai_model, anthropic_model])
def test_fake_rejects_a_history_that_broke_tool_pairing(fake_llm, make_model):
    # What a careless sliding window produces: the tool result survives, its call does not.
    fake_llm.script([FakeTurn(text="never sent")])
    with pytest.raises(ModelError, match="tool") as caught:
        make_model(fake_llm).complete([Message.user("task"), Message.tool("call_9", "output")], tools=TOOLS)
    assert (caught.value.status, caught.value.retryable) == (400, False)
    assert fake_llm.remaining == 1  # a rejected request does not use up the script


def test_message_validation():
    with pytest.raises(ValueError, match="tool_call_id"):
        Message("tool", "output")
    with pytest.raises(ValueError, match="role"):
        Message("developer", "x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="only assistant"):
        Message("user", "x", [ToolCall("c", "t", {})])


def test_arguments_nested_a_thousand_levels_deep_are_invalid_json_not_a_crash():
    raw = '{"command": "true", "x": ' + "[" * 5000 + "]" * 5000 + "}"
    assert parse_arguments(raw) == {INVALID_JSON_KEY: raw}
