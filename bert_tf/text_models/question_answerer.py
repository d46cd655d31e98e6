"""`TextQuestionAnswerer`: extractive question answering on Python text, as `bert-run-squad`.

    model = TextQuestionAnswerer.from_pretrained("uncased_L-12_H-768_A-12")
    model.fit(questions, contexts, [{"text": "Denver Broncos", "answer_start": 177}, ...])
    model.predict(["Who won?"], ["The Denver Broncos won the game."])
    # [{"answer": "Denver Broncos", "score": 0.93, "start": 4, "end": 18}]
    model.evaluate(questions, contexts, answers)   # {"exact_match": .., "f1": ..}
    model.save("squad_run")      # bert-export-model --init_checkpoint=squad_run
    TextQuestionAnswerer.from_pretrained("squad_run")   # or any bert-run-squad output_dir

Rows go through the runner's own code: its reader (`bert_tf.tasks.squad.data.squad_examples`:
words, answer_start to a word span), its windows (`features.convert_examples_to_features`:
`[CLS] question [SEP] context [SEP]`, a long context in windows `doc_stride` apart, each
padded to `max_seq_length`), its loss (`bert_tf.tasks.squad.task.span_loss`) and its
decoding (`bert_tf.tasks.squad.postprocess.best_answers`: the n-best spans over all the
windows of a question, `max_answer_length`, and a SQuAD 2.0 run's null score), so the same
recipe trains the same model as the runner, and a run folder answers as its
predictions.json.
"""

import keras
import numpy as np
import tensorflow as tf

from bert_tf.models import BertSpanLabeler
from bert_tf.runs import option_groups, run_config
from bert_tf.tasks.squad import data as squad_data
from bert_tf.tasks.squad import evaluate as squad_evaluate
from bert_tf.tasks.squad import features as squad_features
from bert_tf.tasks.squad import postprocess as squad_postprocess
from bert_tf.tasks.squad import task as squad_task
from bert_tf.tasks.squad.options import SquadData, SquadOptions
from bert_tf.text.preprocessor import Preprocessor
from bert_tf.text.tokenization import FullTokenizer
from bert_tf.text_models import inputs, qa_inputs
from bert_tf.text_models.training import TextModel, given, is_text

MODEL_TYPE = squad_task.SquadTask.model_type
# bert-run-squad's defaults (its option groups').
RUNNER = SquadOptions()
# What decodes (and windows) a question, kept in a run's config.json "options".
SETTINGS = ("doc_stride", "max_query_length", "max_answer_length", "n_best_size",
            "version_2_with_negative", "null_score_diff_threshold")
MODEL_INPUTS = ("input_ids", "input_mask", "segment_ids")
# Runs whose weights are a starting point for a new head (not another task's answers).
PRETRAINED_TYPES = ("encoder", "pretrainer", "electra")


@keras.saving.register_keras_serializable(package="bert_tf")
def span_positions_loss(targets, logits):
    """bert-run-squad's loss (`squad_task.span_loss`): `targets` [B, 2] holds each
    window's answer start and end positions, `logits` [B, 2, S] its start and end
    logits."""
    positions = tf.cast(targets, tf.int32)
    features = {"start_positions": positions[:, 0], "end_positions": positions[:, 1]}
    outputs = {"start_logits": logits[:, 0], "end_logits": logits[:, 1]}
    return squad_task.span_loss(features, outputs)["total_loss"]


