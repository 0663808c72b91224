"""The attempts explorer's URL parameters (/explore/), validated: a bad value is refused by name."""
import re

from django import forms

from leaderboard.explorer import DEFAULT_SORT, MAX_PAGE, SORT_KEYS, ExplorerFilters
from leaderboard.forms import MAX_N
from runs.models import Attempt

FORMATS = ("html", "csv", "json")
_FUNCTION = re.compile(r"^(?P<paper>[^:\s]{1,100}):(?P<func>[0-9]{1,6})$")
_SLUG = re.compile(r"^[0-9a-f]{12}$")
_YES, _NO = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


class TriStateField(forms.Field):
    """1 (also true/yes/on) or 0 (false/no/off); absent or empty means "either"."""

    widget = forms.Select(choices=[("", "either"), ("1", "yes"), ("0", "no")])

    def to_python(self, value):
        text = "" if value is None else str(value).strip().lower()
        if not text:
            return None
        if text in _YES:
            return True
        if text in _NO:
            return False
        raise forms.ValidationError(f"must be 1 or 0, not {value!r}", code="invalid")


class ExplorerForm(forms.Form):
    """Bound to request.GET. Any error makes the request a 400 that lists it by parameter."""

    q = forms.CharField(required=False, max_length=200, label="Search steps", strip=True)
    suite = forms.ChoiceField(required=False)
    system = forms.CharField(required=False, max_length=12, label="System (slug)")
    paper = forms.CharField(required=False, max_length=100)
    sample = forms.CharField(required=False, max_length=300, help_text="a sample id, e.g. 2401.01234_3 (the samples pages link here)")
    function = forms.CharField(required=False, max_length=110, help_text="<paper_id>:<func_id>")
    n = forms.IntegerField(required=False, min_value=1, max_value=MAX_N)
    status = forms.ChoiceField(
        required=False, choices=[("", "done or error"), (Attempt.DONE, "done"), (Attempt.ERROR, "error")]
    )
    outcome = forms.ChoiceField(required=False, choices=[("", "any")] + Attempt.Outcome.choices)
    exception = forms.CharField(required=False, max_length=200, label="Exception type")
    exit_status = forms.CharField(required=False, max_length=20)
    verified = TriStateField(required=False)
    mismatch = TriStateField(required=False)
    near_miss = TriStateField(required=False, label="Near miss")
    crashed_first = TriStateField(required=False, label="First run crashed")
    recovered = TriStateField(required=False, label="Reached a working run")
    sort = forms.ChoiceField(required=False, choices=[(key, key) for key in SORT_KEYS], widget=forms.HiddenInput)
    page = forms.IntegerField(required=False, min_value=1, max_value=MAX_PAGE, widget=forms.HiddenInput)
    format = forms.ChoiceField(required=False, choices=[(name, name) for name in FORMATS], widget=forms.HiddenInput)

    def __init__(self, *args, suites: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["suite"].choices = [("", "all")] + [(name, name) for name in suites]
        self.fields["n"].widget.attrs.update({"min": 1, "max": MAX_N, "class": "narrow"})
        self.fields["q"].widget.attrs.update({"type": "search", "placeholder": 'e.g. "shape mismatch" gmm.py'})

    def clean_system(self):
        slug = self.cleaned_data["system"].strip()
        if slug and not _SLUG.match(slug):
            raise forms.ValidationError("must be a system slug: 12 hexadecimal characters, as in /systems/<slug>/")
        return slug

    def clean_function(self):
        text = self.cleaned_data["function"].strip()
        if not text:
            return None
        match = _FUNCTION.match(text)
        if not match:
            raise forms.ValidationError("must be <paper_id>:<func_id>, e.g. 2401.01234:3")
        return match["paper"], int(match["func"])

    def problems(self) -> list[str]:
        """Each error as one sentence naming its parameter."""
        return [
            f"{name}={self.data.get(name, '')!r}: {error}"
            for name, errors in self.errors.items() for error in errors
        ]

    @property
    def output(self) -> str:
        return self.cleaned_data.get("format") or "html"

    @property
    def page_number(self) -> int:
        return self.cleaned_data.get("page") or 1

    def filters(self) -> ExplorerFilters:
        """The request as filters (call after is_valid() returned True)."""
        data = self.cleaned_data
        return ExplorerFilters(
            suite=data.get("suite") or None,
            system=data.get("system") or None,
            paper=data.get("paper") or None,
            sample=data.get("sample") or None,
            function=data.get("function"),
            n=data.get("n"),
            status=data.get("status") or None,
            outcome=data.get("outcome") or None,
            exception=data.get("exception") or None,
            exit_status=data.get("exit_status") or None,
            verified=data.get("verified"),
            mismatch=data.get("mismatch"),
            near_miss=data.get("near_miss"),
            crashed_first=data.get("crashed_first"),
            recovered=data.get("recovered"),
            q=data.get("q") or "",
            sort=data.get("sort") or DEFAULT_SORT,
        )
