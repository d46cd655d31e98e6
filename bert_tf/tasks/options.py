"""The options every runner shares, declared once (default and help; the flags are
generated from these fields by `bert_tf.command_line`).

`TrainingOptions` holds what every runner (pre-training and fine-tuning) trains with;
`FinetuneOptions` adds what the fine-tuning runners share (names as the original
google-research scripts). `init_checkpoint` may be a released folder (bert_config.json,
vocab.txt, bert_model.ckpt.*), a TF1 checkpoint prefix or a Hugging Face folder;
`bert_config_file` and `vocab_file` default to the files in that folder.
"""

import dataclasses
from typing import Optional

from bert_tf.layers.dense import KERNEL_DISTRIBUTIONS
from bert_tf import options as options_lib
from bert_tf.options import option
from bert_tf.train import distribute, optimization, sequence_packing
from bert_tf.train.loop import MIXED_PRECISION


@dataclasses.dataclass(kw_only=True)
class EncoderSourceOptions:
    """What every tool that loads an encoder (runners, extraction, export) accepts."""
    allow_random_encoder: bool = option(
        False, "Use an encoder that starts partly or wholly random: fine-tuning without "
        "init_checkpoint, or a checkpoint whose encoder weights do not all load (another "
        "model, another num_hidden_layers). Refused by default.")


@dataclasses.dataclass(kw_only=True)
class TrainingOptions(EncoderSourceOptions):
    """What every runner trains with: the model to start from, batch sizes, optimizer,
    schedule, checkpoints, strategy, precision and seed."""
    output_dir: Optional[str] = option(
        None, "Folder for checkpoints, summaries, cached features and results.")
    bert_config_file: Optional[str] = option(
        None, "bert_config.json of the model (default: the one in init_checkpoint).")
    init_checkpoint: Optional[str] = option(
        None, "Initial weights: a released google-research folder, a TF1 checkpoint prefix "
        "or a Hugging Face folder; used only when output_dir has no checkpoint.")
    max_seq_length: int = option(128, "Sub-tokens per sequence, [CLS]/[SEP] included.")
    do_train: bool = option(False, "Train.")
    do_eval: bool = option(False, "Evaluate on the dev data; writes eval_results.txt.")
    train_batch_size: int = option(32, "Training batch size (all replicas).")
    eval_batch_size: int = option(8, "Evaluation batch size.")
    learning_rate: float = option(5e-5, "Peak learning rate.")
    save_checkpoints_steps: int = option(1000, "Checkpoint every N steps (and at the end).")
    keep_checkpoint_max: int = option(5, "Newest checkpoints to keep.")
    steps_per_loop: int = option(100, "Steps per host loop (progress is logged per loop).",
                                 aliases=("iterations_per_loop",))
    optimizer: str = option("adamw", "Optimizer.", choices=optimization.OPTIMIZER_TYPES)
    weight_decay_rate: float = option(0.01, "Decoupled weight decay (not LayerNorm, bias).")
    lr_schedule: str = option(
        "linear", "linear: warm-up, then linear decay from the peak to 0 (as Hugging Face "
        "transformers); google_research: the original's decay over all steps, which the "
        "warm-up overrides (rate after warm-up: peak * (1 - warmup_proportion)).",
        choices=optimization.LR_SCHEDULES)
    adam_bias_correction: bool = option(
        True, "AdamW: bias-corrected moments, epsilon added after the correction (as "
        "torch). false: the original AdamWeightDecayOptimizer, without bias correction.")
    gradient_accumulation_steps: int = option(1, "Micro-batches per optimizer step.")
    mixed_precision: str = option(
        "none", "none, bfloat16 or float16 (with loss scaling).",
        choices=[name for name in MIXED_PRECISION if name])
    use_xla: bool = option(False, "XLA-compile the training step (static shapes).")
    distribution_strategy: str = option(
        "one_device", "tf.distribute strategy.", choices=distribute.STRATEGIES,
        switches={"use_tpu": "tpu"})
    num_gpus: int = option(0, "GPUs for one_device / mirrored (0: CPU).")
    tpu_name: Optional[str] = option(
        None, "Cloud TPU name or grpc:// address ('local' on a TPU VM); "
        "distribution_strategy=tpu.", aliases=("master",))
    tpu_zone: Optional[str] = option(None, "GCE zone of the Cloud TPU.")
    gcp_project: Optional[str] = option(None, "GCP project of the Cloud TPU.")
    num_tpu_cores: Optional[int] = option(
        None, "Cores the TPU should have (the original's flag): TPUStrategy finds them "
        "itself; a warning names both numbers when they differ.")
    seed: Optional[int] = option(
        None, "Random seed (weights of new layers, dropout, shuffling).")

    def check(self) -> None:
        """Rejects values that cannot work, naming the option, before any work."""
        options_lib.check_choices(self)


