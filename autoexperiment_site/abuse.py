"""Abuse limits: request rates (django-ratelimit), the sign-in lockout's page (django-axes), the
client address both of them count by, and the password-reset switch.

Rates are named in settings.RATE_LIMITS (from the environment, see docs/abuse-limits.md) and
counted in the shared Redis cache, so every gunicorn worker sees the same counts. A request over a
rate raises `RateLimited`; `ratelimited_view` (settings.RATELIMIT_VIEW, reached through
django-ratelimit's middleware) turns it into a 429 that says which limit and when to come back:
JSON under /api/, a page elsewhere.

Page views (GET and HEAD outside /api/, which has its own rates) are counted by
`PageRateLimitMiddleware`: per address for visitors, per user once signed in (a higher limit), and
against a stricter rate for views marked `heavy_page` (those whose work grows with the attempts
stored: a system's page, the samples, the explorer, comparisons, exports). Views marked
`rate_exempt` (the health check) are not counted; static files never reach a view.
"""
from __future__ import annotations

import ipaddress
import logging
from dataclasses import dataclass
from enum import StrEnum
from functools import wraps

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.http import Http404, JsonResponse
from django.shortcuts import render
from django_ratelimit.core import get_usage
from django_ratelimit.exceptions import Ratelimited
from redis.exceptions import RedisError

from autoexperiment_site.env import split_rate

logger = logging.getLogger(__name__)

PER_USER, PER_ADDRESS, PER_EMAIL = "user", "address", "email address"


@dataclass(frozen=True)
class Rate:
    """One limit of settings.RATE_LIMITS: what it counts (for messages) and what it counts per."""

    name: str
    counts: str
    per: str


RATES = {
    rate.name: rate
    for rate in (
        Rate("api-address", "API requests", PER_ADDRESS),
        Rate("api-bad-token", "API requests with a missing or wrong token", PER_ADDRESS),
        Rate("api-user", "API requests", PER_USER),
        Rate("upload", "uploads", PER_USER),
        Rate("reexecution", "re-execution requests", PER_USER),
        Rate("signup", "sign-up attempts", PER_ADDRESS),
        Rate("password-reset", "password-reset requests", PER_ADDRESS),
        Rate("password-reset-email", "password-reset requests", PER_EMAIL),
        Rate("pages-address", "page views", PER_ADDRESS),
        Rate("heavy-pages-address", "views of the heavier pages (systems, samples, functions, the explorer, comparisons, "
             "exports and downloads)", PER_ADDRESS),
        Rate("pages-user", "page views", PER_USER),
        Rate("heavy-pages-user", "views of the heavier pages (systems, samples, functions, the explorer, comparisons, "
             "exports and downloads)", PER_USER),
    )
}

_UNITS = [(86400, "day"), (3600, "hour"), (60, "minute"), (1, "second")]


class RateLimited(Ratelimited):
    """A request over one of the RATES (status 429), or one that could not be counted (503)."""

    def __init__(self, message: str, *, retry_after: int, status: int = 429) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after = max(int(retry_after), 1)
        self.status = status


def client_ip(request) -> str:
    """The address limits count by: REMOTE_ADDR, or behind TRUSTED_PROXY_COUNT reverse proxies the
    address the outermost of them saw (X-Forwarded-For, read from the right: entries further left
    are whatever the client sent, so trusting them would let anyone choose their own address);
    see `counted_address` for what of it counts."""
    remote = request.META.get("REMOTE_ADDR") or "0.0.0.0"
    proxies = settings.TRUSTED_PROXY_COUNT
    if proxies > 0:
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
        if len(forwarded) >= proxies:
            try:
                return counted_address(forwarded[-proxies])
            except ValueError:
                pass
    try:
        return counted_address(remote)
    except ValueError:
        return remote


def counted_address(text: str) -> str:
    """The client a limit counts: an IPv4 address, or for IPv6 the first address of its /64 (one
    host is given a whole /64, and would otherwise get a fresh count from each of its 2**64
    addresses; still an address, as django-axes stores it). IPv4-mapped IPv6 addresses count as
    their IPv4 address."""
    address = ipaddress.ip_address(text)
    if address.version == 6 and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.version == 4:
        return str(address)
    return str(ipaddress.ip_network(f"{address}/64", strict=False).network_address)


def _period_text(seconds: int) -> str:
    for size, unit in _UNITS:
        if seconds % size == 0:
            count = seconds // size
            return unit if count == 1 else f"{count} {unit}s"
    return f"{seconds} seconds"


