"""Submission pages under /submissions/ and the token API under /api/submissions/."""
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
    path("api/submissions/", api.submissions, name="api_create"),
    path("api/submissions/<int:pk>/", api.submission_detail, name="api_detail"),
]
