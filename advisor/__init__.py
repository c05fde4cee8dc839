"""advisor: recommends how to parallelise LLM training on a GPU cluster, and explains why.

    import advisor
    rec = advisor.recommend(advisor.Cluster(gpu="H100-SXM-80GB", gpus=64), "llama-3-70b")
    print(rec.explain())
"""

from importlib import import_module

from ._version import __version__
from .costmodel import Assumptions, Estimate, estimate
from .errors import (AdvisorError, EngineError, EstimateError, InputError, RuleFileError, UnknownEngineError,
                     UnknownPresetError)
from .inputs.layout import Layout
from .inputs.specs import GPU, MLA, Cluster, Model, Training

# The engine and the planner load on first use (PEP 562), keeping `import advisor` light.
_LAZY = {
    "recommend": ("api", "recommend"),
    "audit": ("auditor", "audit"),
    "Audit": ("results.audit", "Audit"),
    "Finding": ("results.audit", "Finding"),
    "Recommendation": ("results.recommendation", "Recommendation"),
}

__all__ = [
    "__version__", "estimate", "Estimate", "Assumptions", "Cluster", "GPU", "MLA", "Model", "Training", "Layout",
    "AdvisorError", "EngineError", "EstimateError", "InputError", "RuleFileError", "UnknownEngineError",
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
