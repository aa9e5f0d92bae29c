"""`rlvr doctor RUN_DIR`: read a finished or running GRPO run and print what is wrong with it and what to do.

    rlvr doctor runs/tiny-grpo              # a run of this repo (metrics.jsonl, config.yaml)
    rlvr doctor path/to/trl_output_dir      # a plain TRL GRPOTrainer output folder (trainer_state.json)
    rlvr doctor --thresholds                # the table of thresholds, each with why

What it checks, the keys it reads (ours, else plain TRL's: `READINGS`), how a sustained condition "shows" (a
sliding window of `WINDOW` steps) and the exit status: docs/doctor.md.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass

from rlvr.analysis.loaders import NUMBER, STRING, Run, load_any_run, typed
from rlvr.analysis.summaries import last, mean, time_totals, wall_time
from rlvr.inputs import ArgumentParser, ConfigError, cli
from rlvr.metrics.keys import (
    ALL_CORRECT,
    ALL_TRUNCATED,
    ALL_WRONG,
    CLIP_RATIO,
    CLIPPED_RATIO,
    ENTROPY,
    EVAL_EXACT,
    GENERATED_SAMPLES,
    GRAD_NORM,
    GROUP_SIDES,
    IDENTICAL,
    IS_RATIO,
    KL,
    LEARNING_RATE,
    LOGP_DIFF,
    LOSS,
    MEAN_LENGTH,
    REWARD,
    REWARD_STD,
    TOKEN_RATES,
    TOTAL,
    TRL_ZERO_STD,
    UNSCORED_PREFIX,
    reward_key,
    step_key,
    trl_reward_key,
    zero_std_key,
    zero_std_side_key,
)

WINDOW = 5  # logged steps averaged before a sustained condition counts


@dataclass(frozen=True)
class Threshold:
    value: float
    why: str


THRESHOLDS = {
    "idle_groups": Threshold(
        0.5,
        "share of prompt groups flat on the total reward: a flat group has advantage 0 and "
        "adds no gradient, so above half the step pays for generation mostly in vain",
    ),
    "truncated": Threshold(
        0.2,
        "share of completions cut off at max_completion_length: a cut answer has no closing "
        "tag and scores as wrong, so above one in five the reward measures the length budget",
    ),
    "entropy_floor": Threshold(
        0.05,
        "mean sampling entropy, nats per token: below it nearly every token is the "
        "arg-max, the G samples of a prompt come out alike and their group goes flat",
    ),
    "format_saturated": Threshold(
        0.95,
        "share of groups flat on format: the format reward has nothing left to "
        "teach, and paying it is a constant offset",
    ),
    "format_std_flat": Threshold(
        0.01,
        "std of a plain TRL run's format reward over the batch below which format "
        "counts as flat everywhere (TRL logs no per-group count)",
    ),
    "format_high": Threshold(
        0.9,
        "mean format reward (of its full 1.0) a format flat across groups must reach to "
        "count as saturated: flat and low is a format the policy never finds",
    ),
    "format_early": Threshold(0.25, "fraction of the run by which format saturated, counted as early"),
    "unsolved": Threshold(
        0.5, "exact success (else correctness) over the last steps below which the task counts as not learned"
    ),
    "stalled": Threshold(
        0.05,
        "rise of success (else correctness) from the first to the last window below which the task counts as stalled",
    ),
    "format_min_steps": Threshold(
        20, "logged steps a run needs before format saturation is judged: on fewer, success has not had time to rise"
    ),
    "false_full_credit": Threshold(
        0.05,
        "share of completions with full correctness but a wrong answer (the "
        "scorer's hole): one in twenty is a route the policy can climb",
    ),
    "hollow_format": Threshold(
        0.05,
        "share of completions paid full format for hollow tags (empty or unrelated "
        "think/answer): the format reward is being farmed",
    ),
    "hack_margin": Threshold(
        0.1,
        "rise of the reward and fall of success (else correctness), first window to last, "
        "that together name a hack: twice `stalled`, beyond a window's sampling noise",
    ),
    "spike_factor": Threshold(
        10.0,
        "a grad norm (or |loss|) this many times the median of the previous up to 20 "
        "steps is a spike: one update that far out of scale can undo what was learned",
    ),
    "spike_history": Threshold(5, "previous logged steps needed before spikes are judged"),
    "loss_floor": Threshold(
        0.5,
        "|loss| below which no loss spike is called: GRPO's loss hovers near 0, and its "
        "ratio to a near-0 median means nothing",
    ),
    "constant_reward": Threshold(
        1e-6,
        "TRL's reward_std (std of the total reward over the whole batch) at or below "
        "which every completion scored the same: no group can have contrast",
    ),
    "kl_blowup": Threshold(
        1.0,
        "mean KL to the reference, nats per token: the sampled tokens are then on average "
        "e times less likely under the reference; the anchor no longer holds the policy",
    ),
    "kl_still": Threshold(1e-4, "mean KL to the reference, nats per token, below which the policy has not moved"),
    "reward_drop": Threshold(
        0.25,
        "fall of the windowed mean reward from its peak, as a share of the peak: "
        "learning undone, the classic sign of a learning rate too high",
    ),
    "is_ratio_low": Threshold(
        0.9,
        "mean of TRL's vLLM importance-sampling ratio below which its correction scales "
        "the loss down by over a tenth: engines that agree read within 1% of 1; top_p 0.95 "
        "alone multiplies every token's ratio by 0.95 (huggingface/trl#6789)",
    ),
    "vllm_clip_max": Threshold(
        3.0,
        "TRL's default vllm_importance_sampling_clip_max (a run's own when it records "
        "one): past log(3.0) = 1.10 nats of |trainer - vLLM| log-prob per token x mean "
        "length, a completion whose gaps share a sign has a ratio past 3 (sequence_mask "
        "drops it) or under 1/3 (a third of its gradient or less)",
    ),
    "clip_fraction": Threshold(
        0.1,
        "share of tokens the PPO clip (epsilon, TRL's default 0.2) cut from a reused "
        "batch's gradient (num_iterations > 1): the main job's learning rate clips <= 7% "
        "on its second pass; a tenth means the step, not the data, sets the update",
    ),
    "proxy_rise": Threshold(
        0.05,
        "rise of the mean training reward from the first to the last third of the evaluated "
        "steps above which the reward counts as rising (in the reward's units)",
    ),
    "truth_flat": Threshold(
        0.02,
        "gain of held-out exact match over the same thirds at or below which it counts as "
        "flat: 2 points, under the noise of a few dozen held-out prompts",
    ),
    "generation_heavy": Threshold(
        0.6,
        "share of step time spent generating above which sampling (vLLM, shorter "
        "completions), not the optimizer, is the lever for speed",
    ),
}

# reading -> the keys that carry it: this repo's first, then plain TRL's (`rewards/<fn>/mean` matched by name part)
READINGS = {
    "zero_std": (zero_std_key(TOTAL), TRL_ZERO_STD),
    "truncated": (step_key("truncated"), CLIPPED_RATIO),
    "truncated_wrong": (step_key("truncated_wrong"),),
    "reward": (reward_key(TOTAL), REWARD),
    "reward_std": (REWARD_STD,),
    "success": (reward_key("success"), trl_reward_key("success")),
    "correctness": (
        reward_key("correctness"),
        trl_reward_key("correctness"),
        trl_reward_key("*correct*"),
        trl_reward_key("*accuracy*"),
    ),
    "format": (reward_key("format"), trl_reward_key("format"), trl_reward_key("*format*")),
    "format_flat": (zero_std_key("format"),),
    "format_std": (trl_reward_key("format", "std"), trl_reward_key("*format*", "std")),
    "entropy": (ENTROPY,),
    "kl": (KL,),
    "grad_norm": (GRAD_NORM,),
    "loss": (LOSS,),
    "false_full_credit": (step_key("false_full_credit"),),
    "hollow_format": (step_key("hollow_format"),),
    "mean_length": (MEAN_LENGTH,),
    "is_ratio": (f"{IS_RATIO}mean",),
    "logp_diff": (f"{LOGP_DIFF}mean",),
    "clip": (CLIP_RATIO,),
    "held_out": (EVAL_EXACT,),
}
ZERO_STD_SIDES = {  # zero_std_side/<side> -> how a finding names it
    ALL_WRONG: "all wrong",
    ALL_CORRECT: "all correct",
    ALL_TRUNCATED: "all truncated",
    IDENTICAL: "identical completions (collapsed entropy)",
}
NON_FINITE_READINGS = ("loss", "grad_norm", "kl", "reward")


@dataclass
class Finding:
    severity: str  # "problem" or "note"
    step: int | None
    what: str
    remedy: str

    def line(self, number: int) -> str:
        where = f"step {self.step}" if self.step is not None else "whole run"
        return f"{number}. [{self.severity}] {where}: {self.what} -> {self.remedy}"


def problem(step: int | None, what: str, remedy: str) -> list[Finding]:
    """A check's finding of a problem, as the one-item list a check returns."""
    return [Finding("problem", step, what, remedy)]


