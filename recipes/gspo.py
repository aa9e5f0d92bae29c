"""GSPO: group z-score advantage, sequence-level importance ratio with a tight clip.

accelerate launch recipes/gspo.py --config recipes/gspo.yaml        # or recipes/tiny/gspo.yaml on a CPU
"""

from rlvr.training.runner import run

if __name__ == "__main__":
    run("gspo")
