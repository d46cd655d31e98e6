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

    def start(self):
        """Logs that the phase began (for one whose first progress line may be far off:
        tokenizing before the first unit is counted)."""
        logging.info("%s: %s%s ...", self.name, f"{self.total} " if self.total else "",
                     self.unit)

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


class TrainingProgress:
    """Progress of a training run: how many steps the next call of the compiled loop
    runs, and a log line every `every_seconds` of training.

    A loop call cannot report until it returns, so the training loop asks
    `next_call(limit)` how many of the `limit` steps left in its loop of
    `steps_per_loop` to run: the first call runs one step (it traces and compiles),
    later calls as many as end by the next line (and within a third of the period),
    from the seconds a step took. With
    `per_loop` (TPU: a loop runs on the device to its end) every call runs its loop
    whole, and a line follows each call.

        progress = TrainingProgress(num_train_steps=3438, start_step=0, rows_per_step=32)
        num_steps = progress.next_call(limit=100)
        ...                                   # run num_steps steps, taking `seconds`
        line = progress.after_call(step, num_steps, seconds, losses, learning_rate)
        # line: the scalars of the line logged now ({} when none is due)

    A line: "step 120/3438 (3.5%): total_loss = 0.6931, learning_rate = 1.2e-05,
    21.3 examples/s, about 42m10s left" (losses and rates over the steps since the last
    line; with `useful_tokens`, the real tokens a step holds, "... useful tokens/s"; with
    `useful_examples`, the examples a step holds, counted instead of estimated).

    Args:
      num_train_steps: The run's last step.
      start_step: The step the run starts (or resumes) from.
      rows_per_step: Rows of one optimizer step (all replicas).
      examples_per_row: Examples a row holds on average (packed rows: more than 1).
      every_seconds: Seconds between lines.
      per_loop: A line after every call, which runs its loop whole.
      clock: Seconds now (a test passes a fake one).
    """

    def __init__(self, num_train_steps, start_step, rows_per_step, examples_per_row=1.0,
                 every_seconds=30.0, per_loop=False, clock=time.monotonic):
        self.num_train_steps, self.step = num_train_steps, start_step
        self.rows_per_step, self.examples_per_row = rows_per_step, examples_per_row
        self.every_seconds, self.per_loop, self.clock = every_seconds, per_loop, clock
        self.seconds_per_step = None  # of the last call after the first (compiling) one
        self.train_seconds, self.steps_timed = 0.0, 0  # the calls after the first
        self.calls, self.next_line_at = 0, None
        self._window = _Window()

    def next_call(self, limit: int) -> int:
        """Steps the next loop call runs: at most `limit`, at least 1."""
        if self.per_loop or self.calls == 0 and limit <= 1:
            return limit
        if self.calls == 0 or self.seconds_per_step is None:
            return 1  # the first call compiles; the second measures a step
        # Calls of a third of the period at most: a slower step (a busy machine) delays
        # the next line by its share of one such call, not of a whole period.
        seconds = min(self.next_line_at - self.clock(), self.every_seconds / 3)
        return max(1, min(limit, int(seconds / max(self.seconds_per_step, 1e-9))))

    def after_call(self, step, num_steps, seconds, losses, learning_rate,
                   useful_tokens=None, useful_examples=None) -> dict:
        """Records a call of `num_steps` steps that took `seconds` and reached `step`.

        Args:
          step: The global step reached.
          num_steps: Steps the call ran.
          seconds: Its wall time.
          losses: {name: mean over its steps}.
          learning_rate: The rate at `step`.
          useful_tokens: Real (not padding) tokens of one step on average (None: not
            counted).
          useful_examples: Examples of one step on average (None: not counted, rows
            times `examples_per_row`).

        Returns:
          The scalars of the line logged now (losses, learning_rate,
          examples_per_second, sequences_per_second, useful_tokens_per_second when
          counted, seconds_left), or {} when no line is due.
        """
        self.calls += 1
        self.step = step
        if self.calls == 1 and not self.per_loop:
            logging.info("Training from step %d: the first step (tracing and compiling "
                         "the loop) took %.1f s; a progress line every %.0f s",
                         step - num_steps, seconds, self.every_seconds)
            self.next_line_at = self.clock() + self.every_seconds
            if num_steps > 1:  # a first call of several steps is timed too
                self.seconds_per_step = seconds / num_steps
            return {}
        self.seconds_per_step = seconds / num_steps
        self.train_seconds += seconds
        self.steps_timed += num_steps
        self._window.add(num_steps, seconds, losses, useful_tokens, useful_examples)
        now = self.clock()
        if not self.per_loop and now + 0.5 * self.seconds_per_step < self.next_line_at:
            return {}
        self.next_line_at = now + self.every_seconds
        return self._log(learning_rate)

    def _log(self, learning_rate) -> dict:
        window, self._window = self._window, _Window()
        rows_per_second = window.steps * self.rows_per_step / max(window.seconds, 1e-9)
        examples_per_second = (rows_per_second * self.examples_per_row
                               if window.examples is None
                               else window.examples / max(window.seconds, 1e-9))
        scalars = dict(window.losses(), learning_rate=learning_rate,
                       sequences_per_second=rows_per_second,
                       examples_per_second=examples_per_second)
        rates = f"{scalars['examples_per_second']:.1f} examples/s"
        if window.tokens is not None:
            scalars["useful_tokens_per_second"] = window.tokens / max(window.seconds, 1e-9)
            rates += f", {scalars['useful_tokens_per_second']:.0f} useful tokens/s"
        per_step = self.train_seconds / max(self.steps_timed, 1)
        scalars["seconds_left"] = max(self.num_train_steps - self.step, 0) * per_step
        losses = ", ".join(f"{name} = {value:.4f}"
                           for name, value in sorted(window.losses().items()))
        logging.info("step %d/%d (%.1f%%): %s, learning_rate = %.3g, %s, about %s left",
                     self.step, self.num_train_steps,
                     100.0 * self.step / self.num_train_steps, losses, learning_rate,
                     rates, _duration(scalars["seconds_left"]))
        return scalars


class _Window:
    """Steps, seconds, loss sums, tokens and examples since the last progress line."""

    def __init__(self):
        self.steps, self.seconds, self.loss_sums = 0, 0.0, {}
        self.tokens = self.examples = None

    def add(self, num_steps, seconds, losses, useful_tokens, useful_examples):
        self.steps += num_steps
        self.seconds += seconds
        for name, value in losses.items():
            self.loss_sums[name] = self.loss_sums.get(name, 0.0) + value * num_steps
        if useful_tokens is not None:
            self.tokens = (self.tokens or 0.0) + useful_tokens * num_steps
        if useful_examples is not None:
            self.examples = (self.examples or 0.0) + useful_examples * num_steps

    def losses(self) -> dict:
        return {name: total / max(self.steps, 1) for name, total in self.loss_sums.items()}
