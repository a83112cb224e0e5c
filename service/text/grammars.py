"""Grammars for constrained decoding, compiled with llguidance against one tokenizer.

JSON Schemas (`text.format`) and Lark grammars (forced tool calls) compile at create time, so an
invalid one is a 400 and never a failed job. What a compiled grammar does to the logits is the
engine's (service/engine/structured.py): nothing here touches MLX.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

import llguidance
import llguidance.hf
from mlx_responses.service.text.json_bounds import JsonBounds, bound_schema


@dataclass(frozen=True)
class Grammar:
    """A compiled grammar at its start state: one request's, stateful as it is consumed."""

    matcher: llguidance.LLMatcher
    vocab_size: int


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

    def json_schema(self, schema: dict[str, Any], bounds: JsonBounds | None = None) -> Grammar:
        """A fresh grammar for one request; raises SchemaError for an invalid schema."""
        if bounds is not None:
            schema = bound_schema(schema, bounds)
        # Fixed separators and no free whitespace: small models otherwise pad JSON with blanks.
        grammar = llguidance.LLMatcher.grammar_from_json_schema(
            json.dumps(schema), overrides={"whitespace_flexible": False}
        )
        return self._compile(grammar)

    def lark(self, lark: str, subgrammars: dict[str, str] | None = None) -> Grammar:
        """A grammar from llguidance Lark text (tool calls); SchemaError if refused.

        `subgrammars` are the grammars it references as `@name` (custom tools' grammars).
        """
        if not subgrammars:
            return self._compile(llguidance.LLMatcher.grammar_from_lark(lark))
        grammars = [{"lark_grammar": lark}]
        grammars += [{"name": name, "lark_grammar": g} for name, g in subgrammars.items()]
        return self._compile(json.dumps({"grammars": grammars}))

    def literal(self, text: str) -> str:
        """A Lark expression producing `text`: a token reference when it is a special token."""
        ids = self._hf.encode(text, add_special_tokens=False)
        if len(ids) == 1 and self._lltokenizer().is_special_token(ids[0]):
            return f"<[{ids[0]}]>"
        return json.dumps(text, ensure_ascii=False)

    def _compile(self, grammar: str) -> Grammar:
        tokenizer = self._lltokenizer()
        error = llguidance.LLMatcher.validate_grammar(grammar, tokenizer)
        if error:
            raise SchemaError(error)
        matcher = llguidance.LLMatcher(tokenizer, grammar)
        if matcher.is_error():
            raise SchemaError(matcher.get_error())
        return Grammar(matcher, self._vocab_size)
