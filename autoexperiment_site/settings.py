"""Settings, all read from environment variables (see docs/configuration.md).

Defaults suit a laptop: SQLite, local Redis, the bubblewrap sandbox. A malformed value stops
start-up with a message naming the variable.
"""
import hashlib
import re
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from autoexperiment_site.env import env_bool, env_choice, env_int, env_list, env_rate, env_str, env_url
from sandbox import BACKEND_NAMES, SandboxError
from sandbox.gpus import parse_gpu_ids as _parse_gpu_ids

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(env_str("AUTOEXPERIMENT_DATA_DIR", str(BASE_DIR / "var")))

DEBUG = env_bool("DEBUG", False)
SECRET_KEY = env_str("SECRET_KEY", None)
# A key kept in a file (make serve generates var/secret_key once), for process managers and
# secret stores that hand over files rather than environment variables. SECRET_KEY wins.
_secret_key_file = env_str("SECRET_KEY_FILE", None)
if not SECRET_KEY and _secret_key_file:
    try:
        SECRET_KEY = Path(_secret_key_file).read_text().strip()
    except OSError as error:
        raise ImproperlyConfigured(f"SECRET_KEY_FILE={_secret_key_file!r} cannot be read: {error.strerror}.") from None
    if not SECRET_KEY:
        raise ImproperlyConfigured(f"SECRET_KEY_FILE={_secret_key_file!r} is empty.")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY is not set; set it, or set DEBUG=1 for local development.")
    SECRET_KEY = "insecure-development-key-only-used-when-DEBUG-is-on"
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])

# --- HTTPS deployment (docs/production.md) ---
# All off by default so that plain-HTTP serving on localhost (make serve, make demo) works; a public
# site behind TLS turns them on, and `manage.py check --deploy` is then clean.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
# A load balancer's plain-HTTP probe of /healthz must get the health, not a redirect.
SECURE_REDIRECT_EXEMPT = [r"^healthz/?$"]
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", False)
# Only behind a proxy that sets X-Forwarded-Proto itself and strips a client's: otherwise any client
# could claim its plain-HTTP request came over HTTPS.
if env_bool("TRUST_X_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
for _origin in CSRF_TRUSTED_ORIGINS:
    if not _origin.startswith(("http://", "https://")) or _origin.rstrip("/").endswith(("://", "://*")):
        raise ImproperlyConfigured(
            f"CSRF_TRUSTED_ORIGINS entry {_origin!r} is not an origin; write scheme and host, e.g. https://example.org."
        )

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_rq",
    "csp",
    "axes",
    "django_ratelimit",
    "runs",
    "leaderboard",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # One Content-Security-Policy on every response (CONTENT_SECURITY_POLICY below).
    "csp.middleware.CSPMiddleware",
    # A NUL byte in the path (404) or a query parameter (400), which Postgres would refuse, before anything reads it.
    "autoexperiment_site.request_bytes.RefuseNulBytesMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # After the others, as django-axes asks: it turns a lockout into the sign-in page's 429.
    "axes.middleware.AxesMiddleware",
    # Turns RateLimited (autoexperiment_site.abuse) into a 429 through RATELIMIT_VIEW.
    "django_ratelimit.middleware.RatelimitMiddleware",
    # Counts page views per address (per user once signed in): RATE_LIMITS' pages-* below.
    "autoexperiment_site.abuse.PageRateLimitMiddleware",
    # A django-rq dashboard address naming no queue, job or worker: 404, not 500.
    "autoexperiment_site.queue_dashboard.QueueDashboardNotFoundMiddleware",
]

# --- Content-Security-Policy (django-csp), on every page ---
# Pages show text written by models and uploaders. Even if some of it escaped the templates'
# autoescaping, the browser runs no inline script, loads nothing from elsewhere and lets no other
# site frame the page. Styles may be inline: plotly.js styles its chart with style attributes and
# <style> elements it creates. (django-rq's job lists carry one inline script, which the policy
# blocks; it calls a jQuery plugin Django 5's admin no longer has, and the admin's actions.js it
# meant to start starts itself.)
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}
# SecurityMiddleware's companions of the policy (Django's defaults, stated so they stay).
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"

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
                "autoexperiment_site.accounts.signup_context",
                "autoexperiment_site.abuse.accounts",
            ],
        },
    },
]

