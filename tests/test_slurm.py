"""The Slurm launch, rendered without Slurm: which command runs on which node, with which accelerate flags, and the
vLLM node split; slurm/train.slurm itself runs with `scontrol` and `srun` faked on PATH. The sweep's Slurm launcher
(rlvr.analysis.sweep_slurm) submits to a fake `sbatch`, asks a fake `squeue`, and its scripts run under bash."""

import csv
import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, write_spec

sys.path.insert(0, str(REPO / "slurm"))
import render

from rlvr.inputs import ConfigError, cli
from rlvr.runs import tools

RECIPE = "recipes/grpo.yaml"


def flags(argv: list[str]) -> dict:
    """accelerate's flags before the script: {'--num_machines': '2', ...}."""
    head = argv[: argv.index(render.SCRIPT)]
    launcher = tools.command("accelerate launch")
    assert head[: len(launcher)] == launcher  # this interpreter's accelerate, not one found on the node's PATH
    return {head[i]: head[i + 1] for i in range(len(launcher), len(head) - 1, 2)}


@pytest.fixture(autouse=True)
def in_repo(monkeypatch):
    monkeypatch.chdir(REPO)  # the commands name repo-relative paths, as a job submitted from the checkout does


def run_plan(hosts, vllm=False, gpus=8, vllm_gpus=1, extra=()):
    return render.plan(RECIPE, hosts, gpus, "accelerate_configs/zero2.yaml", vllm, vllm_gpus, 29500, 8000, list(extra))


def test_n_nodes_each_run_accelerate_with_its_rank_and_the_first_host_as_main():
    commands = run_plan(["node-a", "node-b", "node-c"])
    assert [c["role"] for c in commands] == ["train"] * 3
    for rank, (command, host) in enumerate(zip(commands, ["node-a", "node-b", "node-c"])):
        assert command["host"] == host
        assert flags(command["argv"]) == {
            "--config_file": "accelerate_configs/zero2.yaml",
            "--num_machines": "3",
            "--num_processes": "24",
            "--machine_rank": str(rank),
            "--main_process_ip": "node-a",
            "--main_process_port": "29500",
        }
        assert command["argv"][-2:] == ["--config", RECIPE] and "--use_vllm" not in command["argv"]


def test_vllm_takes_the_last_node_and_the_others_train_against_it():
    commands = run_plan(["node-a", "node-b", "node-c"], vllm=True, extra=["--learning_rate", "1e-6"])
    serve, *train = commands
    assert serve["host"] == "node-c" and serve["argv"][:6] == [
        *tools.command("trl"),
        "vllm-serve",
        "--model",
        "Qwen/Qwen3-1.7B",
    ]
    assert [c["host"] for c in train] == ["node-a", "node-b"]
    for rank, command in enumerate(train):
        f = flags(command["argv"])
        assert (f["--num_machines"], f["--num_processes"], f["--machine_rank"]) == ("2", "16", str(rank))
        tail = " ".join(command["argv"])
        assert "--use_vllm true --vllm_mode server --vllm_server_host node-c --vllm_server_port 8000" in tail
        assert tail.endswith("--learning_rate 1e-6")


