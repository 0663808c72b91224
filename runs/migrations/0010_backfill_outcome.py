"""Backfill Attempt.outcome (added in 0009) for the attempts scored before it existed.

The outcome follows from the stored verdict fields by the same function every verdict write uses
(runs.analysis.outcomes.attempt_outcome, through runs.evaluation.verdicts.with_tolerance_ratio),
so old and new rows agree. That function reads only the values it is given and the outcome names
(plain strings), never the current schema; the fields it reads that later migrations added (the
held-out verdict, 0012) are not in this migration's Attempt and keep their defaults. Reversing leaves
the column to 0009 (which drops it).
"""
from django.db import migrations

from runs.analysis.outcomes import OUTCOME_FIELDS, attempt_outcome

BATCH = 500


def backfill(apps, schema_editor):
    Attempt = apps.get_model("runs", "Attempt")
    present = {field.name for field in Attempt._meta.get_fields()}
    fields = [name for name in OUTCOME_FIELDS if name in present]
    done = Attempt.objects.filter(status="done").only("id", "outcome", *fields).order_by("id")
    changed = []
    for attempt in done.iterator(chunk_size=BATCH):
        outcome = attempt_outcome(**{name: getattr(attempt, name) for name in fields})
        if outcome != attempt.outcome:
            attempt.outcome = outcome
            changed.append(attempt)
        if len(changed) >= BATCH:
            Attempt.objects.bulk_update(changed, ["outcome"])
            changed = []
    if changed:
        Attempt.objects.bulk_update(changed, ["outcome"])


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0009_failure_analysis"),
    ]

    operations = [
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=True),
    ]
