"""The main job runs its GRPO phase in its own process (benchmarks/tiny_main_job.py, `--launcher inprocess`, the
default): that run must be the typed command's run, record for record, so that the phase's seconds are the only thing
the launcher changes."""

import importlib.util

import torch
from conftest import REPO, TINY_RECIPE


def benchmark(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tiny_main_job = benchmark("tiny_main_job")
records = benchmark("main_job_range").metrics_without_timing  # the rows a run's machine speed does not move

OVERRIDES = ["--cpu_threads", "1", "--max_steps", "3", "--eval_steps", "2", "--eval_prompts", "4"]


def test_the_in_process_grpo_phase_is_the_typed_commands_run(tmp_path):
    threads = torch.get_num_threads()
    try:  # the in-process run applies the recipe's cpu_threads to this process
        seconds = tiny_main_job.run_grpo(TINY_RECIPE, tmp_path / "inprocess", "inprocess", OVERRIDES)
    finally:
        torch.set_num_threads(threads)
    tiny_main_job.run_grpo(TINY_RECIPE, tmp_path / "typed", "python", OVERRIDES)
    inprocess, typed = records(tmp_path / "inprocess"), records(tmp_path / "typed")
    assert seconds > 0 and len(inprocess) == 3 + 2 + 1  # 3 steps, 2 evaluations, the run's summary row
    assert inprocess == typed
    assert sorted(p.name for p in (tmp_path / "inprocess").iterdir()) == sorted(
        p.name for p in (tmp_path / "typed").iterdir()
    )


def test_settle_waits_for_the_load_to_fall_and_says_when_it_did_not(monkeypatch):
    """`main_job_range.py --settle`: every run starts at a quiet load, or its line says the wait ran out."""
    machine_load = benchmark("machine_load")
    loads, slept, lines = iter([1.8, 1.2, 0.6, 0.4]), [], []
    monkeypatch.setattr(machine_load.os, "getloadavg", lambda: (next(loads), 0.0, 0.0))
    monkeypatch.setattr(machine_load.time, "sleep", slept.append)
    assert machine_load.settle(0.5, poll_s=5, echo=lines.append) == 0.4
    assert slept == [5, 5, 5] and lines == ["[settle] 1-minute load 0.40 after waiting 15 s"]
    loads, lines = iter([2.0] * 10), []
    assert machine_load.settle(0.5, max_wait_s=10, poll_s=5, echo=lines.append) == 2.0
    assert lines == ["[settle] 1-minute load 2.00 after waiting 10 s, still above 0.5 after 10 s"]