_default_database_url = f"sqlite:///{DATA_DIR / 'autoexperiment.sqlite3'}"
_database_url = env_str("DATABASE_URL", _default_database_url)
try:
    # Each gunicorn thread keeps at most one connection for CONN_MAX_AGE seconds, so the web tier holds
    # at most WEB_CONCURRENCY x WEB_THREADS connections (docs/production.md, "Database connections are bounded").
    DATABASES = {
        "default": dj_database_url.parse(
            _database_url,
            conn_max_age=env_int("CONN_MAX_AGE", 60),
            conn_health_checks=True,
        )
    }
except (ValueError, dj_database_url.ParseError, dj_database_url.UnknownSchemeError) as error:
    raise ImproperlyConfigured(f"DATABASE_URL={_database_url!r} is not a valid database URL: {error}") from None
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)


def _deployment_id_from(database: dict) -> str:
    """The database's name and a digest of where it lives: two deployments on one Redis differ
    whenever their databases do, and the name says whose keys they are."""
    where = f"{database.get('ENGINE')}|{database.get('HOST')}:{database.get('PORT')}/{database.get('NAME')}"
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", Path(str(database.get("NAME") or "database")).name).strip("-")[:40]
    return f"{name or 'database'}-{hashlib.sha256(where.encode()).hexdigest()[:6]}"


# Everything this deployment keeps in Redis (its queues, so its jobs' and RQ's scheduler keys, its job
# ids and its locks) is named after it, so that any number of deployments share one Redis server and
# database number without taking each other's jobs. The default follows the database; a worker must
# have the same DEPLOYMENT_ID as the site that enqueues its jobs (it has, when both use the same DATABASE_URL).
DEPLOYMENT_ID = env_str("DEPLOYMENT_ID", "") or _deployment_id_from(DATABASES["default"])
if not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", DEPLOYMENT_ID):
    raise ImproperlyConfigured(
        f"DEPLOYMENT_ID={DEPLOYMENT_ID!r} may hold only letters, digits, '_' and '-' (1 to 64 of them): "
        "it is part of Redis keys and RQ job ids."
    )


def _deployment_queue(name: str) -> str:
    return f"{DEPLOYMENT_ID}.{name}"


REDIS_URL = env_url("REDIS_URL", "redis://127.0.0.1:6379/0", schemes={"redis", "rediss", "unix"})
# The RQ queue evaluation jobs (attempts, re-executions) go on; `manage.py evaluation_worker` listens
# on it. Each queue's name is prefixed with DEPLOYMENT_ID.
EVALUATION_QUEUE = _deployment_queue(env_str("EVALUATION_QUEUE", "default"))
RQ_QUEUES = {
    EVALUATION_QUEUE: {"URL": REDIS_URL, "DEFAULT_TIMEOUT": env_int("RQ_JOB_TIMEOUT", 3600, minimum=1)},
}
# Quick jobs that keep derived data up to date (the leaderboard's stored numbers, leaderboard.standings).
# Every evaluation worker takes them before its next attempt (runs.evaluation.worker): no extra process.
MAINTENANCE_QUEUE = _deployment_queue(env_str("MAINTENANCE_QUEUE", "maintenance"))
# While attempts wait, a worker takes a maintenance job at most once per this many seconds (the
# changes of a busy run meanwhile are coalesced into it); a worker with nothing else to do takes it at once.
MAINTENANCE_INTERVAL_SECONDS = env_int("MAINTENANCE_INTERVAL_SECONDS", 10, minimum=0)
# Transplants (one masked function of a failed attempt at n >= 2 judged alone, runs.evaluation.transplants):
# every evaluation worker takes them last, when no attempt or re-execution waits.
TRANSPLANT_QUEUE = _deployment_queue(env_str("TRANSPLANT_QUEUE", "transplant"))
# Work on papers that need a GPU (Paper.gpu "required": attempts, re-executions, transplants) goes on
# this queue, which only workers with GPUs (WORKER_GPUS) listen on, before the evaluation queue.
GPU_QUEUE = _deployment_queue(env_str("GPU_QUEUE", "gpu"))
# The GPUs of this machine its workers may use (nvidia-smi's numbers, "0,1"; blank or "none": none).
# Each sandbox of a paper that needs or may use a GPU leases Paper.gpus of them (sandbox.gpus): one
# GPU to one sandbox at a time, across every worker of the machine sharing GPU_LOCK_DIR.
try:
    WORKER_GPUS = _parse_gpu_ids(env_str("WORKER_GPUS", ""))
