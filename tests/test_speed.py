"""Speed-up switches (rlvr/speedups): a switch off really turns its path off; on gives the same samples and loss."""

import importlib.util
from pathlib import Path

import pytest
import torch
from conftest import FAST_RECIPE, REPO, read_jsonl

from rlvr.inputs import ConfigError
from rlvr.runs.cpu_threads import apply_cpu_threads, cpu_threads_for, local_processes, threads_pay_off
from rlvr.speedups import SPEEDUPS, parse_speedups
from rlvr.speedups.shared_prefix import common_prefix_length, shared_prefix_length
from rlvr.training.runner import main


def test_speedups_field_parses_all_none_and_lists():
    assert parse_speedups("all") == frozenset(SPEEDUPS)
    assert parse_speedups("none") == frozenset()
    assert parse_speedups(" shared_prefix , ") == {"shared_prefix"}
    with pytest.raises(ValueError, match="bogus"):
        parse_speedups("shared_prefix,bogus")


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("speedups", "warp_drive", "warp_drive"),
        *(("cpu_threads", value, "positive integer") for value in ["0", "-1", "two", "1.5", ""]),
        ("cpu_threads", "99999999999", "more than this machine's"),
    ],
)
def test_an_unknown_speedup_or_bad_thread_count_is_one_line_before_any_model_loads(tmp_path, field, value, message):
    argv = [
        "--config",
        FAST_RECIPE,
        "--model_name_or_path",
        str(tmp_path / "none"),
        "--build_tiny_model",
        "false",
        "--output_dir",
        str(tmp_path / "o"),
        f"--{field}",
        value,
    ]
    with pytest.raises(ConfigError) as err:
        main(argv)
    assert err.value.field == field and message in str(err.value)


@pytest.mark.parametrize(
    "value, cores, environ, expected",
    [
        ("auto", {0, 1}, {}, 2),  # plain python on a 2-core machine: both cores
        ("auto", {0, 1}, {"OMP_NUM_THREADS": "1"}, 2),  # accelerate's export does not decide
        ("auto", {0, 1, 2, 3}, {"LOCAL_WORLD_SIZE": "2"}, 2),  # 2 processes share 4 cores
        ("auto", {0, 1}, {"LOCAL_WORLD_SIZE": "4"}, 1),  # never below one
        ("auto", {0, 1, 2, 3, 4, 5}, {"OMPI_COMM_WORLD_LOCAL_SIZE": "3"}, 2),
        ("auto", {3}, {}, 1),  # taskset/cgroup limits count, not the machine's cores
        ("1", {0, 1}, {}, 1),  # the crowded-machine switch
        ("3", {0, 1}, {"LOCAL_WORLD_SIZE": "2"}, 3),  # an explicit count is taken as given
    ],
)
def test_cpu_threads_follow_affinity_and_local_processes(monkeypatch, value, cores, environ, expected):
    for name in ("LOCAL_WORLD_SIZE", "MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "MV2_COMM_WORLD_LOCAL_SIZE"):
        monkeypatch.delenv(name, raising=False)
    for name, setting in environ.items():
        monkeypatch.setenv(name, setting)
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: cores)
    monkeypatch.setattr("os.cpu_count", lambda: 8)  # the machine; the affinity above is this process's share of it
    assert cpu_threads_for(value) == expected
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(7 if expected != 7 else 5)
        assert apply_cpu_threads(value, use_cpu=False) is None and torch.get_num_threads() != expected  # GPU: untouched
        quiet = lambda threads: (0.5e-3, 1e-3)
        assert apply_cpu_threads(value, use_cpu=True, probe=quiet) == expected == torch.get_num_threads()
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize(
    "value, timings, crowded",
    [
        ("auto", (0.6e-3, 1.2e-3), False),  # quiet: two threads halve the probe
        ("auto", (3.1e-3, 1.2e-3), True),  # crowded: the second thread waits at the barrier
        ("auto", (1.2e-3, 1.2e-3), False),  # no gain but no loss: noise on a quiet machine
        ("auto", (1.8e-3, 1.2e-3), True),  # 1.5x slower: crowded
        ("2", (3.1e-3, 1.2e-3), False),  # an explicit count is never probed
    ],
)
def test_auto_keeps_its_count_whatever_the_load_and_says_when_the_cores_are_busy(monkeypatch, value, timings, crowded):
    """The count follows the cores, never the load (a count can change float results, so a busy machine at launch
    must not give another run); the line names the crowding and the fix."""
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    probed, lines, before = [], [], torch.get_num_threads()
    try:
        got = apply_cpu_threads(
            value, use_cpu=True, echo=lines.append, probe=lambda threads: probed.append(threads) or timings
        )
        assert got == 2 == torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
    assert probed == ([2] if value == "auto" else [])
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")  # ranks starting together would time each other: no probe
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1, 2, 3})
    try:
        assert apply_cpu_threads(value, use_cpu=True, probe=lambda threads: probed.append(threads) or timings) == 2
    finally:
        torch.set_num_threads(before)
    assert probed == ([2] if value == "auto" else [])
    assert len(lines) == 1 and lines[0].startswith("[threads] 2 intra-op thread(s) per process")
    assert ("other jobs hold the cores" in lines[0]) == crowded
    assert ("cpu_threads: 1" in lines[0]) == crowded


