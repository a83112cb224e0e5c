"""Structured output: JSON Schema constraints as per-request logits processors (llguidance).

The grammar is compiled at create time, so an invalid schema is a 400 and never a failed job;
the processor runs on the MLX thread inside the batch, masking tokens the grammar forbids.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import llguidance
import llguidance.hf
import mlx.core as mx
import numpy as np
from mlx_responses.service.text.json_bounds import JsonBounds, bound_schema


class SchemaError(ValueError):
    """A schema the grammar compiler refuses."""


class GrammarFactory:
    """Compiles JSON Schemas against one tokenizer (built lazily: it costs ~1 s on big vocabs)."""

    def __init__(self, hf_tokenizer: Any, vocab_size: int) -> None:
        self._hf = hf_tokenizer
        self._vocab_size = vocab_size
        self._tokenizer: llguidance.LLTokenizer | None = None
        self._lock = threading.Lock()

    def _lltokenizer(self) -> llguidance.LLTokenizer:
        with self._lock:
            if self._tokenizer is None:
                self._tokenizer = llguidance.hf.from_tokenizer(self._hf, n_vocab=self._vocab_size)
            return self._tokenizer

    def processor(
        self, schema: dict[str, Any], bounds: JsonBounds | None = None
    ) -> JsonSchemaProcessor:
        """A fresh constraint for one request; raises SchemaError for an invalid schema."""
        if bounds is not None:
            schema = bound_schema(schema, bounds)
        # Fixed separators and no free whitespace: small models otherwise pad JSON with blanks.
        grammar = llguidance.LLMatcher.grammar_from_json_schema(
            json.dumps(schema), overrides={"whitespace_flexible": False}
        )
        return self._compile(grammar)

    def grammar_processor(self, lark: str) -> JsonSchemaProcessor:
        """A constraint from an llguidance Lark grammar (tool calls); SchemaError if refused."""
        return self._compile(llguidance.LLMatcher.grammar_from_lark(lark))

    def literal(self, text: str) -> str:
        """A Lark expression producing `text`: a token reference when it is a special token."""
        ids = self._hf.encode(text, add_special_tokens=False)
        if len(ids) == 1 and self._lltokenizer().is_special_token(ids[0]):
            return f"<[{ids[0]}]>"
        return json.dumps(text, ensure_ascii=False)

    def _compile(self, grammar: str) -> JsonSchemaProcessor:
        tokenizer = self._lltokenizer()
        error = llguidance.LLMatcher.validate_grammar(grammar, tokenizer)
        if error:
            raise SchemaError(error)
        matcher = llguidance.LLMatcher(tokenizer, grammar)
        if matcher.is_error():
            raise SchemaError(matcher.get_error())
        return JsonSchemaProcessor(matcher, self._vocab_size)


class JsonSchemaProcessor:
    """An mlx-lm logits processor: `(tokens, logits) -> logits` with forbidden tokens at -inf."""

    def __init__(self, matcher: llguidance.LLMatcher, vocab_size: int) -> None:
        self._matcher = matcher
        self._vocab_size = vocab_size
        self._started = False

    @property
    def matcher(self) -> llguidance.LLMatcher:
        """The grammar state (a batched decode step fills its mask with the others')."""
        return self._matcher

    @property
    def vocab_size(self) -> int:
        """The mask's width: the model's vocabulary."""
        return self._vocab_size

    def advance(self, last: int) -> None:
        """Feeds the context's last token: the one sampled last step (the prompt's, at first)."""
        if self._started:
            self._matcher.consume_token(last)  # type: ignore[arg-type]
        self._started = True

    def __call__(self, tokens: mx.array, logits: mx.array) -> mx.array:
        # The mask needs the token sampled last step, this step's forward pass does not: queue
        # the context, then the forward pass, and read the context as memory (np.asarray waits
        # for it alone; a new MLX op would wait behind the forward pass), so the forward pass
        # runs while the mask is computed.
        mx.async_eval(tokens)
        mx.async_eval(logits)
        self.advance(int(np.asarray(tokens).reshape(-1)[-1]))
        words = np.frombuffer(self._matcher.compute_bitmask(), dtype=np.uint8)
        allowed = np.unpackbits(words, bitorder="little")[: logits.shape[-1]].astype(bool)
        return mx.where(mx.array(allowed), logits, -mx.inf)
