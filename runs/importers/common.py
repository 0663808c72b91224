"""What every importer shares: a report of what was done, and idempotent writes.

Importers never crash on a bad row: they skip or repair it and say so in the report, with the
place (file, line or row, field) and the reason, so a maintainer can fix the source data.
"""
from collections import Counter
from dataclasses import dataclass, field

from django.db import models


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
    skipped: list[ReportEntry] = field(default_factory=list)
    repaired: list[ReportEntry] = field(default_factory=list)

    def skip(self, where: str, reason: str) -> None:
        self.skipped.append(ReportEntry(where, reason))

    def repair(self, where: str, reason: str) -> None:
        self.repaired.append(ReportEntry(where, reason))

    def count(self, kind: str, outcome: str) -> None:
        getattr(self, outcome)[kind] += 1

    @property
    def changed_anything(self) -> bool:
        return bool(sum(self.created.values()) or sum(self.updated.values()))

    def render(self) -> str:
        kinds = sorted(set(self.created) | set(self.updated) | set(self.unchanged))
        lines = ["Imported:"]
        for kind in kinds:
            lines.append(
                f"  {kind}: {self.created[kind]} created, {self.updated[kind]} updated, "
                f"{self.unchanged[kind]} unchanged"
            )
        for title, entries in (("Repaired", self.repaired), ("Skipped", self.skipped)):
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


def set_relation(manager, wanted: list, *, report: ImportReport, kind: str) -> None:
    """Make a many-to-many relation hold exactly `wanted`, reporting it as updated only if it changed."""
    current = set(manager.values_list("pk", flat=True))
    if current != {obj.pk for obj in wanted}:
        manager.set(wanted)
        if current:
            report.count(kind, "updated")
