"""Write the small real datasets of the built-in PyTorch papers from scikit-learn's bundled copies.

The papers' experiments must not import scikit-learn (their environment is torch and numpy only) and
must not download anything, so the arrays are shipped as .npz files inside each paper's data/ folder
and declared in its paper.json with their sha256 and size. This script is how those files were made;
run it with a Python that has scikit-learn (it is not a dependency of the site):

    python scripts/write_sklearn_data.py

scikit-learn 1.9.1, numpy 2.4.6 wrote the files in the repository. The zip entries carry a fixed
timestamp, so the same arrays give the same bytes (and sha256) on every run. It prints each file's
sha256 and size for paper.json.
"""
import hashlib
import io
import zipfile
from pathlib import Path

import numpy as np
from sklearn import __version__ as sklearn_version
from sklearn.datasets import load_breast_cancer, load_digits

BUILTIN = Path(__file__).resolve().parent.parent / "runs" / "suites" / "builtin-pytorch"
# Digits are integers 0..16 and the labels 0..9: uint8 keeps the file small and exact.
DATASETS = {
    "mixup-label-smoothing/data/digits.npz": lambda: {
        "X": load_digits().data.astype(np.uint8),
        "y": load_digits().target.astype(np.uint8),
    },
    "stochastic-weight-averaging/data/breast_cancer.npz": lambda: {
        "X": load_breast_cancer().data.astype(np.float64),
        "y": load_breast_cancer().target.astype(np.uint8),
    },
}
FIXED_TIME = (2026, 1, 1, 0, 0, 0)  # numpy's savez stamps entries with the current time


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, array in arrays.items():
            entry = zipfile.ZipInfo(f"{name}.npy", date_time=FIXED_TIME)
            entry.compress_type = zipfile.ZIP_DEFLATED
            with archive.open(entry, "w") as stream:
                np.lib.format.write_array(stream, np.ascontiguousarray(array), allow_pickle=False)
    content = buffer.getvalue()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    return content


def main():
    print(f"scikit-learn {sklearn_version}, numpy {np.__version__}")
    for relative, arrays in DATASETS.items():
        content = write_npz(BUILTIN / relative, arrays())
        print(f"{relative}: sha256 {hashlib.sha256(content).hexdigest()} size {len(content)}")


if __name__ == "__main__":
    main()
