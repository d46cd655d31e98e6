"""Rewrites of the ONNX graph that tf2onnx makes of a BERT model into the standard ops
that ONNX Runtime (and other runtimes) run fused; each is equal to float32 rounding.

    onnx_graph.optimize(model_proto)   # in place; returns {rewrite: count}

- `fuse_layer_norms`: Keras's LayerNormalization, traced by TensorFlow, reaches ONNX as
  a mean and a variance (GlobalAveragePool or ReduceMean over the last axis) and nine
  elementwise nodes; it becomes one `LayerNormalization` (opset 17), which ONNX Runtime
  runs as one kernel and fuses with the residual Add before it.
- `reorder_gelus`: the exact GELU arrives as x * 0.7071 -> Erf -> + 1 -> * 0.5 -> * x (the
  graph optimizer's order); it becomes x / sqrt 2 -> Erf -> + 1 -> * x -> * 0.5, the
  order ONNX Runtime fuses into one Gelu (and, with the bias Add before it, BiasGelu).
- `unflatten_dense_layers`: Keras's Dense on [B, S, K] reshapes to [B*S, K] for the
  MatMul and back, the target shape computed from the input's (Shape, Slice, Concat,
  Casts: seven nodes a layer); ONNX's MatMul broadcasts, so the MatMul takes [B, S, K]
  and the elementwise nodes after it (bias, GELU) run on [B, S, N] as they are.

A match is rewritten only when every node of it is as expected and its inner values are
used nowhere else; anything else stays as it was.
"""

import collections

import numpy as np

from bert_tf import extras

SQRT_HALF, SQRT_TWO = 0.7071067811865476, 1.4142135623730951


def _onnx(module):
    """onnx's `module` (helper, numpy_helper), imported when a graph is rewritten: only
    an ONNX export needs the onnx extra."""
    return extras.require(f"onnx.{module}", "--export_format=onnx")


class Graph:
    """Producers, consumers and constant values of an ONNX GraphProto."""

    def __init__(self, graph):
        self.graph = graph
        self.producer = {name: node for node in graph.node for name in node.output}
        self.consumers = collections.defaultdict(list)
        for node in graph.node:
            for name in node.input:
                self.consumers[name].append(node)
        to_array = _onnx("numpy_helper").to_array
        self.constants = {tensor.name: to_array(tensor)
                          for tensor in graph.initializer}
        self.removed = set()
        self.replacements = {}  # id(removed node) -> node in its place

    def op(self, name, op_type):
        """The node producing `name` when it is an `op_type`, else None."""
        node = self.producer.get(name)
        return node if node is not None and node.op_type == op_type else None

    def scalar(self, name):
        """The value of a one-element constant `name`, else None."""
        value = self.constants.get(name)
        return float(value.reshape(-1)[0]) if value is not None and value.size == 1 else None

    def other(self, node, name):
        """The input of a two-input `node` that is not `name` (None if neither is)."""
        if list(node.input).count(name) == 2:
            return name
        rest = [value for value in node.input if value != name]
        return rest[0] if len(rest) == 1 and len(node.input) == 2 else None

    def only_used_by(self, name, nodes):
        """`name` is read by `nodes` alone (and is no graph output)."""
        outputs = {value.name for value in self.graph.output}
        return name not in outputs and all(
            any(user is node for node in nodes) for user in self.consumers[name])

    def add_constant(self, name, value):
        self.graph.initializer.append(_onnx("numpy_helper").from_array(
            np.asarray(value, np.float32), name))
        return name

    def remove(self, nodes):
        self.removed.update(id(node) for node in nodes)

    def replace(self, nodes, new_node):
        """Removes `nodes` and puts `new_node` where the first of them stands."""
        self.remove(nodes)
        self.replacements[id(nodes[0])] = new_node

    def commit(self):
        """Drops the removed nodes and puts in the new ones, in topological order."""
        kept = [self.replacements.get(id(node), node) for node in self.graph.node
                if id(node) not in self.removed or id(node) in self.replacements]
        del self.graph.node[:]
        self.graph.node.extend(kept)


def _is_mean_of_last_axis(node):
    if node is None:
        return False
    if node.op_type == "GlobalAveragePool":  # tf2onnx's mean over axis 2 of [B, S, H]
        return True
    if node.op_type != "ReduceMean":
        return False
    attributes = {attribute.name: _onnx("helper").get_attribute_value(attribute)
                  for attribute in node.attribute}
    return list(attributes.get("axes", [])) == [-1] and attributes.get("keepdims", 1) == 1


