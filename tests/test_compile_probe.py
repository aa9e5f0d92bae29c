"""benchmarks/compile_probe.py without compiling anything: bad --parts is one line and exit 2 before any model loads,
and the report's arithmetic (ratio, break-even) is right. The probe itself compiles for minutes: it is run by hand
(docs/measurements/speed.md has its figures)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

from conftest import REPO

spec = importlib.util.spec_from_file_location("compile_probe", REPO / "benchmarks" / "compile_probe.py")
compile_probe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compile_probe)


def test_bad_parts_is_one_line_and_exit_2():
    result = subprocess.run(
        [sys.executable, "benchmarks/compile_probe.py", "--parts", "decode"],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "error: --parts: 'decode' is not a comma list of generation, reference, policy"
    ]


def test_report_ratio_and_break_even():
    faster = {"eager_ms": [100.0, 110.0, 90.0], "compiled_ms": [80.0, 70.0, 90.0], "compile_s": 30.0, "agreement": 2e-6}
    line = compile_probe.report("policy", faster)
    assert "eager   100.0 ms (90.0-110.0)" in line and "compiled    80.0 ms" in line
    assert "x0.80" in line and "break-even 1500 steps" in line and "max |diff| 2.0e-06" in line
    slower = {"eager_ms": [50.0], "compiled_ms": [60.0], "compile_s": 5.0, "agreement": False}
    line = compile_probe.report("generation", slower)
    assert "break-even never" in line and "DIFFERENT tokens" in line
