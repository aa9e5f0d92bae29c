"""REINFORCE: raw reward as advantage, no baseline, one rollout per prompt allowed.

    accelerate launch recipes/reinforce.py --config recipes/reinforce.yaml
"""

from rlvr.algorithms import SingleRolloutConfig, ReinforceTrainer
from rlvr.runner import run

if __name__ == "__main__":
    run(trainer_cls=ReinforceTrainer, config_cls=SingleRolloutConfig)
