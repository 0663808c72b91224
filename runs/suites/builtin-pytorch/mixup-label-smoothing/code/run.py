"""Train the MLP on the digits with label smoothing and/or mixup, and report test accuracy and calibration.

Example:
    python3 run.py --smoothing 0.1 --mixup-alpha 0.2 --seed 0

The last line printed is a JSON object with the final training loss and the test metrics.
"""
import argparse
import json
import os

import numpy as np
import torch

import config
from data import load_splits
from metrics import evaluate
from model import MLP
from trainer import train


def parse_args(argv=None):
    defaults = config.TRAINING
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoothing", type=float, default=defaults["smoothing"], help="label smoothing epsilon")
    parser.add_argument("--mixup-alpha", type=float, default=defaults["mixup_alpha"], help="0 switches mixup off")
    parser.add_argument("--n-train", type=int, default=config.DATA["n_train"])
    parser.add_argument("--epochs", type=int, default=defaults["epochs"])
    parser.add_argument("--lr", type=float, default=defaults["lr"], help="peak learning rate")
    parser.add_argument("--n-bins", type=int, default=config.EVALUATION["n_bins"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto", help='"cpu", "cuda" or "auto" (a GPU when there is one)')
    return parser.parse_args(argv)


def make_deterministic(seed):
    # one thread and deterministic kernels: the same seed prints the same numbers on every run
    torch.set_num_threads(1)
    # cuBLAS is deterministic only with a fixed workspace, which must be set before it starts
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    # double precision keeps runs on other CPUs (and GPUs) close to the published numbers
    torch.set_default_dtype(torch.float64)
    torch.manual_seed(seed)


def pick_device(name):
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def main(argv=None):
    args = parse_args(argv)
    make_deterministic(args.seed)
    device = pick_device(args.device)
    splits = load_splits(**dict(config.DATA, n_train=args.n_train), seed=args.seed)
    (train_x, train_y), (test_x, test_y) = [(x.to(device), y.to(device)) for x, y in splits]
    settings = dict(config.TRAINING, smoothing=args.smoothing, mixup_alpha=args.mixup_alpha, epochs=args.epochs, lr=args.lr)

    # initialised on the CPU, so that a GPU run starts from the same weights
    model = MLP(train_x.shape[1], config.MODEL["hidden"], config.DATA["n_classes"]).to(device)
    optimizer = torch.optim.SGD(
        model.parameters(), lr=settings["lr"], momentum=settings["momentum"], weight_decay=settings["weight_decay"]
    )
    # the training order and the mixup draws come from their own generator, apart from the initialisation
    rng = np.random.default_rng(args.seed)
    train_loss = train(model, optimizer, train_x, train_y, config.DATA["n_classes"], settings, rng)
    print(f"training loss of the last epoch: {train_loss:.6f}")
    result = {"train_loss": train_loss, **evaluate(model, test_x, test_y, args.n_bins)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
