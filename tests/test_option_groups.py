"""Options are declared once, in groups that check themselves, and composed per command:
every flag name of the package (bert_tf and data_prep) is declared by one field, no
composition declares or hides a field, and every group's check refuses its bad values
with a message naming the option."""

import collections
import dataclasses
import importlib
import math
import pathlib
import pkgutil

import pytest
from absl import app
from hypothesis import given, settings
from hypothesis import strategies as st

import bert_tf
import data_prep
from bert_tf import options as options_lib
from bert_tf.options import OptionGroup, compose, option, option_specs
from bert_tf.tasks.pretraining.options import (
    DynamicMasking, PretrainingData, PretrainingOptions)
from bert_tf.runs import feature_extraction, option_groups, options
from bert_tf.runs.option_groups import ClassWeightOptions
from bert_tf.tasks.classification.options import ClassifierData, ClassifierOptions
from bert_tf.tasks.distillation import options as distillation_options
from bert_tf.runs.search import options as search_options
from bert_tf.runs.seeds import options as seeds_options
from bert_tf.tasks.electra.options import ElectraObjective
from bert_tf.tasks.ner.options import NerData, NerOptions
from bert_tf.tasks.sentence_embeddings.options import SentenceLoss, SentencePairData
from bert_tf.tasks.squad.options import SquadData, SquadOptions
from data_prep import (beam_vocab, build_vocab, create_pretraining_data, extend_vocab,
                       pretraining_instances, tool_options, word_segmentation)

REPO = pathlib.Path(__file__).resolve().parents[1]
# Packages a module may need that are optional extras (its module is then skipped).
OPTIONAL = ("apache_beam", "jieba", "keras_hub", "tensorflow_hub", "tf_keras", "ai_edge_litert",
            "transformers", "torch")


def package_modules():
    """Every module of bert_tf and data_prep, imported."""
    modules = []
    for package in (bert_tf, data_prep):
        modules.append(package)
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            try:
                modules.append(importlib.import_module(info.name))
            except ModuleNotFoundError as error:
                if not (error.name or "").startswith(OPTIONAL):
                    raise
    return modules


def declared_options(modules):
    """{flag name: ["module.Class.field", ...]}: the option fields that declare each
    flag name (name, aliases and switches), each class counted for the fields in its own
    annotations."""
    declared = collections.defaultdict(list)
    for module in modules:
        for value in vars(module).values():
            if not (isinstance(value, type) and dataclasses.is_dataclass(value)
                    and value.__module__ == module.__name__):
                continue
            for field in options_lib.declared_fields(value):
                if not field.metadata.get("flag"):
                    continue
                names = ((field.name,) + tuple(field.metadata["aliases"])
                         + tuple(field.metadata["switches"]))
                for name in names:
                    declared[name].append(
                        f"{module.__name__}.{value.__qualname__}.{field.name}")
    return declared


@pytest.fixture(scope="module")
def modules():
    return package_modules()


def command_options():
    """The options class of every command: the runners', extraction's, export's and the
    data tools'."""
    classes = [importlib.import_module(f"bert_tf.cli.{path.stem}").OPTIONS
               for path in sorted((REPO / "bert_tf" / "cli").glob("*.py"))
               if hasattr(importlib.import_module(f"bert_tf.cli.{path.stem}"), "OPTIONS")]
    return classes + [build_vocab.BuildVocabOptions, beam_vocab.BuildVocabBeamOptions,
                      create_pretraining_data.CreatePretrainingDataOptions,
                      extend_vocab.ExtendVocabOptions, _beam_pipeline_options()]


def _beam_pipeline_options():
    from data_prep import beam_pipeline  # pylint: disable=import-outside-toplevel
    return beam_pipeline.CreatePretrainingDataBeamOptions


def test_every_flag_name_is_declared_by_one_field(modules):
    declared = declared_options(modules)
    flag_names = {name for options_class in command_options()
                  for spec in option_specs(options_class)
                  for name in (spec.name,) + spec.aliases + tuple(spec.switches)}
    assert flag_names <= set(declared)  # every command's flags were found
    repeated = {name: places for name, places in declared.items() if len(places) > 1}
    assert not repeated, repeated


