"""Issue 34, item 4: the suite and a system as a Hugging Face-style dataset (leaderboard.datasets).

The hand-built systems A, B and C (tests/leaderboard/factories.py) plus what must never leave:
a gold-bearing baseline whose final patch, answer and scores hold the gold bodies and numbers, a
hidden run, and held-out checks with their own gold. The Parquet files, read back with pandas,
give the pass rates the leaderboard JSON and the system page JSON show, under both counting rules.
"""
from __future__ import annotations

import io
import json
import threading
import time
import zipfile
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml
from django.core.management import CommandError, call_command
from django.db import connection, transaction
from django.db import connections as db_connections
from django.test import Client
from django.test.utils import CaptureQueriesContext

from leaderboard import datasets
from leaderboard.rules import system_slug
from runs.models import Experiment, HeldOutCheck, Paper, Run, Sample, Suite
from runs.signals import results_changed_send
from tests.leaderboard.factories import FAIL, PASS, build_board_data, make_attempt, make_run
from tests.support import standings_refreshed

GOLD_BODY = "return torch.clamp(logits * 0.731, min=-3.25)  # gold-body-marker"
GOLD_NUMBER = 0.8731942
HELD_OUT_GOLD = 0.4417263
HIDDEN_MODEL = "openai:hidden-model-xyz"


def _score(passed: bool, gold: float, answer: float) -> dict:
    """A SampleScore as scoring stores it: its numbers carry the gold they were compared with."""
    return {"passed": passed, "error": None, "parse_method": "json", "experiments": [
        {"experiment_id": "Experiment 1", "passed": passed, "error": None, "mode": "strict", "rtol": 0.05, "atol": 0.0,
         "mean_relative_error": None, "answer_key": None,
         "numbers": [{"path": "accuracy", "gold": gold, "pred": answer, "passed": passed}]},
    ]}


@pytest.fixture(autouse=True)
def dataset_cache(settings, tmp_path) -> Path:
    """The downloads' files, in a folder of this test's own."""
    settings.DATASET_CACHE_ROOT = tmp_path / "datasets"
    return settings.DATASET_CACHE_ROOT


@pytest.fixture
def dataset_data(board_data, tmp_path):
    """board_data with experiments (gold and held-out gold), a gold baseline's attempts that quote
    them, and a hidden run; the standings refreshed."""
    code = tmp_path / "gold" / "p"
    code.mkdir(parents=True)
    (code / "m.py").write_text(f"def f0(logits):\n    {GOLD_BODY}\n", encoding="utf-8")
    suite, paper = board_data.suite, board_data.paper
    suite.gold_root = str(tmp_path / "gold")
    suite.save()
    paper.code_dir = str(code)
    paper.save()
    f0, f1, f2 = board_data.functions
    f0.description = "Clamp the scaled logits."
    f0.relevant_paper = "We clamp the logits (Section 3)."
    f0.save()
    first = Experiment.objects.create(paper=paper, exp_id=0, description="Accuracy on the toy set", command="python run.py",
                                      answer_format={"accuracy": 0.0}, gold_result={"accuracy": GOLD_NUMBER})
    first.dependencies.set([f0, f1])
    second = Experiment.objects.create(paper=paper, exp_id=1, description="Loss after training", command="python loss.py",
                                       answer_format={"loss": 0.0}, gold_result={"loss": 1.2345678})
    second.dependencies.set([f2])
    HeldOutCheck.objects.create(experiment=first, variant_id=1, command="python run.py --seed 7",
                                gold_result={"accuracy": HELD_OUT_GOLD})
    # The scores of system A's first attempt hold gold numbers, as real scores do.
    attempt = board_data.attempts[("A", "s0", 0)]
    attempt.reported_score = _score(True, GOLD_NUMBER, 0.87)
    attempt.reexecution_score = _score(True, GOLD_NUMBER, 0.871)
    attempt.held_out_scores = [{"variant": 1, "score": _score(True, HELD_OUT_GOLD, 0.44)}]
    attempt.save()
    gold_run = make_run(suite, agent="gold", model="", n_values=(1,))
    gold_attempt = make_attempt(gold_run, board_data.samples["s0"], 0, PASS)
    gold_attempt.final_patch = f"--- a/m.py\n+++ b/m.py\n+    {GOLD_BODY}\n"
    gold_attempt.final_answer_raw = json.dumps({"Experiment 1": {"accuracy": GOLD_NUMBER}})
    gold_attempt.parsed_answer = {"Experiment 1": {"accuracy": GOLD_NUMBER}}
    gold_attempt.reexecution_output = f"accuracy {GOLD_NUMBER}"
    gold_attempt.reported_score = gold_attempt.reexecution_score = _score(True, GOLD_NUMBER, GOLD_NUMBER)
    gold_attempt.save()
    hidden = make_run(suite, model=HIDDEN_MODEL, n_values=(1,))
    hidden.hidden = True
    hidden.save()
    for name in ("s0", "s1", "s2"):
        make_attempt(hidden, board_data.samples[name], 0, PASS)
    make_attempt(hidden, board_data.samples["s0"], 1, FAIL)
    standings_refreshed()
    return board_data


