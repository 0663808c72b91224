"""`manage.py check --deploy` is clean with the production variables docs/production.md documents; a malformed
one stops start-up with its name."""
import subprocess
import sys

import pytest

from tests.deploy.conftest import BASE_DIR, base_environment

# docs/production.md, "A public site over HTTPS": the example set for a site served over HTTPS behind a proxy.
PRODUCTION = {
    "ALLOWED_HOSTS": "autoexperiment.example.org",
    "CSRF_TRUSTED_ORIGINS": "https://autoexperiment.example.org",
    "SECURE_SSL_REDIRECT": "1",
    "SECURE_HSTS_SECONDS": "31536000",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "1",
    "SECURE_HSTS_PRELOAD": "1",
    "SESSION_COOKIE_SECURE": "1",
    "CSRF_COOKIE_SECURE": "1",
    "TRUST_X_FORWARDED_PROTO": "1",
}


def check_deploy(**env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=BASE_DIR, env=base_environment(**env), capture_output=True, text=True, timeout=120,
    )


def test_check_deploy_is_clean_with_the_documented_production_variables():
    result = check_deploy(**PRODUCTION)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues" in result.stdout
    assert "WARNING" not in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("CSRF_TRUSTED_ORIGINS", "autoexperiment.example.org", "is not an origin"),
        ("SECURE_HSTS_SECONDS", "a year", "is not an integer"),
        ("SECURE_SSL_REDIRECT", "sometimes", "is not a boolean"),
        ("SECRET_KEY_FILE", "/nonexistent/secret_key", "cannot be read"),
    ],
)
def test_a_malformed_production_variable_is_named(variable, value, message):
    env = {variable: value}
    if variable == "SECRET_KEY_FILE":
        env["SECRET_KEY"] = ""
    result = check_deploy(**env)
    assert result.returncode != 0
    assert variable in result.stderr and message in result.stderr


def test_the_secret_key_can_come_from_a_file(tmp_path):
    key = "file-" + "0123456789abcdef" * 4
    key_file = tmp_path / "secret_key"
    key_file.write_text(key + "\n")
    result = subprocess.run(
        [sys.executable, "-c", "from autoexperiment_site import settings; print(settings.SECRET_KEY)"],
        cwd=BASE_DIR, env=base_environment(SECRET_KEY="", SECRET_KEY_FILE=str(key_file)),
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == key
