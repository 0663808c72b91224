"""Settings: a malformed environment variable stops start-up with a message naming it, and every
setting the product reads is declared in autoexperiment_site/settings.py and documented in a table of
the README or of a page under docs/."""
import ast
import functools
import os
import re
import subprocess
import sys
from pathlib import Path

import dj_database_url
import pytest
from django.conf import global_settings

ROOT = Path(__file__).resolve().parent.parent


def start_django(show="SANDBOX_BACKEND", **env):
    """Start Django with the tests' environment less the settings these tests set, plus `env`; it
    prints setting `show`."""
    unset = {"SECRET_KEY", "SECRET_KEY_FILE", "DEBUG", "DEPLOYMENT_ID"}
    environment = {k: v for k, v in os.environ.items() if k not in unset}
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); from django.conf import settings; print(settings.{show})"],
        cwd=ROOT,
        env={**environment, "DJANGO_SETTINGS_MODULE": "autoexperiment_site.settings"},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("DEBUG", "maybe"),
        ("DATABASE_URL", "nosuchdb://x"),
        ("DATABASE_URL", "postgres://u:p@host:notaport/db"),
        ("REDIS_URL", "http://localhost:6379"),
        ("SANDBOX_BACKEND", "chroot"),
        ("ALLOWED_HOSTS", "example.org,,"),
        ("RQ_JOB_TIMEOUT", "soon"),
        ("ATTEMPT_HEARTBEAT_SECONDS", "60"),  # not less than ATTEMPT_STALE_SECONDS: live workers taken for dead
        ("DEPLOYMENT_ID", "demo:1"),  # part of RQ job ids, which allow no ':'
    ],
)
def test_malformed_value_names_the_variable(variable, value):
    result = start_django(**{"DEBUG": "1", variable: value})
    assert result.returncode != 0
    assert variable in result.stderr
    assert "ImproperlyConfigured" in result.stderr


def test_secret_key_is_required_unless_debug():
    result = start_django(DEBUG="0")
    assert result.returncode != 0
    assert "SECRET_KEY" in result.stderr
    assert start_django(DEBUG="0", SECRET_KEY="s3cret").returncode == 0


def test_the_deployment_id_follows_the_database_unless_set():
    from autoexperiment_site.settings import _deployment_id_from

    def deployment(url):
        return _deployment_id_from(dj_database_url.parse(url))

    demo = deployment("postgres://postgres@127.0.0.1:5432/autoexperiment_demo")
    assert demo.startswith("autoexperiment_demo-")
    assert deployment("postgres://postgres@127.0.0.1:5432/autoexperiment_demo") == demo
    # Another database (another name, or the same name on another server): other keys in Redis.
    assert deployment("postgres://postgres@127.0.0.1:5432/autoexperiment_demo2") != demo
    assert deployment("postgres://postgres@10.0.0.2:5432/autoexperiment_demo") != demo
    assert deployment("sqlite:////tmp/some dir/site.sqlite3").startswith("site-sqlite3-")
    # Started with DEPLOYMENT_ID set, the process uses it, and its queues are named after it.
    started = start_django("DEPLOYMENT_ID, settings.EVALUATION_QUEUE", DEBUG="1", DEPLOYMENT_ID="staging")
    assert started.returncode == 0, started.stderr
    assert started.stdout.split() == ["staging", "staging.default"]
    # Unset, a started process derives it from its DATABASE_URL.
    derived = start_django("DEPLOYMENT_ID", DEBUG="1", DATABASE_URL="postgres://postgres@127.0.0.1:5432/autoexperiment_demo")
    assert derived.stdout.strip() == demo, derived.stderr


def test_valid_values_are_used():
    result = start_django(DEBUG="yes", SANDBOX_BACKEND="bwrap")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "bubblewrap"


# --- every setting read is declared, every variable documented ---------------------------------------

