"""A paper's data files: fetched once into the content-addressed cache from a real HTTP server on
loopback (or the suite), checked, never half-written at their final path; fetch_data prepares them."""
import hashlib
import http.server
import json
import os
import socket
import threading
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from runs.benchmark.datafiles import DataError, DataFile, cached_path, data_fetch

GOOD = b"0123456789" * 1000
GOOD_SHA = hashlib.sha256(GOOD).hexdigest()


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - the standard library's name
        if self.path == "/good.bin":
            self._send(GOOD, len(GOOD))
        elif self.path == "/wrong.bin":  # same size, other bytes: only the hash tells
            self._send(GOOD[::-1], len(GOOD))
        elif self.path == "/truncated.bin":  # promises the whole file, sends half, hangs up
            self._send(GOOD[: len(GOOD) // 2], len(GOOD))
            self.close_connection = True
        elif self.path == "/larger.bin":
            self._send(GOOD + b"x", len(GOOD) + 1)
        else:
            self.send_error(404)

    def _send(self, body: bytes, length: int):
        self.send_response(200)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def server():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _nothing_listening() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def remote(url: str, *, sha=GOOD_SHA, size=len(GOOD), name="train.bin") -> DataFile:
    return DataFile(name=name, source=url, sha256=sha, size=size)


def leftovers(root) -> list[str]:
    return sorted(os.listdir(root)) if root.exists() else []


def test_a_good_file_is_fetched_once_read_only(tmp_path, server):
    root = tmp_path / "cache"

    path, fetched = data_fetch(root, remote(f"{server}/good.bin"), where="paper p")
    again, fetched_again = data_fetch(root, remote(f"{server}/good.bin"), where="paper p")

    assert (fetched, fetched_again) == (True, False)
    assert path == again == cached_path(root, GOOD_SHA)
    assert path.read_bytes() == GOOD
    assert path.stat().st_mode & 0o777 == 0o444
    assert leftovers(root) == [GOOD_SHA]


@pytest.mark.parametrize("url, expected", [
    ("/wrong.bin", "expected 10000 bytes with sha256 {sha}, got 10000 bytes with sha256 {wrong}"),
    ("/truncated.bin", "the download broke off after 5000 of 10000 bytes"),
    ("/larger.bin", "expected 10000 bytes with sha256 {sha}, got 10001 bytes"),
    ("/absent.bin", "the server answered 404"),
], ids=["wrong hash", "truncated", "larger", "404"])
def test_a_bad_download_is_refused_and_leaves_nothing(tmp_path, server, url, expected):
    root = tmp_path / "cache"

    with pytest.raises(DataError) as raised:
        data_fetch(root, remote(f"{server}{url}"), where="paper digits-mixup")

    message = str(raised.value)
    assert message.startswith(f"paper digits-mixup: data file train.bin ({server}{url}): ")
    assert expected.format(sha=GOOD_SHA, wrong=hashlib.sha256(GOOD[::-1]).hexdigest()) in message
    assert leftovers(root) == []  # neither the file nor a partial one


def test_a_server_that_is_down_is_named(tmp_path):
    url = f"http://127.0.0.1:{_nothing_listening()}/good.bin"

    with pytest.raises(DataError, match=r"paper p: data file train.bin \(.*\): cannot download: .*[Rr]efused"):
        data_fetch(tmp_path / "cache", remote(url), where="paper p")

    assert leftovers(tmp_path / "cache") == []


def test_a_wrong_file_at_the_cache_path_is_not_taken_for_the_declared_one(tmp_path, server):
    root = tmp_path / "cache"
    root.mkdir()
    cached_path(root, GOOD_SHA).write_bytes(b"half")  # what a non-atomic writer would leave

    path, fetched = data_fetch(root, remote(f"{server}/good.bin"), where="paper p")

    assert fetched and path.read_bytes() == GOOD


def test_a_local_source_is_copied_from_the_paper_directory_and_checked(tmp_path):
    paper_dir = tmp_path / "suite" / "paper"
    (paper_dir / "data").mkdir(parents=True)
    (paper_dir / "data" / "x.bin").write_bytes(GOOD)
    (paper_dir / "data" / "link.bin").symlink_to(tmp_path / "outside.bin")
    (tmp_path / "outside.bin").write_bytes(GOOD)
    local = dict(name="x.bin", sha256=GOOD_SHA, size=len(GOOD), base=paper_dir, within=tmp_path / "suite")

    path, _ = data_fetch(tmp_path / "cache", DataFile(source="data/x.bin", **local), where="paper p")
    assert path.read_bytes() == GOOD
    with pytest.raises(DataError, match="leads outside the suite"):
        data_fetch(tmp_path / "other", DataFile(source="data/link.bin", **local), where="paper p")
    with pytest.raises(DataError, match="got 10000 bytes"):
        data_fetch(tmp_path / "other", DataFile(source="data/x.bin", **{**local, "sha256": "0" * 64}), where="paper p")


@pytest.mark.django_db
def test_fetch_data_prepares_a_suite_directory_and_names_a_bad_file(tmp_path, server, data_cache, native_suite_writer,
                                                                     native_paper):
    native_paper["data"] = [{"name": "train.bin", "source": f"{server}/good.bin", "sha256": GOOD_SHA, "size": len(GOOD)}]
    root = native_suite_writer(tmp_path / "toy", paper=native_paper)
    out = StringIO()

    call_command("fetch_data", str(root), stdout=out)
    call_command("fetch_data", str(root), stdout=out)

    lines = out.getvalue()
    assert "paper toy-paper: data file train.bin: fetched" in lines
    assert "paper toy-paper: data file train.bin: already cached" in lines
    assert cached_path(data_cache, GOOD_SHA).read_bytes() == GOOD

    native_paper["data"][0]["source"] = f"{server}/wrong.bin"
    native_paper["data"][0]["sha256"] = "1" * 64
    (root / "toy-paper" / "paper.json").write_text(json.dumps(native_paper))
    with pytest.raises(CommandError, match=r"paper toy-paper: data file train.bin .*expected 10000 bytes with sha256 1{64}"):
        call_command("fetch_data", str(root), stdout=StringIO())
