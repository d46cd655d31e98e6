"""Writes that fail say so (issue 49, class 4): one rule, `bert_tf.io.write_errors.classify`,
turns a file too large for the file system (EFBIG), a full disk and a read-only folder
into one line naming the file and the cause, at every write entry point; and a rerun
replaces the earlier run's files of the same kind, saying so (class 2).

The EFBIG cases run the write in a subprocess under RLIMIT_FSIZE with SIGXFSZ ignored
(so write() returns EFBIG instead of killing the process), as `ulimit -f` does.
"""

import errno
import json
import os
import pathlib
import re
import resource
import signal
import subprocess
import sys

import pytest

from bert_tf.io import write_errors
from test_create_pretraining_data import VOCAB  # noqa: F401  (the vocab_file fixture's)

REPO = pathlib.Path(__file__).resolve().parents[1]
LIMIT = 64 * 1024  # bytes: RLIMIT_FSIZE of the child


class _TfLike(Exception):
    """Stands for a TensorFlow OpError (matched by its message and class name)."""


_TfLike.__module__ = "tensorflow.python.framework.errors_impl"


@pytest.mark.parametrize("error, code, cause", [
    (OSError(errno.EFBIG, "File too large"), errno.EFBIG, write_errors.FILE_TOO_LARGE),
    (OSError(errno.ENOSPC, "No space left on device"), errno.ENOSPC, "no space left"),
    (OSError(errno.EDQUOT, "Disk quota exceeded"), errno.EDQUOT, "no space left"),
    (OSError(errno.EROFS, "Read-only file system"), errno.EROFS, "read-only"),
    (PermissionError(errno.EACCES, "Permission denied"), errno.EACCES, "read-only"),
    (_TfLike("/out/ckpt-1_temp/part-00000.data.tempstate1; File too large [Op:SaveV2]"),
     errno.EFBIG, write_errors.FILE_TOO_LARGE),
    (_TfLike("/out/x; No space left on device"), errno.ENOSPC, "no space left"),
], ids=["efbig", "enospc", "edquot", "erofs", "eacces", "tf-efbig", "tf-enospc"])
def test_the_rule_names_file_and_cause_in_one_line(error, code, cause):
    failed = write_errors.classify(error, "/out")
    assert isinstance(failed, OSError) and failed.errno == code
    message = str(failed)
    assert cause in message and "\n" not in message and "/out" in message
    if isinstance(error, _TfLike):  # the very file TensorFlow names
        assert failed.filename.startswith("/out/") and "[Op:" not in failed.filename


@pytest.mark.parametrize("error", [ValueError("bad value"), OSError(errno.ENOENT, "x"),
                                   KeyboardInterrupt(), _TfLike("Invalid argument")])
def test_other_errors_are_not_write_errors(error):
    assert write_errors.classify(error, "/out") is None


def test_a_refused_read_of_another_file_is_not_called_a_write():
    error = PermissionError(errno.EACCES, "Permission denied", "/data/corpus.txt")
    assert write_errors.classify(error, "/out/records") is None
    assert write_errors.classify(error, "/data/corpus.txt") is not None


