"""The shared prompt prefix computed once: `shared_prefix` and `group_prompts` (see rlvr/speedups/__init__.py).

`SharedPrefixTrainer` takes over two TRL passes where it is exact and hands them back to TRL everywhere else:
log-prob passes (policy, reference, old policy; PPO's critic through `SharedPrefixCritic`) run the prefix every row
shares once at batch size 1 and the rows from there on (`SuffixLayout`; `GroupLayout` under `group_prompts`);
generation (`_generate_single_turn`) prefills the prefix once and repeats its KV cache per row, or samples through
rlvr/speedups/prefix_attention.py. Same math: causal attention over the same keys, RoPE positions are relative (each
row's left padding is dropped, which only shifts absolute positions). Where it applies (`_shared_prefix_applies`,
`MIN_SHARED_PREFIX`) and its hidden costs (float rounding ~1e-6; materialised logits, hence `MAX_LOGITS`; a third
forward call and a per-row key copy under `group_prompts`): docs/measurements/speed.md. It is also where the trainer's
models take `gqa_attention` (rlvr/speedups/gqa_attention.py), at init.
"""

from __future__ import annotations

import torch
from trl import GRPOTrainer
from trl.models import unwrap_model_for_generation

from rlvr.speedups import LOGPROB_SPEEDUPS, gqa_attention, prefix_attention

MIN_SHARED_PREFIX = 16  # tokens; below this the extra forward call costs more than it saves
MAX_LOGITS = 64 * 1024 * 1024  # elements of the materialised (B, kept positions, vocab) logits


def common_prefix_length(rows: list[torch.Tensor]) -> int:
    """Length of the longest token prefix every row starts with."""
    shortest = min(len(row) for row in rows)
    if shortest == 0:
        return 0
    stacked = torch.stack([row[:shortest] for row in rows])
    same = (stacked == stacked[0]).all(dim=0)
    return shortest if bool(same.all()) else int((~same).int().argmax())


def shared_prompt_prefix(rows) -> int:
    """The prefix a pass can share: the common prefix, leaving every row >= 1 token of its own (its hidden state
    predicts the first completion token)."""
    rows = [torch.as_tensor(row) for row in rows]
    return min(common_prefix_length(rows), min(len(row) for row in rows) - 1)