def _wait_text(seconds: int) -> str:
    if seconds < 120:
        return f"{seconds} second{'s' if seconds != 1 else ''}"
    minutes = -(-seconds // 60)
    return f"{minutes} minutes"


def _key(rate: Rate, request, key: str | None) -> str:
    if key is not None:
        return key
    if rate.per == PER_USER:
        return str(request.user.pk)
    return client_ip(request)


def _usage(request, rate: Rate, key: str | None, *, increment: bool) -> dict | None:
    value = _key(rate, request, key)
    try:
        return get_usage(
            request,
            group=rate.name,
            key=lambda _group, _request: value,
            rate=settings.RATE_LIMITS.get(rate.name),
            increment=increment,
        )
    except (RedisError, OSError) as error:  # no count, no service: better than no limit
        logger.exception("rate limit %s could not be counted", rate.name)
        raise RateLimited(
            f"The request could not be counted against the {rate.counts} limit (the rate-limit store is "
            f"unreachable: {type(error).__name__}). Try again shortly.",
            retry_after=30,
            status=503,
        ) from None


def _refuse(rate: Rate, usage: dict) -> RateLimited:
    limit, period = split_rate(settings.RATE_LIMITS[rate.name])
    wait = max(int(usage["time_left"]), 1)
    return RateLimited(
        f"Too many {rate.counts}: the limit is {limit} per {_period_text(period)} per {rate.per}. "
        f"Try again in {_wait_text(wait)}.",
        retry_after=wait,
    )


def rate_limit(request, name: str, *, key: str | None = None) -> None:
    """Count this request against the rate `name` (per user, address or `key`); raise RateLimited
    when it goes over. A rate set to "off" counts nothing."""
    rate = RATES[name]
    usage = _usage(request, rate, key, increment=True)
    if usage is not None and usage["should_limit"]:
        raise _refuse(rate, usage)


def rate_check(request, name: str, *, key: str | None = None) -> None:
    """Raise RateLimited when `name` is used up already, counting nothing: for limits on failures,
    counted by `rate_count` only when the request fails."""
    rate = RATES[name]
    usage = _usage(request, rate, key, increment=False)
    if usage is not None and usage["count"] >= usage["limit"]:
        raise _refuse(rate, usage)


def rate_count(request, name: str, *, key: str | None = None) -> None:
    """Count one use of `name` without refusing this request (a failure that already happened)."""
    _usage(request, RATES[name], key, increment=True)


def rate_limited(name: str, *, methods: tuple[str, ...] = ("POST",)):
    """View decorator: `rate_limit(request, name)` on requests with one of `methods`."""

    def decorator(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if request.method in methods:
                rate_limit(request, name)
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


# --- page views ----------------------------------------------------------------------------------


class PageRate(StrEnum):
    """How a view's page views count (its `page_rate`; unmarked views count against the page rates)."""

    HEAVY = "heavy"  # also against the stricter heavy-page rates
    EXEMPT = "exempt"  # not at all


PAGE_RATES = ("pages-address", "heavy-pages-address", "pages-user", "heavy-pages-user")


def heavy_page(view):
    """Mark a view whose work grows with what is stored: its views count against the stricter
    page rates (`heavy-pages-*`) as well as the others."""
    view.page_rate = PageRate.HEAVY
    return view


def rate_exempt(view):
    """Mark a view whose views are not counted at all (the health check, polled by monitors)."""
    view.page_rate = PageRate.EXEMPT
    return view


class PageRateLimitMiddleware:
    """Counts GET and HEAD page views against settings.RATE_LIMITS: `pages-address` for visitors,
    `pages-user` for signed-in users, and for views marked `heavy_page` also `heavy-pages-address` /
    `heavy-pages-user`. Past one, the 429 page of `ratelimited_view`. If the counts cannot be
    reached (Redis down) the page is served uncounted: public pages do not depend on Redis, and
    `_usage` has logged it."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        kind = getattr(view_func, "page_rate", None)
        if request.method not in ("GET", "HEAD") or kind == PageRate.EXEMPT or request.path.startswith("/api/"):
            return None
        if not any(settings.RATE_LIMITS.get(name) for name in PAGE_RATES):
            return None  # all off: not even the session is read to tell visitors from users
        who = "user" if request.user.is_authenticated else "address"
        names = [f"pages-{who}"] + ([f"heavy-pages-{who}"] if kind == PageRate.HEAVY else [])
        try:
            for name in names:
                rate_limit(request, name)
        except RateLimited as refused:
            if refused.status != 429:
                return None
            if who == "address":
                refused.message += " Signed-in users have a higher limit."
            return ratelimited_view(request, refused)
        return None


def ratelimited_view(request, exception):
    """settings.RATELIMIT_VIEW: the response to RateLimited (and to a bare django-ratelimit
    Ratelimited, should a library decorator ever raise one)."""
    if isinstance(exception, RateLimited):
        message, retry_after, status = exception.message, exception.retry_after, exception.status
    else:
        message, retry_after, status = "Too many requests. Try again in a minute.", 60, 429
    if request.path.startswith("/api/"):
        response = JsonResponse({"error": message, "retry_after": retry_after}, status=status)
    else:
        response = render(
            request, "429.html", {"message": message, "retry_after": retry_after, "status": status}, status=status
        )
    response["Retry-After"] = str(retry_after)
    return response


# --- sign-in lockout (django-axes) ---------------------------------------------------------------


def lockout_response(request, original_response=None, credentials=None):
    """settings.AXES_LOCKOUT_CALLABLE: the sign-in page again (site or admin sign-in alike), with
    the reason it refused and when to try again, as a 429."""
    from axes.helpers import get_client_username, get_cool_off

    cool_off = get_cool_off(request)
    minutes = int(cool_off.total_seconds() // 60) if cool_off else None
    context = {
        "form": AuthenticationForm(request),
        "locked_out": True,
        "locked_username": get_client_username(request, credentials) or "",
        "cooloff_minutes": minutes,
        "next": request.POST.get("next", "") or request.GET.get("next", ""),
    }
    response = render(request, "registration/login.html", context, status=429)
    if cool_off:
        response["Retry-After"] = str(int(cool_off.total_seconds()))
    return response


# --- password reset ------------------------------------------------------------------------------


def password_reset_enabled() -> bool:
    """Password reset needs a mail server (EMAIL_HOST); without one it would only log SMTP errors."""
    return settings.PASSWORD_RESET_ENABLED


def requires_mail(view):
    """404 for the password-reset pages while no mail server is configured."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if not password_reset_enabled():
            raise Http404("password reset is off: no mail server is configured; ask staff to reset your password")
        return view(request, *args, **kwargs)

    return wrapped


def accounts(request) -> dict:
    """Context processor: whether the sign-in page offers "forgot your password?"."""
    return {"password_reset_enabled": password_reset_enabled()}
