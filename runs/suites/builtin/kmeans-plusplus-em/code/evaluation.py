"""Agreement between a clustering and the generating labels."""
import numpy as np


def normalized_mutual_information(labels_true, labels_pred):
    """NMI between two labelings, arithmetic-mean normalisation, natural logarithms.

    Parameters
    ----------
    labels_true : ndarray of shape (n,), int
        Reference labels (the generating components).
    labels_pred : ndarray of shape (n,), int
        Cluster labels; their values need not match those of ``labels_true``.

    Returns
    -------
    float
        ``I(true; pred) / ((H(true) + H(pred)) / 2)``, between 0 and 1.
    """
    if labels_true.shape != labels_pred.shape:
        raise ValueError(f"labelings of shapes {labels_true.shape} and {labels_pred.shape}")
    n = labels_true.size
    classes, true_index = np.unique(labels_true, return_inverse=True)
    clusters, pred_index = np.unique(labels_pred, return_inverse=True)
    # joint distribution of (class, cluster) as a contingency table of probabilities
    joint = np.zeros((classes.size, clusters.size))
    np.add.at(joint, (true_index, pred_index), 1.0 / n)
    p_true = joint.sum(axis=1)
    p_pred = joint.sum(axis=0)
    # empty cells contribute 0 log 0 = 0 and would give nan
    nonzero = joint > 0
    outer = p_true[:, None] * p_pred[None, :]
    mutual_information = np.sum(joint[nonzero] * np.log(joint[nonzero] / outer[nonzero]))
    entropy_true = -np.sum(p_true * np.log(p_true))
    entropy_pred = -np.sum(p_pred * np.log(p_pred))
    return 2.0 * mutual_information / (entropy_true + entropy_pred)
