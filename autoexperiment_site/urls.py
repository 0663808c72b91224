from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("django-rq/", include("django_rq.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("attempts/", include("runs.replay_urls")),
    path("runs/", include("runs.urls")),
    path("", include("runs.submissions.urls")),
    path("", include("leaderboard.urls")),
]
