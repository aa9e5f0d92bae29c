"""DAPO: GRPO + clip-higher, token-level loss, overlong penalty and dynamic sampling (drop flat groups, resample).

    accelerate launch recipes/dapo.py --config recipes/dapo.yaml
"""

from rlvr.dynamic_sampling import DAPOConfig, DAPOTrainer
from rlvr.runner import run

if __name__ == "__main__":
    run(trainer_cls=DAPOTrainer, config_cls=DAPOConfig)
