"""A body sent with Transfer-Encoding: chunked (no Content-Length) against a real gunicorn: Django
reads bodies only as far as Content-Length says, so it used to see an empty file. Both upload
endpoints now answer 411 Length Required saying what to send instead; the same body sent with a
Content-Length is read. (The Django test client cannot send a chunked body.)
"""
from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from runs.submissions.services import token_create
from tests.replay.factories import make_user
from tests.submissions.helpers import jsonl, record
from tests.support import redis_test_url, shared_database_url

BASE_DIR = Path(__file__).resolve().parents[2]
BODY_MB = 50


@pytest.fixture(scope="module")
def gunicorn(django_db_setup, tmp_path_factory):
    """gunicorn (one worker, two threads, DEBUG on) on a free loopback port and the test database."""
    database_url = shared_database_url()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = tmp_path_factory.mktemp("gunicorn") / "gunicorn.log"
    env = {
        **{key: value for key, value in os.environ.items() if key not in {"DJANGO_SETTINGS_MODULE", "SECRET_KEY_FILE"}},
        "DEBUG": "1", "DATABASE_URL": database_url, "REDIS_URL": redis_test_url(), "CACHE_URL": redis_test_url(),
        # No connection kept between requests, so the test database can be dropped at the end.
        "CONN_MAX_AGE": "0", "AUTOEXPERIMENT_DATA_DIR": str(log.parent), "LOG_LEVEL": "WARNING",
    }
    command = [sys.executable, "-m", "gunicorn", "--workers", "1", "--threads", "2", "--bind", f"127.0.0.1:{port}",
               "autoexperiment_site.wsgi"]
    with open(log, "w") as handle:
        process = subprocess.Popen(command, cwd=BASE_DIR, env=env, stdout=handle, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                pytest.fail(f"gunicorn exited with {process.returncode}:\n{log.read_text()[-3000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"gunicorn did not listen within 30 s:\n{log.read_text()[-3000:]}")
                time.sleep(0.1)
        yield port
    finally:
        process.send_signal(signal.SIGINT)  # gunicorn's quick shutdown: nothing is in flight
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def post(port: int, path: str, body: bytes, headers: dict) -> tuple[int, str, bytes]:
    """(status, content type, body) of a POST with a Content-Length."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("POST", path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type", ""), response.read()
    finally:
        connection.close()


def post_chunked(port: int, path: str, body: bytes, headers: dict) -> tuple[int, str, bytes]:
    """The same, the body repeated to BODY_MB MiB and sent chunked in 1 MiB chunks, the way curl does
    it: the response is read while the body goes out, since a server may answer and close (gunicorn
    drains 64 KiB of a body the application did not read, then closes)."""
    chunk = (body * (2**20 // len(body) + 1))[: 2**20]
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    lines = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Transfer-Encoding: chunked",
             *(f"{name}: {value}" for name, value in headers.items())]
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    sent = []

    def send_body():
        try:
            for _ in range(BODY_MB):
                sock.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
                sent.append(len(chunk))
            sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server answered and closed without reading the rest

    sender = threading.Thread(target=send_body, daemon=True)
    sender.start()
    try:
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response.status, response.getheader("Content-Type", ""), response.read()
    finally:
        with contextlib.suppress(OSError):  # already reset by the server
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()
        sender.join(timeout=30)


@pytest.mark.slow  # starting gunicorn loads the application
def test_chunked_bodies_are_refused_with_411(gunicorn, transactional_db):
    user = make_user()
    _, key = token_create(user=user, name="ci")
    data = jsonl(record())  # names the suite "builtin", which this database does not have

    # The API, raw body: chunked is refused before anything is read; with a Content-Length it is read.
    api = {"Authorization": f"Token {key}", "Content-Type": "application/jsonl"}
    status, content_type, body = post_chunked(gunicorn, "/api/submissions/", data, api)
    assert (status, content_type) == (411, "application/json"), body[:500]
    error = json.loads(body)["error"]
    assert error.startswith("The upload was sent with 'Transfer-Encoding: chunked' and no Content-Length")
    assert "Send the file with a Content-Length header" in error and "nothing was stored" in error
    status, _, body = post(gunicorn, "/api/submissions/", data, api)
    assert status == 400 and "no suite named 'builtin'" in json.loads(body)["problems"][0]

    # The upload page, multipart: the same 411, on the page.
    client = Client()
    client.force_login(user)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    boundary = "chunked-test-boundary"
    multipart = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="r.jsonl"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode() + data + f"\r\n--{boundary}--\r\n".encode()
    page = {"Cookie": cookie, "Content-Type": f"multipart/form-data; boundary={boundary}"}
    status, content_type, body = post_chunked(gunicorn, "/submissions/upload/", multipart, page)
    assert status == 411 and content_type.startswith("text/html")
    html = body.decode()
    assert "The upload was sent with &#x27;Transfer-Encoding: chunked&#x27; and no Content-Length" in html
    assert 'name="file"' in html  # the form is there to try again
