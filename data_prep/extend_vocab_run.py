"""The steps of bert-extend-vocab (`data_prep.extend_vocab`): what the command runs once
its flags are parsed. It imports TensorFlow (through `vocab_extension`, which reads and
writes the checkpoint); the command module imports only its options, so that `--help`
imports none.

    summary = extend_vocab_run.extend_vocab(ExtendVocabOptions(...))
"""

import collections
import dataclasses
import glob
import itertools
import json
import os
import shutil

from absl import logging

from bert_tf.io import fileio
from bert_tf.io import write_errors
from bert_tf.text import vocab as vocab_lib
from data_prep import build_vocab
from data_prep import vocab_extension
from data_prep import wikipedia
from data_prep.extend_vocab import ExtendVocabOptions

REPORT_FILE = "extend_vocab_report.tsv"
SUMMARY_FILE = "extend_vocab_summary.json"
REPORT_COLUMNS = ("token", "id", "frequency", "old_piece_count", "old_pieces", "score")


def model_case(options: ExtendVocabOptions, model: vocab_extension.ModelFolder) -> bool:
    """--do_lower_case, or the model's case when it is not given; checked against the
    vocab and a released folder's name unless --allow_case_mismatch.

    Raises:
      ValueError: naming the flag, the vocab or folder and what they are.
    """
    do_lower_case = options.do_lower_case
    if do_lower_case is None:
        case = vocab_lib.vocab_case(model.vocab.tokens)
        do_lower_case = case != "cased"
        if case is None:
            logging.warning("%s is too small or mixed to tell its case: lower-casing (pass "
                            "--do_lower_case=false for a cased model)", model.vocab.path)
    if not options.allow_case_mismatch:
        vocab_lib.check_case_matches(do_lower_case, model.vocab.tokens, model.vocab.path,
                                     model.folder)
    return do_lower_case


def check_output_dir(options: ExtendVocabOptions) -> None:
    """Refuses an --output_dir that is remote, a file, the model folder itself, or a
    non-empty folder without --overwrite.

    Raises:
      ValueError: naming the folder and what is wrong.
    """
    output_dir = options.output_dir
    if "://" in output_dir:
        raise ValueError(f"output_dir {output_dir!r}: expected a local folder")
    fileio.check_output_dir(output_dir)
    # Not the model folder, nor a folder holding it or the corpus (--overwrite would
    # remove them), nor inside them.
    fileio.check_outputs_apart(
        {"output_dir": output_dir},
        {"init_checkpoint": options.init_checkpoint,
         "input_file": wikipedia.resolve_input_files(options.input_file)})
    if os.path.isdir(output_dir) and os.listdir(output_dir) and not options.overwrite:
        raise ValueError(f"output_dir {output_dir!r} exists and is not empty: pass "
                         "--overwrite to replace it, or name a new folder")


def tokens_to_add(options: ExtendVocabOptions, model: vocab_extension.ModelFolder) -> int:
    """How many words at most: --max_new_tokens, or every free [unusedN] slot.

    Raises:
      ValueError: unused mode with more tokens than free [unusedN] slots, or none.
    """
    if options.mode == "append":
        return options.max_new_tokens
    free = len(vocab_extension.free_unused_ids(list(model.vocab.tokens)))
    vocab_extension.check_unused_room(model, options.max_new_tokens, free)
    return options.max_new_tokens or free


def _counted_sentences(documents, texts):
    """The sentences of `documents`, counting documents and sentences into `texts`."""
    for document in documents:
        texts["documents"] += 1
        for sentence in document:
            texts["sentences"] += 1
            yield sentence


def count_corpus(options: ExtendVocabOptions, do_lower_case: bool):
    """(word -> count, Counter of documents and sentences read, Counter of skips)."""
    skipped, texts = collections.Counter(), collections.Counter()
    documents = wikipedia.iter_documents(options.input_file, options.input_format,
                                         stats=skipped, language=options.language)
    sentences = _counted_sentences(documents, texts)
    if options.max_sentences:
        sentences = itertools.islice(sentences, options.max_sentences)
    counts = build_vocab.count_words(sentences, do_lower_case)
    return counts, texts, skipped


def nothing_to_add(options: ExtendVocabOptions, model, counts) -> ValueError:
    """The error for a corpus with no word to add."""
    return ValueError(
        f"input_file {options.input_file}: nothing to add: no word seen at least "
        f"--min_frequency={options.min_frequency} times is split into pieces by "
        f"{model.vocab.path} ({len(counts)} distinct words counted); no output written")


def extend_vocab(options: ExtendVocabOptions) -> dict:
    """Reads the corpus, ranks its words and writes the extended model folder.

    Returns:
      The summary dict (also written as extend_vocab_summary.json).
    Raises:
      ValueError, FileNotFoundError: bad options, a missing or inconsistent model
        folder, a missing corpus, or a corpus with nothing to add (no output written).
    """
    options.check()
    model = vocab_extension.ModelFolder.read(options.init_checkpoint)
    do_lower_case = model_case(options, model)
    check_output_dir(options)  # a missing corpus too, before any work
    limit = tokens_to_add(options, model)
    counts, texts, skipped = count_corpus(options, do_lower_case)
    ranked = vocab_extension.rank_words(counts, model.vocab.tokens, do_lower_case,
                                        options.min_frequency)
    if not ranked:
        raise nothing_to_add(options, model, counts)
    chosen = ranked[:limit]
    if len(chosen) < limit:
        logging.warning("only %d words qualify (--max_new_tokens=%d)", len(chosen), limit)
    ids = vocab_extension.new_token_ids(model, len(chosen), options.mode)
    tokens = vocab_extension.extended_vocab(list(model.vocab.tokens), ids,
                                            [word.word for word in chosen])
    summary = make_summary(options, model, counts, texts, tokens, ranked, chosen)
    summary.update(do_lower_case=do_lower_case, skipped=dict(skipped))
    write_model_folder(options, model, tokens, ids, chosen, summary)
    log_summary(summary)
    return summary


