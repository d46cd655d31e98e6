"""Nothing is left behind by a refusal: every runner, refused, leaves its output folder as
it was (no empty folder, no run settings, no feature file), and extraction checks its
input before it loads a model."""

import os

import pytest

import test_distillation
import test_electra
import test_run_classifier
import test_run_multiple_choice
import test_run_ner
import test_run_pretraining
import test_run_squad
import test_sentence_embeddings
from bert_tf.configs import BertConfig
from bert_tf.models import BertEncoder
from bert_tf.runs import driver, feature_extraction, registry
from bert_tf.train import preemption
from harness import tiny_model, write_records, write_released_checkpoint

# Every task bert-train runs, with its test module's tiny inputs and options.
RUNNERS = {
    "classification": test_run_classifier,
    "multiple_choice": test_run_multiple_choice,
    "ner": test_run_ner,
    "squad": test_run_squad,
    "pretraining": test_run_pretraining,
    "electra": test_electra,
    "sentence_embeddings": test_sentence_embeddings,
    "distillation": test_distillation,
}


def test_every_task_is_listed_here():
    assert set(RUNNERS) == set(registry.names())


def _listing(folder):
    """{relative path: bytes} of every file under `folder` (None: no folder)."""
    if not os.path.isdir(folder):
        return None
    found = {}
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as file:
                found[os.path.relpath(path, folder)] = file.read()
    return found


def _scoring_without_a_model(module, tmp_path):
    """Options of `module`'s tiny run that score data without any model to score with."""
    module.write_tiny_inputs(tmp_path)
    options = module.tiny_options(tmp_path, do_train=False)
    step = "do_eval" if hasattr(options, "do_eval") else "do_predict"
    scored = {}
    if module is test_run_multiple_choice:  # its tiny inputs are a train file alone
        scored["eval_file"] = str(tmp_path / "data" / "train.csv")
    return module.tiny_options(tmp_path, do_train=False, **{step: True}, **scored)


@pytest.mark.slow
@pytest.mark.parametrize("existing", [False, True], ids=["new folder", "existing folder"])
@pytest.mark.parametrize("task", sorted(RUNNERS))
def test_a_refused_run_leaves_output_dir_as_it_was(task, existing, tmp_path):
    options = _scoring_without_a_model(RUNNERS[task], tmp_path)
    if existing:
        os.makedirs(options.output_dir)
        with open(os.path.join(options.output_dir, "notes.txt"), "w") as file:
            file.write("the user's own file\n")
    before = _listing(options.output_dir)
    with pytest.raises(ValueError, match="nothing to evaluate or predict with"):
        registry.run(task, options)
    assert _listing(options.output_dir) == before


def test_a_classifier_refused_after_writing_features_removes_them(tmp_path):
    """A predict-only run from an encoder without the task head writes test.tf_record
    before the head is found missing: the refusal removes it, and the folder."""
    module = test_run_classifier
    released = tmp_path / "released"
    _, config_file = module.tiny_model_files(released)
    write_released_checkpoint(
        released, tiny_model(BertEncoder, BertConfig.from_json_file(config_file), seed=0))
    module.write_sst2(tmp_path / "data")
    options = module.options(tmp_path, do_predict=True, init_checkpoint=str(released))
    with pytest.raises(ValueError, match="task head would be random"):
        registry.run("classification", options)
    assert not os.path.exists(options.output_dir)


def test_pretraining_refused_on_its_records_leaves_no_run_settings(tmp_path):
    """Records of another length are found after the run settings are written."""
    write_records(tmp_path / "records", 1, 8, seq_length=16)
    options = test_run_pretraining._options(  # pylint: disable=protected-access
        tmp_path, max_seq_length=12)
    with pytest.raises(ValueError, match="has 16 values, expected 12"):
        registry.run("pretraining", options)
    assert not os.path.exists(options.output_dir)


def test_a_run_that_saved_a_checkpoint_or_diverged_keeps_its_files(tmp_path):
    folder = tmp_path / "out"
    with pytest.raises(OSError):
        with driver.undone_on_refusal(str(folder)):
            folder.mkdir()
            (folder / "checkpoint").write_text("model_checkpoint_path: \"ckpt-5\"\n")
            raise OSError("disk full after the save")
    assert (folder / "checkpoint").exists()
    diverged = tmp_path / "diverged"
    with pytest.raises(preemption.NonFiniteLoss):
        with driver.undone_on_refusal(str(diverged)):
            diverged.mkdir()
            (diverged / "config.json").write_text("{}")
            raise preemption.NonFiniteLoss({"total_loss": float("nan")}, 3, 1, None)
    assert (diverged / "config.json").exists()


def test_extract_features_checks_its_input_before_loading_a_model(tmp_path, monkeypatch):
    def no_load(*args, **kwargs):
        raise AssertionError("the model was loaded before the input was checked")
    monkeypatch.setattr(feature_extraction, "from_pretrained", no_load)
    options = feature_extraction.ExtractOptions(
        input_file=str(tmp_path / "missing.txt"), output_file=str(tmp_path / "out.jsonl"),
        init_checkpoint=str(tmp_path / "model"))
    with pytest.raises(FileNotFoundError, match="input_file not found: .*missing.txt"):
        feature_extraction.run(options)
    assert not list(tmp_path.iterdir())


def test_extract_features_takes_the_original_tpu_flags():
    options = feature_extraction.ExtractOptions(
        input_file="in.txt", output_file="out.jsonl", init_checkpoint="model",
        distribution_strategy="tpu", tpu_name="grpc://10.0.0.2:8470", num_tpu_cores=8,
        use_one_hot_embeddings=True)
    options.check()
