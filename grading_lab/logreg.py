"""A small numpy logistic regression (Newton steps, L2, balanced class weights)."""

from __future__ import annotations

import numpy as np


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0, iters: int = 50,
                 balanced: bool = True, sample_weight: np.ndarray | None = None) -> tuple[np.ndarray, float]:
    """Weights and bias of an L2-regularised logistic regression on standardised features.

    sample_weight, when given, replaces the balanced class weights.
    """
    n, d = x.shape
    xb = np.hstack([x, np.ones((n, 1))])
    sample_w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=float)
    if balanced and sample_weight is None:
        pos = max(1.0, float(y.sum()))
        neg = max(1.0, float(n - y.sum()))
        sample_w = np.where(y > 0.5, n / (2 * pos), n / (2 * neg))
    theta = np.zeros(d + 1)
    reg = np.full(d + 1, l2)
    reg[-1] = 0.0  # the bias is not shrunk
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-np.clip(xb @ theta, -30, 30)))
        grad = xb.T @ (sample_w * (p - y)) + reg * theta
        hess = (xb * (sample_w * p * (1 - p))[:, None]).T @ xb + np.diag(reg + 1e-9)
        step = np.linalg.solve(hess, grad)
        theta -= step
        if float(np.abs(step).max()) < 1e-8:
            break
    return theta[:-1], float(theta[-1])


def standardiser(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Column means and scales (scale 1 for constant columns)."""
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    return mean, np.where(scale < 1e-9, 1.0, scale)


def macro_f1(y_true: list[str], y_pred: list[str], labels: list[str]) -> float:
    """Unweighted mean of per-label F1."""
    scores = []
    for label in labels:
        tp = sum(1 for t, p in zip(y_true, y_pred, strict=True) if t == label and p == label)
        fp = sum(1 for t, p in zip(y_true, y_pred, strict=True) if t != label and p == label)
        fn = sum(1 for t, p in zip(y_true, y_pred, strict=True) if t == label and p != label)
        scores.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
    return float(np.mean(scores)) if scores else 0.0


def fit_softmax(x: np.ndarray, y: np.ndarray, classes: int, l2: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Weights (classes x features) and biases of an L2-regularised multinomial logistic regression,
    with balanced class weights, fitted by L-BFGS on standardised features."""
    from scipy.optimize import minimize

    n, d = x.shape
    counts = np.bincount(y, minlength=classes).astype(float)
    sample_w = n / (classes * np.maximum(counts, 1.0))[y]
    onehot = np.eye(classes)[y]

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        w, b = theta[: classes * d].reshape(classes, d), theta[classes * d:]
        z = x @ w.T + b
        z -= z.max(axis=1, keepdims=True)
        log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        value = -float((sample_w[:, None] * onehot * log_p).sum()) + 0.5 * l2 * float((w * w).sum())
        delta = sample_w[:, None] * (np.exp(log_p) - onehot)
        grad = np.concatenate([(delta.T @ x + l2 * w).ravel(), delta.sum(axis=0)])
        return value, grad

    theta = minimize(loss, np.zeros(classes * (d + 1)), jac=True, method="L-BFGS-B").x
    return theta[: classes * d].reshape(classes, d), theta[classes * d:]
