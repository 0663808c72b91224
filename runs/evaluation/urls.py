"""The evaluation queue: runs, their attempts, the run form and the cancel / retry / resume buttons."""
from django.urls import path

from runs.evaluation import views

app_name = "runs"
urlpatterns = [
    path("", views.queue, name="queue"),
    path("new/", views.run_start, name="start"),
    path("<int:pk>/", views.run_detail, name="run_detail"),
    path("<int:pk>/cancel/", views.run_cancel_view, name="cancel"),
    path("<int:pk>/retry-failed/", views.run_retry_failed_view, name="retry_failed"),
    path("<int:pk>/resume/", views.run_resume_view, name="resume"),
    path("<int:pk>/hide/", views.run_set_hidden_view, {"hidden": True}, name="hide"),
    path("<int:pk>/unhide/", views.run_set_hidden_view, {"hidden": False}, name="unhide"),
]
