"""Submission pages under /submissions/ and the token API under /api/v1/submissions/ (and, deprecated,
the same views at /api/submissions/: runs.submissions.api)."""
from django.urls import path

from runs.submissions import api, views

app_name = "submissions"
urlpatterns = [
    path("submissions/", views.mine, name="mine"),
    path("submissions/upload/", views.upload, name="upload"),
    path("submissions/tokens/", views.tokens, name="tokens"),
    path("submissions/tokens/<int:pk>/revoke/", views.token_revoke_view, name="token_revoke"),
    path("submissions/<int:pk>/", views.detail, name="detail"),
    path("submissions/<int:pk>/reexecute/", views.reexecute, name="reexecute"),
    path("submissions/<int:pk>/hide/", views.set_hidden, {"hidden": True}, name="hide"),
    path("submissions/<int:pk>/unhide/", views.set_hidden, {"hidden": False}, name="unhide"),
    path("api/v1/submissions/", api.submissions, {"version": "v1"}, name="api_v1_create"),
    path("api/v1/submissions/<int:pk>/", api.submission_detail, {"version": "v1"}, name="api_v1_detail"),
    path("api/submissions/", api.submissions, name="api_create"),
    path("api/submissions/<int:pk>/", api.submission_detail, name="api_detail"),
]
