from django.contrib import admin

from runs.models import Experiment, Function, Paper, Sample, Suite


@admin.register(Suite)
class SuiteAdmin(admin.ModelAdmin):
    list_display = ["name", "version", "source_format", "imported_at"]


@admin.register(Paper)
class PaperAdmin(admin.ModelAdmin):
    list_display = ["paper_id", "title", "suite"]
    list_filter = ["suite"]
    search_fields = ["paper_id", "title"]


@admin.register(Function)
class FunctionAdmin(admin.ModelAdmin):
    list_display = ["__str__", "line_hint"]
    list_filter = ["paper__suite"]
    search_fields = ["name", "file"]


@admin.register(Experiment)
class ExperimentAdmin(admin.ModelAdmin):
    list_display = ["__str__", "command", "gold_spread"]
    list_filter = ["paper__suite"]
    filter_horizontal = ["dependencies"]


@admin.register(Sample)
class SampleAdmin(admin.ModelAdmin):
    list_display = ["sample_id", "n", "paper"]
    list_filter = ["n", "paper__suite"]
    search_fields = ["sample_id"]
