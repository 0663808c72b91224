"""The leaderboard's filters and sort order, read from the URL's query string."""
import re

from django import forms

from leaderboard.rules import TOLERANCES, LeaderboardFilters, tolerance_label
from leaderboard.sorting import SORT_FIELDS, SORT_FIELDS_BY_N, parse_sort
from runs.benchmark.scoring import DEFAULT_RTOL
from runs.models import Run

MAX_N = 50
_SORT = re.compile(
    rf"^-?(?:(?:{'|'.join(SORT_FIELDS_BY_N)})_n(?P<n>[1-9][0-9]{{0,2}})|(?:{'|'.join(SORT_FIELDS)}))$"
)
SORT_HELP = (
    "sort is a column key, with '-' in front for descending: "
    f"{', '.join(f'{name}_n<n>' for name in SORT_FIELDS_BY_N)} (e.g. -pass1_n1), or {', '.join(SORT_FIELDS)}"
)


TOLERANCE_HELP = (
    "tolerance is a relative tolerance as a fraction, one of "
    f"{', '.join(f'{t:g} ({tolerance_label(t)})' for t in TOLERANCES)}"
)


_FLAG_VALUES = {"1": True, "true": True, "on": True, "yes": True, "0": False, "false": False, "off": False, "no": False, "": False}


def _is_on(value) -> bool:
    return value is True or _FLAG_VALUES.get(str(value).strip().lower(), False)


class _FlagInput(forms.CheckboxInput):
    """A checkbox sending <name>=1, whose raw value reaches the field so "unverified=banana" can be refused."""

    def __init__(self, attrs=None):
        super().__init__(attrs, check_test=_is_on)

    def value_from_datadict(self, data, files, name):
        return data.get(name)

    def format_value(self, value):
        return "1"


class FlagField(forms.Field):
    """1/0 (also true/false, on/off, yes/no); absent means off. Anything else is an error."""

    widget = _FlagInput
    _VALUES = _FLAG_VALUES

    def to_python(self, value):
        if value is None or isinstance(value, bool):
            return bool(value)
        try:
            return self._VALUES[str(value).strip().lower()]
        except KeyError:
            raise forms.ValidationError(f"must be 1 or 0, not {value!r}", code="invalid") from None


class LeaderboardFilterForm(forms.Form):
    """Bound to request.GET. Invalid fields are reported and left out; valid ones still apply."""

    suite = forms.ChoiceField(required=False)
    agent = forms.ChoiceField(required=False, label="Agent")
    context = forms.ChoiceField(required=False, choices=[("", "Any context")] + Run.Context.choices)
    # Off by default: the leaderboard counts re-executed attempts alone; on, uploads' reported
    # numbers (not re-executed) count too, and their systems are marked unverified.
    unverified = FlagField(required=False, label="Include unverified uploads (reported numbers, not re-executed)")
    n_min = forms.IntegerField(required=False, min_value=1, max_value=MAX_N, label="n from")
    n_max = forms.IntegerField(required=False, min_value=1, max_value=MAX_N, label="to")
    sort = forms.CharField(required=False, max_length=40, widget=forms.HiddenInput)
    tolerance = forms.CharField(
        required=False, label="Pass@1 also at",
        widget=forms.Select(choices=[("", "the rule only")] + [
            (f"{t:g}", f"{tolerance_label(t)} tolerance" + (" (the rule)" if t == DEFAULT_RTOL else "")) for t in TOLERANCES
        ]),
    )

    def __init__(self, *args, suites: list[str], agents: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["suite"].choices = [("", "All suites")] + [(name, name) for name in suites]
        self.fields["agent"].choices = [("", "All agents")] + [(name, name) for name in agents]
        for name in ("n_min", "n_max"):
            self.fields[name].widget.attrs.update({"min": 1, "max": MAX_N, "class": "narrow"})

    def clean_sort(self):
        sort = self.cleaned_data["sort"].strip()
        if sort and not _SORT.match(sort):
            raise forms.ValidationError(f"{sort!r} is not a sort key; {SORT_HELP}", code="invalid")
        return sort

    def clean_tolerance(self) -> float | None:
        text = self.cleaned_data["tolerance"].strip()
        if not text:
            return None
        try:
            value = float(text)
        except ValueError:
            value = None
        # The value itself, not one a rounding away: it keys the Pass@1 it selects.
        for tolerance in TOLERANCES:
            if value is not None and abs(value - tolerance) <= 1e-12:
                return tolerance
        raise forms.ValidationError(f"not a tolerance of the sensitivity table; {TOLERANCE_HELP}", code="invalid")

    def clean(self):
        cleaned = super().clean()
        sort = cleaned.get("sort")
        if sort and parse_sort(sort)[0] == "pass1_tol" and cleaned.get("tolerance") is None:
            # No tolerance chosen (say, "the rule only" picked while sorted by that column): Pass@1
            # at the rule is Pass@1, so sort by it rather than by a column no longer shown.
            cleaned["sort"] = sort.replace("pass1_tol_n", "pass1_n")
        low, high = cleaned.get("n_min"), cleaned.get("n_max")
        if low is not None and high is not None and low > high:
            # Both are dropped: neither alone says what was meant.
            cleaned.pop("n_min"), cleaned.pop("n_max")
            raise forms.ValidationError(f"the n range is empty: n from {low} is more than n to {high}", code="empty_range")
        return cleaned

    def problems(self) -> list[str]:
        """Each error as one sentence naming its parameter."""
        messages = []
        for name, errors in self.errors.items():
            where = "" if name == "__all__" else f"{name}={self.data.get(name, '')!r}: "
            messages.extend(f"{where}{error}" for error in errors)
        return messages

    def filters(self) -> LeaderboardFilters:
        """The valid part of the request as filters (call after is_valid())."""
        data = getattr(self, "cleaned_data", {})
        return LeaderboardFilters(
            suite=data.get("suite") or None,
            agent=data.get("agent") or None,
            context=data.get("context") or None,
            verified_only=not data.get("unverified"),
            n_min=data.get("n_min"),
            n_max=data.get("n_max"),
            sort=data.get("sort") or "",
            tolerance=data.get("tolerance"),
        )