except SandboxError as error:
    raise ImproperlyConfigured(f"WORKER_GPUS: {error}") from None
GPU_LOCK_DIR = Path(env_str("GPU_LOCK_DIR", "/tmp/autoexperiment-gpu-leases"))
# Imports the harness, the sandbox backend and the SDKs jobs ask for once in the worker, not in every forked job.
RQ = {"WORKER_CLASS": "runs.evaluation.worker.EvaluationWorker"}
# /healthz reports unhealthy when the oldest job waiting in the evaluation queue is older than this:
# no worker is taking jobs, or far too few for the load.
HEALTHZ_QUEUE_MAX_AGE_SECONDS = env_int("HEALTHZ_QUEUE_MAX_AGE_SECONDS", 3600, minimum=1)

SANDBOX_BACKEND = env_choice("SANDBOX_BACKEND", "bubblewrap", BACKEND_NAMES)
SANDBOX_IMAGE = env_str("SANDBOX_IMAGE", "autoexperiment-base:bookworm")
# Where workspaces are built. Kept apart from the gold code so nothing of it is ever copied in.
WORKSPACE_ROOT = Path(env_str("WORKSPACE_ROOT", str(DATA_DIR / "workspaces")))
# Built paper environments (runs.suites.environments: one venv per declared content, built by
# `manage.py build_environment`) and fetched data files (one file per sha256). The sandboxes bind
# them read-only, so the sandbox uid (61000) must be able to reach them: every directory above
# them searchable by other users.
ENVIRONMENTS_ROOT = Path(env_str("ENVIRONMENTS_ROOT", str(DATA_DIR / "environments")))
DATA_CACHE_ROOT = Path(env_str("DATA_CACHE_ROOT", str(DATA_DIR / "data_cache")))
# This worker host's name in attempts' claims (`host:pid`, runs.evaluation.claims.worker_identity);
# blank: the machine's host name. Set it when two worker "hosts" share one machine (each with its
# own WORKSPACE_ROOT and SANDBOX_BACKEND): a claim's pid is only checked on the host that made it.
WORKER_HOST_NAME = env_str("WORKER_HOST_NAME", "") or ""
# Where the suite pages' task downloads are cached, one archive per suite version, n and context
# (runs.suites.export.task_archive_cached); anything here can be deleted, it is rebuilt on request.
TASK_EXPORT_ROOT = Path(env_str("TASK_EXPORT_ROOT", str(DATA_DIR / "task_exports")))
# Where the Parquet dataset downloads are kept, one file per version of what they hold
# (leaderboard.dataset_cache); anything here can be deleted, it is rebuilt on request.
DATASET_CACHE_ROOT = Path(env_str("DATASET_CACHE_ROOT", str(DATA_DIR / "datasets")))

# What one trajectory and one final patch may hold (uploads are refused over them, our workers trim
# to them) and how many steps one replay page shows; runs/limits.py reads these and says why the
# defaults are what they are.
# (Imported here, not at the top: the defaults live with the code they bound.)
from runs import limits as _limits  # noqa: E402

