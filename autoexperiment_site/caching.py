"""The shared cache (Redis) for what is only memoised: a page whose cache is unreachable is slower,
not broken. Reads give None and writes are skipped when the cache fails, with a warning naming
what was being cached."""
import logging

from django.core.cache import cache

logger = logging.getLogger(__name__)


def cached(key: str, *, what: str):
    """The value stored under `key`, or None (absent, or the cache is unavailable)."""
    try:
        return cache.get(key)
    except Exception:  # noqa: BLE001 - the cache only saves work
        logger.warning("%s: the cache is unavailable; computed for every request", what, exc_info=True)
        return None


def cache_quietly(key: str, value, seconds: float, *, what: str) -> None:
    """Store `value` under `key` for `seconds` if the cache answers."""
    try:
        cache.set(key, value, seconds)
    except Exception:  # noqa: BLE001
        logger.warning("%s: the cache is unavailable", what, exc_info=True)