@keras.saving.register_keras_serializable(package="bert_tf")
class TextQuestionAnswerer(TextModel):
    """A `BertSpanLabeler` and its `Preprocessor`; `call` takes token dicts and gives
    the start and end logits [B, 2, S].

    Args:
      span_labeler: A `bert_tf.models.BertSpanLabeler`.
      preprocessor: A `Preprocessor` (vocab, case, max_seq_length: a window's length).
      doc_stride: Pieces between the starts of a long context's windows.
      max_query_length: Question pieces kept.
      max_answer_length: Longest answer, in pieces.
      n_best_size: Spans kept per window and per question.
      version_2_with_negative: Questions may have no answer (SQuAD 2.0).
      null_score_diff_threshold: SQuAD 2.0: no answer when the null score exceeds the best
        span's by more than this.
      trained_from: A fine-tuned run folder, "fit", or None (a new head).
    """

    model_type = MODEL_TYPE
    task_model_argument = "span_labeler"

    def __init__(self, span_labeler, preprocessor, doc_stride=RUNNER.doc_stride,
                 max_query_length=RUNNER.max_query_length,
                 max_answer_length=RUNNER.max_answer_length, n_best_size=RUNNER.n_best_size,
                 version_2_with_negative=False,
                 null_score_diff_threshold=RUNNER.null_score_diff_threshold,
                 trained_from=None, **kwargs):
        kwargs.setdefault("name", "text_question_answerer")
        super().__init__(span_labeler, preprocessor, trained_from=trained_from, **kwargs)
        # The runner's checks of the same options.
        option_groups.DocStride(doc_stride=doc_stride).check()
        option_groups.QuestionLengths(max_query_length=max_query_length,
                                      max_answer_length=max_answer_length).check()
        SquadData(n_best_size=n_best_size).check()
        squad_features.check_lengths(preprocessor.max_seq_length, max_query_length)
        self.doc_stride, self.max_query_length = int(doc_stride), int(max_query_length)
        self.max_answer_length, self.n_best_size = int(max_answer_length), int(n_best_size)
        self.version_2_with_negative = bool(version_2_with_negative)
        self.null_score_diff_threshold = float(null_score_diff_threshold)
        self.tokenizer = FullTokenizer(preprocessor.vocab_file, preprocessor.do_lower_case)
        self.other_run = None  # a fine-tuned run of another task it was loaded from

    def call(self, inputs, training=None):
        outputs = self.task_model(inputs, training=training)
        return tf.stack([outputs["start_logits"], outputs["end_logits"]], axis=1)

    def get_config(self):
        config = super().get_config()
        config.update({name: getattr(self, name) for name in SETTINGS})
        return config

    @classmethod
    def from_pretrained(cls, path, max_seq_length=None, doc_stride=None,
                        max_query_length=None, max_answer_length=None, n_best_size=None,
                        version_2_with_negative=None, null_score_diff_threshold=None,
                        do_lower_case=None, seed=None):
        """A question answerer from a released BERT (a new span head) or a
        `bert-run-squad` run folder (its head and settings).

        Args:
          path: A google-research or Hugging Face folder, a bert_tf pre-training run, a
            `bert-run-squad` output_dir or a folder `save` wrote.
          max_seq_length: A window's length (default: the run's, else bert-run-squad's).
          doc_stride, max_query_length, max_answer_length, n_best_size,
            null_score_diff_threshold: bert-run-squad's options of those names (default:
            the run's, else the runner's defaults).
          version_2_with_negative: A new head that learns questions without answers
            (SQuAD 2.0); a run keeps what it was trained with.
          do_lower_case: Lower-casing (default: the folder's).
          seed: Seeds the new head, and shuffling (`keras.utils.set_random_seed`).
        """
        saved = run_config.read(path)
        trained = saved.get("model_type") == MODEL_TYPE
        run_options = (saved.get("options") or {}) if trained else {}
        if trained and version_2_with_negative is not None and bool(
                version_2_with_negative) != bool(run_options.get("version_2_with_negative")):
            raise ValueError(
                f"{path} is a question-answering run trained with version_2_with_negative="
                f"{bool(run_options.get('version_2_with_negative'))}: load it without "
                "version_2_with_negative (or fit a new head from a released checkpoint)")
        chosen = given(doc_stride=doc_stride, max_query_length=max_query_length,
                       max_answer_length=max_answer_length, n_best_size=n_best_size,
                       version_2_with_negative=version_2_with_negative,
                       null_score_diff_threshold=null_score_diff_threshold)
        settings = {name: chosen.get(name, run_options.get(name, getattr(RUNNER, name)))
                    for name in SETTINGS}
        length = max_seq_length or (None if trained else RUNNER.max_seq_length)
        preprocessor = Preprocessor.from_pretrained(
            path, text_pair=True, **given(max_seq_length=length, do_lower_case=do_lower_case))
        head = {"head_initializer": RUNNER.head_initializer}
        model = cls.build_task_model(BertSpanLabeler, path, saved if trained else None,
                                     seed, head)
        positions = model.encoder.config.max_position_embeddings
        if preprocessor.max_seq_length > positions:
            raise ValueError(f"max_seq_length={preprocessor.max_seq_length} exceeds the "
                             f"max_position_embeddings ({positions}) of {path}: pass "
                             f"max_seq_length={positions} or less")
        answerer = cls(model, preprocessor, trained_from=saved.get("path") if trained
                       else None, **settings)
        if saved.get("model_type") not in (None, MODEL_TYPE, *PRETRAINED_TYPES):
            answerer.other_run = (f"{saved.get('path')} is a {saved.get('model_type')} run "
                                  f"(task {saved.get('task')})")
        return answerer

    # ------------------------------------------------------------------ Keras, on text
    def fit(self, questions=None, contexts=None, answers=None, validation_data=None,
            batch_size=None, epochs=None, learning_rate=None, seed=None, **kwargs):
        """Trains on questions, their contexts and answers (or Keras's `fit` on token
        dicts).

        Args:
          questions, contexts: Columns of texts (lists, numpy arrays, pandas columns).
          answers: One answer per question: {"text", "answer_start"} (SQuAD's: the
            character where the text starts in its context), (text, answer_start), a
            dict of those two columns; None for no answer (a SQuAD 2.0 model). Also
            `fit((questions, contexts), answers)`, as the other text models.
          validation_data: (questions, contexts, answers), scored after each epoch.
          batch_size, epochs, learning_rate: The recipe (default: bert-run-squad's).
          seed: Shuffling seed (default: a new order each run).
          **kwargs: Keras's `fit` arguments (`callbacks`, `verbose`, ...).
        """
        x, y = _x_and_y(questions, contexts, answers, kwargs)
        if isinstance(validation_data, (tuple, list)) and len(validation_data) == 3:
            validation_data = (tuple(validation_data[:2]), validation_data[2])
        return super().fit(x, y, validation_data=validation_data, batch_size=batch_size,
                           epochs=epochs, learning_rate=learning_rate, seed=seed, **kwargs)

    def evaluate(self, questions=None, contexts=None, answers=None, batch_size=None,
                 **kwargs):
        """SQuAD's scores of the answers to `questions`, as the official evaluation
        script computes them for the model's version (v1.1: `exact_match`, `f1`; v2.0:
        `exact`, `f1`, ..., with the null odds); `answers`: one answer text per
        question, a list of them, or as `fit` takes them (None or []: no answer, v2.0).
        Token dicts go to Keras's `evaluate`."""
        x, y = _x_and_y(questions, contexts, answers, kwargs)
        if not is_text(x):
            return super().evaluate(x, y, batch_size=batch_size, **kwargs)
        questions, contexts = self._rows(x)
        gold = qa_inputs.gold_answers(y, len(questions), self.version_2_with_negative)
        self._check_trained("evaluate")
        kwargs.pop("return_dict", None)
        answered = self.predictions(x, inputs.check_batch_size(batch_size or 32), **kwargs)
        predictions = {qa_inputs.ROW_ID.format(row): answer["answer"]
                       for row, answer in enumerate(answered)}
        data = qa_inputs.squad_json_data(questions, contexts, gold=gold)
        if not self.version_2_with_negative:
            return squad_evaluate.evaluate_v1(data, predictions)
        null_odds = {qa_inputs.ROW_ID.format(row): answer["null_odds"]
                     for row, answer in enumerate(answered)}
        return dict(squad_evaluate.evaluate_v2(data, predictions, null_odds))

    def predict(self, questions, contexts=None, batch_size=None, **kwargs):
        """The answer to each question in its context, as bert-run-squad decodes it.

        Args:
          questions, contexts: Columns of texts (a str: one question), or
            `predict((questions, contexts))`; token dicts go to Keras's `predict`.
          batch_size: Windows per batch.

        Returns:
          A list with a dict per question: "answer" (its text as bert-run-squad writes
          it), "score" (its probability among the n-best), "start" and "end" (the
          answer's characters in the context: `context[start:end]`; 0 and 0 for no
          answer, "", and for the runner's "empty", when no span of the n-best is a
          valid answer) and, for a SQuAD 2.0 model, "null_odds" (the null score minus
          the best span's: the answer is "" when it exceeds the threshold).
        """
        x = questions if contexts is None else (questions, contexts)
        if is_text(x):
            self._rows(x)  # bad input first, then a head that was never trained
        return super().predict(x, batch_size=batch_size, **kwargs)

    # ------------------------------------------------------------------ text
    def training_batches(self, x, y, batch_size, shuffle_seed=None):
        questions, contexts = self._rows(x)
        answers = qa_inputs.training_answers(y, contexts, self.version_2_with_negative)
        examples = self._examples(questions, contexts, answers)
        features = self._features(examples, is_training=True)
        arrays = squad_task.features_to_arrays(features, is_training=True)
        targets = np.stack([arrays["start_positions"], arrays["end_positions"]], axis=-1)
        dataset = tf.data.Dataset.from_tensor_slices((_model_inputs(arrays), targets))
        if shuffle_seed is not None:
            dataset = dataset.shuffle(len(targets), seed=None if shuffle_seed is True
                                      else int(shuffle_seed))
        return dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE), len(targets)

    def predictions(self, x, batch_size, **kwargs):
        questions, contexts = self._rows(x)
        examples = self._examples(questions, contexts)
        features = self._features(examples, is_training=False)
        arrays = squad_task.features_to_arrays(features, is_training=False)
        logits = keras.Model.predict(self, _model_inputs(arrays), batch_size=batch_size,
                                     **kwargs)  # [N, 2, S]
        results = [squad_postprocess.RawResult(feature.unique_id, logits[i, 0], logits[i, 1])
                   for i, feature in enumerate(features)]
        answers = squad_postprocess.best_answers(
            examples, features, results, n_best_size=self.n_best_size,
            max_answer_length=self.max_answer_length,
            do_lower_case=self.preprocessor.do_lower_case,
            version_2_with_negative=self.version_2_with_negative,
            null_score_diff_threshold=self.null_score_diff_threshold)
        return [_answer_dict(answer, context) for answer, context in zip(answers, contexts)]

    def _rows(self, x):
        """(questions, contexts) of `x`, checked."""
        if not (isinstance(x, tuple) and len(x) == 2):
            raise ValueError(f"{type(self).__name__} takes questions and their contexts: "
                             "fit(questions, contexts, answers), predict(questions, "
                             f"contexts); got one column of {type(x).__name__}")
        return qa_inputs.question_columns(*x)

    def _examples(self, questions, contexts, answers=None):
        """The runner's `SquadExample`s of the rows (answers: to train on)."""
        data = qa_inputs.squad_json_data(questions, contexts, answers=answers)
        examples = squad_data.squad_examples(data, "questions/contexts", answers is not None,
                                             self.version_2_with_negative)
        if len(examples) != len(questions):  # the reader skipped an answer it cannot place
            kept = {example.qas_id for example in examples}
            row = next(row for row in range(len(questions))
                       if qa_inputs.ROW_ID.format(row) not in kept)
            raise ValueError(f"answers[{row}]: {answers[row][0]!r} at {answers[row][1]} "
                             f"does not fall on the words of contexts[{row}]")
        return examples

    def _features(self, examples, is_training):
        return squad_features.convert_examples_to_features(
            examples, self.tokenizer, self.preprocessor.max_seq_length, self.doc_stride,
            self.max_query_length, is_training=is_training)

    def _check_trained(self, what):
        if self.trained_from is None and self.other_run:
            raise ValueError(f"{type(self).__name__}.{what}: {self.other_run}, fine-tuned "
                             "for another task, and its head does not answer questions: "
                             "fit the new span head first, or load a bert-run-squad run "
                             "folder")
        super()._check_trained(what)

    def default_loss_and_metrics(self):
        return span_positions_loss, []

    def run_description(self):
        """config.json's task, serving settings (as bert-run-squad's) and options."""
        task = "squad2" if self.version_2_with_negative else "squad"
        return {"task": f"{task}/python", "labels": None,
                "export": {"max_query_length": self.max_query_length,
                           "max_answer_length": self.max_answer_length},
                "options": {name: getattr(self, name) for name in SETTINGS}}


def _x_and_y(questions, contexts, answers, kwargs):
    """(x, y) as `TextModel` takes them, of fit(questions, contexts, answers),
    fit((questions, contexts), answers) or Keras's fit(x=..., y=...)."""
    if "x" in kwargs or "y" in kwargs:
        return kwargs.pop("x", questions), kwargs.pop("y", contexts)
    if answers is None:
        return questions, contexts
    return (questions, contexts), answers


def _model_inputs(arrays):
    return {name: arrays[name] for name in MODEL_INPUTS}


def _answer_dict(answer, context):
    """`predict`'s dict of one `squad_postprocess.Answer`."""
    start, end = qa_inputs.context_span(context, answer.span)
    result = {"answer": answer.text, "score": float(answer.probability), "start": start,
              "end": end}
    if answer.null_odds is not None:
        result["null_odds"] = float(answer.null_odds)
    return result
