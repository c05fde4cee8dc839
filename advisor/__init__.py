"""advisor: recommends how to parallelise LLM training on a GPU cluster, and explains why.

    import advisor
    rec = advisor.recommend(advisor.Cluster(gpu="H100-SXM-80GB", gpus=64), "llama-3-70b")
    print(rec.explain())
"""

from importlib import import_module

from ._version import __version__
from .errors import (AdvisorError, EngineError, EstimateError, InputError, RuleFileError, UnknownEngineError,
                     UnknownPresetError)

# Everything past the errors loads on first use (PEP 562): `import advisor` is then light, and the
# command line imports pydantic inside main(), where a SIGINT during the import is an exit 130, not
# a traceback from the console script's own import line.
_LAZY = {
    "estimate": ("costmodel", "estimate"),
    "Estimate": ("costmodel", "Estimate"),
    "Assumptions": ("costmodel", "Assumptions"),
    "Layout": ("inputs.layout", "Layout"),
    "GPU": ("inputs.specs", "GPU"),
    "MLA": ("inputs.specs", "MLA"),
    "Cluster": ("inputs.specs", "Cluster"),
    "Model": ("inputs.specs", "Model"),
    "Training": ("inputs.specs", "Training"),
    "recommend": ("api", "recommend"),
    "warm_up": ("api", "warm_up"),
    "audit": ("api", "audit"),
    "compare": ("api", "compare"),
    "Comparison": ("results.comparison", "Comparison"),
    "Audit": ("results.audit", "Audit"),
    "Finding": ("results.audit", "Finding"),
    "Recommendation": ("results.recommendation", "Recommendation"),
    "capacity": ("capacity_plan", "capacity"),
    "CapacityPlan": ("capacity_plan", "CapacityPlan"),
    "Prices": ("capacity_plan", "Prices"),
    "Scaling": ("capacity_plan", "Scaling"),
}

__all__ = [
    "__version__", "AdvisorError", "EngineError", "EstimateError", "InputError", "RuleFileError", "UnknownEngineError",
    "UnknownPresetError", *_LAZY,
]


def __getattr__(name: str):
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(import_module(f".{module}", __name__), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'advisor' has no attribute {name!r}")


def __dir__():
    return sorted(__all__)
