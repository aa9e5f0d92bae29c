"""The run folder's layout lives in one module (rlvr/runs/layout.py): no other module of the package spells a run
file's name, and evaluation file names say what they hold."""

from __future__ import annotations

import re

from conftest import REPO

from rlvr.runs import layout

NAMES = (
    layout.CONFIG,
    layout.METRICS,
    layout.ROLLOUTS,
    layout.REWARD_ERROR,
    layout.TRAIN_LOG,
    layout.SWEEP_SPEC,
    layout.SWEEP_RECIPE,
    layout.REPORT,
    layout.BEFORE_AFTER,
    layout.SUMMARY_JSON,
    layout.SUMMARY_CSV,
    layout.SUMMARY_MD,
    layout.TRAINER_STATE,
)
SOURCES = [REPO / "rlvr", REPO / "rewards", REPO / "data", REPO / "recipes"]


def test_no_module_but_the_layout_spells_a_run_file_name():
    spelled = []
    for root in SOURCES:
        for path in root.rglob("*.py"):
            if path == REPO / "rlvr" / "runs" / "layout.py":
                continue
            code = re.sub(r'"""[\s\S]*?"""', "", path.read_text())  # docstrings may name files for the reader
            code = "\n".join(line.split("#")[0] for line in code.splitlines())  # and so may comments
            spelled += [
                f"{path.relative_to(REPO)}: {name}"
                for name in NAMES
                if re.search(rf"""["']{re.escape(name)}["']""", code)
            ]
    assert not spelled, spelled


def test_an_evaluation_is_named_after_what_it_holds(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    one = layout.evaluation_name("runs/a/grpo", "recipes/tiny/grpo.yaml", "test", 200, 8)
    other = layout.evaluation_name("runs/b/grpo", "recipes/tiny/grpo.yaml", "test", 200, 8)
    assert one == "runs-a-grpo.grpo.test.200x8.json" and other != one
    assert (
        layout.evaluation_name(str(tmp_path / "models" / "base"), "r.yaml", "test", 16, 2)
        == "models-base.r.test.16x2.json"
    )
    assert layout.rollouts_beside(tmp_path / "after.json").name == "after.rollouts.jsonl"


METRIC_KEY = re.compile(
    r"""["'](avg_\w+|zero_std_(frac|side|exact)/\w+|step/\w+|groups/\w+|time/\w+|generated_(samples|"""
    r"""tokens)|generation_step|train_runtime|completions/\w+|frac_reward_zero_std)["']"""
)


def test_the_readers_name_every_metric_key_through_the_keys_module():
    """rlvr/analysis (plots, report, doctor, summaries) spells no metric key: each comes from rlvr/metrics/keys.py, so
    a renamed key cannot leave a reader looking for the old name."""
    spelled = []
    for path in (REPO / "rlvr" / "analysis").rglob("*.py"):
        code = re.sub(r'"""[\s\S]*?"""', "", path.read_text())
        code = "\n".join(line.split("#")[0] for line in code.splitlines())
        spelled += [f"{path.relative_to(REPO)}: {m.group(0)}" for m in METRIC_KEY.finditer(code)]
    assert not spelled, spelled
