"""Exposure disparity (D), relevance (R) and fairness (F) metrics at several levels of aggregation."""
import numpy as np


def aggregate_exposure(exposure, user_groups, item_groups):
    """Exposure of each item group for each user group (averaged over users, summed over items)."""
    user_onehot = np.eye(user_groups.max() + 1)[user_groups]
    item_onehot = np.eye(item_groups.max() + 1)[item_groups]
    user_weights = user_onehot / user_onehot.sum(axis=0)
    return user_weights.T @ exposure @ item_onehot


def exposure_metrics(system, target, random):
    """Fairness (F), disparity (D) and relevance (R) of a system exposure matrix."""
    delta_system = system - random
    delta_target = target - random
    fairness = np.mean((system - target) ** 2)
    disparity = np.mean(delta_system ** 2)
    relevance = np.mean(2.0 * delta_system * delta_target)
    return fairness, disparity, relevance
