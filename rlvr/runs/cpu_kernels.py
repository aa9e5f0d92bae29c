"""The CPU kernel sets a tiny run's figures are measured over, named once for every command that runs them.

Float results depend on the CPU: the vector kernels torch, MKL and oneDNN dispatch to (AVX-512 on one machine, AVX2 on
another) round differently, and over 140 steps that moves a trained model by several points. A stranger's machine is
not this one, so a stated range spans the seeds and the kernel sets this machine can run:

  default  what the libraries pick here
  avx2     every library held to AVX2 (ATEN_CPU_CAPABILITY, MKL_ENABLE_INSTRUCTIONS, ONEDNN_MAX_CPU_ISA), as on a CPU
           without AVX-512

The libraries read these variables when they load, so a kernel set is chosen for a whole process: a command that runs
several starts one process per run with the set's environment (`environment_for`).
"""

from __future__ import annotations

from collections.abc import Mapping

KERNEL_SETTINGS = {
    "default": {},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
}
KERNEL_VARIABLES = sorted({name for setting in KERNEL_SETTINGS.values() for name in setting})


def environment_for(setting: str, base: Mapping[str, str]) -> dict[str, str]:
    """`base` (a process environment) held to `setting`: its variables set, the other sets' variables removed."""
    env = {name: value for name, value in base.items() if name not in KERNEL_VARIABLES}
    return {**env, **KERNEL_SETTINGS[setting]}


def setting_of(env: Mapping[str, str]) -> str | None:
    """The kernel set an environment holds (None: some other mix of the variables)."""
    held = {name: env[name] for name in KERNEL_VARIABLES if name in env}
    return next((name for name, setting in KERNEL_SETTINGS.items() if setting == held), None)