# The write entry points: each writes more than LIMIT bytes into `out` (a folder).
_ENTRY_SCRIPTS = {
    "checkpoint save in training (preemption.save_checkpoint)": r"""
import resource, tensorflow as tf
from bert_tf.train import preemption
v = tf.Variable(tf.zeros([200]))
manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=v), OUT, max_to_keep=3,
                                     checkpoint_name="ckpt")
preemption.save_checkpoint(manager, 1, OUT)        # small: the last good checkpoint
v2 = tf.Variable(tf.zeros([100000]))
big = tf.train.CheckpointManager(tf.train.Checkpoint(v=v, w=v2), OUT, max_to_keep=3,
                                 checkpoint_name="ckpt")
resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))
preemption.save_checkpoint(big, 2, OUT)
""",
    "export (serving.output_folder.write_folder)": r"""
from bert_tf.serving import output_folder
def write(folder):
    import os
    os.makedirs(folder)
    with open(os.path.join(folder, "saved_model.pb"), "wb") as file:
        file.write(b"x" * 4 * LIMIT)
output_folder.write_folder(OUT + "/export", write)
""",
    "data_prep output (record_writing.ShardedWriter)": r"""
from data_prep import record_writing
with record_writing.ShardedWriter([OUT + "/records-00000-of-00002",
                                   OUT + "/records-00001-of-00002"]) as writer:
    writer.write_all([b"x" * 1000] * 300)
    writer.commit(OUT + "/records-00000-of-00002.stats.json", {"instances": 300})
""",
    "atomic file writes (fileio.atomic_output: configs, vocab, results)": r"""
from bert_tf.io import fileio
fileio.write_text_atomic(OUT + "/eval_results.txt", "x" * 4 * LIMIT)
""",
}
# Every module that saves checkpoints or SavedModels itself, and how it routes a write
# error through the rule; a new one fails the table test until it is added.
WRITE_ENTRY_POINTS = {
    "bert_tf/train/preemption.py": "save_checkpoint: CheckpointNotSaved",
    "bert_tf/text_models/run_folder.py": "write_errors.reported around manager.save",
    "bert_tf/weights/checkpoints.py": "save_google_checkpoint: classify",
    "bert_tf/serving/export.py": "output_folder.write_folder",
    "bert_tf/serving/huggingface.py": "output_folder.write_folder",
    "bert_tf/serving/peft.py": "output_folder.write_folder",
    "bert_tf/serving/tfhub.py": "output_folder.write_folder",
    "data_prep/vocab_extension.py": "inside extend_vocab_run.write_model_folder: classify",
}
_SAVES = re.compile(r"\.save\(checkpoint_number|raw_ops\.SaveV2|tf\.saved_model\.save\("
                    r"|checkpoint\.save\(|save_weights\(|save_file\(")


def test_every_module_that_saves_is_in_the_table():
    saving = {str(path.relative_to(REPO)) for folder in ("bert_tf", "data_prep")
              for path in (REPO / folder).rglob("*.py")
              if _SAVES.search(path.read_text(encoding="utf-8"))}
    assert saving <= set(WRITE_ENTRY_POINTS), \
        f"route these writes through write_errors.classify: {sorted(saving - set(WRITE_ENTRY_POINTS))}"


def _run_limited(script, out):
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() returns EFBIG instead
        if "resource.setrlimit" not in script:
            resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))
    code = f"OUT, LIMIT = {str(out)!r}, {LIMIT}\n" + script
    runner = ("import sys\nfrom bert_tf.io import write_errors\ntry:\n"
              + "".join("    " + line + "\n" for line in code.splitlines()) +
              "except write_errors.WriteFailed as error:\n"
              "    print('ONE LINE:', error); sys.exit(3)\n")
    return subprocess.run([sys.executable, "-c", runner], cwd=REPO, preexec_fn=limit,
                          capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))


@pytest.mark.parametrize("entry", sorted(_ENTRY_SCRIPTS))
def test_a_file_too_large_ends_in_one_line_and_leaves_nothing_half_written(tmp_path,
                                                                           entry):
    out = tmp_path / "out"
    out.mkdir()
    result = _run_limited(_ENTRY_SCRIPTS[entry], out)
    assert result.returncode == 3, result.stdout + result.stderr[-3000:]
    line = result.stdout.strip().splitlines()[-1]
    assert write_errors.FILE_TOO_LARGE in line and str(out) in line, line
    left = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    assert not any(".tmp-" in name or "_temp" in name or "tempstate" in name
                   for name in left), left
    if entry.startswith("checkpoint"):
        assert "resume from " + str(out / "ckpt-1") in line
        assert sorted(n for n in left if n.startswith("ckpt-")) == [
            "ckpt-1.data-00000-of-00001", "ckpt-1.index"]
    else:
        assert left == [], left  # the finished-looking output is not there


def test_a_folder_that_cannot_be_written_is_named(tmp_path):
    from bert_tf.io import fileio
    from data_prep import record_writing
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        if os.access(folder, os.W_OK):  # root writes anyway
            pytest.skip("running as root: chmod does not stop writes")
        with pytest.raises(write_errors.WriteFailed, match="read-only / permission denied"):
            fileio.write_text_atomic(str(folder / "config.json"), "{}")
        with pytest.raises(write_errors.WriteFailed, match=re.escape(str(folder / "r"))):
            record_writing.ShardedWriter([str(folder / "r")])
    finally:
        folder.chmod(0o755)


