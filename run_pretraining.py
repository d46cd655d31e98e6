"""Pre-trains BERT (masked LM + next-sentence prediction) on TFRecords.

Flags are those of google-research/bert's run_pretraining.py, plus
`distribution_strategy`, `num_gpus`, `optimizer`, `weight_decay_rate`,
`gradient_accumulation_steps`, `mixed_precision`, `use_xla`, `keep_checkpoint_max`,
`input_compression`. `--use_tpu` means `--distribution_strategy=tpu`.

`output_dir` receives training checkpoints (`ckpt-<step>.*`, resumed from on restart),
TensorBoard summaries (`train/`), the final model in the google-research layout
(`bert_model.ckpt.*` + `bert_config.json`, a valid `--init_checkpoint` for fine-tuning)
and, with `--do_eval`, `eval_results.txt`.
"""

import dataclasses
import json
import os

import keras
import tensorflow as tf
from absl import app, flags, logging

from bert_tf.train import distribute
from bert_tf.train import records
from bert_tf.train import optimization
from bert_tf.train import loop
from bert_tf.configs import BertConfig
from bert_tf.models import BertEncoder, BertPretrainer, pretraining_losses

FLAGS = flags.FLAGS
flags.DEFINE_string("bert_config_file", None, "bert_config.json of the model to train.")
flags.DEFINE_string("input_file", None,
                    "Input TFRecord files (comma-separated globs; gzip or not).")
flags.DEFINE_string("output_dir", None, "Where checkpoints, summaries and results go.")
flags.DEFINE_string("init_checkpoint", None,
                    "Initial weights (google-research checkpoint prefix or folder, or a "
                    "Hugging Face folder); used only when output_dir has no checkpoint.")
flags.DEFINE_integer("max_seq_length", 128, "Sequence length of the records.")
flags.DEFINE_integer("max_predictions_per_seq", 20, "Masked positions per record.")
flags.DEFINE_bool("do_train", False, "Train.")
flags.DEFINE_bool("do_eval", False, "Evaluate on input_file.")
flags.DEFINE_integer("train_batch_size", 32, "Global batch per optimizer step.")
flags.DEFINE_integer("eval_batch_size", 8, "Global eval batch.")
flags.DEFINE_float("learning_rate", 5e-5, "Peak learning rate.")
flags.DEFINE_integer("num_train_steps", 100000, "Optimizer steps.")
flags.DEFINE_integer("num_warmup_steps", 10000, "Linear warm-up steps.")
flags.DEFINE_integer("save_checkpoints_steps", 1000, "Checkpoint every this many steps.")
flags.DEFINE_integer("iterations_per_loop", 1000, "Steps per compiled loop call.")
flags.DEFINE_integer("max_eval_steps", 100, "Maximum eval batches.")
flags.DEFINE_bool("use_tpu", False, "Same as --distribution_strategy=tpu.")
flags.DEFINE_string("tpu_name", None, "Cloud TPU name or grpc:// address.")
flags.DEFINE_string("tpu_zone", None, "GCE zone of the Cloud TPU.")
flags.DEFINE_string("gcp_project", None, "GCP project of the Cloud TPU.")
flags.DEFINE_string("master", None, "Unused (TF1 TPU master); kept for old commands.")
flags.DEFINE_integer("num_tpu_cores", 8, "Unused: TPUStrategy finds the cores itself.")
flags.DEFINE_enum("distribution_strategy", "one_device", list(distribute.STRATEGIES),
                  "tf.distribute strategy.")
flags.DEFINE_integer("num_gpus", 0, "GPUs for one_device / mirrored.")
flags.DEFINE_enum("optimizer", "adamw", list(optimization.OPTIMIZER_TYPES), "Optimizer.")
flags.DEFINE_float("weight_decay_rate", 0.01, "Decoupled weight decay.")
flags.DEFINE_enum("lr_schedule", "linear", list(optimization.LR_SCHEDULES),
                  "linear: warm-up, then linear decay from the peak to 0 (as Hugging Face "
                  "transformers); google_research: the original's linear decay over all "
                  "steps, which the warm-up overrides (rate after warm-up: "
                  "peak * (1 - num_warmup_steps / num_train_steps)).")
