"""Dr. GRPO: r - group mean (no std), no per-sequence length normalisation (`loss_type: dr_grpo`).

accelerate launch recipes/drgrpo.py --config recipes/drgrpo.yaml        # or recipes/tiny/drgrpo.yaml on a CPU
"""

from rlvr.training.runner import run

if __name__ == "__main__":
    run("drgrpo")
