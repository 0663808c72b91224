"""The shared cache (Redis) for what is only memoised: a page whose cache is unreachable is slower,
not broken. Reads give None (or nothing) and writes are skipped when the cache fails, with a warning
naming what was being cached."""
import logging

from django.core.cache import cache

logger = logging.getLogger(__name__)


def cached(key: str, *, what: str):
    """The value stored under `key`, or None (absent, or the cache is unavailable)."""
    return cached_many([key], what=what).get(key)


def cached_many(keys: list[str], *, what: str) -> dict:
    """The values stored under those of `keys` present, in one round trip ({} if the cache is unavailable)."""
    try:
        return cache.get_many(keys)
    except Exception:  # noqa: BLE001 - the cache only saves work
        logger.warning("%s: the cache is unavailable; computed for every request", what, exc_info=True)
        return {}


def cache_quietly(key: str, value, seconds: float, *, what: str) -> None:
    """Store `value` under `key` for `seconds` if the cache answers."""
    cache_quietly_many({key: value}, seconds, what=what)


def cache_quietly_many(values: dict, seconds: float, *, what: str) -> None:
    """Store each of `values` (key: value) for `seconds` if the cache answers."""
    try:
        cache.set_many(values, seconds)
    except Exception:  # noqa: BLE001
        logger.warning("%s: the cache is unavailable", what, exc_info=True)
