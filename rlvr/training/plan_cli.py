"""`rlvr plan --config recipes/grpo.yaml [--free_gib 6.9] [--accelerate_config FILE] [--field value]`: a recipe's peak
GPU memory, part by part, from the model's shape and the batch shape; nothing is loaded. It parses the recipe as the
runner does, so it sits beside the runner, above the planner (`rlvr.planning`) whose pre-flight check the runner runs."""

from __future__ import annotations

import torch

from rlvr.inputs import ArgumentParser, cli, positive_float, positive_int
from rlvr.planning.plan import MemoryPlan, format_plan, plan_recipe
from rlvr.planning.shapes import GIB, launch_shape
from rlvr.training.config import load_recipe, validate


def main(argv: list[str] | None = None) -> MemoryPlan:
    parser = ArgumentParser(
        description="Estimate a recipe's peak GPU memory, part by part (loads nothing).",
        allow_abbrev=False,
        epilog="Other arguments (--config X.yaml, --field value) are the recipe's, as for recipes/grpo.py.",
    )
    parser.add_argument("--free_gib", type=positive_float, help="free GPU memory to compare with (default: this GPU's)")
    parser.add_argument(
        "--total_gib", type=positive_float, help="total GPU memory, for vLLM colocate's reserved fraction"
    )
    parser.add_argument("--accelerate_config", help="an accelerate_configs/*.yaml: its processes and ZeRO stage")
    parser.add_argument("--num_processes", type=positive_int, help="processes (GPUs) the run is launched on")
    parser.add_argument("--zero_stage", type=int, choices=(0, 1, 2, 3), help="DeepSpeed ZeRO stage (0 = DDP/none)")
    parser.add_argument("--ppo", action="store_true", help="plan PPO (value model); implied by a PPO recipe")
    parser.add_argument("--prompt_tokens", type=positive_int, help="longest prompt in tokens (default: from the data)")
    opts, rest = parser.parse_known_args(argv)
    processes, stage = launch_shape(opts.accelerate_config) if opts.accelerate_config else (None, None)
    cuda = torch.cuda.is_available()
    # dry_run: validate without requiring the weights; TrainingArguments rejects bf16 on a machine without a GPU
    # unless use_cpu is set. The planner loads and trains nothing either way.
    recipe = validate(load_recipe(rest + ["--dry_run", "true"] + ([] if cuda else ["--use_cpu", "true"])))
    free = opts.free_gib * GIB if opts.free_gib is not None else None
    total = opts.total_gib * GIB if opts.total_gib is not None else None
    if cuda and (free is None or total is None):
        cuda_free, cuda_total = torch.cuda.mem_get_info()
        free, total = free if free is not None else cuda_free, total if total is not None else cuda_total
    plan = plan_recipe(
        recipe,
        prompt_tokens=opts.prompt_tokens,
        num_processes=opts.num_processes or processes,
        zero_stage=opts.zero_stage if opts.zero_stage is not None else stage,
        ppo=opts.ppo or None,
        total_bytes=total,
        free_bytes=free,
    )
    print(format_plan(plan, free))
    return plan


if __name__ == "__main__":
    cli(main)