class SharedPrefixTrainer(GRPOTrainer):
    """`speedups`: the names `with_speedups` puts on the class. `_shared_prefix_calls` counts the passes that took the
    shortcut, `_prefix_attention_calls` the generations that ran prefix_attention's sampling loop,
    `_gqa_attention_models` the models switched to gqa_attention's attention."""

    speedups: frozenset[str] = frozenset()
    _shared_prefix_calls = 0
    _prefix_attention_calls = 0
    _gqa_attention_models = 0

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._take_gqa_attention(self.model, self.ref_model)

    def _take_gqa_attention(self, *models) -> None:
        """The models that `gqa_attention` applies to run its attention from here on (a switch of their config)."""
        if "gqa_attention" in self.speedups:
            for model in models:
                if model is not None:
                    self._gqa_attention_models += gqa_attention.take(self.accelerator.unwrap_model(model))

    def _get_per_token_logps_and_entropies(
        self,
        model,
        input_ids,
        attention_mask,
        logits_to_keep,
        batch_size=None,
        compute_entropy=False,
        compute_aux_loss=False,
        **multimodal,
    ):
        prefix_length = None
        if self.speedups & LOGPROB_SPEEDUPS and not compute_aux_loss and self._shared_prefix_applies(model, multimodal):
            vocab = model.get_output_embeddings().weight.size(0)
            if input_ids.numel() * vocab <= MAX_LOGITS:
                prefix_length = shared_prefix_length(input_ids, attention_mask, logits_to_keep)
        if prefix_length is None:
            return super()._get_per_token_logps_and_entropies(
                model,
                input_ids,
                attention_mask,
                logits_to_keep,
                batch_size=batch_size,
                compute_entropy=compute_entropy,
                compute_aux_loss=compute_aux_loss,
                **multimodal,
            )
        self._shared_prefix_calls += 1
        batch_size = batch_size or input_ids.size(0)
        logps, entropies = [], []
        for start in range(0, input_ids.size(0), batch_size):
            rows = slice(start, start + batch_size)
            with self.accelerator.autocast():
                lp, ent = shared_prefix_logps(
                    model,
                    input_ids[rows],
                    attention_mask[rows],
                    logits_to_keep,
                    prefix_length,
                    self.temperature,
                    compute_entropy,
                    "group_prompts" in self.speedups,
                )
            logps.append(lp)
            entropies.append(ent)
        return torch.cat(logps), (torch.cat(entropies) if compute_entropy else None), None

    def _tokenize_prompts(self, prompts: list):
        """`group_prompts`: each distinct prompt through TRL's chat template once, its ids repeated to the rows that
        share it (a GRPO batch holds each prompt num_generations times): the same ids, in ~x0.2 of the time on the
        main job's 64 rows of 8 prompts (docs/measurements/speed.md). Images, environments' per-prompt tools and
        extra tokenizer fields take TRL's call on every row."""
        if "group_prompts" not in self.speedups or self._is_vlm or self.environment_factories is not None:
            return super()._tokenize_prompts(prompts)
        keys = [repr(prompt) for prompt in prompts]
        first_row = {}
        for row, key in enumerate(keys):
            first_row.setdefault(key, row)
        if len(first_row) == len(prompts):
            return super()._tokenize_prompts(prompts)
        ids, images, multimodal_fields = super()._tokenize_prompts([prompts[row] for row in first_row.values()])
        if images is not None or multimodal_fields:
            return super()._tokenize_prompts(prompts)
        by_key = dict(zip(first_row, ids, strict=True))
        return [list(by_key[key]) for key in keys], None, {}

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        """Rows laid out prefix + [pad ...] + rest_i (pads in the middle, masked): `generate` numbers positions by the
        attention mask's cumsum, so every real token keeps the position it has under TRL's left padding."""
        prefix_length = 0
        if (
            self.speedups
            and not self.use_vllm
            and not self.use_transformers_continuous_batching
            and images is None
            and not multimodal_fields
            and self.pad_to_multiple_of is None
            and self._shared_prefix_applies(self.model, {})
        ):
            prefix_length = shared_prompt_prefix(prompt_ids)
        if prefix_length < MIN_SHARED_PREFIX:
            return super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images
            )

        restated = (
            "prefix_attention" in self.speedups
            and prefix_attention.reason_not(self.model, prefix_attention.prepared(self.model, self.generation_config))
            is None
        )
        if not restated and "shared_prefix" not in self.speedups:
            return super()._generate_single_turn(
                prompt_ids, images, multimodal_fields, num_generations, has_tool_images
            )
        self._shared_prefix_calls += 1
        device = self.accelerator.device
        if restated:
            self._prefix_attention_calls += 1
            completion_ids = prefix_attention.sample(
                self.accelerator.unwrap_model(self.model),
                self.generation_config,
                torch.as_tensor(prompt_ids[0][:prefix_length], device=device),
                [torch.as_tensor(ids[prefix_length:], device=device) for ids in prompt_ids],
                group_prompts="group_prompts" in self.speedups,
            )
            return self._cut_at_eos(completion_ids), None
        pad_id = self._tokenizer.pad_token_id
        width = max(len(ids) for ids in prompt_ids)
        input_ids = torch.full((len(prompt_ids), width), pad_id, dtype=torch.long)
        attention_mask = torch.zeros_like(input_ids)
        for i, ids in enumerate(prompt_ids):
            rest = len(ids) - prefix_length
            input_ids[i, :prefix_length], input_ids[i, width - rest :] = (
                torch.as_tensor(ids[:prefix_length]),
                torch.as_tensor(ids[prefix_length:]),
            )
            attention_mask[i, :prefix_length] = 1
            attention_mask[i, width - rest :] = 1
        input_ids, attention_mask = input_ids.to(device), attention_mask.to(device)
        with (
            unwrap_model_for_generation(
                self.model_wrapped,
                self.accelerator,
                gather_deepspeed3_params=self.args.ds3_gather_for_generation,
                generation_kwargs=self.generation_kwargs,
                gradient_checkpointing_kwargs=self.args.gradient_checkpointing_kwargs,
            ) as unwrapped_model,
            torch.no_grad(),
        ):
            cache = unwrapped_model(input_ids=input_ids[:1, :prefix_length], use_cache=True, logits_to_keep=1).cache
            cache.batch_repeat_interleave(len(prompt_ids))
            generated = unwrapped_model.generate(
                input_ids=input_ids,
                attention_mask=attention_mask,
                cache=cache,
                generation_config=self.generation_config,
            )
        return self._cut_at_eos(generated[:, width:]), None

    def _cut_at_eos(self, completion_ids: torch.Tensor) -> list[list[int]]:
        """TRL's regular-generation post-processing, restated: each row up to and including its first EOS."""
        device = completion_ids.device
        is_eos = torch.isin(completion_ids, torch.tensor(self.eos_token_ids, device=device))
        eos_idx = torch.full((is_eos.size(0),), is_eos.size(1), dtype=torch.long, device=device)
        eos_idx[is_eos.any(dim=1)] = is_eos.int().argmax(dim=1)[is_eos.any(dim=1)]
        keep = torch.arange(is_eos.size(1), device=device)[None, :] <= eos_idx[:, None]
        return [c[m].tolist() for c, m in zip(completion_ids.cpu(), keep.cpu(), strict=True)]

    def _shared_prefix_applies(self, model, multimodal: dict) -> bool:
        if any(value is not None for value in multimodal.values()):
            return False
        if self.accelerator.num_processes != 1 or self.is_deepspeed_enabled or self.is_fsdp_enabled:
            return False
        if self.args.gradient_checkpointing or getattr(self.args, "cast_lm_head_to_fp32", False):
            return False
        config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
        # Softcapped or scaled logits would need TRL's fused-head handling; RoPE makes the positions relative.
        if getattr(config, "final_logit_softcapping", None) or getattr(config, "logit_scale", None):
            return False
        return "rope" in str(getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or "")


