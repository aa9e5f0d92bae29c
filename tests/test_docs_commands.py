"""README.md and docs/ stay true: every repo path they mention exists, and every shell command in their ```bash blocks
runs, in a fast form, on the tiny model (or is listed in NOT_RUN with the reason CI cannot run it).

Fast forms, so the whole file stays near a minute on 2 cores: training commands (`accelerate launch ...`,
`python recipes/<x>.py ...`) run in-process as a dry run (parse, validate, probe the rewards, build the data, print
the batch plan); `rlvr evaluate` / `before-after` / `report` sample 2 prompts x 1 sample. Commands run in a scratch
folder holding copies of the recipes, sweeps, configs, models and scripts, so what they write stays out of the
checkout; `runs/bench-tiny/grpo` there is a 1-step run of the tiny random model, standing in for the main job's run.
docs/measurements/ are logs of commands that ran: their paths are checked, their commands are not rerun.
"""

from __future__ import annotations

import re
import runpy
import shlex
import shutil
import sys
from pathlib import Path

import pytest
from conftest import REPO, run_args

COMMAND_DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
PATH_DOCS = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]

# Top-level folders of the repository: a mention starting with one of these is a repo path that must exist.
REPO_DIRS = (
    "recipes",
    "rewards",
    "data",
    "rlvr",
    "tests",
    "benchmarks",
    "sweeps",
    "results",
    "accelerate_configs",
    "models",
    "toy_rlvr",
    "docs",
    "slurm",
    ".ci",
)
PATH_RE = re.compile(r"(?<![\w./-])((?:" + "|".join(map(re.escape, REPO_DIRS)) + r")/[\w./{},<>*-]*)")
LINK_RE = re.compile(r"\]\(([^)\s]+)\)")

# Commands CI does not run, by prefix, with the reason. Every other command in a ```bash block must run.
NOT_RUN = {
    "pip install": "installs packages; CI's environment is installed by .ci/run",
    "python -m pytest": "the test suite itself",
    ". .venv/bin/activate": "enters the environment; tests/test_front_door.py types README's commands after it",
    "make test": "the test suite itself (CI runs it: .ci/run)",
    "make main": "the main job, ~3 min of training; `pytest -m slow` runs benchmarks/tiny_main_job.py",
    "python recipes/tiny/sft.py": "retrains models/tiny-speller from 20,000 rows (~500 steps); "
    "tests/test_sft_main.py runs the script on sft.yaml with a 4-step budget",
    "CUDA_VISIBLE_DEVICES=7 trl vllm-serve": "needs a GPU and vLLM",
    "torchrun": "two training processes; tests/test_distributed.py runs them",
    "rlvr data --config recipes/grpo.yaml --push_to_hub": "needs the Hugging Face Hub",
    "rlvr evaluate --model runs/grpo-qwen3": "needs a trained Qwen3 run (GPU)",
    "rlvr sweep sweeps/group_size.yaml --max_steps": "trains every setting of the sweep (minutes)",
    "rlvr sweep sweeps/group_size.yaml\n": "the full ablation (an hour)",
    "rlvr sweep sweeps/reference.yaml --only": "trains and evaluates runs (minutes)",
    "PYTHONPATH=my_project": "README's Extending example: tests/test_readme_extending.py writes its files and runs it",
    "rlvr speedrun": "trains six runs, each evaluated on the full held-out set every 10 steps (tens of minutes); "
    "tests/test_speedrun_judge.py runs the judge on short runs",
}
NOT_RUN_EXACT = {"python benchmarks/gpu_check.py": "needs a CUDA GPU"}
SCRATCH_COPIES = ("recipes", "sweeps", "accelerate_configs", "models", "slurm", "benchmarks", "examples")
MAIN_JOB_RUN = "runs/bench-tiny/grpo"
FAST_FLAGS = {  # appended to rlvr commands that sample: last flag wins in argparse
    "evaluate": ["--num_prompts", "2", "--num_samples", "1", "--k", "1", "--no_progress"],
    "before-after": ["--num_prompts", "2", "--num_samples", "1", "--k", "1"],
    "report": ["--num_prompts", "2"],
}


