"""Train a softmax classifier, calibrate it post hoc and report calibration metrics on the test split.

Example:
    python3 calibrate.py --method temperature --n-bins 15 --seed 0

Methods: "none" (the raw softmax), "temperature" (temperature scaling fitted on the validation
split) and "histogram" (histogram binning of the top-label confidence fitted on the validation
split). The last line printed is a JSON object with the metrics.
"""
import argparse
import json

import numpy as np

import config
from calibration.histogram import HistogramBinning
from calibration.temperature import TemperatureScaler
from data import make_splits
from metrics import adaptive_calibration_error, brier_score, calibration_errors
from model import SoftmaxRegression
from utils import negative_log_likelihood, softmax, top_label


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", choices=["none", "temperature", "histogram"], default="temperature")
    parser.add_argument("--n-bins", type=int, default=config.CALIBRATION["n_bins"])
    parser.add_argument("--n-train", type=int, default=config.DATA["n_train"])
    parser.add_argument("--train-steps", type=int, default=config.MODEL["steps"])
    parser.add_argument("--l2", type=float, default=config.MODEL["l2"], help="L2 penalty on the weights")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    data_settings = dict(config.DATA, n_train=args.n_train)
    (X_train, y_train), (X_val, y_val), (X_test, y_test) = make_splits(
        rng=np.random.default_rng(args.seed), **data_settings)

    model = SoftmaxRegression(X_train.shape[1], data_settings["n_classes"], args.l2)
    train_loss = model.fit(X_train, y_train, config.MODEL["lr"], args.train_steps)
    print(f"train loss after {args.train_steps} steps: {train_loss:.6f}")
    val_logits, test_logits = model.logits(X_val), model.logits(X_test)

    result = {}
    if args.method == "none":
        probs = softmax(test_logits)
        confidences, correct = top_label(probs, y_test)
        result["train_loss"] = float(train_loss)
        result["accuracy"] = float(np.mean(correct))
        result["nll"] = negative_log_likelihood(test_logits, y_test)
        result["brier"] = float(brier_score(probs, y_test))
    elif args.method == "temperature":
        scaler = TemperatureScaler(config.CALIBRATION["temperature_lr"], config.CALIBRATION["temperature_steps"])
        scaler.fit(val_logits, y_val)
        scaled = scaler.transform(test_logits)
        probs = softmax(scaled)
        confidences, correct = top_label(probs, y_test)
        result["temperature"] = scaler.temperature
        result["nll"] = negative_log_likelihood(scaled, y_test)
        result["brier"] = float(brier_score(probs, y_test))
    else:
        val_confidences, val_correct = top_label(softmax(val_logits), y_val)
        binning = HistogramBinning(args.n_bins, config.CALIBRATION["prior_strength"])
        binning.fit(val_confidences, val_correct)
        # in-sample calibration error: what is left of it is due to the prior alone
        result["val_ece"] = float(calibration_errors(binning.predict(val_confidences), val_correct, args.n_bins)[0])
        raw_confidences, correct = top_label(softmax(test_logits), y_test)
        confidences = binning.predict(raw_confidences)
    ece, mce = calibration_errors(confidences, correct, args.n_bins)
    result["ece"] = float(ece)
    result["mce"] = float(mce)
    result["adaptive_ece"] = float(adaptive_calibration_error(confidences, correct, args.n_bins))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
