import pytest
from django.test import Client

from tests.leaderboard.factories import BoardData, build_board_data


@pytest.fixture
def board_data(db) -> BoardData:
    """The hand-built systems A, B and C described in tests/leaderboard/factories.py."""
    return build_board_data()


class UnverifiedViewClient(Client):
    """A test client whose GET requests ask for the view that counts uploads not re-executed too
    (`?unverified=1`) unless they say which view they want: for the tests written about the numbers
    over every counted attempt (their data holds unverified uploads on purpose, system B). The
    default view, re-executed attempts only, is tests/leaderboard/test_unverified_uploads.py's."""

    def get(self, path, data=None, **extra):
        if "unverified=" not in path and not (data and "unverified" in data):
            if data:
                data = {"unverified": "1", **data}
            elif "?" in path:
                path = f"{path}&unverified=1"
            else:
                data = {"unverified": "1"}
        return super().get(path, data, **extra)


@pytest.fixture
def unverified_view_client() -> UnverifiedViewClient:
    return UnverifiedViewClient()
