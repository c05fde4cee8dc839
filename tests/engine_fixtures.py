"""Shared by the engine and evaluator tests: a leaf builder and a small fact document."""


def L(field, op, value):
    """One condition leaf of the compiled rule format."""
    return {"field": field, "op": op, "value": value}


FACT = {
    "cluster": {"gpus": 64, "nvlink_domain": 8, "gpu_name": "H100-SXM-80GB"},
    "model": {"params": 70553706496, "is_moe": False},
    "sizing": {"states_fit_gpu": False, "states_gpu_ratio": 14.78},
}