def test_the_probe_times_both_counts_and_leaves_torch_at_the_asked_count():
    before = torch.get_num_threads()
    try:
        many, one = threads_pay_off(2, pairs=3)
        assert torch.get_num_threads() == 2 and many > 0 and one > 0
    finally:
        torch.set_num_threads(before)


def test_local_processes_ignores_junk():
    assert local_processes({"LOCAL_WORLD_SIZE": "x", "MPI_LOCALNRANKS": "0"}) == 1
    assert local_processes({"MPI_LOCALNRANKS": "2"}) == 2


def test_a_run_uses_the_auto_thread_count_over_accelerates_export(run_recipe, monkeypatch, capsys):
    monkeypatch.setattr("rlvr.runs.cpu_threads.threads_pay_off", lambda threads: (0.5e-3, 1e-3))  # a quiet machine
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # what `accelerate launch` exports
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1})
    before = torch.get_num_threads()
    seen = []
    try:
        torch.set_num_threads(1)
        _trainer, _ = run_recipe("--max_steps", "1", "--cpu_threads", "auto")
        seen.append(torch.get_num_threads())
    finally:
        torch.set_num_threads(before)
    assert seen == [2]
    assert "[threads] 2 intra-op thread(s) per process (cpu_threads auto)" in capsys.readouterr().out


def test_shared_prefix_length_finds_the_prefix_and_steps_aside_when_it_cannot_apply():
    prefix = list(range(10, 30))  # 20 shared tokens
    prompts = [prefix + [1, 2], prefix + [3], prefix + [4, 5, 6]]
    width = max(map(len, prompts))
    ids = torch.zeros(3, width + 4, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) : width] = torch.tensor(p)
        mask[i, width - len(p) : width] = 1
        mask[i, width : width + 2 + i % 2] = 1  # right-padded completions
    assert common_prefix_length([torch.tensor(p) for p in prompts]) == 20
    assert shared_prefix_length(ids, mask, 4) == 20
    short = torch.tensor([[5, 6, 7, 1, 1], [5, 6, 8, 1, 1]])
    assert shared_prefix_length(short, torch.ones_like(short), 2) is None  # 2 shared tokens: not worth a call
    holed = mask.clone()
    holed[2, width - 2] = 0  # a pad inside a prompt: not a left-padded batch
    assert shared_prefix_length(ids, holed, 4) is None


