from django.contrib import admin

from leaderboard.models import VerifierSelection


@admin.register(VerifierSelection)
class VerifierSelectionAdmin(admin.ModelAdmin):
    """Read-only: selections are made by the select_with_verifier command, never by hand."""

    list_display = ["run", "sample", "verifier", "attempt", "candidates", "fallback", "cost", "created_at"]
    list_filter = ["verifier"]
    raw_id_fields = ["run", "sample", "attempt"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
