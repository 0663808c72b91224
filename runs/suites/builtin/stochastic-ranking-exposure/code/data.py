"""A synthetic recommendation collection with graded relevance and user and item groups."""
import numpy as np


def balanced_groups(n, n_groups, rng):
    """A random assignment of n members to n_groups groups whose sizes differ by at most one."""
    return rng.permutation(np.arange(n) % n_groups)


def make_collection(n_users, n_items, n_user_groups, n_item_groups, n_factors, grade_thresholds,
                    item_group_bias, rng):
    user_groups = balanced_groups(n_users, n_user_groups, rng)
    item_groups = balanced_groups(n_items, n_item_groups, rng)
    user_factors = rng.standard_normal((n_users, n_factors))
    item_factors = rng.standard_normal((n_items, n_factors))
    affinity = user_factors @ item_factors.T / np.sqrt(n_factors)
    affinity = affinity + np.asarray(item_group_bias)[item_groups][None, :]
    grades = np.zeros((n_users, n_items), dtype=int)
    for threshold in grade_thresholds:
        grades += (affinity > threshold).astype(int)
    return grades, user_groups, item_groups
