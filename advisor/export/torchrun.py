"""The `torchrun` launch line (torch 2.13.0 torch/distributed/run.py, argument names at lines 426-629)."""

from __future__ import annotations

from collections.abc import Sequence

from ..inputs.specs import Cluster
from .escape import shell_with_placeholders, shell_word

__all__ = ["torchrun_command", "launch_notes"]


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


def launch_notes(cluster: Cluster) -> list[str]:
    """What a multi-node torchrun line needs from the person who runs it: where it runs, the environment it
    reads, and one way to get both from Slurm (torch/distributed/run.py: every node runs the same line and
    meets the others at the c10d rendezvous endpoint under one id). Nothing for one node (--standalone)."""
    if cluster.nodes == 1:
        return []
    return [f"run the same line on each of the {cluster.nodes} nodes ({cluster.gpus_in_node} GPUs each), with "
            "MASTER_ADDR (the address of one of the nodes, the rendezvous host), MASTER_PORT (a free port there, "
            "e.g. 29500) and JOB_ID (the same string on every node) set in its environment",
            f"with Slurm: srun --nodes={cluster.nodes} --ntasks-per-node=1 bash -c 'MASTER_ADDR=$(scontrol show "
            "hostnames \"$SLURM_JOB_NODELIST\" | head -n1) MASTER_PORT=29500 JOB_ID=$SLURM_JOB_ID <the line>'"]