# ---- extraction -----------------------------------------------------------------------------------------------


def code_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block."""
    return [
        (m.group(1), m.group(2)) for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)
    ]


def shell_commands(text: str) -> list[str]:
    """Each command of the ```bash blocks: continuation lines joined, comments and blank lines dropped."""
    commands = []
    for language, body in code_blocks(text):
        if language not in ("bash", "sh", "shell"):
            continue
        for line in body.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words:
                commands.append(shlex.join(words))
    return commands


def expand_braces(path: str) -> list[str]:
    match = re.search(r"\{([^{}]*)\}", path)
    if not match:
        return [path]
    return [
        p
        for choice in match.group(1).split(",")
        for p in expand_braces(path[: match.start()] + choice + path[match.end() :])
    ]


def mentioned_paths(text: str, doc: Path) -> list[tuple[str, Path]]:
    """(as written, resolved) for every repo path in the text and every relative Markdown link."""
    found = []
    for raw in PATH_RE.findall(text):
        raw = raw.rstrip(".,:;")
        if "<" in raw or "*" in raw or ">" in raw:  # a placeholder (recipes/<algorithm>.yaml) names no one file
            continue
        found += [(raw, REPO / p) for p in expand_braces(raw)]
    for target in LINK_RE.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        found.append((target, (doc.parent / target.split("#")[0]).resolve()))
    return found


def missing_paths(text: str, doc: Path) -> list[str]:
    return sorted({raw for raw, path in mentioned_paths(text, doc) if not path.exists()})


# ---- the extractor's own tests: a stale path or a dropped command must not slip through ----------------------


def test_extractor_finds_a_stale_path_in_a_broken_copy(tmp_path):
    readme = (REPO / "README.md").read_text()
    assert missing_paths(readme, REPO / "README.md") == []
    broken = tmp_path / "README.md"
    broken.write_text(
        readme + "\nSee `rlvr/run_records.py` and [the page](docs/nope.md).\n"
        "```bash\npython recipes/grpo.py --config recipes/tiny/gone.yaml   # stale\n```\n"
    )
    assert missing_paths(broken.read_text(), REPO / "README.md") == [
        "docs/nope.md",
        "recipes/tiny/gone.yaml",
        "rlvr/run_records.py",
    ]


def test_extractor_joins_continuations_drops_comments_and_expands_braces():
    text = (
        "```bash\n# a comment\naccelerate launch recipes/grpo.py \\\n    --config recipes/grpo.yaml  # trailing\n\n"
        "rlvr plan --config recipes/grpo.yaml\n```\n```yaml\nnot: a command\n```\n"
    )
    assert shell_commands(text) == [
        "accelerate launch recipes/grpo.py --config recipes/grpo.yaml",
        "rlvr plan --config recipes/grpo.yaml",
    ]
    assert expand_braces("recipes/tiny/{grpo,ppo}.yaml") == ["recipes/tiny/grpo.yaml", "recipes/tiny/ppo.yaml"]
    assert missing_paths("`recipes/<algorithm>.py` `sweeps/lr_{grpo,nope}.yaml`", REPO / "README.md") == [
        "sweeps/lr_{grpo,nope}.yaml"
    ]


