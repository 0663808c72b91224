"""Typed reads of environment variables.

Every reader raises ImproperlyConfigured naming the variable and the bad value, so a typo in a
deployment stops start-up with a message instead of running with a silently wrong setting.
"""
import os
import re
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _raw(name: str, default: str | None) -> str | None:
    value = os.environ.get(name)
    return default if value is None else value.strip()


def env_bool(name: str, default: bool) -> bool:
    value = _raw(name, None)
    if value is None:
        return default
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name}={value!r} is not a boolean; use one of 1/0, true/false, yes/no, on/off.")


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    value = _raw(name, None)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r} is not an integer.") from None
    if number < minimum:
        raise ImproperlyConfigured(f"{name}={number} must be at least {minimum}.")
    return number


def env_str(name: str, default: str | None) -> str | None:
    return _raw(name, default)


def env_list(name: str, default: list[str]) -> list[str]:
    value = _raw(name, None)
    if value is None:
        return default
    items = [item.strip() for item in value.split(",")]
    if any(not item for item in items):
        raise ImproperlyConfigured(f"{name}={value!r} has an empty entry; give a comma-separated list without blanks.")
    return items


def env_choice(name: str, default: str, choices: dict[str, str]) -> str:
    """Read a value from a fixed set; `choices` maps accepted spellings to the canonical name."""
    value = _raw(name, default)
    try:
        return choices[value.lower()]
    except KeyError:
        accepted = ", ".join(sorted(choices))
        raise ImproperlyConfigured(f"{name}={value!r} is not one of: {accepted}.") from None


def env_url(name: str, default: str, *, schemes: set[str]) -> str:
    value = _raw(name, default)
    parts = urlsplit(value)
    if parts.scheme not in schemes or not (parts.netloc or parts.path):
        expected = ", ".join(f"{scheme}://" for scheme in sorted(schemes))
        raise ImproperlyConfigured(f"{name}={value!r} is not a valid URL; expected one starting with {expected}.")
    return value


_RATE = re.compile(r"(\d+)/(\d*)([smhd])")
_RATE_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def split_rate(rate: str) -> tuple[int, int]:
    """A django-ratelimit rate ("30/h", "20/10m") as (requests, seconds). Raises ValueError."""
    match = _RATE.fullmatch(rate.strip().lower())
    if match is None:
        raise ValueError(rate)
    count, multiplier, unit = match.groups()
    seconds = int(multiplier or 1) * _RATE_SECONDS[unit]
    if int(count) < 1 or seconds < 1:
        raise ValueError(rate)
    return int(count), seconds


def env_rate(name: str, default: str) -> str | None:
    """A rate limit: "<count>/<period>" with the period s, m, h or d and an optional multiplier
    ("30/h", "20/10m"), or "off" (None: not limited)."""
    value = _raw(name, default)
    if value.lower() == "off":
        return None
    try:
        split_rate(value)
    except ValueError:
        raise ImproperlyConfigured(
            f"{name}={value!r} is not a rate; write <count>/<period> with a count of at least 1 and a period "
            "of s, m, h or d, optionally multiplied (30/h, 20/10m), or off."
        ) from None
    return value.strip().lower()
