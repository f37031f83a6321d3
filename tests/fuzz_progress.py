"""How far a fuzz run is (tests/fuzz_*.py's --progress): "LABEL: 12,000 of 100,000 cases (12%),
3 failed, 41 s, about 300 s left", on stderr each time another `every` percent is done (on a
terminal: one line rewritten in place). Shown by default when stdout is a terminal;
--progress / --no-progress decide otherwise."""
from __future__ import annotations

import argparse
import sys
import time
from typing import IO

from luabridge.core.progress import ProgressLine


def add_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="say on stderr how far the run is, every 5%% of the cases (default: when stdout is a terminal)")


def wanted(asked: bool | None) -> bool:
    return sys.stdout.isatty() if asked is None else asked


class FuzzProgress:
    def __init__(self, label: str, total: int, stream: IO[str] | None = None, every: float = 5.0,
                 clock=time.monotonic) -> None:
        self.label, self.total, self.every, self.clock = label, max(total, 1), every, clock
        self.line = ProgressLine(sys.stderr if stream is None else stream)
        self.start, self.shown = clock(), -1.0

    def update(self, done: int, failed: int) -> None:
        """done: the cases finished so far, failed: the failures among them."""
        step = (100.0 * min(done, self.total) / self.total) // self.every * self.every
        if step <= self.shown:
            return
        self.shown = step
        seconds = self.clock() - self.start
        left = f", about {seconds * (self.total - done) / done:.0f} s left" if 0 < done < self.total else ""
        text = (f"{self.label}: {done:,} of {self.total:,} cases ({step:.0f}%), {failed:,} failed, "
                f"{seconds:.0f} s{left}")
        self.line.show(text, last=done >= self.total)

    def close(self) -> None:
        self.line.close()