flags.DEFINE_bool("adam_bias_correction", True,
                  "AdamW: bias-corrected moments with epsilon added after the correction "
                  "(as torch). false: the original AdamWeightDecayOptimizer, which has no "
                  "bias correction.")
flags.DEFINE_integer("gradient_accumulation_steps", 1,
                     "Split each replica's batch into this many micro-batches.")
flags.DEFINE_enum("mixed_precision", "none", ["none", "bfloat16", "float16"],
                  "Mixed precision (float16 uses dynamic loss scaling).")
flags.DEFINE_bool("use_xla", False, "XLA-compile the forward and backward pass.")
flags.DEFINE_integer("keep_checkpoint_max", 5, "Training checkpoints kept.")
flags.DEFINE_enum("input_compression", "auto", list(records.COMPRESSION_TYPES),
                  "TFRecord compression (auto detects gzip).")
flags.DEFINE_integer("seed", None, "Seed for shuffling and initialisation.")


@dataclasses.dataclass
class PretrainingOptions:
    """Everything `run_pretraining` needs; the flags map 1:1 onto it."""
    bert_config: BertConfig
    input_file: str
    output_dir: str
    do_train: bool = True
    do_eval: bool = False
    init_checkpoint: str = None
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    train_batch_size: int = 32
    eval_batch_size: int = 8
    learning_rate: float = 5e-5
    num_train_steps: int = 100000
    num_warmup_steps: int = 10000
    save_checkpoints_steps: int = 1000
    iterations_per_loop: int = 1000
    max_eval_steps: int = 100
    optimizer: str = "adamw"
    weight_decay_rate: float = 0.01
    lr_schedule: str = "linear"
    adam_bias_correction: bool = True
    gradient_accumulation_steps: int = 1
    mixed_precision: str = None
    use_xla: bool = False
    keep_checkpoint_max: int = 5
    input_compression: str = "auto"
    seed: int = None


def check_options(options, strategy):
    """Rejects options that cannot work, naming the flag, before anything runs."""
    if not (options.do_train or options.do_eval):
        raise ValueError("at least one of --do_train or --do_eval must be set")
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
    records.expand_input_files(options.input_file)


def check_init_checkpoint_config(init_checkpoint, config):
    """Compares the bert_config.json beside `init_checkpoint` (if any) with `config`."""
    folder = init_checkpoint if os.path.isdir(init_checkpoint) else os.path.dirname(
        init_checkpoint)
    path = os.path.join(folder, "bert_config.json")
    if not os.path.isfile(path):
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
    """The original's eval metrics as (values, weights) for `loop.evaluate`."""
    logits = tf.cast(outputs["masked_lm_logits"], tf.float32)  # [B, P, V]
    ids = tf.cast(features["masked_lm_ids"], tf.int32)  # [B, P]
    weights = tf.cast(features["masked_lm_weights"], tf.float32)  # [B, P]
    nsp_logits = tf.cast(outputs["next_sentence_logits"], tf.float32)  # [B, 2]
    labels = tf.reshape(tf.cast(features["next_sentence_labels"], tf.int32), [-1])  # [B]
    mlm_correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), ids),
                          tf.float32)
    nsp_correct = tf.cast(tf.equal(tf.argmax(nsp_logits, -1, output_type=tf.int32), labels),
                          tf.float32)
    return {
        "masked_lm_accuracy": (mlm_correct, weights),
        "masked_lm_loss": (tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=ids, logits=logits), weights),
        "next_sentence_accuracy": nsp_correct,
        "next_sentence_loss": tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=nsp_logits),
        "loss": pretraining_losses(features, outputs)["total_loss"],
    }


