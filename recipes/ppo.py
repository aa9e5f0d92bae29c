"""PPO: learned value model (critic), GAE over tokens, KL as a per-token reward penalty, clipped value loss.

accelerate launch recipes/ppo.py --config recipes/ppo.yaml        # or recipes/tiny/ppo.yaml on a CPU
"""

from rlvr.training.runner import run

if __name__ == "__main__":
    run("ppo")
