"""StopScanner: text is cut before the first stop sequence, however the chunks split it."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st
from mlx_responses.service.text.stop_sequences import StopScanner


def run(chunks: list[str], stops: list[str]) -> tuple[str, str | None]:
    scanner = StopScanner(stops)
    out = "".join(scanner.feed(c) for c in chunks)
    if scanner.matched is None:
        out += scanner.flush()
    return out, scanner.matched


def test_cut_before_the_first_stop() -> None:
    assert run(["hello wor", "ld and more"], ["world"]) == ("hello ", "world")
    assert run(["a", "b", "c", "d"], ["cd", "bc"]) == ("a", "bc")


def test_held_prefix_is_released_when_no_stop_completes() -> None:
    scanner = StopScanner(["STOP"])
    assert scanner.feed("abc ST") == "abc "
    assert scanner.feed("O") == ""
    assert scanner.feed("P!") == ""
    assert scanner.matched == "STOP"
    scanner = StopScanner(["STOP"])
    assert scanner.feed("abc STO") == "abc "
    assert scanner.flush() == "STO"


def test_the_stop_completing_first_cuts_however_the_text_is_chunked() -> None:
    # "a" completes inside "baa" before "baa" does: one chunk or two, the cut is the same.
    assert run(["baa"], ["a", "baa"]) == ("b", "a")
    assert run(["ba", "a"], ["a", "baa"]) == ("b", "a")
    assert run(["xbaa"], ["aa", "baa"]) == ("x", "baa")  # together: the one starting first
    assert run(["xba", "a"], ["aa", "baa"]) == ("x", "baa")


def test_no_stops_passes_text_through() -> None:
    assert run(["x", "y"], []) == ("xy", None)
    assert run(["x", "y"], [""]) == ("xy", None)


@given(
    text=st.text(alphabet="abc ", max_size=40),
    stops=st.lists(st.text(alphabet="abc", min_size=1, max_size=3), max_size=3),
    cuts=st.lists(st.integers(min_value=0, max_value=40), max_size=6),
)
def test_any_chunking_gives_the_whole_text_answer(
    text: str, stops: list[str], cuts: list[int]
) -> None:
    bounds = sorted({0, len(text), *(c for c in cuts if c <= len(text))})
    chunks = [text[a:b] for a, b in itertools.pairwise(bounds)]
    # Cut at the stop completing first (ties: the one starting first), as token by token.
    found = [(text.find(s) + len(s), text.find(s), s) for s in stops if s in text]
    if found:
        _, at, _ = min(found)
        assert run(chunks, stops)[0] == text[:at]
    else:
        assert run(chunks, stops) == (text, None)
