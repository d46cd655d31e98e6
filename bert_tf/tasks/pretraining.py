"""Pre-training: masked LM + next-sentence prediction on TFRecords of
create_pretraining_data, through the shared training loop (`bert_tf.train.loop`).

    result = pretraining.run_pretraining(PretrainingOptions(...), strategy)

`output_dir` receives training checkpoints (`ckpt-<step>.*`, resumed from on restart),
TensorBoard summaries (`train/`), the final model in the google-research layout
(`bert_model.ckpt.*` + `bert_config.json`, a valid `init_checkpoint` for fine-tuning)
and, with `do_eval`, `eval_results.txt`.
"""

import dataclasses
import os
from typing import Optional

import keras
import tensorflow as tf
from absl import logging

from bert_tf import fileio
from bert_tf.configs import BertConfig
from bert_tf.models import (BertEncoder, BertPretrainer, next_sentence_weights,
                            pretraining_losses)
from bert_tf.tasks import base
from bert_tf.text import vocab as vocab_io
from bert_tf.train import (distribute, loop, masking, optimization, records,
                           sequence_packing)


@dataclasses.dataclass(kw_only=True)
class PretrainingOptions(base.TrainingOptions):
    """Everything `run_pretraining` needs; the flags map 1:1 onto it."""
    bert_config: BertConfig
    input_file: str
    do_train: bool = True
    do_eval: bool = False
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    num_train_steps: int = 100000
    num_warmup_steps: int = 10000
    steps_per_loop: int = 1000
    max_eval_steps: int = 100
    input_compression: str = "auto"
    # Rows packing several instances (see bert_tf.train.sequence_packing).
    pack_sequences: bool = False
    max_sequences_per_row: int = 3
    packing_window: int = 1024
    # Masks drawn in the pipeline each epoch (records of --masking=none).
    dynamic_masking: bool = False
    vocab_file: Optional[str] = None
    masked_lm_prob: float = 0.15
    whole_word_masking: bool = False
    max_ngram_size: int = 1
    next_sentence: bool = True


def check_options(options, strategy):
    """Rejects options that cannot work, naming the flag, before anything runs."""
    if not (options.do_train or options.do_eval):
        raise ValueError("at least one of --do_train or --do_eval must be set")
    fileio.check_output_dir(options.output_dir, "--output_dir")
    config = options.bert_config
    if options.max_seq_length > config.max_position_embeddings:
        raise ValueError(f"--max_seq_length={options.max_seq_length} exceeds the model's "
                         f"max_position_embeddings={config.max_position_embeddings}")
    if options.do_train:
        optimization.validate_schedule(options.learning_rate, options.num_train_steps,
                                       options.num_warmup_steps)
        distribute.check_global_batch_size(
            options.train_batch_size, strategy, "train_batch_size",
            micro_batches=options.gradient_accumulation_steps)
    if options.do_eval:
        distribute.check_global_batch_size(options.eval_batch_size, strategy,
                                           "eval_batch_size")
    if options.init_checkpoint:
        check_init_checkpoint_config(options.init_checkpoint, config)
    input_files = records.expand_input_files(options.input_file)
    if all(tf.io.gfile.stat(path).length == 0 for path in input_files):
        raise ValueError(f"--input_file={options.input_file}: the {len(input_files)} "
                         "file(s) it names are empty (no records); write records with "
                         "create_pretraining_data first")
    if options.pack_sequences:
        try:
            sequence_packing.check_max_sequences_per_row(options.max_sequences_per_row)
        except ValueError as error:
            raise ValueError(f"--{error}") from None
    _check_masking_options(options)


def _check_masking_options(options):
    """Dynamic masking needs records without masks and a vocab; the reverse too."""
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
        for flag, value, default in (("whole_word_masking", options.whole_word_masking, False),
                                     ("max_ngram_size", options.max_ngram_size, 1)):
            if value != default:
                raise ValueError(f"--{flag} applies to masks drawn in training: it needs "
                                 "--dynamic_masking (records without masks)")
    elif not options.vocab_file:
        raise ValueError("--dynamic_masking needs --vocab_file (the ids of [MASK], the "
                         "special tokens and the ## word pieces)")
    else:
        masking_options(options)  # raises on a bad combination, naming it


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


