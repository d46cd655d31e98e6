"""The choices and checks of the training options, without TensorFlow: the command
line's `--help` and the options' checks (`bert_tf.runs.options`) read them; the modules
that train import them from here (`optimization`, `distribute`, `loop`,
`sequence_packing`).
"""

import numbers

# tf.distribute strategies (`bert_tf.train.distribute.get_strategy`).
STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored", "tpu")

OPTIMIZER_TYPES = ("adamw", "lamb")
# "linear": warm-up, then linear decay from the peak (transformers); "google_research":
# the original's decay over all steps, overridden during warm-up.
LR_SCHEDULES = ("linear", "google_research")

MIXED_PRECISION = (None, "none", "bfloat16", "float16")

# Compression of TFRecord files (auto: from the gzip magic bytes; `records`).
COMPRESSION_TYPES = ("auto", "none", "GZIP", "ZLIB")


def check_layerwise_lr_decay(decay, name="layerwise_lr_decay"):
    """Raises ValueError, naming `name`, unless `decay` is in (0, 1]."""
    if isinstance(decay, bool) or not isinstance(decay, numbers.Real) \
            or not 0 < decay <= 1:
        raise ValueError(f"{name} must be in (0, 1] (1: off; ELECTRA used 0.8 to 0.9), "
                         f"got {decay!r}")


def check_max_sequences_per_row(max_sequences_per_row):
    """Raises ValueError, with the reason, for a `max_sequences_per_row` below 1."""
    if isinstance(max_sequences_per_row, bool) or int(max_sequences_per_row) < 1:
        raise ValueError(
            f"max_sequences_per_row={max_sequences_per_row!r}: a packed row must hold at "
            "least one sequence (1 is the same as no packing); use 2 or 3")


def validate_schedule(init_lr, num_train_steps, num_warmup_steps):
    """Raises ValueError naming the argument when the schedule cannot work."""
    if not init_lr > 0:
        raise ValueError(f"learning_rate must be > 0, got {init_lr}")
    if isinstance(num_train_steps, bool) or int(num_train_steps) != num_train_steps \
            or num_train_steps <= 0:
        raise ValueError(f"num_train_steps must be a positive integer, got {num_train_steps}")
    if int(num_warmup_steps) != num_warmup_steps or num_warmup_steps < 0:
        raise ValueError(
            f"num_warmup_steps must be an integer >= 0, got {num_warmup_steps}")
    if num_warmup_steps > num_train_steps:
        raise ValueError(
            f"num_warmup_steps ({num_warmup_steps}) must not exceed num_train_steps "
            f"({num_train_steps}): the learning rate would never finish warming up")