def _batch(trainer, num_rows=8, completion=12, seed=0, group=1):
    """Left-padded chat prompts from the recipe's data + random right-padded completions; `group` consecutive rows
    share a prompt (a GRPO group)."""
    rows = [trainer.train_dataset[i // group]["prompt"] for i in range(num_rows)]
    tokenizer = trainer.processing_class
    texts = [tokenizer.apply_chat_template(r, add_generation_prompt=True, tokenize=False) for r in rows]
    prompts = tokenizer(texts, add_special_tokens=False)["input_ids"]
    width = max(map(len, prompts))
    gen = torch.Generator().manual_seed(seed)
    ids = torch.full((num_rows, width + completion), trainer.processing_class.pad_token_id)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) : width] = torch.tensor(p)
        length = int(torch.randint(1, completion + 1, (1,), generator=gen))
        ids[i, width : width + length] = torch.randint(0, 256, (length,), generator=gen)
        mask[i, width - len(p) : width + length] = 1
    return ids, mask


@pytest.mark.parametrize(
    "speedup, group", [("shared_prefix", 1), ("group_prompts", 3), ("group_prompts", 4), ("group_prompts", 1)]
)
def test_shared_prefix_gives_trls_logps_entropies_and_gradients(run_recipe, speedup, group):
    """Prefix once (shared_prefix), and each distinct prompt once (group_prompts: groups of 4 rows as TRL lays them
    out; groups of 3 and a last group of 2; no repeated prompt, which takes shared_prefix's layout): TRL's log-probs,
    entropies and gradients."""
    trainer, _ = run_recipe("--max_steps", "1", "--beta", "0.04")
    ids, mask = _batch(trainer, group=group)
    results = {}
    for speedups in (frozenset(), frozenset({speedup})):
        trainer.speedups = speedups
        calls = trainer._shared_prefix_calls
        trainer.model.zero_grad()
        logps, entropies, _ = trainer._get_per_token_logps_and_entropies(
            trainer.model, ids, mask, 12, compute_entropy=True
        )
        (logps * mask[:, -12:]).sum().backward()
        grads = torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None])
        results[speedups] = (logps.detach(), entropies.detach(), grads)
        assert (trainer._shared_prefix_calls > calls) == bool(speedups)  # off really takes TRL's path
    for off, on in zip(results[frozenset()], results[frozenset({speedup})]):
        torch.testing.assert_close(on, off, rtol=1e-4, atol=1e-4)


def test_group_prompts_tokenizes_each_distinct_prompt_once_to_trls_ids(run_recipe, monkeypatch):
    """A GRPO batch (each prompt G times, groups adjacent or not): the same ids as TRL's call on every row, from one
    chat-template call over the distinct prompts; all-distinct batches and other speed-ups take TRL's call as is."""
    trainer, _ = run_recipe("--max_steps", "1")
    prompts = [trainer.train_dataset[i]["prompt"] for i in (0, 1, 2)]
    batch = [prompts[i % 3] for i in range(9)] + [prompts[0]]
    calls = []
    template = trainer.processing_class.apply_chat_template
    monkeypatch.setattr(
        trainer.processing_class,
        "apply_chat_template",
        lambda conversation, **kw: calls.append(len(conversation)) or template(conversation=conversation, **kw),
    )
    for speedups, rows, expected_calls in (
        (frozenset(), batch, [10]),
        (frozenset({"group_prompts"}), batch, [3]),
        (frozenset({"group_prompts"}), prompts, [3]),
        (frozenset({"shared_prefix"}), batch, [10]),
    ):
        calls.clear()
        trainer.speedups = frozenset()
        expected = trainer._tokenize_prompts(rows)
        calls.clear()
        trainer.speedups = speedups
        ids, images, fields = trainer._tokenize_prompts(rows)
        assert calls == expected_calls
        assert [list(row) for row in ids] == [list(row) for row in expected[0]] and images is None and fields == {}


