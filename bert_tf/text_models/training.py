"""`TextModel`: what every text model shares: Keras's `fit` / `evaluate` / `predict` on raw
text with the commands' recipe, `save` as a run folder, `export` in every format.

Text in (see `bert_tf.text_models.inputs`) is checked, batched, preprocessed in `tf.data`
and cut per batch to its longest row; token dicts, or datasets of them, go to Keras's own
methods unchanged. A model `compile`d by its user keeps that compilation; otherwise
`fit` compiles the commands' optimizer (`bert_tf.train.optimization.create_optimizer`,
defaults of `bert_tf.runs.options`) sized to the run.
"""

import dataclasses
import os
import tempfile

import keras
import tensorflow as tf
from absl import logging

from bert_tf import library_logs
from bert_tf import options as options_lib
from bert_tf.runs import export_checkpoint, run_context
from bert_tf.runs import options as task_options
from bert_tf.text_models import inputs, run_folder
from bert_tf.train import optimization
from bert_tf.weights import checkpoints


Recipe = options_lib.compose(
    "Recipe", task_options.TrainStep, task_options.Optimizer, task_options.EpochSchedule,
    doc="What `fit` trains with: the fine-tuning commands' options of the same names.")


class TextModel(keras.Model):
    """A task model of `bert_tf.models` with its `Preprocessor` (see the module docstring).

    Subclasses give `model_type`, `task_model_argument` (their constructor's name for
    the task model), `targets(y, n)`, `default_loss_and_metrics()`,
    `outputs_of(predictions)` and `run_description()`.
    """

    model_type = None
    task_model_argument = "task_model"

    def __init__(self, task_model, preprocessor, trained_from=None, **kwargs):
        super().__init__(**kwargs)
        self.task_model = task_model
        self.preprocessor = preprocessor
        self.trained_from = trained_from
        self.recipe = None  # the Recipe of the last fit on text
        self._compiled_here = False

    def get_config(self):
        config = super().get_config()
        config[self.task_model_argument] = keras.saving.serialize_keras_object(
            self.task_model)
        config.update(preprocessor=keras.saving.serialize_keras_object(self.preprocessor),
                      trained_from=self.trained_from)
        return config

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        for name in (cls.task_model_argument, "preprocessor"):
            config[name] = keras.saving.deserialize_keras_object(config[name])
        return cls(**config)

    @staticmethod
    def build_task_model(model_cls, path, trained_run, seed, head):
        """`model_cls` loaded from `path`: whole from a fine-tuned run of it
        (`trained_run`, its config), else its encoder (any checkpoint) and a new head."""
        library_logs.show_info_logs()
        if seed is not None:
            keras.utils.set_random_seed(seed)
        if not trained_run:
            # A new head starts as the commands' (--head_initializer's default).
            head = dict(head, head_initializer=task_options.TaskHead().head_initializer)
            return checkpoints.from_pretrained(model_cls, path, **head)
        config_file = run_context.resolve_config_file(None, path)
        model = checkpoints.build_model(model_cls, checkpoints.load_config(config_file),
                                        **head)
        run_folder.restore_trained(model, path)
        return model

    # ------------------------------------------------------------------ Keras, on text
    def fit(self, x=None, y=None, validation_data=None, batch_size=None, epochs=None,
            learning_rate=None, seed=None, **kwargs):
        """Trains on texts (or pairs) and labels, or as Keras's `fit` on token dicts.

        Args:
          x: Texts: a list, numpy array or pandas column; pairs: a tuple of two.
          y: One label per text (a class name, or a number for a regressor).
          validation_data: (x, y) of the same kinds, scored after each epoch.
          batch_size, epochs, learning_rate: The recipe (default: the commands').
          seed: Shuffling seed (default: a new order each run).
          **kwargs: Keras's `fit` arguments (`callbacks`, `verbose`, ...).
        """
        if not is_text(x):
            return super().fit(x, y, validation_data=validation_data, batch_size=batch_size,
                               epochs=epochs or 1, **kwargs)
        recipe = Recipe(do_train=True, **given(train_batch_size=batch_size,
                                                num_train_epochs=epochs,
                                                learning_rate=learning_rate))
        recipe.check()
        train, num_examples = self.training_batches(
            x, y, recipe.train_batch_size, shuffle_seed=True if seed is None else seed)
        # Cached: scored after every epoch, its rows are preprocessed once.
        validation = (self._checked_batches(validation_data, "validation_data",
                                            recipe.train_batch_size)[0].cache()
                      if validation_data else None)
        # The commands' schedule: epochs x examples / batch size steps of full batches.
        steps = max(1, int(num_examples / recipe.train_batch_size * recipe.num_train_epochs))
        epochs = max(1, round(recipe.num_train_epochs))
        if self._compiled_here or not self.compiled:
            self._compile_recipe(recipe, steps)
        train = train.repeat()
        logging.info("Training %s: %d examples, %d steps (%d warm-up) of %d",
                     type(self).__name__, num_examples, steps,
                     int(steps * recipe.warmup_proportion), recipe.train_batch_size)
        kwargs.setdefault("shuffle", False)  # the dataset shuffles itself
        history = super().fit(train, validation_data=validation, epochs=epochs,
                              steps_per_epoch=max(1, steps // epochs), **kwargs)
        self.recipe, self.trained_from = recipe, "fit"
        return history

    def evaluate(self, x=None, y=None, batch_size=None, **kwargs):
        """The loss and metrics on texts and labels (a dict), or Keras's `evaluate`."""
        if not is_text(x):
            return super().evaluate(x, y, batch_size=batch_size, **kwargs)
        self._check_trained("evaluate")
        if not self.compiled:
            self._compile_recipe(Recipe(), 1)
        kwargs.setdefault("return_dict", True)
        batches = self._checked_batches((x, y), "x", batch_size or 32)[0]
        return super().evaluate(batches, **kwargs)

    def predict(self, x, batch_size=None, **kwargs):
        """The answers for texts (see the subclass's `outputs_of`), or Keras's `predict`."""
        if not is_text(x):
            return super().predict(x, batch_size=batch_size, **kwargs)
        self._check_trained("predict")
        return self.predictions(x, inputs.check_batch_size(batch_size or 32), **kwargs)

    # ------------------------------------------------------------------ text, per task
    def training_batches(self, x, y, batch_size, shuffle_seed=None):
        """(dataset of (model inputs, targets) batches, number of examples) of texts
        `x` and labels `y` (a model that takes another kind of text overrides it)."""
        columns = inputs.text_columns(x, self.preprocessor.text_pair)
        targets = self.targets(y, len(columns[0]))
        self.preprocessor.text_pair = len(columns) == 2
        return (inputs.batches(columns, targets, self.preprocessor, batch_size,
                               shuffle_seed=shuffle_seed), len(targets))

    def predictions(self, x, batch_size, **kwargs):
        """`predict`'s answer for texts `x` (see the subclass's `outputs_of`)."""
        columns = inputs.text_columns(x, self.preprocessor.text_pair)
        dataset = inputs.batches(columns, None, self.preprocessor, batch_size)
        return self.outputs_of(super().predict(dataset, **kwargs))

    def _checked_batches(self, data, name, batch_size):
        if not (isinstance(data, (tuple, list)) and len(data) == 2):
            raise ValueError(f"{name} must be (x, y): texts (or a tuple of two columns) "
                             "and their labels")
        return self.training_batches(data[0], data[1], inputs.check_batch_size(batch_size))

    def _compile_recipe(self, recipe, steps):
        loss, metrics = self.default_loss_and_metrics()
        optimizer = optimization.create_optimizer(
            recipe.learning_rate, steps, int(steps * recipe.warmup_proportion),
            optimizer_type=recipe.optimizer, weight_decay_rate=recipe.weight_decay_rate,
            lr_schedule=recipe.lr_schedule, adam_bias_correction=recipe.adam_bias_correction)
        # Rows differ in length from batch to batch: XLA would compile each length anew.
        self.compile(optimizer=optimizer, loss=loss, metrics=metrics, jit_compile=False)
        self._compiled_here = True

    def _check_trained(self, what):
        if self.trained_from is None:
            raise ValueError(f"{type(self).__name__}.{what}: the {self.model_type} head is "
                             "new (loaded from weights that hold no fine-tuned "
                             f"{self.model_type} run): fit it first, or load a fine-tuned "
                             f"{self.model_type} run folder")

    # ------------------------------------------------------------------ folders
    def save(self, folder, **kwargs):
        """Writes a run folder that every command reads (`bert-export-model
        --init_checkpoint=<folder>`, evaluation, prediction) and `from_pretrained` loads;
        a path ending in .keras is Keras's own file instead."""
        if str(folder).endswith(".keras"):
            return super().save(folder, **kwargs)
        recipe = options_lib.options_to_dict(self.recipe) if self.recipe else {}
        optimizer = getattr(self, "optimizer", None)  # set by compile
        step = int(optimizer.iterations.numpy()) if optimizer is not None else 0
        description = self.run_description()  # task, labels, export (, options)
        options = {**recipe, **description.pop("options", {}), "global_step": step}
        return run_folder.write(folder, self.task_model, self.preprocessor,
                                model_type=self.model_type, options=options, **description)

    def export(self, export_dir, export_format="saved_model", **options):
        """Exports as `bert-export-model` does (`export_format`: saved_model, tfhub,
        litert, onnx, huggingface, keras_hub, ...; `options`: its other options, e.g.
        `max_seq_length=64`). Returns the path written."""
        with tempfile.TemporaryDirectory() as folder:
            self.save(os.path.join(folder, "run"))
            settings = export_checkpoint.ExportOptions(
                init_checkpoint=os.path.join(folder, "run"), export_dir=str(export_dir),
                export_format=export_format, **options)
            return export_checkpoint.export_from_checkpoint(settings)


def given(**values):
    """The keyword arguments that were given (not None)."""
    return {name: value for name, value in values.items() if value is not None}


def is_text(x):
    """Whether `x` is raw text (texts, or a tuple of two columns) rather than model
    inputs (token dicts, tensors of ids, a tf.data.Dataset)."""
    if isinstance(x, tuple) and len(x) == 2 and not isinstance(x[0], dict):
        return is_text(x[0])
    if isinstance(x, (str, list)):
        return True
    if isinstance(x, (dict, tf.data.Dataset)) or x is None:
        return False
    if isinstance(x, tf.Tensor):
        return x.dtype == tf.string
    kind = getattr(getattr(x, "dtype", None), "kind", None)  # numpy arrays, pandas columns
    if kind is not None and kind not in "OSU":
        return False
    try:
        return len(x) > 0 and isinstance(next(iter(x)), (str, bytes))
    except TypeError:
        return False
