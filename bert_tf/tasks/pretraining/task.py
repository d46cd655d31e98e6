"""Pre-training: masked LM + next-sentence prediction on TFRecords of
create_pretraining_data, through the shared training loop (`bert_tf.train.loop`).

    result = pretraining.run_pretraining(PretrainingOptions(...), strategy)

`output_dir` receives training checkpoints (`ckpt-<step>.*`, resumed from on restart),
TensorBoard summaries (`train/`), the final model in the google-research layout
(`bert_model.ckpt.*` + `bert_config.json`, a valid `init_checkpoint` for fine-tuning)
and, with `do_eval`, `eval_results.txt`.

`init_checkpoint` (a released folder, or a previous run's output_dir) starts a fresh
output_dir from its weights, the masked-LM and next-sentence heads included when it has
them; `restore_optimizer_state` (phase 2 of a two-phase pre-training) adds the previous
run's optimizer moments (`bert_tf.train.warm_start`).
"""

import os

import tensorflow as tf

from bert_tf.io import fileio
from bert_tf.configs import BertConfig
from bert_tf.models import (BertEncoder, BertPretrainer, next_sentence_weights,
                            pretraining_losses)
from bert_tf.runs import driver, run_context
from bert_tf.tasks.pretraining.options import PretrainingOptions
from bert_tf.runs.task import Task, TrainData
from bert_tf.train import distribute, loop, masking, records, step_hook, warm_start
from bert_tf.weights import checkpoints


def check_options(options, context):
    """Rejects what the options cannot do with this run's strategy, config and records,
    naming the flag, before anything runs (the options' own values: `options.check()`).

    Returns:
      The `MaskingOptions` of --dynamic_masking (None without it), built once.
    """
    strategy = context.strategy
    if options.do_train:
        distribute.check_global_batch_size(
            options.train_batch_size, strategy, "train_batch_size",
            micro_batches=options.gradient_accumulation_steps)
    if options.do_eval:
        distribute.check_global_batch_size(options.eval_batch_size, strategy,
                                           "eval_batch_size")
    if options.init_checkpoint:
        check_init_checkpoint_config(options.init_checkpoint, context.config)
    if options.do_train and options.restore_optimizer_state:
        check_restore_optimizer_state(options)
    input_files = records.expand_input_files(options.input_file)
    if all(tf.io.gfile.stat(path).length == 0 for path in input_files):
        raise ValueError(f"--input_file={options.input_file}: the {len(input_files)} "
                         "file(s) it names are empty (no records); write records with "
                         "create_pretraining_data first")
    check_record_ids(input_files, options.input_compression, context.config.vocab_size)
    return _check_masking_options(options, context.vocab)


# Records read per file by check_record_ids: enough to catch another vocab's records.
ID_CHECK_RECORDS = 64


def check_record_ids(input_files, compression, vocab_size):
    """Refuses records whose token ids reach past the config's vocab_size (another
    vocab's records), from the first records of each file, before any work: the first
    step would fail on them with an op error.

    Raises:
      ValueError: naming the file, the largest id and the config's vocab_size.
    """
    compression = records.resolve_compression(input_files, compression)
    for path in input_files:
        for _, example in records._read_examples(  # pylint: disable=protected-access
                path, compression, ID_CHECK_RECORDS):
            features = example.features.feature
            ids = [i for name in ("input_ids", "masked_lm_ids") if name in features
                   for i in features[name].int64_list.value]
            if ids and max(ids) >= vocab_size:
                raise ValueError(
                    f"{path}: token id {max(ids)} is outside the model's vocab_size "
                    f"{vocab_size} (bert_config.json): the records were made with another "
                    "vocab; make them with this model's vocab.txt, or give the config of "
                    "their model")


def _check_masking_options(options, vocab):
    """Dynamic masking needs records without masks and a vocab; the reverse too.
    Returns the `MaskingOptions` (None without --dynamic_masking)."""
    carry_masks = records.records_carry_masks(options.input_file, options.input_compression)
    if options.dynamic_masking and carry_masks:
        raise ValueError(
            f"--dynamic_masking: the records of --input_file={options.input_file} already "
            "carry masks (masked_lm_positions) made at data time; write them with "
            "create_pretraining_data --masking=none, or drop --dynamic_masking")
    if not options.dynamic_masking and not carry_masks:
        raise ValueError(
            f"--input_file={options.input_file}: the records carry no masks (made with "
            "create_pretraining_data --masking=none); add --dynamic_masking and "
            "--vocab_file to draw them during training")
    if not options.dynamic_masking:
        return None
    if vocab is None:
        raise ValueError("--dynamic_masking needs --vocab_file (the ids of [MASK], the "
                         "special tokens and the ## word pieces)")
    return masking_options(options, vocab)  # raises on a bad combination, naming it