def test_compositions_declare_no_field_and_hide_none(modules):
    """Fields are declared by groups only; a command leaves out what it does not take
    (no field inherited and then re-declared with flag=False)."""
    for module in modules:
        for value in vars(module).values():
            if not (isinstance(value, type) and dataclasses.is_dataclass(value)
                    and value.__module__ == module.__name__):
                continue
            own = options_lib.declared_fields(value)
            if own:
                assert issubclass(value, OptionGroup), f"{value.__qualname__} declares " \
                    "options outside a group"
            for field in own:
                inherited = [base for base in value.__mro__[1:]
                             if field.name in vars(base).get("__annotations__", {})]
                assert not inherited, f"{value.__qualname__}.{field.name} re-declares " \
                    f"the field of {inherited[0].__qualname__}"


def test_commands_compose_groups_and_keep_their_own_defaults():
    assert SquadOptions().max_seq_length == 384
    assert SquadOptions().doc_stride == 128
    assert NerOptions().doc_stride == 64
    assert ClassifierOptions().doc_stride is None
    assert ClassifierOptions().data_dir == ""
    assert extend_vocab.ExtendVocabOptions().do_lower_case is None
    assert PretrainingOptions().steps_per_loop == 1000
    specs = {spec.name: spec for spec in option_specs(SquadOptions)}
    assert specs["max_seq_length"].default == 384 and not specs["max_seq_length"].optional
    assert specs["max_seq_length"].help.startswith("Sub-tokens per window")
    fields = {field.name for field in dataclasses.fields(SquadOptions)}
    assert not fields & {"do_eval", "eval_batch_size", "dropout_rate", "pack_sequences"}
    assert options.FinetuneOptions(trim_padding=None, use_xla=True).use_trim_padding is False


@dataclasses.dataclass(kw_only=True)
class _Counted(OptionGroup):
    width: int = option(2, "A width.")
    calls = []

    def check(self):
        type(self).calls.append("width")


@dataclasses.dataclass(kw_only=True)
class _Other(OptionGroup):
    depth: int = option(3, "A depth.", choices=(3, 4))


def test_compose_runs_each_check_once_and_refuses_unknown_overrides():
    rules = []
    inner = compose("Inner", _Counted, checks=(lambda o: rules.append("inner"),))
    outer = compose("Outer", inner, _Counted, (_Other,), defaults={"width": 5},
                    helps={"depth": "Deeper."}, checks=(lambda o: rules.append("outer"),))
    assert outer().width == 5 and outer(width=1).width == 1
    assert {s.name: (s.default, s.help) for s in option_specs(outer)} == {
        "width": (5, "A width."), "depth": (3, "Deeper.")}
    _Counted.calls.clear()
    outer().check()
    assert _Counted.calls == ["width"] and rules == ["inner", "outer"]
    with pytest.raises(ValueError, match="depth must be one of 3, 4, got 5"):
        outer(depth=5).check()
    with pytest.raises(TypeError, match="height is not an option of its groups"):
        compose("Bad", _Counted, defaults={"height": 1})
    with pytest.raises(TypeError, match="not an option group"):
        compose("Bad", int)


def _ints_below(minimum):
    return st.integers(max_value=minimum - 1, min_value=-10**6)


def _floats_outside(low, high, closed=True):
    """Floats outside [low, high] (closed) or (low, high), NaN included."""
    if closed:
        outside = st.floats(max_value=low, exclude_max=True) | st.floats(min_value=high,
                                                                         exclude_min=True)
    else:
        outside = st.floats(max_value=low) | st.floats(min_value=high)
    return outside | st.just(math.nan)


# Not in (0, 1].
_OUTSIDE_FRACTION = (st.floats(max_value=0) | st.floats(min_value=1, exclude_min=True)
                     | st.just(math.nan))

