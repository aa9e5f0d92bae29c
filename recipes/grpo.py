"""GRPO: group z-score advantage (r - mean) / std, PPO-clip, per-sequence token mean.

accelerate launch recipes/grpo.py --config recipes/grpo.yaml        # or recipes/tiny/grpo.yaml on a CPU
"""

from rlvr.training.runner import run

if __name__ == "__main__":
    run("grpo")