def test_one_node_with_vllm_splits_its_gpus():
    serve, train = run_plan(["node-a"], vllm=True, vllm_gpus=2)
    assert serve["env"] == {"CUDA_VISIBLE_DEVICES": "6,7"} and "--data_parallel_size" in serve["argv"]
    assert train["env"] == {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5"}
    f = flags(train["argv"])
    assert (f["--num_machines"], f["--num_processes"], f["--machine_rank"]) == ("1", "6", "0")
    assert "--vllm_server_host 127.0.0.1" in " ".join(train["argv"])
    with pytest.raises(ConfigError, match="vllm_gpus"):
        run_plan(["node-a"], vllm=True, vllm_gpus=8)


def test_cli_reads_hosts_from_the_environment_and_prints_valid_bash(monkeypatch, capsys):
    monkeypatch.setenv(render.HOSTS_ENV, "h1 h2")
    commands = render.main(["--recipe", RECIPE, "--vllm"])
    script = capsys.readouterr().out
    assert [c["host"] for c in commands] == ["h2", "h1"]
    assert subprocess.run(["bash", "-n"], input=script, text=True, check=False).returncode == 0
    assert "--nodelist=h2" in script and "VLLM_PID=$!" in script
    monkeypatch.delenv(render.HOSTS_ENV)
    with pytest.raises(ConfigError, match="--hosts"):
        render.main(["--recipe", RECIPE])


@pytest.mark.parametrize("flag", ["--port", "--vllm_port"])
@pytest.mark.parametrize("value", ["0", "65536", "99999999"])
def test_a_port_outside_1_to_65535_is_one_named_line(flag, value, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli(render.main, ["--recipe", RECIPE, "--hosts", "h1", flag, value])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and len(err) == 1 and err[0].startswith(f"error: {flag}: "), err


def test_train_slurm_runs_the_rendered_commands_under_fake_slurm(tmp_path):
    """The sbatch script end to end: `scontrol` names two hosts, `srun` records the command it was given."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fakes = {
        "scontrol": 'printf "gpu-1\\ngpu-2\\n"',
        # one file per call: the node launches run concurrently, and two long echos into one file interleave
        "srun": f'echo "$@" > "$(mktemp -p {shlex.quote(str(tmp_path))} srun.XXXXXX)"',
    }
    for name, body in fakes.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(stat.S_IRWXU)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "SLURM_JOB_NODELIST": "gpu-[1-2]",
        "SLURM_JOB_ID": "42",
        "SLURM_SUBMIT_DIR": str(REPO),
        "RLVR_LOG_DIR": str(tmp_path / "logs"),
        "PYTHONPATH": str(REPO),
        "RLVR_PYTHON": sys.executable,
    }
    done = subprocess.run(
        ["bash", "slurm/train.slurm", RECIPE, "accelerate_configs/zero3.yaml", "--gpus_per_node", "4"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    ran = sorted((path.read_text().strip() for path in tmp_path.glob("srun.*")), key=lambda line: "gpu-2" in line)
    assert len(ran) == 2 and "--nodelist=gpu-1" in ran[0] and "--nodelist=gpu-2" in ran[1]
    assert "--config_file accelerate_configs/zero3.yaml --num_machines 2 --num_processes 8 --machine_rank 1" in ran[1]
    assert shlex.quote(sys.executable) in (tmp_path / "logs" / "launch-42.sh").read_text()  # the environment, named
    env["RLVR_PYTHON"] = str(tmp_path / "no-such-python")
    done = subprocess.run(
        ["bash", "slurm/train.slurm", RECIPE], cwd=REPO, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 2 and done.stderr.startswith("error: RLVR_PYTHON: "), done.stderr


def fake_slurm(tmp_path, monkeypatch) -> Path:
    """`sbatch` that keeps each script it is given (sbatch-<id>.sh, its arguments in sbatch-<id>.args) and answers job
    ids from 100 up; `squeue` that lists the task ids written to <state>/squeue. Returns the state folder."""
    state = tmp_path / "slurm-state"
    state.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fakes = {
        "sbatch": f"cd {shlex.quote(str(state))}; n=$(( $(cat count 2>/dev/null || echo 99) + 1 )); echo $n > count\n"
        'echo "$@" > sbatch-$n.args; cp "${@: -1}" sbatch-$n.sh; echo "$n;cluster"',
        "squeue": f"cat {shlex.quote(str(state / 'squeue'))} 2>/dev/null; true",
    }
    for name, body in fakes.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(stat.S_IRWXU)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return state


def run_task(script, index: int, job: str, env: dict | None = None) -> int:
    """Array task `index` as Slurm runs it: the script under bash with the array variables set."""
    env = {
        **os.environ,
        "SLURM_ARRAY_TASK_ID": str(index),
        "SLURM_ARRAY_JOB_ID": job,
        "PYTHONPATH": str(REPO),
        **(env or {}),
    }
    return subprocess.run(["bash", str(script)], env=env, cwd=REPO, check=False).returncode


def sweep_spec(tmp_path, **fields) -> str:
    fixed = {"max_steps": 1, "print_rollouts": False}
    return write_spec(tmp_path, **{"vary": {"seed": [1, 2]}, "labels": ["a", "b"], "fixed": fixed, **fields})


def test_sweep_dry_run_prints_valid_sbatch_scripts_and_submits_nothing(tmp_path, monkeypatch, capsys):
    """A GPU recipe asks one GPU a task; every task line is the local launcher's command; nothing is written."""
    from rlvr.analysis.sweep import main, train_command
    from rlvr.analysis.sweep_spec import load_spec, plan

    state = fake_slurm(tmp_path, monkeypatch)
    spec = sweep_spec(tmp_path, base="recipes/grpo.yaml")
    main([spec, "--launcher", "slurm", "--dry_run", "--out", str(tmp_path / "out"), "--sbatch=partition=gpu"])
    said = capsys.readouterr().out
    array = (
        said.split("[sweep] slurm array script (", 1)[1].split("):\n", 1)[1].split("[sweep] slurm report script", 1)[0]
    )
    report = said.split("[sweep] slurm report script (", 1)[1].split("):\n", 1)[1]
    for script in (array, report):
        assert subprocess.run(["bash", "-n"], input=script, text=True, check=False).returncode == 0
        assert "#SBATCH --gres=gpu:1" in script and "#SBATCH --time=02:00:00" in script  # the recipe's GPU, the file
    assert "#SBATCH --array=0-1" in array and "sbatch --parsable --partition=gpu <script>" in said
    for index, variant in enumerate(plan(load_spec(spec), tmp_path / "out", {})):
        assert (
            f"  {index}) RUN_DIR={variant.run_dir}; COMMAND=({shlex.join(train_command(variant, 'python'))}) ;;"
            in array
        )
    assert "--dependency=afterany:<array job id>" in said and "--report_only" in report.splitlines()[-1]
    assert not (tmp_path / "out").exists() and not (state / "count").exists()


def test_sweep_on_slurm_resubmits_a_failed_task_and_its_last_job_writes_the_report(
    tmp_path, tiny_model_dir, monkeypatch
):
    """One array for the pending runs, a report job after it (afterany). Task 1 fails (its node's Python exits at
    start); a rerun leaves a task Slurm still lists alone, then submits only the failed run; the last report job
    compares both runs."""
    from rlvr.analysis.sweep import run_sweep

    state = fake_slurm(tmp_path, monkeypatch)
    spec, out = sweep_spec(tmp_path), tmp_path / "out"
    overrides = {"model_name_or_path": tiny_model_dir}
    assert run_sweep(spec, out, overrides, launcher="slurm")["status"] == {"a": "submitted", "b": "submitted"}
    array, report = state / "sbatch-100.sh", state / "sbatch-101.sh"
    assert (state / "sbatch-100.args").read_text().split()[:-1] == ["--parsable"]
    assert (state / "sbatch-101.args").read_text().split()[:-1] == ["--parsable", "--dependency=afterany:100"]
    assert "#SBATCH --array=0-1" in array.read_text() and "--gres" not in array.read_text()  # use_cpu: CPUs only
    broken = tmp_path / "broken-node"
    broken.mkdir()
    (broken / "sitecustomize.py").write_text("import os\nos._exit(3)\n")
    assert run_task(array, 0, "100") == 0
    assert run_task(array, 1, "100", {"PYTHONPATH": f"{broken}:{REPO}"}) == 3
    assert "=== " in (out / "demo" / "b" / "train.log").read_text()  # the task wrote where the local launcher writes

    (state / "squeue").write_text("100_1\n")  # still listed (say, requeued): not submitted twice
    assert run_sweep(spec, out, overrides, launcher="slurm")["status"] == {"a": "skipped", "b": "queued"}
    assert (state / "count").read_text().strip() == "101"
    (state / "squeue").write_text("")
    assert run_sweep(spec, out, overrides, launcher="slurm")["status"] == {"a": "skipped", "b": "submitted"}
    array, report = state / "sbatch-102.sh", state / "sbatch-103.sh"
    assert "#SBATCH --array=0-0" in array.read_text() and "/demo/b/recipe.yaml" in array.read_text()
    assert (state / "sbatch-103.args").read_text().split()[:-1] == ["--parsable", "--dependency=afterany:102"]
    assert run_task(array, 0, "102") == 0
    assert (
        subprocess.run(
            ["bash", str(report)], env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO, check=False
        ).returncode
        == 0
    )
    with (out / "demo" / "summary.csv").open() as f:
        assert [row["run"] for row in csv.DictReader(f)] == ["a", "b"]
    assert "Runs left out" not in (out / "demo" / "report.md").read_text()
