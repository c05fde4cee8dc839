"""advisor: recommends how to parallelise LLM training on a GPU cluster, and explains why.

    import advisor
    rec = advisor.recommend(advisor.Cluster(gpu="H100-SXM-80GB", gpus=64), "llama-3-70b")
    print(rec.explain())
"""

from importlib import import_module

from ._version import __version__
from .errors import AdvisorError, EngineError, InputError, RuleFileError, UnknownPresetError
from .layout import Layout
from .specs import GPU, MLA, Cluster, Model, Training

# The engine, cost model and planner load on first use (PEP 562), keeping `import advisor` light.
_LAZY = {
    "recommend": ("api", "recommend"),
    "audit": ("audit", "audit"),
    "Audit": ("audit", "Audit"),
    "Finding": ("audit", "Finding"),
    "Recommendation": ("recommendation", "Recommendation"),
    "estimate": ("estimate", "estimate"),
    "Estimate": ("estimate", "Estimate"),
}

__all__ = [
    "__version__", "Cluster", "GPU", "MLA", "Model", "Training", "Layout",
    "AdvisorError", "EngineError", "InputError", "RuleFileError", "UnknownPresetError", *_LAZY,
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
