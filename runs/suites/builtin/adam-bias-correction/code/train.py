"""Train a linear or logistic regression model with a first-order optimiser and report its losses.

Example:
    python3 train.py --task linreg --optimizer adam --lr 0.01 --steps 300 --seed 0

The last line printed is a JSON object with the full-data losses at the checkpoints, the final
loss and the norm of the final weights (and, with --clip, the mean pre-clipping gradient norm).
"""
import argparse
import json

import numpy as np

import config
from data import make_classification, make_regression
from models import build_model
from optim import build_optimizer, clip_by_global_norm, warmup_cosine_lr


def parse_args(argv=None):
    train = config.TRAIN
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=["linreg", "logreg"], default="linreg")
    parser.add_argument("--optimizer", choices=sorted(config.OPTIMIZERS), default="adam")
    parser.add_argument("--lr", type=float, default=train["lr"])
    parser.add_argument("--steps", type=int, default=train["steps"])
    parser.add_argument("--batch-size", type=int, default=train["batch_size"])
    parser.add_argument("--schedule", choices=["constant", "warmup_cosine"], default=train["schedule"])
    parser.add_argument("--warmup-steps", type=int, default=train["warmup_steps"])
    parser.add_argument("--final-lr-ratio", type=float, default=train["final_lr_ratio"])
    parser.add_argument("--weight-decay", type=float, default=train["weight_decay"])
    parser.add_argument("--clip", type=float, default=train["clip"], help="max global gradient norm")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quiet", action="store_true")
    return parser.parse_args(argv)


def load_task(task, seed):
    data_rng = np.random.default_rng(seed)
    d = config.DATA
    if task == "linreg":
        X, y, _ = make_regression(d["n_samples"], d["dim"], d["condition_number"], d["noise_std"], d["intercept"], data_rng)
    else:
        X, y, _ = make_classification(d["n_samples"], d["dim"], d["condition_number"], d["logit_scale"], d["intercept"], data_rng)
    return X, y


def minibatches(n_samples, batch_size, rng):
    """Indices of successive minibatches; each epoch is a fresh permutation, the tail is dropped."""
    while True:
        order = rng.permutation(n_samples)
        for start in range(0, n_samples - batch_size + 1, batch_size):
            yield order[start:start + batch_size]


def learning_rate(args, step):
    if args.schedule == "constant":
        return args.lr
    return warmup_cosine_lr(step, args.steps, args.lr, args.warmup_steps, args.final_lr_ratio)


def train(args):
    X, y = load_task(args.task, args.seed)
    model = build_model(args.task, config.MODEL["logreg_l2"])
    optimizer = build_optimizer(args.optimizer, config.OPTIMIZERS[args.optimizer], args.weight_decay)
    batches = minibatches(X.shape[0], args.batch_size, np.random.default_rng(args.seed + 1))

    params = {"weight": np.full(X.shape[1], config.TRAIN["init_value"]), "bias": 0.0}
    result = {}
    grad_norms = []
    for step in range(args.steps):
        batch = next(batches)
        _, grads = model.loss_and_grad(params, X[batch], y[batch])
        if args.clip is not None:
            grads, norm = clip_by_global_norm(grads, args.clip)
            grad_norms.append(norm)
        params = optimizer.step(params, grads, learning_rate(args, step))
        done = step + 1
        if done in config.TRAIN["checkpoints"] or done == args.steps:
            loss, _ = model.loss_and_grad(params, X, y)
            key = "final_loss" if done == args.steps else f"loss_step_{done}"
            result[key] = float(loss)
            if not args.quiet:
                print(f"step {done:4d}  loss {loss:.6f}")
    result["weight_norm"] = float(np.linalg.norm(params["weight"]))
    result["bias"] = float(params["bias"])
    if args.clip is not None:
        result["mean_grad_norm"] = float(np.mean(grad_norms))
    return result


def main(argv=None):
    args = parse_args(argv)
    print(json.dumps(train(args)))


if __name__ == "__main__":
    main()