PRODUCT_PACKAGES = ("runs", "leaderboard", "sandbox", "autoexperiment_site")
# runs/limits.py serves agents that also run in scripts without Django settings: its `_setting(NAME,
# default)` falls back to the default there, so it reads settings by a computed name (the names are
# the literal first arguments of its calls).
READERS_BY_NAME = {"runs/limits.py": "_setting"}


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _settings_names(tree: ast.Module) -> set[str]:
    """The names `django.conf.settings` is imported under in this module."""
    return {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "django.conf"
        for alias in node.names
        if alias.name == "settings"
    }


def _literal(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


@functools.cache
def settings_reads() -> tuple[list[tuple[str, str]], list[str]]:
    """(where, NAME) for every setting the product code reads, and where it reads one through
    getattr/hasattr (with a default, or by a computed name) instead of plainly. Scanned once for
    the tests that use it (every module of the product parsed: seconds)."""
    reads, indirect = [], []
    for package in PRODUCT_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            tree = _parse(path)
            names = _settings_names(tree)
            reader = READERS_BY_NAME.get(relative)
            for node in ast.walk(tree):
                where = f"{relative}:{getattr(node, 'lineno', '?')}"
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in names:
                    if node.attr.isupper():
                        reads.append((where, node.attr))
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.args:
                    if node.func.id == reader and _literal(node.args[0]):
                        reads.append((where, _literal(node.args[0])))
                    elif node.func.id in {"getattr", "hasattr"} and isinstance(node.args[0], ast.Name) and node.args[0].id in names:
                        if len(node.args) > 1 and _literal(node.args[1]):
                            reads.append((where, _literal(node.args[1])))
                        if not _inside_function(tree, node, reader):
                            indirect.append(where)
    return reads, indirect


def _inside_function(tree: ast.Module, target: ast.AST, function: str) -> bool:
    return any(
        isinstance(node, ast.FunctionDef) and node.name == function and any(child is target for child in ast.walk(node))
        for node in ast.walk(tree)
    )


def declared_settings() -> set[str]:
    """Every name settings.py assigns (under any condition), and Django's own defaults."""
    tree = _parse(ROOT / "autoexperiment_site" / "settings.py")
    assigned = {
        target.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign | ast.AnnAssign)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name) and target.id.isupper()
    }
    return assigned | {name for name in dir(global_settings) if name.isupper()}


def environment_variables() -> set[str]:
    """The variables the site reads through autoexperiment_site.env (settings and gunicorn's)."""
    return {
        _literal(node.args[0])
        for path in (ROOT / "autoexperiment_site").glob("*.py")
        for node in ast.walk(_parse(path))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id.startswith("env_")
        and node.args and _literal(node.args[0])
    }


def test_settings_are_read_plainly():
    """A getattr default would hide a setting from settings.py and the documentation, and could disagree
    with the default declared there."""
    _, indirect = settings_reads()
    assert indirect == [], "read these as settings.NAME (declare them in autoexperiment_site/settings.py)"


def test_every_setting_read_is_declared():
    reads, _ = settings_reads()
    assert len(reads) > 20  # the scan sees the reads
    declared = declared_settings()
    undeclared = sorted(f"{where}: {name}" for where, name in reads if name not in declared)
    assert undeclared == [], "declare these in autoexperiment_site/settings.py, from an environment variable"


def documentation_pages() -> list[Path]:
    """The README and every page under docs/, where the settings are documented."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_every_environment_variable_is_in_a_documentation_table():
    rows = [line for page in documentation_pages() for line in page.read_text().splitlines() if line.startswith("|")]
    documented = {name for row in rows for name in re.findall(r"`([A-Z][A-Z0-9_]*)`", row)}
    variables = environment_variables()
    assert {"DEBUG", "SANDBOX_BACKEND", "WEB_CONCURRENCY"} <= variables  # the scan sees them
    assert sorted(variables - documented) == [], "add these to a table in docs/configuration.md (or the page of their topic)"
