"""runs.benchmark.patch_parsing and patches: the one unified-diff parser and in-memory applier.

Real `git diff`, `git format-patch` and GNU `diff -ruN` output (made by running the tools in temp
directories) is parsed, accepted or refused at the right line; what is accepted applies in memory
to exactly what the tools' trees hold, and to what GNU `patch -p1` makes of the same patch.
"""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runs.benchmark.patch_parsing import parse_patch
from runs.benchmark.patches import FilePatch, Hunk, PatchError, apply_file_patch, unified_diff

# --- helpers -------------------------------------------------------------------------------------

GIT_ENV = {
    **os.environ,
    # The user's git configuration (diff.noprefix, diff.mnemonicPrefix, ...) must not change the output.
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org",
    "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.org",
}


def write_tree(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_bytes(content.encode("utf-8"))


def git(repo: Path, *args: str) -> str:
    completed = subprocess.run(["git", *args], cwd=repo, env=GIT_ENV, capture_output=True, check=True)
    return completed.stdout.decode("utf-8")


def git_repo(tmp_path: Path, files: dict[str, str | bytes]) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    write_tree(repo, files)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "before")
    return repo


def git_diff(repo: Path, *options: str) -> str:
    git(repo, "add", "-A")
    return git(repo, "diff", "--cached", *options)


def gnu_diff(tmp_path: Path, old: dict[str, str | bytes], new: dict[str, str | bytes], options: str = "-ruN") -> str:
    write_tree(tmp_path / "a", old)
    write_tree(tmp_path / "b", new)
    (tmp_path / "a").mkdir(exist_ok=True)
    (tmp_path / "b").mkdir(exist_ok=True)
    completed = subprocess.run(["diff", options, "a", "b"], cwd=tmp_path, capture_output=True)
    assert completed.returncode in (0, 1), completed.stderr
    return completed.stdout.decode("utf-8")


def gnu_patch(tmp_path: Path, files: dict[str, str], patch: str) -> dict[str, str]:
    """What GNU `patch -p1` makes of `files` and `patch`, with the options the harness used before it
    applied patches itself: never guess a reversed hunk, no backups, no reject files."""
    root = tmp_path / "gnu-patch"
    write_tree(root, files)
    root.mkdir(exist_ok=True)
    completed = subprocess.run(
        ["patch", "-p1", "--force", "--no-backup-if-mismatch", "-r", "-", "-d", str(root)],
        input=patch.encode("utf-8"), capture_output=True, timeout=60,
    )
    assert completed.returncode == 0, (completed.stdout + completed.stderr).decode()
    return {
        path.relative_to(root).as_posix(): path.read_bytes().decode("utf-8")
        for path in root.rglob("*") if path.is_file()
    }


def apply_all(files: dict[str, str], patch: str) -> dict[str, str]:
    """The tree after applying every section of `patch` in memory."""
    result = dict(files)
    for section in parse_patch(patch):
        content = apply_file_patch(result.get(section.path), section)
        if content is None:
            result.pop(section.path, None)
        else:
            result[section.path] = content
    return result


def refused(patch: str) -> PatchError:
    with pytest.raises(PatchError) as raised:
        parse_patch(patch)
    return raised.value


def line_of(patch: str, text: str) -> int:
    """The 1-based number of the first line of `patch` that starts with `text`."""
    return next(number for number, line in enumerate(patch.split("\n"), start=1) if line.startswith(text))


def assert_refused_at(patch: str, line: int, reason: str) -> PatchError:
    error = refused(patch)
    assert error.line == line, str(error)
    assert reason in error.reason, str(error)
    assert str(error).startswith(f"line {line}: "), str(error)
    return error


SIMPLE = "--- a/code/x.py\n+++ b/code/x.py\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"


# --- the empty patch and text that is no diff ------------------------------------------------------


@pytest.mark.parametrize("text", ["", " ", "\n\n", " \t\n  \n"])
def test_empty_or_blank_patch_changes_nothing(text):
    assert parse_patch(text) == []


def test_text_without_file_header_is_refused_at_its_first_line():
    assert_refused_at("\n\ndef f():\n    return 1\n", 3, "not a unified diff")
    assert_refused_at("@@ -1 +1 @@\n-a\n+b\n", 1, "not a unified diff")


def test_a_plain_diff_parses_into_hunks():
    [section] = parse_patch(SIMPLE)
    assert section == FilePatch(
        path="code/x.py", change="modified", line=1, text=SIMPLE,
        hunks=(Hunk(1, 3, 1, 3, (" a", "-b", "+B", " c"), False, False, 3),),
    )
    assert apply_file_patch("a\nb\nc\n", section) == "a\nB\nc\n"


# --- real git output -----------------------------------------------------------------------------


BEFORE = {
    "code/mod.py": "import os\n\n\ndef f():\n    return 1\n",
    "code/pkg/gone.py": "x = 1\n",
    "code/empty_gone.py": "",
    "code/with space.py": "a\n",
    "code/caf\u00e9.py": "\u00e9\n",
    "code/nonl.py": "last line",
    "code/crlf.py": "a\r\nb\r\n",
}


