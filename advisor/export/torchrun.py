"""The `torchrun` launch line (torch 2.13.0 torch/distributed/run.py, argument names at lines 426-629)."""

from __future__ import annotations

from collections.abc import Sequence

from ..inputs.specs import Cluster
from .escape import shell_with_placeholders, shell_word

__all__ = ["torchrun_command"]


def torchrun_command(cluster: Cluster, *, script: str | None = None, script_args: Sequence[str] = (),
                     rdzv_endpoint: str = "$MASTER_ADDR:$MASTER_PORT", rdzv_id: str = "$JOB_ID") -> str:
    """A `torchrun` launch line for the cluster: one process per GPU.

    Several nodes use the c10d rendezvous; `$MASTER_ADDR`, `$MASTER_PORT` and `$JOB_ID` are
    placeholders for the launcher (Slurm, Kubernetes, ...) to fill, left double-quoted so the
    shell expands them (and nothing else in those values: export.escape). One node uses `--standalone`.
    """
    per_node = cluster.gpus_in_node
    parts = ["torchrun", f"--nnodes={cluster.nodes}", f"--nproc-per-node={per_node}"]
    if cluster.nodes == 1:
        parts.append("--standalone")
    else:
        parts += [f"--rdzv-id={shell_with_placeholders(rdzv_id)}", "--rdzv-backend=c10d",
                  f"--rdzv-endpoint={shell_with_placeholders(rdzv_endpoint)}"]
    if script is not None:
        parts.append(shell_word(script))
        parts += [shell_word(a) for a in script_args]
    return " ".join(parts)
