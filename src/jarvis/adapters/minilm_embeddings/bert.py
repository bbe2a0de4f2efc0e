"""The forward pass of a BERT encoder in numpy, as sentence-transformers runs all-MiniLM-L6-v2.

Written out here rather than borrowed from torch: the model is small (6 layers, 384 wide,
22M weights), numpy's BLAS runs it at a few milliseconds a sentence on a CPU, and the
install stays at numpy + safetensors + tokenizers instead of a 700 MB framework. Every step
follows the Hugging Face ``BertModel`` (post-LayerNorm, absolute positions, GELU in its erf
form) and then sentence-transformers' pipeline for this model: mean pooling over the real
tokens (the attention mask), then L2 normalisation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

Floats = NDArray[np.float32]
Ints = NDArray[np.int64]

# Abramowitz & Stegun 7.1.26: |error| <= 1.5e-7 over the whole line, float32's own precision
# (numpy has no erf, and a Python-level math.erf per element would dominate the forward)
_P = np.float32(0.3275911)
_A = tuple(np.float32(a) for a in (0.254829592, -0.284496736, 1.421413741, -1.453152027))
_A5 = np.float32(1.061405429)
_HALF = np.float32(0.5)
_ONE = np.float32(1.0)
_SQRT_HALF = np.float32(math.sqrt(0.5))
_QKV = ("query", "key", "value")
_MASKED = np.float32(-1e9)
"""Added to the attention scores of padding: exp() of it is exactly 0 in float32."""


def erf(x: Floats) -> Floats:
    """The error function, elementwise (odd; the polynomial holds for x >= 0). In place on
    temporaries: the encoder's largest elementwise step, so allocations matter."""
    a = np.abs(x)
    t = a * _P
    t += _ONE
    np.reciprocal(t, out=t)
    poly = t * _A5
    for coefficient in reversed(_A):
        poly += coefficient
        poly *= t
    np.square(a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    poly *= a
    np.subtract(_ONE, poly, out=poly)
    np.copysign(poly, x, out=poly)
    return poly


def gelu(x: Floats) -> Floats:
    """BERT's ``gelu``: x·Φ(x) with the exact (erf) normal CDF, not the tanh approximation.
    Overwrites ``x`` (a temporary of the caller's)."""
    cdf = erf(x * _SQRT_HALF)
    cdf += _ONE
    cdf *= _HALF
    x *= cdf
    return x


def layer_norm(x: Floats, weight: Floats, bias: Floats, eps: float) -> Floats:
    mean = x.mean(axis=-1, keepdims=True)
    centred = x - mean
    variance = (centred * centred).mean(axis=-1, keepdims=True)
    normed: Floats = centred / np.sqrt(variance + np.float32(eps)) * weight + bias
    return normed


@dataclass(frozen=True, slots=True)
class Layer:
    """One encoder layer's weights, pre-transposed for ``x @ w`` (query, key and value fused)."""

    qkv: Floats
    qkv_bias: Floats
    attention_out: Floats
    attention_out_bias: Floats
    attention_norm: tuple[Floats, Floats]
    intermediate: Floats
    intermediate_bias: Floats
    output: Floats
    output_bias: Floats
    output_norm: tuple[Floats, Floats]


@dataclass(frozen=True, slots=True)
class Encoder:
    """A BERT encoder's weights and shape (from ``config.json`` and ``model.safetensors``)."""

    words: Floats
    positions: Floats
    token_types: Floats
    embedding_norm: tuple[Floats, Floats]
    layers: tuple[Layer, ...]
    heads: int
    eps: float

    @property
    def dimensions(self) -> int:
        return int(self.words.shape[1])

    @property
    def max_positions(self) -> int:
        return int(self.positions.shape[0])

    def hidden_states(self, ids: Ints, type_ids: Ints, mask: Ints) -> Floats:
        """The last layer's token vectors, ``(batch, tokens, dimensions)``."""
        batch, tokens = ids.shape
        x = self.words[ids] + self.positions[:tokens][None, :, :] + self.token_types[type_ids]
        # one (batch·tokens, dimensions) matrix: numpy hands a 2-D product to BLAS whole,
        # a 3-D one slice by slice (tens of times slower)
        x = layer_norm(x.reshape(batch * tokens, -1), *self.embedding_norm, self.eps)
        # padding never attends and is never attended to
        blocked = np.where(mask[:, None, None, :] > 0, np.float32(0.0), _MASKED)
        width = self.dimensions // self.heads
        scale = np.float32(1.0 / math.sqrt(width))
        for layer in self.layers:
            qkv = x @ layer.qkv + layer.qkv_bias
            heads = qkv.reshape(batch, tokens, 3, self.heads, width).transpose(2, 0, 3, 1, 4)
            query, key, value = heads[0], heads[1], heads[2]
            scores = (query @ key.transpose(0, 1, 3, 2)) * scale + blocked
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ value).transpose(0, 2, 1, 3).reshape(batch * tokens, -1)
            attended = context @ layer.attention_out + layer.attention_out_bias
            x = layer_norm(x + attended, *layer.attention_norm, self.eps)
            inner = gelu(x @ layer.intermediate + layer.intermediate_bias)
            out = inner @ layer.output + layer.output_bias
            x = layer_norm(x + out, *layer.output_norm, self.eps)
        return x.reshape(batch, tokens, -1).astype(np.float32, copy=False)

    def sentence_vectors(self, ids: Ints, type_ids: Ints, mask: Ints) -> Floats:
        """Mean of the real tokens' vectors, L2-normalised: ``(batch, dimensions)``."""
        states = self.hidden_states(ids, type_ids, mask)
        weights = mask.astype(np.float32)[:, :, None]
        pooled = (states * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: Floats = (pooled / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
        return unit


class WeightsError(ValueError):
    """The weights file does not hold the encoder ``config.json`` describes."""


def encoder(weights: Mapping[str, NDArray[np.generic]], config: Mapping[str, object]) -> Encoder:
    """The encoder from a ``BertModel`` checkpoint's tensors and its ``config.json``."""
    hidden = _int(config, "hidden_size")
    heads = _int(config, "num_attention_heads")
    count = _int(config, "num_hidden_layers")
    inner = _int(config, "intermediate_size")
    eps = config.get("layer_norm_eps", 1e-12)
    if config.get("hidden_act", "gelu") != "gelu":
        raise WeightsError(f"hidden_act {config.get('hidden_act')!r}: only 'gelu' is implemented")
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise WeightsError("only absolute position embeddings are implemented")
    if not isinstance(eps, float) or hidden % heads:
        raise WeightsError("layer_norm_eps or the head count does not fit hidden_size")

    def tensor(name: str, *shape: int) -> Floats:
        # a BERT checkpoint is named with or without the "bert." prefix
        value = weights.get(name, weights.get(f"bert.{name}"))
        if value is None:
            raise WeightsError(f"the weights have no tensor {name!r}")
        if value.shape[1:] != shape[1:] or (shape[0] >= 0 and value.shape[0] != shape[0]):
            raise WeightsError(f"{name} has shape {value.shape}, expected {shape}")
        return np.ascontiguousarray(value, dtype=np.float32)

    def norm(prefix: str) -> tuple[Floats, Floats]:
        weight = tensor(f"{prefix}.LayerNorm.weight", hidden)
        return weight, tensor(f"{prefix}.LayerNorm.bias", hidden)

    def linear(prefix: str, out: int, into: int) -> tuple[Floats, Floats]:
        w = tensor(f"{prefix}.weight", out, into)
        return np.ascontiguousarray(w.T), tensor(f"{prefix}.bias", out)

    layers: list[Layer] = []
    for n in range(count):
        at = f"encoder.layer.{n}"
        parts = [linear(f"{at}.attention.self.{p}", hidden, hidden) for p in _QKV]
        attention_out, attention_out_bias = linear(f"{at}.attention.output.dense", hidden, hidden)
        intermediate, intermediate_bias = linear(f"{at}.intermediate.dense", inner, hidden)
        output, output_bias = linear(f"{at}.output.dense", hidden, inner)
        layers.append(
            Layer(
                qkv=np.ascontiguousarray(np.concatenate([w for w, _ in parts], axis=1)),
                qkv_bias=np.concatenate([b for _, b in parts]),
                attention_out=attention_out,
                attention_out_bias=attention_out_bias,
                attention_norm=norm(f"{at}.attention.output"),
                intermediate=intermediate,
                intermediate_bias=intermediate_bias,
                output=output,
                output_bias=output_bias,
                output_norm=norm(f"{at}.output"),
            )
        )
    return Encoder(
        words=tensor("embeddings.word_embeddings.weight", -1, hidden),
        positions=tensor("embeddings.position_embeddings.weight", -1, hidden),
        token_types=tensor("embeddings.token_type_embeddings.weight", -1, hidden),
        embedding_norm=norm("embeddings"),
        layers=tuple(layers),
        heads=heads,
        eps=eps,
    )


def _int(config: Mapping[str, object], key: str) -> int:
    value = config.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise WeightsError(f"config.json has no positive integer {key!r}")
    return value