def test_git_diff_modify_add_delete_applies_to_the_new_tree(tmp_path):
    repo = git_repo(tmp_path, BEFORE)
    after = dict(BEFORE)
    after["code/mod.py"] = "import os\n\n\ndef f():\n    return 2  # --- not a header\n"
    after["code/new.py"] = "-- starts like a header\n+++ too\n"
    after["code/empty_new.py"] = ""
    after["code/with space.py"] = "b\n"
    after["code/caf\u00e9.py"] = "\u00e8\n"
    after["code/nonl.py"] = "last line\nand one more"
    after["code/crlf.py"] = "a\r\nB\r\n"
    del after["code/pkg/gone.py"], after["code/empty_gone.py"]
    for name in ("code/pkg/gone.py", "code/empty_gone.py"):
        (repo / name).unlink()
    write_tree(repo, after)
    patch = git_diff(repo, "--no-renames")  # git pairs the empty files as a rename otherwise

    sections = parse_patch(patch)
    changes = {section.path: section.change for section in sections}
    assert changes == {
        "code/caf\u00e9.py": "modified", "code/crlf.py": "modified", "code/empty_gone.py": "deleted",
        "code/empty_new.py": "added", "code/mod.py": "modified", "code/new.py": "added",
        "code/nonl.py": "modified", "code/pkg/gone.py": "deleted", "code/with space.py": "modified",
    }
    assert '"a/code/caf\\303\\251.py"' in patch  # git's C-quoting of non-ASCII names
    assert "".join(section.text for section in sections) == patch
    assert [section.line for section in sections] == [
        line_of(patch, f"diff --git {name}") for name in (
            '"a/code/caf', "a/code/crlf.py", "a/code/empty_gone.py", "a/code/empty_new.py", "a/code/mod.py",
            "a/code/new.py", "a/code/nonl.py", "a/code/pkg/gone.py", "a/code/with space.py",
        )
    ]
    assert apply_all(BEFORE, patch) == after


def _git_refusal(tmp_path, change, *options) -> tuple[str, PatchError]:
    repo = git_repo(tmp_path, {"code/mod.py": "a\n", "code/bin.dat": b"\x00\x01", "code/run.sh": "echo\n"})
    change(repo)
    patch = git_diff(repo, *options)
    return patch, refused(patch)


def test_git_rename_is_refused_at_the_rename_line(tmp_path):
    patch, error = _git_refusal(tmp_path, lambda repo: (repo / "code/mod.py").rename(repo / "code/moved.py"), "-M")
    assert error.line == line_of(patch, "rename from") == 3
    assert str(error) == (
        'line 3: "rename from code/mod.py": renames are not accepted (git diff --no-renames writes a deletion and an '
        "addition)"
    )


def test_git_copy_is_refused_at_the_copy_line(tmp_path):
    patch, error = _git_refusal(
        tmp_path, lambda repo: (repo / "code/copy.py").write_text("a\n"), "-C", "--find-copies-harder"
    )
    assert error.line == line_of(patch, "copy from") == 3 and "copies are not accepted" in str(error)


def test_git_new_symlink_is_refused(tmp_path):
    patch, error = _git_refusal(tmp_path, lambda repo: (repo / "code/link").symlink_to("mod.py"))
    assert error.line == line_of(patch, "new file mode 120000") == 2
    assert "symbolic links are not accepted" in str(error)


def test_git_changed_symlink_is_refused_at_its_index_line(tmp_path):
    repo = git_repo(tmp_path, {"code/mod.py": "a\n"})
    (repo / "code/link").symlink_to("mod.py")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "link")
    (repo / "code/link").unlink()
    (repo / "code/link").symlink_to("other.py")
    patch = git_diff(repo)
    error = refused(patch)
    assert error.line == line_of(patch, "index ") == 2 and "120000" in str(error)


def test_git_mode_change_is_refused(tmp_path):
    patch, error = _git_refusal(tmp_path, lambda repo: (repo / "code/run.sh").chmod(0o755))
    assert error.line == line_of(patch, "old mode") == 2 and "mode changes are not accepted" in str(error)


def test_git_binary_change_is_refused_with_and_without_binary_option(tmp_path):
    patch, error = _git_refusal(tmp_path, lambda repo: (repo / "code/bin.dat").write_bytes(b"\x00\x02"))
    assert error.line == line_of(patch, "Binary files") == 3 and "binary" in str(error)
    repo = tmp_path / "repo"
    patch = git_diff(repo, "--binary")
    error = refused(patch)
    assert error.line == line_of(patch, "GIT binary patch") == 3 and "binary" in str(error)


def test_git_new_executable_file_is_accepted(tmp_path):
    def change(repo):
        (repo / "code/tool.sh").write_text("echo hi\n")
        (repo / "code/tool.sh").chmod(0o755)

    repo = git_repo(tmp_path, {"code/mod.py": "a\n"})
    change(repo)
    patch = git_diff(repo)
    assert "new file mode 100755" in patch
    [section] = parse_patch(patch)
    assert (section.path, section.change) == ("code/tool.sh", "added")
    assert apply_file_patch(None, section) == "echo hi\n"


def test_git_format_patch_mail_preamble_and_signature_are_ignored(tmp_path):
    repo = git_repo(tmp_path, {"code/mod.py": "a\nb\n"})
    (repo / "code/mod.py").write_text("a\nc\n")
    git(repo, "commit", "-qam", "change b\n\nThe diff below is small.\n-- and ++ in prose\n@@ too")
    mail = git(repo, "format-patch", "-1", "--stdout")
    assert mail.startswith("From ") and "\n-- \n" in mail
    [section] = parse_patch(mail)
    assert section.line == line_of(mail, "diff --git")
    assert apply_file_patch("a\nb\n", section) == "a\nc\n"
    # A section after the signature would be read by some tools and not by others.
    assert_refused_at(mail + SIMPLE, line_of(mail + SIMPLE, "--- a/code/x.py"), "after the mail signature")


# --- real GNU diff output ------------------------------------------------------------------------


