"""The Content-Security-Policy of pages that show text written by models and uploaders.

Even if some of it escaped the templates' autoescaping, the browser runs no inline script, loads
nothing from elsewhere and lets no other site frame the page.
"""
from functools import wraps


def csp_header(*, inline_styles: bool = False) -> str:
    """The policy; `inline_styles` for pages drawing Plotly charts, which style elements inline."""
    return "; ".join([
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'" if inline_styles else "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ])


def content_security_policy(*, inline_styles: bool = False):
    """View decorator sending `csp_header(...)` and the usual companion headers."""
    policy = csp_header(inline_styles=inline_styles)

    def decorate(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            response = view(request, *args, **kwargs)
            response.headers["Content-Security-Policy"] = policy
            response.headers.setdefault("X-Content-Type-Options", "nosniff")
            response.headers.setdefault("Referrer-Policy", "same-origin")
            return response

        return wrapped

    return decorate
