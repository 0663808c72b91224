"""What every importer shares: a report of what was done, and idempotent writes.

Importers never crash on a bad row: they skip or repair it and say so in the report, with the
place (file, line or row, field) and the reason, so a maintainer can fix the source data.
"""
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from django.db import models
from django.utils import timezone

from runs.benchmark.locating import FunctionLocation, HintStatus, LocationRule
from runs.models import Paper, Sample, Suite


class SuiteFormatError(Exception):
    """The suite cannot be imported at all (for example its manifest is missing or malformed)."""


@dataclass(frozen=True)
class ReportEntry:
    where: str
    reason: str

    def __str__(self):
        return f"{self.where}: {self.reason}"


@dataclass
class ImportReport:
    created: Counter = field(default_factory=Counter)
    updated: Counter = field(default_factory=Counter)
    unchanged: Counter = field(default_factory=Counter)
    deleted: Counter = field(default_factory=Counter)
    skipped: list[ReportEntry] = field(default_factory=list)
    repaired: list[ReportEntry] = field(default_factory=list)
    removed: list[ReportEntry] = field(default_factory=list)

    def skip(self, where: str, reason: str) -> None:
        self.skipped.append(ReportEntry(where, reason))

    def repair(self, where: str, reason: str) -> None:
        self.repaired.append(ReportEntry(where, reason))

    def delete(self, where: str, reason: str, *, kind: str, count: int = 1) -> None:
        """Record rows deleted because they are gone from the source (a change, like an update)."""
        self.deleted[kind] += count
        self.removed.append(ReportEntry(where, reason))

    def count(self, kind: str, outcome: str) -> None:
        getattr(self, outcome)[kind] += 1

    @property
    def changed_anything(self) -> bool:
        return bool(sum(self.created.values()) or sum(self.updated.values()) or sum(self.deleted.values()))

    def render(self) -> str:
        kinds = sorted(set(self.created) | set(self.updated) | set(self.unchanged))
        lines = ["Imported:"]
        for kind in kinds:
            lines.append(
                f"  {kind}: {self.created[kind]} created, {self.updated[kind]} updated, "
                f"{self.unchanged[kind]} unchanged"
            )
        for title, entries in (("Repaired", self.repaired), ("Skipped", self.skipped), ("Deleted", self.removed)):
            lines.append(f"{title} ({len(entries)}):")
            lines.extend(f"  - {entry}" for entry in entries)
        return "\n".join(lines)


def upsert(model: type[models.Model], *, lookup: dict, values: dict, report: ImportReport, kind: str):
    """Create or update one row by its natural key, touching the database only when something differs.

    Writing unchanged rows would be harmless but would make "importing twice changes nothing"
    untestable and would bump auto_now timestamps.
    """
    instance = model.objects.filter(**lookup).first()
    if instance is None:
        instance = model.objects.create(**lookup, **values)
        report.count(kind, "created")
        return instance
    changed = [name for name, value in values.items() if getattr(instance, name) != value]
    if changed:
        for name in changed:
            setattr(instance, name, values[name])
        instance.save(update_fields=changed)
        report.count(kind, "updated")
    else:
        report.count(kind, "unchanged")
    return instance


def upsert_tracked(model, *, lookup: dict, values: dict, report: ImportReport, kind: str):
    """`upsert`, also saying whether the row was created (relations of new rows are not "updates")."""
    before = report.created[kind]
    instance = upsert(model, lookup=lookup, values=values, report=report, kind=kind)
    return instance, report.created[kind] > before


def relation_sync(manager, wanted: list, *, created: bool, report: ImportReport, kind: str) -> None:
    """Make a many-to-many relation hold exactly `wanted`.

    A change counts as an update of an existing row (`created` False), so filling the
    dependencies of an existing experiment is not an invisible change.
    """
    current = set(manager.values_list("pk", flat=True))
    if current == {obj.pk for obj in wanted}:
        return
    manager.set(wanted)
    if not created:
        report.count(kind, "updated")