def _unzipped(response) -> dict[str, bytes]:
    assert response.status_code == 200, response.content[:300]
    assert response["Content-Type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(b"".join(response.streaming_content))) as bundle:
        return {Path(name).name: bundle.read(name) for name in bundle.namelist()}


def _pass1(attempts: pd.DataFrame, *, verified_only: bool) -> dict[tuple[str, int], float]:
    """Pass@1 per (system, n) from the attempts table, by the counting rule its card states."""
    counted = attempts[attempts["status"] == "done"]
    if verified_only:
        counted = counted[counted["verified"]]
        verdict = counted["passed"]
    else:
        verdict = counted["passed"].where(counted["verified"], counted["reported_passed"])
    counted = counted.assign(verdict=verdict.astype(float))
    per_sample = counted.groupby(["system", "n", "sample_id"])["verdict"].mean()
    return {key: float(value) for key, value in per_sample.groupby(["system", "n"]).mean().items()}


def _board_pass1(client, *, verified_only: bool) -> dict[tuple[str, int], float]:
    params = {"format": "json"} if verified_only else {"format": "json", "unverified": "1"}
    rows = client.get("/", params).json()["rows"]
    return {(row["slug"], int(n)): metrics["pass1"] for row in rows if not row["reference"]
            for n, metrics in row["by_n"].items() if metrics["pass1"] is not None}


def _every_text(files: dict[str, bytes]) -> str:
    """All that the files hold, as text: each Parquet table decoded (its strings are compressed in
    the file) and every file's raw bytes besides."""
    parts = [content.decode("latin-1") for content in files.values()]
    for name, content in files.items():
        if name.endswith(".parquet"):
            parts.append(json.dumps(pq.read_table(io.BytesIO(content)).to_pylist(), default=str))
    return "\n".join(parts)


@pytest.mark.django_db
def test_suite_dataset_round_trip_gives_the_leaderboard_numbers(dataset_data, client):
    page = client.get("/benchmark/toy/")
    assert 'href="/benchmark/toy/dataset.zip"' in page.content.decode()
    assert client.get("/benchmark/toy/", {"format": "json"}).json()["dataset_url"] == "/benchmark/toy/dataset.zip"
    files = _unzipped(client.get("/benchmark/toy/dataset.zip"))
    assert set(files) == {"samples.parquet", "attempts.parquet", "README.md"}
    samples = pd.read_parquet(io.BytesIO(files["samples.parquet"]))
    attempts = pd.read_parquet(io.BytesIO(files["attempts.parquet"]))

    assert sorted(samples["sample_id"]) == ["p_0", "p_0,1", "p_1", "p_1,2", "p_2"]
    s01 = samples.set_index("sample_id").loc["p_0,1"]
    assert list(s01["masked_function_ids"]) == [0, 1] and s01["n"] == 2
    assert [e["exp_id"] for e in s01["experiments"]] == [0]  # the one needing f0 or f1
    assert [e["label"] for e in samples.set_index("sample_id").loc["p_1,2"]["experiments"]] == ["Experiment 1", "Experiment 2"]
    assert s01["masked_functions"][0]["description"] == "Clamp the scaled logits."

    # Pass@1 per (system, n) from the Parquet equals the leaderboard's, under both counting rules.
    for verified_only in (True, False):
        board = _board_pass1(client, verified_only=verified_only)
        assert board, "the leaderboard shows systems"
        computed = _pass1(attempts, verified_only=verified_only)
        assert computed == pytest.approx(board), verified_only
    a_slug = attempts.loc[attempts["model"] == "openai:gpt-4o"].loc[lambda t: t["agent_config"] == '{"history":"full"}', "system"].iloc[0]
    assert _pass1(attempts, verified_only=True)[(a_slug, 1)] == pytest.approx(0.5)  # the factories' hand count

    # Errors are there (to be left out by the rule), in-flight and cancelled attempts are not.
    assert set(attempts["status"]) == {"done", "error"}
    verdicts = attempts.set_index("attempt_id").loc[dataset_data.attempts[("A", "s0", 0)].pk, "experiment_verdicts"]
    assert list(verdicts) == [{"experiment": "Experiment 1", "reported_passed": True, "reexecution_passed": True}]

    # Hidden runs are absent; no gold body, gold number or held-out gold anywhere.
    assert HIDDEN_MODEL not in set(attempts["model"])
    assert dataset_data.run_a.pk in set(attempts["run_id"])
    text = _every_text(files)
    for secret in (HIDDEN_MODEL, GOLD_BODY, "gold-body-marker", str(GOLD_NUMBER), str(HELD_OUT_GOLD), "1.2345678",
                   "python run.py --seed 7"):
        assert secret not in text, secret

    # The card: Hugging Face front matter naming each config's file per split.
    card = files["README.md"].decode()
    front = yaml.safe_load(card.split("---")[1])
    assert {c["config_name"]: c["data_files"][0]["path"] for c in front["configs"]} == {
        "samples": "samples.parquet", "attempts": "attempts.parquet"}
    assert front["license"] and front["task_categories"]


@pytest.mark.django_db
def test_system_dataset_holds_that_system_and_its_page_numbers(dataset_data, client):
    board = client.get("/", {"format": "json"}).json()["rows"]
    slug = next(row["slug"] for row in board if row["agent"] == "agentless")
    page = client.get(f"/systems/{slug}/")
    assert f'href="/systems/{slug}/dataset.zip"' in page.content.decode()
    files = _unzipped(client.get(f"/systems/{slug}/dataset.zip"))
    attempts = pd.read_parquet(io.BytesIO(files["attempts.parquet"]))
    samples = pd.read_parquet(io.BytesIO(files["samples.parquet"]))
    assert set(attempts["system"]) == {slug} and len(attempts) == 3
    assert sorted(samples["sample_id"]) == ["p_0", "p_1", "p_2"]
    system_json = client.get(f"/systems/{slug}/", {"format": "json"}).json()
    assert system_json["dataset_url"] == f"/systems/{slug}/dataset.zip"
    system = system_json["system"]
    assert _pass1(attempts, verified_only=True)[(slug, 1)] == pytest.approx(system["by_n"]["1"]["pass1"])
    assert _pass1(attempts, verified_only=True)[(slug, 1)] == pytest.approx(2 / 3)

    # A hidden run's system has no download, nor does one that never existed.
    hidden_slug = system_slug(suite="toy", agent="react", model=HIDDEN_MODEL, config_json="{}", context="full")
    for missing in (hidden_slug, "000000000000"):
        response = client.get(f"/systems/{missing}/dataset.zip")
        assert response.status_code == 404
        assert HIDDEN_MODEL not in response.content.decode()


@pytest.mark.django_db
def test_export_dataset_command_and_bad_suite(dataset_data, tmp_path, monkeypatch):
    # Attempts are read and written a few at a time: row groups of 4 make this suite's 18 take five.
    monkeypatch.setattr(datasets, "CHUNK", 3)
    monkeypatch.setattr(datasets, "ROW_GROUP", 4)
    out = tmp_path / "dataset"
    call_command("export_dataset", "--suite", "toy", "--out", str(out))
    assert sorted(path.name for path in out.iterdir()) == ["README.md", "attempts.parquet", "samples.parquet"]
    attempts = pd.read_parquet(out / "attempts.parquet")
    # A's 12 less its queued and cancelled ones, B's 4, C's 3 and the gold baseline's 1; not the hidden run's 4.
    assert len(attempts) == 10 + 4 + 3 + 1
    assert attempts["attempt_id"].is_unique
    assert pq.ParquetFile(out / "attempts.parquet").metadata.num_row_groups == 5
    with pytest.raises(CommandError, match="no suite named 'nope'.*toy"):
        call_command("export_dataset", "--suite", "nope", "--out", str(tmp_path / "other"))
    with pytest.raises(CommandError, match="not an empty directory"):
        call_command("export_dataset", "--suite", "toy", "--out", str(out))


@pytest.mark.django_db
def test_bad_suite_download_is_a_clear_404(db, client):
    response = client.get("/benchmark/nope/dataset.zip")
    assert response.status_code == 404


@pytest.mark.django_db
def test_dataset_downloads_count_as_heavy_pages(dataset_data, settings):
    """Each download reads every public attempt of the suite: a visitor past the heavy-page rate is refused
    (429) before anything is built, while the light pages are still served."""
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "pages-address": "10/m", "heavy-pages-address": "2/m"}
    visitor = Client(REMOTE_ADDR="198.51.100.77")
    assert [visitor.get("/benchmark/toy/dataset.zip").status_code for _ in range(2)] == [200, 200]
    refused = visitor.get("/benchmark/toy/dataset.zip")
    assert refused.status_code == 429 and "Too many views of the heavier pages" in refused.content.decode()
    slug = system_slug(suite="toy", agent="agentless", model="anthropic:claude-3-5-sonnet", config_json="{}", context="none")
    assert visitor.get(f"/systems/{slug}/dataset.zip").status_code == 429
    assert visitor.get("/").status_code == 200


