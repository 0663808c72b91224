"""RQ jobs of the leaderboard. Thin: the work is leaderboard.standings'."""
from leaderboard.standings import standings_refresh_queued


def standings_refresh_job() -> int:
    return standings_refresh_queued()
