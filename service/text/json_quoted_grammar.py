"""A custom tool's Lark grammar rewritten to match its input as the body of a JSON string.

Models that write tool calls as JSON put a custom tool's input inside a JSON string, so the
grammar must hold for the escaped text. JSON escaping maps each character on its own (`"` to
`\\"`, a newline to `\\n`, ...), so escaping every terminal escapes the whole language. The
escapes are the ones `json.dumps` writes; other spellings of the same string are not generated.

llguidance lexes greedily: a terminal that may go on with an escape (`\\t`) would swallow the
`\\` of a following terminal's escape (`\\n`). So each terminal becomes a rule whose lexemes are
runs of plain characters and single escape sequences, which never share a first byte.
"""

from __future__ import annotations

import json
import re
import re._parser as sre  # the stdlib's regex parser: the regex as a tree
from re._constants import (  # type: ignore[attr-defined]
    ANY,
    BRANCH,
    CATEGORY,
    IN,
    LITERAL,
    MAX_REPEAT,
    MAXREPEAT,
    MIN_REPEAT,
    NEGATE,
    NOT_LITERAL,
    RANGE,
    SUBPATTERN,
)
from typing import Any

# Characters a JSON string cannot hold unescaped.
SPECIALS = [chr(c) for c in range(0x20)] + ['"', "\\"]
_SPECIAL_CLASS = r'[\x00-\x1F"\\]'
_CATEGORIES = {
    "CATEGORY_DIGIT": r"\d",
    "CATEGORY_NOT_DIGIT": r"\D",
    "CATEGORY_SPACE": r"\s",
    "CATEGORY_NOT_SPACE": r"\S",
    "CATEGORY_WORD": r"\w",
    "CATEGORY_NOT_WORD": r"\W",
}
_COMMON = {  # llguidance's `%import common.X` regexes, so an import is rewritten too
    "DIGIT": r"[0-9]",
    "HEXDIGIT": r"[a-fA-F0-9]",
    "INT": r"[0-9]+",
    "SIGNED_INT": r"(\+|-)?[0-9]+",
    "DECIMAL": r"([0-9]+\.[0-9]*)|(\.[0-9]+)",
    "FLOAT": r"([0-9]+\.[0-9]*|\.[0-9]+)([eE](\+|-)?[0-9]+)?|[0-9]+[eE](\+|-)?[0-9]+",
    "NUMBER": r"([0-9]+)|([0-9]+\.[0-9]*|\.[0-9]+)([eE](\+|-)?[0-9]+)?|[0-9]+[eE](\+|-)?[0-9]+",
    "ESCAPED_STRING": r"\"([^\"\\]|\\.)*\"",
    "LCASE_LETTER": r"[a-z]",
    "UCASE_LETTER": r"[A-Z]",
    "LETTER": r"[A-Za-z]",
    "WORD": r"[A-Za-z]+",
    "CNAME": r"[_A-Za-z][_A-Za-z0-9]*",
    "WS_INLINE": r"[ \t]+",
    "WS": r"[ \t\f\r\n]+",
    "CR": r"\r",
    "LF": r"\n",
    "NEWLINE": r"(\r?\n)+",
}
_STRING = re.compile(r'"((?:\\.|[^"\\])*)"(i?)')
_REGEX = re.compile(r"/((?:\\.|[^/\\\n])+)/([imslux]*)")
_IMPORT = re.compile(r"%import\s+common(?:\.(\w+)(?:\s*->\s*(\w+))?|\s*\(([\w\s,]*)\))")
_TERMINAL = re.compile(r"_?[A-Z][_A-Z0-9]*\b")
_NAME = re.compile(r"[_a-zA-Z][_a-zA-Z0-9]*")
_UNSUPPORTED = ("%json", "%lark", "%regex", "%llguidance", "%ignore", "%import", "@", "<", "..")


class UnquotableGrammarError(ValueError):
    """A grammar feature this rewrite does not carry into a JSON string."""


