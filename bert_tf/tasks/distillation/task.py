"""Task distillation: a smaller student learns a fine-tuned run's outputs
(`bert-train --task=distillation --teacher=<run folder> --output_dir=...`).

    results = registry.run("distillation", DistillationOptions(
        teacher="/runs/sst2", student_layers="3", output_dir="/runs/sst2_student",
        do_train=True, do_eval=True))

The student is an ordinary run of the teacher's task: its folder's config.json names the
teacher's task, model type and labels (and its export settings), its checkpoints are
those of the task's head model, so evaluation, prediction and `bert-export-model` read
it as they read the teacher's. The teacher's task object (`self.task`, built from the
teacher run's options) reads the data, scores and exports; this task adds the teacher,
the student's start and the distillation losses (`objective`).
"""

import dataclasses
import os

import tensorflow as tf
from absl import logging

from bert_tf.io import fileio
from bert_tf.runs import task as task_lib
from bert_tf.tasks.distillation import data as distill_data
from bert_tf.tasks.distillation import objective as objective_lib
from bert_tf.tasks.distillation import rows as rows_lib
from bert_tf.tasks.distillation import student as student_lib
from bert_tf.tasks.distillation import teacher as teacher_lib
from bert_tf.tasks.distillation.options import DistillationOptions
from bert_tf.text import input_layout_graph
from bert_tf.train import loop


def _same_or_unset(given, value, flag, origin) -> None:
    """Refuses a flag given with another value than the one the run must use."""
    if given not in (None, "") and given != value:
        raise ValueError(f"--{flag}={given}: distillation uses {origin} ({value!r}); leave "
                         f"--{flag} out")


