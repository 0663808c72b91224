from django.apps import AppConfig


class LeaderboardConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "leaderboard"

    def ready(self) -> None:
        # The leaderboard keeps its numbers up to date from what runs announce (leaderboard.standings);
        # importing it here also preloads it in the workers that run its refresh jobs.
        from leaderboard.standings import connect

        connect()
