"""The final answer against gold: the reported and the re-executed verdicts side by side, one row
per gold number of each experiment, with what this viewer may not see withheld (the gold numbers,
a gold-bearing agent's values, the gold quoted by an error)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from runs.analysis.gold_text import NOTHING, GoldRedaction
from runs.replay.text import as_text

# In the score table, for a viewer who may not see the gold numbers.
WITHHELD = "withheld"


@dataclass
class ScoreCell:
    """One reported (or re-executed) number against its gold number."""

    predicted: str
    predicted_full: str
    relative_error: str
    passed: bool
    reason: str


@dataclass
class NumberRow:
    key: str
    gold: str
    gold_full: str
    reported: ScoreCell | None
    reexecuted: ScoreCell | None

    @property
    def mismatch(self) -> bool:
        """The reported number passes but the re-executed code does not print it."""
        return bool(self.reported and self.reported.passed and self.reexecuted is not None and not self.reexecuted.passed)


@dataclass
class ExperimentRows:
    label: str
    exp_id: Any
    tolerance: str
    reported_passed: bool | None
    reexecuted_passed: bool | None
    reported_error: str
    reexecuted_error: str
    rows: list[NumberRow]


def format_number(value: Any) -> tuple[str, str]:
    """(short, full) display of a score's number: floats to 6 significant digits, full repr in
    `full`; non-finite floats arrive as the strings "NaN"/"Infinity"."""
    if value is None:
        return "—", ""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return as_text(value), as_text(value)
    if isinstance(value, int):
        return str(value), str(value)
    if not math.isfinite(value):
        return repr(value), repr(value)
    return f"{value:.6g}", repr(value)


def format_relative_error(value: Any) -> str:
    if value is None:
        return "—"
    if value in ("Infinity", "-Infinity") or (isinstance(value, float) and math.isinf(value)):
        return "∞"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return as_text(value)
    if value == 0:
        return "0%"
    if value < 0.0001:
        return "<0.01%"
    return f"{value:.2%}"


def _score_cell(number: dict, *, values: bool, redaction: GoldRedaction) -> ScoreCell:
    predicted, full = format_number(number.get("predicted"))
    if number.get("predicted") is None and number.get("predicted_text"):
        predicted = full = as_text(number.get("predicted_text"))
    if not values:
        predicted, full = WITHHELD, ""
    elif redaction.text(full) != full:  # the gold number in full: what exact code prints
        full = ""
    passed = number.get("passed") is True
    return ScoreCell(
        predicted=predicted,
        predicted_full=full,
        relative_error=format_relative_error(number.get("relative_error")),
        passed=passed,
        reason=as_text(number.get("reason")) or ("ok" if passed else ""),
    )


def _experiments(score: Any) -> list[dict]:
    if not isinstance(score, dict):
        return []
    return [item for item in score.get("experiments") or [] if isinstance(item, dict)]


def score_table(
    reported: Any, reexecuted: Any, *, gold_numbers: bool = True, values: bool = True, redaction: GoldRedaction = NOTHING
) -> list[ExperimentRows]:
    """Both verdicts side by side: one row per gold number of each experiment. Without
    `gold_numbers` the gold column says WITHHELD (a viewer who may not see them: runs.visibility),
    without `values` the reported and printed values too (those of a gold-bearing agent are the gold
    numbers); `redaction` withholds the gold any error text quotes, and the full precision of a value
    that is a gold number in full (relative errors and verdicts always show)."""
    table: dict[str, ExperimentRows] = {}
    for side, score in (("reported", reported), ("reexecuted", reexecuted)):
        for experiment in _experiments(score):
            label = as_text(experiment.get("experiment_id"))
            rows = table.get(label)
            if rows is None:
                rtol, atol = experiment.get("rtol"), experiment.get("atol")
                tolerance = f"rtol {rtol:g}" if isinstance(rtol, (int, float)) else ""
                if isinstance(atol, (int, float)) and atol:
                    tolerance += f", atol {atol:g}"
                rows = table[label] = ExperimentRows(label, experiment.get("exp_id"), tolerance, None, None, "", "", [])
            setattr(rows, f"{side}_passed", experiment.get("passed") is True)
            setattr(rows, f"{side}_error", redaction.text(as_text(experiment.get("error"))))
            by_key = {row.key: row for row in rows.rows}
            for number in experiment.get("numbers") or []:
                if not isinstance(number, dict):
                    continue
                key = as_text(number.get("key"))
                row = by_key.get(key)
                if row is None:
                    gold, gold_full = format_number(number.get("gold")) if gold_numbers else (WITHHELD, "")
                    row = by_key[key] = NumberRow(key, gold, gold_full, None, None)
                    rows.rows.append(row)
                setattr(row, side, _score_cell(number, values=values, redaction=redaction))
    return list(table.values())