def _layer_norm_at(g, out):
    """(nodes of the match, x, gamma, beta, epsilon) of the LayerNorm ending at the Add
    `out` (x * inv + (beta - mean * inv)), or None."""
    for scaled_name, shift_name in (out.input, reversed(out.input)):
        scaled, shift = g.op(scaled_name, "Mul"), g.op(shift_name, "Add")
        if scaled is None or shift is None:
            continue
        for inv_name in scaled.input:
            inv = g.op(inv_name, "Mul")
            x = g.other(scaled, inv_name)
            if inv is None or x is None:
                continue
            recip = next((g.op(name, "Reciprocal") for name in inv.input
                          if g.op(name, "Reciprocal")), None)
            shifted = next((g.op(name, "Mul") for name in shift.input if g.op(name, "Mul")),
                           None)
            if recip is None or shifted is None:
                continue
            gamma, beta = g.other(inv, recip.output[0]), g.other(shift, shifted.output[0])
            neg = next((g.op(name, "Neg") for name in shifted.input if g.op(name, "Neg")),
                       None)
            sqrt = g.op(recip.input[0], "Sqrt")
            plus = sqrt and g.op(sqrt.input[0], "Add")
            if not (neg and plus and gamma in g.constants and beta in g.constants
                    and g.other(shifted, neg.output[0]) == inv.output[0]):
                continue
            mean = g.producer.get(neg.input[0])
            var = next((g.producer.get(name) for name in plus.input
                        if _is_mean_of_last_axis(g.producer.get(name))), None)
            epsilon = var and g.scalar(g.other(plus, var.output[0]))
            square = var and g.op(var.input[0], "Mul")
            diffs = square and [g.op(name, "Sub") for name in square.input]
            if not (_is_mean_of_last_axis(mean) and mean.input[0] == x and epsilon is not None
                    and diffs and all(d is not None and list(d.input) == [x, mean.output[0]]
                                      for d in diffs)):
                continue
            nodes = [out, scaled, shift, inv, recip, sqrt, plus, var, square, shifted, neg,
                     mean] + [d for i, d in enumerate(diffs) if d not in diffs[:i]]
            return nodes, x, gamma, beta, epsilon
    return None


def fuse_layer_norms(model):
    """Replaces each traced LayerNorm by one `LayerNormalization`; returns the count."""
    g = Graph(model.graph)
    count = 0
    for out in list(model.graph.node):
        if out.op_type != "Add" or id(out) in g.removed:
            continue
        match = _layer_norm_at(g, out)
        if match is None:
            continue
        nodes, x, gamma, beta, epsilon = match
        inner = [name for node in nodes[1:] for name in node.output]
        if not all(g.only_used_by(name, nodes) for name in inner):
            continue
        g.replace(nodes, _onnx("helper").make_node(
            "LayerNormalization", [x, gamma, beta], [out.output[0]],
            name=f"{out.name}/LayerNormalization", axis=-1, epsilon=epsilon))
        count += 1
    g.commit()
    return count


def reorder_gelus(model):
    """Puts each traced exact GELU in ONNX Runtime's fusable order; returns the count."""
    g = Graph(model.graph)
    sqrt_two = None
    count = 0
    for erf in [node for node in model.graph.node if node.op_type == "Erf"]:
        scale = g.op(erf.input[0], "Mul")
        x = scale and next((name for name in scale.input
                            if abs((g.scalar(g.other(scale, name)) or 0) - SQRT_HALF) < 1e-6),
                           None)
        plus = g.consumers[erf.output[0]]
        plus = plus[0] if len(plus) == 1 and plus[0].op_type == "Add" else None
        half = plus and g.consumers[plus.output[0]]
        half = half[0] if half and len(half) == 1 and half[0].op_type == "Mul" else None
        times_x = half and g.consumers[half.output[0]]
        times_x = times_x[0] if times_x and len(times_x) == 1 and \
            times_x[0].op_type == "Mul" else None
        if not (x and plus and half and times_x
                and g.scalar(g.other(plus, erf.output[0])) == 1.0
                and g.scalar(g.other(half, plus.output[0])) == 0.5
                and g.other(times_x, half.output[0]) == x
                and len(g.consumers[scale.output[0]]) == 1):
            continue
        sqrt_two = sqrt_two or g.add_constant(f"{erf.name}/sqrt_two", SQRT_TWO)
        point_five = g.other(half, plus.output[0])
        scale.op_type, scale.input[:] = "Div", [x, sqrt_two]
        product = half.output[0]  # x * (1 + erf) now, then * 0.5 into the old output
        half.input[:] = [x, plus.output[0]]
        times_x.input[:] = [product, point_five]
        count += 1
    return count


ELEMENTWISE = {"Add", "Sub", "Mul", "Div", "Erf", "Tanh", "Relu", "Sigmoid", "Gelu"}


