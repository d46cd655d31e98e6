"""Progress lines of long phases (evaluation, prediction)."""

from absl import logging as absl_logging

from bert_tf.train.progress import PhaseProgress


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