def test_row_copy_is_index_select_to_the_gradient_bit():
    """RowCopy's backward adds a contiguous copy of the gradient: the bits of index_select's own backward, for the
    (B, S, H, D)-ordered, column-sliced gradients SDPA hands the cache and for plain ones."""
    from rlvr.speedups.shared_prefix import RowCopy

    gen = torch.Generator().manual_seed(0)
    index = torch.randperm(64, generator=gen) // 8
    for grad in (
        torch.randn(64, 40, 2, 32, generator=gen).permute(0, 2, 1, 3)[:, :, :30],
        torch.randn(64, 2, 30, 32, generator=gen),
    ):
        got = []
        for select in (lambda x: x.index_select(0, index), lambda x: RowCopy.apply(x, index)):
            source = torch.randn(8, 2, 30, 32, generator=torch.Generator().manual_seed(1), requires_grad=True)
            out = select(source)
            out.backward(grad)
            got.append((out.detach(), source.grad))
        assert torch.equal(got[0][0], got[1][0]) and torch.equal(got[0][1], got[1][1])


def test_group_layout_runs_each_distinct_prompt_once_whatever_its_length():
    """GroupLayout on the tiny speller: rests of 5, 1 and 9 tokens (and all of length 1: no rest pass), groups not
    consecutive; log-probs match the model's plain forward over the left-padded rows, and the rest pass sees U rows."""
    from transformers import AutoModelForCausalLM

    from rlvr.speedups.shared_prefix import GroupLayout, layout_for, prompt_rows, shared_prefix_logps

    model = AutoModelForCausalLM.from_pretrained(str(Path(__file__).resolve().parents[1] / "models" / "tiny-speller"))
    gen = torch.Generator().manual_seed(0)
    prefix, completion = torch.randint(0, 256, (20,), generator=gen), 7
    for rest_lengths, consecutive in (((5, 1, 9), False), ((5, 1, 9), True), ((1, 1), False)):
        rests = [torch.arange(n) + 30 * g for g, n in enumerate(rest_lengths)]  # distinct prompts
        order = [g for _ in range(3) for g in range(len(rests))]  # 0, 1, 2, 0, 1, 2, ...: groups interleaved
        if consecutive:  # the layout TRL generates in (0, 0, 0, 1, 1, 1, ...); its policy pass sees them shuffled
            order = sorted(order)
        prompts = [torch.cat([prefix, rests[g]]) for g in order]
        width = max(map(len, prompts))
        ids = torch.full((len(order), width + completion), 257)
        mask = torch.zeros_like(ids)
        for i, p in enumerate(prompts):
            length = 1 + (2 * i) % completion
            ids[i, width - len(p) : width] = p
            ids[i, width : width + length] = torch.randint(0, 256, (length,), generator=gen)
            mask[i, width - len(p) : width + length] = 1
        first, rows = prompt_rows(ids, mask, completion)
        assert first.tolist() == [order.index(g) for g in range(len(rests))]  # each prompt's first row, in order
        same = rows[:, None] == rows[None, :]
        assert torch.equal(same, torch.tensor(order)[:, None] == torch.tensor(order)[None, :])
        layout = layout_for(ids, mask, completion, 20, 257, group_prompts=True)
        assert isinstance(layout, GroupLayout) and layout.rest_width == max(rest_lengths) - 1
        if layout.rest_width:
            assert layout.rest_ids.shape[0] == len(rests)
        logps, _ = shared_prefix_logps(model, ids, mask, completion, 20, 1.0, False, group_prompts=True)
        full = model(input_ids=ids, attention_mask=mask).logits[:, width - 1 : -1].log_softmax(-1)
        expected = full.gather(-1, ids[:, width:, None]).squeeze(-1) * mask[:, width:]
        torch.testing.assert_close(logps, expected, rtol=1e-4, atol=1e-4)
    assert prompt_rows(ids[:2], mask[:2], completion) is None  # two distinct prompts: nothing to share


