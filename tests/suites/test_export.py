"""Task export (export_tasks, the suite page's downloads): each sample's archive holds exactly the
workspace the harness builds, nothing of the gold, and a submitter's round trip (export, implement,
diff, upload, re-execute) is verified."""
import io
import json
import shutil
import subprocess
import tarfile
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from django.urls import reverse

from runs.benchmark.masking import function_body_source, replace_function_body
from runs.benchmark.workspace import CODE_DIR, audit_workspace
from runs.models import Attempt, Experiment, Sample, Submission
from runs.submissions.format_text import upload_format_markdown
from runs.submissions.services import submission_create, submission_reexecute_sync
from runs.suites.export import directory_tar_gz, sample_archive_name, tasks_export
from runs.suites.services import samples_ensure, workspace_build
from tests.replay.factories import make_user
from tests.submissions.helpers import SAMPLE, gold_answer, jsonl, record
from tests.support import require_backend

pytestmark = pytest.mark.django_db


def tree(root: Path) -> dict[str, tuple]:
    """Every entry under `root`: files by bytes and executable bit, symlinks by target, directories."""
    entries = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if path.is_symlink():
            entries[relative] = ("link", str(path.readlink()))
        elif path.is_dir():
            entries[relative] = ("dir",)
        else:
            entries[relative] = ("file", path.read_bytes(), bool(path.stat().st_mode & 0o100))
    return entries


def extract(archive: Path, into: Path) -> Path:
    with tarfile.open(archive) as opened:
        opened.extractall(into, filter="tar")
    return into


def gold_values(suite) -> list:
    return [e.gold_result for e in Experiment.objects.filter(paper__suite=suite) if e.gold_result]


def original_bodies(sample: Sample) -> dict[str, str]:
    code_dir = Path(sample.paper.code_dir)
    return {
        f"{f.file}:{f.name}": function_body_source((code_dir / f.file).read_text(encoding="utf-8"), f.name, line_hint=f.line_hint)
        for f in sample.functions.all()
    }


@pytest.mark.slow  # 112 exports, 112 builds to compare, 112 leak audits
def test_export_is_the_harness_workspace_for_every_n1_and_n2_sample_and_holds_no_gold(builtin, tmp_path):
    dest = tmp_path / "export"
    out = StringIO()
    call_command("export_tasks", str(dest), "--suite", "builtin", "--n", "1,2", stdout=out)

    samples = Sample.objects.filter(paper__suite=builtin, n__in=[1, 2]).select_related("paper")
    assert samples.count() == 112 and f"Exported 112 samples (n=1,2, context full) to {dest}" in out.getvalue()
    manifest = [json.loads(line) for line in (dest / "manifest.jsonl").read_text().splitlines()]
    assert sorted(line["sample_id"] for line in manifest) == sorted(s.sample_id for s in samples)
    assert sorted(p.name for p in (dest / "samples").iterdir()) == sorted(f"{s.sample_id}.tar.gz" for s in samples)

    gold = gold_values(builtin)
    # The leak audit runs over every archive as a submitter unpacks it (not only over the workspaces
    # the archives are byte-identical to): what leaves the site is what is audited.
    for sample in samples:
        built = workspace_build(sample=sample, dest=tmp_path / "built" / sample.sample_id)
        unpacked = extract(dest / sample_archive_name(sample.sample_id), tmp_path / "unpacked")
        assert sorted(p.name for p in unpacked.iterdir()) == [sample.sample_id]
        assert tree(unpacked / sample.sample_id) == tree(built.root), sample.sample_id
        audit = audit_workspace(unpacked / sample.sample_id, original_bodies=original_bodies(sample), gold_results=gold)
        assert audit.leaks == [], sample.sample_id
        shutil.rmtree(unpacked)

    line = next(line for line in manifest if line["sample_id"] == SAMPLE)
    task = json.loads((tmp_path / "built" / SAMPLE / "task.json").read_text())
    assert line["masked_functions"] == [{"file": f["file"], "name": f["name"]} for f in task["missing_functions"]]
    assert [e["label"] for e in line["experiments"]] == [e["label"] for e in task["experiments"]]
    assert set(line["experiments"][0]) == {"label", "description", "command", "answer_format"}
    assert (line["n"], line["paper_id"]) == (1, "temperature-scaling")
    # Manifest and README: no gold number in any spelling the audit knows, no gold field at all.
    shutil.rmtree(dest / "samples")
    assert audit_workspace(dest, original_bodies={}, gold_results=gold).leaks == []
    assert "gold" not in (dest / "manifest.jsonl").read_text()
    readme = (dest / "README.md").read_text()
    assert all(text in readme for text in ('"Experiment 1"', "NotImplementedError", "`final_patch`", "diff -ruN a/code b/code"))