class SharedPrefixCritic:
    """PPO's critic on the shared-prefix layout (`shared_prefix_values`). Goes in front of PPOTrainer, whose
    `_token_values` it takes over where the layout applies (a token classifier with `.model`, `.dropout`, `.score`).
    PPO builds its critic after TRL's init, so the critic takes gqa_attention here, in front of PPO's own init."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._take_gqa_attention(self.value_model)

    def _token_values(self, inputs) -> torch.Tensor:
        completion_ids = inputs["completion_ids"]
        input_ids, attention_mask = self._sequences(inputs)
        critic = self.value_model
        if (
            self.speedups & LOGPROB_SPEEDUPS
            and all(hasattr(critic, name) for name in ("model", "dropout", "score"))
            and self._shared_prefix_applies(critic, {})
            and (prefix_length := shared_prefix_length(input_ids, attention_mask, completion_ids.shape[1]))
        ):
            self._shared_prefix_calls += 1
            with self.accelerator.autocast():
                return shared_prefix_values(
                    critic,
                    input_ids,
                    attention_mask,
                    completion_ids.shape[1],
                    prefix_length,
                    "group_prompts" in self.speedups,
                )
        return super()._token_values(inputs)


def shared_prefix_length(input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int) -> int | None:
    """The shared prefix length if the batch is left-padded prompts + completions that share >= MIN tokens."""
    prompt_width = input_ids.size(1) - logits_to_keep
    prompt_mask = attention_mask[:, :prompt_width].bool()
    starts = (~prompt_mask).sum(dim=1)  # left padding per row
    # Left padding only: every row's real prompt tokens are contiguous up to the completion.
    if not torch.equal(prompt_mask, torch.arange(prompt_width, device=starts.device)[None, :] >= starts[:, None]):
        return None
    prompts = [row[int(s) : prompt_width] for row, s in zip(input_ids, starts)]
    length = shared_prompt_prefix(prompts)
    if length < MIN_SHARED_PREFIX or logits_to_keep == 0:
        return None
    return length


def prompt_layout(input_ids, attention_mask, logits_to_keep: int, prefix_length: int):
    """(prompt_width, left padding per row, the shared prefix (1, P), prompt tokens per row after the prefix) of a
    batch of left-padded prompts + completions, the part SuffixLayout and GroupLayout both read."""
    prompt_width = input_ids.shape[1] - logits_to_keep
    starts = (attention_mask[:, :prompt_width] == 0).sum(dim=1)
    first = int(starts[0])
    rest_lengths = prompt_width - starts - prefix_length  # >= 1 prompt tokens left per row
    return prompt_width, starts, input_ids[:1, first : first + prefix_length], rest_lengths


class SuffixLayout:
    """Row i = [pad x s_i] + prefix + rest_i + completion_i, re-laid out for a pass on top of the prefix's KV cache:
    `suffix_ids`/`full_mask` hold rows [rest_i + completion_i] right-padded after the prefix, the pass keeps the last
    `keep` positions, and `index` (B, logits_to_keep) picks, among those, the position before each completion token."""

    def __init__(self, input_ids, attention_mask, logits_to_keep: int, prefix_length: int, pad_id: int):
        batch, width = input_ids.shape
        _prompt_width, starts, self.prefix, rest_lengths = prompt_layout(
            input_ids, attention_mask, logits_to_keep, prefix_length
        )
        suffix_width = int(rest_lengths.max()) + logits_to_keep
        # Gather each row's tokens after the prefix into a right-padded (B, suffix_width) block.
        offsets = (starts + prefix_length)[:, None] + torch.arange(suffix_width, device=starts.device)[None, :]
        valid = offsets < width
        gather_at = offsets.clamp(max=width - 1)
        self.suffix_ids = torch.gather(input_ids, 1, gather_at).masked_fill(~valid, pad_id)
        suffix_mask = torch.gather(attention_mask, 1, gather_at) * valid
        self.full_mask = torch.cat([attention_mask.new_ones(batch, prefix_length), suffix_mask], dim=1)
        # Rows need outputs from position rest_i - 1 on; keep the positions from the smallest rest_i - 1 to the end.
        lowest = int(rest_lengths.min()) - 1
        self.keep = suffix_width - lowest
        # kept[:, j] is suffix position lowest + j; row i's completion token t is predicted at rest_i - 1 + t.
        self.index = (rest_lengths - 1 - lowest)[:, None] + torch.arange(logits_to_keep, device=starts.device)[None, :]
        self.batch = batch

    def pick(self, kept: torch.Tensor) -> torch.Tensor:
        """(B, keep, D) outputs of the kept positions -> (B, logits_to_keep, D), the one before each completion token."""
        return torch.gather(kept, 1, self.index[:, :, None].expand(-1, -1, kept.size(-1)))

    def prefix_cache(self, model):
        """The prefix's KV cache at batch size 1, repeated per row (its gradient sums back)."""
        cache = model(input_ids=self.prefix, use_cache=True).cache  # transformers 5 names it `cache`
        cache.batch_repeat_interleave(self.batch)
        return cache

    def pass_kwargs(self) -> dict:
        """The main pass's inputs besides the cache (positions follow from the cache: rows are right-padded)."""
        return {"input_ids": self.suffix_ids, "attention_mask": self.full_mask}


