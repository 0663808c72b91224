"""Serves plotly.js from the installed plotly package as the static file `vendor/plotly.min.js`.

No CDN (the site must work offline) and no 4.8 MB copy in the repository: the Python package
already ships the exact plotly.js its figures are written for. Listed in STATICFILES_FINDERS, so
runserver, the test live server and `collectstatic` (then WhiteNoise) all find it.
"""
from pathlib import Path

from django.contrib.staticfiles.finders import BaseFinder
from django.core.checks import Error
from django.core.files.storage import FileSystemStorage

PREFIX = "vendor"
NAME = "plotly.min.js"


def plotly_js_path() -> Path:
    import plotly

    return Path(plotly.__file__).resolve().parent / "package_data" / NAME


class PlotlyFinder(BaseFinder):
    def __init__(self, *args, **kwargs):
        self.source = plotly_js_path()
        self.storage = FileSystemStorage(location=str(self.source.parent))
        self.storage.prefix = PREFIX

    def check(self, **kwargs):
        if not self.source.is_file():
            return [Error(f"plotly.js is missing from the plotly package: {self.source}", id="leaderboard.E001")]
        return []

    def find(self, path, find_all=False, **kwargs):
        find_all = find_all or kwargs.get("all", False)
        match = str(self.source) if path == f"{PREFIX}/{NAME}" and self.source.is_file() else None
        if find_all:
            return [match] if match else []
        return match

    def list(self, ignore_patterns):
        if self.source.is_file():
            yield NAME, self.storage
