"""The suite's tasks as a download: one archive per (suite, n, context), built once and cached.

Thin: runs.suites.export builds and caches the archive; this view finds the suite, checks the
path's n and context, and streams the cached file.
"""
from django.conf import settings
from django.http import FileResponse, Http404
from django.views.decorators.http import require_GET

from autoexperiment_site.abuse import heavy_page
from runs.benchmark.workspace import CONTEXT_CONDITIONS
from runs.models import Suite
from runs.submissions.format_text import upload_format_markdown
from runs.suites.export import ExportError, task_archive_cached
from runs.visibility import gold_access


@heavy_page
@require_GET
def task_download(request, suite: str, n: int, context: str):
    """`benchmark/<suite>/tasks/n<n>-<context>.tar.gz`: manifest.jsonl, README.md and one
    workspace archive per sample of that n."""
    if context not in CONTEXT_CONDITIONS:
        raise Http404(f"unknown context {context!r}; one of {', '.join(CONTEXT_CONDITIONS)}")
    if n < 1:
        raise Http404("n must be at least 1")
    found = Suite.objects.filter(name=suite).first()
    if found is None:
        raise Http404(f"no suite named {suite!r}")
    if not gold_access(user=request.user, suite=found).code:
        # The tasks of n=1 alone hold every gold body of a paper with two functions or more.
        raise Http404(f"the tasks of suite {suite!r} hold its private gold code: staff only")
    try:
        path = task_archive_cached(
            suite=found, n=n, context=context, cache_root=settings.TASK_EXPORT_ROOT, upload_format=upload_format_markdown()
        )
    except ExportError as error:  # no sample at this n, or a paper whose gold code is gone
        raise Http404(str(error)) from None
    return FileResponse(path.open("rb"), as_attachment=True, filename=path.name, content_type="application/gzip")
