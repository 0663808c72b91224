"""The site's HTTP endpoints, over http.client (the standard library: the client has no dependencies).

Every failure is an ApiError whose message is the server's own words (the JSON `error`, and each of
`problems`/`errors` on its own line), or, for a network failure, what went wrong and the URL.
"""
from __future__ import annotations

import http.client
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode, urlsplit

from autoexperiment_client import __version__

# The submissions API's root: the one place its path is written (the versioned /api/v1/ of the site's OpenAPI description).
SUBMISSIONS_API = "/api/v1/submissions/"
TIMEOUT_SECONDS = 120
CHUNK = 64 * 1024
USER_AGENT = f"autoexperiment-client/{__version__}"

Progress = Callable[[int, int | None], None]  # (bytes done, bytes in all or None)


@dataclass
class ApiError(Exception):
    message: str
    status: int | None = None  # None: no answer from the server
    problems: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return "\n".join([self.message, *(f"  {problem}" for problem in self.problems)])


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self):
        return json.loads(self.body)


def _server_error(url: str, status: int, reason: str, content_type: str, body: bytes) -> ApiError:
    """The server's words for a failed request: its JSON `error` (and `problems`/`errors`), else a
    plain-text body, else the status line (an HTML error page is not printed)."""
    if content_type.startswith("application/json"):
        try:
            payload = json.loads(body)
        except ValueError:
            payload = None
        if isinstance(payload, dict) and (payload.get("error") or payload.get("errors")):
            problems = payload.get("problems") or []
            errors = payload.get("errors")
            if isinstance(errors, list):
                problems = [*problems, *errors]
            elif isinstance(errors, dict):  # a form's errors: {field: [messages]}
                problems = [*problems, *(f"{name}: {' '.join(map(str, messages))}" for name, messages in errors.items())]
            message = str(payload.get("error") or f"HTTP {status} {reason}")
            if payload.get("retry_after"):
                message += f" (retry after {payload['retry_after']} s)"
            return ApiError(message, status, [str(problem) for problem in problems])
    if content_type.startswith("text/plain") and body.strip():
        return ApiError(f"HTTP {status} {reason}: {body.decode('utf-8', 'replace').strip()[:2000]}", status)
    return ApiError(f"HTTP {status} {reason} from {url}", status)


class Client:
    def __init__(self, base_url: str, token: str | None = None, *, timeout: float = TIMEOUT_SECONDS) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ApiError(f"not an http(s) URL: {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.scheme, self.netloc, self.prefix = parts.scheme, parts.netloc, parts.path.rstrip("/")
        self.token = token
        self.timeout = timeout

    def url(self, path: str) -> str:
        return f"{self.scheme}://{self.netloc}{self.prefix}{path}"

    def _connection(self) -> http.client.HTTPConnection:
        kind = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        return kind(self.netloc, timeout=self.timeout)

    def request(
        self,
        method: str,
        path: str,
        *,
        body: bytes | Path | None = None,
        headers: dict[str, str] | None = None,
        authenticated: bool = False,
        upload_progress: Progress | None = None,
        sink: Path | None = None,
        download_progress: Progress | None = None,
    ) -> Response:
        """One request. A Path body is streamed from the file (with a Content-Length: the server
        refuses chunked bodies); with `sink`, a 2xx body is streamed into that file instead of memory."""
        url = self.url(path)
        sent = {"User-Agent": USER_AGENT, "Accept": "application/json, */*", **(headers or {})}
        if authenticated:  # the token goes to the API alone, never to pages
            sent["Authorization"] = f"Bearer {self.token}"
        connection = self._connection()
        try:
            connection.putrequest(method, self.prefix + path, skip_accept_encoding=True)
            size = body.stat().st_size if isinstance(body, Path) else len(body or b"")
            if body is not None:
                sent["Content-Length"] = str(size)
            for name, value in sent.items():
                connection.putheader(name, value)
            connection.endheaders()
            if body is not None:
                self._send(connection, body, size, upload_progress)
            response = connection.getresponse()
            content_type = response.getheader("Content-Type", "")
            if not 200 <= response.status < 300:
                raise _server_error(url, response.status, response.reason, content_type, response.read())
            received = {name.lower(): value for name, value in response.getheaders()}
            if sink is None:
                return Response(response.status, received, response.read())
            self._receive(response, sink, download_progress)
            return Response(response.status, received, b"")
        except (OSError, http.client.HTTPException) as error:
            detail = getattr(error, "strerror", None) or str(error) or type(error).__name__
            raise ApiError(f"could not reach {url}: {detail}") from None
        finally:
            connection.close()

    @staticmethod
    def _send(connection, body: bytes | Path, size: int, progress: Progress | None) -> None:
        done = 0
        if isinstance(body, Path):
            with body.open("rb") as handle:
                while chunk := handle.read(CHUNK):
                    connection.send(chunk)
                    done += len(chunk)
                    if progress:
                        progress(done, size)
        else:
            for start in range(0, size, CHUNK):
                connection.send(body[start:start + CHUNK])
                done = min(size, start + CHUNK)
                if progress:
                    progress(done, size)

    @staticmethod
    def _receive(response, sink: Path, progress: Progress | None) -> None:
        total = int(response.getheader("Content-Length") or 0) or None
        partial = sink.with_name(sink.name + ".part")  # never a truncated archive under the real name
        done = 0
        try:
            with partial.open("wb") as handle:
                while chunk := response.read(CHUNK):
                    handle.write(chunk)
                    done += len(chunk)
                    if progress:
                        progress(done, total)
            if total is not None and done != total:
                raise ApiError(f"the download stopped after {done} of {total} bytes")
            os.replace(partial, sink)
        finally:
            partial.unlink(missing_ok=True)

    # --- the endpoints ----------------------------------------------------------------------------

    def submission_create(self, path: Path, *, reexecute: bool = True, progress: Progress | None = None) -> dict:
        query = "?reexecute=1" if reexecute else ""
        content_type = "application/zip" if path.suffix.lower() == ".zip" else "application/jsonl"
        response = self.request(
            "POST", SUBMISSIONS_API + query, body=path, authenticated=True, upload_progress=progress,
            headers={"Content-Type": content_type, "X-Filename": path.name},
        )
        return response.json()

    def submission_get(self, submission_id: int) -> dict:
        return self.request("GET", f"{SUBMISSIONS_API}{submission_id}/", authenticated=True).json()

    def leaderboard(self, *, output: str, suite: str | None = None) -> bytes:
        query = {"format": output, **({"suite": suite} if suite else {})}
        return self.request("GET", "/?" + urlencode(query)).body

    def tasks_download(self, *, suite: str, n: int, context: str, directory: Path, progress: Progress | None = None) -> Path:
        name = f"n{n}-{context}.tar.gz"
        path = f"/benchmark/{suite}/tasks/{name}"
        # Named with the suite in front: n1-full of two suites must not overwrite each other.
        target = directory / f"{suite}-{name}"
        self.request("GET", path, sink=target, download_progress=progress)
        return target
