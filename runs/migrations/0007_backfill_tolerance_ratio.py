"""Backfill Attempt.tolerance_ratio (added in 0006) from the verdicts already stored.

The ratio follows from reported_score / reexecution_score and the verdict fields by the same pure
function the harness, re-execution and upload scoring use when they write a verdict, so old and new
rows agree. runs.benchmark has no models, so importing it here does not tie this migration to the
current schema. Reversing leaves the column to 0006 (which drops it).
"""
from django.db import migrations

from runs.benchmark.tolerance_ratios import attempt_tolerance_ratio

BATCH = 500
_FIELDS = ("reported_score", "reported_passed", "reexecution_score", "reexecution_passed", "passed")


def backfill(apps, schema_editor):
    Attempt = apps.get_model("runs", "Attempt")
    scored = Attempt.objects.filter(status="done", reported_score__isnull=False).only("id", *_FIELDS).order_by("id")
    changed = []
    for attempt in scored.iterator(chunk_size=BATCH):
        attempt.tolerance_ratio = attempt_tolerance_ratio(
            done=True, **{name: getattr(attempt, name) for name in _FIELDS}
        )
        if attempt.tolerance_ratio is not None:
            changed.append(attempt)
        if len(changed) >= BATCH:
            Attempt.objects.bulk_update(changed, ["tolerance_ratio"])
            changed = []
    if changed:
        Attempt.objects.bulk_update(changed, ["tolerance_ratio"])


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0006_gold_stability_tolerance_ratio"),
    ]

    operations = [
        migrations.RunPython(backfill, migrations.RunPython.noop, elidable=True),
    ]