def _feeds_shape_of(g, name, x, width):
    """`name` is x.shape[:-1] + [width] computed as Keras's matmul computes it:
    Cast(Concat(Slice(Cast(Shape(x)), 0, -1), [width]))."""
    cast = g.op(name, "Cast")
    concat = cast and g.op(cast.input[0], "Concat")
    if not concat or len(concat.input) != 2:
        return False
    slice_ = g.op(concat.input[0], "Slice")
    tail = g.constants.get(concat.input[1])
    if not slice_ or tail is None or tail.reshape(-1).tolist() != [width]:
        return False
    bounds = [g.constants.get(value) for value in slice_.input[1:4]]
    if any(value is None for value in bounds) or [
            value.reshape(-1).tolist() for value in bounds] != [[0], [-1], [0]]:
        return False
    shape = g.producer.get(slice_.input[0])
    shape = g.producer.get(shape.input[0]) if shape is not None and \
        shape.op_type == "Cast" else shape
    return shape is not None and shape.op_type == "Shape" and shape.input[0] == x


def _dense_at(g, matmul):
    """(flatten Reshape, elementwise nodes, unflatten Reshape) of a Keras Dense on
    [..., K] inputs at `matmul` (Reshape to [-1, K], MatMul, elementwise, Reshape back),
    or None."""
    flatten = g.op(matmul.input[0], "Reshape")
    weight = g.constants.get(matmul.input[1])
    target = flatten and g.constants.get(flatten.input[1])
    if weight is None or weight.ndim != 2 or target is None or \
            target.reshape(-1).tolist() != [-1, weight.shape[0]] or \
            len(g.consumers[flatten.output[0]]) != 1:
        return None
    reached, frontier = {}, [matmul.output[0]]  # id -> every node downstream, to Reshapes
    while frontier:
        for user in g.consumers[frontier.pop()]:
            if id(user) not in reached:
                reached[id(user)] = user
                if user.op_type != "Reshape":
                    frontier.extend(user.output)
    chain = [node for node in reached.values() if node.op_type != "Reshape"]
    reshapes = [node for node in reached.values() if node.op_type == "Reshape"]
    inside = {matmul.output[0]} | {name for node in chain for name in node.output}

    def broadcasts(value):  # a constant that broadcasts the same on [-1, N] and [..., N]
        constant = g.constants.get(value)
        return constant is not None and constant.ndim <= 1 and \
            constant.size in (1, weight.shape[1])

    if len(reshapes) != 1 or reshapes[0].input[1] in inside or not all(
            node.op_type in ELEMENTWISE and all(
                value in inside or broadcasts(value) for value in node.input)
            for node in chain):
        return None
    unflatten = reshapes[0]
    if unflatten is None or not _feeds_shape_of(g, unflatten.input[1], flatten.input[0],
                                                 weight.shape[1]):
        return None
    return flatten, chain, unflatten


def unflatten_dense_layers(model):
    """Lets each Dense's MatMul take the [..., K] input itself (ONNX MatMul broadcasts)
    instead of a Reshape to [-1, K] and back; returns the count."""
    g = Graph(model.graph)
    count = 0
    for matmul in [node for node in model.graph.node if node.op_type == "MatMul"]:
        match = _dense_at(g, matmul)
        if match is None:
            continue
        flatten, _, unflatten = match
        if unflatten.output[0] in {value.name for value in model.graph.output}:
            continue  # its name must stay (not met in BERT)
        matmul.input[0] = flatten.input[0]
        result = unflatten.input[0]
        for user in g.consumers[unflatten.output[0]]:
            user.input[:] = [result if value == unflatten.output[0] else value
                             for value in user.input]
        g.remove([flatten, unflatten])
        count += 1
    g.commit()
    remove_dead_nodes(model)
    return count


def remove_dead_nodes(model):
    """Drops the nodes whose outputs nothing reads (the shape arithmetic of the removed
    Reshapes)."""
    outputs = {value.name for value in model.graph.output}
    while True:
        used = {name for node in model.graph.node for name in node.input} | outputs
        kept = [node for node in model.graph.node
                if any(name in used for name in node.output)]
        if len(kept) == len(model.graph.node):
            return
        del model.graph.node[:]
        model.graph.node.extend(kept)


def prune_initializers(model):
    """Drops the initializers no node reads any more; returns how many."""
    used = {name for node in model.graph.node for name in node.input}
    kept = [tensor for tensor in model.graph.initializer if tensor.name in used]
    count = len(model.graph.initializer) - len(kept)
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    return count


def optimize(model):
    """Applies every rewrite to the ModelProto in place; {rewrite: matches}."""
    counts = {"layer_norms": fuse_layer_norms(model), "gelus": reorder_gelus(model),
              "dense_layers": unflatten_dense_layers(model)}
    prune_initializers(model)
    return counts
