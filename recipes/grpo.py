"""GRPO and the variants TRL expresses with config alone: Dr. GRPO, GSPO, CISPO, SAPO.

    accelerate launch recipes/grpo.py --config recipes/grpo.yaml     # or drgrpo / gspo / cispo / sapo .yaml
"""

from rlvr.runner import run
from rlvr.trainer import RLVRGRPOTrainer

if __name__ == "__main__":
    run(trainer_cls=RLVRGRPOTrainer)