@dataclass
class Diagnosis:
    run: Run
    source: str  # "rlvr run" or "plain TRL (<file>)"
    settings: dict
    findings: list[Finding]
    skipped: list[str]  # checks the run had no keys for
    unread: list[str] = dataclasses.field(default_factory=list)  # settings files not read, each with why

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "problem"]

    def lines(self) -> list[str]:
        return [f.line(i) for i, f in enumerate(self.findings, 1)]

    def text(self) -> str:
        steps = [row.get("step") for row in self.run.rows]
        head = (
            f"rlvr doctor {self.run.path}: {self.source}, {len(self.run.rows)} logged steps "
            f"(step {steps[0]} to {steps[-1]}), {'finished' if self.run.finished else 'not finished'}"
        )
        verdict = f"{len(self.problems)} problem(s) found" if self.problems else "no problem found"
        tail = [f"not checked (the run has no keys for it): {', '.join(self.skipped)}"] if self.skipped else []
        return "\n".join([head, *self.unread_lines(), *self.lines(), verdict, *tail])

    def unread_lines(self) -> list[str]:
        return [f"settings not read: {why}; the checks run without the run's settings" for why in self.unread]


# ---- reading a run ---------------------------------------------------------------------------------------------


def key_for(run: Run, reading: str) -> str | None:
    """The first of the reading's keys the run logged (`*` matches any name part of a TRL reward function)."""
    logged = dict.fromkeys(key for row in run.rows for key in row)
    for candidate in READINGS[reading]:
        if "*" not in candidate:
            if candidate in logged:
                return candidate
            continue
        head, _, tail = candidate.replace("*", "\0", 1).partition("\0")
        inner, _, tail = tail.partition("*")
        for key in logged:
            if key.startswith(head) and key.endswith(tail) and inner in key[len(head) : len(key) - len(tail)]:
                return key
    return None


def finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def points(run: Run, key: str) -> list[tuple[int, float]]:
    return [(int(row["step"]), float(row[key])) for row in run.rows if finite(row.get(key))]


def windows(series: list[tuple[int, float]], width: int = WINDOW):
    """(first step, mean) of every sliding window of `width` points (one window over all, if fewer)."""
    width = max(1, min(width, len(series)))
    for i in range(len(series) - width + 1):
        chunk = series[i : i + width]
        yield chunk[0][0], sum(v for _, v in chunk) / width


def first_sustained(series, passes) -> tuple[int, float] | None:
    """(onset step, mean from it on) of a condition the run stayed in (docs/doctor.md), or None."""
    for step, value in windows(series):
        if passes(value) and passes(from_step(series, step)):
            onset = next((s for s, v in series if s >= step and passes(v)), step)
            return onset, from_step(series, onset)
    return None


def sustained(run: Run, keys: dict, reading: str, threshold: str, below: bool = False):
    """(the reading's series, `first_sustained` of it across the threshold), or None: every threshold check's start."""
    if not keys.get(reading):
        return None
    limit = THRESHOLDS[threshold].value
    series = points(run, keys[reading])
    hit = first_sustained(series, (lambda v: v < limit) if below else (lambda v: v >= limit))
    return (series, hit) if hit else None


def mean_from(run: Run, key: str | None, step: int) -> float | None:
    """Mean of `key` from `step` to the end of the run; None without the key."""
    return from_step(points(run, key), step) if key else None


def from_step(series, step: int) -> float | None:
    return mean([v for s, v in series if s >= step])


# ---- the checks, each a function of the run (and its settings) returning findings ------------------------------


def setting(settings: dict, name: str, default="?"):
    value = settings.get(name)
    return default if value is None else value


def blind_readings(run, keys) -> list[Finding]:
    """The readings the run logged but never as a finite number (NaN, inf or null at every step), in one finding:
    the checks that read them see an empty series and can say nothing. The divergence readings are
    `check_non_finite`'s."""
    blind = [
        key
        for reading, key in keys.items()
        if key is not None and reading not in NON_FINITE_READINGS and not points(run, key)
    ]
    if not blind:
        return []
    readers = [
        check.__name__.removeprefix("check_")
        for check, needs in CHECKS
        if any(keys.get(reading) in blind for reading in needs)
    ]
    first = next(row for row in run.rows if blind[0] in row)
    return problem(
        int(first["step"]),
        f"unreadable: {', '.join(blind)} {'is' if len(blind) == 1 else 'are'} {first[blind[0]]} from step "
        f"{int(first['step'])} on, never a finite number"
        + (f"; the {', '.join(readers)} check(s) cannot judge the run" if readers else ""),
        "the metric was computed on an empty or broken batch: read the training log and rollouts of the first steps "
        "(a reward or a length that is NaN poisons every mean it enters)",
    )


def check_non_finite(run, settings, keys):
    findings = []
    for reading in NON_FINITE_READINGS:
        key = keys.get(reading)
        if key is None:
            continue
        # metrics.jsonl writes NaN/inf as null; trainer_state.json keeps NaN and Infinity
        bad = [row for row in run.rows if key in row and not finite(row[key])]
        if not bad:
            continue
        step, shown = int(bad[0]["step"]), bad[0][key]
        if len(bad) == sum(key in row for row in run.rows):  # never finite: broken from the start, not diverged
            what = f"divergence: {key} is {shown} from step {step} on, at every logged step ({len(bad)})"
            remedy = (
                "a reward function returns NaN or inf (or nothing but None): call each on a few completions of "
                "the run before training again"
                if reading == "reward"
                else "non-finite from the first logged step is the setup, not the learning rate: check the model's "
                "weights and dtype (fp16 overflows), then the reward"
            )
        else:
            what = f"divergence: {key} is {shown} ({len(bad)} of {len(run.rows)} logged steps non-finite)"
            remedy = (
                f"lower learning_rate (now {setting(settings, 'learning_rate')}) 3-10x and keep max_grad_norm "
                f"(now {setting(settings, 'max_grad_norm', 1.0)}) at 1.0 or below; resume from the last "
                f"checkpoint before step {step}"
            )
        findings += problem(step, what, remedy)
    return findings