class DistillationTask(task_lib.Task):
    """A student of the teacher run's task (see the module docstring)."""
    command = "distillation"
    needs_pretrained_encoder = False  # the student starts from the teacher or its own

    def __init__(self, options: DistillationOptions):
        super().__init__(options)
        self.given = options
        self.teacher_run, self.task, self.layers, self.mapping = None, None, None, None
        self.error, self.teacher_model, self.objective = None, None, None
        self.transfer_texts = None  # the --transfer_file's texts, read by check_inputs
        try:
            self._read_teacher()
        except (ValueError, FileNotFoundError) as error:
            self.error = error  # refused by check_inputs, the driver's first task check

    def _read_teacher(self):
        """Reads --teacher, the student's config, and builds the teacher's task."""
        options = self.given
        teacher = self.teacher_run = teacher_lib.read_teacher(options.teacher)
        depth = teacher.config.num_hidden_layers
        if not options.student_config_file:
            self.layers = teacher_lib.student_layers(options.student_layers, depth)
        config = teacher_lib.student_config(options.student_config_file, self.layers,
                                            teacher)
        self.options = dataclasses.replace(
            options, max_seq_length=teacher.max_seq_length,
            do_lower_case=teacher.do_lower_case,
            vocab_file=options.vocab_file or teacher.vocab_file,
            init_checkpoint=options.student_init_checkpoint,
            bert_config_file=options.student_config_file)
        self.options.bert_config = config  # what the run context takes as the config
        self.mapping = teacher_lib.layer_mapping(options.layer_map,
                                                 config.num_hidden_layers, depth)
        self.student_config = config
        self.task = teacher.task_class(teacher_lib.teacher_task_options(self.options,
                                                                       teacher))
        self.model_options = self.task.options  # the student is a run of this task
        for name in ("name", "model_type", "text_pair", "result_names",
                     "train_eval_split"):
            setattr(self, name, getattr(self.task, name))
        self.output_patterns = tuple(self.task.output_patterns) + (
            distill_data.RECORD_NAME, distill_data.TRANSFER_RECORD_NAME)
        self.objective = objective_lib.Objective(
            options,  # its DistillationLosses fields
            objective_lib.Head.of_model_type(
                self.model_type, is_regression=bool(teacher.options.get("is_regression")),
                multi_label=bool(teacher.options.get("multi_label"))),
            self.mapping)

    @property
    def labels(self):
        return self.task.labels if self.task is not None else None

    @property
    def settings(self):
        """The run's loss options (`DistillationLosses`'s fields)."""
        return self.objective.settings

    def check_inputs(self) -> None:
        """Refuses, before any work: a teacher that is not a fine-tuned run, a student
        that does not fit it, settings that contradict it, a transfer file that is not
        text; then the teacher task's own checks."""
        if self.error is not None:
            raise self.error
        given, teacher = self.given, self.teacher_run
        _same_or_unset(given.max_seq_length, teacher.max_seq_length, "max_seq_length",
                       "the teacher's")
        _same_or_unset(given.do_lower_case, teacher.do_lower_case, "do_lower_case",
                       "the teacher's")
        _same_or_unset(given.init_checkpoint, given.student_init_checkpoint,
                       "init_checkpoint", "--student_init_checkpoint")
        _same_or_unset(given.bert_config_file, given.student_config_file,
                       "bert_config_file", "--student_config_file")
        self._check_student()
        if given.transfer_file:
            self._check_transfer_file()
        self.task.check_inputs()

    def _check_student(self) -> None:
        """Refuses a student the losses cannot compare, or a random one not allowed."""
        given, config = self.given, self.student_config
        if (self.settings.attention_weight > 0 and config.num_attention_heads
                != self.teacher_run.config.num_attention_heads):
            raise ValueError(
                f"--attention_weight={given.attention_weight}: the student has "
                f"{config.num_attention_heads} attention heads, the teacher "
                f"{self.teacher_run.config.num_attention_heads}; attention maps compare "
                "head by head (use a student config with the teacher's heads)")
        if given.student_config_file and not given.student_init_checkpoint and \
                not given.allow_random_encoder:
            raise ValueError(f"--student_config_file={given.student_config_file} without "
                             "--student_init_checkpoint: the student would start random; "
                             "pass --student_init_checkpoint, or --allow_random_encoder")

    @property
    def rows(self):
        """How the teacher task's rows are made (`rows.TEACHER_ROWS`), None for a task
        whose features are not fixed-length rows (SQuAD)."""
        return rows_lib.TEACHER_ROWS.get(self.teacher_run.saved.get("command"))

    def _check_transfer_file(self) -> None:
        path = self.given.transfer_file
        if self.rows is None:
            raise ValueError(f"--transfer_file: only a {' or '.join(rows_lib.TEACHER_ROWS)} "
                             "teacher labels a transfer set; this teacher is a "
                             f"{self.teacher_run.saved.get('command')} run")
        fileio.existing_file(path, "transfer_file")
        # Read now: a file that is not text, or holds none, is refused before any work.
        self.transfer_texts = self.rows.read_transfer(self.task, path)

    def setup(self, context) -> None:
        """The teacher task reads its data; its labels must be the teacher's."""
        super().setup(context)
        self.task.setup(context)
        wanted = self.teacher_run.saved.get("labels")
        if wanted is not None and self.task.labels != wanted:
            raise ValueError(f"the data's labels {self.task.labels} are not the teacher's "
                             f"{wanted} ({self.teacher_run.saved['path']}): the student "
                             "learns the teacher's outputs label by label")
        if self.options.do_train:  # built before the training step traces the loss
            self.teacher()

    def build_model(self):
        """The task's head model on the student's config; `Traced*` when the losses
        compare hidden states or attention maps."""
        model = self.task.build_model()
        if not self.settings.traces:
            return model
        width = self.teacher_run.config.hidden_size
        return student_lib.traced(
            model, self._attention_layers()[0] if self.settings.attention_weight else (),
            width if self.settings.hidden_weight and width != model.config.hidden_size
            else None)

    def _attention_layers(self):
        return objective_lib.attention_layers(self.settings.attention_loss, self.mapping)

    def teacher(self):
        """The teacher's model, built once in the run's strategy and restored from the
        teacher's checkpoint (traced when the losses need it)."""
        if self.teacher_model is not None:
            return self.teacher_model
        own = self.task.context
        self.task.context = dataclasses.replace(own, config=self.teacher_run.config)
        try:
            with self.context.strategy.scope():
                model = self.task.build_model()
                if self.settings.traces:
                    layers = (self._attention_layers()[1] if self.settings.attention_weight
                              else ())
                    model = student_lib.traced(model, layers)
                model.build()
        finally:
            self.task.context = own
        step = loop.restore_model(model, self.teacher_run.checkpoint)
        logging.info("Teacher: %s (global_step %d, %d layers)", self.teacher_run.checkpoint,
                     step, self.teacher_run.config.num_hidden_layers)
        self.teacher_model = model
        return model

    def initialize(self, model, optimizer=None):
        """The student of --student_layers copies the teacher's weights; one of
        --student_config_file starts from --student_init_checkpoint."""
        if self.layers is None:
            return super().initialize(model, optimizer)
        student_lib.copy_layers(self.teacher(), model, self.layers)
        logging.info("Student: the teacher's embeddings, layers %s, pooler and head",
                     ",".join(map(str, self.layers)))
        return None

    def teacher_outputs(self, features):
        """The teacher's outputs on a batch (no gradient; traced when needed)."""
        teacher = self.teacher()
        outputs = (teacher.traced_outputs(features, training=False) if self.settings.traces
                   else teacher(features, training=False))
        return tf.nest.map_structure(tf.stop_gradient, dict(outputs))

    def train_data(self) -> task_lib.TrainData:
        """The teacher task's training rows, with the transfer set's and the teacher's
        cached outputs (`distill_train.tf_record`); for a task whose features are not
        rows, its own training data (the teacher runs on every batch)."""
        options, rows = self.options, self.rows
        if rows is None:
            if options.cache_teacher:
                logging.info("The teacher runs on every batch (the %s features are not "
                             "rows its outputs could join)", self.name)
            return self.task.train_data()
        cache = (options.cache_teacher and not self.settings.traces
                 and self.objective.needs_teacher)
        if not self.objective.needs_teacher:
            logging.info("No loss reads the teacher (only --hard_weight): it does not run")
        elif options.cache_teacher and not cache:
            logging.info("The teacher runs on every batch: hidden states and attention "
                         "maps are not cached (S x H values per layer and example)")
        path = os.path.join(options.output_dir, distill_data.RECORD_NAME)
        key = {"train": rows.train_key(self.task), "teacher": self.teacher_run.checkpoint,
               "cached": cache, "transfer": fileio.file_digest(options.transfer_file)
               if options.transfer_file else None}
        count, reused = task_lib.cached_features(path, key, lambda target: self._write_rows(
            target, cache))
        logging.info("Distillation rows: %d (%s %s)", count,
                     "reused from" if reused else "written to", path)
        return task_lib.TrainData(
            distill_data.distill_dataset_fn(
                path, options.train_batch_size, options.seed, options.use_trim_padding,
                rows.token_features, self.objective.head.per_token),
            count, options.train_batch_size)

    def _write_rows(self, path, cache) -> int:
        """The training rows (+ transfer rows), with the teacher's outputs if `cache`."""
        rows = self.rows.train_rows(self.task)
        if self.options.transfer_file:
            texts = self.transfer_texts
            if texts is None:  # check_inputs did not run (a library call)
                texts = self.rows.read_transfer(self.task, self.options.transfer_file)
            rows += self.rows.transfer_rows(self.task, texts)
            logging.info("Transfer set: %d texts of %s", len(texts),
                         self.options.transfer_file)
        teacher_fn = None
        if cache:
            call = tf.function(self._teacher_on_longest, reduce_retracing=True)
            teacher_fn = lambda features: {name: value.numpy()  # noqa: E731
                                           for name, value in call(features).items()}
        return distill_data.write_distill_record(path, rows, teacher_fn,
                                                 self.options.eval_batch_size)

    def _teacher_on_longest(self, features):
        """The teacher's outputs on a batch cut to its longest row (short sentences cost
        their tokens, not max_seq_length), per-position outputs padded back to [B, S]."""
        positions = tf.shape(features["input_ids"])[1]
        outputs = self.teacher()(input_layout_graph.trim_to_longest(features),
                                 training=False)
        head = self.objective.head
        return {name: distill_data.pad_positions(value, positions)
                if name in head.per_token + head.over_positions else value
                for name, value in outputs.items()}

    def loss(self, features, outputs):
        """The weighted distillation losses (`objective`); the task's own loss counts
        the labelled rows only."""
        cached = distill_data.cached_teacher_outputs(features)
        teacher = cached if cached or not self.objective.needs_teacher else \
            self.teacher_outputs(features)
        hard = tf.constant(0.0)
        if self.settings.hard_weight > 0:
            hard = self._hard_loss(features, outputs)
        return self.objective(features, outputs, teacher, hard)

    def _hard_loss(self, features, outputs):
        """The teacher task's loss on the rows with gold labels (0 without any)."""
        def task_loss(batch, out):
            value = self.task.loss(batch, out)
            return value["total_loss"] if isinstance(value, dict) else value
        if distill_data.LABELLED not in features:
            return task_loss(features, outputs)
        labelled = tf.cast(features[distill_data.LABELLED], tf.bool)
        keep = lambda tree: {name: tf.boolean_mask(value, labelled)  # noqa: E731
                             for name, value in tree.items()
                             if isinstance(value, tf.Tensor) and value.shape.rank}
        return tf.cond(tf.reduce_any(labelled),
                       lambda: tf.cast(task_loss(keep(features), keep(outputs)), tf.float32),
                       lambda: tf.constant(0.0))

    def hooks(self) -> list:
        return self.task.hooks()

    def evaluate(self, split, runner) -> dict:
        return self.task.evaluate(split, runner)

    def metric_names(self) -> list:
        return self.task.metric_names()

    def explain_bad_input(self, error) -> None:
        self.task.explain_bad_input(error)

    def export_options(self) -> dict:
        return self.task.export_options()
