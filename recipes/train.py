"""Any algorithm: the recipe's `algorithm:` field picks the trainer (rlvr/training/algorithms.py).

accelerate launch recipes/train.py --config my_recipe.yaml       # e.g. a new algorithm with no script of its own
"""

from rlvr.training.runner import run

if __name__ == "__main__":
    run()