def check_unscored(run, settings, keys):
    """A reward function that left completions unscored (None or NaN, `step/unscored/<name>`): its mean, and the
    total trained on, are over the scored ones only."""
    findings = []
    for key in dict.fromkeys(k for row in run.rows for k in row if k.startswith(UNSCORED_PREFIX)):
        series = points(run, key)
        hit = next(((s, v) for s, v in series if v > 0), None)
        if hit is None:
            continue
        share = mean([v for _, v in series])
        name = key.removeprefix(UNSCORED_PREFIX)
        findings += problem(
            hit[0],
            f"unscored completions: {name} returned None or NaN for {share:.0%} of the completions over the run "
            f"({hit[1]:.0%} at step {hit[0]}, its first; {key}); its {reward_key(name)} and the total are "
            "over the scored ones only",
            f"make {name} return a number for every completion it can judge; None is for completions it is "
            "not meant to score (another task's), and a NaN is usually an error caught too late",
        )
    return findings


def spikes(series, floor: float = 0.0) -> list[tuple[int, float, float]]:
    """(step, value, previous median) of each point beyond `spike_factor` times the median |value| of the previous
    up to 20 points that are not 0 (at least `spike_history` of them), ignoring |value| <= floor."""
    factor, history = THRESHOLDS["spike_factor"].value, int(THRESHOLDS["spike_history"].value)
    found = []
    for i in range(history, len(series)):
        # exact zeros are steps whose groups were all flat (no gradient), not a scale: a median of 0 makes any step
        # with contrast an "infinite" spike, so the median is over the previous non-zero values
        previous = [abs(v) for _, v in series[max(0, i - 20) : i] if v != 0]
        step, value = series[i]
        if len(previous) >= history and abs(value) > max(floor, factor * statistics.median(previous)):
            found.append((step, value, statistics.median(previous)))
    return found


def check_spikes(run, settings, keys):
    findings = []
    for reading, floor in (("grad_norm", 0.0), ("loss", THRESHOLDS["loss_floor"].value)):
        if keys.get(reading) and (found := spikes(points(run, keys[reading]), floor)):
            step, value, median = found[0]
            findings += problem(
                step,
                f"divergence: {keys[reading]} spiked to {value:.3g} ({abs(value) / max(median, 1e-12):.0f}x the "
                f"median {median:.3g} of the steps before; {len(found)} spike(s) in the run)",
                f"lower learning_rate (now {setting(settings, 'learning_rate')}) or max_grad_norm (now "
                f"{setting(settings, 'max_grad_norm', 1.0)}); warmup_steps helps when it happens early",
            )
    return findings


def check_kl(run, settings, keys):
    if not (found := sustained(run, keys, "kl", "kl_blowup")):
        return []
    hit, limit = found[1], THRESHOLDS["kl_blowup"].value
    temperature = settings.get("temperature")
    tempered = (
        f"; at temperature {temperature} TRL measures it on logits / {temperature}, which magnifies it"
        if isinstance(temperature, (int, float)) and 0 < temperature < 0.5
        else ""
    )
    return problem(
        hit[0],
        f"divergence: KL to the reference blew up to {hit[1]:.3g} nats/token (mean from step {hit[0]} "
        f"on; limit {limit:g}{tempered})",
        f"raise beta (now {setting(settings, 'beta')}) or lower learning_rate (now "
        f"{setting(settings, 'learning_rate')})",
    )


def check_learning_rate(run, settings, keys):
    """Too much: the windowed reward falls far from its peak. Too little: the policy never leaves the reference
    (KL stays ~0) although groups had contrast to learn from."""
    findings = []
    lr = setting(settings, "learning_rate", None)
    if lr is None and run.rows:
        lr = run.rows[0].get(LEARNING_RATE, "?")
    if keys.get("reward"):
        rewards = list(windows(points(run, keys["reward"])))
        if rewards:
            peak_at = max(range(len(rewards)), key=lambda i: rewards[i][1])
            peak, end = rewards[peak_at][1], rewards[-1][1]
            drop = THRESHOLDS["reward_drop"].value
            later = [(s, v) for s, v in rewards[peak_at:] if peak > 0 and v < peak * (1 - drop)]
            if later:
                findings += problem(
                    later[0][0],
                    f"learning rate too high: mean {keys['reward']} fell from its peak {peak:.3g} (step "
                    f"{rewards[peak_at][0]}) to {end:.3g} at the end (learning_rate {lr})",
                    "lower learning_rate 3-10x, add warmup_steps, or keep beta > 0 as an anchor",
                )
    if keys.get("kl") and len(run.rows) > WINDOW:
        kl = points(run, keys["kl"])[1:]  # the first step's KL is 0 by construction (policy = reference)
        zero_std = points(run, keys["zero_std"]) if keys.get("zero_std") else []
        had_contrast = not zero_std or (mean([v for _, v in zero_std]) or 0) < 0.9
        still = THRESHOLDS["kl_still"].value
        if kl and max(v for _, v in kl) < still and had_contrast:
            findings += problem(
                kl[0][0],
                f"learning rate does nothing: KL to the reference stayed below {still:g} nats/token over the run "
                f"(max {max(v for _, v in kl):.2g}) while groups had contrast (learning_rate {lr})",
                "raise learning_rate 10-100x: TRL's 1e-6 default is for billion-parameter models",
            )
    return findings