# --- built once per change, served from a file (leaderboard.dataset_cache) ---------------------------


def _attempts_of(response) -> pd.DataFrame:
    return pd.read_parquet(io.BytesIO(_unzipped(response)["attempts.parquet"]))


def _parts(cache: Path) -> dict[str, tuple[str, int]]:
    """Each system's attempts file: slug -> (file name, inode)."""
    return {path.parent.parent.name: (path.name, path.stat().st_ino) for path in cache.rglob("attempts/*.parquet")}


@pytest.mark.django_db
def test_a_download_is_built_once_then_served_from_its_file(dataset_data, client, dataset_cache):
    first = client.get("/benchmark/toy/dataset.zip")
    content = b"".join(first.streaming_content)
    zips = list(dataset_cache.rglob("*.zip"))
    assert len(zips) == 1 and zips[0].read_bytes() == content
    stamp = zips[0].stat().st_mtime_ns
    with CaptureQueriesContext(connection) as queries:
        again = client.get("/benchmark/toy/dataset.zip")
        assert b"".join(again.streaming_content) == content
    assert not [query["sql"] for query in queries if "runs_attempt" in query["sql"]], "the file is served, no attempt read"
    assert zips[0].stat().st_mtime_ns == stamp and again["ETag"] == first["ETag"]
    assert again["Content-Disposition"] == 'attachment; filename="autoexperiment-toy.zip"'