TRAJECTORY_MAX_STEPS = env_int("TRAJECTORY_MAX_STEPS", _limits.DEFAULT_MAX_STEPS, minimum=1)
TRAJECTORY_MAX_TEXT_BYTES = env_int("TRAJECTORY_MAX_TEXT_BYTES", _limits.DEFAULT_MAX_TEXT_BYTES, minimum=1024)
TRAJECTORY_MAX_STEP_BYTES = env_int("TRAJECTORY_MAX_STEP_BYTES", _limits.DEFAULT_MAX_STEP_BYTES, minimum=4096)
TRAJECTORY_MAX_STEP_FILES = env_int("TRAJECTORY_MAX_STEP_FILES", _limits.DEFAULT_MAX_STEP_FILES, minimum=1)
TRAJECTORY_MAX_STEP_DIFF_LINES = env_int("TRAJECTORY_MAX_STEP_DIFF_LINES", _limits.DEFAULT_MAX_STEP_DIFF_LINES, minimum=1)
TRAJECTORY_MAX_DIFF_LINES = env_int("TRAJECTORY_MAX_DIFF_LINES", _limits.DEFAULT_MAX_DIFF_LINES, minimum=1)
SUBMISSION_MAX_PATCH_BYTES = env_int("SUBMISSION_MAX_PATCH_BYTES", _limits.DEFAULT_MAX_PATCH_BYTES, minimum=1024)
SUBMISSION_MAX_PATCH_LINES = env_int("SUBMISSION_MAX_PATCH_LINES", _limits.DEFAULT_MAX_PATCH_LINES, minimum=1)
SUBMISSION_MAX_TRAJECTORY_BYTES = env_int(
    "SUBMISSION_MAX_TRAJECTORY_BYTES", _limits.DEFAULT_MAX_TRAJECTORY_BYTES, minimum=1024
)
REPLAY_STEPS_PER_PAGE = env_int("REPLAY_STEPS_PER_PAGE", _limits.DEFAULT_STEPS_PER_PAGE, minimum=1)
REPLAY_FIRST_SCREEN_STEPS = env_int("REPLAY_FIRST_SCREEN_STEPS", _limits.PAGE_FIRST_SCREEN_STEPS, minimum=1)

# Recovery (runs.evaluation.recovery.attempts_recover): a running attempt without a heartbeat for this long is
# taken for dead; one still running this long past its own budget (time budget plus the
# experiments' timeouts) is killed and counted as budget_exhausted, heartbeat or not. Sandboxes
# that belong to no attempt are swept once this old.
ATTEMPT_STALE_SECONDS = env_int("ATTEMPT_STALE_SECONDS", 60, minimum=1)
ATTEMPT_OVERRUN_GRACE_SECONDS = env_int("ATTEMPT_OVERRUN_GRACE_SECONDS", 300, minimum=0)
ATTEMPT_SWEEP_UNNAMED_SECONDS = env_int("ATTEMPT_SWEEP_UNNAMED_SECONDS", 86400, minimum=0)
# A worker running an attempt beats this often; several beats fit in ATTEMPT_STALE_SECONDS, or live
# workers would be taken for dead between two beats.
ATTEMPT_HEARTBEAT_SECONDS = env_int("ATTEMPT_HEARTBEAT_SECONDS", 5, minimum=1)
if ATTEMPT_HEARTBEAT_SECONDS >= ATTEMPT_STALE_SECONDS:
    raise ImproperlyConfigured(
        f"ATTEMPT_HEARTBEAT_SECONDS={ATTEMPT_HEARTBEAT_SECONDS} must be less than ATTEMPT_STALE_SECONDS={ATTEMPT_STALE_SECONDS}."
    )