def check_truncation(run, settings, keys):
    if not (found := sustained(run, keys, "truncated", "truncated")):
        return []
    series, hit = found
    extra = []
    if (wrong := mean_from(run, keys.get("truncated_wrong"), hit[0])) is not None:
        extra.append(f"{wrong:.0%} of the wrong ones were cut")
    if (length := mean_from(run, keys.get("mean_length"), hit[0])) is not None:
        extra.append(f"mean length {length:.0f} tokens")
    cap = setting(settings, "max_completion_length")
    return problem(
        hit[0],
        f"truncation: {from_step(series, hit[0]):.0%} of completions cut off at max_completion_length "
        f"{cap} ({keys['truncated']}, from step {hit[0]} on{'; ' + ', '.join(extra) if extra else ''})",
        "raise max_completion_length above the longest right answer (a cut completion scores as "
        "wrong: this is a length budget, not the model; mask_truncated_completions is no substitute, the "
        "policy learns to shorten its answers either way: results/ablations/truncation-masking), or add "
        "overlong_penalty if it rambles",
    )


def minimised_entropy(settings) -> str | None:
    """The remedy when the recipe lowers entropy on purpose (a negative `entropy_coef`, or `late_entropy_coef` from its
    step: TRL subtracts coef x the mean entropy from the loss), where the usual causes (learning rate, temperature)
    are not the ones to change."""
    for field in ("late_entropy_coef", "entropy_coef"):  # the late one is the coefficient the run ends with
        coef = settings.get(field)
        if isinstance(coef, (int, float)) and not isinstance(coef, bool) and coef < 0:
            when = f" from step {settings.get('late_entropy_step', 0)}" if field == "late_entropy_coef" else ""
            return (
                f"{field} {coef:g}{when} minimises entropy on purpose (docs/algorithms.md): move it toward 0 if the "
                "run needs its G samples to differ"
            )
    return None


def check_entropy(run, settings, keys):
    if not (found := sustained(run, keys, "entropy", "entropy_floor", below=True)):
        return []
    (series, hit), floor = found, THRESHOLDS["entropy_floor"].value
    temperature = settings.get("temperature")
    if sharpening := minimised_entropy(settings):
        remedy = sharpening
    elif isinstance(temperature, (int, float)) and temperature >= 1.0:  # the sampler is not the cause: the policy is
        remedy = (
            "the policy collapsed onto few tokens at full temperature: lower learning_rate and keep beta > 0 "
            "so it stays near the reference's spread"
        )
    else:
        remedy = "raise temperature toward 1.0 (sampling this cold makes the G samples alike), or lower learning_rate"
    return problem(
        hit[0],
        f"entropy collapse: sampling entropy {from_step(series, hit[0]):.3g} nats/token from step "
        f"{hit[0]} on (first step {series[0][1]:.3g}; floor {floor:g}) at temperature "
        f"{setting(settings, 'temperature')}",
        remedy,
    )


def idle_cause(run, keys, settings, step: int) -> tuple[str, str]:
    """(the flat groups' side, its remedy): a constant reward (TRL's batch `reward_std` 0), else `zero_std_side/*`;
    never guessed from means (a mean success of 0.5 fits any mix of all-wrong and all-correct groups)."""
    g = settings.get("num_generations")
    small_g = isinstance(g, int) and g <= 2
    remedies = {
        ALL_TRUNCATED: "raise max_completion_length: the flat groups are completions cut off before their answer",
        IDENTICAL: "raise temperature: the G samples of a prompt are the same text",
        ALL_WRONG: "easier prompts (shorter words, a curriculum), more samples per prompt, or DAPO's dynamic "
        "sampling to buy contrast back",
        ALL_CORRECT: "harder prompts (longer words): these are solved and cost generation for no gradient",
    }
    sides = {side: mean_from(run, zero_std_side_key(side), step) for side in ZERO_STD_SIDES}
    sides = {side: value for side, value in sides.items() if value is not None}
    spread = mean_from(run, keys.get("reward_std"), step)
    if spread is not None and spread <= THRESHOLDS["constant_reward"].value:
        return (
            (
                f"the reward is constant: {keys['reward_std']} {spread:.2g} over the batches, every completion "
                f"scored {mean_from(run, keys.get('reward'), step) or 0:.3g}"
            ),
            (
                "the reward functions give every completion the same score: call them on a few completions of the "
                "run (a column they do not receive, a format they do not parse: conversational completions are "
                "lists of messages) before training further"
            ),
        )
    if sides:
        named = ", ".join(f"{ZERO_STD_SIDES[s]} {v:.0%}" for s, v in sides.items())
        # a cut-off or a collapsed group is also all wrong or all correct: the specific cause wins when it is half
        specific = [s for s in (ALL_TRUNCATED, IDENTICAL) if sides.get(s, 0) >= 0.5 * max(sides.values())]
        cause = specific[0] if specific else max(GROUP_SIDES, key=lambda s: sides.get(s, 0))
        text, remedy = f"groups by side: {named}", remedies[cause]
        if cause == IDENTICAL and (sharpening := minimised_entropy(settings)):
            remedy = sharpening
    else:
        text = "side not logged (no zero_std_side/* keys)"
        remedy = (
            "log the sides (`rlvr.metrics.readings.with_readings(trainer)` on a plain TRL trainer): all wrong "
            "wants easier prompts, all correct harder ones; more samples per prompt buy contrast on either"
        )
    if small_g:
        text += f"; num_generations {g}: G independent 0/1 outcomes are all equal with probability p^G + (1-p)^G >= 1/2"
        remedy = "raise num_generations to 8 or more; then " + remedy
    return text, remedy


