"""The Parquet dataset downloads (leaderboard.datasets): a suite's, from its benchmark page, and a
system's, from its page.

Thin. Each request builds the zip into a temporary file that the response streams and removes:
the files hold no gold and no hidden run, so they are the same for everybody and need no gold
check. Building reads every public attempt of the suite or system, so both views count as heavy
pages (autoexperiment_site.abuse.heavy_page), like the CSV exports of the system page.
"""
from django.http import FileResponse, Http404
from django.views.decorators.http import require_GET

from autoexperiment_site.abuse import heavy_page
from leaderboard.datasets import DatasetError, suite_dataset_zip, system_dataset_zip


def _zip_response(archive, filename: str) -> FileResponse:
    return FileResponse(archive, as_attachment=True, filename=filename, content_type="application/zip")


@heavy_page
@require_GET
def suite_dataset(request, suite: str):
    """`benchmark/<suite>/dataset.zip`: every sample of the suite and every attempt of its public runs."""
    try:
        archive, filename = suite_dataset_zip(suite=suite)
    except DatasetError as error:
        raise Http404(str(error)) from None
    return _zip_response(archive, filename)


@heavy_page
@require_GET
def system_dataset(request, slug: str):
    """`systems/<slug>/dataset.zip`: the system's public attempts and the samples they were at."""
    try:
        archive, filename = system_dataset_zip(slug=slug)
    except DatasetError as error:
        raise Http404(str(error)) from None
    return _zip_response(archive, filename)