@dataclasses.dataclass(kw_only=True)
class FinetuneOptions(TrainingOptions):
    """What the fine-tuning runners share (see each field's help)."""
    vocab_file: Optional[str] = option(
        None, "WordPiece vocab.txt (default: the one in init_checkpoint).")
    do_lower_case: bool = option(True, "Lower-case the input (uncased models).")
    do_predict: bool = option(False, "Predict the test data.")
    predict_batch_size: int = option(8, "Prediction batch size.")
    num_train_epochs: float = option(3.0, "Epochs over the training data.")
    warmup_proportion: float = option(0.1, "Fraction of steps with linear warm-up.")
    dropout_rate: float = option(0.1, "Dropout before the task head.")
    head_initializer: str = option(
        "normal", "Distribution of the new task head's kernel, scale r = "
        "initializer_range: normal (N(0, r), as Hugging Face transformers) or "
        "truncated_normal (the original: N(0, r) cut at 2r, whose std is 0.88 r; on short "
        "fine-tuning recipes it reaches lower accuracy).", choices=KERNEL_DISTRIBUTIONS)
    export_dir: Optional[str] = option(None, "Also export a SavedModel for TF Serving here.")
    eval_every_steps: int = option(
        0, "Score the dev data (--do_eval's; run_squad: --do_predict's predict_file, with "
        "answers) every N global steps while training, and at the last step: logged and "
        "written to TensorBoard under output_dir/eval. Loops of --steps_per_loop steps end "
        "at these steps. 0: off.")
    best_metric: Optional[str] = option(
        None, "With --eval_every_steps: keep the checkpoint of the best score of this "
        "metric (a name of eval_results.txt, e.g. eval_accuracy; the eval_ prefix may be "
        "left out) in output_dir/best/, which evaluation, prediction and export then use. "
        "Names containing 'loss' are minimised, others maximised.")
    early_stopping_patience: int = option(
        0, "With --best_metric: stop training after this many evaluations in a row without "
        "a strictly better score. 0: off.")
    allow_case_mismatch: bool = option(
        False, "Run even when do_lower_case does not fit the model (an uncased vocab or "
        "an uncased_* folder with do_lower_case=false, or a cased one with true).")
    trim_padding: Optional[bool] = option(
        None, "Cut each batch to its longest sequence (default: on unless "
        "distribution_strategy=tpu or use_xla, which need static shapes).")
    pack_sequences: bool = option(
        False, "Training rows pack up to --max_sequences_per_row examples each (best-fit "
        "bin packing over windows of 1,024 examples): less padding, the same per-example "
        "logits and loss. Each example attends only to itself and its position ids "
        "restart at 0. --train_batch_size still counts examples: a batch is that many "
        "examples divided by the examples a row (logged at the start), so the steps and "
        "schedule of a recipe do not change. For short rows (GLUE sentences, NER); "
        "evaluation and prediction stay unpacked.")
    max_sequences_per_row: int = option(
        3, "With --pack_sequences: at most this many examples share a row (>= 1).")

    def check(self) -> None:
        """Rejects sizes and rates that cannot work, before any data is read."""
        super().check()
        batch_sizes = [("train_batch_size", self.do_train), ("eval_batch_size", self.do_eval),
                       ("predict_batch_size", self.do_predict)]
        for name, used in batch_sizes:
            value = getattr(self, name)
            if used and (isinstance(value, bool) or int(value) != value or value < 1):
                raise ValueError(f"{name} must be a positive integer, got {value}")
        if self.do_train:
            steps = self.gradient_accumulation_steps
            if isinstance(steps, bool) or int(steps) != steps or steps < 1:
                raise ValueError(f"gradient_accumulation_steps must be a positive integer, "
                                 f"got {steps}")
            # Packed batches are sized in rows, made a multiple of the micro-batches.
            if not self.pack_sequences and self.train_batch_size % steps:
                raise ValueError(f"train_batch_size={self.train_batch_size} is not divisible "
                                 f"by gradient_accumulation_steps={steps}: each optimizer "
                                 "step splits its batch into that many micro-batches")
            if not self.num_train_epochs > 0:
                raise ValueError(f"num_train_epochs must be > 0, got {self.num_train_epochs}")
            if not self.learning_rate > 0:
                raise ValueError(f"learning_rate must be > 0, got {self.learning_rate}")
            if not 0 <= self.warmup_proportion <= 1:
                raise ValueError("warmup_proportion must be between 0 and 1, got "
                                 f"{self.warmup_proportion}")
        if self.pack_sequences:
            sequence_packing.check_max_sequences_per_row(self.max_sequences_per_row)
        self._check_training_evaluation()
        if self.max_seq_length < 3:
            raise ValueError(f"max_seq_length must be at least 3 ([CLS], a token, [SEP]), "
                             f"got {self.max_seq_length}")

    def _check_training_evaluation(self) -> None:
        """Refuses --best_metric / --early_stopping_patience without what they need."""
        for name in ("eval_every_steps", "early_stopping_patience"):
            value = getattr(self, name)
            if isinstance(value, bool) or int(value) != value or value < 0:
                raise ValueError(f"{name} must be an integer >= 0 (0: off), got {value!r}")
        for name in ("best_metric", "early_stopping_patience"):
            if getattr(self, name) and not self.eval_every_steps:
                raise ValueError(f"--{name} needs evaluations while training: add "
                                 "--eval_every_steps=N (score the dev data every N steps) "
                                 "and the dev data's flag (--do_eval; run_squad: "
                                 "--do_predict with a predict_file that has answers)")
        if self.early_stopping_patience and not self.best_metric:
            raise ValueError("--early_stopping_patience counts evaluations without a better "
                             "--best_metric: add --best_metric=<a metric of "
                             "eval_results.txt, e.g. eval_accuracy>")

    @property
    def use_trim_padding(self) -> bool:
        """Cut batches to their longest sequence (dynamic shapes; not for TPU / XLA)."""
        if self.trim_padding is not None:
            return bool(self.trim_padding)
        return self.distribution_strategy != "tpu" and not self.use_xla
