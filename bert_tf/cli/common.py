"""What every bert_tf command shares: the fine-tuning flags, options built from flags,
help that lists the command's own flags, and the one place where a user error becomes a
one-line message (the traceback only with `--verbose`)."""

import dataclasses
import os
import sys

from absl import app, flags

flags.DEFINE_bool("verbose", False,
                  "On an error, show the full traceback instead of a one-line message.")

# Errors that bad input raises (a missing or unreadable file, a value out of range, a
# config that does not fit); anything else is a bug and keeps its traceback.
USER_ERRORS = (ValueError, FileNotFoundError, FileExistsError, NotADirectoryError,
               IsADirectoryError, PermissionError)


# (name, kind, default, help) of the flags every fine-tuning runner defines; kind is the
# absl DEFINE_<kind>; `define_common_flags` defines them.
COMMON_FLAGS = [
    ("output_dir", "string", None, "Folder for checkpoints, cached features and results."),
    ("bert_config_file", "string", None,
     "bert_config.json of the pre-trained model (default: the one in init_checkpoint)."),
    ("init_checkpoint", "string", None,
     "Pre-trained model: a released folder, a TF1 checkpoint prefix or a Hugging Face "
     "folder."),
    ("vocab_file", "string", None, "WordPiece vocab.txt (default: the one in "
                                   "init_checkpoint)."),
    ("do_lower_case", "bool", True, "Lower-case the input (uncased models)."),
    ("max_seq_length", "integer", 128, "Sub-tokens per sequence, [CLS]/[SEP] included."),
    ("do_train", "bool", False, "Fine-tune on the training data."),
    ("do_eval", "bool", False, "Evaluate on the dev data; writes eval_results.txt."),
    ("do_predict", "bool", False, "Predict the test data."),
    ("train_batch_size", "integer", 32, "Training batch size (all replicas)."),
    ("eval_batch_size", "integer", 8, "Evaluation batch size."),
    ("predict_batch_size", "integer", 8, "Prediction batch size."),
    ("learning_rate", "float", 5e-5, "Peak learning rate."),
    ("num_train_epochs", "float", 3.0, "Epochs over the training data."),
    ("warmup_proportion", "float", 0.1, "Fraction of steps with linear warm-up."),
    ("save_checkpoints_steps", "integer", 1000, "Checkpoint every N steps (and at the end)."),
    ("keep_checkpoint_max", "integer", 5, "Newest checkpoints to keep."),
    ("steps_per_loop", "integer", 100, "Steps per host loop (progress is logged per loop)."),
    ("optimizer", "string", "adamw", "adamw or lamb (as run_pretraining's --optimizer)."),
    ("weight_decay_rate", "float", 0.01, "Decoupled weight decay (not LayerNorm, bias)."),
    ("lr_schedule", "string", "linear",
     "linear: warm-up, then linear decay from the peak to 0 (as Hugging Face "
     "transformers); google_research: the original's decay over all steps, which the "
     "warm-up overrides (rate after warm-up: peak * (1 - warmup_proportion))."),
    ("adam_bias_correction", "bool", True,
     "AdamW: bias-corrected moments, epsilon added after the correction (as torch). "
     "false: the original AdamWeightDecayOptimizer, without bias correction."),
    ("gradient_accumulation_steps", "integer", 1, "Micro-batches per optimizer step."),
    ("mixed_precision", "string", "none", "none, bfloat16 or float16 (loss scaling)."),
    ("use_xla", "bool", False, "XLA-compile the training step."),
    ("distribution_strategy", "string", "one_device",
     "one_device, mirrored, multi_worker_mirrored or tpu."),
    ("num_gpus", "integer", 0, "GPUs for one_device/mirrored (0: CPU)."),
    ("tpu_name", "string", None, "Cloud TPU name (distribution_strategy=tpu)."),
    ("tpu_zone", "string", None, "Cloud TPU zone."),
    ("gcp_project", "string", None, "GCP project of the Cloud TPU."),
    ("dropout_rate", "float", 0.1, "Dropout before the task head."),
    ("head_initializer", "string", "normal",
     "Distribution of the new task head's kernel, scale r = initializer_range: normal "
     "(N(0, r), as Hugging Face transformers) or truncated_normal (the original: N(0, r) "
     "cut at 2r, whose std is 0.88 r; on short fine-tuning recipes it reaches lower "
     "accuracy)."),
    ("seed", "integer", None, "Random seed (weights of the head, dropout, shuffling)."),
    ("export_dir", "string", None, "Also export a SavedModel for TF Serving here."),
    ("allow_case_mismatch", "bool", False,
     "Run even when do_lower_case does not fit the model (an uncased vocab or an "
     "uncased_* folder with do_lower_case=false, or a cased one with true)."),
    ("trim_padding", "bool", None, "Cut each batch to its longest sequence (default: on "
                                   "unless distribution_strategy=tpu or use_xla)."),
    ("pack_sequences", "bool", False,
     "Training rows pack up to --max_sequences_per_row examples each (best-fit bin "
     "packing over windows of 1,024 examples): less padding, the same per-example "
     "logits and loss. Each example attends only to itself and its position ids "
     "restart at 0. --train_batch_size still counts examples: a batch is that many "
     "examples divided by the examples a row (logged at the start), so the steps and "
     "schedule of a recipe do not change. For short rows (GLUE sentences, NER); "
     "evaluation and prediction stay unpacked."),
    ("max_sequences_per_row", "integer", 3,
     "With --pack_sequences: at most this many examples share a row (>= 1)."),
    # The original scripts' spellings, so that their commands keep working.
    ("iterations_per_loop", "integer", None, "Alias of steps_per_loop (original name)."),
    ("use_tpu", "bool", False, "Original flag: the same as distribution_strategy=tpu."),
    ("master", "string", None, "Unused (TF1 TPU master); kept for old commands."),
    ("num_tpu_cores", "integer", 8, "Unused: TPUStrategy finds the cores itself."),
]