def test_the_same_suite_version_exports_the_same_bytes(builtin, tmp_path):
    first, second = tmp_path / "one", tmp_path / "two"
    for dest in (first, second):
        tasks_export(suite=builtin, n_values=[1], context="none", dest=dest, upload_format="## Upload format\n")
    assert tree(first) == tree(second)
    workspace = tmp_path / "ws"
    workspace_build(sample=Sample.objects.get(sample_id=SAMPLE), dest=workspace, context="none")
    assert (first / sample_archive_name(SAMPLE)).read_bytes() == directory_tar_gz(workspace, top=SAMPLE)
    assert not (extract(first / sample_archive_name(SAMPLE), tmp_path / "x") / SAMPLE / "paper.md").exists()


def test_export_tasks_explains_bad_input(builtin, tmp_path):
    with pytest.raises(CommandError, match="no suite named 'nosuch'"):
        call_command("export_tasks", str(tmp_path / "a"), "--suite", "nosuch")
    with pytest.raises(CommandError, match="no sample with n in 9"):
        call_command("export_tasks", str(tmp_path / "b"), "--suite", "builtin", "--n", "9")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    with pytest.raises(CommandError, match="is not empty"):
        call_command("export_tasks", str(tmp_path / "full"), "--suite", "builtin")


def restore_gold_bodies(sample: Sample, workspace: Path) -> None:
    """What an honest submitter's agent does: write each masked function's implementation back in."""
    code_dir = Path(sample.paper.code_dir)
    for function in sample.functions.all():
        path = workspace / CODE_DIR / function.file
        body = function_body_source((code_dir / function.file).read_text(encoding="utf-8"), function.name, line_hint=function.line_hint)
        path.write_text(replace_function_body(path.read_text(encoding="utf-8"), function.name, body), encoding="utf-8")


def test_a_submitters_round_trip_is_verified(builtin, tmp_path, settings, claims_in_the_test_transaction):
    """Export, unpack, implement, `diff -ruN` and `git diff --no-index`, upload, re-execute in bubblewrap."""
    require_backend("bubblewrap")
    settings.WORKSPACE_ROOT = tmp_path / "workspaces"
    settings.SANDBOX_BACKEND = "bubblewrap"
    dest = tmp_path / "export"
    tasks_export(suite=builtin, n_values=[1], context="full", dest=dest, upload_format=upload_format_markdown())
    sample = Sample.objects.get(sample_id=SAMPLE)
    # The submitter unpacks the sample twice and names the copies a (pristine) and b (edited): diffs
    # run from their parent directory then name the files a/code/... and b/code/..., as uploads need.
    work = tmp_path / "work"
    work.mkdir()
    for copy in ("a", "b"):
        (extract(dest / sample_archive_name(SAMPLE), tmp_path / f"unpacked-{copy}") / SAMPLE).rename(work / copy)
    restore_gold_bodies(sample, work / "b")
    gnu = subprocess.run(["diff", "-ruN", "a/code", "b/code"], cwd=work, capture_output=True, text=True, check=False)
    assert gnu.returncode == 1 and "--- a/code/" in gnu.stdout, gnu.stderr
    # --no-prefix: the directories' own names a/ and b/ are the prefixes (git would add a/a/code/...).
    git = subprocess.run(
        ["git", "diff", "--no-index", "--no-prefix", "--no-color", "--no-ext-diff", "--", "a/code", "b/code"],
        cwd=work, capture_output=True, text=True, check=False,
    )
    assert git.returncode == 1 and "--- a/code/" in git.stdout and "diff --git a/code/" in git.stdout, git.stderr

    answer = gold_answer(sample)
    data = jsonl(record(SAMPLE, 0, final_answer=answer, final_patch=gnu.stdout), record(SAMPLE, 1, final_answer=answer, final_patch=git.stdout))
    submission = submission_create(data=data, filename="mine.jsonl", uploader=make_user(), reexecute=True, enqueue=False)
    submission_reexecute_sync(submission=submission)
    submission.refresh_from_db()
    assert submission.status == Submission.Status.VERIFIED
    for attempt in Attempt.objects.filter(run=submission.run):
        assert attempt.reexecution_passed is True, (attempt.index, attempt.reexecution_error, attempt.reexecution_output)
        assert attempt.passed is True and attempt.mismatch is False


def archive_members(content: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(content)) as opened:
        return {m.name: opened.extractfile(m).read() for m in opened.getmembers() if m.isfile()}


