"""CISPO: group z-score advantage, clipped stop-gradient importance weight on every token.

accelerate launch recipes/cispo.py --config recipes/cispo.yaml        # or recipes/tiny/cispo.yaml on a CPU
"""

from rlvr.training.runner import run

if __name__ == "__main__":
    run("cispo")
