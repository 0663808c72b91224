"""The limits on one upload, declared in autoexperiment_site/settings.py (tests lower them).

The page and the API refuse a body over `max_upload_bytes` before reading it; the rest bound what
reading it may cost (runs.submissions.archive, .jsonl, .validation). A final patch and a trajectory
are held to runs.limits, which our own workers' attempts meet too.
"""
from django.conf import settings

from runs.limits import trajectory_limits


def max_upload_bytes() -> int:
    """The largest upload (the JSONL file or the zip as sent), default 20 MiB."""
    return settings.SUBMISSION_MAX_BYTES


def max_uncompressed_bytes() -> int:
    """The most a zip's members may decompress to, all together, default 50 MiB (parsed JSON takes
    several times its size in memory, and this happens inside a web request)."""
    return settings.SUBMISSION_MAX_UNCOMPRESSED_BYTES


def max_zip_members() -> int:
    return settings.SUBMISSION_MAX_ZIP_MEMBERS


def max_records() -> int:
    return settings.SUBMISSION_MAX_RECORDS


def max_patch_bytes() -> int:
    """The largest final patch of one attempt (runs.limits), default 1 MiB."""
    return trajectory_limits().patch_bytes


def max_trajectory_bytes() -> int:
    """The largest trajectory of one attempt (its JSON; runs.limits), default 10 MiB."""
    return trajectory_limits().trajectory_bytes


def max_problems() -> int:
    """How many problems are listed; the rest are counted."""
    return settings.SUBMISSION_MAX_PROBLEMS
