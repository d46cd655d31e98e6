"""Starting a training run from other weights: a released model, or a previous run
(continued pre-training, the second phase of a two-phase pre-training).

`bert_tf.train.loop.train` calls `start_from` on a fresh output_dir (a resumed run
restores its own checkpoint instead)::

    report = warm_start.start_from(model, optimizer, init_checkpoint,
                                   restore_optimizer_state=False)

Weights. A released google-research folder or prefix, or a Hugging Face folder, loads
through `bert_tf.weights.checkpoints.load_pretrained_weights`: the encoder must load
whole; the masked-LM and next-sentence heads (`cls/predictions/*`,
`cls/seq_relationship/*`) load when the checkpoint has them and start fresh when it does
not. A bert_tf run (its output_dir, or one `ckpt-N` prefix) loads from its latest
training checkpoint: the encoder through the same loader, then each head the model's
class lists in `pretrained_heads` that the checkpoint holds (the pre-training model
lists its masked-LM and next-sentence heads; a fine-tuning run has other heads). What
was loaded and which heads start fresh is logged at INFO.

Optimizer state (`restore_optimizer_state`): the optimizer's moments (Adam's or LAMB's
`m` and `v` per trainable variable) are copied from the same training checkpoint. The
step counter is not: the new run has its own schedule (warm-up, num_train_steps) and
counts its steps from 0; the dynamic loss scale of float16 starts afresh too. A
checkpoint without optimizer state (a released model, a `bert_model.ckpt`) is refused
by `optimizer_state_checkpoint`, which the task calls before any work.
"""


import tensorflow as tf
from absl import logging
from tensorflow.core.protobuf import trackable_object_graph_pb2

from bert_tf.train import optimization
from bert_tf.weights import checkpoints, training_checkpoints
from bert_tf.weights.load_report import name_list

_OBJECT_GRAPH = "_CHECKPOINTABLE_OBJECT_GRAPH"
# Optimizer variables that are not moments: the new run keeps its own.
_NOT_MOMENTS = ("iteration", "iterations", "learning_rate")


def optimizer_state_checkpoint(init_checkpoint) -> str:
    """The training checkpoint whose optimizer moments `init_checkpoint` offers.

    Raises:
      ValueError: naming `init_checkpoint`, when it holds no optimizer state (a
        released model, a `bert_model.ckpt`, Hugging Face weights).
    """
    prefix = training_checkpoints.training_checkpoint(init_checkpoint)
    if prefix is None or not any(name.startswith("optimizer/")
                                 for name, _ in tf.train.list_variables(prefix)):
        raise ValueError(
            f"--restore_optimizer_state: --init_checkpoint={init_checkpoint} holds no "
            "optimizer state (a released model or a bert_model.ckpt has weights only); "
            "pass the output_dir of a bert-run-pretraining run (its ckpt-N hold the "
            "Adam/LAMB moments), or drop --restore_optimizer_state")
    return prefix


def start_from(model, optimizer, init_checkpoint, restore_optimizer_state=False):
    """Loads `init_checkpoint` into a built model (and its moments into `optimizer`).

    Args:
      model: The built model of the run.
      optimizer: Its built optimizer (a `LossScaleOptimizer` is unwrapped).
      init_checkpoint: See `training_checkpoints.training_checkpoint` and the module docstring.
      restore_optimizer_state: Also copy the optimizer moments (not the step counter).

    Returns:
      The `LoadReport` of the weights.
    Raises:
      ValueError: naming the checkpoint, when its encoder does not fit the model, it has
        no optimizer state, or its moments are of other variables.
    """
    # The loader's report would be of the encoder alone (its heads are read below):
    # what the whole load did is logged once, by `describe`.
    prefix = training_checkpoints.training_checkpoint(init_checkpoint)
    if prefix is None:
        report = checkpoints.load_pretrained_weights(model, init_checkpoint,
                                                     log_report=False)
    else:
        report = checkpoints.load_pretrained_weights(model, prefix, log_report=False)
        _load_heads(model, prefix, report)
    logging.info("%s", describe(report, model, init_checkpoint))
    if restore_optimizer_state:
        prefix = optimizer_state_checkpoint(init_checkpoint)
        count = restore_moments(optimizer, prefix)
        logging.info("Optimizer moments from %s: %d variables (the step counter and the "
                     "learning-rate schedule start at 0)", prefix, count)
    return report


