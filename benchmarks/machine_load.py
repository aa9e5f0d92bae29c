"""How busy the machine is around a measurement: one place for every benchmark under benchmarks/.

A timing taken while other jobs compete for the cores is wrong (on the shared 2-core machine small matmuls ran 50x
slower with a second thread waiting at the OpenMP barrier), so each benchmark prints the load average before and
after its measurement and warns up front when the machine is busy: a 1-minute load above 0.5 per core available to
this process. A figure meant for README comes from a run that printed no warning, made alone, interleaved against
its baseline in that run.
"""

from __future__ import annotations

import os
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
