"""The documentation holds together: every relative link of the README and of docs/ leads to a file
that exists and, where it names a heading, to that heading; docs/README.md lists every page; every
page opens with what it covers; the README's screenshot is there and small. The files and modules the
pages, the comments and the docstrings name exist."""
import functools
import io
import re
import subprocess
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]
# [text](target): the target up to the closing parenthesis; images too (![alt](target)).
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {anchor(line.lstrip("#")) for line in text.splitlines() if re.match(r"#{1,6} ", line)}


def links(page: Path) -> list[str]:
    return LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8")))


def test_anchor_follows_github():
    assert anchor("Which function broke it: transplants") == "which-function-broke-it-transplants"
    assert anchor("A private suite's gold reaches staff alone") == "a-private-suites-gold-reaches-staff-alone"
    assert anchor("`/explore/`: the attempts explorer") == "explore-the-attempts-explorer"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_every_relative_link_leads_somewhere(page):
    broken = []
    for target in links(page):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:: not ours to check
        path, _, fragment = target.partition("#")
        destination = (page.parent / path).resolve() if path else page
        if not destination.exists():
            broken.append(f"{target}: no file {destination.relative_to(ROOT) if destination.is_relative_to(ROOT) else destination}")
        elif fragment and destination.suffix == ".md" and fragment not in anchors(destination):
            broken.append(f"{target}: no heading #{fragment} in {destination.relative_to(ROOT)}")
    assert broken == [], f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_index_lists_every_page():
    listed = {Path(target.partition("#")[0]).name for target in links(DOCS / "README.md")}
    pages = {page.name for page in DOCS.glob("*.md")} - {"README.md"}
    assert sorted(pages - listed) == [], "list these in docs/README.md"


@pytest.mark.parametrize("page", sorted(DOCS.glob("*.md")), ids=lambda page: page.name)
def test_every_page_opens_with_what_it_covers(page):
    lines = page.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("# "), f"{page.name}: starts with its title"
    opening = next(line for line in lines[1:] if line.strip())
    assert not opening.startswith(("#", "|", "-", "```")), f"{page.name}: a sentence saying what it covers comes first"


def test_the_readme_shows_a_small_screenshot():
    images = [target for target in links(ROOT / "README.md") if target.endswith(".png")]
    assert images, "the README shows the leaderboard"
    for image in images:
        data = (ROOT / image).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{image} is a PNG"
        assert len(data) < 300_000, f"{image} is {len(data):,} bytes; keep it under 300 KB (the repository carries it)"


# A file or directory of this repository named in the documentation: `runs/evaluation/claims.py`,
# `sandbox/images/`; placeholders (`<suite>`, `bench_*.py`) and other repositories' paths are not matched.
REPO_PATH = re.compile(r"(?<![\w/.<-])((?:autoexperiment_site|runs|leaderboard|sandbox|client|scripts|tests|templates|static|docs)/[\w./-]*[\w/])(?![\w<*])")
# A module, or a name in one, named in Python's dotted form: `runs.evaluation.claims`, `runs.models.Attempt`.
DOTTED = re.compile(r"(?<![\w./-])((?:autoexperiment_site|runs|leaderboard|sandbox)(?:\.[A-Za-z_]\w*)+)")


@functools.cache
def _module(parts: tuple[str, ...]) -> Path | None:
    path = ROOT.joinpath(*parts)
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@functools.cache
def _names_in(module: Path) -> frozenset[str]:
    """The words of a module, or for a package (a model label, a permission: `runs.start_run`) of all of it."""
    files = [module] if module.name != "__init__.py" else sorted(module.parent.rglob("*.py"))
    return frozenset(word for path in files for word in re.findall(r"\w+", path.read_text(encoding="utf-8")))


def stale_references(text: str) -> list[str]:
    stale = []
    for path in REPO_PATH.findall(text):
        if not (ROOT / path.rstrip("/")).exists():
            stale.append(f"{path}: no such file or directory")
    for dotted in DOTTED.findall(text):
        parts = dotted.split(".")
        cut = next((i for i in range(len(parts), 0, -1) if _module(tuple(parts[:i]))), 0)
        if not cut:
            stale.append(f"{dotted}: no such module")
        elif cut < len(parts) and parts[cut] not in _names_in(module := _module(tuple(parts[:cut]))):
            stale.append(f"{dotted}: {parts[cut]} is not in {module.relative_to(ROOT)}")
    return stale


def test_stale_references_are_found():
    assert stale_references("see runs/evaluation/claims.py and runs.evaluation.claims.execute") == []
    assert stale_references("`runs/agents/foreign/inspect.py`") == ["runs/agents/foreign/inspect.py: no such file or directory"]
    # a package's names are looked for in all of it (a model label, a permission: runs.start_run)
    assert stale_references("runs.start_run") == []
    assert stale_references("(runs.suites.datafetch)") == ["runs.suites.datafetch: datafetch is not in runs/suites/__init__.py"]
    assert stale_references("leaderboard.selectors.function_verdict_counts") == [
        "leaderboard.selectors.function_verdict_counts: function_verdict_counts is not in leaderboard/selectors.py"
    ]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_the_files_and_modules_a_page_names_exist(page):
    assert stale_references(page.read_text(encoding="utf-8")) == [], f"{page.relative_to(ROOT)} names what is no longer there"


def _commented_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    # the suites' paper code is the papers' own, and migrations are history
    return [path for path in listed if not path.startswith(("runs/suites/builtin", "tests/fixtures/")) and "/migrations/" not in path]


def comments_of(path: Path) -> list[tuple[int, str]]:
    """(line, text) of each comment and docstring-like string of a Python file, and of each `#` line of a
    Makefile, Procfile, TOML or shell file."""
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".py":
        return [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.lstrip().startswith("#")]
    return [
        (token.start[0], token.string)
        for token in tokenize.generate_tokens(io.StringIO(text).readline)
        if token.type == tokenize.COMMENT
        or (token.type == tokenize.STRING and token.string.lstrip("rbuRBU").startswith(('"""', "'''")))
    ]


def test_comments_name_files_and_modules_that_exist():
    files = [ROOT / path for path in _commented_files()
             if path.endswith((".py", ".toml", ".sh")) or Path(path).name in ("Makefile", "Procfile", "run")]
    assert len(files) > 100  # the scan sees the tree
    # Only a file whose text names something missing is tokenized, to see whether a comment does.
    suspects = [path for path in files if path.is_file() and stale_references(path.read_text(encoding="utf-8"))]
    stale = [f"{path.relative_to(ROOT)}:{line}: {problem}"
             for path in suspects for line, text in comments_of(path) for problem in stale_references(text)]
    assert stale == [], "a comment names what is no longer there:\n" + "\n".join(stale)
