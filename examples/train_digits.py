#!/usr/bin/python3
"""Train a small neural network on scikit-learn's bundled digits dataset, one epoch at a time.

A small but real training job to submit through the portal (or with sbatch). It runs on the CPU with
Debian's system Python (packages python3-sklearn and python3-numpy; the data ships inside scikit-learn,
nothing is downloaded) and takes one to two minutes on two idle cores with the defaults (longer on a busy node).

After every epoch it writes a checkpoint atomically (temporary file + os.replace) holding the model,
the epoch number and the metrics so far, and prints one line of metrics. Started again with the same
--checkpoint, it resumes from the epoch after the saved one, so a job that is preempted, requeued or
killed at its time limit loses at most one epoch.

    python3 train_digits.py                       # defaults: 25 epochs, ./checkpoint.pkl
    python3 train_digits.py --epochs 5 --checkpoint /tmp/ck.pkl --seed 1

Output, one line per epoch, then the final score:

    epoch 3/25 loss=0.1152 train_acc=0.979 val_acc=0.967 elapsed=6.9s
    final val_acc=0.981
"""

import argparse
import os
import pickle
import signal
import sys
import tempfile
import time
import warnings

import numpy as np
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Train an MLP on the digits dataset, with per-epoch checkpoints.")
    p.add_argument(
        "--epochs", type=int, default=25, help="total number of epochs (default: 25, one to two minutes on 2 idle cores)"
    )
    p.add_argument(
        "--checkpoint",
        default="checkpoint.pkl",
        help="checkpoint file, read on start if present and rewritten after every epoch "
        "(default: checkpoint.pkl in the current directory)",
    )
    p.add_argument("--seed", type=int, default=0, help="random seed for the data split and the model (default: 0)")
    p.add_argument("--hidden", default="1024,512", help="hidden layer sizes, comma separated (default: 1024,512)")
    p.add_argument("--batch-size", type=int, default=32, help="minibatch size (default: 32)")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate (default: 0.001)")
    args = p.parse_args(argv)
    if args.epochs < 1:
        p.error("--epochs must be at least 1")
    return args


def shift(images, dy, dx):
    """Shift 8x8 images by (dy, dx) pixels, filling with zeros (a simple data augmentation)."""
    out = np.zeros_like(images)
    src = images[:, max(0, -dy) : 8 - max(0, dy), max(0, -dx) : 8 - max(0, dx)]
    out[:, max(0, dy) : 8 - max(0, -dy), max(0, dx) : 8 - max(0, -dx)] = src
    return out


def load_data(seed):
    """The digits dataset split 80/20 (stratified, fixed by the seed); the training part is augmented with
    one-pixel shifts in four directions (5x the samples). Pixel values are scaled to [0, 1]."""
    digits = load_digits()
    x = digits.images.astype(np.float64) / 16.0
    y = digits.target
    x_train, x_val, y_train, y_val = train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y)
    shifted = [x_train] + [shift(x_train, dy, dx) for dy, dx in ((1, 0), (-1, 0), (0, 1), (0, -1))]
    x_train = np.concatenate(shifted).reshape(-1, 64)
    y_train = np.tile(y_train, len(shifted))
    return x_train, y_train, x_val.reshape(-1, 64), y_val, np.unique(y)


def save_checkpoint(path, state):
    """Write state to path atomically: a temporary file in the same directory, fsync, then os.replace."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".ckpt-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            pickle.dump(state, f, protocol=pickle.HIGHEST_PROTOCOL)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def load_checkpoint(path):
    # Only load checkpoints you wrote yourself: unpickling runs code from the file.
    with open(path, "rb") as f:
        return pickle.load(f)


def _terminate(signum, frame):
    # Slurm sends SIGTERM at the time limit, on scancel and on preemption (then SIGKILL after KillWait).
    # Raising SystemExit unwinds normally, so a half-written temporary checkpoint is removed; the last
    # complete checkpoint stays in place for the next run.
    print(f"stopped by signal {signum}; the checkpoint holds the last finished epoch", file=sys.stderr, flush=True)
    raise SystemExit(128 + signum)


def main(argv=None):
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    hidden = tuple(int(n) for n in args.hidden.split(",") if n.strip())
    x_train, y_train, x_val, y_val, classes = load_data(args.seed)

    start_epoch = 1
    history = []
    model = None
    if os.path.exists(args.checkpoint):
        state = load_checkpoint(args.checkpoint)
        if state.get("seed") != args.seed:
            print(
                f"warning: checkpoint was made with --seed {state.get('seed')}, not {args.seed}; "
                f"continuing with the checkpoint's model",
                file=sys.stderr,
                flush=True,
            )
        model = state["model"]
        history = state["history"]
        start_epoch = state["epoch"] + 1
        print(f"resuming from epoch {state['epoch']}", flush=True)
    if model is None:
        model = MLPClassifier(
            hidden_layer_sizes=hidden, batch_size=args.batch_size, learning_rate_init=args.lr, alpha=1e-4, random_state=args.seed
        )
        print(f"training MLP {hidden} on {len(x_train)} samples ({len(x_val)} held out), {args.epochs} epochs", flush=True)

    t0 = time.monotonic()
    for epoch in range(start_epoch, args.epochs + 1):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.partial_fit(x_train, y_train, classes=classes)
        metrics = {
            "epoch": epoch,
            "loss": float(model.loss_),
            "train_acc": float(model.score(x_train, y_train)),
            "val_acc": float(model.score(x_val, y_val)),
        }
        history.append(metrics)
        save_checkpoint(args.checkpoint, {"model": model, "epoch": epoch, "history": history, "seed": args.seed})
        print(
            f"epoch {epoch}/{args.epochs} loss={metrics['loss']:.4f} train_acc={metrics['train_acc']:.3f} "
            f"val_acc={metrics['val_acc']:.3f} elapsed={time.monotonic() - t0:.1f}s",
            flush=True,
        )

    val_acc = history[-1]["val_acc"] if history else float(model.score(x_val, y_val))
    print(f"final val_acc={val_acc:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