# group -> [(option, bad values, other settings the check needs)]
BAD_VALUES = {
    distillation_options.Student: [
        ("student_layers", st.sampled_from(["a", "0", "1,x", "-1", "1.5"]), {}),
        ("student_config_file", st.just("small.json"), {"student_layers": "2"}),
        ("student_init_checkpoint", st.just("ckpt"), {})],
    distillation_options.DistillationLosses: [
        ("soft_temperature", st.sampled_from([0.0, -1.0, -1e-9]), {}),
        ("hard_weight", st.sampled_from([-1.0, -0.5]), {}),
        ("soft_weight", st.just(0.0), {}),
        ("layer_map", st.sampled_from(["x", "1,,2", "-1"]), {})],
    option_groups.SequenceLength: [("max_seq_length", _ints_below(3), {})],
    option_groups.DocStride: [("doc_stride", _ints_below(1), {})],
    option_groups.MultiLabelThreshold: [
        ("multi_label_threshold", _floats_outside(0, 1, closed=False), {})],
    option_groups.QuestionLengths: [("max_query_length", _ints_below(1), {}),
                                    ("max_answer_length", _ints_below(1), {})],
    option_groups.InputFile: [("input_file", st.sampled_from([None, ""]), {})],
    option_groups.OutputFile: [("output_file", st.sampled_from([None, ""]), {})],
    option_groups.MaskedLm: [("max_predictions_per_seq", _ints_below(1), {}),
                             ("masked_lm_prob", _floats_outside(0, 1, closed=False), {})],
    options.TrainStep: [("train_batch_size", _ints_below(1), {"do_train": True})],
    options.EvalStep: [("eval_batch_size", _ints_below(1), {"do_eval": True})],
    options.PredictStep: [("predict_batch_size", _ints_below(1), {"do_predict": True})],
    options.Optimizer: [("learning_rate", st.floats(max_value=0) | st.just(math.nan), {}),
                        ("weight_decay_rate", st.floats(max_value=0, exclude_max=True), {}),
                        ("gradient_accumulation_steps", _ints_below(1), {})],
    options.EpochSchedule: [("num_train_epochs", st.floats(max_value=0), {}),
                            ("warmup_proportion", _floats_outside(0, 1), {})],
    options.Checkpointing: [(name, _ints_below(1), {}) for name in (
        "save_checkpoints_steps", "keep_checkpoint_max", "steps_per_loop")],
    options.Devices: [("num_gpus", _ints_below(0), {})],
    options.TpuCluster: [("num_tpu_cores", _ints_below(1), {})],
    options.Packing: [("max_sequences_per_row", _ints_below(1), {"pack_sequences": True})],
    options.TrainingEvaluation: [
        ("eval_every_steps", _ints_below(0), {}),
        ("early_stopping_patience", _ints_below(0), {}),
        ("best_metric", st.sampled_from(["eval_accuracy", "f1"]), {"eval_every_steps": 0}),
        ("early_stopping_patience", st.integers(1, 9), {"eval_every_steps": 10})],
    ElectraObjective: [
        ("generator_hidden_size", _OUTSIDE_FRACTION, {}),
        ("generator_layers", _OUTSIDE_FRACTION, {}),
        ("disc_weight", st.floats(max_value=0, exclude_max=True) | st.just(math.nan), {}),
        ("temperature", st.floats(max_value=0) | st.just(math.inf), {}),
        ("generator_hidden_size", st.just(0.5), {"generator_config_file": "gen.json"})],
    options.HeadDropout: [("dropout_rate", _floats_outside(0, 1) | st.just(1.0), {})],
    seeds_options.Seeds: [
        ("seeds", st.lists(st.integers(max_value=-1).map(str), min_size=1)
         | st.sampled_from([["1", "1"], ["x"], ["1.5"], ["2", "3", "2"]]), {}),
        ("num_seeds", _ints_below(0), {}),
        ("num_seeds", st.integers(1, 9), {"seeds": ["1"]}),
        ("stop_bad_seeds_after", _floats_outside(0, 1) | st.just(1.0), {"num_seeds": 3}),
        ("stop_bad_seeds_after", st.floats(0.01, 0.99), {"seeds": ["4"]})],
    options.StableRecipe: [("layerwise_lr_decay", _floats_outside(0, 1) | st.just(0.0), {}),
                           ("reinit_top_layers", _ints_below(0), {})],
    options.Lora: [
        ("lora_rank", _ints_below(0), {}),
        ("lora_alpha", st.floats(max_value=0) | st.just(math.nan), {"lora_rank": 4}),
        ("lora_dropout", _floats_outside(0, 1) | st.just(1.0), {"lora_rank": 4}),
        ("lora_targets", st.sampled_from([["queries"], [], ["query", "query"],
                                          ["output_dense"]]), {"lora_rank": 4}),
        ("lora_train", st.sampled_from(["all", "", "bias,bias", "none,bias"]),
         {"lora_rank": 4}),
        # LoRA off, another LoRA flag set
        ("lora_alpha", st.floats(0.1, 64), {}),
        ("lora_dropout", st.floats(0.01, 0.9), {}),
        ("lora_targets", st.just(["key"]), {}),
        ("lora_train", st.just("bias"), {})],
    ClassWeightOptions: [
        ("class_weights", st.sampled_from(["", "pos", "pos:x", "pos:0", "a:1,a:2", ":3"]),
         {})],
    ClassifierData: [("label_separator", st.just(""), {})],
    NerData: [("tag_column", st.floats(0.1, 0.9), {}),
              ("word_column", st.floats(0.1, 0.9), {})],
    SquadData: [("n_best_size", _ints_below(1), {})],
    SentenceLoss: [
        ("similarity_scale", st.floats(max_value=0) | st.sampled_from([math.nan, math.inf]),
         {})],
    SentencePairData: [
        ("max_score", st.floats(max_value=0) | st.just(math.nan), {}),
        ("min_score", st.floats(min_value=5) | st.just(math.nan), {}),
        ("sentence1_column", st.just(""), {}), ("score_column", st.just(""), {})],
    PretrainingData: [("max_eval_steps", _ints_below(1), {}),
                      ("packing_window", _ints_below(1), {})],
    DynamicMasking: [("max_ngram_size", _ints_below(1), {})],
    option_groups.ModelBatch: [("batch_size", _ints_below(1), {})],
    tool_options.SplitOptions: [("streams_per_split", _ints_below(1), {}),
                                ("split_bytes", _ints_below(0), {})],
    tool_options.MaxSentences: [("max_sentences", _ints_below(0), {})],
    build_vocab.VocabLearning: [("vocab_size", _ints_below(205), {}),
                                ("num_unused", _ints_below(0), {}),
                                ("max_unique_chars", _ints_below(1), {}),
                                ("max_token_length", _ints_below(1), {}),
                                ("num_iterations", _ints_below(1), {})],
    beam_vocab.RareWords: [("min_word_count", _ints_below(1), {})],
    extend_vocab.VocabExtension: [("max_new_tokens", _ints_below(0), {}),
                                  ("min_frequency", _ints_below(1), {}),
                                  ("max_new_tokens", st.just(0), {"mode": "append"})],
    pretraining_instances.InstanceShape: [
        ("short_seq_prob", _floats_outside(0, 1), {}),
        ("dupe_factor", _ints_below(1), {}),
        ("dupe_factor", st.integers(2, 9), {"masking": "none"})],
    word_segmentation.WordSegmentationFields: [
        ("word_boundaries_file", st.just("refs.txt"), {"word_segmenter": "jieba"})],
    create_pretraining_data.RecordOutput: [("num_workers", _ints_below(1), {})],
    search_options.SearchOptions: [("trials", _ints_below(1), {"search": "space.json"})],
}
CASES = [(group, name, values, others) for group, cases in BAD_VALUES.items()
         for name, values, others in cases]


