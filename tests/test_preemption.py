"""Preemption: SIGTERM mid-run, then `--resume_from_checkpoint true`, equals an uninterrupted run.

A run of the fast recipe is started as a real process (`recipes/grpo.py`, as a scheduler would start it); when its
metrics.jsonl shows step k (fixed below, printed on failure), it gets SIGTERM. It must finish the step it is in,
write a complete checkpoint although the recipe says `save_strategy: "no"`, save no final model, exit 143 with one
last stderr line naming the checkpoint and the resume flag. Resumed with the same command, it runs to max_steps.

Compared with an uninterrupted run of the same seed, every metrics row and every rollout is bit-identical apart from
wall-clock timings: on the CPU the computation is deterministic (one thread per process, the `threads` speed-up), and
the checkpoint restores weights, optimizer, scheduler, the RNG states, the sampler's position and the rollout
ledger's counters, so the resumed steps draw the same completions and take the same updates. Every step appears once
in every record.

The 2-process variant (torchrun, gloo) signals rank 1 only: both ranks must stop after the same step (the flag is
all-reduced at each step end) and write one checkpoint, and the resumed run matches an uninterrupted 2-process run.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import CHECKOUT_ENV, FAST_RECIPE, REPO, TORCHRUN_TWO, read_jsonl, run_ok

from rlvr.analysis.loaders import load_run
from rlvr.metrics.keys import is_timing
from rlvr.runs.checkpoints import checkpoint_problem

MAX_STEPS = 8
# The step whose record triggers the signal: the run is then inside step k + 1 and usually stops after it, with steps
# on both sides of the checkpoint. A tiny step takes tens of milliseconds on an idle machine, so the signal may land a
# few steps later: MAX_STEPS leaves room for that. Fixed, so a failure reruns the same case.
SIGNAL_STEP = {"one process": 2, "two processes": 1}
COMMON = [
    "--config",
    FAST_RECIPE,
    "--report_to",
    "none",
    "--print_rollouts",
    "false",
    "--max_steps",
    str(MAX_STEPS),
    "--max_completion_length",
    "16",
    "--seed",
    "42",
    "--resume_from_checkpoint",
    "true",
]
STOP_LINE = re.compile(
    r"^stopped by (SIG\w+|a signal on another rank) after step (\d+): checkpoint (\S+); "
    r"rerun the same command with --resume_from_checkpoint true$"
)
ENV = {**CHECKOUT_ENV, "OMP_NUM_THREADS": "1"}


def logged_steps(out: Path) -> list[dict]:
    return (
        [row for row in read_jsonl(out / "metrics.jsonl") if "loss" in row] if (out / "metrics.jsonl").exists() else []
    )


def signal_at_step(process: subprocess.Popen, out: Path, step: int, target_pid: int | None = None) -> tuple[str, str]:
    """Wait until metrics.jsonl holds `step`, send SIGTERM (to `target_pid`, default the process), collect output."""
    deadline = time.monotonic() + 300
    while not any(row["step"] >= step for row in logged_steps(out)):
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the run never reached the step"
        time.sleep(0.01)
    os.kill(target_pid or process.pid, signal.SIGTERM)
    return process.communicate(timeout=300)


def same_records(resumed: Path, uninterrupted: Path) -> None:
    """Every step once in each record; equal values, timings aside."""
    rows, reference = logged_steps(resumed), logged_steps(uninterrupted)
    assert [r["step"] for r in rows] == [r["step"] for r in reference] == list(range(1, MAX_STEPS + 1))
    for row, ref in zip(rows, reference):
        assert row.keys() == ref.keys()
        different = {k: (row[k], ref[k]) for k in row if not is_timing(k) and row[k] != ref[k]}
        assert not different, f"step {row['step']}: {different}"
    assert sum("train_runtime" in r for r in read_jsonl(resumed / "metrics.jsonl")) == 1
    rollouts, reference_rollouts = read_jsonl(resumed / "rollouts.jsonl"), read_jsonl(uninterrupted / "rollouts.jsonl")
    assert Counter(r["step"] for r in rollouts) == Counter(r["step"] for r in reference_rollouts)
    assert rollouts == reference_rollouts  # same completions, same rewards, in the same order
    assert not (resumed / "previous-runs").exists()  # nothing moved aside: one run's records


def check_stop(returncode: int, stderr: str, out: Path, signalled_at: int) -> int:
    """The stopped run: exit 143, last line names the checkpoint, which is complete; returns the stop step."""
    last = stderr.strip().splitlines()[-1]
    match = STOP_LINE.match(last)
    assert returncode == 143 and match, f"k={signalled_at} rc={returncode}: {stderr[-3000:]}"
    step, checkpoint = int(match.group(2)), Path(match.group(3))
    assert signalled_at <= step < MAX_STEPS, f"k={signalled_at}: stopped at {step}"
    assert checkpoint == out / f"checkpoint-{step}" and checkpoint_problem(checkpoint) is None
    assert [p.name for p in out.glob("checkpoint-*")] == [checkpoint.name]  # save_strategy "no": only this one
    assert not (out / "model.safetensors").exists()  # no final save for an unfinished run
    assert [r["step"] for r in logged_steps(out)] == list(range(1, step + 1))
    closing = read_jsonl(out / "metrics.jsonl")[-1]  # TRL closes it as if finished; the row says it was stopped
    assert "train_runtime" in closing and STOP_LINE.match(closing["stopped_early"]) and not load_run(out).finished
    return step


def start(command: list[str]) -> subprocess.Popen:
    """A run as a scheduler starts it: its own process, its output piped."""
    return subprocess.Popen(command, cwd=REPO, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_sigterm_mid_run_resumes_as_if_uninterrupted(tiny_model_dir, tmp_path):
    command = [sys.executable, "recipes/grpo.py", *COMMON, "--model_name_or_path", tiny_model_dir]
    out, reference = tmp_path / "preempted", tmp_path / "uninterrupted"
    k = SIGNAL_STEP["one process"]

    first = start([*command, "--output_dir", str(out)])
    _, stderr = signal_at_step(first, out, k)
    step = check_stop(first.returncode, stderr, out, k)

    resumed = run_ok([*command, "--output_dir", str(out)], env=ENV, timeout=300)
    assert f"[resume] from {out / f'checkpoint-{step}'}" in resumed.stdout
    assert load_run(out).finished
    run_ok([*command, "--output_dir", str(reference)], env=ENV, timeout=300)
    same_records(out, reference)
    counters = [(r["generation_step"], r["generated_samples"]) for r in logged_steps(out)]
    assert counters == [(s, 16 * s) for s in range(1, MAX_STEPS + 1)]  # the ledger continued from the checkpoint


def worker_pids(launcher_pid: int) -> dict[int, int]:
    """{rank: pid} of torchrun's workers, from /proc (their environment holds RANK)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        pids = {}
        for task in Path(f"/proc/{launcher_pid}/task").iterdir():
            for pid in (task / "children").read_text().split():
                env = dict(
                    item.split("=", 1) for item in Path(f"/proc/{pid}/environ").read_text().split("\0") if "=" in item
                )
                if "RANK" in env:
                    pids[int(env["RANK"])] = int(pid)
        if len(pids) == 2:
            return pids
        time.sleep(0.1)
    raise AssertionError("torchrun's two workers did not start")