def options_from_values(options_class, values, **overrides):
    """Builds `options_class` from an object with one attribute per field (absl FLAGS).

    The original scripts' spellings are honoured: `use_tpu` selects the TPU strategy and
    `iterations_per_loop`, when set, is `steps_per_loop`.
    """
    kwargs = {field.name: getattr(values, field.name)
              for field in dataclasses.fields(options_class) if hasattr(values, field.name)}
    if getattr(values, "use_tpu", False):
        kwargs["distribution_strategy"] = "tpu"
    if getattr(values, "iterations_per_loop", None):
        kwargs["steps_per_loop"] = values.iterations_per_loop
    kwargs.update(overrides)
    if kwargs.get("mixed_precision") in ("", "none", "None", "float32"):
        kwargs["mixed_precision"] = None
    return options_class(**kwargs)


def define_common_flags(defaults=None, exclude=()):
    """Defines COMMON_FLAGS (minus `exclude`), with `defaults` overriding the defaults."""
    defaults = defaults or {}
    for name, kind, default, help_text in COMMON_FLAGS:
        if name not in exclude:
            getattr(flags, f"DEFINE_{kind}")(name, defaults.get(name, default), help_text)


def run_reporting_user_errors(program, run_fn, *args):
    """Runs `run_fn(*args)`; a user error ends the process with one line naming it."""
    try:
        return run_fn(*args)
    except (app.UsageError,) + USER_ERRORS as error:
        if flags.FLAGS.verbose:
            raise
        sys.exit(f"{program}: error: {error}")


def run_command(module, run_fn, required=()):
    """Runs a command: parses the flags, checks them, calls `run_fn()`.

    `--help` shows `module`'s docstring and its own flags (absl lists the flags of the
    `__main__` module only, and behind a console script such as `bert-run-squad`
    `__main__` is a generated wrapper). An unexpected argument, a missing `required`
    flag or a user error in `run_fn` ends the process with one line.

    Args:
      module: the command's module (`sys.modules[__name__]`).
      run_fn: does the work, reading the parsed flags.
      required: names of flags that must be set.
    """
    spec = getattr(module, "__spec__", None)  # under `python -m`, __name__ is __main__
    program = (spec.name if spec else module.__name__).rsplit(".", 1)[-1]
    if program == "__main__":  # a script run by path: data_prep/build_vocab.py
        program = os.path.splitext(os.path.basename(sys.argv[0]))[0]
    main_module = sys.modules["__main__"]
    if main_module is not module:
        main_module.__doc__ = module.__doc__
    for module_name in (module.__name__, __name__):
        for flag in flags.FLAGS.get_flags_for_module(module_name):
            flags.FLAGS.register_flag_by_module(sys.argv[0], flag)

    def check_and_run(argv):
        if len(argv) > 1:
            raise app.UsageError(f"unexpected arguments {argv[1:]}; flags are written "
                                 "--name=value")
        missing = [name for name in required if getattr(flags.FLAGS, name) in (None, "")]
        if missing:
            raise app.UsageError(", ".join(f"--{name}" for name in missing) +
                                 (" is" if len(missing) == 1 else " are") + " required")
        run_fn()

    def main(argv):  # returns None: app.run would exit with any value returned
        run_reporting_user_errors(program, check_and_run, argv)

    app.run(main)

