"""Tiny end-to-end NER runs: train, eval with conlleval, predict, bad input."""

import logging
import re
import subprocess
import sys

import numpy as np
import pytest

from bert_tf.tasks.ner import conlleval
from bert_tf.tasks.ner import data as ner_data
from bert_tf.tasks.ner import task as ner_task
from bert_tf.tasks.ner.options import NerOptions
from harness import write_tiny_model_files

FILLER = ["the", "a", "went", "to", "from", "saw", "met", "and", "."]
PEOPLE = [["john"], ["mary"], ["johnson"]]  # johnson -> john ##son
PLACES = [["paris"], ["london"], ["new", "york"]]
WORDS = FILLER + ["john", "mary", "##son", "paris", "london", "new", "york"]


def tiny_model_files(folder):
    return write_tiny_model_files(folder, WORDS)


def sentence(rng, length):
    """(words, IOB1 tags): fillers with people (PER) and places (LOC) mixed in.

    Entities are never adjacent, so each one is a single I- run in IOB1.
    """
    words, tags = [], []
    while len(words) < length:
        choice = rng.integers(0, 4) if not tags or tags[-1] == "O" else 2
        if choice == 0:
            entity, kind = PEOPLE[rng.integers(0, 3)], "PER"
        elif choice == 1:
            entity, kind = PLACES[rng.integers(0, 3)], "LOC"
        else:
            entity, kind = [FILLER[rng.integers(0, len(FILLER))]], None
        words += entity
        tags += [f"I-{kind}" if kind else "O"] * len(entity)
    return words, tags


def write_conll(path, count, seed, length=6, with_tags=True):
    rng = np.random.default_rng(seed)
    lines = ["-DOCSTART- -X- O O", ""]
    for _ in range(count):
        words, tags = sentence(rng, length)
        for word, tag in zip(words, tags):
            lines.append(f"{word.capitalize()} NN I-NP {tag}" if with_tags else word)
        lines.append("")
    path.write_text("\n".join(lines) + "\n")


def options(tmp_path, **changes):
    vocab_file, config_file = tiny_model_files(tmp_path)
    values = dict(data_dir=str(tmp_path / "data"), output_dir=str(tmp_path / "out"),
                  vocab_file=vocab_file, bert_config_file=config_file, max_seq_length=12,
                  doc_stride=4, train_batch_size=16, eval_batch_size=8,
                  predict_batch_size=8, learning_rate=3e-3, num_train_epochs=25.0,
                  save_checkpoints_steps=200, steps_per_loop=25, seed=3, dropout_rate=0.0)
    values.update(allow_random_encoder=True)  # tiny models train from random weights
    values.update(changes)
    return NerOptions(**values)


def test_train_eval_predict_conll_layout(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="absl")
    data = tmp_path / "data"
    data.mkdir()
    write_conll(data / "eng.train", 64, 0)
    write_conll(data / "eng.testa", 12, 1, length=14)  # 14+ words: split into windows
    write_conll(data / "eng.testb", 4, 2, with_tags=False)
    results = ner_task.run(options(tmp_path, do_train=True, do_eval=True,
                                   do_predict=True))
    out = tmp_path / "out"
    assert (out / "label_list.txt").read_text().split() == ["O", "B-LOC", "B-PER", "I-LOC"]
    assert results["eval_f1"] == 100.0, results
    assert results["eval_f1_PER"] == results["eval_f1_LOC"] == 100.0
    # The predictions file is conlleval input in the gold file's (IOB1) scheme, one line
    # per word of the eval file.
    predictions = (out / "eval_predictions.txt").read_text()
    gold = ner_data.read_tagged_file(str(data / "eng.testa"))
    lines = [line for line in predictions.splitlines() if line]
    assert len(lines) == sum(len(s.words) for s in gold)
    assert all(line.split()[1] == line.split()[2] for line in lines)
    counts = conlleval.evaluate_lines(predictions.splitlines())
    assert counts.overall().f1 == 100.0 and counts.found_correct == results["eval_phrases"]
    assert "eval_f1 = 100.0" in (out / "eval_results.txt").read_text().splitlines()
    # Predict file without tags: `word predicted` per line.
    tagged = [line.split() for line in (out / "test_predictions.txt").read_text().splitlines()
              if line]
    words = ner_data.read_tagged_file(str(data / "eng.testb"), has_tags=False)
    assert [w for w, _ in tagged] == [w for s in words for w in s.words]
    expected = {"john": "B-PER", "johnson": "B-PER", "mary": "B-PER", "paris": "B-LOC",
                "london": "B-LOC", "new": "B-LOC", "york": "I-LOC"}
    assert all(tag == expected.get(word, "O") for word, tag in tagged)
    # Never silent for long after "Training done" (issue 49: 20-40 s): building the
    # features, then predicting (its first batch traces the model), say as they start.
    logged = caplog.text
    for phase, count in (("training", 64), ("evaluation", 12), ("prediction", 4)):
        assert f"Building {phase} features: {count} sentences ..." in logged
        assert f"Building {phase} features: {count} sentences in " in logged
    for phase in ("Evaluating", "Predicting"):
        assert re.search(rf"{phase}: \d+ examples \.\.\.\n(.*\n)*.*{phase}: \d+ examples in ",
                         logged), logged


def test_bad_input(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.txt").write_text("John NNP B-PER\nwent\n")
    with pytest.raises(ValueError, match=r"train.txt:2: missing tag"):
        ner_task.run(options(tmp_path, do_train=True))
    with pytest.raises(ValueError, match=r"train.txt:1: tag column 7 is outside the line"):
        ner_task.run(options(tmp_path, do_train=True, tag_column=7))
    with pytest.raises(FileNotFoundError, match=r"no eval file: expected one of .*eng.testa"):
        ner_task.run(options(tmp_path, do_eval=True, output_dir=str(data)))
    with pytest.raises(ValueError, match=r"no training checkpoint in output_dir .* and no "
                                         "init_checkpoint: nothing to evaluate"):
        ner_task.run(options(tmp_path, do_eval=True, eval_file=str(data / "train.txt")))


def test_command_line_bad_tag_line(tmp_path):
    vocab_file, config_file = tiny_model_files(tmp_path)
    bad = tmp_path / "train.txt"
    bad.write_text("John B-PER\nwent\n")
    result = subprocess.run(
        [sys.executable, "-m", "run_ner", f"--train_file={bad}", "--do_train",
         f"--output_dir={tmp_path / 'out'}", f"--vocab_file={vocab_file}",
         f"--bert_config_file={config_file}", "--max_seq_length=12",
         "--allow_random_encoder"],
        capture_output=True, text=True)
    assert result.returncode != 0
    assert f"bert-run-ner: error: {bad}:2: missing tag" in result.stderr


def write_tiny_inputs(tmp_path):
    """The data of `tiny_options` (shared with test_commands)."""
    (tmp_path / "data").mkdir(exist_ok=True)
    write_conll(tmp_path / "data" / "eng.train", 40, 0)
    write_conll(tmp_path / "data" / "eng.testa", 8, 1)


def tiny_options(tmp_path, **changes):
    """A short training run of this task (shared with test_commands)."""
    return options(tmp_path, **{"do_train": True, "num_train_epochs": 1.0, **changes})
