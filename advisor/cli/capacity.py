"""`advisor capacity`: GPU types and counts over advisor.capacity, with a progress bar on a terminal."""

from __future__ import annotations

import sys

from .output import _emit
from .situation import _assumptions, _finetune_fields, _global_batch


def _capacity_inputs(args) -> dict:
    """advisor.capacity's keyword arguments from the command line."""
    from ..inputs.specs import Model

    model = Model.from_hf_config(args.hf_config) if args.hf_config else Model.preset(args.model)
    training = {"cuda_graphs": args.cuda_graphs, **_finetune_fields(args)}
    if args.precision is not None:     # unstated: each GPU type decides (inputs.specs.part_defaults)
        training["precision"] = args.precision
    for key, value in (("seq_len", args.seq_len), ("global_batch_size", args.global_batch),
                       ("framework", args.framework),
                       ("framework_version", args.framework and args.framework_version)):
        if value is not None:
            training[key] = value
    if "global_batch_size" in training:
        training["global_batch_size"] = _global_batch(training["global_batch_size"], model, training)
    overrides = {key: value for key, value in (("gpus_per_node", args.gpus_per_node),
                                                 ("nvlink_domain", args.nvlink_domain),
                                                 ("inter_node_bandwidth", args.inter_node_bandwidth))
                 if value is not None}
    scaling = {key: value for key, value in (("max_batch_tokens", args.max_batch_tokens),
                                               ("interruptions_per_gpu_day", args.interruptions_per_gpu_day),
                                               ("restart_minutes", args.restart_minutes),
                                               ("checkpoint_interval_minutes", args.checkpoint_interval),
                                               ("checkpoint_bandwidth", args.checkpoint_bandwidth))
               if value is not None}
    return {"model": model, "tokens": args.tokens, "gpu": [{"gpu": name, **overrides} for name in args.gpu],
            "gpus": args.gpus, "deadline": args.deadline, "budget": args.budget, "prices": args.prices,
            "training": training, "scaling": scaling, "rules": tuple(args.rules), "engine": args.engine,
            "assumptions": _assumptions(args.assume), "workers": args.workers}


def _capacity(args) -> int:
    from ..capacity_plan import capacity

    inputs = _capacity_inputs(args)
    if args.plot:
        from ..capacity_plan.plot import check_plot_path

        check_plot_path(args.plot)
    bar = _ProgressBar() if not args.json and _is_tty(sys.stderr) else None
    try:
        plan = capacity(**inputs, progress=bar)
    finally:
        if bar is not None:
            bar.close()
    if args.plot:
        from ..capacity_plan.plot import plot_plan

        plot_plan(plan, args.plot)
    if args.json:
        _emit(plan.model_dump_json(indent=2), as_json=True)
    else:
        _emit(plan.explain(all_counts=args.all_counts) + (f"\nwrote {args.plot}" if args.plot else ""))
    met = plan.pick is not None or (plan.options and plan.deadline_days is None and plan.budget is None)
    return 0 if met else 1


def _is_tty(stream) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


class _ProgressBar:
    """A one-line progress bar on stderr for sweeps of more than a few seconds' work (a terminal only)."""

    WIDTH = 30
    SHOW_FROM = 40          # scenarios; fewer finish before a bar would be read

    def __init__(self):
        self.drawn = False

    def __call__(self, done: int, total: int) -> None:
        if total < self.SHOW_FROM:
            return
        filled = self.WIDTH * done // total
        self._write(f"\radvisor: capacity [{'#' * filled}{'.' * (self.WIDTH - filled)}] {done}/{total} counts")
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            self._write("\r" + " " * (self.WIDTH + 40) + "\r")

    @staticmethod
    def _write(text: str) -> None:
        try:
            sys.stderr.write(text)
            sys.stderr.flush()
        except (OSError, ValueError, AttributeError):
            pass