def escaped(text: str) -> str:
    """`text` as `json.dumps` writes it inside a JSON string."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


def _literal(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _char(code: int) -> str:
    """A character as an escape both Python's and llguidance's regex syntax read."""
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _rust_char(code: int) -> str:
    return f"\\x{{{code:x}}}"


class _Converter:
    """Turns a regex (as the stdlib parses it) into a Lark expression over escaped text."""

    def __init__(self, dotall: bool) -> None:
        self.dotall = [dotall]

    def sequence(self, nodes: Any) -> str:
        parts: list[str] = []
        plain = ""
        for op, arg in nodes:
            if op is LITERAL and chr(arg) not in SPECIALS:
                plain += chr(arg)
                continue
            if plain:
                parts.append(_literal(plain))
                plain = ""
            parts.append(self.node(op, arg))
        if plain:
            parts.append(_literal(plain))
        parts = [p for p in parts if p]
        if not parts:
            return '""'
        return parts[0] if len(parts) == 1 else "(" + " ".join(parts) + ")"

    def node(self, op: Any, arg: Any) -> str:
        if op is LITERAL:
            return _literal(escaped(chr(arg)))
        if op in (IN, ANY, NOT_LITERAL):
            return self.char_set(op, arg, repeat=False)
        if op is BRANCH:
            return "(" + " | ".join(self.sequence(b) for b in arg[1]) + ")"
        if op is SUBPATTERN:
            _, add, remove, body = arg
            if (add | remove) & re.IGNORECASE:
                raise UnquotableGrammarError("case-insensitive regexes are not supported")
            dotall = self.dotall[-1]
            dotall = True if add & re.DOTALL else False if remove & re.DOTALL else dotall
            self.dotall.append(dotall)
            try:
                return self.sequence(body)
            finally:
                self.dotall.pop()
        if op in (MAX_REPEAT, MIN_REPEAT):
            return self.repeat(*arg)
        raise UnquotableGrammarError(f"regex construct {op} is not supported")

    def repeat(self, low: int, high: int, body: Any) -> str:
        items = list(body)
        if len(items) == 1 and items[0][0] in (IN, ANY, NOT_LITERAL) and high == MAXREPEAT:
            # A run of plain characters is one lexeme: (plain+ | escape)* has the same language.
            one = self.char_set(items[0][0], items[0][1], repeat=True)
        else:
            one = self.sequence(items)
        if (low, high) == (0, MAXREPEAT):
            return f"{one}*"
        if (low, high) == (1, MAXREPEAT):
            return f"{one}+"
        if (low, high) == (0, 1):
            return f"{one}?"
        if high == MAXREPEAT:
            return f"({one} ~ {low} {one}*)"
        return f"{one} ~ {low}" if low == high else f"{one} ~ {low}..{high}"

    def char_set(self, op: Any, arg: Any, *, repeat: bool) -> str:
        python, rust = self._class(op, arg)
        compiled = re.compile(python, re.DOTALL if self.dotall[-1] else 0)
        specials = [c for c in SPECIALS if compiled.fullmatch(c)]
        plus = "+" if repeat else ""
        options = [f"/[{rust}--{_SPECIAL_CLASS}]{plus}/"]
        options += [_literal(escaped(c)) for c in specials]
        return options[0] if len(options) == 1 else "(" + " | ".join(options) + ")"

    def _class(self, op: Any, arg: Any) -> tuple[str, str]:
        """The set as a Python regex class and as an llguidance one."""
        if op is ANY:
            return ("[\\s\\S]", "[\\s\\S]") if self.dotall[-1] else ("[^\\n]", "[^\\n]")
        if op is NOT_LITERAL:
            return f"[^{_char(arg)}]", f"[^{_rust_char(arg)}]"
        negate = False
        python, rust = "", ""
        for kind, value in arg:
            if kind is NEGATE:
                negate = True
            elif kind is LITERAL:
                python += _char(value)
                rust += _rust_char(value)
            elif kind is RANGE:
                python += f"{_char(value[0])}-{_char(value[1])}"
                rust += f"{_rust_char(value[0])}-{_rust_char(value[1])}"
            elif kind is CATEGORY and str(value) in _CATEGORIES:
                python += _CATEGORIES[str(value)]
                rust += _CATEGORIES[str(value)]
            else:
                raise UnquotableGrammarError(f"regex class item {kind} is not supported")
        hat = "^" if negate else ""
        return f"[{hat}{python}]", f"[{hat}{rust}]"


def regex_expression(body: str, flags: str = "") -> str:
    """A Lark expression (rules, not one terminal) for the JSON-escaped matches of `body`."""
    if set(flags) - {"s", "m"}:
        raise UnquotableGrammarError(f"regex flags {flags!r} are not supported")
    try:
        tree = sre.parse(body, re.DOTALL if "s" in flags else 0)
    except re.error as exc:
        raise UnquotableGrammarError(f"regex /{body}/: {exc}") from exc
    if tree.state.flags & re.IGNORECASE:
        raise UnquotableGrammarError("case-insensitive regexes are not supported")
    return _Converter("s" in flags or bool(tree.state.flags & re.DOTALL)).sequence(tree)


def _string(inner: str, case_flag: str) -> str:
    try:
        text = json.loads('"' + re.sub(r"\\x([0-9a-fA-F]{2})", r"\\u00\1", inner) + '"')
    except ValueError as exc:
        raise UnquotableGrammarError(f"string literal {inner!r}: {exc}") from exc
    quoted = escaped(text)
    if case_flag and quoted != text:
        raise UnquotableGrammarError("a case-insensitive literal with escapes is not supported")
    return _literal(quoted) + case_flag


def _rule_name(terminal: str) -> str:
    """The rule standing for a terminal (rules are lowercase in Lark)."""
    return "qt_" + terminal.lower()


def _imports(match: re.Match[str]) -> str:
    if match.group(1):
        names = [(match.group(1), match.group(2) or match.group(1))]
    else:
        names = [(n, n) for n in re.split(r"[\s,]+", match.group(3).strip()) if n]
    lines = []
    for name, alias in names:
        if name not in _COMMON:
            raise UnquotableGrammarError(f"%import common.{name} is not supported")
        lines.append(f"{_rule_name(alias)}: {regex_expression(_COMMON[name])}")
    return "\n".join(lines)


def quote_lark(grammar: str) -> str:
    """A Lark grammar for the JSON-escaped strings of `grammar`'s language.

    Terminals become rules (`LF` -> `qt_lf`). Raises UnquotableGrammarError for features it
    does not carry over (other grammars, special tokens, %ignore, case-insensitive regexes).
    """
    out: list[str] = []
    pos = 0
    while pos < len(grammar):
        if grammar.startswith("//", pos):
            end = grammar.find("\n", pos)
            pos = len(grammar) if end < 0 else end
            continue
        if match := _IMPORT.match(grammar, pos):
            out.append(_imports(match))
        elif match := _STRING.match(grammar, pos):
            out.append(_string(match.group(1), match.group(2)))
        elif match := _REGEX.match(grammar, pos):
            out.append(regex_expression(match.group(1), match.group(2)))
        elif match := _NAME.match(grammar, pos):
            name = match.group(0)
            out.append(_rule_name(name) if _TERMINAL.fullmatch(name) else name)
        else:
            feature = next((f for f in _UNSUPPORTED if grammar.startswith(f, pos)), None)
            if feature is not None:
                raise UnquotableGrammarError(f"'{feature}' in a grammar is not supported")
            out.append(grammar[pos])
            pos += 1
            continue
        pos = match.end()
    return "".join(out)
