"""Evaluate the exposure fairness of a stochastic ranking policy on the synthetic collection.

Example:
    python3 evaluate.py --ranker oracle --temperature 0.5 --patience 0.8 --n-samples 200 --seed 0

Prints the F, D and R metrics for each level of aggregation (II: individual users and items,
IG: individual users and item groups, GG: user groups and item groups, AI: all users and individual
items), then one JSON object with all of them on the last line.
"""
import argparse
import json

import numpy as np

import config
from data import make_collection
from metrics.exposure import expected_exposure, position_weights, random_exposure, target_exposure
from metrics.fairness import aggregate_exposure, exposure_metrics
from ranking.plackett_luce import sample_rankings
from ranking.rankers import build_scores

LEVELS = {"ii": ["II"], "all": ["II", "IG", "GG", "AI"]}


def parse_args(argv=None):
    ev = config.EVALUATION
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranker", choices=["oracle", "noisy", "popularity", "ideal"], default="oracle",
                        help="'ideal' evaluates the target policy itself instead of sampled rankings")
    parser.add_argument("--temperature", type=float, default=ev["temperature"])
    parser.add_argument("--browsing-model", choices=["rbp", "dcg"], default=ev["browsing_model"])
    parser.add_argument("--patience", type=float, default=ev["patience"], help="patience of the rbp model")
    parser.add_argument("--n-samples", type=int, default=ev["n_samples"])
    parser.add_argument("--noise-std", type=float, default=ev["noise_std"])
    parser.add_argument("--levels", choices=sorted(LEVELS), default=ev["levels"])
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def level_groups(level, user_groups, item_groups):
    """The (user, item) grouping that defines each level of aggregation."""
    n_users, n_items = user_groups.size, item_groups.size
    individual_users, individual_items = np.arange(n_users), np.arange(n_items)
    return {
        "IG": (individual_users, item_groups),
        "GG": (user_groups, item_groups),
        "AI": (np.zeros(n_users, dtype=int), individual_items),
    }[level]


def evaluate(args):
    collection_rng = np.random.default_rng(args.seed)
    grades, user_groups, item_groups = make_collection(rng=collection_rng, **config.COLLECTION)
    weights = position_weights(grades.shape[1], args.browsing_model, args.patience)
    target = target_exposure(grades, weights)
    random = random_exposure(grades.shape, weights)
    if args.ranker == "ideal":
        system = target
    else:
        policy_rng = np.random.default_rng(args.seed + 1)
        scores = build_scores(args.ranker, grades, args.noise_std, policy_rng)
        rankings = sample_rankings(scores, args.n_samples, args.temperature, policy_rng)
        system = expected_exposure(rankings, weights)

    result = {}
    for level in LEVELS[args.levels]:
        if level == "II":
            values = exposure_metrics(system, target, random)
        else:
            users, items = level_groups(level, user_groups, item_groups)
            values = exposure_metrics(*(aggregate_exposure(e, users, items) for e in (system, target, random)))
        for name, value in zip("FDR", values):
            result[f"{level}-{name}"] = float(value)
        print(f"{level}: F={values[0]:.6g} D={values[1]:.6g} R={values[2]:.6g}")
    if args.ranker == "ideal":
        # the target policy is perfectly fair by definition; its F metrics are identically zero
        result = {key: value for key, value in result.items() if not key.endswith("-F")}
    return result


def main(argv=None):
    print(json.dumps(evaluate(parse_args(argv))))


if __name__ == "__main__":
    main()
