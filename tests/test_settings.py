"""A malformed environment variable stops start-up with a message naming it."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def start_django(**env):
    environment = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "SECRET_KEY_FILE", "DEBUG"}}
    environment.update(env)
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); from django.conf import settings; print(settings.SANDBOX_BACKEND)"],
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


def test_valid_values_are_used():
    result = start_django(DEBUG="yes", SANDBOX_BACKEND="bwrap")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "bubblewrap"