def indexing_backward_races(threads: int = 2, calls: int = 50) -> bool:
    """Whether this machine shows the race the next test guards against: the backward of indexing (`keys[index]`,
    the per-row copy `copy_rows` replaced) run up to `calls` times at `threads` threads on a cache of the tiny step's
    shape ((8 -> 64) x 2 x 125 x 32) until two calls' gradients differ in their bits. They do wherever two threads
    really run at once (on a 2-core machine, 19 repeats of one call all differed from the first); where they never
    do, there is nothing to see."""
    gen = torch.Generator().manual_seed(0)
    keys = torch.randn(8, 2, 125, 32, generator=gen, requires_grad=True)
    index = torch.arange(8).repeat_interleave(8)[torch.randperm(64, generator=gen)]
    weights = torch.randn(64, 2, 125, 32, generator=gen)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        first = None
        for _ in range(calls):
            keys.grad = None
            (keys[index] * weights).sum().backward()
            if first is None:
                first = keys.grad.clone()
            elif not torch.equal(first, keys.grad):
                return True
        return False
    finally:
        torch.set_num_threads(before)


@pytest.mark.serial  # two threads at once: the machine's cores, not a pytest worker's share
def test_group_layout_gives_the_same_gradient_bits_on_every_call():
    """The policy pass under group_prompts, at 2 threads, on TRL's shuffled rows (8 prompts x 8 completions, each
    group's rows scattered): three identical calls give the same gradients to the bit. The per-row copy of each
    prompt's keys used to index the cache, and the backward of indexing adds a group's 8 row gradients in parallel,
    in an order that changed from call to call: every parameter below the last layer's queries came out different,
    and two runs of one recipe and seed drifted apart from their second step (rlvr/speedups/shared_prefix.py, copy_rows).
    Skipped where that race cannot show (fewer than two cores that run at once): the check would pass vacuously."""
    from transformers import AutoModelForCausalLM

    if not indexing_backward_races():
        pytest.skip(
            "two threads never ran at once here: indexing's backward gave the same bits 50 times, so this "
            "machine cannot show the race the check guards against"
        )

    from rlvr.speedups.shared_prefix import shared_prefix_logps

    model = AutoModelForCausalLM.from_pretrained(str(Path(__file__).resolve().parents[1] / "models" / "tiny-speller"))
    gen = torch.Generator().manual_seed(0)
    prefix, completion = torch.randint(0, 256, (100,), generator=gen), 30
    order = torch.arange(8).repeat_interleave(8)[torch.randperm(64, generator=gen)]
    prompts = [
        torch.cat([prefix, torch.randint(0, 256, (16 + g % 4,), generator=torch.Generator().manual_seed(g))])
        for g in order.tolist()
    ]
    width = max(map(len, prompts))
    ids = torch.full((64, width + completion), 257)
    mask = torch.zeros_like(ids)
    for i, p in enumerate(prompts):
        length = int(torch.randint(10, completion + 1, (1,), generator=gen))
        ids[i, width - len(p) : width] = p
        ids[i, width : width + length] = torch.randint(0, 256, (length,), generator=gen)
        mask[i, width - len(p) : width + length] = 1
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        grads = []
        for _ in range(3):
            model.zero_grad(set_to_none=True)
            logps, _ = shared_prefix_logps(model, ids, mask, completion, 100, 1.0, False, group_prompts=True)
            (logps * torch.linspace(-1, 1, 64)[:, None]).sum().backward()
            grads.append([p.grad.clone() for p in model.parameters()])
    finally:
        torch.set_num_threads(threads)
    names = [name for name, _ in model.named_parameters()]
    for again in grads[1:]:
        assert [n for n, a, b in zip(names, grads[0], again) if not torch.equal(a, b)] == []


def test_runs_with_and_without_speedups_sample_the_same_and_score_the_same_loss(run_recipe, tmp_path):
    args = ("--max_steps", "2", "--beta", "0.04", "--seed", "7")
    off, off_dir = run_recipe(*args, "--speedups", "none", output_dir=tmp_path / "off")
    on, on_dir = run_recipe(*args, "--speedups", "all", output_dir=tmp_path / "on")
    assert not hasattr(off, "_shared_prefix_calls") and on._shared_prefix_calls > 0 and on._prefix_attention_calls > 0
    off_dir, on_dir = Path(off_dir), Path(on_dir)
    completions = [[r["completion"] for r in read_jsonl(d / "rollouts.jsonl")] for d in (off_dir, on_dir)]
    assert completions[0] == completions[1]
    rows = [[r for r in read_jsonl(d / "metrics.jsonl") if "loss" in r] for d in (off_dir, on_dir)]
    for a, b in zip(*rows):
        assert b["reward"] == a["reward"]
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-3, abs=1e-6)
        assert b["kl"] == pytest.approx(a["kl"], rel=1e-3, abs=1e-6)


