"""Exposure disparity (D), relevance (R) and fairness (F) metrics at several levels of aggregation."""
import numpy as np


def aggregate_exposure(exposure, user_groups, item_groups):
    """Exposure of each item group for each user group (averaged over users, summed over items).

    Parameters
    ----------
    exposure : ndarray of shape (n_users, n_items), float
        Exposure of every (user, item) pair.
    user_groups : ndarray of shape (n_users,), int
        Group index of every user, 0..n_user_groups-1.
    item_groups : ndarray of shape (n_items,), int
        Group index of every item, 0..n_item_groups-1.

    Returns
    -------
    ndarray of shape (n_user_groups, n_item_groups), float
        Aggregated exposure.
    """
    if exposure.shape != (user_groups.size, item_groups.size):
        raise ValueError(f"exposure of shape {exposure.shape} for {user_groups.size} users and {item_groups.size} items")
    user_onehot = np.eye(user_groups.max() + 1)[user_groups]
    item_onehot = np.eye(item_groups.max() + 1)[item_groups]
    # users are averaged (a user group gets the exposure of its typical member, whatever its size);
    # items are summed (an item group gets the total exposure of its members)
    group_sizes = user_onehot.sum(axis=0)
    user_weights = user_onehot / group_sizes
    return user_weights.T @ exposure @ item_onehot


def exposure_metrics(system, target, random):
    """Fairness (F), disparity (D) and relevance (R) of a system exposure matrix.

    Parameters
    ----------
    system : ndarray of shape (n, m), float
        Expected exposure under the evaluated policy.
    target : ndarray of shape (n, m), float
        Expected exposure under the ideal policy.
    random : ndarray of shape (n, m), float
        Expected exposure under the uniformly random policy, the reference point of D and R.

    Returns
    -------
    fairness, disparity, relevance : float
        Means over all entries; ``F = D - R + mean((target - random) ** 2)``.
    """
    if system.shape != target.shape or system.shape != random.shape:
        raise ValueError(f"exposure matrices of shapes {system.shape}, {target.shape} and {random.shape}")
    delta_system = system - random
    delta_target = target - random
    fairness = np.mean((system - target) ** 2)
    # disparity: how unequally the system distributes exposure, whatever the relevance
    disparity = np.mean(delta_system ** 2)
    # relevance: how well the system's deviations from random agree with the ideal policy's
    relevance = np.mean(2.0 * delta_system * delta_target)
    return fairness, disparity, relevance