def delete_gone_functions(*, paper: Paper, keep: set[int], report: ImportReport, where: str) -> None:
    """Delete the paper's functions not in `keep`, and the samples that mask any of them.

    Deleting only the function would leave each such sample masking fewer functions than its id
    says. No run references samples yet; once runs exist, a sample with runs must make the import
    refuse instead of deleting history.
    """
    for function in paper.functions.exclude(func_id__in=keep):
        samples = list(Sample.objects.filter(functions=function).order_by("sample_id"))
        for sample in samples:
            sample.delete()
        if samples:
            names = ", ".join(sample.sample_id for sample in samples)
            report.delete(where, f"sample(s) {names}: they mask function {function.func_id}, which is gone",
                          kind="sample", count=len(samples))
        report.delete(where, f"function {function.func_id} ({function.file}:{function.name}) is no longer "
                      "in the source", kind="function")
        function.delete()


def delete_gone_experiments(*, paper: Paper, keep: set[int], report: ImportReport, where: str) -> None:
    """Delete the paper's experiments not in `keep` (samples derive their experiments, so none break)."""
    for experiment in paper.experiments.exclude(exp_id__in=keep):
        report.delete(where, f"experiment {experiment.exp_id} is no longer in the source", kind="experiment")
        experiment.delete()


def mark_suite_changed(suite: Suite, report: ImportReport) -> None:
    """Move `imported_at` when the import changed any row of the suite: the caches of what a suite
    holds (task downloads, datasets, gold texts) are keyed by it, and a re-import that only edits a
    function's description in place saves no field of the suite's own row."""
    if report.changed_anything:
        suite.imported_at = timezone.now()
        Suite.objects.filter(pk=suite.pk).update(imported_at=suite.imported_at)


def delete_gone_papers(*, suite: Suite, keep: set[str], report: ImportReport, where: str) -> None:
    """Delete the suite's papers not in `keep`, with everything that hangs off them."""
    for paper in suite.papers.exclude(paper_id__in=keep):
        counts = (paper.functions.count(), paper.experiments.count(), paper.samples.count())
        report.delete(where, f"paper {paper.paper_id} is no longer in the source (with its {counts[0]} "
                      f"function(s), {counts[1]} experiment(s) and {counts[2]} sample(s))", kind="paper")
        paper.delete()


def resolve_code_file(code_dir: Path, relative: str) -> tuple[Path | None, str | None]:
    """The file `relative` inside `code_dir`, or None and why not.

    Paths from metadata are untrusted: an absolute path or `..` could point the masker (and the
    workspace builder after it) at any file on the server.
    """
    pure = PurePosixPath(relative)
    if not relative or pure.is_absolute() or ".." in pure.parts or "\\" in relative:
        return None, f"{relative!r} is not a relative path inside the code directory"
    path = code_dir / pure
    try:
        inside = path.resolve().is_relative_to(code_dir.resolve())
    except (OSError, RuntimeError) as error:
        return None, f"{relative!r} cannot be resolved: {error}"
    if not inside:
        return None, f"{relative!r} leads outside the code directory (symbolic link?)"
    if not path.is_file():
        return None, f"{relative!r}: no such file in {code_dir}"
    return path, None


def hint_repair(location: FunctionLocation, hint: int, *, span: tuple[int, int] | None = None) -> str:
    """Why a line hint was replaced by the def line, naming the rule of `locate_function` that
    found the definition (`span` is the row's span, when one was given)."""
    if location.rule == LocationRule.CLASS_LINE:
        why = f"a class line: the method inside class {'.'.join(location.scope)}"
    elif location.rule == LocationRule.SPAN and span is not None:
        why = f"the def in the row's span {span[0]}-{span[1]}"
    elif location.rule == LocationRule.MAIN_DEFINITION:
        why = "matches no definition; the name means its getter or implementation"
    elif location.hint_status == HintStatus.STALE:
        why = "matches no definition"
    else:
        why = "is not the def line"  # a decorator line, or inside the function: it still found it
    return (f"stale line hint {hint} ({why}): {location.qualified_name} is defined at line "
            f"{location.def_line}; stored {location.def_line}")


def answer_format_of(value):
    """The answer an agent must give, derived from a result: numbers become 0.0, lists keep their length."""
    if isinstance(value, dict):
        return {key: answer_format_of(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [answer_format_of(item) for item in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        return 0.0
    return value


def reject_json_constant(name: str):
    """json.loads hook: NaN and Infinity are not JSON, and Postgres jsonb refuses them at write time."""
    raise ValueError(f"{name} is not allowed in JSON")
