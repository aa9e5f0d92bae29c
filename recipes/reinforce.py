"""REINFORCE: raw reward as advantage, no baseline, one rollout per prompt allowed.

accelerate launch recipes/reinforce.py --config recipes/reinforce.yaml        # or recipes/tiny/reinforce.yaml on a CPU
"""

from rlvr.training.runner import run

if __name__ == "__main__":
    run("reinforce")
