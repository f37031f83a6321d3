"""A progress line on a stream (stderr, as a rule): each report a line of its own, or, when the
stream is a terminal, one line rewritten in place (carriage return, erase to the end) that
`close()` ends. Used by long conversions (luabridge.torch.convert.ConversionProgress) and the
fuzz runs (tests/fuzz_progress.py)."""
from __future__ import annotations

from typing import IO


class ProgressLine:
    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.open = False

    def show(self, text: str, last: bool = False) -> None:
        """Reports text; `last`: the final report (a line rewritten in place ends with it)."""
        self.stream.write(f"\r{text}\033[K" if self.tty else f"{text}\n")
        self.open = self.tty
        if last:
            self.close()
        self.stream.flush()

    def close(self) -> None:
        """Ends a line left open on a terminal (before other output, or at the end)."""
        if self.open:
            self.stream.write("\n")
            self.stream.flush()
            self.open = False
