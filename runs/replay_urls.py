"""Trajectory replay pages (owned by the replay views)."""
from django.urls import path

app_name = "replay"
urlpatterns: list = []
