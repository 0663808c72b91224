"""The site's 404: JSON naming what was not found for the API (/api/) and for a page's JSON
(?format=json), whose readers are scripts; the HTML page (templates/404.html) for everyone else."""
from django.http import JsonResponse
from django.urls import Resolver404
from django.views.defaults import page_not_found


def wants_json(request) -> bool:
    """Whether a refusal of `request` should be JSON: the API's, and a page's JSON export's."""
    return request.path.startswith("/api/") or request.GET.get("format") == "json"


def not_found(request, exception=None):
    if wants_json(request):
        # A view's Http404 says what it looked for ("no suite x"); an address that matches no URL says so.
        message = str(exception) if exception is not None and not isinstance(exception, Resolver404) else ""
        return JsonResponse({"error": message or f"nothing is at {request.path}"}, status=404)
    return page_not_found(request, exception)