@pytest.mark.parametrize("doc", PATH_DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_path_mentioned_exists(doc):
    assert missing_paths(doc.read_text(), doc) == []


def test_readme_is_a_front_door_under_20_kb():
    assert (REPO / "README.md").stat().st_size <= 20_000


# ---- running the commands -------------------------------------------------------------------------------------


def all_commands() -> list[tuple[str, str]]:
    """(doc, command), each distinct command once."""
    seen, out = set(), []
    for doc in COMMAND_DOCS:
        for command in shell_commands(doc.read_text()):
            if command not in seen:
                seen.add(command)
                out.append((str(doc.relative_to(REPO)), command))
    return out


def why_not_run(command: str) -> str | None:
    if command in NOT_RUN_EXACT:
        return NOT_RUN_EXACT[command]
    return next((why for prefix, why in NOT_RUN.items() if (command + "\n").startswith(prefix)), None)


def fast_form(words: list[str]) -> tuple[dict, str, list[str]]:
    """(env, kind, argv) of the in-process equivalent: kind is 'script', 'module' or 'rlvr'."""
    env = {}
    while words and re.match(r"^[A-Z_]+=", words[0]):
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    words = [w for w in words if w != "&"]
    if words[:2] == ["accelerate", "launch"]:  # accelerate's own flags precede the script
        script_at = next(i for i, w in enumerate(words) if w.endswith(".py"))
        words = ["python", *words[script_at:]]
    if words[0] == "python" and words[1] == "-m":
        return env, "module", words[2:]
    if words[0] == "python":
        argv = words[1:]
        if argv[0].startswith("recipes/") and "--dry_run" not in argv:
            argv += ["--dry_run", "true"]  # training: parse, validate, probe rewards, build data, print the plan
        return env, "script", argv
    if words[0] == "rlvr":
        return env, "rlvr", words[1:] + FAST_FLAGS.get(words[1], [])
    raise AssertionError(f"no fast form for {shlex.join(words)!r}: add one, or list it in NOT_RUN with the reason")


@pytest.fixture(scope="module")
def scratch(tmp_path_factory, tiny_model_dir):
    """A folder that looks like the checkout, with the main job's run folder stood in by a 1-step tiny run."""
    from rlvr.training.runner import main as train

    root = tmp_path_factory.mktemp("docs-scratch")
    for name in SCRATCH_COPIES:
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    train(run_args(root / MAIN_JOB_RUN, tiny_model_dir, "--max_steps", "1", "--save_strategy", "no"))
    return root


def run_in_process(kind: str, argv: list[str]) -> None:
    from rlvr.__main__ import dispatch

    saved = sys.argv
    # `rlvr doctor` exits 1 when it finds a problem (its contract): on the 1-step stand-in run that is an answer
    ok = (0, None, 1) if kind == "rlvr" and argv[:1] == ["doctor"] else (0, None)
    try:
        if kind == "rlvr":
            assert dispatch(argv) in ok
        elif kind == "module":
            sys.argv = [argv[0], *argv[1:]]
            runpy.run_module(argv[0], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(argv)
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as done:
        assert done.code in ok, f"exit {done.code}"
    finally:
        sys.argv = saved


def test_every_documented_command_runs(scratch, monkeypatch, capsys):
    import torch

    monkeypatch.chdir(scratch)
    threads = torch.get_num_threads()
    ran, failures = [], []
    for doc, command in all_commands():
        if why_not_run(command):
            continue
        env, kind, argv = fast_form(shlex.split(command))
        with monkeypatch.context() as patch:
            for key, value in env.items():
                patch.setenv(key, value)
            try:
                run_in_process(kind, argv)
                ran.append(command)
            except BaseException as err:  # noqa: BLE001 - report every failing command at once
                failures.append(f"{doc}: {command}\n    -> {type(err).__name__}: {err}")
    torch.set_num_threads(threads)  # a dry run applies the recipe's process settings (one CPU thread)
    with capsys.disabled():
        print(f"\n[docs] ran {len(ran)} documented commands in fast form")
    assert not failures, "\n".join(failures)
    assert len(ran) >= 15  # the extraction found the docs' commands


def test_every_command_is_runnable_or_listed_with_a_reason():
    commands = [command for _, command in all_commands()]
    for command in commands:
        if not why_not_run(command):
            fast_form(shlex.split(command))  # raises for a command nobody taught this test to run
    unused = [p for p in NOT_RUN if not any((c + "\n").startswith(p) for c in commands)]
    unused += [c for c in NOT_RUN_EXACT if c not in commands]
    assert not unused, f"NOT_RUN entries that match no documented command: {unused}"
