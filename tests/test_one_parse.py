"""The recipe YAML is read once per run: one loader (`rlvr.training.config.load_recipe`) returns the merged mapping
and the parsed dataclasses, and the runner, `config.yaml`, the dry run and sweeps all read those."""

from __future__ import annotations

import builtins
import pathlib
from collections import Counter

import pytest
import yaml
from conftest import FAST_RECIPE

RUN = ["--max_steps", "1", "--report_to", "none", "--print_rollouts", "false"]


@pytest.fixture
def recipe_reads(monkeypatch, tmp_path):
    """A child recipe with a `base:` (so the chain is two files) and a counter of every open of either file."""
    child = tmp_path / "child.yaml"
    child.write_text(f"base: {FAST_RECIPE}\ntemperature: 0.9\n")
    watched = {child.resolve(), pathlib.Path(FAST_RECIPE).resolve()}
    reads = Counter()

    def note(path):
        try:
            resolved = pathlib.Path(path).resolve()
        except (TypeError, ValueError, OSError):
            return
        if resolved in watched:
            reads[resolved.name] += 1

    real_open, real_read_text, real_read_bytes = builtins.open, pathlib.Path.read_text, pathlib.Path.read_bytes

    def counting_open(file, *args, **kwargs):
        note(file)
        return real_open(file, *args, **kwargs)

    def counting_read_text(self, *args, **kwargs):
        note(self)
        return real_read_text(self, *args, **kwargs)

    def counting_read_bytes(self, *args, **kwargs):
        note(self)
        return real_read_bytes(self, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting_open)
    monkeypatch.setattr(pathlib.Path, "read_text", counting_read_text)
    monkeypatch.setattr(pathlib.Path, "read_bytes", counting_read_bytes)
    return child, reads


def test_a_dry_run_reads_each_recipe_file_once(recipe_reads, tiny_model_dir, tmp_path):
    from rlvr.training.runner import main

    child, reads = recipe_reads
    assert (
        main(
            [
                "--config",
                str(child),
                "--model_name_or_path",
                tiny_model_dir,
                "--output_dir",
                str(tmp_path / "o"),
                "--dry_run",
                "true",
            ]
        )
        is None
    )
    assert reads == {"child.yaml": 1, pathlib.Path(FAST_RECIPE).name: 1}


def test_a_training_run_reads_each_recipe_file_once(recipe_reads, tiny_model_dir, tmp_path):
    from rlvr.training.runner import main

    child, reads = recipe_reads
    out = tmp_path / "run"
    trainer = main(["--config", str(child), "--model_name_or_path", tiny_model_dir, "--output_dir", str(out), *RUN])
    assert trainer.state.global_step == 1
    assert reads == {"child.yaml": 1, pathlib.Path(FAST_RECIPE).name: 1}
    written = yaml.safe_load((out / "config.yaml").read_text())  # from the one read: base fields and overrides
    assert written["temperature"] == 0.9 and written["num_generations"] == 4 and written["max_steps"] == 1
    assert "base" not in written


def test_speedups_are_parsed_once_and_kept_on_the_recipe(monkeypatch, tiny_model_dir):
    import rlvr.speedups
    from rlvr.training import config

    calls = []
    real = rlvr.speedups.parse_speedups
    monkeypatch.setattr(rlvr.speedups, "parse_speedups", lambda value: calls.append(value) or real(value))
    recipe = config.validate(
        config.load_recipe(
            [
                "--config",
                FAST_RECIPE,
                "--model_name_or_path",
                tiny_model_dir,
                "--speedups",
                "shared_prefix",
                "--dry_run",
                "true",
            ]
        )
    )
    assert recipe.speedups == frozenset({"shared_prefix"}) and calls == ["shared_prefix"]


def test_a_sweep_variant_parses_from_memory(monkeypatch, tmp_path):
    """A sweep holds the effective recipe as a mapping: it is parsed from there, not written out and read back. Every
    way Python opens a file (builtins.open, io.open, os.open, Path.open/read_text/read_bytes) is watched."""
    import io
    import os

    from rlvr.training.config import load_recipe

    base = yaml.safe_load(pathlib.Path(FAST_RECIPE).read_text())
    opened = []

    def watch(real):
        return lambda *args, **kwargs: opened.append(args[0]) or real(*args, **kwargs)

    for owner, name in (
        (builtins, "open"),
        (io, "open"),
        (os, "open"),
        (pathlib.Path, "open"),
        (pathlib.Path, "read_text"),
        (pathlib.Path, "read_bytes"),
    ):
        monkeypatch.setattr(owner, name, watch(getattr(owner, name)))
    loaded = load_recipe(["--dry_run", "true"], config={**base, "num_generations": 2}, source="sweep run 'x'")
    assert loaded.training.num_generations == 2 and loaded.yaml["num_generations"] == 2
    assert opened == []
    with pytest.raises(Exception) as err:
        load_recipe(["--dry_run", "true"], config={**base, "bogus_field": 1}, source="sweep run 'x'")
    assert "bogus_field" in str(err.value) and "sweep run 'x'" in str(err.value)
