from django import forms
from django.contrib import admin
from django.contrib.admin import helpers
from django.template.response import TemplateResponse

from runs.evaluation.services import agent_config_problems, runs_set_hidden
from runs.models import (
    ApiToken,
    Attempt,
    Experiment,
    Function,
    HeldOutCheck,
    Paper,
    Run,
    Sample,
    Submission,
    Suite,
    Transplant,
)
from runs.submissions.forms import FlagForm
from runs.submissions.services import (
    submissions_flag,
    submissions_unflag,
    token_revoke,
)


@admin.register(Suite)
class SuiteAdmin(admin.ModelAdmin):
    list_display = ["name", "version", "source_format", "gold_public", "imported_at"]


@admin.register(Transplant)
class TransplantAdmin(admin.ModelAdmin):
    """Read-only: verdicts are the harness's (runs.evaluation.transplants), never typed in."""

    list_display = ["__str__", "function", "verdict", "sandbox_seconds", "finished_at"]
    list_filter = ["status", "verdict"]
    raw_id_fields = ["attempt", "function"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


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


class HeldOutCheckInline(admin.TabularInline):
    """The hidden variants, for staff: the admin is the one place that shows them."""

    model = HeldOutCheck
    extra = 0
    fields = ["variant_id", "command", "gold_result", "gold_spread", "gold_unstable"]


@admin.register(Experiment)
class ExperimentAdmin(admin.ModelAdmin):
    list_display = ["__str__", "command", "gold_spread"]
    list_filter = ["paper__suite"]
    filter_horizontal = ["dependencies"]
    inlines = [HeldOutCheckInline]


@admin.register(HeldOutCheck)
class HeldOutCheckAdmin(admin.ModelAdmin):
    list_display = ["__str__", "command", "gold_spread", "gold_unstable"]
    list_filter = ["experiment__paper__suite"]
    raw_id_fields = ["experiment"]


@admin.register(Sample)
class SampleAdmin(admin.ModelAdmin):
    list_display = ["sample_id", "n", "paper"]
    list_filter = ["n", "paper__suite"]
    search_fields = ["sample_id"]


# --- evaluation runs ---------------------------------------------------------------------------



class RunAdminForm(forms.ModelForm):
    """An edited agent_config is checked as the run form checks one: a setting the agent refuses
    would otherwise fail every attempt at the worker. Left as it was, it is not checked again (a
    submission's run holds no settings, an older run may hold what the run form now refuses)."""

    class Meta:
        model = Run
        fields = "__all__"

    def clean(self):
        data = super().clean()
        before = (self.instance.agent, self.instance.agent_config)
        edited = self.instance.pk is None or (data.get("agent"), data.get("agent_config")) != before
        if edited and not self.errors:
            for problem in agent_config_problems(agent=data["agent"], agent_config=data["agent_config"],
                                                 max_steps=data["max_steps"], max_seconds=data["max_seconds"],
                                                 max_cost=data["max_cost"]):
                self.add_error("agent_config", problem)
        return data


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    form = RunAdminForm
    list_display = ["id", "agent", "model", "suite", "n_values", "attempts_per_sample", "created_by", "created_at", "cancelled_at", "finished_at", "hidden"]
    list_filter = ["hidden", "agent", "suite", "context"]
    search_fields = ["agent", "model", "description"]
    # Hidden is set by the actions alone (runs_set_hidden): saved from the form, the change would
    # announce nothing, and the leaderboard's numbers would not follow it.
    readonly_fields = ["agent_config_version", "created_at", "cancelled_at", "finished_at", "hidden"]
    raw_id_fields = ["created_by"]
    actions = ["hide", "unhide"]

    @admin.action(description="Hide selected runs (and their submissions) from everyone but owners and staff")
    def hide(self, request, queryset):
        count = runs_set_hidden(runs=queryset, hidden=True)
        self.message_user(request, f"{count} run(s) hidden.")

    @admin.action(description="Unhide selected runs")
    def unhide(self, request, queryset):
        count = runs_set_hidden(runs=queryset, hidden=False)
        self.message_user(request, f"{count} run(s) visible again.")


@admin.register(Attempt)
class AttemptAdmin(admin.ModelAdmin):
    """Read-only: attempts change through the services (claims, fences), never by hand."""

    list_display = ["id", "run", "sample", "index", "status", "exit_status", "passed", "mismatch", "failure_label", "tries", "cost"]
    list_filter = ["status", "failure_label", "passed", "mismatch", "run__agent"]
    search_fields = ["sample__sample_id", "claimed_by", "job_id"]
    raw_id_fields = ["run", "sample"]

    def get_readonly_fields(self, request, obj=None):
        return [field.name for field in self.model._meta.fields]

    def has_add_permission(self, request):
        return False


# --- submissions -------------------------------------------------------------------------------




class VerifiedFilter(admin.SimpleListFilter):
    title = "verified"
    parameter_name = "verified"

    def lookups(self, request, model_admin):
        return [("yes", "Verified"), ("no", "Not verified")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(verified_at__isnull=False)
        if self.value() == "no":
            return queryset.filter(verified_at__isnull=True)
        return queryset


@admin.register(Submission)
class SubmissionAdmin(admin.ModelAdmin):
    """Staff moderate (hide, flag); verification comes only from re-execution, never from here."""

    list_display = ["id", "agent", "model", "run", "uploader", "created_at", "status", "is_verified", "is_hidden", "flagged"]
    list_filter = [("run__hidden", admin.BooleanFieldListFilter), "flagged", VerifiedFilter, "status", "channel", "run__suite"]
    search_fields = ["agent", "model", "description", "contact", "uploader__username", "file_sha256"]
    fields = [
        "run", "uploader", "token", "channel", "agent", "model", "description", "contact", "filename", "file_sha256",
        "file_bytes", "record_count", "created_at", "status", "status_detail", "reexecution_requested_at", "verified_at",
        "is_hidden", "flagged", "flag_reason",
    ]
    actions = ["hide", "unhide", "flag", "unflag"]

    def get_readonly_fields(self, request, obj=None):
        return [name for name in self.fields if name not in ("flagged", "flag_reason")]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False  # hide instead: deleting would leave the run behind, unhidden

    @admin.display(boolean=True, description="verified", ordering="verified_at")
    def is_verified(self, obj):
        return obj.verified_at is not None

    # Hiding is the run's (Run.hidden): set with the actions here or on the run.
    @admin.display(boolean=True, description="hidden", ordering="run__hidden")
    def is_hidden(self, obj):
        return obj.run.hidden

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("run")

    @admin.action(description="Hide selected submissions from public pages")
    def hide(self, request, queryset):
        count = runs_set_hidden(runs=Run.objects.filter(submission__in=queryset), hidden=True)
        self.message_user(request, f"{count} submission(s) hidden.")

    @admin.action(description="Unhide selected submissions")
    def unhide(self, request, queryset):
        count = runs_set_hidden(runs=Run.objects.filter(submission__in=queryset), hidden=False)
        self.message_user(request, f"{count} submission(s) visible again.")

    @admin.action(description="Flag selected submissions (asks for a reason)")
    def flag(self, request, queryset):
        form = FlagForm(request.POST if "apply" in request.POST else None)
        if form.is_bound and form.is_valid():
            count = submissions_flag(submissions=queryset, reason=form.cleaned_data["reason"])
            self.message_user(request, f"{count} submission(s) flagged.")
            return None
        return TemplateResponse(
            request,
            "submissions/admin_flag.html",
            {
                **self.admin_site.each_context(request),
                "title": "Flag submissions",
                "form": form,
                "queryset": queryset,
                "opts": self.model._meta,
                "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            },
        )

    @admin.action(description="Remove the flag from selected submissions")
    def unflag(self, request, queryset):
        count = submissions_unflag(submissions=queryset)
        self.message_user(request, f"{count} submission(s) unflagged.")


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["prefix", "name", "user", "created_at", "last_used_at", "revoked_at"]
    list_filter = [("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["prefix", "name", "user__username"]
    fields = ["user", "name", "prefix", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = fields
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request, queryset):
        for token in queryset.filter(revoked_at__isnull=True):
            token_revoke(token=token)
        self.message_user(request, "Tokens revoked.")
