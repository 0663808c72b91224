"""Settings of the synthetic collection and of the evaluation (all quoted in the paper)."""

COLLECTION = {
    "n_users": 40,
    "n_items": 50,
    "n_user_groups": 2,
    "n_item_groups": 3,
    "n_factors": 4,
    # relevance grade = number of these thresholds the user-item affinity exceeds (0..3)
    "grade_thresholds": (0.3, 0.9, 1.5),
    # additive affinity bonus of each item group: the groups differ in how relevant they are
    "item_group_bias": (0.4, 0.0, -0.4),
}

EVALUATION = {
    "n_samples": 2000,
    "temperature": 1.0,
    "browsing_model": "rbp",
    "patience": 0.8,
    # standard deviation of the Gaussian noise added to the grades by the "noisy" ranker
    "noise_std": 1.0,
    "levels": "all",
}
