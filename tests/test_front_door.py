"""README's front door as a newcomer meets it: after `make main` / `make test`, the shell has only the interpreter and
/usr/bin:/bin on PATH; README enters `.venv` once (`. .venv/bin/activate`), and every command after that line, and
in the first block of each page README's "Next steps:" line links, runs typed exactly as printed.

Each command runs through bash in a scratch folder that looks like the checkout (copies of recipes, sweeps, models,
...), with `.venv` this test run's environment (conftest.newcomer_shell). `runs/bench-tiny/grpo` there comes from
the main job's own GRPO command, shortened to 2 steps. A command that cannot run here is in NOT_RUN with the
reason; one that samples or trains for minutes is in SHORTENED with the flags appended and the reason; every other
command runs character for character. A command README adds that none of these name runs as written, so a new
command is tested the day it is printed.

The repo itself never finds its own tools through PATH (rlvr.runs.tools): the last tests hold the code to that.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, newcomer_shell

README = REPO / "README.md"
ACTIVATE = ". .venv/bin/activate"
SCRATCH_COPIES = ("recipes", "sweeps", "accelerate_configs", "models", "slurm", "benchmarks", "examples")
MAIN_JOB_RUN = "runs/bench-tiny/grpo"
# the main job's GRPO command (benchmarks/tiny_main_job.py runs it), shortened to 2 of its 140 steps
MAIN_JOB_GRPO = f"accelerate launch recipes/grpo.py --config recipes/tiny/grpo.yaml --output_dir {MAIN_JOB_RUN}"
SHORT_TRAINING = "--max_steps 2"

NOT_RUN = {  # prefix -> why this test cannot run it here
    "python -m pytest": "the test suite itself (README's `make test` runs it in CI)",
    "pip install": "installs packages: the GPU quickstart's own environment",
    "accelerate launch --config_file accelerate_configs/single_gpu.yaml": "needs a CUDA GPU and Qwen3 from the Hub",
    "rlvr evaluate --model runs/grpo-qwen3": "needs a trained Qwen3 run (GPU)",
    "PYTHONPATH=my_project": "README's Extending example: tests/test_readme_extending.py writes its two files and "
    "runs it in this same newcomer's shell",
    "rlvr sweep sweeps/group_size.yaml --max_steps": "trains every setting of the sweep (minutes)",
    "rlvr sweep sweeps/group_size.yaml\n": "the full ablation (an hour)",
    "rlvr sweep sweeps/reference.yaml --only": "trains and evaluates runs (minutes)",
}
SHORTENED = {  # prefix -> (flags appended, why): the evaluations sample 200 held-out words x 8 by default
    "rlvr evaluate ": ("--num_prompts 4", "4 of the 200 held-out words"),
    "rlvr before-after ": ("--num_prompts 4", "4 of the 200 held-out words, on both models"),
    "rlvr report runs/bench-tiny/grpo --before": ("--num_prompts 4", "evaluates both models: 4 held-out words"),
}


def bash_blocks(text: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r"^```(?:bash|sh)\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)]


def without_comment(line: str) -> str:
    """The line as typed, up to its comment (a `#` that starts a word outside quotes), trailing blanks dropped."""
    words = shlex.split(line, comments=True)
    for match in re.finditer(r"(?:^|\s)#", line):
        head = line[: match.start()]
        try:
            if shlex.split(head) == words:
                return head.strip()
        except ValueError:  # the '#' sits inside an open quote
            continue
    return line.strip()


def commands_of(block: str) -> list[str]:
    """The block's commands as typed: continuation lines joined, comments and blank lines dropped."""
    joined = re.sub(r"\s*\\\n\s*", " ", block)
    return [command for line in joined.splitlines() if (command := without_comment(line))]


def next_step_pages(text: str) -> list[Path]:
    line = next(line for line in text.split("\n\n") if line.startswith("Next steps:"))
    return [REPO / target for target in re.findall(r"\]\((docs/[^)#\s]+)\)", line)]


def front_door_commands(text: str | None = None) -> list[tuple[str, str]]:
    """(where, command): README's commands from its activation line on, then each next-step page's first block."""
    text = README.read_text() if text is None else text
    found, entered = [], False
    for block in bash_blocks(text):
        for command in commands_of(block):
            entered = entered or command == ACTIVATE
            if entered and command != ACTIVATE:
                found.append(("README.md", command))
    assert entered, f"README never enters the environment ({ACTIVATE!r} in a bash block)"
    for page in next_step_pages(text):
        blocks = bash_blocks(page.read_text())
        found += [(str(page.relative_to(REPO)), command) for command in (commands_of(blocks[0]) if blocks else [])]
    return list(dict.fromkeys(found))


def how_to_run(command: str) -> tuple[str | None, str]:
    """(what the test types, or None if not run; why it differs from the command, or '')."""
    typed = command + "\n"
    for prefix, why in NOT_RUN.items():
        if typed.startswith(prefix):
            return None, why
    for prefix, (flags, why) in SHORTENED.items():
        if typed.startswith(prefix):
            return f"{command} {flags}", why
    return command, ""


# ---- the extractor's own checks: a command README adds, or the activation line dropped, must not slip through --