def check_init_checkpoint_config(init_checkpoint, config):
    """Compares the bert_config.json beside `init_checkpoint` (if any) with `config`."""
    path = fileio.file_beside(init_checkpoint, "bert_config.json")
    if not path:
        return
    theirs = BertConfig.from_json_file(path).to_dict()
    ours = config.to_dict()
    shape_fields = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                    "intermediate_size", "max_position_embeddings", "type_vocab_size")
    differ = [f"{k}: {theirs[k]} there, {ours[k]} in --bert_config_file"
              for k in shape_fields if theirs[k] != ours[k]]
    if differ:
        raise ValueError(f"--init_checkpoint={init_checkpoint} does not match the config "
                         f"({path}): " + "; ".join(differ))


def check_restore_optimizer_state(options):
    """--restore_optimizer_state needs the previous phase's output_dir (with optimizer
    state) as --init_checkpoint, and an output_dir of its own."""
    init_checkpoint = options.init_checkpoint
    if not init_checkpoint:
        raise ValueError("--restore_optimizer_state needs --init_checkpoint (the output_dir "
                         "of the previous pre-training phase)")
    folder = init_checkpoint if os.path.isdir(init_checkpoint) else os.path.dirname(
        init_checkpoint)
    if os.path.abspath(folder) == os.path.abspath(options.output_dir):
        raise ValueError(
            f"--restore_optimizer_state: --output_dir={options.output_dir} is the folder of "
            f"--init_checkpoint={init_checkpoint}; the new phase needs an output_dir of its "
            "own (in that one, the run would resume the previous phase instead)")
    warm_start.optimizer_state_checkpoint(init_checkpoint)  # raises, naming it


def pretraining_metrics(features, outputs):
    """The original's eval metrics as (values, weights) for `loop.evaluate`.

    Packed rows: one next-sentence value per packed sequence, empty slots weighted 0.
    Without a next-sentence head: the masked-LM metrics and the loss only.
    """
    logits = tf.cast(outputs["masked_lm_logits"], tf.float32)  # [B, P, V]
    ids = tf.cast(features["masked_lm_ids"], tf.int32)  # [B, P]
    weights = tf.cast(features["masked_lm_weights"], tf.float32)  # [B, P]
    mlm_correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), ids),
                          tf.float32)
    metrics = {
        "masked_lm_accuracy": (mlm_correct, weights),
        "masked_lm_loss": (tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=ids, logits=logits), weights),
        "loss": pretraining_losses(features, outputs)["total_loss"],
    }
    if "next_sentence_logits" in outputs:
        nsp_logits = tf.reshape(tf.cast(outputs["next_sentence_logits"], tf.float32),
                                [-1, 2])  # [N, 2]
        labels = tf.reshape(tf.cast(features["next_sentence_labels"], tf.int32), [-1])
        nsp_weights = next_sentence_weights(features)  # [N]
        nsp_correct = tf.cast(tf.equal(tf.argmax(nsp_logits, -1, output_type=tf.int32),
                                       labels), tf.float32)
        metrics["next_sentence_accuracy"] = (nsp_correct, nsp_weights)
        metrics["next_sentence_loss"] = (tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=nsp_logits), nsp_weights)
    return metrics


def pretraining_losses_and_accuracy(features, outputs):
    """The training losses, plus the two accuracies so that progress logs show them."""
    losses = dict(pretraining_losses(features, outputs))
    for name, value in pretraining_metrics(features, outputs).items():
        if name.endswith("_accuracy"):
            values, weights = value if isinstance(value, tuple) else (value, tf.ones_like(value))
            losses[name] = tf.reduce_sum(values * weights) / tf.maximum(
                tf.reduce_sum(weights), 1e-5)
    return losses


def masking_options(options, vocab):
    """The `MaskingOptions` of --dynamic_masking (None without it), from the run's vocab
    (a `VocabFile`, read once).

    Raises:
        ValueError: naming the flag, for a vocab without [MASK]/[CLS]/[SEP] or a bad
            combination (e.g. --max_ngram_size > 1 without --whole_word_masking).
    """
    if not options.dynamic_masking:
        return None
    try:
        return masking.MaskingOptions.from_vocab(
            vocab.tokens, vocab.path,
            max_predictions_per_seq=options.max_predictions_per_seq,
            masked_lm_prob=options.masked_lm_prob,
            whole_word_masking=options.whole_word_masking,
            max_ngram_size=options.max_ngram_size)
    except ValueError as error:
        raise ValueError(f"--dynamic_masking: {error}") from None