def check_idle_groups(run, settings, keys):
    if not (found := sustained(run, keys, "zero_std", "idle_groups")):
        return []
    series, hit = found
    caveat = " (TRL's isclose(std, 0) count)" if keys["zero_std"] == TRL_ZERO_STD else ""
    cause, remedy = idle_cause(run, keys, settings, hit[0])
    return problem(
        hit[0],
        f"idle groups: {from_step(series, hit[0]):.0%} of prompt groups flat on the reward "
        f"({keys['zero_std']}{caveat}, from step {hit[0]} on; {cause})",
        remedy,
    )


def check_format(run, settings, keys):
    """Format saturated early while the task is not learned: the easy part of the reward stopped teaching and
    pays a constant, the hard part gives the only contrast left."""
    found = (
        sustained(run, keys, "format_flat", "format_saturated")
        if keys.get("format_flat")
        else sustained(run, keys, "format_std", "format_std_flat", below=True)
    )
    solved = keys.get("success") or keys.get("correctness")
    saturated = found[1] if found else None
    if not saturated or not solved or len(run.rows) < THRESHOLDS["format_min_steps"].value:
        return []
    level = mean_from(run, keys.get("format"), saturated[0])  # flat at 0 is a format never found, not one learned
    if level is None or level < THRESHOLDS["format_high"].value:
        return []
    steps = [int(row["step"]) for row in run.rows]
    early = steps[0] + THRESHOLDS["format_early"].value * (steps[-1] - steps[0])
    rates = points(run, solved)
    start, end = mean([v for _, v in rates[:WINDOW]]), mean([v for _, v in rates[-WINDOW:]])
    if (
        saturated[0] > early
        or end is None
        or end >= THRESHOLDS["unsolved"].value
        or end - start >= THRESHOLDS["stalled"].value
    ):
        return []
    return problem(
        saturated[0],
        f"format saturated early: flat on format from step {saturated[0]} of {steps[-1]} while {solved} "
        f"went from {start:.2f} to {end:.2f} (first and last {WINDOW} steps)",
        "format now pays a constant: lower its reward weight, or train on success/binary (format "
        "gated on the answer) so the reward pays only for the task",
    )


def check_hacks(run, settings, keys):
    findings = []
    remedies = {
        "false_full_credit": "the scorer pays full credit to wrong answers: train on `success` or `capped_correctness` "
        "(docs/rewards-and-extending.md)",
        "hollow_format": "the format reward pays for empty tags: gate format on the answer (`binary`, `success`) or "
        "require non-empty content",
    }
    for reading, remedy in remedies.items():
        if found := sustained(run, keys, reading, reading):
            (series, hit), limit = found, THRESHOLDS[reading].value
            findings += problem(
                hit[0],
                f"reward hack: {keys[reading]} {from_step(series, hit[0]):.1%} of completions from step {hit[0]} on "
                f"(peak window {max(v for _, v in windows(series)):.1%}; limit {limit:.0%})",
                remedy,
            )
    return findings


def check_task_vs_reward(run, settings, keys):
    """The reward rises while the task's own reward falls (from the means alone: plain TRL runs are named too)."""
    task, reward = keys.get("success") or keys.get("correctness"), keys.get("reward")
    if not task or not reward:
        return []
    margin = THRESHOLDS["hack_margin"].value
    rewards, solved = list(windows(points(run, reward))), list(windows(points(run, task)))
    if not rewards or len(solved) < WINDOW:  # a series never finite: `blind_readings` names it
        return []
    (_, reward_start), (_, reward_end) = rewards[0], rewards[-1]
    if reward_end - reward_start < margin or solved[0][1] - solved[-1][1] < margin:
        return []
    onset = next(step for step, value in solved if value <= solved[0][1] - margin)
    return problem(
        onset,
        f"reward hack: {reward} rose {reward_start:.3g} -> {reward_end:.3g} while {task} fell "
        f"{solved[0][1]:.3g} -> {solved[-1][1]:.3g} (first and last {WINDOW} steps)",
        "the reward pays for something besides the task: read rollouts from the fall on, then gate the "
        "other rewards on the answer (`success`, `binary`) or lower their weights",
    )


