# Two commands do all set-up (see README): `make demo` runs the product, `make test` runs the tests.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/test
export DEBUG ?= 1
export REDIS_URL ?= redis://127.0.0.1:6379/0
PORT ?= 8000

.PHONY: install system-packages services sandbox-images test test-fast demo bench clean

install: system-packages $(VENV)/.installed

# The sandboxes' Debian packages, and Chromium for the page tests.
system-packages:
	@sandbox/images/install_host_packages.sh chromium

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

services:
	@scripts/ensure_services.sh

sandbox-images: install
	@sandbox/images/start_docker_engine.sh
	@sandbox/images/build_base_image.sh


test: install services sandbox-images
	DATABASE_URL=$(TEST_DATABASE_URL) $(BIN)/pytest

# Everything but the tests marked slow, for a quick loop while developing.
test-fast: install services
	DATABASE_URL=$(TEST_DATABASE_URL) $(BIN)/pytest -m "not slow"

# The demo keeps its data in Postgres (RQ workers write concurrently, which SQLite serialises badly).
DEMO_DATABASE ?= autoexperiment_demo
demo: export DATABASE_URL = postgres://postgres@127.0.0.1:5432/$(DEMO_DATABASE)
demo: install services
	@scripts/ensure_services.sh $(DEMO_DATABASE)
	$(BIN)/python manage.py migrate --no-input
	$(BIN)/python manage.py import_suite runs/suites/builtin --samples 1,2
	$(BIN)/python manage.py load_demo
	@echo "Serving http://localhost:$(PORT)/ (create an account to sign in: DATABASE_URL=$$DATABASE_URL $(BIN)/python manage.py createsuperuser)"
	$(BIN)/python manage.py runserver 0.0.0.0:$(PORT)

bench: install services sandbox-images
	$(BIN)/python scripts/bench_sampling.py
	$(BIN)/python scripts/bench_sandbox.py
	$(BIN)/python scripts/bench_worker.py
	$(BIN)/python scripts/bench_pages.py

clean:
	rm -rf $(VENV) var .pytest_cache