class GroupLayout(SuffixLayout):
    """`group_prompts`: rows that share their whole prompt (a GRPO group's G completions) run the prompt's rest once.

    Three passes: the shared prefix at batch 1; each distinct prompt's rest but its last token (U rows, on the
    prefix's cache repeated U times); every row's [last rest token, completion[:-1]] on that cache copied per row
    (`copy_rows`). The last pass's C outputs are exactly the positions that predict the C completion tokens; positions
    are given explicitly (P + rest_i - 1 + t) because shorter rests leave masked pads in the middle.
    """

    def __init__(
        self,
        input_ids,
        attention_mask,
        logits_to_keep: int,
        prefix_length: int,
        first_row: torch.Tensor,
        row_prompt: torch.Tensor,
    ):
        """first_row, row_prompt: `prefix_attention.distinct_rows` of the prompts (a row standing for each distinct
        prompt, and each row's prompt number)."""
        batch = input_ids.shape[0]
        prompt_width, starts, self.prefix, rest_lengths = prompt_layout(
            input_ids, attention_mask, logits_to_keep, prefix_length
        )
        self.batch, self.keep, self.index = batch, logits_to_keep, None
        distinct, self.row_prompt = len(first_row), row_prompt
        rows = torch.arange(batch, device=input_ids.device)
        lengths = rest_lengths[first_row] - 1  # the rest pass leaves each prompt's last token to the main pass
        self.rest_width = int(lengths.max())
        self.distinct = distinct
        if self.rest_width > 0:
            offsets = (starts[first_row] + prefix_length)[:, None] + torch.arange(self.rest_width, device=starts.device)
            inside = torch.arange(self.rest_width, device=starts.device)[None, :] < lengths[:, None]
            self.rest_ids = torch.gather(input_ids[first_row], 1, offsets.clamp(max=prompt_width - 1)).masked_fill(
                ~inside, 0
            )
            self.rest_mask = torch.cat([attention_mask.new_ones(distinct, prefix_length), inside.long()], dim=1)
            rest_mask = inside.long()[self.row_prompt]
        else:
            rest_mask = attention_mask.new_zeros(batch, 0)
        last = input_ids[rows, prompt_width - 1][:, None]  # every row's prompt ends at prompt_width - 1
        completion = input_ids[:, prompt_width:]
        completion_mask = attention_mask[:, prompt_width:]
        self.suffix_ids = torch.cat([last, completion[:, :-1]], dim=1)
        self.full_mask = torch.cat(
            [
                attention_mask.new_ones(batch, prefix_length),
                rest_mask,
                attention_mask.new_ones(batch, 1),
                completion_mask[:, :-1],
            ],
            dim=1,
        )
        self.position_ids = (prefix_length + rest_lengths - 1)[:, None] + torch.arange(
            logits_to_keep, device=starts.device
        )

    def pick(self, kept: torch.Tensor) -> torch.Tensor:
        return kept  # the main pass's outputs are the positions before each completion token, in order

    def prefix_cache(self, model):
        """The prefix at batch 1, the distinct rests on it, then one copy per row (gradients sum back)."""
        cache = model(input_ids=self.prefix, use_cache=True).cache
        if self.rest_width == 0:
            cache.batch_repeat_interleave(self.batch)
            return cache
        cache.batch_repeat_interleave(self.distinct)
        cache = model(input_ids=self.rest_ids, attention_mask=self.rest_mask, cache=cache, use_cache=True).cache
        copy_rows(cache, self.row_prompt)
        return cache

    def pass_kwargs(self) -> dict:
        return {**super().pass_kwargs(), "position_ids": self.position_ids}


