"""What bounds scaling a training run out, as stated, overridable assumptions (`Scaling`), and the
arithmetic each one implies for a GPU count: the time lost to interruptions and checkpoints
(`goodput_at`), and the work a run must do at any scale (`peak_flops_for`, the floor under its
GPU-hours). The global batch a count allows is inputs.batch.batch_for, recommend's default rule too.

The memory floor and the network are not assumptions here: the recommendation at each count sizes
memory and prices the scale-out network with the cluster's own figures (`Cluster.inter_node_bandwidth`).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, NamedTuple

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from ..costmodel.adapters import model_adapter_params
from ..inputs.batch import DEFAULT_MAX_BATCH_TOKENS
from ..inputs.finetune import DEFAULT_LORA_RANK, priced_targets
from ..inputs.optimizers import MASTER_BYTES, moment_bytes
from ..inputs.precision import recipe
from ..inputs.screen import screen
from ..inputs.units import to_bytes_per_second, to_tokens

__all__ = ["Scaling", "Goodput", "TrainingTime", "goodput_at", "training_time", "checkpoint_bytes",
           "peak_flops_for",
           "LLAMA3_INTERRUPTIONS", "LLAMA3_DAYS", "LLAMA3_GPUS", "DEFAULT_MAX_BATCH_TOKENS", "SECONDS_PER_DAY"]

SECONDS_PER_DAY = 86_400.0

# Llama 3 (Grattafiori et al. 2024, "The Llama 3 Herd of Models", arXiv 2407.21783, §3.3.4 and Table 5):
# "During a 54-day snapshot period of pre-training, we experienced a total of 466 job interruptions"
# (47 planned, 419 unexpected) on up to 16,384 H100 GPUs. Both kinds stop the job and cost a restart.
LLAMA3_INTERRUPTIONS = 466
LLAMA3_DAYS = 54
LLAMA3_GPUS = 16_384

# Storage write bandwidth per GPU for checkpoints: Llama 3's Tectonic file system sustains 2 TB/s
# (arXiv 2407.21783 §3.3.1, "Storage"), shared by the 16,384 GPUs of the run: about 122 MB/s per GPU.
_LLAMA3_STORAGE_BYTES_PER_S = 2e12


def _tokens(value: Any) -> Any:
    return None if value is None else to_tokens(value, "Scaling.max_batch_tokens")


def _rate(value: Any) -> Any:
    return to_bytes_per_second(value, "Scaling.checkpoint_bandwidth")


class Scaling(BaseModel):
    """The bounds of scaling out that are assumptions rather than facts of the cluster; each has a
    published default and can be set to what your site knows."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)

    max_batch_tokens: Annotated[int | None, BeforeValidator(_tokens)] = Field(None, ge=1, le=1 << 40)
    """Most tokens one optimizer step may hold ("16M" is 16 x 2^20). The batch starts at the training's
    global batch and grows with the GPU count to one sequence per GPU per step and to a multiple of the
    largest divisor of the count it can be (inputs.batch.batch_for), never past this. None: 16M tokens,
    Llama 3 405B's final batch (arXiv 2407.21783 §3.4.1), when the global batch is not given; the given
    batch itself (it stays fixed) when it is."""
    interruptions_per_gpu_day: float = Field(LLAMA3_INTERRUPTIONS / (LLAMA3_DAYS * LLAMA3_GPUS), ge=0, le=1,
                                             allow_inf_nan=False)
    """Job interruptions per GPU per day; a job of N GPUs stops N times as often. Default: Llama 3's 466
    interruptions in 54 days on 16,384 H100s (arXiv 2407.21783 §3.3.4), 5.3e-4."""
    restart_minutes: float = Field(10.0, ge=0, le=24 * 60, allow_inf_nan=False)
    """Minutes from an interruption to training again (detect, reschedule, initialise, load the
    checkpoint). An assumption: recovery systems with standby machines report 20 s at 1,024 GPUs
    (TrainMover, arXiv 2412.12636) and 150 s at 4,800 devices (FlashRecovery, arXiv 2509.03047);
    a plain scheduler restart takes minutes more. Daly (2006, FGCS 22(3)) evaluates 10 minutes."""
    checkpoint_bandwidth: Annotated[float, BeforeValidator(_rate)] = Field(
        _LLAMA3_STORAGE_BYTES_PER_S / LLAMA3_GPUS, gt=0, allow_inf_nan=False)
    """Storage write bandwidth per GPU while a checkpoint is saved (training waits for it). Default:
    Llama 3's 2 TB/s sustained storage over 16,384 GPUs, about 122 MB/s (arXiv 2407.21783 §3.3.1)."""
    checkpoint_interval_minutes: float | None = Field(None, gt=0, le=7 * 24 * 60, allow_inf_nan=False)
    """Minutes between checkpoints. None: Young's optimum sqrt(2 x save time x mean time between
    interruptions) (Young 1974, CACM 17(9)), at least one step."""

    @model_validator(mode="before")
    @classmethod
    def _screen(cls, data: Any) -> Any:
        return screen(cls, data)

    def max_batch(self, base_tokens: int, stated: bool) -> int:
        """The most tokens per step: the stated maximum, else the given batch (`stated`) or 16M."""
        if self.max_batch_tokens is not None:
            return self.max_batch_tokens
        return base_tokens if stated else max(base_tokens, DEFAULT_MAX_BATCH_TOKENS)


