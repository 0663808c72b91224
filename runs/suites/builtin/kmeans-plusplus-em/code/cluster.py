"""Cluster the synthetic blobs with k-means (random or k-means++ seeding) or a diagonal Gaussian
mixture initialised from k-means, and report objective values and agreement with the true labels.

Examples:
    python3 cluster.py --algorithm kmeans --init kmeans++ --k 5 --seed 0
    python3 cluster.py --algorithm gmm --init kmeans++ --k 5 --em-iter 25 --seed 0

The last line printed is a JSON object with the results.
"""
import argparse
import json

import numpy as np

import config
from clustering.gmm import fit_gmm
from clustering.kmeans import inertia, kmeans_plusplus, lloyd, random_init
from data import make_blobs
from evaluation import normalized_mutual_information
from utils import one_hot

INITS = {"kmeans++": kmeans_plusplus, "random": random_init}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algorithm", choices=["kmeans", "gmm"], default="kmeans")
    parser.add_argument("--init", choices=sorted(INITS), default="kmeans++")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--max-iter", type=int, default=config.KMEANS["max_iter"], help="Lloyd iterations at most")
    parser.add_argument("--em-iter", type=int, default=config.GMM["n_iter"])
    parser.add_argument("--data-seed", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0, help="seed of the initialisation")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    X, y = make_blobs(rng=np.random.default_rng(args.data_seed), **config.DATA)
    seeds = INITS[args.init](X, args.k, np.random.default_rng(args.seed))
    centers, labels, n_iter = lloyd(X, seeds, args.max_iter)
    result = {"init_inertia": inertia(X, seeds), "inertia": inertia(X, centers), "n_iter": float(n_iter)}
    print(f"k-means: {n_iter} iterations, inertia {result['inertia']:.4f}")
    if args.algorithm == "kmeans":
        result["nmi"] = float(normalized_mutual_information(y, labels))
    else:
        (weights, _, _), responsibilities, history = fit_gmm(X, one_hot(labels, args.k), args.em_iter)
        print("EM log-likelihood per point:", " ".join(f"{value:.5f}" for value in history))
        result = {
            "kmeans_inertia": result["inertia"],
            "log_likelihood_init": history[0],
            "log_likelihood": history[-1],
            "max_weight": float(np.max(weights)),
            "nmi": float(normalized_mutual_information(y, responsibilities.argmax(axis=1))),
        }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
