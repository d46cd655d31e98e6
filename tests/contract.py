"""The contract every Keras layer, model and head of bert_tf goes through.

In the spirit of keras-hub's `run_layer_test` / `run_backbone_test` /
`run_task_test`: a `Case` says how to build one class (its constructor arguments, at the
tiny sizes of tests/harness.py) and how to call it; each `check_*` function checks one
clause of the contract on a case; `CHECKS` lists them (tests/test_contract.py runs every
check on every case and fails when a class of bert_tf.layers / bert_tf.models has no
case). The clauses:

    check_config            get_config() is exactly the constructor arguments (plus
                            Keras's name / trainable / dtype), with the values given,
                            and from_config rebuilds an equal object
    check_registration      registered as "bert_tf>ClassName", and the registry's
                            serialize / deserialize round trip gives the class back
    check_keras_file        .keras save / load: same class, config, variables, outputs
    check_saved_model       tf.saved_model.save / load of a serving function with
                            free batch and sequence axes: same outputs at two lengths
    check_variable_length   called at two sequence lengths; the longer input, padded
                            after the shorter one's tokens, gives the shorter one's
                            outputs on the shorter one's positions
    check_mixed_precision   built under a mixed policy: float32 variables, outputs in
                            the compute dtype except the float32 ones (logits), close
                            to the float32 outputs; softmax and LayerNorm statistics
                            run in float32 (README "Mixed precision")
    check_names             every sub-layer named explicitly (no Keras auto name such
                            as `dense_3`), every variable under the object's own path,
                            the same names and paths when built twice, and no variable
                            made after `build`

Inputs are drawn once at MAX_SEQ positions from a fixed seed; a call at `seq_length`
takes the first `seq_length` positions, so a shorter call's positions are a prefix of a
longer call's. `real_length` sets the attention mask: the rows have `real_length` and
`real_length - 2` real tokens; the other positions keep their random ids / vectors
(padding garbage, which must not leak into the real positions).
"""

import contextlib
import dataclasses
import inspect
import re
from typing import Any, Callable

import keras
import numpy as np
import tensorflow as tf

from bert_tf.configs import BertConfig

# Keys Keras's Layer.get_config adds to a class's own constructor arguments.
BASE_CONFIG_KEYS = frozenset({"name", "trainable", "dtype"})
BATCH, MAX_SEQ = 2, 12
SHORT, LONG = 5, 9  # the two sequence lengths every case is called at
MIXED_POLICIES = ("mixed_bfloat16", "mixed_float16")
# Ops that must run in float32 under a mixed policy: softmax (attention, and any
# log-softmax), and the rsqrt(variance + eps) of a LayerNorm's statistics.
FLOAT32_OPS = frozenset({"Softmax", "LogSoftmax", "Rsqrt"})
SEED = 7


# --------------------------------------------------------------------------- inputs
def _draw(seed, shape, kind):
    rng = np.random.default_rng(seed)
    if kind == "ids":
        return rng.integers(5, 99, shape).astype("int32")
    return rng.normal(size=shape).astype("float32")


def lengths(real_length):
    """Real tokens per row: `real_length` and `real_length - 2`."""
    return np.array([real_length, real_length - 2])


def input_mask(seq_length, real_length):
    """int32 [BATCH, seq_length]: 1 on each row's real tokens."""
    return (np.arange(seq_length)[None] < lengths(real_length)[:, None]).astype("int32")


def token_ids(seq_length, seed=0):
    """int32 [BATCH, seq_length] ids in 5..98, the first positions of a fixed draw."""
    return _draw(seed, (BATCH, MAX_SEQ), "ids")[:, :seq_length]


def matrix(rows, width, seed=3):
    """float32 [rows, width] (e.g. an embedding table), fixed."""
    return _draw(seed, (rows, width), "normal")


def hidden_states(seq_length, width, seed=1):
    """float32 [BATCH, seq_length, width], the first positions of a fixed draw."""
    return _draw(seed, (BATCH, MAX_SEQ, width), "normal")[:, :seq_length]


