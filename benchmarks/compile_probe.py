"""What torch.compile would buy the tiny step, and what its first call costs: one real batch, eager against compiled.

    HF_HUB_OFFLINE=1 WANDB_MODE=disabled python benchmarks/compile_probe.py                 # cold: a fresh cache
    python benchmarks/compile_probe.py --cache_dir runs/inductor-cache                    # run twice: the 2nd is warm

What is left of a default step is per-op work (element-wise ops, small matmuls, the attention kernels) that only
kernel fusion removes; this probe measures that fusion where it would go (figures: docs/measurements/speed.md).

One process. It runs `recipes/tiny/grpo.yaml` (speedups `all`) for one step and keeps what that step computed on:
the arguments of `prefix_attention.sample` (the generation) and the batch TRL's loss saw. Then, per part:
- `generation`: `prefix_attention.sample` on those prompts (prompt pass and the decode loop), with
  `Restated.forward` compiled;
- `reference`: the reference model's log-probs on the batch (the shared-prefix + group_prompts path), its body's
  forward compiled;
- `policy`: TRL's loss on the batch and its backward, the policy body's forward compiled.
Each part is called eager, then compiled (inductor, dynamic shapes; with a fresh cache directory, as on a new
machine, unless `--cache_dir` names one a previous run filled), its first compiled calls timed apart (the compile:
the generation's prompt pass and decode step are two graphs, the log-prob passes three), then eager and compiled
calls alternate `--repeats` times. Printed per part: eager and compiled ms (median and range), the compile's
seconds, whether compiled generation drew the same tokens under the same seed, and the break-even: how many steps
of the saving pay for the compile. The load average is printed before and after (benchmarks/machine_load.py).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rlvr.inputs import ArgumentParser, ConfigError, cli, positive_int

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PARTS = ("generation", "reference", "policy")


def capture(output_dir: str, threads: str):
    """One step of the tiny main job; returns (trainer, sample's args and kwargs, the loss's inputs)."""
    import torch

    from rlvr.speedups import prefix_attention
    from rlvr.training.runner import prepare

    _, trainer, _ = prepare(
        [
            "--config",
            "recipes/tiny/grpo.yaml",
            "--output_dir",
            output_dir,
            "--max_steps",
            "1",
            "--cpu_threads",
            threads,
            "--print_rollouts",
            "false",
            "--report_to",
            "none",
        ],
        "grpo",
    )
    kept = {}
    sample, compute_loss = prefix_attention.sample, trainer.compute_loss

    def keep_sample(*args, **kwargs):
        kept.setdefault("sample", (args, kwargs))
        return sample(*args, **kwargs)

    def keep_loss(model, inputs, *args, **kwargs):
        kept.setdefault("inputs", {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()})
        return compute_loss(model, inputs, *args, **kwargs)

    prefix_attention.sample, trainer.compute_loss = keep_sample, keep_loss
    try:
        trainer.train()
    finally:
        prefix_attention.sample, trainer.compute_loss = sample, compute_loss
    return trainer, kept["sample"], kept["inputs"]


def part_calls(trainer, sample_call, inputs):
    """{part: (call, switch)}: call() runs the part once; switch(compiled) swaps the compiled forward in or out."""
    import torch

    from rlvr.speedups import prefix_attention

    def generation():
        torch.manual_seed(0)  # the same draws every call: compiled and eager tokens can be compared
        return prefix_attention.sample(*sample_call[0], **sample_call[1])

    def reference():
        with torch.no_grad():
            ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], dim=1)
            mask = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], dim=1)
            return trainer._get_per_token_logps_and_entropies(
                trainer.ref_model, ids, mask, inputs["completion_ids"].size(1)
            )[0]

    def policy():
        loss = trainer.compute_loss(trainer.model, inputs)
        loss.backward()
        trainer.model.zero_grad(set_to_none=True)
        return loss.detach()

    def swapper(owner, name):
        eager = getattr(owner, name)
        compiled = torch.compile(eager, dynamic=True)
        return lambda on: setattr(owner, name, compiled if on else eager)

    return {
        "generation": (generation, swapper(prefix_attention.Restated, "forward")),
        "reference": (reference, swapper(trainer.ref_model.model, "forward")),
        "policy": (policy, swapper(trainer.model.model, "forward")),
    }


def measure(call, switch, repeats: int) -> dict:
    """Eager, then the compile, then eager and compiled alternating; milliseconds and seconds."""

    def timed():
        start = time.perf_counter()
        out = call()
        return (time.perf_counter() - start) * 1e3, out

    switch(False)
    timed()  # warm-up
    _, eager_out = timed()
    switch(True)
    compile_ms, _ = timed()  # the first compiled calls compile (dynamic shapes: the next shape usually recompiles)
    second_ms, compiled_out = timed()
    eager, compiled = [], []
    for _ in range(repeats):
        switch(False)
        eager.append(timed()[0])
        switch(True)
        compiled.append(timed()[0])
    switch(False)
    if eager_out.is_floating_point():  # log-probs, loss: rounding differs, by how much
        agreement = float((eager_out - compiled_out).abs().max())
    else:  # sampled tokens: the same draws must give the same tokens
        agreement = eager_out.shape == compiled_out.shape and bool((eager_out == compiled_out).all())
    return {
        "eager_ms": eager,
        "compiled_ms": compiled,
        "compile_s": (compile_ms + second_ms) / 1e3,
        "agreement": agreement,
    }


def report(part: str, result: dict) -> str:
    """One line per part; break-even counts steps, each of which runs each part once."""
    eager, compiled = statistics.median(result["eager_ms"]), statistics.median(result["compiled_ms"])
    saving = (eager - compiled) / 1e3
    agree = result["agreement"]
    agree = ("same tokens" if agree else "DIFFERENT tokens") if isinstance(agree, bool) else f"max |diff| {agree:.1e}"
    even = f"{result['compile_s'] / saving:.0f} steps" if saving > 0 else "never"
    return (
        f"{part:<11} eager {eager:7.1f} ms ({min(result['eager_ms']):.1f}-{max(result['eager_ms']):.1f})  "
        f"compiled {compiled:7.1f} ms ({min(result['compiled_ms']):.1f}-{max(result['compiled_ms']):.1f})  "
        f"x{compiled / eager:.2f}  first compiled calls {result['compile_s']:.1f} s  {agree}  break-even {even}"
    )


def main(argv: list[str] | None = None) -> dict:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma list of {', '.join(PARTS)}")
    parser.add_argument("--repeats", type=positive_int, default=5, help="eager/compiled pairs per part, interleaved")
    parser.add_argument("--cache_dir", default=None, help="inductor's cache (default: a fresh one: a cold compile)")
    parser.add_argument("--cpu_threads", default="auto")
    args = parser.parse_args(argv)
    parts = [p for p in args.parts.split(",") if p]
    if not parts or any(p not in PARTS for p in parts):
        raise ConfigError("--parts", f"{args.parts!r} is not a comma list of {', '.join(PARTS)}")
    scratch = tempfile.mkdtemp(prefix="compile-probe-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = args.cache_dir or os.path.join(scratch, "inductor")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("WANDB_MODE", "disabled")
    os.chdir(ROOT)

    from benchmarks.machine_load import measured_load

    trainer, sample_call, inputs = capture(os.path.join(scratch, "run"), args.cpu_threads)
    calls = part_calls(trainer, sample_call, inputs)
    print(
        f"[compile_probe] inductor cache: {os.environ['TORCHINDUCTOR_CACHE_DIR']}"
        f"{' (fresh: cold compile)' if not args.cache_dir else ''}; batch {tuple(inputs['completion_ids'].shape)}",
        flush=True,
    )
    results = {}
    with measured_load("compile_probe"):
        for part in parts:
            results[part] = measure(*calls[part], repeats=args.repeats)
            print(report(part, results[part]), flush=True)
    return results


if __name__ == "__main__":
    cli(main)
