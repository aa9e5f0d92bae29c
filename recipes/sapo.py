"""SAPO: group z-score advantage, a soft temperature gate instead of the hard clip.

accelerate launch recipes/sapo.py --config recipes/sapo.yaml        # or recipes/tiny/sapo.yaml on a CPU
"""

from rlvr.training.runner import run

if __name__ == "__main__":
    run("sapo")
