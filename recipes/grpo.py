"""GRPO: group z-score advantages, PPO-clip, per-sequence token mean.

    accelerate launch recipes/grpo.py --config recipes/grpo.yaml
"""

from rlvr.runner import run
from rlvr.trainer import RLVRGRPOTrainer

if __name__ == "__main__":
    run(trainer_cls=RLVRGRPOTrainer)