def test_extractor_takes_every_command_after_activation_and_the_next_step_pages():
    text = (
        "```bash\nmake main\n```\n```bash\n. .venv/bin/activate   # enter\nrlvr doctor runs/x \\\n  --thresholds\n"
        "```\n\nNext steps: [d](docs/doctor.md)\n\n```bash\nrlvr new-command --flag 1\n```\n"
    )
    commands = front_door_commands(text)
    assert ("README.md", "rlvr doctor runs/x --thresholds") in commands
    assert ("README.md", "rlvr new-command --flag 1") in commands  # unknown: runs as written (and would fail)
    assert ("README.md", "make main") not in commands
    assert ("docs/doctor.md", "rlvr doctor --thresholds") in commands
    assert how_to_run("rlvr new-command --flag 1") == ("rlvr new-command --flag 1", "")
    with pytest.raises(AssertionError, match="never enters"):
        front_door_commands("```bash\nrlvr doctor runs/x\n```\n\nNext steps: none\n")


def test_readme_enters_the_environment_right_after_its_two_commands():
    blocks = bash_blocks(README.read_text())
    assert [commands_of(b) for b in blocks[:1]] == [["make main", "make test"]]
    assert commands_of(blocks[1])[0] == ACTIVATE


# ---- running them ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def newcomer(tmp_path_factory) -> Path:
    """A folder like the checkout, `runs/bench-tiny/grpo` trained there by the main job's command (2 steps)."""
    root = tmp_path_factory.mktemp("front-door")
    for name in SCRATCH_COPIES:
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    done = newcomer_shell(root, f"{MAIN_JOB_GRPO} {SHORT_TRAINING} --report_to none")
    assert done.returncode == 0, done.stdout[-1500:] + done.stderr[-3000:]
    return root


def test_every_front_door_command_runs_as_printed(newcomer):
    ran, failed = [], []
    for where, command in front_door_commands():
        typed, _ = how_to_run(command)
        if typed is None:
            continue
        done = newcomer_shell(newcomer, typed)
        ran.append(typed)
        if done.returncode != 0:
            failed.append(f"{where}: $ {typed}\n  exit {done.returncode}: {(done.stderr or done.stdout)[-800:]}")
    assert not failed, "\n".join(failed)
    assert any(c.startswith("rlvr report runs/bench-tiny/grpo") for c in ran)
    assert "rlvr doctor runs/bench-tiny/grpo" in ran and any(c.startswith("rlvr plan") for c in ran)
    assert any(c.startswith("rlvr sweep") and c.endswith("--dry_run") for c in ran)
    assert (newcomer / MAIN_JOB_RUN / "report.md").exists()


def test_without_the_activation_line_the_tools_are_not_found(newcomer):
    """The shell the test types into really is a newcomer's: no `rlvr` of this machine's leaks in without README's
    line (if one did, every command above would pass for the wrong reason)."""
    done = subprocess.run(
        ["bash", "-c", "command -v rlvr accelerate pytest || echo none"],
        cwd=newcomer,
        check=False,
        env={"PATH": f"{newcomer / '.newcomer-bin'}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert done.stdout.strip() == "none", done.stdout


# ---- the repo's own launches name the interpreter --------------------------------------------------------------

# an argv list handed to subprocess/Popen (or built as `command = [...]`) whose first word is a bare tool name
TOOL_BY_NAME = re.compile(
    r"""(?:(?:run|Popen|call|check_output)\(|(?:command|argv|cmd|prefix)\s*=\s*)\[\s*"""
    r"""["'](accelerate|torchrun|rlvr|trl|tensorboard|pytest|deepspeed)["']"""
)
LAUNCH_DIRS = ("rlvr", "benchmarks", "slurm", "tests", "examples", "recipes", "rewards", "data", "sweeps")


def test_no_command_the_repo_starts_finds_its_tool_on_path():
    """An argv list that starts with a bare tool name would be looked up on PATH; rlvr.runs.tools names the
    interpreter instead."""
    offenders = []
    for folder in LAUNCH_DIRS:
        for path in (REPO / folder).rglob("*.py"):
            if path.resolve() == Path(__file__).resolve():  # its own examples below
                continue
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if TOOL_BY_NAME.search(line):
                    offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert offenders == []
    assert TOOL_BY_NAME.search('command = ["accelerate", "launch", "recipes/grpo.py"]')
    assert TOOL_BY_NAME.search('subprocess.run(["rlvr", "doctor", run_dir], check=False)')
    assert not TOOL_BY_NAME.search('parser.add_argument("--launcher", choices=["accelerate", "python"])')


def test_every_tool_module_runs_in_this_interpreter(tmp_path):
    from rlvr.runs import tools

    for tool in tools.MODULES:
        done = newcomer_shell(tmp_path, f"{shlex.join(tools.command(tool))} --help >/dev/null", timeout=120)
        assert done.returncode == 0, f"{tool}: {done.stderr[-600:]}"


# ---- the main job's verdict, which CI turns into its exit status --------------------------------------------------


def test_main_job_marks_a_figure_outside_readmes_range():
    sys.path.insert(0, str(REPO / "benchmarks"))
    import tiny_main_job

    low, high = tiny_main_job.EXPECTED["after"]
    before = tiny_main_job.EXPECTED["before"][0]
    inside = tiny_main_job.expectation({"before": {"exact_match": before}, "after": {"exact_match": (low + high) / 2}})
    assert [ok for _, ok in inside] == [True, True]
    outside = tiny_main_job.expectation({"before": {"exact_match": before}, "after": {"exact_match": low - 0.02}})
    assert [ok for _, ok in outside] == [True, False] and "OUTSIDE" in outside[1][0]


def test_fail_outside_range_refuses_a_command_readme_states_no_range_for(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "benchmarks/tiny_main_job.py",
            "--fail_outside_range",
            "--max_steps",
            "2",
            "--output_dir",
            str(tmp_path / "out"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 2 and done.stderr.strip().startswith("error: --fail_outside_range: "), done.stderr
    assert not (tmp_path / "out").exists()
