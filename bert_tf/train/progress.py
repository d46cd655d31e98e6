"""Progress of a long phase (evaluation, prediction): a log line every so often with
what is done, the rate and, when the total is known, the time left."""

import time

from absl import logging


def _duration(seconds):
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class PhaseProgress:
    """Counts a phase's work and logs it every `every_seconds` and at the end.

        progress = PhaseProgress("Predicting", total=52862)
        for batch in batches:
            progress.update(len(batch))
        progress.finish()   # "Predicting: 52862 examples in 41m03s (21.5/s)"

    Args:
      name: What the phase is, as the log line starts.
      total: How many units the phase will do (None: unknown, no time left shown).
      unit: What is counted ("examples", "batches").
      every_seconds: Seconds between progress lines.
      clock: Seconds now (a test passes a fake one).
    """

    def __init__(self, name, total=None, unit="examples", every_seconds=30.0,
                 clock=time.monotonic):
        self.name, self.total, self.unit = name, total, unit
        self.every_seconds, self.clock = every_seconds, clock
        self.done = 0
        self.started = self.last_logged = clock()

    def _rate(self, now):
        return self.done / max(now - self.started, 1e-9)

    def update(self, count):
        """Adds `count` units; logs a line when `every_seconds` have passed."""
        self.done += count
        now = self.clock()
        if now - self.last_logged < self.every_seconds:
            return
        self.last_logged = now
        rate = self._rate(now)
        if self.total:
            left = max(self.total - self.done, 0) / rate if rate else 0.0
            logging.info("%s: %d of %d %s (%.0f%%), %.1f/s, about %s left", self.name,
                         self.done, self.total, self.unit, 100.0 * self.done / self.total,
                         rate, _duration(left))
        else:
            logging.info("%s: %d %s, %.1f/s", self.name, self.done, self.unit, rate)

    def finish(self):
        """Logs the phase's total, its time and its rate."""
        now = self.clock()
        logging.info("%s: %d %s in %s (%.1f/s)", self.name, self.done, self.unit,
                     _duration(now - self.started), self._rate(now))