# A running attempt's trajectory is stored this often while its agent works (runs.evaluation.live), so
# its replay shows the steps as they come and a worker that dies leaves them; 0: only at the end.
ATTEMPT_LIVE_SECONDS = env_int("ATTEMPT_LIVE_SECONDS", 2, minimum=0)
# Every long-running evaluation worker (runs.evaluation.worker) runs that recovery, and the sweep, this often.
ATTEMPT_RECOVER_INTERVAL_SECONDS = env_int("ATTEMPT_RECOVER_INTERVAL_SECONDS", 30, minimum=1)
# That recovery queues again the waiting work Redis holds no job for (a Redis restart or flush), once
# its job was put on the queue at least this long ago: a job is enqueued as its transaction commits.
ATTEMPT_LOST_JOB_GRACE_SECONDS = env_int("ATTEMPT_LOST_JOB_GRACE_SECONDS", 20, minimum=0)
# An infrastructure failure (sandbox, database) is retried this many times before the attempt ends
# as an error labelled `infrastructure`: an outage should not cost a model its score, a broken
# deployment should not retry forever.
ATTEMPT_MAX_INFRA_RETRIES = env_int("ATTEMPT_MAX_INFRA_RETRIES", 2, minimum=0)
# An infrastructure failure is retried after this many seconds, doubled with each failure, at most the maximum.
ATTEMPT_RETRY_BACKOFF_SECONDS = env_int("ATTEMPT_RETRY_BACKOFF_SECONDS", 10, minimum=0)
ATTEMPT_RETRY_BACKOFF_MAX_SECONDS = env_int("ATTEMPT_RETRY_BACKOFF_MAX_SECONDS", 300, minimum=0)
# How many attempts one run may hold (samples x k), whether run_eval or the site's run form starts
# it: a mistyped k or sample cap would otherwise queue (and pay for) far more than meant. As many
# as an upload may hold (SUBMISSION_MAX_RECORDS).
RUN_MAX_ATTEMPTS = env_int("RUN_MAX_ATTEMPTS", 10_000, minimum=1)

# --- uploaded submissions (docs/configuration.md) ---
# An upload is read and checked inside a web request, so these bound its memory and time: the file
# or zip as sent, what a zip's members decompress to (parsed JSON takes several times its size),
# its members and its records. At most SUBMISSION_MAX_PROBLEMS problems are listed, the rest counted.
SUBMISSION_MAX_BYTES = env_int("SUBMISSION_MAX_BYTES", 20 * 2**20, minimum=1024)
SUBMISSION_MAX_UNCOMPRESSED_BYTES = env_int("SUBMISSION_MAX_UNCOMPRESSED_BYTES", 50 * 2**20, minimum=1024)
SUBMISSION_MAX_ZIP_MEMBERS = env_int("SUBMISSION_MAX_ZIP_MEMBERS", 2000, minimum=1)
SUBMISSION_MAX_RECORDS = env_int("SUBMISSION_MAX_RECORDS", 10_000, minimum=1)
SUBMISSION_MAX_PROBLEMS = env_int("SUBMISSION_MAX_PROBLEMS", 200, minimum=1)
# RQ kills a re-execution job after this many seconds; a claim this old (plus ten minutes) belongs
# to a dead worker and is taken over.
SUBMISSION_REEXECUTION_TIMEOUT = env_int("SUBMISSION_REEXECUTION_TIMEOUT", 2 * 3600, minimum=60)

