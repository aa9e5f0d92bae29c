"""Which script runs a recipe YAML: the `accelerate launch recipes/X.py` line in its header says so.

A recipe names its own script, so a sweep over recipe files (REINFORCE vs RLOO vs GRPO) launches each with the
right trainer and config class without a second table to keep in sync.
"""

from __future__ import annotations

import re
from pathlib import Path

from rlvr.errors import ConfigError

LAUNCH_LINE = re.compile(r"accelerate launch (recipes/(?:\w+/)*(\w+)\.py)")


def launch_script(recipe_path) -> str:
    """The script path (relative to the repo root) from the recipe's launch line, e.g. `recipes/grpo.py`."""
    try:
        text = Path(recipe_path).read_text()
    except FileNotFoundError:
        raise ConfigError("recipe", f"no such file: {recipe_path}") from None
    match = LAUNCH_LINE.search(text)
    if not match:
        raise ConfigError("recipe", f"{recipe_path} has no `accelerate launch recipes/<script>.py` line in its header")
    return match.group(1)


def script_classes(recipe_path) -> tuple | None:
    """(trainer_cls, config_cls) of the script a recipe YAML names; config_cls None means TRL's GRPOConfig."""
    from rlvr.algorithms import ReinforceTrainer, RLOOTrainer, SingleRolloutConfig
    from rlvr.dynamic_sampling import DAPOConfig, DAPOTrainer
    from rlvr.ppo import PPOConfig, PPOTrainer
    from rlvr.trainer import RLVRGRPOTrainer

    scripts = {
        "grpo": (RLVRGRPOTrainer, None),
        "dapo": (DAPOTrainer, DAPOConfig),
        "rloo": (RLOOTrainer, None),
        "reinforce": (ReinforceTrainer, SingleRolloutConfig),
        "ppo": (PPOTrainer, PPOConfig),
    }
    try:
        return scripts.get(Path(launch_script(recipe_path)).stem)
    except ConfigError:
        return None