def test_task_download_is_built_once_and_served_from_the_cache(builtin, client, tmp_path, settings):
    settings.TASK_EXPORT_ROOT = tmp_path / "cache"
    url = reverse("leaderboard:task_download", args=["builtin", 1, "oracle"])
    assert url == "/benchmark/builtin/tasks/n1-oracle.tar.gz"
    response = client.get(url)
    assert response.status_code == 200 and response["Content-Type"] == "application/gzip"
    assert 'filename="n1-oracle.tar.gz"' in response["Content-Disposition"]
    content = b"".join(response.streaming_content)
    members = archive_members(content)
    top = "builtin-n1-oracle"
    samples = sorted(s.sample_id for s in samples_ensure(suite=builtin, n_values=[1]))
    assert sorted(members) == sorted([f"{top}/README.md", f"{top}/manifest.jsonl"] + [f"{top}/samples/{s}.tar.gz" for s in samples])
    manifest = [json.loads(line) for line in members[f"{top}/manifest.jsonl"].decode().splitlines()]
    assert {line["context"] for line in manifest} == {"oracle"} and len(manifest) == len(samples) == 28

    cached = list((tmp_path / "cache").rglob("n1-oracle.tar.gz"))
    assert len(cached) == 1 and cached[0].read_bytes() == content
    stamp = cached[0].stat().st_mtime_ns  # the second request reads the cache, it does not rebuild it
    assert b"".join(client.get(url).streaming_content) == content
    assert cached[0].stat().st_mtime_ns == stamp

    builtin.save()  # a re-import moves imported_at: the next request builds afresh and drops the old one
    assert b"".join(client.get(url).streaming_content) == content
    rebuilt = list((tmp_path / "cache").rglob("*.tar.gz"))
    assert len(rebuilt) == 1 and rebuilt[0].parent != cached[0].parent and not cached[0].exists()


@pytest.mark.parametrize("path", ["nosuch/tasks/n1-full.tar.gz", "builtin/tasks/n1-partial.tar.gz", "builtin/tasks/n0-full.tar.gz", "builtin/tasks/n9-full.tar.gz"])
def test_task_download_404s_for_an_unknown_suite_n_or_context(builtin, client, tmp_path, settings, path):
    settings.TASK_EXPORT_ROOT = tmp_path / "cache"
    assert client.get(f"/benchmark/{path}").status_code == 404


def test_a_private_suites_tasks_are_for_staff_only(builtin, client, tmp_path, settings):
    """A task holds the gold bodies of the functions its sample leaves unmasked: at n=1, every other
    function of the paper. A suite whose gold is private gives its tasks to staff alone."""
    settings.TASK_EXPORT_ROOT = tmp_path / "cache"
    settings.SIGNUP_ENABLED = True
    builtin.gold_public = False
    builtin.save(update_fields=["gold_public"])
    url = reverse("leaderboard:task_download", args=["builtin", 1, "full"])
    suite_page = reverse("leaderboard:benchmark_suite", args=["builtin"])

    member = Client()
    member.force_login(make_user())
    for visitor in (client, member):
        assert visitor.get(url).status_code == 404
        page = visitor.get(suite_page).content.decode()
        assert url not in page and 'id="task-downloads-private"' in page
        assert visitor.get(suite_page, {"format": "json"}).json()["task_downloads"] == []
    staff = Client()
    staff.force_login(make_user(is_staff=True))
    assert staff.get(url).status_code == 200 and url in staff.get(suite_page).content.decode()


def test_an_export_lists_the_data_files_and_carries_the_small_ones(tmp_path, native_suite_writer, native_paper, data_cache):
    import hashlib

    from runs.suites.export import EXPORT_DATA_MAX_BYTES
    from runs.suites.importers.native import import_native_suite

    small = b"1,2,3\n"
    native_paper["data"] = [
        {"name": "small.csv", "source": "data/small.csv", "sha256": hashlib.sha256(small).hexdigest(), "size": len(small)},
        {"name": "large.npz", "source": "https://example.org/large.npz", "sha256": "a" * 64,
         "size": EXPORT_DATA_MAX_BYTES + 1},
    ]
    root = native_suite_writer(tmp_path / "toy", paper=native_paper)
    (root / "toy-paper" / "data").mkdir()
    (root / "toy-paper" / "data" / "small.csv").write_bytes(small)
    suite, _ = import_native_suite(root)

    summary = tasks_export(suite=suite, n_values=[1], context="full", dest=tmp_path / "export", upload_format="")

    lines = [json.loads(line) for line in (summary.dest / "manifest.jsonl").read_text().splitlines()]
    assert all(line["data"] == [
        {**native_paper["data"][0], "file": "data/toy-paper/small.csv"},
        {**native_paper["data"][1], "file": None},
    ] for line in lines)
    assert (summary.dest / "data" / "toy-paper" / "small.csv").read_bytes() == small
    assert not (summary.dest / "data" / "toy-paper" / "large.npz").exists()  # never downloaded by an export
    assert "Files up to 1 MiB are in this export" in (summary.dest / "README.md").read_text()
