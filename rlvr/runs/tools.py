"""The project's own command-line tools, started through the interpreter that is running, never looked up on PATH.

A fresh clone's tools (`accelerate`, `torchrun`, `rlvr`, `trl`, `tensorboard`) live in the interpreter's environment
(`make` creates `.venv`); a shell that never entered it has none of them on PATH, or another environment's. Every
command the repo starts itself (the main job, sweeps, benchmarks, rendered Slurm scripts, tests) therefore names
`sys.executable` and the tool's module, so it runs in the same environment as the code that started it.
"""

from __future__ import annotations

import sys

# tool name -> the module `python -m` runs for it (the console script's own entry point)
MODULES = {
    "accelerate launch": "accelerate.commands.launch",
    "torchrun": "torch.distributed.run",
    "rlvr": "rlvr",
    "trl": "trl.cli.main",
    "tensorboard": "tensorboard.main",
}


def command(tool: str) -> list[str]:
    """argv prefix that starts `tool` (a key of MODULES) in this interpreter's environment."""
    return [sys.executable, "-m", MODULES[tool]]