def encoder_features(seq_length, real_length):
    """BertEncoder inputs: ids, mask, and segment B from the middle of each row."""
    mask = input_mask(seq_length, real_length)
    segments = (np.arange(seq_length)[None] >= (lengths(real_length) // 2)[:, None])
    return {"input_ids": token_ids(seq_length), "input_mask": mask,
            "segment_ids": (segments * mask).astype("int32")}


# ----------------------------------------------------------------------------- cases
@dataclasses.dataclass
class Case:
    """How to build and call one class for the contract.

    Attributes:
        cls: The class.
        kwargs: () -> fresh constructor arguments. Every constructor parameter is given,
            except Keras's base keys: layers get an explicit `name` (as their parents
            give them), models keep their default name. Among the cases of a class,
            each argument takes a value other than its default at least once (so that
            a get_config or from_config that drops one shows; tests/test_contract.py).
        inputs: (seq_length, real_length) -> tuple of positional call arguments (numpy).
        sequence_axis: The sequence axis of the outputs (None: no sequence axis), one
            int/None for every output or a dict by top-level output key / index.
        float32_outputs: Which outputs stay float32 under a mixed policy: True / False
            for every output, or a set of top-level output keys / indices.
        build: (object) -> None; builds the object's variables (default `obj.build()`).
        id: Test id (the class name unless given).
    """

    cls: type
    kwargs: Callable[[], dict]
    inputs: Callable[[int, int], tuple]
    sequence_axis: Any = 1
    float32_outputs: Any = False
    build: Callable[[Any], None] = lambda obj: obj.build()
    id: str = None

    def __post_init__(self):
        self.id = self.id or self.cls.__name__

    def make(self, seed=SEED, built=True):
        """A new object, weights drawn from `seed`, built unless `built=False`."""
        keras.utils.set_random_seed(seed)
        obj = self.cls(**self.kwargs())
        if built:
            self.build(obj)
        return obj

    def call(self, obj, seq_length, real_length=None):
        return obj(*self.inputs(seq_length, real_length or seq_length))

    def signature(self):
        """TensorSpecs of the inputs, with the batch axis and every axis whose size
        follows the sequence length free (None)."""
        short, long = self.inputs(SHORT, SHORT), self.inputs(LONG, SHORT)

        def spec(a, b):
            shape = [None if x != y else x for x, y in zip(a.shape, b.shape)]
            if len(shape) >= 2 and shape[0] == BATCH:
                shape[0] = None
            return tf.TensorSpec(shape, tf.as_dtype(a.dtype))
        return [tf.nest.map_structure(spec, a, b) for a, b in zip(short, long)]

    def _per_output(self, setting, path, default):
        key = path[0] if path else None
        if isinstance(setting, dict):
            return setting.get(key, default)
        if isinstance(setting, (set, frozenset)):
            return key in setting
        return setting

    def sequence_axis_of(self, path):
        return self._per_output(self.sequence_axis, path, None)

    def is_float32_output(self, path):
        return self._per_output(self.float32_outputs, path, False)


def outputs_with_paths(outputs):
    """[(path tuple, numpy array)] of every tensor in a (nested) output structure."""
    return [(path, np.asarray(leaf)) for path, leaf in keras.tree.flatten_with_path(outputs)]


def assert_same_outputs(got, want, atol=1e-6, what=""):
    got, want = outputs_with_paths(got), outputs_with_paths(want)
    assert [p for p, _ in got] == [p for p, _ in want], f"{what}: output structure differs"
    for (path, a), (_, b) in zip(got, want):
        assert a.shape == b.shape, f"{what} output {path}: shape {a.shape} != {b.shape}"
        np.testing.assert_allclose(a, b, atol=atol, rtol=0, err_msg=f"{what} output {path}")


@contextlib.contextmanager
def dtype_policy(policy):
    """The global Keras dtype policy set to `policy` inside, the previous one after."""
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(policy)
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


# ---------------------------------------------------------------------------- checks
def constructor_parameters(cls):
    """{name: inspect.Parameter} of `cls.__init__`, less self, *args and **kwargs."""
    return {name: p for name, p in inspect.signature(cls.__init__).parameters.items()
            if name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}


def _as_config_value(value):
    """What get_config should hold for a constructor argument."""
    if isinstance(value, keras.layers.Layer):
        return keras.saving.serialize_keras_object(value)
    if isinstance(value, BertConfig):
        return value.to_dict()
    return value


def check_config(case):
    kwargs = case.kwargs()
    params = constructor_parameters(case.cls)
    missing = set(params) - set(kwargs) - BASE_CONFIG_KEYS
    assert not missing, f"the case must pass every constructor argument; lacks {missing}"
    obj = case.cls(**kwargs)
    config = obj.get_config()
    expected_keys = set(params) | BASE_CONFIG_KEYS
    assert set(config) == expected_keys, (
        f"{case.id}.get_config() keys are not the constructor arguments: extra "
        f"{sorted(set(config) - expected_keys)}, missing {sorted(expected_keys - set(config))}")
    for name, value in kwargs.items():
        assert config[name] == _as_config_value(value), (
            f"get_config()[{name!r}] is {config[name]!r}, constructed with {value!r}")
    clone = case.cls.from_config(config)
    assert type(clone) is case.cls
    assert clone.get_config() == config


def check_registration(case):
    name = keras.saving.get_registered_name(case.cls)
    assert name == f"bert_tf>{case.cls.__name__}", (
        f"{case.cls.__name__} is not registered (keras.saving.register_keras_serializable"
        f"(package='bert_tf')); registered name {name!r}")
    assert keras.saving.get_registered_object(name) is case.cls
    obj = case.make(built=False)
    serialized = keras.saving.serialize_keras_object(obj)
    assert serialized["registered_name"] == name
    restored = keras.saving.deserialize_keras_object(serialized)
    assert type(restored) is case.cls and restored.get_config() == obj.get_config()


def check_keras_file(case, folder):
    obj = case.make()
    expected = case.call(obj, LONG, SHORT)
    path = str(folder / f"{case.id}.keras")
    keras.saving.save_model(obj, path)
    restored = keras.saving.load_model(path)
    assert type(restored) is case.cls
    assert restored.get_config() == obj.get_config()
    # `weights`, not `variables`: a .keras file holds no random-generator state (the
    # dropout layers' SeedGenerators start afresh, as keras.layers.Dropout's do).
    assert [v.path for v in restored.weights] == [v.path for v in obj.weights]
    for saved, loaded in zip(obj.weights, restored.weights):
        np.testing.assert_array_equal(loaded.numpy(), saved.numpy(), err_msg=saved.path)
    assert_same_outputs(case.call(restored, LONG, SHORT), expected, what=".keras restored")


def check_saved_model(case, folder):
    obj = case.make()

    def serve(*args):
        return obj(*args)

    module = tf.Module()
    module.model = obj
    module.serve = tf.function(serve, input_signature=case.signature())
    path = str(folder / f"{case.id}_saved_model")
    tf.saved_model.save(module, path)
    loaded = tf.saved_model.load(path)
    for seq_length in (SHORT, LONG):
        inputs = case.inputs(seq_length, SHORT)
        assert_same_outputs(loaded.serve(*inputs), obj(*inputs),
                            what=f"SavedModel at sequence length {seq_length}")


def check_variable_length(case):
    obj = case.make()
    short = outputs_with_paths(case.call(obj, SHORT))
    long = outputs_with_paths(case.call(obj, LONG, SHORT))
    assert [p for p, _ in short] == [p for p, _ in long]
    for (path, a), (_, b) in zip(short, long):
        axis = case.sequence_axis_of(path)
        if axis is None:
            assert a.shape == b.shape, f"output {path}: {a.shape} != {b.shape}"
            np.testing.assert_allclose(b, a, atol=1e-5, rtol=0, err_msg=f"output {path}")
            continue
        assert a.shape[axis] == SHORT and b.shape[axis] == LONG, (
            f"output {path}: sequence axis {axis} of {a.shape} / {b.shape}")
        prefix = np.take(b, np.arange(SHORT), axis=axis)
        np.testing.assert_allclose(prefix, a, atol=1e-5, rtol=0, err_msg=(
            f"output {path}: padding after the real tokens changed their outputs"))


def check_mixed_precision(case, policy):
    reference = case.make()
    with dtype_policy(policy):
        mixed = case.make()
    assert keras.config.dtype_policy().name == "float32", "the policy was not restored"
    compute_dtype = keras.DTypePolicy(policy).compute_dtype
    floats = [v for v in mixed.variables if "float" in str(v.dtype)]
    assert all(v.dtype == "float32" for v in floats), (
        f"variables must stay float32: {[(v.path, v.dtype) for v in floats]}")
    mixed.set_weights(reference.get_weights())
    inputs = case.inputs(LONG, SHORT)
    want = dict(outputs_with_paths(reference(*inputs)))
    for path, got in outputs_with_paths(mixed(*inputs)):
        if np.issubdtype(got.dtype, np.integer):  # ids and labels: exactly the same
            np.testing.assert_array_equal(got, want[path], err_msg=f"{policy} output {path}")
            continue
        dtype = "float32" if case.is_float32_output(path) else compute_dtype
        assert got.dtype == dtype, f"output {path} is {got.dtype}, must be {dtype}"
        got = got.astype("float32")
        assert np.isfinite(got).all(), f"output {path} has non-finite values"
        scale = max(1.0, float(np.abs(want[path]).max()))
        np.testing.assert_allclose(got, want[path], atol=0.05 * scale, rtol=0,
                                   err_msg=f"{policy} output {path}")
    def forward(*args):
        return mixed(*args)

    graph = tf.function(forward, autograph=False).get_concrete_function(
        *case.signature()).graph
    wrong = [(op.name, op.get_attr("T").name) for op in graph.get_operations()
             if op.type in FLOAT32_OPS and op.get_attr("T") != tf.float32]
    assert not wrong, f"softmax / LayerNorm statistics must run in float32: {wrong}"


def auto_name_pattern(layer):
    """The names Keras gives the second and later `type(layer)` made without a name
    (`dense_1`, `dense_3`). The first one's, `dense`, is not matched: it is also a fair
    explicit name (`pooler` for the Pooler), and a layer that has it by chance has
    another one when built again, which check_names catches."""
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", type(layer).__name__).lower()
    return re.compile(rf"{re.escape(snake)}_\d+")


def sublayers(obj):
    """Every layer inside `obj`, recursively, `obj` itself excluded."""
    return list(obj._flatten_layers(include_self=False, recursive=True))  # pylint: disable=protected-access


def check_names(case):
    first, second = case.make(), case.make()
    for obj in (first, second):
        for layer in sublayers(obj):
            assert not auto_name_pattern(layer).fullmatch(layer.name), (
                f"sub-layer {layer.name!r} ({type(layer).__name__}) of {case.id} has a "
                "Keras auto name: give it an explicit name")
    names = [[(layer.name, type(layer).__name__) for layer in sublayers(obj)]
             for obj in (first, second)]
    assert names[0] == names[1], "the sub-layer names differ between two builds"
    paths = [[v.path for v in obj.variables] for obj in (first, second)]
    assert paths[0] == paths[1], (
        "the variable paths differ between two builds: "
        f"{sorted(set(paths[0]) ^ set(paths[1]))}")
    assert len(set(paths[0])) == len(paths[0]), "two variables share a path"
    outside = [p for p in paths[0] if not p.startswith(first.name + "/")]
    assert not outside, f"variables outside {first.name!r}'s path: {outside}"
    case.call(first, SHORT)
    case.call(first, SHORT)  # a second call too: a variable made on first use shows here
    assert [v.path for v in first.variables] == paths[0], (
        "calling the built object made new variables: build() must make them all")


CHECKS = {
    "config": check_config,
    "registration": check_registration,
    "keras_file": check_keras_file,
    "saved_model": check_saved_model,
    "variable_length": check_variable_length,
    "mixed_precision": check_mixed_precision,
    "names": check_names,
}
