"""MaxRL: 0/1 success (exact answer, full format) over the group success rate, (b - mean) / mean, plain -A * log pi loss.

accelerate launch recipes/maxrl.py --config recipes/maxrl.yaml        # or recipes/tiny/maxrl.yaml on a CPU
"""

from rlvr.training.runner import run

if __name__ == "__main__":
    run("maxrl")