@pytest.mark.parametrize("speedup, group", [("shared_prefix", 1), ("group_prompts", 4)])
def test_shared_prefix_gives_the_critics_values_and_gradients(run_recipe, speedup, group):
    """PPO's critic on the shared-prefix path: the same values and value-head/body gradients as its full pass."""
    trainer, _ = run_recipe(
        "--max_steps",
        "1",
        "--num_generations",
        "1",
        "--generation_batch_size",
        "8",
        "--per_device_train_batch_size",
        "8",
        algorithm="ppo",
    )
    ids, mask = _batch(trainer, group=group)
    width = ids.shape[1] - 12
    inputs = {
        "prompt_ids": ids[:, :width],
        "prompt_mask": mask[:, :width],
        "completion_ids": ids[:, width:],
        "completion_mask": mask[:, width:],
    }
    assert not any(m.p for m in trainer.value_model.modules() if isinstance(m, torch.nn.Dropout))  # disable_dropout
    results = {}
    for speedups in (frozenset(), frozenset({speedup})):
        trainer.speedups = speedups
        calls = trainer._shared_prefix_calls
        trainer.value_model.zero_grad()
        values = trainer._token_values(inputs)
        (values * mask[:, width:]).sum().backward()
        grads = torch.cat([p.grad.flatten() for p in trainer.value_model.parameters() if p.grad is not None])
        results[speedups] = ((values * mask[:, width:]).detach(), grads)
        assert (trainer._shared_prefix_calls > calls) == bool(speedups)
    for off, on in zip(results[frozenset()], results[frozenset({speedup})]):
        torch.testing.assert_close(on, off, rtol=1e-4, atol=1e-4)


def test_time_accounts_split_reference_old_policy_and_optimizer(run_recipe):
    """beta > 0 and two passes per generation: reference and old-policy passes and the optimizer step are timed."""
    _, out = run_recipe("--max_steps", "2", "--beta", "0.04", "--num_iterations", "2")
    rows = [r for r in read_jsonl(Path(out) / "metrics.jsonl") if "time/total_s" in r]
    assert len(rows) == 2 and all(r["time/optimizer_s"] > 0 for r in rows)  # step 2 reuses step 1's rollout
    assert rows[0]["time/reference_s"] > 0 and rows[1]["time/reference_s"] == 0
    assert rows[0]["time/old_policy_s"] > 0
    for r in rows:
        assert r["time/reference_s"] + r["time/old_policy_s"] <= r["time/logprobs_s"] + 1e-6
        assert r["time/optimizer_s"] <= r["time/optimization_s"] + 1e-6