@pytest.mark.django_db
def test_a_client_holding_the_download_gets_304(dataset_data, client):
    url = "/benchmark/toy/dataset.zip"
    first = client.get(url)
    b"".join(first.streaming_content)
    etag, modified = first["ETag"], first["Last-Modified"]
    assert etag.startswith('"') and modified.endswith("GMT")
    assert first["Cache-Control"] == "no-cache"  # a copy kept by a browser or proxy is checked each time
    for headers in ({"if-none-match": etag}, {"if-modified-since": modified}):
        unchanged = client.get(url, headers=headers)
        assert unchanged.status_code == 304, headers
        assert unchanged["ETag"] == etag and unchanged["Last-Modified"] == modified and not unchanged.content
    assert client.get(url, headers={"if-none-match": '"another"'}).status_code == 200
    head = client.head(url)
    assert head.status_code == 200 and head["ETag"] == etag
    slug = next(row["slug"] for row in client.get("/", {"format": "json"}).json()["rows"] if row["agent"] == "agentless")
    system = client.get(f"/systems/{slug}/dataset.zip")
    assert system.status_code == 200 and system["ETag"] not in (etag, None)
    assert client.get(f"/systems/{slug}/dataset.zip", headers={"if-none-match": system["ETag"]}).status_code == 304


