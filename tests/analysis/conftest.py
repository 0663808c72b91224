"""Fixtures for the failure-analysis tests: the tiny suite the evaluation tests run attempts on."""
from tests.evaluation.conftest import tiny_suite  # noqa: F401 - a fixture, used by the end-to-end test
