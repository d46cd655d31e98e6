"""Progress lines of long phases: evaluation, prediction and training."""

from absl import logging as absl_logging

from bert_tf.train.progress import PhaseProgress, TrainingProgress


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_progress_lines_say_done_total_rate_and_time_left(caplog):
    absl_logging.set_verbosity(absl_logging.INFO)
    clock = FakeClock()
    progress = PhaseProgress("Predicting", total=1000, every_seconds=30, clock=clock)
    clock.now = 10.0
    progress.update(100)  # before 30 s: nothing logged
    assert "Predicting" not in caplog.text
    clock.now = 40.0
    progress.update(100)
    assert "Predicting: 200 of 1000 examples (20%), 5.0/s, about 2m40s left" in caplog.text
    clock.now = 200.0
    progress.update(800)
    progress.finish()
    assert "Predicting: 1000 examples in 3m20s (5.0/s)" in caplog.text


def test_progress_without_a_total_logs_the_count_and_rate(caplog):
    absl_logging.set_verbosity(absl_logging.INFO)
    clock = FakeClock()
    progress = PhaseProgress("Evaluating", unit="batches", every_seconds=30, clock=clock)
    clock.now = 31.0
    progress.update(62)
    assert "Evaluating: 62 batches, 2.0/s" in caplog.text


def _run_calls(progress, clock, seconds_per_step, limit, step=0, first_call_seconds=40.0):
    """Drives `progress` as the training loop does; returns (steps per call, lines)."""
    calls, lines = [], []
    while step < progress.num_train_steps:
        count = progress.next_call(min(limit, progress.num_train_steps - step))
        seconds = first_call_seconds if not calls else count * seconds_per_step
        clock.now += seconds
        step += count
        calls.append(count)
        line = progress.after_call(step, count, seconds, {"total_loss": 1.0 / step}, 1e-4)
        if line:
            lines.append((clock.now, step, line))
    return calls, lines


def test_training_progress_cuts_long_loops_to_report_every_period(caplog):
    """1,000 steps a loop, 2 s a step: a line every 30 s of training, the first 30 s
    after the compiling first step, instead of one after 2,000 s."""
    absl_logging.set_verbosity(absl_logging.INFO)
    clock = FakeClock()
    progress = TrainingProgress(num_train_steps=100, start_step=0, rows_per_step=32,
                                every_seconds=30, clock=clock)
    calls, lines = _run_calls(progress, clock, seconds_per_step=2.0, limit=1000)
    # Compile, measure, then calls of up to 10 s (a third of the period) to the line.
    assert calls[:5] == [1, 1, 5, 5, 4]
    assert "the first step (tracing and compiling the loop) took 40.0 s" in caplog.text
    times = [now for now, _, _ in lines]
    assert times[0] - 40.0 <= 30.0 + 1e-9
    assert all(later - earlier <= 30.0 + 1e-9 for earlier, later in zip(times, times[1:]))
    now, step, scalars = lines[0]
    assert step == 16 and scalars["examples_per_second"] == 16.0  # 32 rows / 2 s
    assert scalars["seconds_left"] == (100 - 16) * 2.0
    assert "step 16/100 (16.0%): total_loss = " in caplog.text
    assert "learning_rate = 0.0001, 16.0 examples/s, about 2m48s left" in caplog.text


def test_training_progress_counts_packed_examples_and_useful_tokens(caplog):
    absl_logging.set_verbosity(absl_logging.INFO)
    clock = FakeClock()
    progress = TrainingProgress(num_train_steps=10, start_step=0, rows_per_step=8,
                                examples_per_row=2.5, every_seconds=30, clock=clock)
    progress.after_call(1, 1, 20.0, {"total_loss": 2.0}, 1e-3)  # compiles
    clock.now = 50.0
    line = progress.after_call(5, 4, 40.0, {"total_loss": 1.0}, 1e-3, useful_tokens=1000)
    assert line["examples_per_second"] == 4 * 8 * 2.5 / 40.0
    assert line["useful_tokens_per_second"] == 4 * 1000 / 40.0
    assert "2.0 examples/s, 100 useful tokens/s" in caplog.text


def test_training_progress_per_loop_on_tpu_runs_loops_whole_and_reports_each():
    clock = FakeClock()
    progress = TrainingProgress(num_train_steps=3000, start_step=0, rows_per_step=32,
                                per_loop=True, clock=clock)
    calls, lines = _run_calls(progress, clock, seconds_per_step=0.5, limit=1000)
    assert calls == [1000, 1000, 1000]
    assert [step for _, step, _ in lines] == [1000, 2000, 3000]


def test_training_progress_loss_is_the_mean_since_the_last_line():
    clock = FakeClock()
    progress = TrainingProgress(num_train_steps=100, start_step=0, rows_per_step=1,
                                every_seconds=30, clock=clock)
    progress.after_call(1, 1, 5.0, {"total_loss": 9.0}, 0.1)  # compiles: not in a line
    clock.now = 20.0
    assert not progress.after_call(2, 1, 10.0, {"total_loss": 4.0}, 0.1)
    clock.now = 40.0
    line = progress.after_call(5, 3, 20.0, {"total_loss": 2.0}, 0.1)
    assert line["total_loss"] == (4.0 + 3 * 2.0) / 4


def test_counted_examples_replace_the_rows_estimate():
    clock = FakeClock()
    progress = TrainingProgress(num_train_steps=10, start_step=0, rows_per_step=8,
                                examples_per_row=2.5, every_seconds=30, clock=clock)
    progress.after_call(1, 1, 20.0, {"total_loss": 2.0}, 1e-3)
    clock.now = 50.0
    line = progress.after_call(5, 4, 40.0, {"total_loss": 1.0}, 1e-3, useful_tokens=1000,
                               useful_examples=17)
    assert line["examples_per_second"] == 4 * 17 / 40.0
