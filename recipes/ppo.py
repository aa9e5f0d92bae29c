"""PPO: learned value model (critic), GAE over tokens, KL as a per-token reward penalty, clipped value loss.

    accelerate launch recipes/ppo.py --config recipes/ppo.yaml
"""

from rlvr.ppo import PPOConfig, PPOTrainer
from rlvr.runner import run

if __name__ == "__main__":
    run(trainer_cls=PPOTrainer, config_cls=PPOConfig)
