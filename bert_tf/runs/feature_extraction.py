"""Per-token activations of chosen layers as JSON lines (extract_features.py's logic).

    count = feature_extraction.extract_features(encoder, tokenizer, input_file,
                                                output_file, layers="-1,-2,-3,-4",
                                                max_seq_length=128, batch_size=32)

Input: one text a line, or a pair `text_a ||| text_b`. Output: one JSON object a line
in the layout of google-research/bert's extract_features.py:
`{"linex_index": i, "features": [{"token": t, "layers": [{"index": l, "values": [...]}]}]}`
(values rounded to 6 decimals; padding positions are left out).
"""

import json
import os
import re
import time

import numpy as np
import tensorflow as tf
from absl import logging

from bert_tf.io import fileio
from bert_tf.models import BertEncoder
from bert_tf.runs import run_config, run_context
from bert_tf.text import input_layout, tokenization
from bert_tf.text import vocab as vocab_lib
from bert_tf.text.vocab import VocabFile
from bert_tf.runs.feature_extraction_options import ExtractOptions
from bert_tf.weights import from_pretrained


def run(options: ExtractOptions) -> int:
    """Checks the options, loads the encoder and the vocab (once) and writes the
    features; returns the count."""
    options.check()
    if not os.path.isfile(options.input_file):  # before the model loads (seconds)
        raise FileNotFoundError(f"input_file not found: {options.input_file}")
    if options.distribution_strategy != "one_device" or options.num_gpus:
        logging.warning("extract_features runs on one device, as TensorFlow places it: "
                        "distribution_strategy=%s and num_gpus=%d are not used",
                        options.distribution_strategy, options.num_gpus)
    vocab_file = run_context.resolve_vocab_file(options.vocab_file, options.init_checkpoint)
    if not vocab_file:
        raise FileNotFoundError(f"no vocab.txt in {options.init_checkpoint}; pass "
                                "--vocab_file")
    fileio.check_outputs_apart(  # the output never replaces a file the run reads
        {"output_file": options.output_file},
        {"input_file": options.input_file, "vocab_file": vocab_file,
         "bert_config_file": options.bert_config_file})
    vocab = VocabFile.read(vocab_file)
    do_lower_case = lower_case(options)
    if not options.allow_case_mismatch:  # the runners' rule, before the model loads
        vocab_lib.check_case_matches(do_lower_case, vocab.tokens, vocab_file,
                                     options.init_checkpoint)
    tokenizer = tokenization.FullTokenizer(vocab, do_lower_case=do_lower_case)
    encoder = from_pretrained(BertEncoder, options.init_checkpoint,
                              config=options.bert_config_file,
                              allow_random_encoder=options.allow_random_encoder)
    vocab_lib.check_vocab_matches(len(vocab.tokens), vocab_file, encoder.config.vocab_size)
    return extract_features(encoder, tokenizer, options.input_file, options.output_file,
                            options.layers, options.max_seq_length, options.batch_size)


def lower_case(options) -> bool:
    """`do_lower_case`, else the case the run at init_checkpoint was trained with (its
    config.json), else True (the uncased released models)."""
    if options.do_lower_case is not None:
        return bool(options.do_lower_case)
    trained = run_config.trained_case(run_config.read(options.init_checkpoint))
    if trained is not None:
        logging.info("do_lower_case=%s, as the run at %s was trained", trained,
                     options.init_checkpoint)
        return bool(trained)
    return True


PAIR_PATTERN = re.compile(r"^(.*) \|\|\| (.*)$")


def read_examples(input_file):
    """(unique_id, text_a, text_b or None) for each line; an empty line is an empty text.

    Raises:
        FileNotFoundError, ValueError: naming the file (and line) at fault.
    """
    if not os.path.isfile(input_file):
        raise FileNotFoundError(f"input_file not found: {input_file}")
    examples = []
    for _, line in fileio.iter_text_lines(input_file):  # binary data refused, named
        match = PAIR_PATTERN.match(line.strip())
        text_a, text_b = (match.group(1), match.group(2)) if match else (line.strip(), None)
        examples.append((len(examples), text_a, text_b))
    return examples


