"""Refuse a NUL byte anywhere in a request's address, before any view or middleware reads it.

Postgres refuses a NUL in any text it is given, so a NUL that reached a query (a paper id in the
path, a search term in the query string, an admin object id, a session key) answered 500. No page
of the site has a use for one: a NUL in the path answers 404, like any address that names nothing;
a NUL in a query parameter answers 400 naming the parameter. One check here covers every URL pattern
and every view, the admin's and the queue dashboards' included, present and future.

A cookie holding a NUL (a quoted value may spell one as \000) is ignored, as if not sent: no browser
sends one, and the session middleware would take it to the database. Form fields need no check here:
Django's form fields refuse a NUL with a message of their own.
"""
from __future__ import annotations

from django.http import Http404, HttpResponseBadRequest, JsonResponse

from autoexperiment_site.errors import wants_json

NUL = "\x00"


def nul_problem(query) -> str | None:
    """What is wrong with `query` (a QueryDict), or None: the first parameter that holds a NUL."""
    for name, values in query.lists():
        if NUL in name:
            return "A query parameter's name holds a NUL byte (%00), which no page accepts."
        for value in values:
            if NUL in value:  # said as the site's pages say a bad parameter: name=value: what is wrong
                return f"{name}={value[:100]!r}: holds a NUL byte (%00), which no page accepts."
    return None


class RefuseNulBytesMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if NUL in request.path:
            raise Http404("No page has a NUL byte (%00) in its address.")
        problem = nul_problem(request.GET)
        if problem is not None:
            if wants_json(request):  # a script reading JSON gets its refusal as JSON (autoexperiment_site.openapi)
                return JsonResponse({"error": problem}, status=400)
            return HttpResponseBadRequest(problem, content_type="text/plain; charset=utf-8")
        if any(NUL in name or NUL in value for name, value in request.COOKIES.items()):
            request.COOKIES = {name: value for name, value in request.COOKIES.items() if NUL not in name + value}
        return self.get_response(request)
