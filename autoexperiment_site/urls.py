from django.contrib import admin
from django.urls import include, path

from autoexperiment_site import accounts, health, openapi
from autoexperiment_site.abuse import rate_limited

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("django-rq/", include("django_rq.urls")),
    path("accounts/signup/", rate_limited("signup")(accounts.signup), name="signup"),
    path("accounts/", include("autoexperiment_site.password_reset_urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("attempts/", include("runs.replay.urls")),
    path("runs/", include("runs.evaluation.urls")),
    path("api/v1/", openapi.reference, name="api_reference"),
    path("api/v1/openapi.json", openapi.openapi_json, name="api_openapi"),
    path("", include("runs.submissions.urls")),
    path("", include("leaderboard.urls")),
]

handler404 = "autoexperiment_site.errors.not_found"
