"""DAPO: GRPO + clip-higher, token-level loss, overlong penalty and dynamic sampling (drop zero-variance groups,
resample).

    accelerate launch recipes/dapo.py --config recipes/dapo.yaml        # or recipes/tiny/dapo.yaml on a CPU
"""

from rlvr.training.runner import run

if __name__ == "__main__":
    run("dapo")
