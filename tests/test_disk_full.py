"""A full disk during a checkpoint save: one line, exit 1, the previous checkpoint intact, the run folder resumable.

The disk "fills up" while checkpoint-2 is being written: its weights are on disk, then torch.save of the optimizer
state writes part of a file and raises ENOSPC, as a real full disk does. `save_total_limit 1` makes the test strict:
a save that got as far as rotating would delete checkpoint-1.
"""

from __future__ import annotations

import errno
import hashlib

import pytest
from conftest import read_jsonl, saving_every

from rlvr.runs.checkpoints import checkpoint_problem, last_complete_checkpoint

ARGS = ("--max_steps", "3", *saving_every(1), "--save_total_limit", "1")


def digest(folder) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.mark.parametrize("failure", ["oserror", "torch"])
def test_a_full_disk_mid_checkpoint_keeps_the_previous_one_and_resumes(
    run_recipe, monkeypatch, capsys, tmp_path, failure
):
    import torch
    from transformers import Trainer

    out = tmp_path / "run"
    saved = {}
    real_save = torch.save
    save_checkpoint = Trainer._save_checkpoint

    def full_disk_save(obj, f, *args, **kwargs):
        if "checkpoint-2" in str(f):
            with open(f, "wb") as partial:
                partial.write(b"\0" * 1000)  # what fitted before the disk was full
            if failure == "oserror":
                raise OSError(errno.ENOSPC, "No space left on device", str(f))
            raise RuntimeError(
                "[enforce fail at inline_container.cc:664] . PytorchStreamWriter failed writing file "
                "data/0: file write failed"
            )
        return real_save(obj, f, *args, **kwargs)

    def remember_checkpoint_1(self, model, trial):
        save_checkpoint(self, model, trial)
        if self.state.global_step == 1:
            saved.update(digest(out / "checkpoint-1"))

    monkeypatch.setattr(torch, "save", full_disk_save)
    monkeypatch.setattr(Trainer, "_save_checkpoint", remember_checkpoint_1)
    with pytest.raises(SystemExit) as exit_info:
        run_recipe(*ARGS, output_dir=out)
    assert exit_info.value.code == 1
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert "Traceback" not in "\n".join(err)
    reason = "No space left on device" if failure == "oserror" else "file write failed"
    assert err[-1].startswith("error: disk: ") and reason in err[-1], err[-1]
    assert err[-1].endswith(
        f"newest complete checkpoint: {out / 'checkpoint-1'}; free space and rerun with --resume_from_checkpoint true"
    ), err[-1]

    assert saved and digest(out / "checkpoint-1") == saved  # untouched, and not rotated away
    assert checkpoint_problem(out / "checkpoint-2") == "no trainer_state.json"  # the torn one
    assert last_complete_checkpoint(out) == (
        str(out / "checkpoint-1"),
        [(str(out / "checkpoint-2"), "no trainer_state.json")],
    )

    monkeypatch.setattr(torch, "save", real_save)  # space freed: the same command resumes and finishes
    run_recipe(*ARGS, "--resume_from_checkpoint", "true", output_dir=out)
    rows = [r for r in read_jsonl(out / "metrics.jsonl") if "loss" in r]
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert [r["generated_samples"] for r in rows] == [16, 32, 48]
    assert checkpoint_problem(out / "checkpoint-3") is None and not (out / "checkpoint-1").exists()


def test_disk_full_is_recognised_under_its_several_names():
    from rlvr.runs.checkpoints import is_disk_full

    assert is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert is_disk_full(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert is_disk_full(
        Exception(
            'Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })'
        )
    )
    wrapped = RuntimeError("save failed")
    wrapped.__cause__ = OSError(errno.ENOSPC, "No space left on device")
    assert is_disk_full(wrapped)
    assert not is_disk_full(OSError(errno.EACCES, "Permission denied"))
    assert not is_disk_full(ValueError("loss is nan"))
