"""`rlvr <command>` (or `python -m rlvr <command>`): every tool of the repo behind one entry point.

    rlvr data         --config recipes/grpo.yaml --output_dir artifacts/spell_backward   # dataset to disk / Hub
    rlvr evaluate     --model runs/tiny-grpo --config recipes/tiny/grpo.yaml             # pass@k on held-out prompts
    rlvr before-after --before models/tiny-speller --after runs/tiny-grpo --config ...  # both models, side by side
    rlvr plots        runs/tiny-grpo [runs/...] --out runs/plots                         # curves (PNG + table)
    rlvr report       runs/tiny-grpo                                                     # one Markdown page
    rlvr doctor       runs/tiny-grpo                                                     # what is wrong, what to do
    rlvr sweep        sweeps/group_size.yaml                                             # an ablation, resumable
    rlvr plan         --config recipes/grpo.yaml --free_gib 6.9                          # GPU memory plan
    rlvr speedrun     --config recipes/tiny/speedrun.yaml --output_dir runs/speedrun     # samples to 60% held-out

Training itself is `accelerate launch recipes/<algorithm>.py --config ...`, as TRL's own scripts are launched.
Each command also runs as its module (`python -m rlvr.analysis.evaluate ...`).
"""

from __future__ import annotations

import importlib
import sys

from rlvr.inputs import ConfigError, cli

COMMANDS = {  # command -> module whose main(argv) runs it
    "data": "rlvr.data.cli",
    "evaluate": "rlvr.analysis.evaluate",
    "before-after": "rlvr.analysis.before_after",
    "plots": "rlvr.analysis.plots",
    "report": "rlvr.analysis.report",
    "doctor": "rlvr.analysis.doctor",
    "sweep": "rlvr.analysis.sweep",
    "plan": "rlvr.training.plan_cli",
    "speedrun": "rlvr.analysis.speedrun",
}


def dispatch(argv: list[str]):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    command, rest = argv[0], argv[1:]
    if command not in COMMANDS:
        raise ConfigError("command", f"unknown command {command!r}; choose one of {', '.join(COMMANDS)}")
    program, sys.argv[0] = sys.argv[0], f"rlvr {command}"  # argparse's prog: `--help` and errors name the command
    try:
        result = importlib.import_module(COMMANDS[command]).main(rest)
    finally:
        sys.argv[0] = program
    return result if isinstance(result, int) else 0


def main(argv: list[str] | None = None) -> None:
    sys.exit(cli(dispatch, list(sys.argv[1:] if argv is None else argv)))


if __name__ == "__main__":
    main()
