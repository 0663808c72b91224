"""Two attempts at the same sample side by side: their pages of steps aligned by position, one page
at a time, each side under the same gold rule as its own replay (runs.replay.presenters)."""
from __future__ import annotations

from dataclasses import dataclass

from runs.limits import replay_bounds
from runs.models import Attempt
from runs.replay.presenters import AttemptReplay, Pager, replay_page
from runs.replay.steps import StepView
from runs.visibility import GoldAccess


class ComparisonError(ValueError):
    """Two attempts that cannot be compared (different samples)."""


@dataclass
class StepPair:
    number: int
    left: StepView | None
    right: StepView | None

    @property
    def is_error(self) -> bool:
        return bool((self.left and self.left.is_error) or (self.right and self.right.is_error))


@dataclass
class Comparison:
    left: AttemptReplay
    right: AttemptReplay
    pairs: list[StepPair]  # this page's
    pager: Pager

    @property
    def first_error(self) -> int | None:
        return self.pager.errors[0] if self.pager.errors else None


def attempts_compare(*, left: Attempt, right: Attempt, access: GoldAccess, page: int = 1) -> Comparison:
    """Two attempts at the same sample, steps aligned by position, one page of them. Raises
    ComparisonError when the samples differ (their steps and scores would not be about the same
    task) and ReplayPageError for a page neither trajectory reaches."""
    if left.sample_id != right.sample_id:
        raise ComparisonError(
            f"attempt {left.pk} is at sample {left.sample.sample_id} and attempt {right.pk} at sample "
            f"{right.sample.sample_id}: only attempts at the same sample can be compared"
        )
    prefix = f"?a={left.pk}&b={right.pk}&page="
    # Half an attempt page's steps from each side: a comparison costs what one attempt's page does.
    per_page = max(1, replay_bounds().steps_per_page // 2)
    a = replay_page(attempt=left, access=access, page=page, prefix=prefix, per_page=per_page)
    b = replay_page(attempt=right, access=access, page=page, prefix=prefix, per_page=per_page)
    pager = Pager(page=page, per_page=a.pager.per_page, total=max(a.step_count, b.step_count), prefix=prefix,
                  errors=sorted(set(a.pager.errors) | set(b.pager.errors)))
    pager.check()
    left_steps = {step.number: step for step in a.steps}
    right_steps = {step.number: step for step in b.steps}
    pairs = [StepPair(number, left_steps.get(number), right_steps.get(number)) for number in pager.steps]
    return Comparison(a, b, pairs, pager)
