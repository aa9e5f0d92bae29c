"""The commands a Slurm job runs, one per node: accelerate on the training nodes, `trl vllm-serve` on a vLLM node.

    python slurm/render.py --recipe recipes/grpo.yaml --hosts node-a node-b            # 2 training nodes
    python slurm/render.py --recipe recipes/grpo.yaml --hosts node-a node-b --vllm     # 1 training + 1 vLLM node
    RLVR_HOSTS="node-a node-b" python slurm/render.py --recipe recipes/grpo.yaml        # hosts from the environment

`slurm/train.slurm` calls this with the job's hostnames and runs what it prints, so the launch logic lives in one
place that runs (and is tested) without Slurm. Layout, as open-r1's `slurm/train.slurm`:

- N nodes, no vLLM: every node runs `accelerate launch` with `--num_machines N --num_processes N x GPUs
  --machine_rank <its index> --main_process_ip <first host>`; the recipe samples with transformers (or vLLM
  colocated, if the recipe says so).
- N >= 2 nodes with `--vllm`: the last node serves the policy with `trl vllm-serve` (data parallel over its GPUs),
  the first N - 1 train with `--use_vllm true --vllm_mode server --vllm_server_host <last host>`.
- 1 node with `--vllm`: the node's last `--vllm_gpus` GPUs serve, the others train (CUDA_VISIBLE_DEVICES splits them).

Extra arguments after `--` go to the recipe (`-- --learning_rate 1e-6`). Bad input is one `error:` line, exit 2.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from the repo root

from rlvr.inputs import ArgumentParser, ConfigError, cli, load_recipe_yaml, positive_int, tcp_port
from rlvr.runs import tools

HOSTS_ENV = "RLVR_HOSTS"  # train.slurm sets it from `scontrol show hostnames $SLURM_JOB_NODELIST`
SCRIPT = "recipes/train.py"  # trains whatever algorithm the recipe names


def train_command(
    recipe: str,
    accelerate_config: str,
    num_machines: int,
    num_processes: int,
    machine_rank: int,
    main_ip: str,
    port: int,
    recipe_args: list[str],
) -> list[str]:
    return [
        *tools.command("accelerate launch"),
        "--config_file",
        accelerate_config,
        "--num_machines",
        str(num_machines),
        "--num_processes",
        str(num_processes),
        "--machine_rank",
        str(machine_rank),
        "--main_process_ip",
        main_ip,
        "--main_process_port",
        str(port),
        SCRIPT,
        "--config",
        recipe,
        *recipe_args,
    ]


def plan(
    recipe: str,
    hosts: list[str],
    gpus_per_node: int,
    accelerate_config: str,
    vllm: bool,
    vllm_gpus: int,
    port: int,
    vllm_port: int,
    extra: list[str],
) -> list[dict]:
    """One entry per command: {host, role, env, argv}. Pure: what runs where, nothing started."""
    if not hosts:
        raise ConfigError("--hosts", f"no hosts: pass --hosts or set {HOSTS_ENV}")
    model = load_recipe_yaml(recipe, "--recipe").get("model_name_or_path")
    if vllm and not model:
        raise ConfigError("--recipe", f"{recipe} names no model_name_or_path for the vLLM server")
    commands = []
    server_args: list[str] = []
    if not vllm:
        train_hosts, train_gpus = hosts, gpus_per_node
    else:
        if len(hosts) == 1:  # the server on the node's last vllm_gpus GPUs, training on the others
            if not 0 < vllm_gpus < gpus_per_node:
                raise ConfigError("--vllm_gpus", f"must leave at least one of the node's {gpus_per_node} GPUs to train")
            train_hosts, train_gpus = hosts, gpus_per_node - vllm_gpus
            serve = list(range(train_gpus, gpus_per_node))
            server, reach, server_env = hosts[0], "127.0.0.1", {"CUDA_VISIBLE_DEVICES": ",".join(map(str, serve))}
        else:  # the server on the last node, on all its GPUs
            train_hosts, train_gpus, serve = hosts[:-1], gpus_per_node, range(gpus_per_node)
            server, reach, server_env = hosts[-1], hosts[-1], {}
        serve_argv = [*tools.command("trl"), "vllm-serve", "--model", model, "--data_parallel_size", str(len(serve))]
        commands.append(
            {"host": server, "role": "vllm", "env": server_env, "argv": [*serve_argv, "--port", str(vllm_port)]}
        )
        server_args = ["--use_vllm", "true", "--vllm_mode", "server"]
        server_args += ["--vllm_server_host", reach, "--vllm_server_port", str(vllm_port)]  # where training finds it
    env = {"CUDA_VISIBLE_DEVICES": ",".join(map(str, range(train_gpus)))} if vllm and len(hosts) == 1 else {}
    for rank, host in enumerate(train_hosts):
        commands.append(
            {
                "host": host,
                "role": "train",
                "env": dict(env),
                "argv": train_command(
                    recipe,
                    accelerate_config,
                    len(train_hosts),
                    len(train_hosts) * train_gpus,
                    rank,
                    train_hosts[0],
                    port,
                    [*server_args, *extra],
                ),
            }
        )
    return commands


def shell(commands: list[dict]) -> str:
    """A bash script: each command under `srun` on its node, in the background; the job ends when training ends."""
    lines = ["set -euo pipefail"]
    for c in commands:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in c["env"].items())
        inner = (f"{env} " if env else "") + shlex.join(c["argv"])
        srun = f"srun --nodes=1 --ntasks=1 --nodelist={shlex.quote(c['host'])} bash -c {shlex.quote(inner)}"
        var = "VLLM_PID" if c["role"] == "vllm" else None
        lines.append(f"{srun} &" + ("  VLLM_PID=$!" if var else ""))
    lines.append("TRAIN_STATUS=0")
    lines.append('for pid in $(jobs -p); do [ "$pid" = "${VLLM_PID:-}" ] || wait "$pid" || TRAIN_STATUS=$?; done')
    lines.append('[ -z "${VLLM_PID:-}" ] || kill "$VLLM_PID"')
    lines.append("exit $TRAIN_STATUS")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> list[dict]:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    parser = ArgumentParser(prog="slurm/render.py", description=__doc__)
    parser.add_argument("--recipe", required=True, help="recipe YAML (any algorithm: recipes/train.py runs it)")
    parser.add_argument(
        "--hosts",
        nargs="+",
        default=os.environ.get(HOSTS_ENV, "").split(),
        help=f"the job's hostnames, first = main process (default: ${HOSTS_ENV})",
    )
    parser.add_argument("--gpus_per_node", type=positive_int, default=8)
    parser.add_argument("--accelerate_config", default="accelerate_configs/zero2.yaml")
    parser.add_argument(
        "--vllm", action="store_true", help="generate on a vLLM server (its own node, or GPUs on one node)"
    )
    parser.add_argument("--vllm_gpus", type=positive_int, default=1, help="on one node: GPUs given to vLLM")
    parser.add_argument("--port", type=tcp_port, default=29500, help="main process port")
    parser.add_argument("--vllm_port", type=tcp_port, default=8000)
    args = parser.parse_args(argv)
    for flag, path in (("--recipe", args.recipe), ("--accelerate_config", args.accelerate_config)):
        if not Path(path).is_file():
            raise ConfigError(flag, f"no such file: {path}")
    commands = plan(
        args.recipe,
        args.hosts,
        args.gpus_per_node,
        args.accelerate_config,
        args.vllm,
        args.vllm_gpus,
        args.port,
        args.vllm_port,
        extra,
    )
    print(shell(commands), end="")
    return commands


if __name__ == "__main__":
    cli(main)