class RowCopy(torch.autograd.Function):
    """`source.index_select(0, index)` whose backward adds a contiguous copy of the gradient.

    Why: index_select's own backward is `zeros.index_add_(0, index, grad)`, and the gradient that reaches the cache's
    keys and values comes out of SDPA's backward in (B, S, H, D) memory order, sliced to the cached columns; over
    that layout `index_add_` took ~1.0 ms a tensor against ~0.2 ms for a copy and the add (docs/measurements/speed.md).
    The adds are the same, in the same order: the same gradient bits.
    """

    @staticmethod
    def forward(ctx, source: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(index)
        ctx.rows = source.shape[0]
        return source.index_select(0, index)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (index,) = ctx.saved_tensors
        return grad.new_zeros((ctx.rows, *grad.shape[1:])).index_add_(0, index, grad.contiguous()), None


def copy_rows(cache, index: torch.Tensor) -> None:
    """Row i of every layer's keys and values becomes row index[i], by `index_select` (`RowCopy`).

    Not the cache's own `batch_select_indices`: the backward of indexing is `index_put_` with accumulate=True, whose
    parallel adds land in a different order from run to run at 2 threads, so two runs of one recipe with one seed
    drifted apart from their second step. `index_select`'s backward (`index_add_`) adds in a fixed order, and it is
    faster (docs/measurements/speed.md); `tests/test_speed.py` checks repeated calls give the same gradients to the bit.
    """
    for layer in cache.layers:
        layer.keys, layer.values = RowCopy.apply(layer.keys, index), RowCopy.apply(layer.values, index)


def prompt_rows(input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int):
    """`prefix_attention.distinct_rows` of the batch's prompts (left padding included), or None when no two rows
    share one."""
    prompt_width = input_ids.size(1) - logits_to_keep
    prompts = input_ids[:, :prompt_width].masked_fill(attention_mask[:, :prompt_width] == 0, -1)
    first, index = prefix_attention.distinct_rows(prompts)
    return (first, index) if len(first) < input_ids.size(0) else None


def layout_for(
    input_ids, attention_mask, logits_to_keep: int, prefix_length: int, pad_id: int, group_prompts: bool
) -> SuffixLayout:
    """GroupLayout when `group_prompts` is on and some rows share a prompt, else SuffixLayout."""
    rows = prompt_rows(input_ids, attention_mask, logits_to_keep) if group_prompts else None
    if rows is None:
        return SuffixLayout(input_ids, attention_mask, logits_to_keep, prefix_length, pad_id)
    return GroupLayout(input_ids, attention_mask, logits_to_keep, prefix_length, *rows)


def shared_prefix_logps(
    model,
    input_ids,
    attention_mask,
    logits_to_keep: int,
    prefix_length: int,
    temperature: float,
    compute_entropy: bool,
    group_prompts: bool = False,
):
    """Per-token log-probs (and entropies) of the last `logits_to_keep` tokens, prefix computed once (SuffixLayout),
    and each distinct prompt once under `group_prompts` (GroupLayout)."""
    layout = layout_for(
        input_ids,
        attention_mask,
        logits_to_keep,
        prefix_length,
        getattr(model.config, "pad_token_id", None) or 0,
        group_prompts,
    )
    cache = layout.prefix_cache(lambda **kw: model(**kw, logits_to_keep=1))
    logits = model(**layout.pass_kwargs(), cache=cache, use_cache=True, logits_to_keep=layout.keep).logits
    log_probs = (layout.pick(logits).float() / temperature).log_softmax(dim=-1)
    prompt_width = input_ids.size(1) - logits_to_keep
    completion_ids = input_ids[:, prompt_width:]
    completion_mask = attention_mask[:, prompt_width:].bool()
    per_token = log_probs.gather(-1, completion_ids[:, :, None]).squeeze(-1).masked_fill(~completion_mask, 0.0)
    entropy = None
    if compute_entropy:
        entropy = -(log_probs.exp() * log_probs).sum(-1).masked_fill(~completion_mask, 0.0)
    return per_token, entropy


def shared_prefix_values(
    value_model, input_ids, attention_mask, logits_to_keep: int, prefix_length: int, group_prompts: bool = False
):
    """PPO's critic on the same layout: the scalar head's output at the position before each completion token,
    (B, logits_to_keep). The critic is a token classifier (`.model` body, `.dropout`, `.score` head): the body runs
    prefix once and suffix on its cache, the head only on the kept positions."""
    layout = layout_for(
        input_ids,
        attention_mask,
        logits_to_keep,
        prefix_length,
        getattr(value_model.config, "pad_token_id", None) or 0,
        group_prompts,
    )
    body = value_model.model
    hidden = body(**layout.pass_kwargs(), cache=layout.prefix_cache(body), use_cache=True).last_hidden_state[
        :, -layout.keep :
    ]
    return value_model.score(value_model.dropout(layout.pick(hidden))).squeeze(-1).float()


def with_speedups(trainer_class: type, speedups: frozenset[str]) -> type:
    """`trainer_class` itself when `speedups` is empty; else a subclass whose passes take the speed-ups.

    `SharedPrefixTrainer` subclasses TRL's GRPOTrainer, so the MRO places it right above GRPOTrainer, below every layer
    of the repo's trainer (time accounting, the KL estimator's log-prob capture see its passes as they see TRL's).
    PPO's critic pass is PPO's own method, so its speed-up (`SharedPrefixCritic`) goes in front.
    """
    if not speedups:
        return trainer_class
    bases = (trainer_class, SharedPrefixTrainer)
    if hasattr(trainer_class, "_token_values"):  # PPO's critic
        bases = (SharedPrefixCritic, *bases)
    return type(
        f"{trainer_class.__name__}WithSpeedups", bases, {"speedups": frozenset(speedups), "__module__": __name__}
    )
