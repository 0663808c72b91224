"""A deterministic fake LLM provider behind a real HTTP server on loopback.

It speaks just enough of the OpenAI chat completions API (`POST /v1/chat/completions`) and the
Anthropic messages API (`POST /v1/messages`) for the official SDKs to talk to it unmodified, so tests
exercise the real clients, their retries and their parsing. Responses replay a script shared by
both endpoints, one entry per request:

- `FakeTurn(text=..., tool_calls=[("name", {args})], input_tokens=..., output_tokens=...)`
- `FakeError(status=429, times=2)`: the next `times` requests fail with that status
- a callable `request_json -> FakeTurn | FakeError`, for scripts that react to what was sent

Every request is recorded (`.requests`) so tests can assert on exactly what the client sent. Like
the real APIs, requests whose tool calls and tool results do not pair up are rejected with a 400
(`strict=False` turns that off), so an agent that trims its history carelessly fails here too.
Once the script is exhausted every request gets a 500 that the SDKs do not retry
(`x-should-retry: false`) whose message says so.

It also answers the OpenAI embeddings API (`POST /v1/embeddings`), outside the script: each input
gets `server.embed(text)`, by default `fake_embedding`, a hashed bag of words, so texts sharing
words are close. Replace `server.embed` to script other vectors; if it raises, the request gets
a 500 the SDK does not retry.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import re
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Union

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"
EMBEDDINGS_PATH = "/v1/embeddings"
EMBEDDING_DIMENSIONS = 64
CREATED = 1_700_000_000  # a fixed timestamp keeps responses byte-for-byte deterministic


@dataclass
class FakeTurn:
    """One scripted model reply.

    `tool_calls` holds (name, arguments) pairs; arguments given as a str are sent verbatim as the
    OpenAI `arguments` string (to script invalid JSON). `delay` (seconds) is slept before
    answering, for time-budget tests; a delay beyond the client's timeout makes the SDK retry,
    which takes the next entry, so such tests want `max_retries=0`. `stop_reason` overrides the natural one (`stop`/`tool_calls`,
    `end_turn`/`tool_use`); `model` overrides echoing the requested model.
    """

    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any] | str]] = field(default_factory=list)
    input_tokens: int = 10
    output_tokens: int = 5
    delay: float = 0.0
    stop_reason: str | None = None
    model: str | None = None


@dataclass
class FakeError:
    """`times` consecutive error responses with HTTP `status`.

    `retry_after_ms` is sent as `retry-after-ms` (and rounded down as `retry-after`) so the SDKs'
    backoff waits milliseconds instead of seconds; None leaves the headers out.
    """

    status: int
    times: int = 1
    message: str | None = None
    retry_after_ms: int | None = 1
    delay: float = 0.0


Reaction = Callable[[dict[str, Any]], Union[FakeTurn, FakeError]]
ScriptEntry = Union[FakeTurn, FakeError, Reaction]


@dataclass
class RecordedRequest:
    """A request the server received: path, headers (lower-case names) and the parsed JSON body."""

    path: str
    headers: dict[str, str]
    json: Any

    @property
    def api(self) -> str:
        return "anthropic" if self.path == ANTHROPIC_PATH else "openai"


class _Reject(Exception):
    """A request the real API would refuse with 400."""


class FakeLLMServer:
    """The fake provider. Use as a context manager, or `start()` / `stop()`.

    `base_url_openai` and `base_url_anthropic` are what to give the SDK clients as `base_url`.
    """

    def __init__(self, *, strict: bool = True) -> None:
        self.strict = strict
        self.requests: list[RecordedRequest] = []
        self._script: deque[ScriptEntry] = deque()
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.embed: Callable[[str], list[float]] = fake_embedding

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> FakeLLMServer:
        server = self

        class Handler(_Handler):
            fake = server

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def base_url_openai(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def base_url_anthropic(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # --- script ----------------------------------------------------------------------------

    def script(self, entries: list[ScriptEntry]) -> FakeLLMServer:
        """Replace whatever is left of the script with `entries`."""
        with self._lock:
            self._script = deque()
            for entry in entries:
                if isinstance(entry, FakeError):
                    # Expand so each request consumes one entry, whatever its kind.
                    self._script.extend([entry] * entry.times)
                else:
                    self._script.append(entry)
        return self

    @property
    def remaining(self) -> int:
        """Script entries not consumed yet (a FakeError with times=n counts n)."""
        with self._lock:
            return len(self._script)

    def requests_to(self, api: str) -> list[RecordedRequest]:
        """The recorded requests to one API, "openai" or "anthropic"."""
        return [r for r in self.requests if r.api == api]

    # --- serving ---------------------------------------------------------------------------

    def _check(self, api: str, body: Any) -> str | None:
        """Why the real API would refuse this request with a 400, or None."""
        if not isinstance(body, dict):
            return "request body is not a JSON object"
        if not self.strict:
            return None
        try:
            (_check_anthropic if api == "anthropic" else _check_openai)(body)
        except _Reject as exc:
            return str(exc)
        except (AttributeError, KeyError, TypeError) as exc:  # e.g. a message that is not an object
            return f"malformed request ({type(exc).__name__}: {exc})"
        return None

    def handle(self, path: str, headers: dict[str, str], raw: bytes) -> tuple[int, dict[str, str], dict]:
        """Status, extra headers and JSON body answering one request."""
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        if path == EMBEDDINGS_PATH:
            with self._lock:
                self.requests.append(RecordedRequest(path, headers, body))
            return self._embeddings(body)
        api = "anthropic" if path == ANTHROPIC_PATH else "openai"
        problem = self._check(api, body) if path in (OPENAI_PATH, ANTHROPIC_PATH) else None
        with self._lock:
            # Recording and taking the next entry together keeps concurrent requests in step.
            self.requests.append(RecordedRequest(path, headers, body))
            number = len(self.requests)
            valid = path in (OPENAI_PATH, ANTHROPIC_PATH) and problem is None
            # A request the real API would refuse does not consume a script entry.
            entry = self._script.popleft() if valid and self._script else None
        if path not in (OPENAI_PATH, ANTHROPIC_PATH):
            return 404, {}, {"error": {"message": f"fake LLM server: no route {path}", "type": "not_found"}}
        if problem is not None:
            return _error(api, 400, f"fake LLM server: {problem}")
        if entry is None:
            status, extra, payload = _error(
                api, 500, f"fake LLM server: script exhausted at request #{number} ({path})"
            )
            return status, {**extra, "x-should-retry": "false"}, payload
        if not isinstance(entry, (FakeTurn, FakeError)):
            try:
                entry = entry(body)
            except Exception as exc:  # a broken reactive script: say so instead of dropping the connection
                status, extra, payload = _error(
                    api, 500, f"fake LLM server: script callable raised {type(exc).__name__}: {exc}"
                )
                return status, {**extra, "x-should-retry": "false"}, payload
        time.sleep(entry.delay)
        if isinstance(entry, FakeError):
            status, extra, payload = _error(api, entry.status, entry.message)
            if entry.retry_after_ms is not None:
                extra["retry-after-ms"] = str(entry.retry_after_ms)
                extra["retry-after"] = str(entry.retry_after_ms // 1000)
            return status, extra, payload
        model = entry.model or body.get("model", "fake-model")
        if api == "anthropic":
            return 200, {"request-id": f"req_fake_{number}"}, _anthropic_message(entry, number, model)
        return 200, {"x-request-id": f"req_fake_{number}"}, _openai_completion(entry, number, model)


    def _embeddings(self, body: Any) -> tuple[int, dict[str, str], dict]:
        """The embeddings response: one `self.embed(text)` per input, floats or base64 as asked."""
        if not isinstance(body, dict) or not isinstance(body.get("model"), str):
            return _error("openai", 400, "fake LLM server: 'model' (string) and 'input' are required")
        inputs = body.get("input")
        inputs = [inputs] if isinstance(inputs, str) else inputs
        if not isinstance(inputs, list) or not inputs or not all(isinstance(t, str) and t for t in inputs):
            return _error("openai", 400, "fake LLM server: 'input' must be a non-empty string or array of them")
        try:
            vectors = [self.embed(text) for text in inputs]
        except Exception as exc:  # a broken or deliberately failing embed: say so, do not drop the connection
            status, extra, payload = _error("openai", 500, f"fake LLM server: embed raised {type(exc).__name__}: {exc}")
            return status, {**extra, "x-should-retry": "false"}, payload
        as_base64 = body.get("encoding_format") == "base64"
        data = [
            {
                "object": "embedding",
                "index": index,
                "embedding": base64.b64encode(struct.pack(f"<{len(v)}f", *v)).decode() if as_base64 else v,
            }
            for index, v in enumerate(vectors)
        ]
        tokens = sum(len(text.split()) for text in inputs)
        usage = {"prompt_tokens": tokens, "total_tokens": tokens}
        return 200, {}, {"object": "list", "data": data, "model": body["model"], "usage": usage}


def fake_embedding(text: str, dimensions: int = EMBEDDING_DIMENSIONS) -> list[float]:
    """A deterministic unit vector for `text`: each lower-case word adds to a coordinate chosen by
    its hash, so texts sharing words have a high cosine similarity."""
    vector = [0.0] * dimensions
    for word in re.findall(r"[a-z0-9]+", text.lower()):
        vector[int(hashlib.sha256(word.encode()).hexdigest(), 16) % dimensions] += 1.0
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


class _Handler(BaseHTTPRequestHandler):
    fake: FakeLLMServer
    protocol_version = "HTTP/1.1"  # keep-alive, as the SDKs' connection pools expect

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length)
        headers = {name.lower(): value for name, value in self.headers.items()}
        try:
            status, extra, payload = self.fake.handle(self.path.split("?")[0], headers, raw)
        except Exception as exc:  # a bug here must read as one, not as a dropped connection the SDK retries
            status, extra = 500, {"x-should-retry": "false"}
            payload = {"error": {"message": f"fake LLM server crashed: {type(exc).__name__}: {exc}"}}
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in extra.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # keep test output clean; .requests has everything


# --- response bodies --------------------------------------------------------------------------

_ERROR_TYPES = {
    400: ("invalid_request_error", "invalid_request_error"),
    401: ("invalid_request_error", "authentication_error"),
    403: ("insufficient_quota", "permission_error"),
    404: ("invalid_request_error", "not_found_error"),
    429: ("rate_limit_exceeded", "rate_limit_error"),
    529: ("server_error", "overloaded_error"),
}


def _error(api: str, status: int, message: str | None) -> tuple[int, dict[str, str], dict]:
    openai_type, anthropic_type = _ERROR_TYPES.get(status, ("server_error", "api_error"))
    message = message or f"fake LLM server: scripted HTTP {status}"
    if api == "anthropic":
        return status, {}, {"type": "error", "error": {"type": anthropic_type, "message": message}}
    return status, {}, {"error": {"message": message, "type": openai_type, "param": None, "code": None}}


def _openai_completion(turn: FakeTurn, number: int, model: str) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": turn.text or None, "refusal": None}
    if turn.tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_fake_{number}_{i}",
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                },
            }
            for i, (name, arguments) in enumerate(turn.tool_calls)
        ]
    return {
        "id": f"chatcmpl-fake-{number}",
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "system_fingerprint": "fp_fake",
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": turn.stop_reason or ("tool_calls" if turn.tool_calls else "stop"),
            }
        ],
        "usage": {
            "prompt_tokens": turn.input_tokens,
            "completion_tokens": turn.output_tokens,
            "total_tokens": turn.input_tokens + turn.output_tokens,
        },
    }


def _anthropic_message(turn: FakeTurn, number: int, model: str) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": turn.text}] if turn.text else []
    for i, (name, arguments) in enumerate(turn.tool_calls):
        content.append(
            {"type": "tool_use", "id": f"toolu_fake_{number}_{i}", "name": name, "input": arguments}
        )
    return {
        "id": f"msg_fake_{number}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": turn.stop_reason or ("tool_use" if turn.tool_calls else "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": turn.input_tokens, "output_tokens": turn.output_tokens},
    }


# --- request checks the real APIs also make -------------------------------------------------


def _check_openai(body: dict[str, Any]) -> None:
    if not isinstance(body.get("model"), str) or not isinstance(body.get("messages"), list):
        raise _Reject("'model' (string) and 'messages' (array) are required")
    if "tools" in body and not body["tools"]:
        raise _Reject("[] is too short - 'tools'")
    pending: set[str] = set()  # tool_call ids of the last assistant message not yet answered
    answerable: set[str] = set()
    for i, m in enumerate(body["messages"]):
        role = m.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool"):
            raise _Reject(f"messages[{i}]: invalid role {role!r}")
        if role == "tool":
            if m.get("tool_call_id") not in answerable:
                raise _Reject(
                    f"messages[{i}]: messages with role 'tool' must be a response to a preceding "
                    "message with 'tool_calls'"
                )
            pending.discard(m["tool_call_id"])
            continue
        if pending:
            raise _Reject(
                f"messages[{i}]: an assistant message with 'tool_calls' must be followed by tool "
                f"messages responding to each 'tool_call_id' (missing: {sorted(pending)})"
            )
        answerable = set()
        if role == "assistant":
            for call in m.get("tool_calls") or []:
                if not isinstance(call.get("function", {}).get("arguments"), str):
                    raise _Reject(f"messages[{i}]: tool call arguments must be a string")
                answerable.add(call["id"])
            pending = set(answerable)
    if pending:
        raise _Reject(f"tool calls without tool messages responding to them: {sorted(pending)}")


def _check_anthropic(body: dict[str, Any]) -> None:
    if not isinstance(body.get("model"), str) or not isinstance(body.get("max_tokens"), int):
        raise _Reject("'model' (string) and 'max_tokens' (integer) are required")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _Reject("'messages' must be a non-empty array")
    previous_tool_uses: set[str] = set()
    for i, m in enumerate(messages):
        role = m.get("role")
        if role not in ("user", "assistant"):
            raise _Reject(f"messages.{i}: unexpected role {role!r}; use the top-level 'system' parameter")
        content = m.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not blocks:
            raise _Reject(f"messages.{i}: all messages must have non-empty content")
        for block in blocks:
            if block.get("type") == "text" and not block.get("text"):
                raise _Reject(f"messages.{i}: text content blocks must be non-empty")
        results = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
        if results and (role != "user" or not results <= previous_tool_uses):
            raise _Reject(
                f"messages.{i}: unexpected `tool_use_id` found in `tool_result` blocks: "
                "each tool_result block must have a corresponding tool_use block in the previous message"
            )
        if previous_tool_uses - results:
            raise _Reject(
                f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately "
                f"after: {sorted(previous_tool_uses - results)}"
            )
        previous_tool_uses = set()
        if role == "assistant":
            previous_tool_uses = {b.get("id") for b in blocks if b.get("type") == "tool_use"}