def test_gnu_diff_ruN_applies_to_the_new_tree_like_gnu_patch(tmp_path):
    old = {
        "code/mod.py": "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\n", "code/gone.py": "bye\n", "code/nonl.py": "x",
        "code/sp ace.py": "1\n", "code/t\tab.py": "2\n",
    }
    new = {
        "code/mod.py": "a\nB\nc\nd\ne\nf\ng\nh\ni\nJ\nk\n", "code/added.py": "hi\n", "code/nonl.py": "y",
        "code/sub/deep.py": "--- x\n", "code/sp ace.py": "one\n", "code/t\tab.py": "two\n",
    }
    patch = gnu_diff(tmp_path, old, new)
    assert patch.startswith("diff -ruN ") and "\t1970-01-01 00:00:00" in patch and '"a/code/sp ace.py"' in patch
    # A tab in a name is quoted by GNU diff and refused (control character); the rest is fine.
    error = refused(patch)
    assert error.line == line_of(patch, 'diff -ruN "a/code/t') + 1 and "control character" in str(error)
    del old["code/t\tab.py"], new["code/t\tab.py"]
    (tmp_path / "a/code/t\tab.py").unlink()
    (tmp_path / "b/code/t\tab.py").unlink()
    patch = gnu_diff(tmp_path, {}, {})
    sections = parse_patch(patch)
    assert {section.path: section.change for section in sections} == {
        "code/added.py": "added", "code/gone.py": "deleted", "code/mod.py": "modified", "code/nonl.py": "modified",
        "code/sp ace.py": "modified", "code/sub/deep.py": "added",
    }
    assert [len(section.hunks) for section in sections if section.path == "code/mod.py"] == [2]
    assert apply_all(old, patch) == new == gnu_patch(tmp_path, old, patch)


def test_gnu_diff_without_N_is_refused_at_only_in(tmp_path):
    patch = gnu_diff(tmp_path, {"code/mod.py": "a\n"}, {"code/mod.py": "b\n", "code/new.py": "c\n"}, "-ru")
    assert_refused_at(patch, line_of(patch, "Only in b/code: new.py"), "does not show")


def test_gnu_diff_brief_symlink_and_type_reports_are_refused(tmp_path):
    patch = gnu_diff(tmp_path / "q", {"code/mod.py": "a\n"}, {"code/mod.py": "b\n"}, "-rq")
    assert patch == "Files a/code/mod.py and b/code/mod.py differ\n"
    assert_refused_at(patch, 1, "a change the diff does not show")

    root = tmp_path / "links"
    write_tree(root, {"a/code/mod.py": "a\n", "b/code/mod.py": "a\n", "a/code/dir/x.py": "", "b/code/dir": "file\n"})
    (root / "a/code/link").symlink_to("mod.py")
    (root / "b/code/link").symlink_to("other.py")
    patch = subprocess.run(["diff", "-r", "--no-dereference", "a", "b"], cwd=root, capture_output=True, text=True).stdout
    assert "Symbolic links a/code/link and b/code/link differ" in patch and "while file b/code/dir is a regular" in patch
    for line in filter(None, patch.split("\n")):
        assert_refused_at(line + "\n" + SIMPLE, 1, "only regular files may change")


def test_gnu_diff_binary_files_are_refused(tmp_path):
    patch = gnu_diff(tmp_path, {"code/b.dat": b"\x00\x01"}, {"code/b.dat": b"\x00\x02"})
    assert_refused_at(patch, 1, "binary changes are not accepted")
    assert_refused_at(SIMPLE + patch, 8, "binary changes are not accepted")


def test_gnu_context_diff_is_refused(tmp_path):
    patch = gnu_diff(tmp_path, {"code/mod.py": "a\n"}, {"code/mod.py": "b\n"}, "-rc")
    assert_refused_at(patch, 2, "context-format diffs are not accepted")
    assert_refused_at(patch.split("\n", 1)[1], 1, "context-format diffs are not accepted")


def test_gnu_diff_u_with_labels(tmp_path):
    write_tree(tmp_path, {"old.py": "a\n", "new.py": "b\n"})
    patch = subprocess.run(
        ["diff", "-u", "--label", "a/code/m.py", "--label", "b/code/m.py", "old.py", "new.py"],
        cwd=tmp_path, capture_output=True, text=True,
    ).stdout
    [section] = parse_patch(patch)
    assert apply_file_patch("a\n", section) == "b\n"


# --- git extended headers, written by hand -------------------------------------------------------


def git_section(*header: str, body: str = "--- a/code/x.py\n+++ b/code/x.py\n@@ -1 +1 @@\n-a\n+b\n") -> str:
    return "diff --git a/code/x.py b/code/x.py\n" + "".join(line + "\n" for line in header) + body


ADDED_BODY = "--- /dev/null\n+++ b/code/x.py\n@@ -0,0 +1 @@\n+b\n"
DELETED_BODY = "--- a/code/x.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n"


@pytest.mark.parametrize(
    ("patch", "change"),
    [
        (git_section("index 1234567..89abcde 100644"), "modified"),
        (git_section("index 1234567..89abcde 100755"), "modified"),
        (git_section("index 1234567..89abcde"), "modified"),
        (git_section("dissimilarity index 100%", "index 1234567..89abcde 100644"), "modified"),  # git diff -B
        (git_section("new file mode 100644", "index 0000000..89abcde", body=ADDED_BODY), "added"),
        (git_section("new file mode 100755", "index 0000000..89abcde", body=ADDED_BODY), "added"),
        (git_section("deleted file mode 100644", "index 1234567..0000000", body=DELETED_BODY), "deleted"),
        (git_section("new file mode 100644", "index 0000000..e69de29", body=""), "added"),  # an empty file
        (git_section("deleted file mode 100755", "index e69de29..0000000", body=""), "deleted"),
    ],
)
def test_git_headers_accepted(patch, change):
    [section] = parse_patch(patch)
    assert (section.path, section.change, section.line, section.text) == ("code/x.py", change, 1, patch)


