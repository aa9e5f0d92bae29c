"""The shared prompt prefix attended once for all rows, in a forward written out over the model's own weights.

Why: after `shared_prefix`, a tiny-speller decoding step still cost ~20x its arithmetic floor in TRL's `generate`:
SDPA over 64 copies of the same prefix keys, `torch.cat` growing the KV cache, and ~750 tiny kernel launches a token.
Here, per layer, the prefix's keys and values stay at batch 1 and every row's queries meet them in ONE matmul, the
row's own keys in a second, small one, one softmax over both (the same attention); the rows' keys go into a buffer
allocated once; the arithmetic is ~27 fused ops a layer instead of ~190. The next token is drawn as `generate` draws
it (its own logits processors, then `torch.multinomial`'s own draw, `draw`), so the random stream is consumed the same way.
The log-prob passes stay on `shared_prefix`: this forward measured level there inside the training loop.

Where it applies (`reason_not`), its hidden costs and the measurements: docs/measurements/speed.md.
tests/test_prefix_attention.py holds the logits to the model's forward (1e-5) and the samples to `generate`'s.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F

MODEL_TYPES = ("qwen3", "qwen2", "llama")
# generate() features this loop does not restate: a generation config that sets any of them takes generate()
GENERATION_DEFAULTS = {
    "num_beams": 1,
    "num_beam_groups": 1,
    "penalty_alpha": None,
    "stop_strings": None,
    "max_time": None,
    "num_return_sequences": 1,
    "constraints": None,
    "force_words_ids": None,
    "assistant_model": None,
    "prompt_lookup_num_tokens": None,
    "guidance_scale": None,
    "watermarking_config": None,
    "min_new_tokens": None,
    "min_length": 0,
    "output_scores": False,
    "output_logits": False,
    "return_dict_in_generate": False,
}


def reason_not(model, generation_config=None) -> str | None:
    """Why the written-out forward would not compute what the model computes (None: it does)."""
    config = model.config
    if getattr(config, "model_type", None) not in MODEL_TYPES:
        return f"model type {getattr(config, 'model_type', None)!r} is not one of {MODEL_TYPES}"
    if any(kind != "full_attention" for kind in (getattr(config, "layer_types", None) or ["full_attention"])):
        return "sliding-window layers"
    if getattr(config, "use_sliding_window", False):
        return "sliding-window attention"
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None) or {}
    if rope.get("rope_type", rope.get("type")) in ("dynamic", "longrope"):  # frequencies that move with the length
        return f"{rope.get('rope_type', rope.get('type'))} RoPE"
    if getattr(config, "hidden_act", "silu") != "silu":
        return f"activation {config.hidden_act!r}"
    if getattr(config, "attention_dropout", 0.0) and model.training:
        return "attention dropout"
    if getattr(config, "final_logit_softcapping", None) or getattr(config, "attn_logit_softcapping", None):
        return "logit softcapping"
    body = getattr(model, "model", None)
    if body is None or not all(hasattr(body, name) for name in ("layers", "norm", "rotary_emb", "embed_tokens")):
        return "not a decoder body with layers, norm, rotary_emb and embed_tokens"
    if body.embed_tokens.weight.dtype != torch.float32:
        return f"{body.embed_tokens.weight.dtype} weights"
    for layer in body.layers:
        if not all(hasattr(layer.self_attn, name) for name in ("q_proj", "k_proj", "v_proj", "o_proj", "scaling")):
            return "attention without q/k/v/o projections"
        projections = [getattr(layer.self_attn, name) for name in ("q_proj", "k_proj", "v_proj", "o_proj")]
        projections += [getattr(layer.mlp, name, None) for name in ("gate_proj", "up_proj", "down_proj")]
        # LoRA and quantized layers wrap or replace nn.Linear: their output is not F.linear of `.weight`
        if any(type(proj) is not torch.nn.Linear or proj.weight.dtype != torch.float32 for proj in projections):
            return "projections that are not plain float32 nn.Linear (LoRA adapters, quantized weights)"
    if generation_config is not None:
        if not isinstance(getattr(generation_config, "max_new_tokens", None), int):
            return "generation_config.max_new_tokens unset (a max_length alone is generate's to interpret)"
        for name, default in GENERATION_DEFAULTS.items():
            value = getattr(generation_config, name, None)
            if value is not None and value != default:
                return f"generation_config.{name}={value!r}"
    return None


class FusedLayer(NamedTuple):
    norm1: torch.Tensor
    qkv_w: torch.Tensor
    qkv_b: torch.Tensor | None
    qk_norm: torch.Tensor | None  # (heads + kv heads, head dim), the q part times the attention scale
    o_w: torch.Tensor
    o_b: torch.Tensor | None
    norm2: torch.Tensor
    gate_up_w: torch.Tensor
    gate_up_b: torch.Tensor | None
    down_w: torch.Tensor
    down_b: torch.Tensor | None


def _cat_bias(*linears):
    return None if linears[0].bias is None else torch.cat([linear.bias for linear in linears])


class Restated:
    """One model's forward over fused weights (concatenated once per `sample` call)."""

    def __init__(self, model):
        self.model, body = model, model.model
        self.embed, self.final_norm, self.rotary = body.embed_tokens, body.norm, body.rotary_emb
        self.lm_head = model.get_output_embeddings()
        attn = body.layers[0].self_attn
        self.head_dim = attn.head_dim
        self.heads = attn.q_proj.out_features // self.head_dim
        self.kv_heads = attn.k_proj.out_features // self.head_dim
        self.eps = body.norm.variance_epsilon
        self.layers = [self._fuse(layer) for layer in body.layers]

    def _fuse(self, layer) -> FusedLayer:
        attn, mlp = layer.self_attn, layer.mlp
        q_w, q_b, qk_norm = attn.q_proj.weight, attn.q_proj.bias, None
        if hasattr(attn, "q_norm"):  # the norm is scale-free: the scale goes into its weight
            qk_norm = torch.cat(
                [
                    (attn.q_norm.weight * attn.scaling).expand(self.heads, -1),
                    attn.k_norm.weight.expand(self.kv_heads, -1),
                ]
            )
        else:  # RoPE is linear: scaling q before it is scaling the scores
            q_w = q_w * attn.scaling
            q_b = None if q_b is None else q_b * attn.scaling
        qkv_b = None if q_b is None else torch.cat([q_b, attn.k_proj.bias, attn.v_proj.bias])
        return FusedLayer(
            layer.input_layernorm.weight,
            torch.cat([q_w, attn.k_proj.weight, attn.v_proj.weight]),
            qkv_b,
            qk_norm,
            attn.o_proj.weight,
            attn.o_proj.bias,
            layer.post_attention_layernorm.weight,
            torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight]),
            _cat_bias(mlp.gate_proj, mlp.up_proj),
            mlp.down_proj.weight,
            mlp.down_proj.bias,
        )

    def rope(self, positions: torch.Tensor):
        """cos and the signed sin of `rotate_half` for (B, T) positions, shaped to broadcast over heads."""
        cos, sin = self.rotary(self.embed.weight, positions)
        half = cos.shape[-1] // 2
        return cos[:, :, None], torch.cat([-sin[..., :half], sin[..., half:]], dim=-1)[:, :, None]

    def forward(self, ids, rope, prefix_kv, bias, own_kv=None, start: int = 0):
        """Hidden states (B, T, C) of `ids`, attending to the shared prefix's keys and the rows' own keys.

        prefix_kv: per layer (keys, values) of shape (kv heads, P, D); bias: (1, B, G*T or 1, P + own) with 0 where
        attention is allowed and -inf elsewhere; own_kv: per layer (keys, values) buffers (kv heads, B, width, D)
        written at columns [start, start + T) and read up to there, or None to use this call's own keys only.
        Returns (hidden, [(keys, values) of this call per layer]).
        """
        batch, steps = ids.shape
        heads, kv_heads, dim = self.heads, self.kv_heads, self.head_dim
        groups, stop = heads // kv_heads, start + steps
        cos, sin = rope
        hidden = self.embed(ids)
        new_kv = []
        for layer, (prefix_k, prefix_v), buffers in zip(
            self.layers, prefix_kv, own_kv or [None] * len(self.layers), strict=True
        ):
            x = F.rms_norm(hidden, (hidden.shape[-1],), layer.norm1, self.eps)
            qkv = F.linear(x, layer.qkv_w, layer.qkv_b)
            qk = qkv[..., : (heads + kv_heads) * dim].view(batch, steps, heads + kv_heads, dim)
            v = qkv[..., (heads + kv_heads) * dim :].view(batch, steps, kv_heads, dim)
            if layer.qk_norm is not None:
                qk = F.rms_norm(qk, (dim,), None, self.eps) * layer.qk_norm
            qk = torch.addcmul(qk * cos, qk.roll(dim // 2, dims=-1), sin)
            q = qk[:, :, :heads].reshape(batch, steps, kv_heads, groups, dim).permute(2, 0, 3, 1, 4)
            k, v = qk[:, :, heads:].permute(2, 0, 1, 3), v.permute(2, 0, 1, 3)  # (kv heads, B, T, D)
            new_kv.append((k, v))
            if buffers is not None:
                buffers[0][:, :, start:stop], buffers[1][:, :, start:stop] = k, v
                k, v = buffers[0][:, :, :stop], buffers[1][:, :, :stop]
            out = attend(q.reshape(kv_heads, batch * groups * steps, dim), prefix_k, prefix_v, k, v, bias)
            out = out.view(kv_heads, batch, groups, steps, dim).permute(1, 3, 0, 2, 4).reshape(batch, steps, -1)
            hidden = hidden + F.linear(out, layer.o_w, layer.o_b)
            x = F.rms_norm(hidden, (hidden.shape[-1],), layer.norm2, self.eps)
            gate, up = F.linear(x, layer.gate_up_w, layer.gate_up_b).chunk(2, dim=-1)
            hidden = hidden + F.linear(F.silu(gate) * up, layer.down_w, layer.down_b)
        return hidden, new_kv

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The LM head over the body's last norm."""
        return self.lm_head(F.rms_norm(hidden, (hidden.shape[-1],), self.final_norm.weight, self.eps))

    def prefix(self, prefix_ids: torch.Tensor):
        """Per layer (keys, values) of the shared prefix (1-D ids), (kv heads, P, D): a causal pass at batch 1."""
        length = prefix_ids.shape[-1]
        positions = torch.arange(length, device=prefix_ids.device)[None]
        empty = self.embed.weight.new_zeros(self.kv_heads, 0, self.head_dim)
        causal = positions[0][None, :] <= positions[0][:, None]
        bias = attention_bias(causal[None], 0, self.heads // self.kv_heads)
        _, kv = self.forward(prefix_ids.view(1, -1), self.rope(positions), [(empty, empty)] * len(self.layers), bias)
        return [(k[:, 0], v[:, 0]) for k, v in kv]


def attention_bias(allowed: torch.Tensor, prefix_length: int, groups: int) -> torch.Tensor:
    """(B, T, S) allowed own keys -> the additive (1, B, G*T, P + S) bias attend() takes (prefix always allowed)."""
    batch, steps, own = allowed.shape
    bias = torch.zeros(batch, steps, prefix_length + own, device=allowed.device)
    bias[:, :, prefix_length:].masked_fill_(~allowed, float("-inf"))
    if steps == 1:
        return bias[None]
    return bias[:, None].expand(batch, groups, steps, -1).reshape(1, batch, groups * steps, -1)


def attend(q, prefix_k, prefix_v, own_k, own_v, bias):
    """Softmax attention of every row's queries over the shared prefix (batch 1) and the row's own keys.

    q (Hkv, B*G*T, D), already scaled, rows in (B, G, T) order: kv head j's queries are its G heads (the model's
    `repeat_kv` gives head h kv head h // G) at the T steps; prefix_k/v (Hkv, P, D); own_k/v (Hkv, B, S, D);
    bias (1, B, G*T or 1, P + S). Returns (Hkv, B*G*T, D).
    """
    kv_heads, prefix_length, dim = prefix_k.shape
    batch, own = own_k.shape[1], own_k.shape[2]
    rows = q.shape[1] // batch
    prefix_scores = torch.matmul(q, prefix_k.transpose(1, 2)).view(kv_heads, batch, rows, prefix_length)
    own_scores = torch.bmm(
        q.view(kv_heads * batch, rows, dim), own_k.reshape(kv_heads * batch, own, dim).transpose(1, 2)
    )
    scores = torch.cat([prefix_scores, own_scores.view(kv_heads, batch, rows, own)], dim=-1) + bias
    weights = torch.softmax(scores, dim=-1)
    out = torch.matmul(weights[..., :prefix_length].reshape(kv_heads, batch * rows, prefix_length), prefix_v)
    return torch.baddbmm(
        out.view(kv_heads * batch, rows, dim),
        weights[..., prefix_length:].reshape(kv_heads * batch, rows, own),
        own_v.reshape(kv_heads * batch, own, dim),
    ).view(kv_heads, batch * rows, dim)


def distinct_rows(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(first, index) for the rows of a (B, ...) tensor: `first` the first row of each distinct value, in the order
    they appear; `index` (B,) the number of each row's value in that order (TRL's groups: 0, 0, ..., 1, 1, ...)."""
    _, inverse = torch.unique(rows, dim=0, return_inverse=True)
    batch, device = rows.shape[0], rows.device
    first = torch.full((int(inverse.max()) + 1,), batch, dtype=torch.long, device=device).scatter_reduce(
        0, inverse, torch.arange(batch, device=device), reduce="amin"
    )
    order = first.argsort()
    return first[order], order.argsort()[inverse]


def prepared(model, generation_config):
    """The generation config `generate` would use: the model's own generation_config.json and transformers' global
    defaults fill the fields left unset (a top_k left None is 50 there, for instance)."""
    return model._prepare_generation_config(generation_config)[0]


def draw(probs: torch.Tensor) -> torch.Tensor:
    """`torch.multinomial(probs, 1).squeeze(1)` on CPU, the same tokens and the same random stream, in ~0.4x its time.

    Why: torch draws one sample per row as argmax(p / q) with q ~ Exp(1) (aten's Distributions.cpp), and its CPU
    `exponential_` fills q serially, a 53-bit uniform and a `log1p` per element: ~30 ns an element, ~0.45 ms of a
    64 x 263 decode step. Here the same uniforms come from `torch.rand` in float64 (one 64-bit draw per element, in
    the same order), -log1p(-u) runs vectorised and is rounded to float32 as torch rounds it. The vectorised double
    `log1p` may differ from libm's in a double's last bit, which the float32 rounding hides unless the value sits on a
    rounding boundary (no difference in 15 million draws; tests/test_prefix_attention.py holds tokens and stream to
    `generate`'s). NaN or infinite probabilities raise as in `multinomial`; softmax output is never negative.
    """
    if probs.device.type != "cpu" or probs.dtype != torch.float32:
        return torch.multinomial(probs, num_samples=1).squeeze(1)
    if not bool(probs.sum().isfinite()):  # one reduction: a NaN or inf anywhere makes the sum so
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    exponential = torch.rand(probs.shape, dtype=torch.float64).neg_().log1p_().neg_().to(torch.float32)
    return probs.div(exponential).max(dim=-1).indices  # argmax's first maximum, in ~half its time on (64, 263)


# inference mode, not no_grad: the loop is ~200 small ops a token, and skipping autograd's version counters and views
# bookkeeping cut each call to x0.84-0.96 of its time with the same tokens (docs/measurements/speed.md). Nothing it
# returns is saved for a backward: TRL and `rlvr evaluate` read the ids back as Python lists.
@torch.inference_mode()
def sample(
    model, generation_config, prefix_ids: torch.Tensor, rest: list[torch.Tensor], group_prompts: bool = False
) -> torch.Tensor:
    """`generate`'s sampling loop on the restated forward: (B, new tokens) completion ids, finished rows padded.

    Row i is prefix + rest[i]; its buffer holds rest[i] right-aligned in the first `width` columns, then one column
    per generated token, at the position `generate` gives it under TRL's left padding. Under `group_prompts` the
    prompt pass runs each distinct rest once and copies its keys and values to the rows that share it.
    """
    generation_config = prepared(model, generation_config)
    net = Restated(model)
    device, max_new = prefix_ids.device, generation_config.max_new_tokens
    batch, prefix_length = len(rest), prefix_ids.shape[-1]
    lengths = torch.tensor([len(r) for r in rest], device=device)
    width = int(lengths.max())
    columns = torch.arange(width + max_new, device=device)
    valid = columns[None, :] >= (width - lengths)[:, None]
    positions = (prefix_length + columns[None, :] - (width - lengths)[:, None]).clamp(min=prefix_length)
    cos, sin = net.rope(positions)
    groups = net.heads // net.kv_heads
    causal = columns[None, :width] <= columns[:width, None]
    # generation columns: every row attends the prefix and its own valid columns so far; later ones are masked
    # by the slice (keys beyond `stop` are not read)
    step_bias = attention_bias(valid[:, None, :], prefix_length, groups)  # (1, B, 1, P + width + max_new)

    eos = generation_config.eos_token_id
    eos = torch.tensor([eos] if isinstance(eos, int) else list(eos or []), device=device)
    pad = generation_config.pad_token_id
    pad = int(pad) if pad is not None else (int(eos[0]) if len(eos) else 0)  # no EOS: no row ever finishes
    rest_ids = torch.full((batch, width), pad, dtype=torch.long, device=device)
    for i, r in enumerate(rest):
        rest_ids[i, width - len(r) :] = r
    processors = model._get_logits_processor(
        generation_config=generation_config, input_ids_seq_length=prefix_length + width, device=device, model_kwargs={}
    )
    seen = torch.cat([prefix_ids.view(1, -1).expand(batch, -1), rest_ids], dim=1)  # what generate's processors see

    prefix_kv = net.prefix(prefix_ids)
    shape = (net.kv_heads, batch, width + max_new, net.head_dim)
    own_kv = [(prefix_k.new_empty(shape), prefix_k.new_empty(shape)) for prefix_k, _ in prefix_kv]
    bias = attention_bias(valid[:, None, :width] & causal[None], prefix_length, groups)
    grouped = distinct_rows(torch.cat([rest_ids, lengths[:, None]], dim=1)) if group_prompts else None
    if grouped is not None and len(grouped[0]) < batch:  # the first row that has each distinct rest stands for it
        first, row_prompt = grouped
        hidden, kv = net.forward(rest_ids[first], (cos[first, :width], sin[first, :width]), prefix_kv, bias[:, first])
        for (keys, values), (k, v) in zip(own_kv, kv, strict=True):
            keys[:, :, :width], values[:, :, :width] = k[:, row_prompt], v[:, row_prompt]
        hidden = hidden[row_prompt]
    else:
        hidden, _ = net.forward(rest_ids, (cos[:, :width], sin[:, :width]), prefix_kv, bias, own_kv, 0)
    unfinished = torch.ones(batch, dtype=torch.long, device=device)
    out = []
    for column in range(width, width + max_new):
        scores = net.logits(hidden[:, -1]).to(dtype=torch.float32)
        if processors:  # none at temperature 1, top-k 0, top-p 1: nothing reads the ids seen so far
            scores = processors(seen, scores)
        if generation_config.do_sample:
            tokens = draw(torch.softmax(scores, dim=-1))
        else:
            tokens = torch.argmax(scores, dim=-1)
        tokens = tokens * unfinished + pad * (1 - unfinished)
        out.append(tokens)
        if processors:
            seen = torch.cat([seen, tokens[:, None]], dim=1)
        unfinished = unfinished & ~torch.isin(tokens, eos)
        if column == width + max_new - 1 or not bool(unfinished.any()):
            break
        hidden, _ = net.forward(
            tokens[:, None],
            (cos[:, column : column + 1], sin[:, column : column + 1]),
            prefix_kv,
            step_bias[..., : prefix_length + column + 1],
            own_kv,
            column,
        )
    return torch.stack(out, dim=1)