class Goodput(NamedTuple):
    """Time lost to interruptions and checkpoints at one GPU count (Young 1974; Daly 2006, first order)."""

    interruptions_per_day: float
    checkpoint_seconds: float
    """Time training waits for one checkpoint save: its bytes over the GPUs' write bandwidth."""
    interval_seconds: float
    """Time between checkpoints."""
    fraction: float
    """Useful time / wall time: (1 - rate x (restart + interval / 2)) / (1 + save / interval); 0 when
    interruptions come faster than a restart and half an interval (the run would never finish)."""


def goodput_at(gpus: int, ckpt_bytes: float, step_seconds: float, scaling: Scaling) -> Goodput:
    """The goodput of a job of `gpus` GPUs that saves `ckpt_bytes` per checkpoint.

    Each interruption costs the restart and, on average, half a checkpoint interval of lost work;
    each checkpoint costs its save time. With rate r, restart R, save d and interval T, the wall time
    W of useful time U solves W = U (1 + d/T) + r W (R + T/2)."""
    per_day = scaling.interruptions_per_gpu_day * gpus
    rate = per_day / SECONDS_PER_DAY
    save = ckpt_bytes / (scaling.checkpoint_bandwidth * gpus)
    if scaling.checkpoint_interval_minutes is not None:
        interval = scaling.checkpoint_interval_minutes * 60.0
    elif rate > 0:
        interval = max(step_seconds, math.sqrt(2.0 * save / rate))
    else:
        interval = math.inf
    lost = rate * (scaling.restart_minutes * 60.0 + interval / 2.0) if rate > 0 else 0.0
    overhead = save / interval if math.isfinite(interval) else 0.0
    fraction = max(0.0, (1.0 - lost) / (1.0 + overhead))
    return Goodput(per_day, save, interval, fraction)


class TrainingTime(NamedTuple):
    """How long a run takes and what it holds: `steps` of `step_seconds`, stretched by the goodput."""

    steps: float
    goodput: Goodput
    days: float
    """Wall-clock days: steps x step time / goodput (infinite at goodput 0)."""
    gpu_hours: float
    """GPUs x wall-clock hours: the GPUs are held through restarts and checkpoint saves."""


def training_time(step_seconds: float, gpus: int, tokens: float, batch_tokens: int, ckpt_bytes: float,
                  scaling: Scaling) -> TrainingTime:
    """Days and GPU-hours to train `tokens` at `batch_tokens` per step of `step_seconds` on `gpus` GPUs."""
    good = goodput_at(gpus, ckpt_bytes, step_seconds, scaling)
    steps = tokens / batch_tokens
    days = steps * step_seconds / good.fraction / SECONDS_PER_DAY if good.fraction > 0 else math.inf
    return TrainingTime(steps, good, days, days * 24.0 * gpus)


def checkpoint_bytes(model, training) -> float:
    """Bytes of one checkpoint: the 16-bit weights and, per trained parameter, the master copy and
    the optimizer's states (inputs.optimizers); LoRA and QLoRA save only the adapters and theirs."""
    states = moment_bytes(training.optimizer, training.master_weights, model.hidden)
    states += MASTER_BYTES if training.master_weights == "fp32" else 0.0
    if training.frozen_base:
        trained = model_adapter_params(model, training.lora_rank or DEFAULT_LORA_RANK,
                                       priced_targets(training.lora_targets, training.framework))
        return trained * (2.0 + states)
    return model.params * (2.0 + states)


def peak_flops_for(gpu, precision: str) -> float:
    """The fastest dense tensor-core peak a precision's GEMMs can run at on `gpu`: no run does its
    work faster, so work / this peak is the floor under its GPU-seconds."""
    gemm = recipe(precision).gemm
    if gemm == "fp4":
        return gpu.peak_flops_fp4 or gpu.peak_flops_fp8 or gpu.peak_flops
    if gemm == "fp8":
        return gpu.peak_flops_fp8 or gpu.peak_flops
    return gpu.peak_flops

