"""RLOO: leave-one-out baseline K/(K-1) * (r - group mean), REINFORCE-style loss without ratio.

    accelerate launch recipes/rloo.py --config recipes/rloo.yaml
"""

from rlvr.algorithms import RLOOTrainer
from rlvr.runner import run

if __name__ == "__main__":
    run(trainer_cls=RLOOTrainer)
