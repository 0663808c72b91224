from django.urls import path

from leaderboard import benchmark_views, comparison_views, dataset_downloads, explorer_views, task_downloads, views

app_name = "leaderboard"
urlpatterns = [
    path("", views.home, name="home"),
    path("functions/", views.functions, name="functions"),
    path("explore/", explorer_views.explore, name="explore"),
    path("compare/", comparison_views.compare, name="compare"),
    path("systems/<slug:slug>/", views.system, name="system"),
    path("systems/<slug:slug>/dataset.zip", dataset_downloads.system_dataset, name="system_dataset"),
    path("benchmark/<slug:suite>/", benchmark_views.suite, name="benchmark_suite"),
    path("benchmark/<slug:suite>/dataset.zip", dataset_downloads.suite_dataset, name="suite_dataset"),
    path("benchmark/<slug:suite>/samples/", benchmark_views.samples, name="benchmark_samples"),
    path("benchmark/<slug:suite>/papers/<str:paper_id>/", benchmark_views.paper, name="benchmark_paper"),
    path("benchmark/<slug:suite>/papers/<str:paper_id>/functions/<int:func_id>/", benchmark_views.function,
         name="benchmark_function"),
    path("benchmark/<slug:suite>/papers/<str:paper_id>/experiments/<int:exp_id>/", benchmark_views.experiment,
         name="benchmark_experiment"),
    path("benchmark/<slug:suite>/tasks/n<int:n>-<str:context>.tar.gz", task_downloads.task_download, name="task_download"),
]