@pytest.mark.parametrize("group, name, values, others", CASES,
                         ids=[f"{group.__name__}.{name}" for group, name, _, _ in CASES])
def test_each_groups_check_refuses_its_bad_values_naming_the_option(group, name, values,
                                                                     others):
    @settings(max_examples=40, deadline=None)
    @given(values)
    def refused(value):
        instance = group(**others, **{name: value})
        with pytest.raises((ValueError, app.UsageError)) as raised:
            instance.check()
        assert name in str(raised.value), (value, str(raised.value))
    refused()  # pylint: disable=no-value-for-parameter


def _groups(modules):
    return {value for module in modules for value in vars(module).values()
            if isinstance(value, type) and issubclass(value, OptionGroup)
            and value is not OptionGroup and options_lib.declared_fields(value)}


def test_every_group_with_a_check_is_tried_and_accepts_its_defaults(modules):
    checking = {group for group in _groups(modules) if "check" in vars(group)}
    untried = {group.__qualname__ for group in checking} - {
        group.__qualname__ for group in BAD_VALUES}
    assert not untried, f"add bad values of {sorted(untried)} to BAD_VALUES"
    required = {option_groups.InputFile, option_groups.OutputFile}
    for group in checking - required:
        group().check()


def _number_options():
    """(options class, spec) of every float option and every seed of every command."""
    found = []
    for options_class in command_options():
        for spec in option_specs(options_class):
            if spec.kind is float or (spec.kind is int and options_lib.is_seed(spec.name)):
                found.append((options_class, spec))
    return found


@settings(max_examples=40, deadline=None)
@given(case=st.sampled_from(_number_options()),
       bad=st.sampled_from([math.inf, -math.inf, math.nan, -1, -(2 ** 40), 2 ** 32]))
def test_non_finite_numbers_and_bad_seeds_are_refused_naming_the_option(case, bad):
    """Every float option of every command refuses NaN and infinities, and every seed
    a value no random generator takes, by the option's name, before any work."""
    options_class, spec = case
    if spec.kind is float and not isinstance(bad, float):
        bad = float(bad)
        if math.isfinite(bad):
            return  # a finite float may be valid for the option
    if spec.kind is int and isinstance(bad, float):
        return
    with pytest.raises(ValueError, match=rf"^{spec.name} must be "):
        options_class(**{spec.name: bad}).check()

