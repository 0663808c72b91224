import pytest

from tests.leaderboard.factories import BoardData, build_board_data


@pytest.fixture
def board_data(db) -> BoardData:
    """The hand-built systems A, B and C described in tests/leaderboard/factories.py."""
    return build_board_data()
