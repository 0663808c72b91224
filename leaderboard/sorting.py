"""How the leaderboard's rows are sorted: the sort keys a URL may name (leaderboard.forms checks them),
what each key reads of a row, and the order with rows lacking a value last."""
from __future__ import annotations

from datetime import datetime

from leaderboard.metrics import SystemRow

# Sort keys: "<field>_n<n>" for a number at one n, "<field>" for a system total; "-" for descending.
SORT_FIELDS_BY_N = {
    "pass1": "pass1", "passk": "passk", "verifier": "verifier", "samples": "samples", "pass1_tol": "pass1_tol",
}
SORT_FIELDS = {
    "name": "name", "cost": "cost_mean", "seconds": "seconds_mean", "attempts": "attempts", "errors": "errors", "date": "date",
    "n50": "n50",
}


def parse_sort(sort: str) -> tuple[str, int | None, bool]:
    """("pass1", 1, True) for "-pass1_n1": field, n (None for totals), descending. Assumes a valid key."""
    descending = sort.startswith("-")
    key = sort.lstrip("-")
    name, _, n = key.partition("_n")
    return name, (int(n) if n else None), descending


def sort_value(row: SystemRow, key: str, n: int | None = None):
    """The value of `row` a sort key names (see SORT_FIELDS and SORT_FIELDS_BY_N); None when absent."""
    if n is None:
        return getattr(row, SORT_FIELDS[key])
    metrics = row.by_n.get(n)
    if metrics is None:
        return None
    if key == "verifier":
        # Sorting by verifier Pass@1 uses the best verifier a system has.
        return max(metrics.verifier.values()) if metrics.verifier else None
    return getattr(metrics, SORT_FIELDS_BY_N[key])


def sort_systems(rows: list[SystemRow], sort: str) -> list[SystemRow]:
    """Rows in the order `sort` asks; rows without a value always last, ties by name."""
    field_name, n, descending = parse_sort(sort)
    if field_name == "name":
        return sorted(rows, key=lambda row: (row.name.lower(), row.slug), reverse=descending)

    def value(row):
        result = sort_value(row, field_name, n)
        if isinstance(result, datetime):
            return result.timestamp()
        return result

    present = [row for row in rows if value(row) is not None]
    missing = [row for row in rows if value(row) is None]
    present.sort(key=lambda row: (row.name.lower(), row.slug))
    present.sort(key=value, reverse=descending)  # stable: ties stay in name order
    missing.sort(key=lambda row: (row.name.lower(), row.slug))
    return present + missing


def default_sort(n_values: list[int]) -> str:
    return f"-pass1_n{n_values[0]}" if n_values else "name"
