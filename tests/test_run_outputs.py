"""What a classifier run writes and says: test_results.tsv as the original's,
predictions.tsv with a header and ids in every mode, the phases' progress named for
what they do, and a finished rerun that says so."""

import numpy as np
from absl import logging as absl_logging

import test_run_classifier
from bert_tf.tasks.classification import data as classification_data
from bert_tf.tasks.classification import task as classification_task


def test_predictions_test_results_and_the_log_of_each_phase(tmp_path, caplog):
    absl_logging.set_verbosity(absl_logging.INFO)
    test_run_classifier.write_sst2(tmp_path / "data")
    options = test_run_classifier.options(tmp_path, do_train=True, do_eval=True,
                                          do_predict=True, num_train_epochs=2.0)
    classification_task.run(options)
    out = tmp_path / "out"
    probabilities = np.loadtxt(out / "test_results.tsv", delimiter="\t")  # no header
    assert probabilities.shape == (6, 2)
    lines = (out / "predictions.tsv").read_text().splitlines()
    assert lines[0] == "index\tprediction\t0\t1"
    rows = [line.split("\t") for line in lines[1:]]
    assert [row[0] for row in rows] == [str(index) for index in range(6)]
    assert [row[1] for row in rows] == [str(int(np.argmax(p))) for p in probabilities]
    np.testing.assert_allclose(np.array([row[2:] for row in rows], float), probabilities,
                               atol=1e-6)
    assert (out / "SST-2.tsv").read_text().startswith("index\tprediction\n")
    messages = [record.getMessage() for record in caplog.records]
    assert any(message.startswith("Evaluating: 16 examples in ") for message in messages)
    assert any(message.startswith("Predicting: 6 examples in ") for message in messages)
    assert not any(message.startswith("Predicting: 16 ") for message in messages)

    caplog.clear()  # a finished run again, predicting only
    classification_task.run(test_run_classifier.options(
        tmp_path, do_train=True, do_predict=True, num_train_epochs=2.0))
    messages = [record.getMessage() for record in caplog.records]
    assert any(message.startswith("Training: the checkpoint is at step 8 of 8: nothing "
                                  "to train") for message in messages), messages
    assert not any("final ;" in message or message.startswith("Evaluating")
                   for message in messages)


class _Example:
    def __init__(self, guid):
        self.guid = guid


def test_predictions_of_a_regression_are_the_scores_with_ids(tmp_path):
    path = tmp_path / "predictions.tsv"
    examples = [_Example("test-7"), _Example("test-9")]
    classification_data.write_predictions(str(path), examples, np.array([3.14159, 0.5]),
                                          None)
    assert path.read_text() == "index\tprediction\n7\t3.141590\n9\t0.500000\n"


def test_a_packed_run_reports_examples_and_useful_tokens_per_second(tmp_path, caplog):
    absl_logging.set_verbosity(absl_logging.INFO)
    test_run_classifier.write_sst2(tmp_path / "data")
    classification_task.run(test_run_classifier.options(
        tmp_path, do_train=True, num_train_epochs=4.0, pack_sequences=True,
        steps_per_loop=1000, progress_every_seconds=0.01))
    lines = [record.getMessage() for record in caplog.records
             if record.getMessage().startswith("step ")]
    assert lines and all("examples/s, " in line and " useful tokens/s, about " in line
                         for line in lines), lines
