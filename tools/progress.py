"""How every long-running command shows its progress (``tools.transfer``, ``tools.replay``,
``tools.install`` behind the first ``make run``, the benchmarks under ``bench/``).

A command names its stages, each with the total it will count to. On a terminal each stage is a
tqdm bar with its count, its total and a percentage (``export: memories  40%|████  | 17/42``),
left on the screen when the stage ends. Anywhere else (a pipe, a file, a CI log) a bar's
carriage returns would be noise, so each stage prints one line when it ends instead
(``export: memories: 42/42 (100%) in 0.8 s``, or ``stopped at 17/42`` when it failed) and the
command then prints its summary. Whether the stream is a terminal is asked of the stream
(stderr by default, as tqdm's bar; the summary goes to stdout), so ``command > file`` still
shows the bar on the terminal and writes the summary to the file.

A total is a promise: a stage that counts past it raises the total to its count (the bar never
falls back to tqdm's count-only form, "42item"), and the stage line says what it counted.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable, Iterator, Sized
from contextlib import contextmanager
from typing import IO, Any, TypeVar

from tqdm import tqdm

T = TypeVar("T")

_EMPTY_BAR = "{desc}: 100%| 0/0 [{elapsed}{postfix}]"
"""An empty stage's bar: done, where tqdm would show a count without a total ("0it")."""


class Stage:
    """One stage's count towards its ``total`` (what ``Progress.stage`` yields). ``advance``
    counts, ``note`` says what is being done now (beside the bar; in the stage's line too),
    ``set_total`` replaces the total once it is known better."""

    def __init__(self, name: str, total: int, bar: tqdm[Any] | None) -> None:
        self.name = name
        self.total = max(total, 0)
        self.count = 0
        self.detail = ""
        self._bar = bar

    def advance(self, count: int = 1) -> None:
        """Count ``count`` more done; a count past the total raises the total to it."""
        self.count += count
        if self.count > self.total:
            self.total = self.count
            if self._bar is not None:
                self._bar.total = self.total  # drawn by the update below
                self._bar.bar_format = None  # no longer the empty stage's
        if self._bar is not None:
            self._bar.update(count)

    def set_total(self, total: int) -> None:
        """The stage will count to ``total`` (not below what it has counted already)."""
        self.total = max(total, self.count)
        if self._bar is not None:
            self._bar.total = self.total
            self._bar.bar_format = None if self.total > 0 else _EMPTY_BAR
            self._bar.refresh()

    def note(self, text: str) -> None:
        """What the stage is doing now, shown after the bar and at the end of its line."""
        self.detail = text
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=True)

    def percent(self) -> int:
        """The share done, 0 to 100 (100 for an empty stage: nothing was left to do)."""
        return 100 if self.total == 0 else min(100, self.count * 100 // self.total)


class Progress:
    """The progress of one command, ``command`` naming it in every bar and line.

    ``stream``: where bars and stage lines go (default ``sys.stderr``); ``terminal``: whether to
    draw bars (default: whether ``stream`` is a terminal); ``quiet``: neither bars nor stage
    lines (``summary`` still prints)."""

    def __init__(
        self,
        command: str,
        *,
        stream: IO[str] | None = None,
        terminal: bool | None = None,
        quiet: bool = False,
    ) -> None:
        self.command = command
        self.stream = stream if stream is not None else sys.stderr
        self.terminal = _is_terminal(self.stream) if terminal is None else terminal
        self.quiet = quiet

    @contextmanager
    def stage(self, name: str, total: int, unit: str = "item") -> Iterator[Stage]:
        """A stage of ``total`` units (``unit``: tqdm's rate, "item/s"). On a terminal a bar;
        elsewhere one line when it ends, also when it ends with an exception (which goes on)."""
        label = f"{self.command}: {name}"
        bar = None
        if self.terminal and not self.quiet:
            bar = tqdm(
                total=max(total, 0),
                desc=label,
                unit=unit,
                file=self.stream,
                dynamic_ncols=True,
                leave=True,
                # The percentage and count also when the total is 0 (tqdm would show "0it").
                bar_format=None if total > 0 else _EMPTY_BAR,
            )
        stage = Stage(name, total, bar)
        started = time.monotonic()
        finished = False
        try:
            yield stage
            finished = True
        finally:
            if bar is not None:
                bar.close()
            elif not self.quiet:
                self.say(_stage_line(label, stage, time.monotonic() - started, finished))

    def each(self, name: str, items: Iterable[T], unit: str = "item") -> Iterator[T]:
        """``items`` one by one, as a stage that counts them; its total is their number (for
        items without a length, the count so far)."""
        total = len(items) if isinstance(items, Sized) else 0
        with self.stage(name, total, unit) as stage:
            for item in items:
                yield item
                stage.advance()

    def say(self, text: str) -> None:
        """A line of its own on the progress stream (above a bar that is showing)."""
        if self.quiet:
            return
        if self.terminal:
            tqdm.write(text, file=self.stream)
        else:
            print(text, file=self.stream, flush=True)

    def summary(self, text: str) -> None:
        """The command's last word, on stdout, whatever the stream and ``quiet``."""
        print(text, flush=True)


def _stage_line(label: str, stage: Stage, seconds: float, finished: bool) -> str:
    counted = f"{stage.count:,}/{stage.total:,} ({stage.percent()}%)"
    if finished:
        line = f"{label}: {counted} in {seconds:.1f} s"
    else:
        line = f"{label}: stopped at {counted} after {seconds:.1f} s"
    return f"{line}; {stage.detail}" if stage.detail else line


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a stream without a file, or closed
        return False