@pytest.mark.parametrize(
    ("patch", "line", "reason"),
    [
        (git_section("old mode 100644", "new mode 100755", body=""), 2, "mode changes are not accepted"),
        (git_section("new mode 100755", body=""), 2, "mode changes are not accepted"),
        (git_section("similarity index 90%", "rename from code/x.py", "rename to code/y.py"), 3, "renames are not accepted"),
        (git_section("similarity index 90%", "copy from code/x.py", "copy to code/y.py"), 3, "copies are not accepted"),
        (git_section("new file mode 120000", body=ADDED_BODY), 2, "symbolic links are not accepted"),
        (git_section("deleted file mode 120000", body=DELETED_BODY), 2, "symbolic links are not accepted"),
        (git_section("new file mode 160000", body=ADDED_BODY), 2, "submodules are not accepted"),
        (git_section("new file mode 100664", body=ADDED_BODY), 2, "file mode 100664 are not accepted"),
        (git_section("new file mode 644", body=ADDED_BODY), 2, "malformed file mode"),
        (git_section("index 1234567..89abcde 160000"), 2, "submodules are not accepted"),
        (git_section("index 1234567..89abcde 120000"), 2, "symbolic links are not accepted"),
        (git_section("index xyz"), 2, "malformed index line"),
        (git_section("similarity index much"), 2, "malformed similarity line"),
        (git_section("index 1234567..89abcde 100644", "Binary files a/code/x.py and b/code/x.py differ", body=""),
         3, "binary changes are not accepted"),
        (git_section("index 1234567..89abcde 100644", "GIT binary patch", "literal 2", "JcmZQz1ONa700IC2", "",
                     "literal 2", "JcmZQz0ssI600RI3", body=""), 3, "binary changes are not accepted"),
        (git_section("index 1234567..89abcde 100644", body=""), 1, "changes no line"),
        (git_section(body=ADDED_BODY), 2, "should name a/code/x.py"),  # /dev/null without "new file mode"
        (git_section("new file mode 100644"), 3, "should name /dev/null"),
        (git_section(body="--- a/code/y.py\n+++ b/code/y.py\n@@ -1 +1 @@\n-a\n+b\n"), 2, "should name a/code/x.py"),
        (git_section(body="--- a/code/x.py\n+++ b/code/y.py\n@@ -1 +1 @@\n-a\n+b\n"), 3, "should name b/code/x.py"),
        (git_section(body="--- a/code/x.py\n@@ -1 +1 @@\n-a\n+b\n"), 3, 'followed by a "+++ " header'),
        ("diff --git a/code/x.py b/code/y.py\n--- a/code/x.py\n+++ b/code/y.py\n@@ -1 +1 @@\n-a\n+b\n", 1,
         "two different files"),
        ("diff --git a/code/x.py b/code/y.py\nsimilarity index 100%\nrename from code/x.py\nrename to code/y.py\n",
         3, "renames are not accepted"),
        ("diff --git a/code/x.py\n--- a/code/x.py\n+++ b/code/x.py\n@@ -1 +1 @@\n-a\n+b\n", 1, "two different files"),
        ("diff --git code/x.py code/x.py\n--- a/code/x.py\n+++ b/code/x.py\n@@ -1 +1 @@\n-a\n+b\n", 1,
         "code/x.py is not a file under a/code/"),
        ("diff --cc code/x.py\nindex 1,2..3\n--- a/code/x.py\n+++ b/code/x.py\n@@@ -1 -1 +1 @@@\n", 1, "combined"),
        (SIMPLE + "rename from code/x.py\n", 8, 'outside a "diff --git" header'),
    ],
)
def test_git_headers_refused(patch, line, reason):
    assert_refused_at(patch, line, reason)


def test_error_message_names_the_line_and_quotes_it():
    error = refused(SIMPLE + git_section("similarity index 90%", "rename from a/code/x.py", "rename to b/code/y.py"))
    assert str(error).startswith('line 10: "rename from a/code/x.py": renames are not accepted')
    assert (error.line, error.source) == (10, "rename from a/code/x.py")
    assert error.reason.startswith("renames are not accepted")
    assert isinstance(error, ValueError)


# --- names: quoting, paths outside code/ -------------------------------------------------------------


def test_quoted_names_with_octal_utf8_and_spaces():
    patch = (
        'diff --git "a/code/caf\\303\\251 \\"q\\".py" "b/code/caf\\303\\251 \\"q\\".py"\n'
        '--- "a/code/caf\\303\\251 \\"q\\".py"\t2024-01-01 00:00:00.000000000 +0000\n'
        '+++ "b/code/caf\\303\\251 \\"q\\".py"\n'
        "@@ -1 +1 @@\n-a\n+b\n"
    )
    [section] = parse_patch(patch)
    assert section.path == 'code/caf\u00e9 "q".py'
    unquoted_spaces = "diff --git a/code/a b c.py b/code/a b c.py\n--- a/code/a b c.py\t\n+++ b/code/a b c.py\t\n@@ -1 +1 @@\n-a\n+b\n"
    assert parse_patch(unquoted_spaces)[0].path == "code/a b c.py"


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ('"a/code/tab\\there.py"', "control character"),
        ('"a/code/new\\nline.py"', "control character"),
        ('"a/code/bell\\a.py"', "control character"),
        ('"a/code/esc\\033.py"', "control character"),
        ("a/code/esc\x1b.py", "control character"),
        ("a/code/cr.py\r", "CRLF"),
        ("a/code/sep\u2028.py", "control character"),
        ("a/code/c1\x85.py", "control character"),
        ('"a/code/x\\q.py"', "unknown escape"),
        ('"a/code/x.py', "no closing quote"),
        ('"a/code/\\377.py"', "not UTF-8"),
        ('"a/code/x.py"junk', "text after the quoted file name"),
    ],
)
def test_bad_names_are_refused(name, reason):
    assert_refused_at(f"--- {name}\n+++ b/code/x.py\n@@ -1 +1 @@\n-a\n+b\n", 1, reason)


