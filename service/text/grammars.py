"""Grammars for constrained decoding, compiled with llguidance against one tokenizer.

JSON Schemas (`text.format`) and Lark grammars (forced tool calls) compile at create time, so an
invalid one is a 400 and never a failed job. What a compiled grammar does to the logits is the
engine's (service/engine/structured.py): nothing here touches MLX.

Schemas compile leniently (`LENIENT`): what llguidance does not implement (`propertyNames`,
`if`/`then`, `dependentSchemas`, formats such as `uri-reference`) is not enforced, the rest is.
Real clients send such keywords by default (Claude Code's own tools), and a request is no worse
served by a grammar that holds everything else. A schema marked `strict` is checked as a whole
first (`check_strict`): what cannot be enforced there is the client's 400, as OpenAI refuses
keywords its strict mode does not support.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import llguidance
import llguidance.hf
from mlx_responses.service.text.json_bounds import JsonBounds, bound_schema

if TYPE_CHECKING:
    from llguidance._lib import JsonCompileOptions


@dataclass(frozen=True)
class Grammar:
    """A compiled grammar at its start state: one request's, stateful as it is consumed."""

    matcher: llguidance.LLMatcher
    vocab_size: int
    # llguidance's grammar text it was compiled from: another process compiles the same grammar
    # from it (a distributed group's other ranks, service/models/processors.py).
    source: str = ""


class SchemaError(ValueError):
    """A schema the grammar compiler refuses."""


# llguidance's JSON options for every schema compiled here: fixed separators and no free
# whitespace (small models otherwise pad JSON), keywords it does not implement left unenforced.
LENIENT: JsonCompileOptions = {"whitespace_flexible": False, "lenient": True}


def _is_panic(exc: BaseException) -> bool:
    # A Rust panic inside llguidance surfaces as pyo3's PanicException, which derives from
    # BaseException (not Exception) and has no importable class: it is known by its name.
    return type(exc).__name__ == "PanicException"


@contextlib.contextmanager
def guarded_compile(*passthrough: type[Exception]) -> Iterator[None]:
    """Turns any failure of building or compiling a grammar into SchemaError.

    Client schemas reach code that was never meant to see them (bounds arithmetic on a string
    `minItems`, a Rust panic on a non-ASCII value): whatever goes wrong is the schema's fault.
    """
    try:
        yield
    except SchemaError:
        raise
    except Exception as exc:
        if isinstance(exc, passthrough):
            raise
        raise SchemaError(f"{type(exc).__name__}: {exc}") from exc
    except BaseException as exc:
        if _is_panic(exc):
            raise SchemaError(f"the grammar compiler failed: {exc}") from exc
        raise


def check_strict(schema: dict[str, Any]) -> None:
    """Raises SchemaError naming what of `schema` cannot be enforced (a `strict` schema's)."""
    with guarded_compile():
        grammar = llguidance.LLMatcher.grammar_from_json_schema(
            json.dumps(schema), overrides={"whitespace_flexible": False}
        )
        error = llguidance.LLMatcher.validate_grammar(grammar)
    if error:
        raise SchemaError(error)


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
        with guarded_compile():
            if bounds is not None:
                schema = bound_schema(schema, bounds)
            grammar = llguidance.LLMatcher.grammar_from_json_schema(
                json.dumps(schema), overrides=LENIENT
            )
            return self._compile(grammar)

    def lark(self, lark: str, subgrammars: dict[str, str] | None = None) -> Grammar:
        """A grammar from llguidance Lark text (tool calls); SchemaError if refused.

        `subgrammars` are the grammars it references as `@name` (custom tools' grammars).
        """
        with guarded_compile():
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

    def compiled(self, source: str) -> Grammar:
        """A fresh grammar from llguidance grammar text (a `Grammar.source`)."""
        with guarded_compile():
            return self._compile(source)

    def _compile(self, grammar: str) -> Grammar:
        tokenizer = self._lltokenizer()
        error = llguidance.LLMatcher.validate_grammar(grammar, tokenizer)
        if error:
            raise SchemaError(error)
        matcher = llguidance.LLMatcher(tokenizer, grammar)
        if matcher.is_error():
            raise SchemaError(matcher.get_error())
        return Grammar(matcher, self._vocab_size, grammar)
