"""The Parquet dataset downloads (leaderboard.datasets): a suite's, from its benchmark page, and a
system's, from its page.

Thin. leaderboard.dataset_cache builds each download once per change of what it holds and keeps it
under settings.DATASET_CACHE_ROOT; a view reads the download's version (a few small queries),
answers 304 to a client that holds it already (ETag, If-None-Match; Last-Modified, If-Modified-Since:
Django's conditional GET rules), and otherwise streams the file, built first when it is not there.
`Cache-Control: no-cache` makes browsers and proxies ask again each time, so that a copy they kept
is never shown after a run was hidden. The files hold no gold and no hidden run, so they are the
same for everybody and need no gold check. A build reads every public attempt of a system, so both
views still count as heavy pages (autoexperiment_site.abuse.heavy_page).
"""
import os

from django.conf import settings
from django.http import FileResponse, Http404, HttpResponse
from django.utils.cache import get_conditional_response, patch_cache_control
from django.utils.http import http_date
from django.views.decorators.http import require_safe

from autoexperiment_site.abuse import heavy_page
from leaderboard.dataset_cache import (
    DatasetVersion,
    dataset_built_at,
    dataset_open,
    suite_dataset_version,
    system_dataset_version,
)
from leaderboard.datasets import DatasetError


def _validated(response: HttpResponse, *, version: DatasetVersion, modified: float | None) -> HttpResponse:
    response.headers["ETag"] = version.etag
    if modified is not None:
        response.headers["Last-Modified"] = http_date(modified)
    patch_cache_control(response, no_cache=True)
    return response


def _download(request, version_of) -> HttpResponse:
    """The download `version_of()` stands for: 304 when the client holds it already, else its zip."""
    try:
        version = version_of()
    except DatasetError as error:
        raise Http404(str(error)) from None
    root = settings.DATASET_CACHE_ROOT
    built = dataset_built_at(version, root=root)
    unchanged = get_conditional_response(request, etag=version.etag, last_modified=None if built is None else int(built))
    if unchanged is not None:
        return _validated(unchanged, version=version, modified=built)
    try:
        archive, served = dataset_open(version, root=root)
    except DatasetError as error:  # gone since its version was read: its runs hidden meanwhile
        raise Http404(str(error)) from None
    response = FileResponse(archive, as_attachment=True, filename=served.filename, content_type="application/zip")
    return _validated(response, version=served, modified=os.fstat(archive.fileno()).st_mtime)


@heavy_page
@require_safe
def suite_dataset(request, suite: str):
    """`benchmark/<suite>/dataset.zip`: every sample of the suite and every attempt of its public runs."""
    return _download(request, lambda: suite_dataset_version(suite=suite))


@heavy_page
@require_safe
def system_dataset(request, slug: str):
    """`systems/<slug>/dataset.zip`: the system's public attempts and the samples they were at."""
    return _download(request, lambda: system_dataset_version(slug=slug))