def check_vllm_mismatch(run, settings, keys):
    """TRL's vLLM/trainer mismatch correction (on with use_vllm): a ratio mean far below 1 scales the gradient down
    (top_p/top_k's kept mass, or a real mismatch); a gap compounding past log(clip_max) is masked
    (huggingface/trl#4772)."""
    mode = setting(settings, "vllm_importance_sampling_mode", "sequence_mask")
    top_p, top_k = settings.get("top_p"), settings.get("top_k")
    cuts = [f"top_p {top_p}"] * (finite(top_p) and top_p < 1) + [f"top_k {top_k}"] * (finite(top_k) and top_k > 0)
    if found := sustained(run, keys, "is_ratio", "is_ratio_low", below=True):
        (series, hit), ratio = found, keys["is_ratio"]
        remedy = (
            f"{' and '.join(cuts)} truncate vLLM's sampling: its log-probs are renormalised over the kept "
            "tokens, the trainer's are not, so each token's ratio is the kept mass (huggingface/trl#6789), "
            f"compounded over the completion under {mode}: train with top_p 1.0 and top_k 0"
            if cuts
            else "vLLM and the trainer disagree beyond rounding: run vLLM in the trainer's dtype, or "
            "vllm_importance_sampling_mode token_truncate (per token, capped: nothing compounds or is dropped)"
        )
        low = mean_from(run, IS_RATIO + "min", hit[0]) or 0
        return problem(
            hit[0],
            f"vLLM mismatch: importance-sampling ratio mean "
            f"{from_step(series, hit[0]):.3g} from step {hit[0]} on ({ratio}; 1 = no correction; min "
            f"{low:.3g}, masked sequences count as 0): the gradient is scaled down as much",
            remedy,
        )
    clip = settings.get("vllm_importance_sampling_clip_max", THRESHOLDS["vllm_clip_max"].value)  # None: no upper bound
    length = keys.get("mean_length")
    if not keys.get("logp_diff") or not length or not mode.startswith("sequence") or not finite(clip) or clip <= 1:
        return []
    lengths = dict(points(run, length))
    drift = [(s, v * lengths[s]) for s, v in points(run, keys["logp_diff"]) if s in lengths]
    if not (hit := first_sustained(drift, lambda v: v >= math.log(clip))):
        return []
    return problem(
        hit[0],
        f"vLLM mismatch: {keys['logp_diff']} x {length} = {hit[1]:.3g} nats per "
        f"completion from step {hit[0]} on, past log({clip:g}) = {math.log(clip):.2f}: completions whose "
        f"gaps share a sign get ratios past {clip:g} ({mode} drops them) or under 1/{clip:g}",
        "vllm_importance_sampling_mode token_truncate (per token, capped, none dropped) or a higher "
        "vllm_importance_sampling_clip_max; a lower temperature narrows the gap (huggingface/trl#4772)",
    )


def check_clip(run, settings, keys):
    """PPO's clip on a reused batch: a per-step event (a batch's first update clips nothing), not a windowed mean."""
    limit = THRESHOLDS["clip_fraction"].value
    over = [(step, value) for step, value in points(run, keys["clip"]) if value >= limit]
    if not over:
        return []
    return problem(
        over[0][0],
        f"off-policy steps: {keys['clip']} {over[0][1]:.0%} of tokens clipped at step {over[0][0]} "
        f"({len(over)} logged step(s) at or above {limit:.0%}; num_iterations "
        f"{setting(settings, 'num_iterations', 1)}, epsilon {setting(settings, 'epsilon', 0.2)})",
        f"lower learning_rate (now {setting(settings, 'learning_rate')}) or num_iterations: each pass "
        "over the batch moves the policy further from where it sampled; clipped tokens add no gradient",
    )


# ---- proxy vs truth: the training reward against held-out exact match during training (rlvr/metrics/held_out.py) ----


def check_held_out(run, settings, keys):
    """The training reward rose while held-out exact match did not (partial credit, format, a scorer's hole): the first
    and last third of the evaluations (one at least) against the training reward logged over their steps."""
    held_out = points(run, keys["held_out"])
    if len(held_out) < 3 or not keys.get("reward"):
        return []
    third = len(held_out) // 3
    first_until, last_after = held_out[third - 1][0], held_out[-third - 1][0]  # the training steps of each third
    reward = points(run, keys["reward"])
    start, end = mean([v for s, v in reward if s <= first_until]), mean([v for s, v in reward if s > last_after])
    gain = mean([v for _, v in held_out[-third:]]) - mean([v for _, v in held_out[:third]])
    rise = None if start is None or end is None else end - start
    if rise is None or rise < THRESHOLDS["proxy_rise"].value or gain > THRESHOLDS["truth_flat"].value:
        return []
    best_step, best = max(held_out, key=lambda point: point[1])
    return problem(
        held_out[0][0],
        f"proxy and truth diverge: mean {keys['reward']} rose {rise:+.3f} while held-out exact match "
        f"({keys['held_out']}) moved {gain:+.1%} (first vs last third of {len(held_out)} evaluations, "
        f"steps {held_out[0][0]}-{held_out[-1][0]}; best {best:.1%} at step {best_step})",
        "the reward pays for what the task does not: read the rollouts where it rose (partial credit, "
        "format, step/false_full_credit), train on `success` or `capped_correctness`"
        + (f", or keep the checkpoint of step {best_step}" if best > 0 else ""),
    )


