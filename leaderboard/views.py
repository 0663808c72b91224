from django.shortcuts import render

from leaderboard.selectors import suite_list_with_counts


def home(request):
    return render(request, "leaderboard/home.html", {"suites": suite_list_with_counts()})
