"""How busy the machine is around a measurement: one place for every benchmark under benchmarks/.

A timing taken while other jobs compete for the cores is wrong (a thread waits at the OpenMP barrier for one that is
descheduled: docs/speed.md), so each benchmark prints the load average before and after its measurement and warns up
front when the machine is busy: a 1-minute load above 0.5 per core available to this process. A figure meant for README comes from a run that printed no warning, made alone, interleaved against
its baseline in that run.
"""

from __future__ import annotations

import os
import time
from contextlib import contextmanager

BUSY_PER_CORE = 0.5


def load_line(label: str) -> tuple[str, bool]:
    """('load before: 0.12 0.28 0.14 (1/5/15 min) on 2 cores', busy?) from `os.getloadavg`."""
    cores = len(os.sched_getaffinity(0))
    one, five, fifteen = os.getloadavg()
    busy = one > BUSY_PER_CORE * cores
    return f"load {label}: {one:.2f} {five:.2f} {fifteen:.2f} (1/5/15 min) on {cores} cores", busy


@contextmanager
def measured_load(name: str, echo=print):
    """Print the load before (with a warning when busy) and after the block; yields {'before', 'after', 'busy'}."""
    line, busy = load_line("before")
    record = {"before": os.getloadavg()[0], "busy": busy}
    echo(f"[{name}] {line}")
    if busy:
        echo(
            f"[{name}] warning: the machine is busy (load above {BUSY_PER_CORE} per core): timings from this run "
            "show direction only; measure alone on a quiet machine for figures"
        )
    try:
        yield record
    finally:
        line, _ = load_line("after")
        record["after"] = os.getloadavg()[0]
        echo(f"[{name}] {line}")


def settle(below: float, max_wait_s: float = 600.0, poll_s: float = 5.0, echo=print) -> float:
    """Wait until the 1-minute load average is at most `below` (or `max_wait_s` has passed); returns the load then.

    Why: runs one after another each start in the load the previous one left (a 2-thread run leaves ~1.5-2 on 2 cores,
    which takes minutes to decay), so a timing table from back-to-back runs has one quiet figure, the first. Waiting
    before each run makes every figure a quiet one, or says it is not."""
    waited, load = 0.0, os.getloadavg()[0]
    while load > below and waited < max_wait_s:
        time.sleep(poll_s)
        waited += poll_s
        load = os.getloadavg()[0]
    note = "" if load <= below else f", still above {below} after {max_wait_s:.0f} s"
    echo(f"[settle] 1-minute load {load:.2f} after waiting {waited:.0f} s{note}")
    return load
