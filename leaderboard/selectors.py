"""Read-side queries for the public pages."""
from django.db.models import Count

from runs.models import Experiment, Function, Paper, Sample, Suite


def suite_list_with_counts():
    """Suites with how many papers, functions, experiments and samples each holds.

    One grouped query per kind rather than one query joining all four, whose row count would be
    the product of the four.
    """
    suites = list(Suite.objects.order_by("name"))
    kinds = {
        "paper_count": (Paper, "suite_id"),
        "function_count": (Function, "paper__suite_id"),
        "experiment_count": (Experiment, "paper__suite_id"),
        "sample_count": (Sample, "paper__suite_id"),
    }
    for attribute, (model, suite_field) in kinds.items():
        grouped = model.objects.values(suite_field).annotate(count=Count("id"))
        counts = dict(grouped.values_list(suite_field, "count"))
        for suite in suites:
            setattr(suite, attribute, counts.get(suite.id, 0))
    return suites
