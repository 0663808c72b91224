"""django-rq's staff dashboards take the queue, job, worker and scheduler an address names on trust:
an index past the last queue raises IndexError, a job id that names nothing NoSuchJobError, a worker
that is gone an AssertionError, a malformed worker key ValueError; and its rq-scheduler pages raise
ImproperlyConfigured since we use RQ's own scheduler instead. Each is an address that names nothing,
so it answers the site's 404 rather than 500 (no input in a URL answers 500)."""
from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured
from django.http import Http404
from django.views.defaults import page_not_found
from rq.exceptions import NoSuchJobError

NAMES_NOTHING = (IndexError, NoSuchJobError, AssertionError, ValueError)


class QueueDashboardNotFoundMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        match = request.resolver_match
        if match is None or not match._func_path.startswith("django_rq."):
            return None
        no_scheduler = match._func_path == "django_rq.views.scheduler_jobs" and isinstance(exception, ImproperlyConfigured)
        if not (isinstance(exception, NAMES_NOTHING) or no_scheduler):
            return None
        return page_not_found(request, Http404("No queue, job, worker or scheduler at this address."))
