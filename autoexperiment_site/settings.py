"""Settings, all read from environment variables (see README, "Configuration").

Defaults suit a laptop: SQLite, local Redis, the bubblewrap sandbox. A malformed value stops
start-up with a message naming the variable.
"""
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from autoexperiment_site.env import env_bool, env_choice, env_int, env_list, env_str, env_url

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(env_str("AUTOEXPERIMENT_DATA_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY", None)
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY is not set; set it, or set DEBUG=1 for local development.")
    SECRET_KEY = "insecure-development-key-only-used-when-DEBUG-is-on"
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_rq",
    "runs",
    "leaderboard",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "autoexperiment_site.urls"
WSGI_APPLICATION = "autoexperiment_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

_default_database_url = f"sqlite:///{DATA_DIR / 'autoexperiment.sqlite3'}"
_database_url = env_str("DATABASE_URL", _default_database_url)
try:
    DATABASES = {"default": dj_database_url.parse(_database_url, conn_max_age=60)}
except (ValueError, dj_database_url.ParseError, dj_database_url.UnknownSchemeError) as error:
    raise ImproperlyConfigured(f"DATABASE_URL={_database_url!r} is not a valid database URL: {error}") from None
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)

REDIS_URL = env_url("REDIS_URL", "redis://127.0.0.1:6379/0", schemes={"redis", "rediss", "unix"})
RQ_QUEUES = {
    "default": {"URL": REDIS_URL, "DEFAULT_TIMEOUT": env_int("RQ_JOB_TIMEOUT", 3600, minimum=1)},
}
# Imports the agents and SDKs once in the worker, not in every forked job (about 1.4 s each).
RQ = {"WORKER_CLASS": "runs.worker.EvaluationWorker"}

SANDBOX_BACKEND = env_choice(
    "SANDBOX_BACKEND", "bubblewrap", {"bubblewrap": "bubblewrap", "bwrap": "bubblewrap", "docker": "docker"}
)
SANDBOX_IMAGE = env_str("SANDBOX_IMAGE", "autoexperiment-base:bookworm")
# Where workspaces are built. Kept apart from the gold code so nothing of it is ever copied in.
WORKSPACE_ROOT = Path(env_str("WORKSPACE_ROOT", str(DATA_DIR / "workspaces")))

# Recovery (runs.attempts.attempts_recover): a running attempt without a heartbeat for this long is
# taken for dead; one still running this long past its own budget (time budget plus the
# experiments' timeouts) is killed and counted as budget_exhausted, heartbeat or not. Sandboxes
# that belong to no attempt are swept once this old.
ATTEMPT_STALE_SECONDS = env_int("ATTEMPT_STALE_SECONDS", 60, minimum=1)
ATTEMPT_OVERRUN_GRACE_SECONDS = env_int("ATTEMPT_OVERRUN_GRACE_SECONDS", 300, minimum=0)
ATTEMPT_SWEEP_UNNAMED_SECONDS = env_int("ATTEMPT_SWEEP_UNNAMED_SECONDS", 86400, minimum=0)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # WhiteNoise warns on every request while it is missing
STATICFILES_DIRS = [BASE_DIR / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "leaderboard.staticfiles.PlotlyFinder",  # vendor/plotly.min.js, from the installed plotly package
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage"
    },
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "/"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}
