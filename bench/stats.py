"""Small statistics helpers."""

from __future__ import annotations

import numpy as np


def percentiles(values: list[float]) -> dict[str, float]:
    """p50, p95, p99 and mean of a list of latencies."""
    if not values:
        return {"p50": 0.0, "p95": 0.0, "p99": 0.0, "mean": 0.0, "n": 0}
    a = np.asarray(values, dtype=np.float64)
    return {
        "p50": float(np.percentile(a, 50)),
        "p95": float(np.percentile(a, 95)),
        "p99": float(np.percentile(a, 99)),
        "mean": float(a.mean()),
        "n": len(values),
    }
