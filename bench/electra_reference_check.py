"""Real check: ELECTRA's losses and one optimizer step, ours beside Hugging Face
transformers' ElectraForMaskedLM + ElectraForPreTraining on the very same weights, batch
and sampled replacements, dropout off (issue 36, item 3).

The model: an ELECTRA run's output_dir, or a Hugging Face export of one
(`--init_checkpoint`); else a fresh ELECTRA-Small (hidden 256, embeddings 128, 12
layers, 4 heads, intermediate 1024, the generator 1/4 as wide) on the vocab of
../shared/data/checkpoints/uncased_L-6_H-384_A-12. The batch: the first
`--batch_size` instances create_pretraining_data makes of the WikiExtractor slice
../shared/data/wiki/enwiki_wikiextractor_wiki_00 (seq 128, 20 predictions); the
replacements: drawn by our generator. The model is exported as bert-export-model
--export_format=huggingface writes it (ElectraForPreTraining, its generator in
generator/); the reference side, bench/reference_electra.py run by
`--reference_python`, loads that folder pair, shares the generator's embeddings with the
discriminator as ELECTRA trains them, and reports its losses, logits and the watched
weights after one step (plain SGD, or Adam without weight decay) on
mlm + disc_weight * rtd.

    .venv/bin/python bench/electra_reference_check.py \\
        --reference_python=/work/venv-ref/bin/python

Prints one JSON line: both sides' losses and the largest absolute differences (losses,
logits, the watched weights after the step); exits 1 when one is above `--atol`.
tests/test_electra_huggingface.py runs the same comparison on a tiny model.
"""

import argparse
import dataclasses
import json
import os
import pathlib
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from bert_tf.configs import BertConfig  # noqa: E402
from bert_tf.models import BertEncoder  # noqa: E402
from bert_tf.serving import huggingface  # noqa: E402
from bert_tf.runs import run_context  # noqa: E402
from bert_tf.tasks.electra.model import (ElectraPretrainer, electra_losses,  # noqa: E402
                                         generator_config)
from bert_tf.tasks.electra.serving import load_electra  # noqa: E402
from bert_tf.text.preprocessor import Preprocessor  # noqa: E402
from bert_tf.train import records  # noqa: E402
from bert_tf.weights import checkpoints  # noqa: E402

SHARED = REPO.parent / "shared" / "data"
RELEASED = SHARED / "checkpoints" / "uncased_L-6_H-384_A-12"
REFERENCE_SCRIPT = REPO / "bench" / "reference_electra.py"
# ELECTRA-Small's discriminator (the paper's hyperparameter table).
SMALL = dict(hidden_size=256, embedding_size=128, num_hidden_layers=12,
             num_attention_heads=4, intermediate_size=1024, max_position_embeddings=512,
             type_vocab_size=2)