def _load_heads(model, prefix, report):
    """Reads each head of `model` that the training checkpoint `prefix` holds; moves
    its names from `report.newly_initialized` to `report.loaded`."""
    names = {id(variable): name
             for name, (variable, _) in checkpoints.google_variable_map(model).items()}
    for attribute, _, title in model.pretrained_heads:
        head = getattr(model, attribute, None)
        if head is None:
            continue
        status = None
        try:
            status = tf.train.Checkpoint(
                model=tf.train.Checkpoint(**{attribute: head})).read(prefix)
            status.assert_existing_objects_matched()
        except AssertionError:
            continue  # not in this checkpoint (a fine-tuning run's): starts fresh
        except ValueError as error:
            raise ValueError(f"training checkpoint {prefix}: its {title} does not fit "
                             f"this model: {str(error)[:300]}") from None
        finally:
            if status is not None:
                status.expect_partial()
        head_names = {names[id(variable)] for variable in head.weights}
        report.loaded.extend(name for name in report.newly_initialized
                             if name in head_names)
        report.newly_initialized[:] = [name for name in report.newly_initialized
                                       if name not in head_names]


def describe(report, model, init_checkpoint) -> str:
    """What a warm start loaded: counts, the encoder, then each head's fate (loaded,
    or fresh)."""
    total = len(report.loaded) + len(report.newly_initialized)
    lines = [f"Initialized from {init_checkpoint} ({report.source}): loaded "
             f"{len(report.loaded)} of the model's {total} variables, "
             f"{len(report.unmatched)} checkpoint variables unmatched"]
    encoder = [name for name in report.loaded if name.startswith("bert/")]
    lines.append(f"  encoder bert/*: {len(encoder)} variables loaded")
    heads = model.pretrained_heads
    for attribute, prefix, title in heads:
        if getattr(model, attribute, None) is None:
            continue
        fresh = [name for name in report.newly_initialized if name.startswith(prefix)]
        lines.append(f"  {title} {prefix}*: " + (
            f"initialised fresh, not in the checkpoint ({name_list(fresh, 10)})" if fresh
            else "loaded"))
    others = [name for name in report.newly_initialized
              if not name.startswith(tuple(prefix for _, prefix, _ in heads))]
    if others:
        lines.append(f"  also initialised fresh: {name_list(others, 10)}")
    if report.unmatched:
        lines.append(f"  unmatched in the checkpoint: {name_list(report.unmatched, 10)}")
    return "\n".join(lines)


def restore_moments(optimizer, prefix) -> int:
    """Copies the optimizer moments of training checkpoint `prefix` into `optimizer`.

    The checkpoint's optimizer may have been wrapped in a `LossScaleOptimizer` or not,
    and be AdamW or LAMB (the same moments, in the same order); the step counter and a
    learning-rate variable are left as they are.

    Returns:
      How many variables were assigned.
    Raises:
      ValueError: naming the checkpoint, when its moments are of other variables (a
        model with or without the next-sentence head, another config).
    """
    ours = [variable for variable in optimization.inner_optimizer(optimizer).variables
            if variable.name not in _NOT_MOMENTS]
    stored = _stored_moments(prefix)
    reader = tf.train.load_checkpoint(prefix)
    shapes = reader.get_variable_to_shape_map()
    their_shapes = [tuple(shapes[key]) for key in stored]
    our_shapes = [tuple(variable.shape) for variable in ours]
    if their_shapes != our_shapes:
        differ = next((i for i, (a, b) in enumerate(zip(their_shapes, our_shapes))
                       if a != b), min(len(their_shapes), len(our_shapes)))
        raise ValueError(
            f"--restore_optimizer_state: the optimizer state of {prefix} is of other "
            f"variables: {len(stored)} moment variables there, {len(ours)} here (first "
            f"difference at moment {differ}). The two runs must train the same variables: "
            "the same bert_config and --next_sentence")
    for variable, key in zip(ours, stored):
        variable.assign(reader.get_tensor(key))
    return len(ours)


def _stored_moments(prefix):
    """Checkpoint keys of the optimizer moments of `prefix`, in the optimizer's order."""
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(tf.train.load_checkpoint(prefix).get_tensor(_OBJECT_GRAPH))

    def children(node_id):
        return {ref.local_name: ref.node_id for ref in graph.nodes[node_id].children}

    optimizer = children(0).get("optimizer")
    if optimizer is not None and "inner_optimizer" in children(optimizer):
        optimizer = children(optimizer)["inner_optimizer"]  # saved under float16
    variables = children(optimizer).get("_variables") if optimizer is not None else None
    if variables is None:
        raise ValueError(f"--restore_optimizer_state: {prefix} holds no optimizer "
                         "variables that this version can read")
    skipped = {children(optimizer).get(f"_{name}") for name in _NOT_MOMENTS}
    keys = []
    for _, node_id in sorted(children(variables).items(), key=lambda item: int(item[0])):
        if node_id in skipped:
            continue
        attributes = graph.nodes[node_id].attributes
        keys.extend(attribute.checkpoint_key for attribute in attributes
                    if attribute.name == "VARIABLE_VALUE")
    return keys
