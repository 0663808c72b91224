"""axe-core, the accessibility checker, for the browser tests: fetched once from the npm registry
into a cache directory, checked against its pinned integrity hash, run in a page.

A clean clone (CI) has no copy: the first test that needs it downloads the pinned tarball (some
600 kB) into `AXE_CACHE_DIR` (default ~/.cache/autoexperiment), verifies its sha512 against the
registry's own `dist.integrity` pinned below, and extracts `axe.min.js` from it. A tarball whose
hash differs is refused, never run. To move to a newer axe-core, take both values from
https://registry.npmjs.org/axe-core/<version> (`dist.integrity`).

Usage (see test_accessibility_browser.py)::

    inject_axe(page)
    assert_no_violations(page)
"""
from __future__ import annotations

import base64
import hashlib
import io
import os
import tarfile
import tempfile
import urllib.request
from pathlib import Path

from tests.support import require

AXE_VERSION = "4.14.1"
AXE_INTEGRITY = "sha512-FHfa+lmNjQZfJz1q8wKqIDwC6DExcHt/pkjNQb09a3NPjCKg2rhu5qb2S4r76ASyFNNtuFooJpZe37OgudVGtQ=="
AXE_TARBALL_URL = f"https://registry.npmjs.org/axe-core/-/axe-core-{AXE_VERSION}.tgz"
CACHE_DIR = Path(os.environ.get("AXE_CACHE_DIR") or Path.home() / ".cache" / "autoexperiment")


def _integrity_matches(data: bytes) -> bool:
    algorithm, _, expected = AXE_INTEGRITY.partition("-")
    return base64.b64encode(hashlib.new(algorithm, data).digest()).decode() == expected


def _download() -> bytes:
    try:
        with urllib.request.urlopen(AXE_TARBALL_URL, timeout=60) as response:
            return response.read()
    except OSError as error:
        require(False, f"could not download axe-core {AXE_VERSION} from {AXE_TARBALL_URL} ({error}); "
                       f"put the tarball at {CACHE_DIR / Path(AXE_TARBALL_URL).name} by hand")
        raise  # not reached: require skips or fails


def axe_source() -> str:
    """axe.min.js of the pinned axe-core, from the cached tarball (downloaded on first use)."""
    tarball = CACHE_DIR / Path(AXE_TARBALL_URL).name
    data = tarball.read_bytes() if tarball.is_file() else b""
    if not _integrity_matches(data):
        data = _download()
        if not _integrity_matches(data):
            raise AssertionError(f"{AXE_TARBALL_URL} does not match its pinned integrity {AXE_INTEGRITY}: not used")
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        # Written aside and renamed: test processes running side by side never read half a file.
        handle, partial = tempfile.mkstemp(dir=CACHE_DIR, prefix=".axe-")
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(partial, tarball)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        member = archive.extractfile("package/axe.min.js")
        assert member is not None, f"{tarball} holds no package/axe.min.js"
        return member.read().decode()


def inject_axe(page, source: str) -> None:
    """Loads axe into `page` (its context must bypass the site's CSP, which refuses inline scripts)."""
    page.add_script_tag(content=source)
    assert page.evaluate("() => typeof window.axe === 'object'"), "axe-core did not load into the page"


def axe_violations(page) -> list[dict]:
    """The violations axe finds in `page` as it is now, with axe's default rules: WCAG 2.0-2.2 A
    and AA (target sizes included) and its best practices (landmarks, headings, scrollable regions
    reachable by keyboard); only its experimental rules are left out."""
    return page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']}))"
        ".violations.map(v => ({id: v.id, impact: v.impact, help: v.help, helpUrl: v.helpUrl,"
        " nodes: v.nodes.map(n => ({target: n.target.join(' '), summary: n.failureSummary, html: n.html.slice(0, 200)}))}))"
    )


def violations_report(url: str, violations: list[dict]) -> str:
    """Each violation's id, help and the nodes it was found on, readable in a test failure."""
    lines = [f"{url}: {len(violations)} accessibility violation(s)"]
    for violation in violations:
        lines.append(f"- {violation['id']} ({violation['impact']}): {violation['help']} <{violation['helpUrl']}>")
        for node in violation["nodes"][:8]:
            lines.append(f"    at {node['target']}: {node['html']}")
            lines.append("      " + (node["summary"] or "").replace("\n", "\n      "))
        if len(violation["nodes"]) > 8:
            lines.append(f"    ... and {len(violation['nodes']) - 8} more")
    return "\n".join(lines)
