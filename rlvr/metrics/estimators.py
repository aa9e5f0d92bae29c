"""pass@k and maj@k of one prompt from its n samples, each exact over every k-subset of the n (no resampling noise).

pass@k: the chance that at least one of k samples drawn without replacement from the n is correct, the unbiased
estimator of Chen et al. (2021), 1 - C(n-c, k) / C(n, k) with c correct of n.

maj@k: the chance that the majority answer of k samples drawn without replacement from the n is the expected one.
Each sample votes for its extracted answer (a sample without one does not vote); the answer with the most votes among
the k wins, and a tie is split evenly: each of j tied answers gets 1/j (so a k-subset with no vote at all counts 0).
The mean over all C(n, k) subsets is counted exactly: for each number x of votes the expected answer gets, the other
answers' ways of getting fewer than x votes or exactly x (a tie) are multiplied out class by class. So maj@1 is the
share of the n samples that are right (the exact match), and maj@n is the vote of all n (ties split).
"""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c are correct (Chen et al. 2021): 1 - C(n-c, k) / C(n, k)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def maj_at_k(votes: list, expected, k: int) -> float:
    """maj@k of one prompt (module docstring): `votes` holds each of the n samples' answer (None: no vote), compared
    with `expected` by equality; exact over all C(n, k) subsets, ties split evenly between the tied answers."""
    n = len(votes)
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got n={n}, k={k}")
    counts = Counter(vote for vote in votes if vote is not None)
    right = counts.pop(expected, 0) if expected is not None else 0
    silent = n - right - sum(counts.values())
    credit = Fraction(0)
    for x in range(1, min(right, k) + 1):  # x of the k samples vote for the expected answer
        # ways[size][ties]: the other answers' votes in the subset, `size` of them, `ties` answers with exactly x
        ways = [[0] * (len(counts) + 1) for _ in range(k - x + 1)]
        ways[0][0] = 1
        for m in counts.values():
            grown = [[0] * (len(counts) + 1) for _ in range(k - x + 1)]
            for size, row in enumerate(ways):
                for ties, count in enumerate(row):
                    if not count:
                        continue
                    for y in range(min(m, x, k - x - size) + 1):
                        grown[size + y][ties + (y == x)] += count * math.comb(m, y)
            ways = grown
        credit += math.comb(right, x) * sum(
            Fraction(count * math.comb(silent, k - x - size), ties + 1)
            for size, row in enumerate(ways)
            for ties, count in enumerate(row)
        )
    return float(credit / math.comb(n, k))