@pytest.mark.parametrize(
    ("old", "new", "line", "reason"),
    [
        ("a/code/../../etc/passwd", "b/code/../../etc/passwd", 1, '".." component'),
        ("a/code/x.py", "b/code/../../etc/passwd", 2, '".." component'),
        ("/etc/passwd", "/etc/passwd", 1, "absolute path"),
        ("a/code/x", "b/code//x", 2, "empty path component"),
        ("a/code/x/", "b/code/x/", 1, "empty path component"),
        ("a/code/./x", "b/code/./x", 1, '"." or ".." component'),
        ("a/other/x", "b/other/x", 1, "a/other/x is not a file under a/code/"),
        ("a/code/x", "b/other/x", 2, "b/other/x is not a file under b/code/"),
        ("a/code", "b/code", 1, "not a file under a/code/"),
        ("code/x.py", "code/x.py", 1, "not a file under a/code/"),
        ("b/code/x.py", "a/code/x.py", 1, "not a file under a/code/"),
        ("a/code/x.py", "b/code/y.py", 2, "two different files"),
        ("/dev/null", "/dev/null", 2, "both file headers say the file does not exist"),
        ("a/code/x.py\t1970-01-01 00:00:00 +0000", "/dev/null", 2, "both file headers"),
    ],
)
def test_paths_outside_code_are_refused(old, new, line, reason):
    patch = f"--- {old}\n+++ {new}\n@@ -1 +1 @@\n-a\n+b\n"
    assert_refused_at(patch, line, reason)
    assert_refused_at("diff -ruN a b\n" + patch, line + 1, reason)


def test_the_same_file_in_two_sections_is_refused():
    patch = SIMPLE + "--- a/code/y.py\n+++ b/code/y.py\n@@ -1 +1 @@\n-a\n+b\n" + SIMPLE
    error = assert_refused_at(patch, 13, "code/x.py already has a section at line 1")
    assert error.source == "--- a/code/x.py"


def test_gnu_epoch_timestamps_mean_a_missing_file_in_any_time_zone():
    added = "--- a/code/n.py\t1969-12-31 19:00:00.000000000 -0500\n+++ b/code/n.py\t2024-05-01 10:00:00 +0200\n@@ -0,0 +1 @@\n+x\n"
    [section] = parse_patch(added)
    assert section.change == "added" and apply_file_patch(None, section) == "x\n"
    modified = added.replace("1969-12-31 19:00:00.000000000 -0500", "1970-01-01 00:00:01 +0000")
    assert parse_patch(modified)[0].change == "modified"  # an existing empty file


# --- hunks ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "line", "reason"),
    [
        # Too few body lines: the next header arrives while the hunk still needs lines.
        ("@@ -1,3 +1,3 @@\n a\n-b\n+B\ndiff --git a/code/y.py b/code/y.py\n", 7, "needs 1 more old and 1 more new line(s)"),
        # ... whereas a "--- "/"+++ " pair there is read as a removed and an added line, by the counts.
        ("@@ -1,3 +1,3 @@\n a\n-b\n+B\n" + SIMPLE, 9, "overlaps or comes before the hunk at line 3"),
        # Too few, at the end of the patch: named at the last line.
        ("@@ -1,3 +1,3 @@\n a\n-b\n+B\n", 6, "the patch ends too early: the hunk at line 3 needs 1 more old"),
        # Too many: a line after the counts are met.
        ("@@ -1,2 +1,2 @@\n a\n-b\n+B\n+C\n", 7, "already has the 2 old and 2 new line(s)"),
        ("@@ -1 +1,2 @@\n-a\n-b\n+B\n", 5, "has more lines than its header counts (1 old, 2 new)"),
        ("@@ -1 +1 @@\n-a\n+b\ngarbage\n", 6, "not a line of a unified diff"),
        ("@@ -1 +1 @@\n-a\n+b\n@@ -1 +1 @@\n-a\n+b\n", 6, "overlaps or comes before the hunk at line 3"),
        ("@@ -5 +5 @@\n-a\n+b\n@@ -2 +2 @@\n-a\n+b\n", 6, "overlaps or comes before"),
        ("@@ -1,2 +1,2 @@\n a\n-b\n+B\n@@ -2 +2 @@\n-a\n+b\n", 7, "overlaps"),
        ("@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+b\n@@ -3 +3 @@\n-c\n+d\n", 7, "which ends the file"),
        ("@@ -1 +1 @@\n\\ No newline at end of file\n-a\n+b\n", 4, 'a "\\" line must follow a line of the hunk'),
        ("@@ -1 +1 @@\n-a\n\\ No newline at end of file\n\\ No newline at end of file\n+b\n", 6, 'must follow a line'),
        ("@@ -1,2 +1,2 @@\n a\n\\ No newline at end of file\n-b\n+b\n", 6, "after \"\\ No newline"),
        ("@@ -1 +1 @@ \n-a\n+b\n", 3, None),  # a trailing space belongs to the section text: fine
        ("@@ -1,a +1 @@\n-a\n+b\n", 3, "malformed hunk header"),
        ("@@ -1 +1\n-a\n+b\n", 3, "malformed hunk header"),
        ("@@ -0,1 +1 @@\n-a\n+b\n", 3, "line numbers start at 1"),
        ("@@ -1 +1 @@\n-a\n+b\n@@ -99999999999 +1 @@\n-a\n+b\n", 6, "malformed hunk header"),
        ("", 2, "a file section without hunks"),
    ],
)
def test_malformed_hunks_are_refused(body, line, reason):
    patch = "--- a/code/x.py\n+++ b/code/x.py\n" + body
    if reason is None:
        assert parse_patch(patch)
    else:
        assert_refused_at(patch, line, reason)


