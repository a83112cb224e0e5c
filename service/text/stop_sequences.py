"""Cuts generated text at the first stop sequence, holding back a tail that may begin one."""

from __future__ import annotations

from collections.abc import Sequence

from mlx_responses.service.text.output_parser import Channel, Segment


class StopScanner:
    """Text in, text out: nothing of a stop sequence (or after it) is ever released.

    The text is cut at the stop sequence that completes first (of two completing together, the
    longer), whatever the chunks."""

    def __init__(self, stops: Sequence[str]) -> None:
        self.stops = tuple(s for s in stops if s)
        self.matched: str | None = None
        self._held = ""

    def feed(self, text: str) -> str:
        """The part of `text` (after what was held) that is certainly output."""
        if self.matched is not None or not self.stops:
            return "" if self.matched is not None else text
        buffer = self._held + text
        # The stop that completes first (ties: the one starting first), as generation token by
        # token meets them: how the text is chunked never changes where it is cut.
        found: tuple[int, int, str] | None = None
        for stop in self.stops:
            at = buffer.find(stop)
            if at >= 0 and (found is None or (at + len(stop), at) < found[:2]):
                found = (at + len(stop), at, stop)
        if found is not None:
            self.matched = found[2]
            self._held = ""
            return buffer[: found[1]]
        keep = max((self._partial(buffer, stop) for stop in self.stops), default=0)
        self._held = buffer[len(buffer) - keep :] if keep else ""
        return buffer[: len(buffer) - keep]

    def flush(self) -> str:
        """What was held back, released at the end of generation."""
        held, self._held = self._held, ""
        return held

    @staticmethod
    def _partial(buffer: str, stop: str) -> int:
        """The length of the longest tail of `buffer` that is a proper prefix of `stop`."""
        for size in range(min(len(stop) - 1, len(buffer)), 0, -1):
            if buffer.endswith(stop[:size]):
                return size
        return 0


def stop_answer(segments: Sequence[Segment], stops: StopScanner) -> list[Segment]:
    """Segments read by token (harmony), the answer text cut at the first stop sequence as any
    model's; reasoning and calls pass. A message's end releases the text held back in it."""
    out: list[Segment] = []
    for segment in segments:
        if stops.matched is not None:
            break
        if segment.channel is Channel.TEXT:
            text = stops.feed(segment.text)
            if text:
                out.append(Segment(Channel.TEXT, text))
            continue
        if segment.channel is Channel.BOUNDARY and (held := stops.flush()):
            out.append(Segment(Channel.TEXT, held))
        out.append(segment)
    return out