def make_summary(options, model, counts, texts, tokens, ranked, chosen) -> dict:
    """What the run did, and how much shorter the corpus tokenizes with the new vocab."""
    before = vocab_extension.corpus_tokens(counts, model.vocab.tokens)
    after = vocab_extension.corpus_tokens(
        counts, {token: index for index, token in enumerate(tokens)})
    sentences = max(texts["sentences"], 1)
    return {
        "init_checkpoint": model.folder, "output_dir": options.output_dir,
        "mode": options.mode, "added_tokens": len(chosen), "candidates": len(ranked),
        "vocab_size_before": model.config.vocab_size,
        "vocab_size_after": max(model.config.vocab_size, len(tokens)),
        "documents": texts["documents"], "sentences": texts["sentences"],
        "distinct_words": len(counts), "tokens_before": before, "tokens_after": after,
        "tokens_per_sentence_before": round(before / sentences, 4),
        "tokens_per_sentence_after": round(after / sentences, 4),
        "fewer_tokens_percent": round(100.0 * (before - after) / max(before, 1), 3),
    }


def report_text(ids, chosen) -> str:
    """extend_vocab_report.tsv: a header line, then one line per new token."""
    lines = ["\t".join(REPORT_COLUMNS)]
    for index, word in zip(ids, chosen):
        lines.append("\t".join(map(str, (word.word, index, word.frequency, len(word.pieces),
                                          " ".join(word.pieces), word.score))))
    return "\n".join(lines) + "\n"


def write_model_folder(options, model, tokens, ids, chosen, summary) -> None:
    """Writes the new folder under a temporary name, then renames it onto --output_dir
    (replacing what --overwrite allows); a failed write leaves nothing behind."""
    output_dir = os.path.realpath(options.output_dir)  # a link's target; the link stays
    _remove_stale_temporaries(output_dir)
    temporary = fileio.temporary_path(output_dir)
    try:
        os.makedirs(temporary)
        with open(os.path.join(temporary, "vocab.txt"), "w", encoding="utf-8") as file:
            file.write("".join(token + "\n" for token in tokens))
        config = dataclasses.replace(model.config, vocab_size=summary["vocab_size_after"])
        config.to_json_file(os.path.join(temporary, "bert_config.json"))
        tensors = vocab_extension.extended_tensors(
            model.checkpoint, ids, [word.piece_ids for word in chosen])
        vocab_extension.save_tensors(
            os.path.join(temporary, vocab_extension.CHECKPOINT_NAME), tensors)
        with open(os.path.join(temporary, REPORT_FILE), "w", encoding="utf-8") as file:
            file.write(report_text(ids, chosen))
        with open(os.path.join(temporary, SUMMARY_FILE), "w", encoding="utf-8") as file:
            file.write(json.dumps(summary, indent=2, sort_keys=True) + "\n")
        fileio.apply_mode(temporary)
        _replace_folder(temporary, output_dir)
    except BaseException as error:
        shutil.rmtree(temporary, ignore_errors=True)
        # a file too large, a full disk, a read-only folder: one line naming the file
        raise write_errors.classify(error, os.path.dirname(output_dir)) or error


def _replace_folder(source, target) -> None:
    """Renames folder `source` onto `target`, removing what `target` held."""
    if os.path.isdir(target):
        old = f"{target}.old-{os.getpid()}"
        os.replace(target, old)
        os.replace(source, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.replace(source, target)


def _remove_stale_temporaries(output_dir) -> None:
    """Removes `<output_dir>.tmp-<pid>` folders of runs that were killed."""
    for path in glob.glob(glob.escape(output_dir + fileio.TEMPORARY_MARKER) + "*"):
        pid = path.rsplit(fileio.TEMPORARY_MARKER, 1)[1]
        if pid.isdigit() and not fileio.process_is_running(int(pid)):
            shutil.rmtree(path, ignore_errors=True)


def log_summary(summary) -> None:
    """Logs the tokens added and how much shorter the corpus tokenizes."""
    logging.info(
        "added %d tokens (%s mode; %d words qualified); vocab_size %d -> %d; wrote %s",
        summary["added_tokens"], summary["mode"], summary["candidates"],
        summary["vocab_size_before"], summary["vocab_size_after"], summary["output_dir"])
    logging.info(
        "the corpus (%d sentences) tokenizes into %d tokens instead of %d (%.2f%% fewer): "
        "%.2f tokens per sentence instead of %.2f", summary["sentences"],
        summary["tokens_after"], summary["tokens_before"], summary["fewer_tokens_percent"],
        summary["tokens_per_sentence_after"], summary["tokens_per_sentence_before"])
