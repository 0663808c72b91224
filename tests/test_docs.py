"""The documentation holds together: every relative link of the README and of docs/ leads to a file
that exists and, where it names a heading, to that heading; docs/README.md lists every page; every
page opens with what it covers; the README's screenshot is there and small."""
import re
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