def convert_examples(examples, tokenizer, max_seq_length):
    """Tokens `[CLS] a [SEP] (b [SEP])` per example and the padded int32 model inputs."""
    texts_a = tokenizer.tokenize_batch([text_a for _, text_a, _ in examples])
    pairs = [index for index, (_, _, text_b) in enumerate(examples) if text_b is not None]
    texts_b = dict(zip(pairs, tokenizer.tokenize_batch([examples[i][2] for i in pairs])))
    all_tokens = []
    arrays = {name: np.zeros((len(examples), max_seq_length), np.int32)
              for name in ("input_ids", "input_mask", "segment_ids")}
    for row, tokens_a in enumerate(texts_a):
        tokens, packed = input_layout.pack_tokens(
            input_layout.truncate_segments(tokens_a, texts_b.get(row), max_seq_length),
            tokenizer.convert_tokens_to_ids, max_seq_length)
        for array, values in zip(arrays.values(), packed):
            array[row] = values
        all_tokens.append(tokens)
    return all_tokens, arrays


def parse_layers(layers, num_layers):
    """Layer indexes from "-1,-2" and checks them against the model's depth."""
    try:
        indexes = [int(value) for value in str(layers).split(",") if value.strip()]
    except ValueError:
        raise ValueError(f"--layers must be comma-separated integers, got {layers!r}") from None
    bad = [index for index in indexes if not -num_layers <= index < num_layers]
    if not indexes or bad:
        raise ValueError(f"--layers {layers!r}: indexes must lie in [-{num_layers}, "
                         f"{num_layers - 1}] for a {num_layers}-layer model")
    return indexes


def feature_json(unique_id, tokens, activations, layer_indexes):
    """One output line: activations [len(layers), S, H] of one example."""
    features = []
    for position, token in enumerate(tokens):
        layers = [{"index": layer_index,
                   "values": [round(float(x), 6) for x in activations[slot, position]]}
                  for slot, layer_index in enumerate(layer_indexes)]
        features.append({"token": token, "layers": layers})
    return json.dumps({"linex_index": unique_id, "features": features})


def extract_features(encoder, tokenizer, input_file, output_file, layers="-1,-2,-3,-4",
                     max_seq_length=128, batch_size=32):
    """Writes the JSON lines of `input_file` to `output_file`. Returns the line count."""
    config = encoder.config
    layer_indexes = parse_layers(layers, config.num_hidden_layers)
    if not 2 <= max_seq_length <= config.max_position_embeddings:
        raise ValueError(f"max_seq_length must lie in [2, max_position_embeddings="
                         f"{config.max_position_embeddings}], got {max_seq_length}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    examples = read_examples(input_file)

    # Each batch runs up to its longest row: one trace for every length.
    @tf.function(autograph=False, input_signature=[{
        name: tf.TensorSpec([None, None], tf.int32, name)
        for name in ("input_ids", "input_mask", "segment_ids")}])
    def chosen_layers(features):
        outputs = encoder(features, training=False)["encoder_outputs"]
        return tf.stack([tf.cast(outputs[i], tf.float32) for i in layer_indexes], axis=1)

    start = time.time()
    with fileio.atomic_output(output_file) as temporary:
        with open(temporary, "w", encoding="utf-8") as writer:
            for first in range(0, len(examples), batch_size):
                batch = examples[first:first + batch_size]
                tokens, arrays = convert_examples(batch, tokenizer, max_seq_length)
                longest = max(len(row) for row in tokens)  # the rest is padding
                activations = chosen_layers({k: tf.constant(v[:, :longest])
                                             for k, v in arrays.items()})
                activations = activations.numpy()  # [B, len(layers), longest, H]
                for row, (unique_id, _, _) in enumerate(batch):
                    writer.write(feature_json(unique_id, tokens[row], activations[row],
                                              layer_indexes) + "\n")
                done = first + len(batch)
                if done % (batch_size * 50) < batch_size or done == len(examples):
                    logging.info("%d/%d lines, %.1f lines/s", done, len(examples),
                                 done / max(time.time() - start, 1e-9))
    logging.info("Wrote %d lines of features (layers %s) to %s", len(examples),
                 layer_indexes, output_file)
    return len(examples)