def test_added_and_deleted_files_have_one_whole_file_hunk():
    assert_refused_at("--- /dev/null\n+++ b/code/x.py\n@@ -1 +1 @@\n-a\n+b\n", 3, "an added file has one hunk")
    assert_refused_at("--- a/code/x.py\n+++ /dev/null\n@@ -1 +1 @@\n-a\n+b\n", 3, "a deleted file has one hunk")


def test_body_lines_that_look_like_headers_are_read_by_the_counts(tmp_path):
    old = "-- old\n++ kept\nx\n"
    new = "++ kept\n++ new\nx\n"
    patch = unified_diff("code/x.py", old, new)
    assert "\n--- old\n" in patch and "\n+++ new\n" in patch
    [section] = parse_patch(patch)
    assert section.hunks[0].lines == ("--- old", " ++ kept", "+++ new", " x")
    assert apply_file_patch(old, section) == new == gnu_patch(tmp_path, {"code/x.py": old}, patch)["code/x.py"]


def test_empty_body_line_is_a_context_line_whose_space_was_stripped():
    [section] = parse_patch("--- a/code/x.py\n+++ b/code/x.py\n@@ -1,3 +1,3 @@\n a\n\n-b\n+B\n")
    assert section.hunks[0].lines == (" a", " ", "-b", "+B")
    assert apply_file_patch("a\n\nb\n", section) == "a\n\nB\n"


def test_unrecognised_lines_between_sections_are_refused():
    assert_refused_at(SIMPLE + "Index: code/x.py\n" + SIMPLE.replace("x.py", "y.py"), 8, "not a line of a unified diff")
    assert_refused_at(SIMPLE + "+++ b/code/y.py\n", 8, "already has the 3 old and 3 new")
    assert_refused_at(SIMPLE + "--- a/code/y.py\n@@ -1 +1 @@\n", 8, 'followed by a "+++ " header')
    assert_refused_at(SIMPLE + "@@ -9 +9 @@\n-a\n+b\n" + "\n" + "@@ -20 +20 @@\n", 12, "a hunk without its file headers")
    # Blank lines between sections are allowed.
    assert len(parse_patch(SIMPLE + "\n\n" + SIMPLE.replace("x.py", "y.py") + "\n")) == 2


# --- applying ----------------------------------------------------------------------------------


def one(patch: str) -> FilePatch:
    [section] = parse_patch(patch)
    return section


def test_offset_hunks_apply_at_the_nearest_exact_match(tmp_path):
    patch = "--- a/code/x.py\n+++ b/code/x.py\n@@ -2,3 +2,3 @@\n a\n-b\n+B\n c\n"
    section = one(patch)
    assert apply_file_patch("0\na\nb\nc\n", section) == "0\na\nB\nc\n"  # at the stated line
    assert apply_file_patch("0\n1\n2\n3\na\nb\nc\n", section) == "0\n1\n2\n3\na\nB\nc\n"  # 3 lines later
    assert apply_file_patch("a\nb\nc\n", section) == "a\nB\nc\n"  # 1 line earlier
    # Two matches, 1 line before and 5 lines after the stated line: the nearer one wins.
    assert apply_file_patch("a\nb\nc\nx\nx\nx\na\nb\nc\n", section) == "a\nB\nc\nx\nx\nx\na\nb\nc\n"
    # At equal distance patch(1) prefers the later match; so do we.
    text = "a\nb\nc\nx\na\nb\nc\n"  # matches at lines 1 and 5, 2 lines either side of the stated line 3
    two = one("--- a/code/x.py\n+++ b/code/x.py\n@@ -3,3 +3,3 @@\n a\n-b\n+B\n c\n")
    assert apply_file_patch(text, two) == "a\nb\nc\nx\na\nB\nc\n"
    assert apply_file_patch(text, two) == gnu_patch(tmp_path, {"code/x.py": text}, two.text)["code/x.py"]


def test_later_hunks_keep_the_offset_of_earlier_ones(tmp_path):
    lines = [f"{n}\n" for n in range(1, 31)]
    old = "".join(lines)
    lines[4], lines[24] = "five\n", "twenty-five\n"
    new = "".join(lines)
    shifted = "new 1\nnew 2\n" + old
    patch = unified_diff("code/x.py", old, new)
    section = one(patch)
    assert len(section.hunks) == 2
    result = apply_file_patch(shifted, section)
    assert result == "new 1\nnew 2\n" + new
    assert result == gnu_patch(tmp_path, {"code/x.py": shifted}, patch)["code/x.py"]


def test_context_that_matches_nowhere_fails_at_the_hunk_line():
    patch = SIMPLE + "@@ -10,3 +10,3 @@\n p\n-q\n+Q\n r\n"
    with pytest.raises(PatchError) as raised:
        apply_file_patch("a\nb\nc\n" + "x\n" * 10, one(patch))
    assert raised.value.line == 8 and str(raised.value).startswith('line 8: "@@ -10,3 +10,3 @@": code/x.py: ')
    # No fuzz: one changed context line is a mismatch, and so is whitespace.
    for text in ("a\nb\nC\n", "a \nb\nc\n", "a\r\nb\r\nc\r\n"):
        with pytest.raises(PatchError):
            apply_file_patch(text, one(SIMPLE))


