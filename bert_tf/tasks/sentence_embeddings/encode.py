"""Text file -> sentence vectors (`bert-encode`).

    summary = encode.run(EncodeOptions(input_file="texts.txt",
                                       output_file="vectors.npy,vectors.jsonl",
                                       init_checkpoint="all-MiniLM-L6-v2"))
    vectors, stats = encode.embed_texts(model, tokenizer, texts, max_seq_length=128)

Input (`read_texts`): a plain text file (one text a line), or with `text_column` a
`.tsv` / `.csv` file with a header (the column of that name) or a `.jsonl` file (the
field of that name); `id_column` names each text's id (default: its 0-based position,
the row of the `.npy`). Every text is checked before any work: an empty text, a
missing column or field, a duplicate id are refused naming file and line.

Output (`output_file`, comma-separated): `.npy`, float32 [N, H] in the input's order;
`.jsonl`, one `{"id": ..., "embedding": [...]}` a text, in the input's order (each
value written with 9 significant digits: the float32 exactly).

Batching: the model rows are sorted by length and cut into batches of `batch_size`,
each padded to its longest row (not to max_seq_length); the vectors go back to the
input's order. A text longer than max_seq_length - 2 tokens is cut (`long_text=
truncate`), or split into windows `doc_stride` tokens apart (`long_text=windows`,
`bert_tf.text.windows`): its vector is the mean of its windows' pooled vectors,
weighted by their token counts (the tokens each window's pooling ran over, [CLS] and
[SEP] included), then normalized when the model normalizes; a text that fits is one
window, with the vector truncation gives it.

The model (`bert_tf.tasks.sentence_embeddings.serving.load_sentence_encoder`): a
sentence-embeddings run, any run's encoder, a google-research, Hugging Face or
sentence-transformers folder; pooling, normalization, max_seq_length and case as the
run's config.json or the sentence-transformers folder say, unless given (a flag that
contradicts what the model was trained with is refused, naming both).
"""

import dataclasses
import json
import os
import time

import numpy as np
import tensorflow as tf

from bert_tf.io import fileio
from bert_tf.runs import run_context, text_files
from bert_tf.tasks.sentence_embeddings import serving
from bert_tf.tasks.sentence_embeddings.model import pool_tokens
from bert_tf.tasks.sentence_embeddings.options import LONG_TEXT_MODES, EncodeOptions
from bert_tf.text import tokenization, windows
from bert_tf.text import vocab as vocab_lib
from bert_tf.text.vocab import VocabFile
from bert_tf.train.progress import PhaseProgress

OUTPUT_EXTENSIONS = (".npy", ".jsonl")
RECORD_EXTENSIONS = (".tsv", ".csv", ".jsonl", ".json")
DEFAULT_MAX_SEQ_LENGTH = 128


# ------------------------------------------------------------------------- input
def _record_text(record, column, source, what):
    if column not in record:
        raise ValueError(f"{source}: no {what} {column!r} (has "
                         f"{', '.join(map(repr, record)) or 'nothing'})")
    value = record[column]
    if isinstance(value, (dict, list)) or value is None:
        raise ValueError(f"{source}: {what} {column!r} is {text_files.json_type(value)}, "
                         "expected a string")
    return value


