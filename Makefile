# Two commands do all set-up (see README): `make demo` runs the product, `make test` runs the tests.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/test
export DEBUG ?= 1
export REDIS_URL ?= redis://127.0.0.1:6379/0
PORT ?= 8000
# make serve and make demo: the secret key file they generate once, and how many RQ workers they run.
SECRET_KEY_FILE ?= $(CURDIR)/var/secret_key
RQ_WORKERS ?= 1

.PHONY: install bytecode system-packages services sandbox-images lint test test-fast demo serve bench clean

install: system-packages $(VENV)/.installed bytecode

# The sandboxes' Debian packages, Chromium for the page tests, patch(1), with which tests check
# that final patches apply with the standard tool, and passwd and mount, with which the hostile tests
# run a worker as an ordinary user (useradd, and mount in that worker's own namespace).
system-packages:
	@sandbox/images/install_host_packages.sh chromium patch passwd mount

# The command-line client (client/, no dependencies) is its own package, installed here too so that
# `autoexperiment` is in the venv; tests/client run it with client/ on PYTHONPATH.
$(VENV)/.installed: pyproject.toml client/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/pip install --quiet -e client
	touch $@

# The project's own modules compiled once: where PYTHONDONTWRITEBYTECODE is set (as on this kind of
# machine) every process would compile them again, half a second of each RQ worker's start. The
# suites' code is left alone (sandboxes run it; workspaces leave caches out anyway).
bytecode: $(VENV)/.installed
	@$(BIN)/python -m compileall -q -j 0 -x 'runs/suites/builtin/' autoexperiment_site leaderboard runs sandbox manage.py

services:
	@scripts/ensure_services.sh

sandbox-images: install
	@sandbox/images/start_docker_engine.sh
	@sandbox/images/build_base_image.sh

# Style (ruff), the architecture contracts (import-linter, [tool.importlinter] in pyproject.toml) and
# types (mypy, [tool.mypy]). test and test-fast depend on it, so a violation fails the build before any test runs.
lint: install
	$(BIN)/ruff check runs leaderboard sandbox autoexperiment_site tests scripts client
	$(BIN)/lint-imports
	$(BIN)/mypy sandbox runs/benchmark runs/agents

# The tests run in TEST_WORKERS processes (pytest-xdist): four on CI's two cores, since the tests spend
# much of their time waiting on workers, sandboxes and servers, so four finish sooner than two on the
# same machine. Each has a test database of its own (pytest-django adds _gw0, _gw1,
# ... to its name), a Redis database of its own, TEST_REDIS_DB minus its number (15 to 12: never
# REDIS_URL's 0), and a DEPLOYMENT_ID of its own (tests/conftest.py). Tests that share costly set-up
# carry an xdist_group mark, which keeps them in one worker (--dist loadgroup). Concurrent test runs on one machine each set their own TEST_REDIS_DB and
# TEST_DATABASE_URL.
TEST_WORKERS ?= 4
export TEST_REDIS_DB ?= 15

test: lint services sandbox-images
	DATABASE_URL=$(TEST_DATABASE_URL) $(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup

# Everything but the tests marked slow, for a quick loop while developing.
test-fast: lint services
	DATABASE_URL=$(TEST_DATABASE_URL) $(BIN)/pytest -n $(TEST_WORKERS) --dist loadgroup -m "not slow"

# The demo keeps its data in Postgres (RQ workers write concurrently, which SQLite serialises badly).
DEMO_DATABASE ?= autoexperiment_demo
demo: export DATABASE_URL = postgres://postgres@127.0.0.1:5432/$(DEMO_DATABASE)
demo: export SIGNUP_ENABLED = 1
demo: export DEBUG = 0
demo: export SECRET_KEY_FILE := $(SECRET_KEY_FILE)
demo: install services $(SECRET_KEY_FILE)
	@scripts/ensure_services.sh $(DEMO_DATABASE)
	$(BIN)/python manage.py migrate --no-input
	$(BIN)/python manage.py import_suite runs/suites/builtin --samples 1,2
	$(BIN)/python manage.py build_environment builtin
	$(BIN)/python manage.py load_demo
	$(BIN)/python manage.py analyse_attempts
	$(BIN)/python manage.py refresh_standings --all
# The PyTorch suite: its environment (torch from pip) built and its data fetched once, then a sample of
# each paper per baseline queued for the served workers, which finish them in a few minutes while the
# site is up (each attempt trains its networks a few times over).
	$(BIN)/python manage.py import_suite runs/suites/builtin-pytorch --samples 1
	$(BIN)/python manage.py build_environment builtin-pytorch
	$(BIN)/python manage.py load_demo --suite builtin-pytorch --n 1 --cap 1 --no-wait
	@echo "Serving http://localhost:$(PORT)/ (sign up at /accounts/signup/; a staff account: DATABASE_URL=$$DATABASE_URL $(BIN)/python manage.py createsuperuser)"
	@$(MAKE) --no-print-directory serve

# The production stack on this machine (docs/production.md): DEBUG off, hashed static
# files served by WhiteNoise, and the Procfile under honcho: gunicorn and RQ_WORKERS evaluation workers
# (each also drives RQ's scheduler and the self-healing: runs/evaluation/worker.py).
# The secret key comes from SECRET_KEY, or else from a file generated once (mode 600).
serve: export DEBUG = 0
serve: export SECRET_KEY_FILE := $(SECRET_KEY_FILE)
serve: export RQ_WORKERS := $(RQ_WORKERS)
serve: install services $(SECRET_KEY_FILE)
	$(BIN)/python manage.py migrate --no-input
	$(BIN)/python manage.py collectstatic --no-input --verbosity 0
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/honcho start --port $(PORT) --concurrency worker=$(RQ_WORKERS)

$(SECRET_KEY_FILE):
	@mkdir -p $(dir $@)
	@umask 077 && $(PYTHON) -c 'import secrets; print(secrets.token_urlsafe(64))' > $@.tmp && mv $@.tmp $@
	@echo "Generated a secret key in $@"

bench: install services sandbox-images
	$(BIN)/python scripts/bench_sampling.py
	$(BIN)/python scripts/bench_sandbox.py
	$(BIN)/python scripts/bench_worker.py --repeat 3
	$(BIN)/python scripts/bench_transplant.py
	$(BIN)/python scripts/bench_heal.py
	$(BIN)/python scripts/bench_pages.py
	$(BIN)/python scripts/bench_replay.py
	$(BIN)/python scripts/bench_explore.py
	$(BIN)/python scripts/bench_datasets.py

clean:
	rm -rf $(VENV) var .pytest_cache