def test_a_hunk_is_never_applied_before_the_previous_one():
    # The second hunk's context exists only above the first hunk.
    patch = "--- a/code/x.py\n+++ b/code/x.py\n@@ -5 +5 @@\n-e\n+E\n@@ -7 +7 @@\n-a\n+A\n"
    with pytest.raises(PatchError) as raised:
        apply_file_patch("a\nb\nc\nd\ne\nf\ng\n", one(patch))
    assert raised.value.line == 6


def test_crlf_content_keeps_its_carriage_returns(tmp_path):
    old, new = "a\r\nb\r\nc\r\n", "a\r\nB\r\nc\r\n"
    patch = unified_diff("code/x.py", old, new)
    assert "-b\r\n+B\r\n" in patch
    section = one(patch)
    assert section.hunks[0].lines == (" a\r", "-b\r", "+B\r", " c\r")
    assert apply_file_patch(old, section) == new


def test_missing_final_newline_on_either_side(tmp_path):
    cases = [("a\nb", "a\nc"), ("a\nb", "a\nb\n"), ("a\nb\n", "a\nb"), ("", "x"), ("x", ""), ("a\n\nb", "a\n\nb\n")]
    for number, (old, new) in enumerate(cases):
        patch = unified_diff("code/x.py", old, new)
        assert apply_file_patch(old, one(patch)) == new, (old, new, patch)
        assert gnu_patch(tmp_path / str(number), {"code/x.py": old}, patch)["code/x.py"] == new
    # A hunk that ends the file without a newline cannot apply where the file goes on.
    section = one("--- a/code/x.py\n+++ b/code/x.py\n@@ -1 +1 @@\n-a\n+b\n\\ No newline at end of file\n")
    assert apply_file_patch("a\n", section) == "b"
    with pytest.raises(PatchError, match="goes on after it"):
        apply_file_patch("a\nmore\n", section)
    # The old side says "no newline" but the file has one (and the other way round).
    section = one("--- a/code/x.py\n+++ b/code/x.py\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+b\n")
    with pytest.raises(PatchError):
        apply_file_patch("a\n", section)
    with pytest.raises(PatchError):
        apply_file_patch("a", one("--- a/code/x.py\n+++ b/code/x.py\n@@ -1 +1 @@\n-a\n+b\n"))


def test_added_deleted_and_missing_files():
    added = one(unified_diff("code/x.py", None, "a\n"))
    assert added.change == "added" and apply_file_patch(None, added) == "a\n"
    with pytest.raises(PatchError, match="already exists"):
        apply_file_patch("", added)
    deleted = one(unified_diff("code/x.py", "a\nb\n", None))
    assert deleted.change == "deleted" and apply_file_patch("a\nb\n", deleted) is None
    with pytest.raises(PatchError):
        apply_file_patch("a\nB\n", deleted)  # the content must match
    with pytest.raises(PatchError, match="lines the patch does not remove"):
        apply_file_patch("a\nb\nc\n", deleted)
    with pytest.raises(PatchError, match="does not exist"):
        apply_file_patch(None, deleted)
    with pytest.raises(PatchError, match="does not exist"):
        apply_file_patch(None, one(SIMPLE))
    empty_deleted = one(git_section("deleted file mode 100644", "index e69de29..0000000", body=""))
    assert apply_file_patch("", empty_deleted) is None
    with pytest.raises(PatchError):
        apply_file_patch("not empty\n", empty_deleted)


# --- round trips -----------------------------------------------------------------------------------

