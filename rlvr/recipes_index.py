"""Which script runs a recipe YAML: the `accelerate launch recipes/X.py` line in its header says so.

A recipe names its own script, so a sweep over recipe files (REINFORCE vs RLOO vs GRPO) launches each with the
right trainer and config class without a second table to keep in sync.
"""

from __future__ import annotations

import re
from pathlib import Path

from rlvr.errors import ConfigError

LAUNCH_LINE = re.compile(r"accelerate launch\b[^\n]*?\s(recipes/(?:\w+/)*(\w+)\.py)")  # options may precede the script
DEFAULT_SCRIPT = "recipes/grpo.py"  # what the runner trains when no script is named (GRPOTrainer, GRPOConfig)


def launch_script(recipe_path) -> str:
    """The script path (relative to the repo root) from the recipe's launch line, e.g. `recipes/dapo.py`.

    A recipe without one is plain GRPO; a recipe with fields only another script knows then fails validation.
    """
    try:
        text = Path(recipe_path).read_text()
    except FileNotFoundError:
        raise ConfigError("recipe", f"no such file: {recipe_path}") from None
    match = LAUNCH_LINE.search(text)
    return match.group(1) if match else DEFAULT_SCRIPT


def script_classes(recipe_path) -> tuple | None:
    """(trainer_cls, config_cls) of the script a recipe YAML names; config_cls None means the runner's default,
    `rlvr.kl.KLEstimatorConfig` (TRL's GRPOConfig plus kl_estimator)."""
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
    match = LAUNCH_LINE.search(Path(recipe_path).read_text()) if Path(recipe_path).is_file() else None
    return scripts.get(match.group(2)) if match else None