@pytest.mark.serial
def test_two_processes_stop_after_the_same_step_when_one_rank_is_signalled(tiny_model_dir, tmp_path):
    """2 processes x 8 completions, one generation step per optimizer step; SIGTERM to rank 1 alone."""
    launch = [
        *TORCHRUN_TWO,
        "recipes/grpo.py",
        *COMMON,
        "--model_name_or_path",
        tiny_model_dir,
        "--use_cpu",
        "true",
        "--per_device_train_batch_size",
        "8",
    ]
    out, reference = tmp_path / "preempted", tmp_path / "uninterrupted"
    k = SIGNAL_STEP["two processes"]

    first = start([*launch, "--output_dir", str(out)])
    ranks = worker_pids(first.pid)
    _, stderr = signal_at_step(first, out, k, target_pid=ranks[1])
    # rank 0 never got the signal: it stops because rank 1 did, after the same step, and prints the line
    lines = [line for line in stderr.splitlines() if STOP_LINE.match(line)]
    assert len(lines) == 1 and "a signal on another rank" in lines[0], f"k={k}: {stderr[-3000:]}"
    step = int(STOP_LINE.match(lines[0]).group(2))
    assert first.returncode != 0  # torchrun reports its workers' 143 as a failure
    assert k <= step < MAX_STEPS and checkpoint_problem(out / f"checkpoint-{step}") is None, f"k={k}"
    assert [p.name for p in out.glob("checkpoint-*")] == [f"checkpoint-{step}"]
    assert [r["step"] for r in logged_steps(out)] == list(range(1, step + 1))

    for target in (out, reference):
        run_ok([*launch, "--output_dir", str(target)], env=ENV, timeout=300)
    same_records(out, reference)


def test_sigint_sets_a_flag_the_step_end_acts_on(tmp_path):
    """In-process: the handler only records SIGINT (no KeyboardInterrupt mid-step); the step end asks for a save and
    a stop; the line and status (130) exist once the checkpoint is saved; the handlers are restored afterwards."""
    from types import SimpleNamespace

    from transformers import TrainerControl

    from rlvr.training.stopping import PreemptionCallback

    callback = PreemptionCallback()
    args, state, control = (
        SimpleNamespace(output_dir=str(tmp_path), device="cpu"),
        SimpleNamespace(global_step=7),
        TrainerControl(),
    )
    before = signal.getsignal(signal.SIGINT)
    callback.on_train_begin(args, state, control)
    try:
        callback.on_step_end(args, state, control)
        assert not (control.should_save or control.should_training_stop)  # no signal: nothing changes
        os.kill(os.getpid(), signal.SIGINT)  # would raise KeyboardInterrupt with Python's default handler
        assert callback.signal == signal.SIGINT and callback.stop is None
        callback.on_step_end(args, state, control)
        assert control.should_save and control.should_training_stop and callback.stop is None
        callback.on_save(args, state, control)
        assert callback.stop.status == 130
        assert callback.stop.line == (
            f"stopped by SIGINT after step 7: checkpoint {tmp_path / 'checkpoint-7'}; "
            "rerun the same command with --resume_from_checkpoint true"
        )
    finally:
        callback.on_train_end(args, state, control)
    assert signal.getsignal(signal.SIGINT) is before


def test_a_second_signal_ends_the_process_at_once():
    """Ctrl-C twice: the first is honoured at the step end, the second takes the default action immediately."""
    code = (
        "import os, signal, types\n"
        "from rlvr.training.stopping import PreemptionCallback\n"
        "cb = PreemptionCallback()\n"
        "cb.on_train_begin(None, None, None)\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "print('first signal recorded', cb.signal, flush=True)\n"
        "os.kill(os.getpid(), signal.SIGTERM)\n"
        "print('still running')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=ENV, capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == -signal.SIGTERM, result.stderr[-2000:]
    assert result.stdout.splitlines() == [f"first signal recorded {int(signal.SIGTERM)}"]
