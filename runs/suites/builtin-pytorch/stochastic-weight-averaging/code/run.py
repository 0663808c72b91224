"""Train the network on the breast cancer data with SGD, optionally averaging its weights (SWA), and report test metrics.

Example:
    python3 run.py --swa-start 20 --swa-lr 0.02 --seed 0

--swa-start 0 trains with plain SGD and a decaying learning rate. The last line printed is a JSON
object with the final training loss and the test metrics of the SGD network (and of the SWA network).
"""
import argparse
import json
import os

import numpy as np
import torch

import config
from averaging import update_bn
from data import load_splits
from metrics import evaluate
from model import Net
from trainer import fit


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=config.TRAINING["epochs"])
    parser.add_argument("--lr-init", type=float, default=config.TRAINING["lr_init"])
    parser.add_argument("--swa-start", type=int, default=config.SWA["start"], help="0 switches SWA off")
    parser.add_argument("--swa-lr", type=float, default=config.SWA["lr"])
    parser.add_argument("--batch-size", type=int, default=config.TRAINING["batch_size"])
    parser.add_argument("--n-train", type=int, default=config.DATA["n_train"])
    parser.add_argument("--no-bn-update", action="store_true", help="keep the SWA network's batch-norm statistics as copied")
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


def parameter_distance(first, second):
    """Euclidean distance between the parameter vectors of two networks of the same architecture."""
    with torch.no_grad():
        squares = sum(((a - b) ** 2).sum() for a, b in zip(first.parameters(), second.parameters()))
    return squares.sqrt().item()


def main(argv=None):
    args = parse_args(argv)
    make_deterministic(args.seed)
    device = pick_device(args.device)
    splits = load_splits(**dict(config.DATA, n_train=args.n_train), seed=args.seed)
    (train_x, train_y), (test_x, test_y) = [(x.to(device), y.to(device)) for x, y in splits]
    settings = dict(
        config.TRAINING, epochs=args.epochs, lr_init=args.lr_init, batch_size=args.batch_size,
        swa_start=args.swa_start, swa_lr=args.swa_lr,
    )

    # initialised on the CPU, so that a GPU run starts from the same weights
    model = Net(train_x.shape[1], config.MODEL["hidden"], config.DATA["n_classes"]).to(device)
    optimizer = torch.optim.SGD(
        model.parameters(), lr=settings["lr_init"], momentum=settings["momentum"], weight_decay=settings["weight_decay"]
    )
    # the example orders come from their own generator, apart from the initialisation
    rng = np.random.default_rng(args.seed)
    swa_model, n_averaged, train_loss = fit(model, optimizer, train_x, train_y, settings, rng)
    print(f"training loss of the last epoch: {train_loss:.6f}")
    sgd = evaluate(model, test_x, test_y)
    result = {"train_loss": train_loss, "sgd_nll": sgd["nll"], "sgd_accuracy": sgd["accuracy"]}
    if swa_model is not None:
        if not args.no_bn_update:
            # averaged weights need statistics of their own: the copied ones belong to the initial network
            update_bn(swa_model, train_x, config.SWA["bn_batch_size"])
        swa = evaluate(swa_model, test_x, test_y)
        result.update(
            swa_nll=swa["nll"], swa_accuracy=swa["accuracy"], n_averaged=float(n_averaged),
            distance=parameter_distance(swa_model, model),
        )
        if not args.no_bn_update:
            # the recomputed statistics themselves: the mean running variance over the hidden units
            result["swa_bn_variance"] = swa_model.norm.running_var.mean().item()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
