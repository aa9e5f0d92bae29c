"""RLOO: leave-one-out baseline n/(n-1) * (r - group mean), REINFORCE-style loss without ratio.

accelerate launch recipes/rloo.py --config recipes/rloo.yaml        # or recipes/tiny/rloo.yaml on a CPU
"""

from rlvr.training.runner import run

if __name__ == "__main__":
    run("rloo")