# Characters str.splitlines() splits on but a patch must keep as content, and a few that matter in diffs.
EXOTIC = ["\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
PLAIN = ["a", "b", " ", "-", "+", "\\", "@", "\t", "\u00e9"]
LINE = st.text(st.sampled_from(PLAIN + EXOTIC), max_size=6)
# "\r" only at the end of a line: "\r\n" is one line break for splitlines() too.
SAFE_LINE = st.tuples(st.text(st.sampled_from(PLAIN), max_size=6), st.booleans()).map(
    lambda parts: parts[0] + ("\r" if parts[1] else "")
)


def texts(line_strategy) -> st.SearchStrategy[str]:
    """File contents: lines (often repeated, so hunks have ambiguous context), with or without a
    final newline."""
    return st.tuples(st.lists(line_strategy, max_size=12), st.booleans()).map(
        lambda parts: "\n".join(parts[0]) + ("\n" if parts[1] and parts[0] else "")
    )


def edits(line_strategy):
    """(old, new): new is old with random lines replaced, inserted and removed."""
    @st.composite
    def build(draw):
        old = draw(texts(line_strategy))
        lines = old.split("\n")
        for _ in range(draw(st.integers(0, 4))):
            position = draw(st.integers(0, len(lines)))
            action = draw(st.sampled_from(["insert", "delete", "replace"]))
            if action == "insert":
                lines.insert(position, draw(line_strategy))
            elif lines and position < len(lines):
                if action == "delete":
                    del lines[position]
                else:
                    lines[position] = draw(line_strategy)
        return old, "\n".join(lines)
    return build()


ROUND_TRIP = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@ROUND_TRIP
@given(st.one_of(edits(LINE), edits(SAFE_LINE)))
def test_round_trip_of_the_agents_unified_diff_with_exotic_line_separators(pair):
    old, new = pair
    for before, after in ((old, new), (None, new), (old, None)):
        patch = unified_diff("code/x.py", before, after)
        sections = parse_patch(patch)
        if not patch:  # no change, or an empty file added or deleted (only git's headers can say that)
            assert sections == [] and (before or "") == (after or "")
            continue
        [section] = sections
        assert apply_file_patch(before, section) == after
        assert section.text == patch


@pytest.mark.parametrize("separator", EXOTIC)
def test_agents_unified_diff_keeps_exotic_separators_inside_lines(separator):
    old, new = f"a{separator}b\nc\n", f"a{separator}b\nd\n"
    patch = unified_diff("code/x.py", old, new)
    assert apply_file_patch(old, one(patch)) == new


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(edits(LINE))
def test_same_result_as_gnu_patch(tmp_path, pair):
    old, new = pair
    patch = unified_diff("code/x.py", old, new)
    if not patch:
        return
    ours = apply_file_patch(old, one(patch))
    root = tmp_path / str(time.monotonic_ns())
    assert ours == new == gnu_patch(root, {"code/x.py": old}, patch)["code/x.py"]


# --- bounded work --------------------------------------------------------------------------------


def test_parsing_is_linear_in_the_patch_size():
    def patch_of(hunks: int) -> str:
        body = "".join(f"@@ -{3 * n + 1},2 +{3 * n + 1},2 @@\n--- a\n+++ b\n-- x\n++ y\n" for n in range(hunks))
        return "--- a/code/x.py\n+++ b/code/x.py\n" + body

    timings = []
    for hunks in (10_000, 40_000):
        text = patch_of(hunks)
        started = time.perf_counter()
        [section] = parse_patch(text)
        timings.append(time.perf_counter() - started)
        assert len(section.hunks) == hunks
    assert timings[1] < 10 * timings[0] + 2, timings  # 4x the size: about 4x the time, never 16x


def test_long_crafted_lines_are_read_in_linear_time():
    crafted = [
        "File " + " is a" * 200_000,  # what a regular expression with several ".+" would backtrack on
        "Files " + " and" * 200_000,
        "diff --git " + "a/code/" * 100_000 + " " + "b/code/" * 99_999,
        '"' + "\\" * 200_000,
    ]
    for line in crafted:
        started = time.perf_counter()
        with pytest.raises(PatchError):
            parse_patch(line + "\n" + SIMPLE + line + "\n")
        assert time.perf_counter() - started < 2


def test_searching_for_a_hunk_in_a_file_of_repeated_lines_is_not_quadratic():
    # 60,000 equal lines and a 2,000-line hunk whose last line matches only at the very end: comparing
    # the hunk at every position would be 120 million line comparisons.
    size, hunk = 60_000, 2_000
    original = "x\n" * size + "end\n"
    section = one(
        f"--- a/code/x.py\n+++ b/code/x.py\n@@ -1,{hunk} +1,{hunk} @@\n" + " x\n" * (hunk - 1) + "-end\n+END\n"
    )
    started = time.perf_counter()
    assert apply_file_patch(original, section) == "x\n" * size + "END\n"
    assert time.perf_counter() - started < 5


# --- the callers ---------------------------------------------------------------------------------


def test_replay_uses_the_parser_and_falls_back_on_malformed_stored_patches():
    from runs.replay.diffs import patch_files

    git_patch = git_section("index 1234567..89abcde 100644") + SIMPLE.replace("x.py", "y.py")
    files = patch_files(git_patch)
    assert [(f.path, f.change, f.additions, f.deletions) for f in files] == [
        ("code/x.py", "modified", 1, 1), ("code/y.py", "modified", 1, 1),
    ]
    assert files[0].lines[0]["text"] == "diff --git a/code/x.py b/code/x.py"
    malformed = "--- a/code/x.py\n+++ b/code/x.py\n@@ -1,5 +1,5 @@\n-a\n+b\n"  # counts do not match
    assert [f.path for f in patch_files(malformed)] == ["code/x.py"]
    assert [f.path for f in patch_files("not a diff at all")] == ["patch"]


def test_submission_validation_names_the_patch_line():
    import json

    from runs.submissions.problems import Problems
    from runs.submissions.validation import parse_jsonl
    from tests.submissions.helpers import HEADER, record

    bad = git_section("similarity index 90%", "rename from code/x.py", "rename to code/y.py")
    data = "\n".join(json.dumps(value) for value in (HEADER, record(final_patch=bad), record(index=1, final_patch=SIMPLE)))
    problems = Problems()
    parsed = parse_jsonl(data.encode(), problems, member=None, in_zip=False)
    assert [str(problem) for problem in problems.items] == [
        'line 2: final_patch: line 3: "rename from code/x.py": renames are not accepted (git diff --no-renames '
        "writes a deletion and an addition)"
    ]
    assert [item.record.final_patch for item in parsed.records] == [SIMPLE]


def test_a_path_component_longer_than_a_file_name_can_be_is_refused():
    name = "a" * 300 + ".py"
    patch = f"--- /dev/null\n+++ b/code/{name}\n@@ -0,0 +1 @@\n+x = 1\n"
    assert_refused_at(patch, 2, "over 255 bytes")


def test_unified_diff_marks_a_missing_final_newline():
    assert unified_diff("f.txt", "a\n", "a\nb") == (
        "--- a/f.txt\n+++ b/f.txt\n@@ -1 +1,2 @@\n a\n+b\n\\ No newline at end of file\n"
    )
    assert unified_diff("f.txt", "same\n", "same\n") == ""
    assert unified_diff("f.txt", "gone\n", None).startswith("--- a/f.txt\n+++ /dev/null\n")