@pytest.mark.django_db
def test_a_new_attempt_makes_a_new_file_reading_only_its_system_again(dataset_data, client, dataset_cache):
    url = "/benchmark/toy/dataset.zip"
    first = client.get(url)
    before = _attempts_of(first)
    parts = _parts(dataset_cache)
    c_slug = before.loc[before["run_id"] == dataset_data.run_c.pk, "system"].iloc[0]
    assert len(parts) == 4  # systems A, B and C and the gold baseline

    with transaction.atomic():  # an attempt settles, announced as the evaluation announces it
        added = make_attempt(dataset_data.run_c, dataset_data.samples["s0"], 1, FAIL)
        results_changed_send(run_ids=[dataset_data.run_c.pk])
    second = client.get(url)
    after = _attempts_of(second)
    assert second["ETag"] != first["ETag"]
    assert set(after["attempt_id"]) == set(before["attempt_id"]) | {added.pk}
    now = _parts(dataset_cache)
    assert now[c_slug] != parts[c_slug]
    assert {slug: part for slug, part in now.items() if slug != c_slug} == {
        slug: part for slug, part in parts.items() if slug != c_slug}, "the other systems' attempts are not read again"
    assert [path.name for path in (dataset_cache / "toy" / "dataset").glob("*.zip")] == [f"{second['ETag'].strip(chr(34))}.zip"]


@pytest.mark.django_db
def test_a_hidden_run_is_never_served_and_comes_back_when_shown(dataset_data, client, dataset_cache):
    from runs.evaluation.services import runs_set_hidden

    url = "/benchmark/toy/dataset.zip"
    run_b2 = dataset_data.run_b2
    before = _attempts_of(client.get(url))
    b_slug = before.loc[before["run_id"] == run_b2.pk, "system"].iloc[0]
    assert run_b2.pk in set(_attempts_of(client.get(f"/systems/{b_slug}/dataset.zip"))["run_id"])

    runs_set_hidden(runs=[run_b2], hidden=True)
    for download in (url, f"/systems/{b_slug}/dataset.zip"):
        assert run_b2.pk not in set(_attempts_of(client.get(download))["run_id"]), download
    for path in dataset_cache.rglob("*.parquet"):  # the files that held them are gone too
        assert run_b2.pk not in set(pq.read_table(path).column("run_id").to_pylist() if "attempts" in path.parts else []), path

    runs_set_hidden(runs=[run_b2], hidden=False)
    shown = client.get(url)
    assert set(_attempts_of(shown)["attempt_id"]) == set(before["attempt_id"])


