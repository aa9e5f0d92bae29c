"""The Slurm launch, rendered without Slurm: which command runs on which node, with which accelerate flags, and the
vLLM node split. The last test runs slurm/train.slurm itself with `scontrol` and `srun` faked on PATH."""

import os
import shlex
import stat
import subprocess
import sys

import pytest
from conftest import REPO

sys.path.insert(0, str(REPO / "slurm"))
import render

from rlvr.cli import ConfigError

RECIPE = "recipes/grpo.yaml"


def flags(argv: list[str]) -> dict:
    """accelerate's flags before the script: {'--num_machines': '2', ...}."""
    head = argv[:argv.index(render.SCRIPT)]
    return {head[i]: head[i + 1] for i in range(2, len(head) - 1, 2)}


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
            "--config_file": "accelerate_configs/zero2.yaml", "--num_machines": "3", "--num_processes": "24",
            "--machine_rank": str(rank), "--main_process_ip": "node-a", "--main_process_port": "29500"}
        assert command["argv"][-2:] == ["--config", RECIPE] and "--use_vllm" not in command["argv"]


def test_vllm_takes_the_last_node_and_the_others_train_against_it():
    commands = run_plan(["node-a", "node-b", "node-c"], vllm=True, extra=["--learning_rate", "1e-6"])
    serve, *train = commands
    assert serve["host"] == "node-c" and serve["argv"][:4] == ["trl", "vllm-serve", "--model", "Qwen/Qwen3-1.7B"]
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


def test_train_slurm_runs_the_rendered_commands_under_fake_slurm(tmp_path):
    """The sbatch script end to end: `scontrol` names two hosts, `srun` records the command it was given."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fakes = {"scontrol": 'printf "gpu-1\\ngpu-2\\n"',
             # one file per call: the node launches run concurrently, and two long echos into one file interleave
             "srun": f'echo "$@" > "$(mktemp -p {shlex.quote(str(tmp_path))} srun.XXXXXX)"'}
    for name, body in fakes.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(stat.S_IRWXU)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_NODELIST": "gpu-[1-2]",
           "SLURM_JOB_ID": "42", "SLURM_SUBMIT_DIR": str(REPO), "RLVR_LOG_DIR": str(tmp_path / "logs"),
           "PYTHONPATH": str(REPO)}
    done = subprocess.run(["bash", "slurm/train.slurm", RECIPE, "accelerate_configs/zero3.yaml", "--gpus_per_node", "4"],
                          cwd=REPO, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    ran = sorted((path.read_text().strip() for path in tmp_path.glob("srun.*")), key=lambda line: "gpu-2" in line)
    assert len(ran) == 2 and "--nodelist=gpu-1" in ran[0] and "--nodelist=gpu-2" in ran[1]
    assert "--config_file accelerate_configs/zero3.yaml --num_machines 2 --num_processes 8 --machine_rank 1" in ran[1]
    assert (tmp_path / "logs" / "launch-42.sh").exists()