def dataset_fn_for(options, is_training, mask_options=None):
    """The pre-training `dataset_fn` of the options (train or eval batches)."""
    batch = options.train_batch_size if is_training else options.eval_batch_size

    def dataset_fn(input_context):
        return records.pretraining_dataset(
            options.input_file, options.max_seq_length, options.max_predictions_per_seq,
            batch, is_training, input_context, compression=options.input_compression,
            seed=options.seed, drop_remainder=is_training, masking_options=mask_options,
            max_sequences_per_row=(options.max_sequences_per_row
                                   if options.pack_sequences else None),
            next_sentence=options.next_sentence, packing_window=options.packing_window)
    return dataset_fn


class PretrainingTask(Task):
    """Masked LM (+ next-sentence prediction) on TFRecords of create_pretraining_data."""
    name = "pretraining"
    command = "pretraining"
    model_type = "pretrainer"
    needs_pretrained_encoder = False  # pre-training from scratch is the usual start
    needs_vocab = False
    # No feature caches; the google-research checkpoint written at the end.
    output_patterns = run_context.RUN_OUTPUT_PATTERNS + ("bert_model.ckpt*",)
    records_run_settings = False  # restoring a checkpoint checks that it fits

    def __init__(self, options: PretrainingOptions):
        super().__init__(options)
        self.mask_options = None

    def setup(self, context):
        super().setup(context)
        self.mask_options = check_options(self.options, context)

    def schedule(self, num_examples):
        return self.options.num_train_steps, self.options.num_warmup_steps

    def build_model(self):
        encoder = BertEncoder(self.context.config)
        if not self.options.next_sentence:
            # No head reads the pooler: frozen, it keeps its initial (or loaded) weights
            # instead of shrinking under weight decay with zero gradients.
            encoder.pooler.trainable = False
        return BertPretrainer(encoder, next_sentence=self.options.next_sentence,
                              name="bert_pretrainer")

    def initialize(self, model, optimizer=None):
        """The whole encoder must load; the heads when init_checkpoint has them, and the
        optimizer moments with `restore_optimizer_state` (`bert_tf.train.warm_start`)."""
        if not self.options.init_checkpoint:
            return None
        return warm_start.start_from(
            model, optimizer, self.options.init_checkpoint,
            self.options.restore_optimizer_state and optimizer is not None)

    def hooks(self):
        """The trained model is also written in the google-research layout (chief)."""
        if not distribute.is_chief(self.context.strategy):
            return []
        return [GoogleCheckpointAtEnd(os.path.join(self.options.output_dir,
                                                   "bert_model.ckpt"))]

    def loss(self, features, outputs):
        return pretraining_losses_and_accuracy(features, outputs)

    def train_data(self):
        return TrainData(dataset_fn_for(self.options, True, self.mask_options), 0,
                         self.options.train_batch_size)

    def explain_bad_input(self, error):
        """A record that tf.data cannot parse is found and named."""
        options = self.options
        records.explain_parse_error(
            options.input_file,
            records.pretraining_features(options.max_seq_length,
                                         options.max_predictions_per_seq,
                                         masked=not options.dynamic_masking,
                                         next_sentence=options.next_sentence),
            options.input_compression)

    def evaluate(self, split, runner):
        dataset_fn = dataset_fn_for(self.options, False, self.mask_options)
        model = runner.ensure_model(dataset_fn)
        results = loop.evaluate(self.context.strategy, model, dataset_fn,
                                pretraining_metrics, num_steps=self.options.max_eval_steps)
        results.pop("eval_steps")
        return results


class GoogleCheckpointAtEnd(step_hook.StepHook):
    """Writes the trained model as `bert_model.ckpt.*` + `bert_config.json` at the end
    (a valid `--init_checkpoint` of the original's scripts and every runner)."""

    def __init__(self, prefix: str):
        self.prefix = prefix

    def end(self, model) -> None:
        checkpoints.save_google_checkpoint(model, self.prefix, write_config=True)


def run_pretraining(options, strategy=None):
    """Trains and/or evaluates; returns {"train": TrainResult|None, "eval": dict|None}."""
    outcome = driver.execute(PretrainingTask(options), strategy)
    evaluation = outcome.results if options.do_eval else None
    if evaluation is not None:
        evaluation = dict(evaluation, global_step=outcome.runner.global_step)
    return {"train": outcome.runner.train_result, "eval": evaluation}