@pytest.mark.django_db
def test_a_run_hidden_behind_the_applications_back_leaves_at_once(dataset_data, client, dataset_cache):
    """The ids of the public runs are part of a download's version: a run hidden without any change
    being announced (an UPDATE in the database) leaves the next download all the same, and a system
    left with no public run leaves with its files."""
    url = "/benchmark/toy/dataset.zip"
    before = _attempts_of(client.get(url))
    slug_of = before.groupby("run_id")["system"].first()
    b_slug, c_slug = slug_of[dataset_data.run_b2.pk], slug_of[dataset_data.run_c.pk]
    for slug in (b_slug, c_slug):
        assert client.get(f"/systems/{slug}/dataset.zip").status_code == 200
    Run.objects.filter(pk__in=[dataset_data.run_b2.pk, dataset_data.run_c.pk]).update(hidden=True)
    assert not {dataset_data.run_b2.pk, dataset_data.run_c.pk} & set(_attempts_of(client.get(url))["run_id"])
    assert set(_attempts_of(client.get(f"/systems/{b_slug}/dataset.zip"))["run_id"]) == {dataset_data.run_b1.pk}
    assert client.get(f"/systems/{c_slug}/dataset.zip").status_code == 404
    assert not [path for path in (dataset_cache / "toy" / "systems" / c_slug).rglob("*") if path.name != ".lock" and path.is_file()]


@pytest.mark.django_db
def test_new_samples_and_suites_without_runs(dataset_data, client):
    first = client.get("/benchmark/toy/dataset.zip")
    paper = dataset_data.paper
    sample = Sample.objects.create(paper=paper, sample_id="p_0,2", n=2)  # drawn when a run asks for an n
    sample.functions.set([dataset_data.functions[0], dataset_data.functions[2]])
    second = client.get("/benchmark/toy/dataset.zip")
    assert second["ETag"] != first["ETag"]
    assert "p_0,2" in set(pd.read_parquet(io.BytesIO(_unzipped(second)["samples.parquet"]))["sample_id"])

    empty = Suite.objects.create(name="empty", version="2", gold_root="/nonexistent")
    empty_paper = Paper.objects.create(suite=empty, paper_id="q", title="Another paper", text="")
    Sample.objects.create(paper=empty_paper, sample_id="q_", n=0)
    files = _unzipped(client.get("/benchmark/empty/dataset.zip"))
    assert len(pd.read_parquet(io.BytesIO(files["attempts.parquet"]))) == 0
    assert list(pd.read_parquet(io.BytesIO(files["samples.parquet"]))["sample_id"]) == ["q_"]


@pytest.mark.django_db(transaction=True)
def test_concurrent_first_downloads_build_it_once(monkeypatch, settings, tmp_path):
    """Three requests at once for a download not built yet: one builds it (each system's attempts
    read once), the others wait for it and send the same file."""
    from leaderboard import dataset_cache

    build_board_data()
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "heavy-pages-address": "100/m"}
    written = []
    real_write = dataset_cache.attempts_write

    def slow_write(path, runs):
        written.append(path.parent.parent.name)
        time.sleep(0.3)  # a large system: long enough for the other requests to arrive meanwhile
        return real_write(path, runs)

    monkeypatch.setattr(dataset_cache, "attempts_write", slow_write)
    start = threading.Barrier(3)
    answers = []

    def download():
        try:
            start.wait()
            response = Client().get("/benchmark/toy/dataset.zip")
            answers.append((response.status_code, response["ETag"], b"".join(response.streaming_content)))
        except Exception as error:  # noqa: BLE001 - shown by the assertion below, not lost with the thread
            answers.append((repr(error), None, None))
        finally:
            db_connections.close_all()

    threads = [threading.Thread(target=download) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [status for status, _, _ in answers] == [200, 200, 200]
    assert len({(etag, content) for _, etag, content in answers}) == 1
    assert sorted(written) == sorted(set(written)) and len(written) == 3  # systems A, B and C, once each
