"""Trajectory replay pages: one attempt, and two attempts at the same sample side by side; an
attempt's whole patch and the original file of its converted trajectory as downloads."""
from django.urls import path

from runs.replay import views as replay_views

app_name = "replay"
urlpatterns = [
    path("compare/", replay_views.attempt_compare, name="compare"),
    path("<int:pk>/", replay_views.attempt_detail, name="attempt"),
    path("<int:pk>/patch/", replay_views.attempt_patch, name="patch"),
    path("<int:pk>/steps/", replay_views.attempt_steps, name="steps"),
    path("<int:pk>/search/", replay_views.attempt_search, name="search"),
    path("<int:pk>/live/", replay_views.attempt_live, name="live"),
    path("<int:pk>/source/", replay_views.attempt_source, name="source"),
]