def masking_options(options):
    """The `MaskingOptions` of --dynamic_masking (None without it).

    Raises:
        ValueError: naming the flag, for a vocab without [MASK]/[CLS]/[SEP] or a bad
            combination (e.g. --max_ngram_size > 1 without --whole_word_masking).
    """
    if not options.dynamic_masking:
        return None
    vocab = vocab_io.load_vocab(options.vocab_file)
    try:
        return masking.MaskingOptions.from_vocab(
            vocab, options.vocab_file,
            max_predictions_per_seq=options.max_predictions_per_seq,
            masked_lm_prob=options.masked_lm_prob,
            whole_word_masking=options.whole_word_masking,
            max_ngram_size=options.max_ngram_size)
    except ValueError as error:
        raise ValueError(f"--dynamic_masking: {error}") from None


def _dataset_fn(options, is_training):
    batch = options.train_batch_size if is_training else options.eval_batch_size
    mask_options = masking_options(options)

    def dataset_fn(input_context):
        return records.pretraining_dataset(
            options.input_file, options.max_seq_length, options.max_predictions_per_seq,
            batch, is_training, input_context, compression=options.input_compression,
            seed=options.seed, drop_remainder=is_training, masking_options=mask_options,
            max_sequences_per_row=(options.max_sequences_per_row
                                   if options.pack_sequences else None),
            next_sentence=options.next_sentence, packing_window=options.packing_window)
    return dataset_fn


def _model_fn(options):
    def model_fn():
        if options.seed is not None:
            keras.utils.set_random_seed(options.seed)
        encoder = BertEncoder(options.bert_config)
        if not options.next_sentence:
            # No head reads the pooler: frozen, it keeps its initial (or loaded) weights
            # instead of shrinking under weight decay with zero gradients.
            encoder.pooler.trainable = False
        return BertPretrainer(encoder, next_sentence=options.next_sentence,
                              name="bert_pretrainer")
    return model_fn


def run_pretraining(options, strategy):
    """Trains and/or evaluates; returns {"train": TrainResult|None, "eval": dict|None}."""
    check_options(options, strategy)
    result = {"train": None, "eval": None}
    model = None
    if options.do_train:
        optimizer_fn = base.optimizer_builder(options, options.num_train_steps,
                                              options.num_warmup_steps)
        result["train"] = _train_explaining_bad_records(options, lambda: loop.train(
            strategy, _model_fn(options), pretraining_losses_and_accuracy,
            _dataset_fn(options, True),
            optimizer_fn=optimizer_fn, output_dir=options.output_dir,
            num_train_steps=options.num_train_steps,
            global_batch_size=options.train_batch_size,
            save_checkpoints_steps=options.save_checkpoints_steps,
            keep_checkpoint_max=options.keep_checkpoint_max,
            steps_per_loop=options.steps_per_loop,
            gradient_accumulation_steps=options.gradient_accumulation_steps,
            mixed_precision=options.mixed_precision, use_xla=options.use_xla,
            init_checkpoint=options.init_checkpoint,
            google_checkpoint_prefix=os.path.join(options.output_dir, "bert_model.ckpt")))
        model = result["train"].model
    if options.do_eval:
        step = result["train"].global_step if result["train"] else None
        result["eval"] = _evaluate(options, strategy, model, step)
    return result


def _train_explaining_bad_records(options, train_fn):
    """Runs `train_fn`; a record that tf.data cannot parse is found and named."""
    try:
        return train_fn()
    except (tf.errors.InvalidArgumentError, tf.errors.DataLossError) as error:
        logging.error("Training failed (%s); scanning the input files for a bad record",
                      error.message.splitlines()[0])
        records.explain_parse_error(
            options.input_file,
            records.pretraining_features(options.max_seq_length,
                                         options.max_predictions_per_seq,
                                         masked=not options.dynamic_masking,
                                         next_sentence=options.next_sentence),
            options.input_compression)
        raise


def _evaluate(options, strategy, model, global_step):
    if model is None:
        with loop.dtype_policy(options.mixed_precision):
            model = loop.build_model(
                strategy, _model_fn(options),
                _dataset_fn(options, False)(None).element_spec)
        latest = tf.train.latest_checkpoint(options.output_dir)
        if latest:
            global_step = loop.restore_model(model, latest)
        elif options.init_checkpoint:
            loop.initialize_from_checkpoint(model, options.init_checkpoint)
            global_step = 0
        else:
            raise ValueError(f"--do_eval: no checkpoint in --output_dir={options.output_dir} "
                             "and no --init_checkpoint")
    results = loop.evaluate(strategy, model, _dataset_fn(options, False),
                            pretraining_metrics, num_steps=options.max_eval_steps)
    results["global_step"] = global_step
    results.pop("eval_steps")
    path = os.path.join(options.output_dir, "eval_results.txt")
    if distribute.is_chief(strategy):
        tf.io.gfile.makedirs(options.output_dir)
        logging.info("***** Eval results *****")
        base.write_eval_results(path, results)
    return results
