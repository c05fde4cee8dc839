"""The cost model: per-GPU memory, communication, pipeline bubble, step time and MFU of a layout.

    from advisor.costmodel import estimate, memory_only, Estimate, Assumptions
    est = estimate(cluster, model, layout, training)            # Estimate
    mem = memory_only(cluster, model, layout, training)         # MemoryEstimate, cheaper

Pure arithmetic on the plain numbers of the input models; every tunable number is a field of
`Assumptions` (echoed back in `Estimate.assumptions`). Sources are cited in
states.py, activations.py, memory.py, comm.py, flops.py, compute.py and time.py; calibration against
measured runs is in benchmarks/calibrate_korthikanti.py (memory and iteration time, Korthikanti et al. 2022) and benchmarks/calibrate_throughput.py (step time of the
published layouts that report throughput). The planner's sizing protocol is `costmodel.sizing`.
"""

from .assumptions import Assumptions
from .activations import LayerActivations, MoEActivations
from .states import model_state_bytes_per_param
from .result import CommDimension, CommEstimate, Estimate, MemoryEstimate
from .sizing import estimate, memory_only

__all__ = ["estimate", "memory_only", "Estimate", "MemoryEstimate", "CommEstimate", "CommDimension", "Assumptions",
           "model_state_bytes_per_param", "LayerActivations", "MoEActivations"]