NO_DROPOUT = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
# Parts of the Hugging Face names whose weights are compared after the step.
WATCHED = ("word_embeddings", "embeddings_project", "layer.1.attention.self.query.weight",
           "layer.0.output.dense", "discriminator_predictions",
           "generator_predictions.dense", "generator_predictions.LayerNorm",
           "generator_lm_head")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--init_checkpoint", default="",
                        help="An ELECTRA run's output_dir or its Hugging Face export "
                             "(default: a fresh ELECTRA-Small).")
    parser.add_argument("--vocab_file", default=str(RELEASED / "vocab.txt"))
    parser.add_argument("--text",
                        default=str(SHARED / "wiki" / "enwiki_wikiextractor_wiki_00"))
    parser.add_argument("--work_dir", default="/tmp/bert_tf_electra_reference_check")
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--optimizer", choices=("sgd", "adam"), default="sgd")
    parser.add_argument("--disc_weight", type=float, default=50.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--atol", type=float, default=1e-4)
    parser.add_argument("--reference_python", default=sys.executable,
                        help="A Python that has torch and transformers.")
    return parser.parse_args()


# ------------------------------------------------------ shared with the tiny test
def our_step(model, batch, replacements, learning_rate, disc_weight, optimizer="sgd"):
    """Our losses and outputs on `batch` with the given replacements, then one step of
    plain SGD (or Adam without weight decay) on mlm + disc_weight * rtd.

    Returns:
      (losses {name: float}, outputs {name: numpy}).
    """
    if optimizer == "sgd":
        optimizer = keras.optimizers.SGD(learning_rate=learning_rate)
    else:  # Keras adds epsilon before the bias correction, torch after: at step 1
        # torch's 1e-8 is Keras's 1e-8 * sqrt(1 - beta_2).
        optimizer = keras.optimizers.Adam(learning_rate=learning_rate, beta_2=0.999,
                                          epsilon=1e-8 * (1 - 0.999) ** 0.5)
    with tf.GradientTape() as tape:
        outputs = model(batch, training=True, replacements=replacements)
        losses = electra_losses(batch, outputs, disc_weight, 1.0)
    variables = model.trainable_variables
    gradients = tape.gradient(losses["total_loss"], variables)
    optimizer.apply_gradients(zip(gradients, variables))
    return ({key: float(value) for key, value in losses.items()},
            {key: np.asarray(value) for key, value in outputs.items()})


def exported_state(model):
    """The weights as the Hugging Face export names them, the generator's as
    `generator/<name>`."""
    return {f"{subfolder}/{name}" if subfolder else name: value
            for subfolder, (_, state) in huggingface.folder_contents(model).items()
            for name, value in state.items()}


def watched(state):
    """The names of `state` that the comparison looks at after the step."""
    return sorted(name for name in state if any(part in name for part in WATCHED))


def pretraining_request(folder, batch, replacements, learning_rate, disc_weight,
                        watch, optimizer="sgd"):
    """The request of bench/reference_electra.py for the pair exported to `folder`."""
    return {"pretraining": {
        "folder": str(folder), "batch": {key: np.asarray(value).tolist()
                                         for key, value in batch.items()},
        "replacements": np.asarray(replacements).tolist(), "gen_weight": 1.0,
        "disc_weight": disc_weight, "learning_rate": learning_rate,
        "optimizer": optimizer, "watch": list(watch)}}


def run_reference(python, request, work_dir):
    """bench/reference_electra.py's result for `request`, run by `python`.

    Raises:
      RuntimeError: with the end of its stderr, when it fails.
    """
    work_dir = pathlib.Path(work_dir)
    (work_dir / "request.json").write_text(json.dumps(request))
    result = subprocess.run([python, str(REFERENCE_SCRIPT), str(work_dir / "request.json"),
                             str(work_dir / "result.json")], capture_output=True, text=True,
                            timeout=1800, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{REFERENCE_SCRIPT} failed: {result.stderr[-3000:]}")
    return json.loads((work_dir / "result.json").read_text())


def differences(ours, theirs, losses, before, after, mask):
    """{what: largest absolute difference} of the reference's result and ours."""
    result = {key: abs(theirs[key] - losses[key])
              for key in ("masked_lm_loss", "discriminator_loss", "total_loss")}
    result["masked_lm_logits"] = float(np.abs(np.asarray(theirs["masked_lm_logits"])
                                              - ours["masked_lm_logits"]).max())
    result["discriminator_logits"] = float(np.abs(
        np.asarray(theirs["discriminator_logits"])[mask]
        - ours["discriminator_logits"][mask]).max())
    result["replaced_labels"] = int(np.sum(np.asarray(theirs["replaced"])
                                           != ours["replaced"]))
    result["after_step"] = {name: float(np.abs(np.asarray(value) - after[name]).max())
                            for name, value in theirs["after"].items()}
    result["step_size"] = {name: float(np.abs(after[name] - before[name]).max())
                           for name in theirs["after"]}
    return result


# ------------------------------------------------------------------- the real check
def starting_model(args):
    """The model of `--init_checkpoint` (else a fresh ELECTRA-Small), dropout off."""
    if args.init_checkpoint:
        config_file = run_context.resolve_config_file(None, args.init_checkpoint)
        loaded = load_electra(args.init_checkpoint, checkpoints.load_config(config_file))
        config, generator = loaded.config, loaded.generator_config
    else:
        vocab_size = len(open(args.vocab_file, encoding="utf-8").read().splitlines())
        config = BertConfig(vocab_size=vocab_size, **SMALL)
        generator, loaded = generator_config(config, 1 / 4), None
    keras.utils.set_random_seed(args.seed)
    model = ElectraPretrainer(BertEncoder(dataclasses.replace(config, **NO_DROPOUT)),
                              dataclasses.replace(generator, **NO_DROPOUT))
    model.build()
    if loaded is not None:
        model.set_weights(loaded.get_weights())
    return model


def first_instances(args, work):
    """The first `--batch_size` instances of create_pretraining_data on `--text`."""
    path = work / "instances.tfrecord"
    if not path.exists():
        subprocess.run([sys.executable, "-m", "data_prep.create_pretraining_data",
                        f"--input_file={args.text}", f"--output_file={path}",
                        f"--vocab_file={args.vocab_file}", "--do_lower_case",
                        "--max_seq_length=128", "--max_predictions_per_seq=20",
                        "--dupe_factor=1", "--masked_lm_prob=0.15", "--random_seed=12345"],
                       cwd=REPO, check=True)
    spec = records.pretraining_features(128, 20)
    rows = [tf.io.parse_single_example(serialized, spec) for serialized in
            tf.data.TFRecordDataset(str(path)).take(args.batch_size)]
    return {key: np.stack([row[key].numpy() for row in rows]).astype(
        np.float32 if key == "masked_lm_weights" else np.int32)
        for key in spec if key != "next_sentence_labels"}


def main():
    args = parse_args()
    work = pathlib.Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    model = starting_model(args)
    batch = first_instances(args, work)
    replacements = model(batch, training=False)["sampled_ids"].numpy()
    folder = huggingface.export_huggingface(model, Preprocessor(args.vocab_file, True),
                                            work / "hf", overwrite=True)
    before = exported_state(model)
    watch = watched(before)
    losses, ours = our_step(model, batch, replacements, args.learning_rate,
                            args.disc_weight, args.optimizer)
    theirs = run_reference(args.reference_python, pretraining_request(
        folder, batch, replacements, args.learning_rate, args.disc_weight, watch,
        args.optimizer), work)["pretraining"]
    found = differences(ours, theirs, losses, before, exported_state(model),
                        batch["input_mask"].astype(bool))
    worst = max([value for key, value in found.items() if isinstance(value, float)]
                + list(found["after_step"].values()))
    print(json.dumps({"ours": losses, "theirs": {key: theirs[key] for key in losses},
                      "max_abs_difference": found, "worst": worst,
                      "transformers": theirs["transformers"], "torch": theirs["torch"],
                      "replaced_tokens": int(np.sum(ours["replaced"])),
                      "batch": list(batch["input_ids"].shape)}))
    sys.exit(0 if worst <= args.atol and found["replaced_labels"] == 0 else 1)


if __name__ == "__main__":
    main()