def read_texts(path, text_column=None, id_column=None):
    """(texts, ids, sources) of `path` (see the module docstring).

    Raises:
      FileNotFoundError / ValueError: naming the file and line at fault.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"input_file not found: {path}")
    structured = path.endswith(RECORD_EXTENSIONS)
    if structured and not text_column:
        raise ValueError(f"{path} is a {os.path.splitext(path)[1]} file: pass --text_column "
                         "(the column or field that holds the texts)")
    if not structured and (text_column or id_column):
        raise ValueError(f"{path} is read as plain text, one text a line: --text_column / "
                         f"--id_column name columns of {', '.join(RECORD_EXTENSIONS)} files")
    texts, ids, sources = [], [], []
    if structured:
        rows = ((number, _record_text(record, text_column, f"{path}:{number}", "column"),
                 None if id_column is None else
                 _record_text(record, id_column, f"{path}:{number}", "id column"))
                for number, record in text_files.read_records(path))
    else:
        rows = ((number, line.rstrip("\r\n"), None)
                for number, line in fileio.iter_text_lines(path))
    first_line = {}
    for number, text, text_id in rows:
        source = f"{path}:{number}"
        if not str(text).strip():
            raise ValueError(f"{source}: empty text; every row needs a text to encode")
        text_id = len(texts) if text_id is None else text_id
        key = str(text_id)
        if key in first_line:
            raise ValueError(f"{source}: id {text_id!r} is also the id of "
                             f"{first_line[key]}; each text needs its own")
        first_line[key] = source
        texts.append(str(text))
        ids.append(text_id)
        sources.append(source)
    if not texts:
        raise ValueError(f"{path} holds no text to encode")
    return texts, ids, sources


def output_paths(output_file):
    """The output files of the comma-separated `output_file`, each .npy or .jsonl.

    Raises:
      ValueError: for another extension or none, naming it.
    """
    paths = [path.strip() for path in str(output_file or "").split(",") if path.strip()]
    if not paths:
        raise ValueError("--output_file is required: a .npy and / or a .jsonl file")
    for path in paths:
        if not path.endswith(OUTPUT_EXTENSIONS):
            raise ValueError(f"--output_file {path}: expected a .npy or .jsonl file")
        fileio.check_output_path(path)
    return paths


# ------------------------------------------------------------------------- rows
def model_rows(token_ids, max_seq_length, long_text="truncate", doc_stride=None):
    """The model rows of each text's ids: (rows, text index of each row, truncated
    count). A row is the ids between [CLS] and [SEP] (at most max_seq_length - 2)."""
    capacity = max_seq_length - 2
    rows, owners, cut = [], [], 0
    stride = doc_stride or windows.default_stride(max_seq_length, False)
    for index, ids in enumerate(token_ids):
        if long_text == "windows":
            pieces = [segments[0] for segments in
                      windows.window_segments(ids, None, max_seq_length, stride)]
        else:
            cut += len(ids) > capacity
            pieces = [list(ids[:capacity])]
        rows.extend(pieces)
        owners.extend([index] * len(pieces))
    return rows, np.asarray(owners, np.int64), cut


def _pack(rows, cls_id, sep_id):
    """int32 model inputs of `rows`, padded to the longest."""
    length = max(len(row) for row in rows) + 2
    input_ids = np.zeros((len(rows), length), np.int32)
    input_mask = np.zeros((len(rows), length), np.int32)
    for i, row in enumerate(rows):
        input_ids[i, :len(row) + 2] = [cls_id, *row, sep_id]
        input_mask[i, :len(row) + 2] = 1
    return {"input_ids": input_ids, "input_mask": input_mask,
            "segment_ids": np.zeros_like(input_ids)}


def l2_normalize(vectors):
    """Rows divided by their L2 norm (as tf.math.l2_normalize: epsilon 1e-12)."""
    norms = np.sqrt(np.maximum(np.sum(np.square(vectors), axis=-1, keepdims=True), 1e-12))
    return (vectors / norms).astype(np.float32)


def embed_texts(model, tokenizer, texts, max_seq_length, batch_size=32,
                 long_text="truncate", doc_stride=None, progress=None):
    """(float32 [N, H] vectors, stats) of `texts` (see the module docstring).

    Args:
      model: A `SentenceEncoder`.
      tokenizer: A `FullTokenizer` of its vocab.
      texts: Strings.
      max_seq_length: Tokens per row, [CLS] and [SEP] included.
      batch_size: Rows per model call.
      long_text: "truncate" or "windows".
      doc_stride: Windows' spacing (default: half a window).
      progress: A `PhaseProgress` counting rows (None: none).

    Returns:
      (vectors, stats): stats `rows`, `truncated` (texts cut), `windowed` (texts of
      more than one window).
    """
    if long_text not in LONG_TEXT_MODES:
        raise ValueError(f"long_text must be one of {', '.join(LONG_TEXT_MODES)}, got "
                         f"{long_text!r}")
    if doc_stride is not None:
        windows.check_stride(doc_stride, max_seq_length, False)
    vocab = tokenizer.vocab
    rows, owners, cut = model_rows(tokenizer.convert_texts_to_ids(list(texts)),
                                   max_seq_length, long_text, doc_stride)
    windowed = long_text == "windows"
    if progress is not None:
        progress.total = len(rows)

    spec = {name: tf.TensorSpec([None, None], tf.int32, name)
            for name in ("input_ids", "input_mask", "segment_ids")}

    @tf.function(autograph=False, input_signature=[spec])  # one trace, every shape
    def embed(features):
        outputs = model(features, training=False)
        if windowed:  # before normalization: the windows are averaged first
            return pool_tokens(outputs["sequence_output"], features["input_mask"],
                               model.pooling)
        return tf.cast(outputs["embedding"], tf.float32)

    order = sorted(range(len(rows)), key=lambda i: len(rows[i]))  # stable
    vectors = np.zeros((len(rows), model.config.hidden_size), np.float32)
    for first in range(0, len(order), batch_size):
        chosen = order[first:first + batch_size]
        features = _pack([rows[i] for i in chosen], vocab["[CLS]"], vocab["[SEP]"])
        vectors[chosen] = embed({k: tf.constant(v) for k, v in features.items()}).numpy()
        if progress is not None:
            progress.update(len(chosen))
    counts = np.bincount(owners, minlength=len(texts))
    stats = {"rows": len(rows), "truncated": int(cut),
             "windowed": int(np.sum(counts > 1))}
    if not windowed:
        return vectors, stats
    weights = np.asarray([len(row) + 2 for row in rows], np.float64)[:, None]
    totals = np.zeros((len(texts), vectors.shape[1]), np.float64)
    np.add.at(totals, owners, vectors * weights)
    mean = (totals / np.bincount(owners, weights[:, 0], len(texts))[:, None])
    mean = mean.astype(np.float32)
    return (l2_normalize(mean) if model.normalize else mean), stats


# ------------------------------------------------------------------------- output
def _vector_json(vector):
    return "[" + ",".join(f"{value:.9g}" for value in vector) + "]"


def write_outputs(paths, vectors, ids):
    """Writes each of `paths` (.npy or .jsonl), through a temporary file."""
    for path in paths:
        with fileio.atomic_output(path) as temporary:
            if path.endswith(".npy"):
                with open(temporary, "wb") as file:
                    np.save(file, vectors.astype(np.float32))
                continue
            with open(temporary, "w", encoding="utf-8") as file:
                for text_id, vector in zip(ids, vectors):
                    file.write(f'{{"id": {json.dumps(text_id)}, '
                               f'"embedding": {_vector_json(vector)}}}\n')


# ------------------------------------------------------------------------- settings
def _settle(name, given, trained, source, default):
    """The value of option `name`: `given` unless it contradicts `trained`."""
    if given is None:
        return default if trained is None else trained
    if trained is not None and given != trained:
        raise ValueError(f"--{name}={given} contradicts {source}, which says {name}="
                         f"{trained}: leave --{name} out to encode as the model was "
                         "trained")
    return given


def resolve_options(options):
    """`options` with pooling, normalize, do_lower_case and max_seq_length from the
    model's folder where not given, and its `ModelSettings`.

    Raises:
      ValueError: for a flag that contradicts the folder, naming both.
    """
    if not options.init_checkpoint:
        raise ValueError("--init_checkpoint is required")
    run_context.check_init_checkpoint(options.init_checkpoint)
    settings = serving.model_settings(options.init_checkpoint)
    source = settings.source or options.init_checkpoint
    values = {
        "pooling": _settle("pooling", options.pooling, settings.pooling, source,
                           serving.DEFAULT_POOLING),
        "normalize": _settle("normalize", options.normalize, settings.normalize, source,
                             False),
        "do_lower_case": _settle("do_lower_case", options.do_lower_case,
                                 settings.do_lower_case, source, True),
        "max_seq_length": options.max_seq_length or settings.max_seq_length
        or DEFAULT_MAX_SEQ_LENGTH}
    return dataclasses.replace(options, **values), settings


def load(options, settings, chosen_length=None):
    """(SentenceEncoder, FullTokenizer, options with max_seq_length settled) of resolved
    `options` (`resolve_options`), checked against each other: the vocab against the
    model's config and case, max_seq_length against its positions.

    Args:
      chosen_length: The max_seq_length the user gave (None: a default, which is then
        held within the model's max_position_embeddings).
    """
    # The model first: a folder that holds none is refused as such.
    model = serving.load_sentence_encoder(
        options.init_checkpoint, options.bert_config_file, options.pooling,
        options.normalize, options.allow_random_encoder, settings)
    config = model.config
    vocab_file = run_context.resolve_vocab_file(options.vocab_file, settings.weights)
    if not vocab_file:
        raise FileNotFoundError(f"no vocab.txt in {settings.weights}; pass --vocab_file")
    vocab = VocabFile.read(vocab_file)
    if not options.allow_case_mismatch:
        vocab_lib.check_case_matches(options.do_lower_case, vocab.tokens, vocab_file,
                                     options.init_checkpoint)
    vocab_lib.check_vocab_matches(len(vocab.tokens), vocab_file, config.vocab_size)
    if not (chosen_length or settings.max_seq_length):  # the default, within the model
        options = dataclasses.replace(options, max_seq_length=min(
            options.max_seq_length, config.max_position_embeddings))
    if options.max_seq_length > config.max_position_embeddings:
        raise ValueError(f"max_seq_length={options.max_seq_length} exceeds the model's "
                         f"max_position_embeddings={config.max_position_embeddings}")
    tokenizer = tokenization.FullTokenizer(vocab, do_lower_case=options.do_lower_case)
    return model, tokenizer, options


def run(options: EncodeOptions) -> dict:
    """Checks everything, loads the model, encodes the input and writes the outputs;
    returns the summary (`texts`, `rows`, `truncated`, `windowed`, `dimension`,
    `seconds`, `outputs`, `line`: the one-line summary)."""
    chosen_length = options.max_seq_length or None
    options, settings = resolve_options(options)
    options.check()
    paths = output_paths(options.output_file)
    fileio.check_outputs_apart(
        {"output_file": paths},
        {"input_file": options.input_file, "init_checkpoint": options.init_checkpoint,
         "vocab_file": options.vocab_file, "bert_config_file": options.bert_config_file})
    texts, ids, _ = read_texts(options.input_file, options.text_column, options.id_column)
    if options.doc_stride is not None:
        windows.check_stride(options.doc_stride, options.max_seq_length, False)
    model, tokenizer, options = load(options, settings, chosen_length)
    start = time.monotonic()
    progress = PhaseProgress("Encoding", unit="rows")
    vectors, stats = embed_texts(model, tokenizer, texts, options.max_seq_length,
                                  options.batch_size, options.long_text,
                                  options.doc_stride, progress)
    progress.finish()
    write_outputs(paths, vectors, ids)
    seconds = time.monotonic() - start
    long_texts = (f"{stats['windowed']} in several windows ({stats['rows']} rows)"
                  if options.long_text == "windows" else f"{stats['truncated']} truncated")
    line = (f"Encoded {len(texts)} texts ({long_texts}, max_seq_length "
            f"{options.max_seq_length}) into {vectors.shape[1]}-dimensional "
            f"{'normalized ' if model.normalize else ''}vectors ({model.pooling} pooling) "
            f"in {seconds:.1f}s ({len(texts) / max(seconds, 1e-9):.1f} texts/s): "
            f"{', '.join(paths)}")
    return dict(stats, texts=len(texts), dimension=int(vectors.shape[1]),
                seconds=seconds, outputs=paths, line=line)
