"""Issue 49, class 3: case and columns that cannot be right are refused, in every tool.

* case: every command that reads a vocab applies the runners' rule
  (`bert_tf.text.vocab.check_case_matches`): an uncased vocab with
  `--do_lower_case=false` (every capitalised word `[UNK]`) and a cased one with `true` are
  refused naming the flag, unless `--allow_case_mismatch`. `CASE_RULE` lists every console
  script (and every task of `bert-train`); a new one fails the table test until it is in;
* columns: two column flags naming one column (`bert-run-ner --tag_column=0`, the word
  column) are refused naming both (`column_roles.check_columns_apart`, every options class
  with two column flags, found here); a label set that looks like the words (as many
  labels as distinct words, most seen once) is refused naming the flag.
"""

import dataclasses
import itertools
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import harness
from bert_tf.runs import column_roles
from bert_tf.text import vocab as vocab_lib
from test_invariants_files import REPO, console_scripts

FAST = settings(max_examples=25, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
WORDS = [f"w{i}" for i in range(1100)]  # enough word pieces to tell the case
VOCABS = {"uncased": harness.SPECIAL_TOKENS + WORDS,
          "cased": harness.SPECIAL_TOKENS + [w.upper() if i % 2 else w
                                             for i, w in enumerate(WORDS)]}


class PastTheCheck(Exception):
    """Raised by the spy after the case rule let a run through."""


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """{case: a released-style model folder (not named uncased_/cased_) of that vocab}."""
    from bert_tf.models import BertEncoder  # pylint: disable=import-outside-toplevel
    made = {}
    for case, tokens in VOCABS.items():
        folder = tmp_path_factory.mktemp(case) / "model"
        harness.write_released_checkpoint(
            str(folder), harness.tiny_model(BertEncoder, harness.tiny_config(
                vocab_size=len(tokens)), 3), tokens)
        made[case] = str(folder)
    return made


def _corpus(tmp_path, documents=True):
    path = tmp_path / "corpus.txt"
    path.write_text("w1 w2 w3 .\nw4 w5 .\n" + ("\n" if documents else "")
                    + "w6 w7 .\nw8 w9 .\n", encoding="utf-8")
    return str(path)


def _create_pretraining_data(tmp_path, folder, lower):
    from data_prep import create_pretraining_data as tool  # pylint: disable=import-outside-toplevel
    tool.create(tool.CreatePretrainingDataOptions(
        input_file=_corpus(tmp_path), vocab_file=os.path.join(folder, "vocab.txt"),
        output_file=str(tmp_path / "out.tfrecord"), max_seq_length=16,
        max_predictions_per_seq=2, do_lower_case=lower))


def _beam(tmp_path, folder, lower):
    pytest.importorskip("apache_beam")
    from data_prep import beam_pipeline  # pylint: disable=import-outside-toplevel
    beam_pipeline.settings_from_options(beam_pipeline.CreatePretrainingDataBeamOptions(
        input_file=_corpus(tmp_path), vocab_file=os.path.join(folder, "vocab.txt"),
        output_file=str(tmp_path / "out.tfrecord"), max_seq_length=16,
        max_predictions_per_seq=2, do_lower_case=lower))


def _extend(tmp_path, folder, lower):
    # pylint: disable-next=import-outside-toplevel
    from data_prep import extend_vocab, extend_vocab_run
    extend_vocab_run.extend_vocab(extend_vocab.ExtendVocabOptions(
        input_file=_corpus(tmp_path), init_checkpoint=folder,
        output_dir=str(tmp_path / "extended"), min_frequency=1, mode="append",
        max_new_tokens=1, do_lower_case=lower))


def _export(tmp_path, folder, lower):
    from bert_tf.runs import export_checkpoint  # pylint: disable=import-outside-toplevel
    export_checkpoint.export_from_checkpoint(export_checkpoint.ExportOptions(
        init_checkpoint=folder, export_dir=str(tmp_path / "export"), model_type="encoder",
        do_lower_case=lower))


def _extract(tmp_path, folder, lower):
    from bert_tf.runs import feature_extraction  # pylint: disable=import-outside-toplevel
    feature_extraction.run(feature_extraction.ExtractOptions(
        input_file=_corpus(tmp_path), output_file=str(tmp_path / "out.jsonl"),
        init_checkpoint=folder, do_lower_case=lower))


def _encode(tmp_path, folder, lower):
    from bert_tf.tasks.sentence_embeddings import encode  # pylint: disable=import-outside-toplevel
    encode.run(encode.EncodeOptions(
        input_file=_corpus(tmp_path, documents=False), output_file=str(tmp_path / "out.npy"),
        init_checkpoint=folder, do_lower_case=lower, max_seq_length=16))


def _task(name):
    """The runners of a task (`bert-run-*`, `bert-train --task`): its options through
    `RunContext.create`, which the driver calls for every task before any work."""
    def run(tmp_path, folder, lower):
        from bert_tf.runs import registry, run_context  # pylint: disable=import-outside-toplevel
        options = registry.TASKS[name].options_class(
            output_dir=str(tmp_path / "out"), init_checkpoint=folder, do_lower_case=lower,
            do_train=True, max_seq_length=16, **TASK_FILES.get(name, {}))
        run_context.RunContext.create(options)
    return run


TASK_FILES = {"squad": dict(train_file="train.json", max_query_length=4, doc_stride=4)}


def _case_tasks():
    """The tasks of the registry whose options lower-case text."""
    from bert_tf.runs import registry  # pylint: disable=import-outside-toplevel
    return sorted(name for name, entry in registry.TASKS.items()
                  if "do_lower_case" in _fields(entry.options_class))


def _fields(options_class):
    return {field.name for field in dataclasses.fields(options_class)}


# Every console script and how it applies the case rule, or why it has none.
CASE_RULE = {
    "bert-create-pretraining-data": _create_pretraining_data,
    "bert-create-pretraining-data-beam": _beam,
    "bert-extend-vocab": _extend,
    "bert-export-model": _export,
    "bert-extract-features": _extract,
    "bert-encode": _encode,
    "bert-run-classifier": _task("classification"),
    "bert-run-ner": _task("ner"),
    "bert-run-squad": _task("squad"),
    "bert-run-multiple-choice": _task("multiple_choice"),
    "bert-train": "every task of the registry with do_lower_case: TASK_CASE_RULE",
    "bert-search": "its trials are runs of bert-train's tasks: TASK_CASE_RULE",
    "bert-run-pretraining": "reads token ids (TFRecords), not text: no case to fit",
    "bert-build-vocab": "learns a vocab and reads none: its case is the one it learns",
    "bert-build-vocab-beam": "learns a vocab and reads none",
}
# The tasks of bert-train that lower-case text (the others read token ids).
TASK_CASE_RULE = ("classification", "distillation", "multiple_choice", "ner",
                  "sentence_embeddings", "squad")


def test_every_command_and_task_is_in_the_case_table():
    assert set(CASE_RULE) == console_scripts(), \
        "CASE_RULE must list every console script (issue 49, class 3)"
    assert set(TASK_CASE_RULE) == set(_case_tasks()), \
        "TASK_CASE_RULE must list every task with do_lower_case"
    from bert_tf.runs import registry  # pylint: disable=import-outside-toplevel
    for name in set(registry.TASKS) - set(TASK_CASE_RULE):  # no text, no case flag
        assert "do_lower_case" not in _fields(registry.TASKS[name].options_class), name
    for name in TASK_CASE_RULE:  # each can be told to run anyway
        assert "allow_case_mismatch" in _fields(registry.TASKS[name].options_class), name


@pytest.fixture
def spy(monkeypatch):
    """The case rule, stopping the run when it lets it through."""
    real = vocab_lib.check_case_matches

    def check(*args, **kwargs):
        real(*args, **kwargs)
        raise PastTheCheck()
    monkeypatch.setattr(vocab_lib, "check_case_matches", check)


ENTRY_POINTS = sorted([name for name, rule in CASE_RULE.items() if callable(rule)]
                      + [f"bert-train --task={task}" for task in TASK_CASE_RULE])


@pytest.mark.parametrize("entry_point", ENTRY_POINTS)
def test_every_vocab_reader_applies_the_case_rule(entry_point, folders, tmp_path, spy):
    run = (_task(entry_point.split("=")[1]) if entry_point.startswith("bert-train")
           else CASE_RULE[entry_point])
    for (case, folder), lower in itertools.product(sorted(folders.items()), (True, False)):
        work = tmp_path / f"{case}-{lower}"
        work.mkdir()
        if (case == "uncased") != lower:
            fix = str(case == "uncased").lower()
            with pytest.raises(ValueError, match=(
                    rf"--do_lower_case={str(lower).lower()} does not fit .*it is {case}; "
                    rf"pass --do_lower_case={fix} \(or --allow_case_mismatch")):
                run(work, folder, lower)
        else:
            with pytest.raises(PastTheCheck):
                run(work, folder, lower)


@FAST
@given(capitals=st.integers(0, 100), lower=st.booleans())
def test_the_rule_refuses_what_the_vocab_contradicts(capitals, lower):
    tokens = WORDS[:1000]
    tokens = [w.upper() if i < capitals * 10 else w for i, w in enumerate(tokens)]
    case = vocab_lib.vocab_case(tokens)
    if case is None or (case == "uncased") == lower:
        vocab_lib.check_case_matches(lower, tokens, "v.txt")
    else:
        with pytest.raises(ValueError, match="--do_lower_case="):
            vocab_lib.check_case_matches(lower, tokens, "v.txt")


# ------------------------------------------------------------------ columns


def _options_classes():
    """{name: options class} of every command and task."""
    import importlib  # pylint: disable=import-outside-toplevel
    from bert_tf.runs import registry  # pylint: disable=import-outside-toplevel
    found = {entry.options_class.__name__: entry.options_class
             for entry in registry.TASKS.values()}
    for path in sorted((REPO / "bert_tf" / "cli").glob("*.py")):
        options = getattr(importlib.import_module(f"bert_tf.cli.{path.stem}"), "OPTIONS", None)
        if options is not None:
            found[options.__name__] = options
    for module, name in (("create_pretraining_data", "CreatePretrainingDataOptions"),
                         ("build_vocab", "BuildVocabOptions"),
                         ("extend_vocab", "ExtendVocabOptions")):
        found[name] = getattr(importlib.import_module(f"data_prep.{module}"), name)
    return found


# Every options class with two or more column flags, and what else it needs to check.
COLUMN_RULE = {
    "NerOptions": dict(output_dir="out"),
    "ClassifierOptions": dict(output_dir="out"),
    "SentenceEmbeddingOptions": dict(output_dir="out"),
    "EncodeOptions": dict(input_file="a.tsv", output_file="a.npy", init_checkpoint="m",
                          max_seq_length=16),
}


def _columns(options_class):
    return sorted(name for name in _fields(options_class) if name.endswith("_column"))


def test_every_options_class_with_columns_is_in_the_table():
    with_columns = {name for name, cls in _options_classes().items()
                    if len(_columns(cls)) >= 2}
    assert with_columns == set(COLUMN_RULE), \
        "COLUMN_RULE must list every options class with two column flags (issue 49)"


def _column_cases():
    classes = _options_classes()
    return [(name, first, second) for name in sorted(COLUMN_RULE)
            for first, second in itertools.combinations(_columns(classes[name]), 2)]


@pytest.mark.parametrize("name, first, second", _column_cases())
def test_two_column_flags_naming_one_column_are_refused(name, first, second):
    options_class = _options_classes()[name]
    value = 1 if name == "NerOptions" else "body"
    options = options_class(**COLUMN_RULE[name], **{first: value, second: value})
    with pytest.raises(ValueError, match=rf"--\w+_column={value} and --\w+_column={value} "
                                         "name one column: a column has one role"):
        options.check()
    message = str(pytest.raises(ValueError, options.check).value)
    assert f"--{first}=" in message and f"--{second}=" in message


def test_the_defaults_name_distinct_columns():
    classes = _options_classes()
    for name in COLUMN_RULE:
        column_roles.check_columns_apart(classes[name](**COLUMN_RULE[name]))


@FAST
@given(words=st.integers(20, 300), tags=st.integers(2, 12), seed=st.integers(0, 99))
def test_a_label_column_passes_and_a_column_of_words_is_refused(words, tags, seed):
    import random  # pylint: disable=import-outside-toplevel
    rng = random.Random(seed)
    tokens = [f"w{rng.randrange(words * 3)}" for _ in range(words)]
    labels = [rng.choice([f"B-T{i}" for i in range(tags)] + ["O"] * tags) for _ in tokens]
    column_roles.check_labels_not_words(tokens, labels, "--tag_column=-1", "train.txt")
    distinct = len(set(tokens))
    if distinct >= column_roles.MIN_WORD_LIKE_LABELS and sum(
            1 for t in set(tokens) if tokens.count(t) == 1) * 2 > distinct:
        with pytest.raises(ValueError, match=r"train.txt: --tag_column=0 reads \d+ different "
                                             r"labels .*pass --tag_column the column of the "
                                             "labels"):
            column_roles.check_labels_not_words(tokens, tokens, "--tag_column=0", "train.txt")


def _conll(path, rows):
    path.write_text("".join(" ".join(row) + "\n" if row else "\n" for row in rows),
                    encoding="utf-8")
    return str(path)


def test_a_tag_column_that_is_the_word_column_of_a_line_names_file_and_line(tmp_path):
    from bert_tf.tasks.ner import data as ner_data  # pylint: disable=import-outside-toplevel
    path = _conll(tmp_path / "train.txt", [("Paris", "B-LOC"), ("is", "O"), ()])
    with pytest.raises(ValueError, match=r"train.txt:1: --tag_column=-2 and --word_column=0 "
                                         "name one column"):
        ner_data.read_tagged_file(path, tag_column=-2, word_column=0)


def test_ner_refuses_a_column_of_words_as_tags_before_training(tmp_path, folders):
    from bert_tf.tasks.ner import task as ner_task  # pylint: disable=import-outside-toplevel
    from bert_tf.tasks.ner.options import NerOptions
    rows = []
    for sentence in range(12):  # word, its lemma (words again), the tag
        rows += [(f"w{sentence * 3 + i}", f"w{sentence * 3 + i}x",
                  "B-LOC" if i == 0 else "O") for i in range(3)] + [()]
    train = _conll(tmp_path / "train.txt", rows)
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=r"train.txt: --tag_column=1 reads 36 different "
                                         "labels for 36 different words"):
        ner_task.run(NerOptions(
            train_file=train, tag_column=1, init_checkpoint=folders["uncased"],
            output_dir=str(out), do_train=True, max_seq_length=16, num_train_epochs=1.0))
    assert not out.exists() or not any(p.name.startswith("ckpt") for p in out.iterdir())
    NerOptions(train_file=train, tag_column=2, output_dir=str(out)).check()


def test_run_ner_tag_column_zero_is_one_line(tmp_path):
    _conll(tmp_path / "t.txt", [("Paris", "B-LOC"), ("is", "O"), ()])
    done = subprocess.run(
        [sys.executable, "run_ner.py", "--tag_column=0", f"--output_dir={tmp_path}/o",
         "--do_train", f"--train_file={tmp_path}/t.txt"], cwd=REPO, capture_output=True,
        text=True, timeout=300)
    assert done.returncode == 1, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("bert-run-ner: error: "), last
    assert "--tag_column=0 and --word_column=0 name one column" in last, last