def test_speed_benchmark_counts_the_shared_prefix_once_and_backward_as_twice_forward():
    import importlib.util

    from conftest import REPO

    spec = importlib.util.spec_from_file_location("speed_benchmark", REPO / "benchmarks" / "speed.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    shape = {
        "samples": 4,
        "shared_prefix": 10,
        "matmul_params": 1000,
        "attention_width": 0,
        "params": 1200,
        "beta": 0.0,
    }
    flops = bench.step_flops(shape, tokens=4 * 30, completion_tokens=4 * 20, old_policy=False)
    assert flops["generation"] == (4 * 30 - 3 * 10) * 2 * 1000  # 90 distinct tokens, 2 FLOPs per weight
    assert flops["policy_fwd_bwd"] == 3 * flops["generation"] and flops["reference"] == flops["old_policy"] == 0
    assert bench.step_flops({**shape, "beta": 0.04}, 120, 80, old_policy=True)["reference"] == flops["generation"]
    # 2 prompts of 15 tokens (the 10 shared + 5 of their own), 2 rows each: each prompt's own 5 tokens once
    grouped = bench.step_flops({**shape, "prompts": 2}, tokens=4 * 35, completion_tokens=4 * 20, old_policy=False)
    assert grouped["generation"] == (4 * 35 - 3 * 10 - 2 * 5) * 2 * 1000
    result = {
        "per_step": {
            "time/generation_s": 1.0,
            "time/optimization_s": 0.5,
            "time/optimizer_s": 0.1,
            "time/total_s": 2.0,
        },
        "tokens_per_step": 120,
        "completion_tokens_per_step": 80,
    }
    rows = {row[0]: row for row in bench.floor_table(shape, result, rate=1.8e5, optimizer_floor=0.05)}
    assert rows["generation"][2:] == (1.0, 1.0, 1.0)  # 180 kFLOP at 180 kFLOP/s: at the floor
    assert rows["optimizer"][2:] == (0.05, 0.1, 0.5)
    assert rows["other (scoring, bookkeeping)"][3] == pytest.approx(2.0 - 1.0 - 0.4 - 0.1)
    assert rows["step"][3] == 2.0 and "reference" not in rows
    run = {
        "train_runtime": 10.0,
        "wall_s": 12.0,
        "loss": 0.1,
        "reward": 1.0,
        "samples_per_s": 5.0,
        "outside_steps_s": 0.01,
        **result,
    }
    results = {
        "all": [run, {**run, "train_runtime": 14.0}],
        "bare": [{**run, "train_runtime": 36.0, "samples_per_s": None}],
    }
    summary = bench.summarise(results, "all", lambda name, merged: name)
    assert summary["all"]["time_ratio_to_bare"] == pytest.approx(12 / 36) and summary["all"]["floor"] == "all"
    assert summary["bare"]["time_ratio_to_baseline"] == 3.0 and "floor" not in summary["bare"]


def test_each_configs_floor_table_is_shown_with_that_configs_values(monkeypatch):
    """benchmarks/speed.py makes one `show_floor` per config in a loop; called once the loop has moved on (as a
    callback may be), each still shows its own config, shape, matmul rate and optimizer floor."""
    spec = importlib.util.spec_from_file_location("speed_benchmark", REPO / "benchmarks" / "speed.py")
    speed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(speed)
    shown = []
    monkeypatch.setattr(speed, "floor_table", lambda shape, merged, rate, floor: (shape["name"], rate, floor))
    monkeypatch.setattr(speed, "print_floor", lambda config, variant, rows: shown.append((config, variant, rows)))
    showers = []
    for config, rate, floor in (("a.yaml", 1.0, 0.1), ("b.yaml", 2.0, 0.2)):
        showers.append(speed.floor_shower(config, {"name": config}, rate, floor))
    for shower in showers:
        shower("all", {})
    assert shown == [("a.yaml", "all", ("a.yaml", 1.0, 0.1)), ("b.yaml", "all", ("b.yaml", 2.0, 0.2))]


def test_bare_trl_contender_trains_on_the_main_jobs_recipe(tmp_path):
    """The contender every speed ratio is taken against runs on the recipe that has in-training evaluations
    (`eval_strategy: steps`): plain TRL refuses that setting without an eval_dataset, so it gets the held-out prompts
    the recipe's own run evaluates; one step, with one evaluation of them."""
    import json
    import os
    import subprocess
    import sys

    out, recipe = tmp_path / "bare", tmp_path / "grpo_eval_every_step.yaml"
    recipe.write_text(f"base: {REPO / 'recipes' / 'tiny' / 'grpo.yaml'}\neval_steps: 1\n")
    command = [sys.executable, "benchmarks/speed.py", "--_bare", str(recipe), "--max_steps", "1"]
    command += ["--output_dir", str(out), "--cpu_threads", "1"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled", "PYTHONPATH": str(REPO)}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("loss" in row for row in rows) and any("eval_reward" in row for row in rows)