def test_a_read_only_file_system_is_named_at_each_entry_point(tmp_path, monkeypatch):
    """Where chmod cannot stop root, EROFS is raised by the write itself."""
    from bert_tf.io import fileio
    from bert_tf.serving import output_folder

    def read_only(folder):
        raise OSError(errno.EROFS, "Read-only file system", folder)
    with pytest.raises(write_errors.WriteFailed, match="read-only"):
        output_folder.write_folder(str(tmp_path / "export"), read_only)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(write_errors.WriteFailed, match="read-only"):
        with fileio.atomic_output(str(tmp_path / "a.txt")) as temporary:
            read_only(temporary)
    assert list(tmp_path.iterdir()) == []


def test_a_resharded_rerun_replaces_every_file_of_the_earlier_run(tmp_path, caplog):
    from absl import logging as absl_logging
    from data_prep import pretraining_pipeline, record_writing
    absl_logging.set_verbosity(absl_logging.INFO)
    prefix = str(tmp_path / "wiki.tfrecord")
    for count in (4, 2, 1, 3):
        paths = pretraining_pipeline.resolve_output_files(prefix, count)
        with record_writing.ShardedWriter(paths) as writer:
            writer.write_all([b"r"] * 8)
            writer.commit(paths[0] + pretraining_pipeline.STATS_SUFFIX, {"n": count})
        left = sorted(p.name for p in tmp_path.iterdir())
        assert left == sorted([os.path.basename(p) for p in paths]
                              + [os.path.basename(paths[0]) + ".stats.json"]), left
        assert json.loads(pathlib.Path(paths[0] + ".stats.json").read_text()) == {"n": count}
    assert "Removed 5 file(s) of an earlier run into this output name" in caplog.text


def test_an_evaluation_rerun_says_it_replaces_the_results(tmp_path, caplog):
    from absl import logging as absl_logging
    from bert_tf.runs import task as task_lib
    absl_logging.set_verbosity(absl_logging.INFO)
    task_lib.write_results(str(tmp_path), "eval", {"eval_accuracy": 0.9})
    assert "Replacing" not in caplog.text
    task_lib.write_results(str(tmp_path), "eval", {"eval_accuracy": 0.5})
    assert f"Replacing {tmp_path}/eval_results.txt and {tmp_path}/eval_results.json" \
        in caplog.text


def test_a_resharded_beam_rerun_replaces_the_earlier_shards(tmp_path, vocab_file):
    pytest.importorskip("apache_beam")
    from test_beam_pipeline import run_beam, settings_for, shards
    from test_create_pretraining_data import write_corpus
    corpus = write_corpus(tmp_path / "corpus.txt", 30, seed=5)
    prefix = tmp_path / "beam.tfrecord"
    (tmp_path / "beam.tfrecord-00000-of-00004.stats.json").write_text("{}")  # local tool's
    for count in (3, 2, 0):
        stats = run_beam(settings_for(corpus, prefix, vocab_file, shards=count))
        assert shards(prefix) == stats["output_files"], (count, shards(prefix))
        left = {p.name for p in tmp_path.iterdir()} - {"corpus.txt"}
        assert left == {os.path.basename(p) for p in stats["output_files"]} | {
            "beam.tfrecord.stats.json"}, left


def test_a_flag_that_overrides_the_config_file_is_logged_with_both_values(tmp_path,
                                                                          caplog):
    from absl import flags
    from bert_tf.commands import command_line
    from bert_tf.cli.run_classifier import OPTIONS as ClassifierOptions
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"options": {"max_seq_length": 128, "task_name": "sst-2",
                                              "output_dir": str(tmp_path)}}))
    flag_values = flags.FlagValues()
    command_line.define_flags(ClassifierOptions, "write_errors_test", flag_values)
    flag_values(["prog", f"--config={config}", "--max_seq_length=64",
                 "--task_name=sst-2"])
    options = command_line.options_from_flags(ClassifierOptions, flag_values)
    assert options.max_seq_length == 64
    assert f"--max_seq_length=64 overrides 128 of --config={config}" in caplog.text
    assert "task_name" not in caplog.text  # the same value overrides nothing