def check_compute(run, settings, keys):
    """The bill, as a note: where step time goes and how fast samples come."""
    parts, step, totals = [], int(run.rows[-1]["step"]), time_totals(run)
    share = totals["generation_share"] if finite(totals["generation_share"]) else None
    if share is not None:
        parts.append(f"generation {share:.0%} of step time")
    if all(finite(totals[key]) and totals[key] for key in TOKEN_RATES):
        parts.append(
            "generated tokens/s: "
            + ", ".join(f"{totals[key]:.0f} of {phase} time" for key, phase in TOKEN_RATES.items())
        )
    # train_runtime when the run finished; a checkpoint's trainer_state.json is written before it: TRL's step_time
    seconds = wall_time(run) if finite(wall_time(run)) else None
    seconds = seconds or sum(v for _, v in points(run, "step_time"))
    samples = last(run, GENERATED_SAMPLES)  # a row that only reused a batch has none
    if seconds and finite(samples):
        parts.append(f"{samples / seconds:.1f} samples/s ({int(samples)} samples in {seconds:.0f} s of training)")
    elif seconds and step:  # a plain TRL log may end on a row at step 0
        parts.append(f"{seconds / step:.2f} s/step over {step} steps")
        if finite(tokens := run.rows[-1].get("num_tokens")):
            parts.append(f"{tokens / seconds:.0f} tokens/s (prompt + completion)")
    if not parts:
        return []
    if share is None:
        remedy = (
            "no time/* keys: how step time splits between sampling and the optimizer is not recorded (this "
            "repo's runner logs it)"
        )
    elif share >= THRESHOLDS["generation_heavy"].value:
        remedy = "sampling is the lever: vLLM (use_vllm), a shorter max_completion_length, fewer samples per prompt"
    else:
        remedy = "the optimizer side dominates: bigger generation batches amortise it; sampling speed-ups buy little"
    return [Finding("note", None, "compute bill: " + ", ".join(parts), remedy)]


CHECKS = (  # causes first: a diverged run explains everything after it
    (check_non_finite, NON_FINITE_READINGS),
    (check_unscored, ()),
    (check_spikes, ("grad_norm", "loss")),
    (check_kl, ("kl",)),
    (check_learning_rate, ("reward", "kl")),
    (check_clip, ("clip",)),
    (check_truncation, ("truncated",)),
    (check_entropy, ("entropy",)),
    (check_idle_groups, ("zero_std",)),
    (check_format, ("format_flat", "format_std")),
    (check_hacks, ("false_full_credit", "hollow_format")),
    (check_task_vs_reward, ("reward",)),
    (check_vllm_mismatch, ("is_ratio", "logp_diff")),
    (check_held_out, ("held_out",)),
    (check_compute, ()),
)


DIVERGED = ("divergence:", "learning rate too high", "off-policy steps:")  # titles of findings that break the policy
SYMPTOMS = (check_truncation, check_entropy, check_idle_groups, check_format)  # what a divergence also causes


# The run settings the checks read, and what each must be (`typed`): a wrong one is the line of a damaged file
SETTING_KINDS = {
    **dict.fromkeys(
        ("learning_rate", "max_grad_norm", "temperature", "beta", "max_completion_length", "num_generations"), NUMBER
    ),
    **dict.fromkeys(("entropy_coef", "late_entropy_coef", "late_entropy_step"), NUMBER),
    **dict.fromkeys(("top_p", "top_k", "vllm_importance_sampling_clip_max", "num_iterations", "epsilon"), NUMBER),
    "vllm_importance_sampling_mode": STRING,
}


def diagnose(path, loaded: Run | None = None) -> Diagnosis:
    """Every check on the run in `path` (see `load_any_run` for `loaded`)."""
    run, source, settings, unread = load_any_run(path, loaded)
    typed(settings, f"{path} ({source}) settings", SETTING_KINDS)
    keys = {reading: key_for(run, reading) for reading in READINGS}
    findings, skipped, follow_on = [], [], []
    for check, needs in CHECKS:
        if needs and not any(keys.get(n) for n in needs):
            skipped.append(check.__name__.removeprefix("check_"))
        else:
            found = check(run, settings, keys)
            findings += found
            follow_on += found if check in SYMPTOMS else []
        if check is check_non_finite:  # causes first: a series never finite right after the divergences
            findings += blind_readings(run, keys)
    diverged = [(f.step, i) for i, f in enumerate(findings, 1) if f.what.startswith(DIVERGED) and f.step is not None]
    for finding in follow_on:  # a diverged policy rambles, collapses, flattens groups: its remedy is the divergence's
        if diverged and finding.step is not None and finding.step >= min(diverged)[0]:
            finding.remedy = (
                f"follows the divergence at step {min(diverged)[0]} (finding {min(diverged)[1]}): fix "
                "that first; this is its symptom, not a separate cause"
            )
    parts = (("hollow_format", "hacks"), ("false_full_credit", "hacks"), ("truncated_wrong", "truncation"))
    for reading, check in parts:
        if not keys.get(reading) and check not in skipped:  # the check ran, without this part of it
            skipped.append(reading)
    return Diagnosis(run, source, settings, findings, list(dict.fromkeys(skipped)), unread)


def thresholds_table() -> str:
    """The thresholds as a Markdown table (docs/doctor.md shows this very table)."""
    lines = ["| threshold | value | why |", "|---|---|---|"]
    lines += [f"| `{name}` | {t.value:g} | {t.why} |" for name, t in THRESHOLDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("run_dir", metavar="RUN_DIR", nargs="?", help="a run folder (ours or a plain TRL output_dir)")
    parser.add_argument("--thresholds", action="store_true", help="print the thresholds table and exit")
    args = parser.parse_args(argv)
    if args.thresholds:
        print(thresholds_table())
        return 0
    if args.run_dir is None:
        raise ConfigError("RUN_DIR", "missing: name a run folder, e.g. `rlvr doctor runs/tiny-grpo`")
    diagnosis = diagnose(args.run_dir)
    print(diagnosis.text())
    return 1 if diagnosis.problems else 0


if __name__ == "__main__":
    raise SystemExit(cli(main))
