"""Turn one `Layout` into configs the frameworks run: Megatron-LM flags, a DeepSpeed JSON config,
torchtitan overrides (main) or a TOML fragment (v0.2.2) and a `torchrun` launch line. One module per framework.

Every exporter takes `(layout, model, training, cluster, assumptions=None)` with `layout.dp` and
`layout.num_microbatches` set and `training.seq_len` / `training.global_batch_size` resolved to
ints (batch.py). They are pure functions: no I/O, no imports of the frameworks.

Legality has one owner, the audit rules (rules/audit-*.toml): a layout `advisor.audit` calls ok
exports in its framework's formats (tests/test_audit_export_contract.py). The checks left in the
exporters only assert that contract for layouts that bypassed the audit; each raises
`advisor.InputError` (field, have, want) naming the audit rule that forbids the layout.

Vocabulary is translated here and only here: tp, pp, dp, cp,
ep, etp, vpp become Megatron's `*-model-parallel-size`, DeepSpeed's batch triple and torchtitan's
`*_parallel_degree`; megatron_deepspeed.py respells Megatron's flags for Megatron-DeepSpeed. Each module
names the source files (and commits) its flag or key table was read from.
"""

from .hf import accelerate_config, accelerate_notes, peft_config, trl_config, trl_notes
from .deepspeed import DEEPSPEED_KEYS, NVME_PATH_PLACEHOLDER, deepspeed_config, deepspeed_notes
from .megatron import (MEGATRON_ARGUMENTS_SOURCE, MEGATRON_FLAGS, MEGATRON_PINS, MegatronFlag, megatron_args,
                       megatron_command, megatron_notes)
from .megatron_deepspeed import MEGATRON_DEEPSPEED_PIN, MEGATRON_DEEPSPEED_SHARED, RESPELLED
from .torchrun import torchrun_command
from .torchtitan import (TORCHTITAN_KEYS, TORCHTITAN_MAIN_KEYS, TORCHTITAN_PINS, torchtitan_args, torchtitan_config,
                         torchtitan_notes, torchtitan_toml)

__all__ = [
    "accelerate_config",
    "accelerate_notes",
    "peft_config",
    "trl_config",
    "trl_notes",
    "MegatronFlag",
    "MEGATRON_FLAGS",
    "MEGATRON_ARGUMENTS_SOURCE",
    "DEEPSPEED_KEYS",
    "TORCHTITAN_KEYS",
    "NVME_PATH_PLACEHOLDER",
    "MEGATRON_PINS",
    "MEGATRON_DEEPSPEED_PIN",
    "MEGATRON_DEEPSPEED_SHARED",
    "RESPELLED",
    "megatron_args",
    "megatron_notes",
    "deepspeed_notes",
    "megatron_command",
    "deepspeed_config",
    "torchtitan_toml",
    "torchtitan_args",
    "torchtitan_config",
    "torchtitan_notes",
    "TORCHTITAN_MAIN_KEYS",
    "TORCHTITAN_PINS",
    "torchrun_command",
]
