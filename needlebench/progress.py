"""Progress on the terminal for long exports, scoring and reports: a count, a bar when the total is known, items/s.

Quiet when asked (``--quiet``) and whenever the stream is not a terminal, so logs and
pipes never fill with carriage returns.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    """A one-line progress display, redrawn at most every ``interval`` seconds.

    Args:
        label: what is counted (``"samples"``).
        total: how many there will be, when known (draws a bar).
        quiet: never draw.
        stream: where to draw (default ``sys.stderr``); nothing is drawn unless it is a terminal.
        interval: seconds between redraws.
    """

    def __init__(
        self,
        label: str,
        total: int | None = None,
        quiet: bool = False,
        stream: TextIO | None = None,
        interval: float = 0.2,
    ) -> None:
        self.label, self.total, self.interval = label, total, interval
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = not quiet and bool(getattr(self.stream, "isatty", lambda: False)())
        self.count = 0
        self.start = self._last = time.monotonic()
        self._drawn = False

    def update(self, n: int = 1) -> None:
        """Count ``n`` more items; redraw if the interval has passed.

        Args:
            n: items done since the last call.
        """
        self.count += n
        now = time.monotonic()
        if self.enabled and now - self._last >= self.interval:
            self._last = now
            self._draw(now)

    def close(self) -> None:
        """Draw the final count and end the line (only if anything was drawn or it is enabled)."""
        if self.enabled:
            self._draw(time.monotonic())
            self.stream.write("\n")
            self.stream.flush()

    def line(self, now: float) -> str:
        """The text of the display at time ``now`` (``monotonic`` seconds).

        Args:
            now: the current time, from ``time.monotonic()``.
        """
        rate = self.count / max(now - self.start, 1e-9)
        if self.total:
            done = min(1.0, self.count / self.total)
            bar = "#" * int(30 * done) + "-" * (30 - int(30 * done))
            return f"[{bar}] {self.count:,}/{self.total:,} {self.label} ({rate:,.0f}/s)"
        return f"{self.count:,} {self.label} ({rate:,.0f}/s)"

    def _draw(self, now: float) -> None:
        self.stream.write("\r" + self.line(now))
        self.stream.flush()
        self._drawn = True

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
