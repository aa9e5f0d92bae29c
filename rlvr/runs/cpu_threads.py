"""How many intra-op threads a CPU run uses: the recipe field `cpu_threads` (`auto`, or a positive integer).

The count follows the recipe and the cores, never the machine's load: a thread count can change float results, so a
count that followed the load would make one command give different runs on a quiet and on a busy machine. When other
jobs hold the cores, the `[threads]` line says so and the count stays (docs/speed.md). GPU runs are left alone.
"""

from __future__ import annotations

import os
import time

import torch

LOCAL_SIZE_ENV = ("LOCAL_WORLD_SIZE", "MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "MV2_COMM_WORLD_LOCAL_SIZE")
CROWDED = 1.5  # the probe at N threads this much slower than at 1: crowded (docs/measurements/speed.md, "Threads")


def local_processes(environ=None) -> int:
    """Training processes on this machine: torchrun's LOCAL_WORLD_SIZE (what `accelerate launch --num_processes N`
    exports), or an MPI launcher's local size; 1 for a plain `python` or single-process `accelerate launch`."""
    environ = os.environ if environ is None else environ
    for name in LOCAL_SIZE_ENV:
        if str(environ.get(name, "")).strip().isdigit() and int(environ[name]) > 0:
            return int(environ[name])
    return 1


def parse_cpu_threads(value) -> int | None:
    """'auto' -> None (decide from the machine); a positive integer up to this machine's cores -> itself (more
    intra-op threads than cores only contend, and a count past a C int overflows torch's call); anything else raises
    ValueError."""
    text = str(value).strip().lower()
    if text == "auto":
        return None
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"{value!r} is neither 'auto' nor a positive integer (1 = the crowded-machine setting)")
    cores = os.cpu_count() or 1
    if int(text) > cores:
        raise ValueError(f"{text} threads is more than this machine's {cores} cores; use auto, or 1 to {cores}")
    return int(text)


def cpu_threads_for(value, cores: int | None = None, processes: int | None = None) -> int:
    """Intra-op threads per training process for `cpu_threads`: N itself; `auto` the cores this process may run on
    (`os.sched_getaffinity`: taskset and cgroup limits count) over the local training processes, at least 1.
    OMP_NUM_THREADS is not read: `accelerate launch` exports 1, which cannot be told apart from a user's own."""
    fixed = parse_cpu_threads(value)
    if fixed is not None:
        return fixed
    cores = len(os.sched_getaffinity(0)) if cores is None else cores
    processes = local_processes() if processes is None else processes
    return max(1, cores // max(1, processes))


def threads_pay_off(threads: int, pairs: int = 15) -> tuple[float, float]:
    """Median seconds of one model-shaped matmul, (2048x128) x (128x384), at `threads` and at 1 thread, the two
    interleaved (`pairs` each, ~30 ms in all on a quiet 2-core machine). Leaves torch at `threads`."""
    a, b = torch.randn(2048, 128), torch.randn(128, 384)
    times = {threads: [], 1: []}
    for count in (threads, 1):  # warm-up: the first multi-threaded op starts the OpenMP pool
        torch.set_num_threads(count)
        torch.mm(a, b)
    for _ in range(pairs):
        for count in (threads, 1):
            torch.set_num_threads(count)
            start = time.perf_counter()
            torch.mm(a, b)
            times[count].append(time.perf_counter() - start)
    torch.set_num_threads(threads)
    return sorted(times[threads])[pairs // 2], sorted(times[1])[pairs // 2]


def apply_cpu_threads(value, use_cpu: bool, echo=None, probe=None) -> int | None:
    """Process-wide, before any model loads: the intra-op threads of a CPU run (returned); GPU runs are left alone.
    Under `auto` with more than one thread, `threads_pay_off` probes for other jobs on the cores, and the `[threads]`
    line (printed by `echo`) names the fix; several local processes skip the probe (they would time each other)."""
    if not use_cpu:
        return None
    threads = cpu_threads_for(value)
    torch.set_num_threads(threads)
    note = f"cpu_threads {value}"
    if parse_cpu_threads(value) is None and threads > 1 and local_processes() == 1:
        many, one = (probe or threads_pay_off)(threads)
        if many >= CROWDED * one:
            note += (
                f"; other jobs hold the cores (a matmul took {many * 1e3:.2f} ms on {threads} threads vs "
                f"{one * 1e3:.2f} ms on one): this run will be slow, not different; cpu_threads: 1 runs faster "
                "on a crowded machine but computes in another order"
            )
    if echo is not None:
        echo(f"[threads] {threads} intra-op thread(s) per process ({note})")
    return threads