def pretraining_losses_and_accuracy(features, outputs):
    """The training losses, plus the two accuracies so that progress logs show them."""
    losses = dict(pretraining_losses(features, outputs))
    for name, value in pretraining_metrics(features, outputs).items():
        if name.endswith("_accuracy"):
            values, weights = value if isinstance(value, tuple) else (value, tf.ones_like(value))
            losses[name] = tf.reduce_sum(values * weights) / tf.maximum(
                tf.reduce_sum(weights), 1e-5)
    return losses


def _dataset_fn(options, is_training):
    batch = options.train_batch_size if is_training else options.eval_batch_size

    def dataset_fn(input_context):
        return records.pretraining_dataset(
            options.input_file, options.max_seq_length, options.max_predictions_per_seq,
            batch, is_training, input_context, compression=options.input_compression,
            seed=options.seed, drop_remainder=is_training)
    return dataset_fn


def _model_fn(options):
    def model_fn():
        if options.seed is not None:
            keras.utils.set_random_seed(options.seed)
        return BertPretrainer(BertEncoder(options.bert_config), name="bert_pretrainer")
    return model_fn


def write_eval_results(results, path):
    """`key = value` lines sorted by key, as the original; temp file then rename."""
    tmp = f"{path}.tmp-{os.getpid()}"
    with tf.io.gfile.GFile(tmp, "w") as writer:
        for key in sorted(results):
            writer.write(f"{key} = {results[key]}\n")
    tf.io.gfile.rename(tmp, path, overwrite=True)


def run_pretraining(options, strategy):
    """Trains and/or evaluates; returns {"train": TrainResult|None, "eval": dict|None}."""
    check_options(options, strategy)
    result = {"train": None, "eval": None}
    model = None
    if options.do_train:
        optimizer_fn = lambda: optimization.create_optimizer(  # noqa: E731
            options.learning_rate, options.num_train_steps, options.num_warmup_steps,
            optimizer_type=options.optimizer, weight_decay_rate=options.weight_decay_rate,
            lr_schedule=options.lr_schedule,
            adam_bias_correction=options.adam_bias_correction)
        result["train"] = _train_explaining_bad_records(options, lambda: loop.train(
            strategy, _model_fn(options), pretraining_losses_and_accuracy,
            _dataset_fn(options, True),
            optimizer_fn=optimizer_fn, output_dir=options.output_dir,
            num_train_steps=options.num_train_steps,
            global_batch_size=options.train_batch_size,
            save_checkpoints_steps=options.save_checkpoints_steps,
            keep_checkpoint_max=options.keep_checkpoint_max,
            steps_per_loop=options.iterations_per_loop,
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
                                        options.max_predictions_per_seq),
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
        write_eval_results(results, path)
    logging.info("***** Eval results *****\n%s", json.dumps(results, indent=1, sort_keys=True))
    return results


def options_from_flags():
    """PretrainingOptions from the absl flags."""
    for name in ("bert_config_file", "input_file", "output_dir"):
        if not getattr(FLAGS, name):
            raise app.UsageError(f"--{name} is required")
    fields = {f.name for f in dataclasses.fields(PretrainingOptions)} - {"bert_config"}
    values = {name: getattr(FLAGS, name) for name in fields}
    values["mixed_precision"] = None if FLAGS.mixed_precision == "none" else \
        FLAGS.mixed_precision
    return PretrainingOptions(bert_config=BertConfig.from_json_file(FLAGS.bert_config_file),
                              **values)


def main(argv):
    del argv
    options = options_from_flags()
    strategy_name = "tpu" if FLAGS.use_tpu else FLAGS.distribution_strategy
    strategy = distribute.get_strategy(strategy_name, num_gpus=FLAGS.num_gpus,
                                       tpu_name=FLAGS.tpu_name, tpu_zone=FLAGS.tpu_zone,
                                       gcp_project=FLAGS.gcp_project)
    logging.info("Strategy %s with %d replica(s)", type(strategy).__name__,
                 strategy.num_replicas_in_sync)
    run_pretraining(options, strategy)


def run_main():
    app.run(main)


if __name__ == "__main__":
    run_main()