# --- abuse limits (docs/abuse-limits.md) ---
# The cache is where django-ratelimit counts: it must be shared by every gunicorn worker, so Redis.
CACHE_URL = env_url("CACHE_URL", REDIS_URL, schemes={"redis", "rediss", "unix"})
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": CACHE_URL,
        "KEY_PREFIX": "autoexperiment",
    },
}
# django-ratelimit lists only django-redis as supported; Django's own RedisCache increments
# atomically too (Redis INCR), which is all it needs.
SILENCED_SYSTEM_CHECKS = ["django_ratelimit.W001"]
# Behind this many reverse proxies, a client's address is the one the outermost proxy appended to
# X-Forwarded-For (autoexperiment_site.abuse.client_ip); 0 means REMOTE_ADDR.
TRUSTED_PROXY_COUNT = env_int("TRUSTED_PROXY_COUNT", 0)
RATELIMIT_IP_META_KEY = "autoexperiment_site.abuse.client_ip"
RATELIMIT_VIEW = "autoexperiment_site.abuse.ratelimited_view"
RATE_LIMITS = {
    "api-address": env_rate("RATE_LIMIT_API_PER_ADDRESS", "300/m"),
    "api-bad-token": env_rate("RATE_LIMIT_API_BAD_TOKEN_PER_ADDRESS", "20/10m"),
    "api-user": env_rate("RATE_LIMIT_API_PER_USER", "120/m"),
    "upload": env_rate("RATE_LIMIT_UPLOADS_PER_USER", "30/h"),
    "reexecution": env_rate("RATE_LIMIT_REEXECUTIONS_PER_USER", "20/h"),
    "signup": env_rate("RATE_LIMIT_SIGNUPS_PER_ADDRESS", "5/h"),
    "password-reset": env_rate("RATE_LIMIT_PASSWORD_RESETS_PER_ADDRESS", "5/h"),
    "password-reset-email": env_rate("RATE_LIMIT_PASSWORD_RESETS_PER_EMAIL", "3/h"),
    # Page views (GET and HEAD outside /api/): every view, and apart the heavier pages, whose work
    # grows with the attempts stored (autoexperiment_site.abuse.heavy_page). A person reading the
    # site stays far below; a replay page fetches its steps as they scroll into view, so the
    # general rate leaves room for those.
    "pages-address": env_rate("RATE_LIMIT_PAGES_PER_ADDRESS", "240/m"),
    "heavy-pages-address": env_rate("RATE_LIMIT_HEAVY_PAGES_PER_ADDRESS", "30/m"),
    "pages-user": env_rate("RATE_LIMIT_PAGES_PER_USER", "600/m"),
    "heavy-pages-user": env_rate("RATE_LIMIT_HEAVY_PAGES_PER_USER", "120/m"),
}
# Re-execution attempts of one user's submissions queued or running at once; staff are exempt.
MAX_QUEUED_REEXECUTIONS_PER_USER = env_int("MAX_QUEUED_REEXECUTIONS_PER_USER", 300, minimum=1)

# Sign-in lockout (django-axes, site and admin sign-in): failures are counted per username *and*
# address, so an attacker locks out only their own guesses, never the account for everyone else.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_COOLOFF_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "autoexperiment_site.abuse.client_ip"
AXES_LOCKOUT_CALLABLE = "autoexperiment_site.abuse.lockout_response"

# Mail, for password reset only: with no EMAIL_HOST there is no reset (its pages are 404 and the
# sign-in page says to ask staff) rather than a form whose mail fails in the log.
EMAIL_HOST = env_str("EMAIL_HOST", "")
PASSWORD_RESET_ENABLED = bool(EMAIL_HOST)
if PASSWORD_RESET_ENABLED:
    EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    EMAIL_PORT = env_int("EMAIL_PORT", 587, minimum=1)
    EMAIL_HOST_USER = env_str("EMAIL_HOST_USER", "")
    EMAIL_HOST_PASSWORD = env_str("EMAIL_HOST_PASSWORD", "")
    EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS", EMAIL_PORT == 587)
    EMAIL_USE_SSL = env_bool("EMAIL_USE_SSL", EMAIL_PORT == 465)
    if EMAIL_USE_TLS and EMAIL_USE_SSL:
        raise ImproperlyConfigured("EMAIL_USE_TLS and EMAIL_USE_SSL are both on; turn one off (TLS for port 587, SSL for 465).")
    DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", f"AutoExperiment <noreply@{EMAIL_HOST}>")
else:
    EMAIL_BACKEND = "django.core.mail.backends.dummy.EmailBackend"

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
# Self-service sign-up at /accounts/signup/ (make demo turns it on); off, staff create accounts.
SIGNUP_ENABLED = env_bool("SIGNUP_ENABLED", False)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}
