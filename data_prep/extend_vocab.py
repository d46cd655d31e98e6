"""Extend a released BERT's vocab with the words of a domain corpus that it splits most.

Example:
  bert-extend-vocab --input_file=pubmed_sentences.txt \\
    --init_checkpoint=uncased_L-12_H-768_A-12 --output_dir=/models/uncased_pubmed \\
    --mode=append --max_new_tokens=1000

Reads the corpus as bert-create-pretraining-data does (one-sentence-per-line text,
WikiExtractor output or a MediaWiki XML dump; see data_prep/wikipedia.py), counts its
words after the model's basic tokenization (its case: --do_lower_case, by default what
the vocab is), scores each word the vocab splits by frequency × (pieces - 1), and keeps
the best --max_new_tokens. Writes a new model folder:

- `--mode=unused`: the words take the `[unusedN]` lines in order; no shape changes, so
  any tool that reads the original model reads this one.
- `--mode=append`: the words are new lines after the last; the word-embedding matrix
  (`bert/embeddings/word_embeddings`), the masked-LM output bias
  (`cls/predictions/output_bias`, when present) and `vocab_size` in bert_config.json grow.

In both modes a new token's embedding row (and output bias) starts as the mean of the
rows of the pieces the old vocab gave that word; every other tensor is copied unchanged.
The folder holds vocab.txt, bert_config.json, bert_model.ckpt.*, extend_vocab_report.tsv
(each new token: id, frequency, old piece count, old pieces, score) and
extend_vocab_summary.json (tokens per sentence before and after). It is written under a
temporary name and renamed when complete. No randomness: the same input gives the same
folder.
"""

import collections
import dataclasses
import glob
import itertools
import json
import os
import shutil
import sys

from absl import flags
from absl import logging

from bert_tf import command_line
from bert_tf import fileio
from bert_tf import write_errors
from bert_tf.options import OptionGroup, compose, option
from bert_tf.tasks import option_groups
from bert_tf.text import vocab as vocab_lib
from data_prep import build_vocab
from data_prep import tool_options
from data_prep import vocab_extension
from data_prep import wikipedia

REPORT_FILE = "extend_vocab_report.tsv"
SUMMARY_FILE = "extend_vocab_summary.json"
REPORT_COLUMNS = ("token", "id", "frequency", "old_piece_count", "old_pieces", "score")


@dataclasses.dataclass(kw_only=True)
class VocabExtension(OptionGroup):
    """Which words are added, and where in the vocab."""
    mode: str = option(
        "unused", "unused: the new words take the [unusedN] lines (no shape change); "
        "append: new lines after the last (the embedding matrix and vocab_size grow).",
        choices=vocab_extension.MODES)
    max_new_tokens: int = option(
        0, "Most words to add (0: every free [unusedN] slot in unused mode; required "
        "with --mode=append).")
    min_frequency: int = option(5, "Words seen fewer times in the corpus are not added.")

    def check(self) -> None:
        """Refuses, before any file is read, values that cannot work.

        Raises:
          ValueError: naming the option and the values it accepts.
        """
        if self.max_new_tokens < 0:
            raise ValueError(f"--max_new_tokens={self.max_new_tokens}: expected >= 0")
        if self.mode == "append" and self.max_new_tokens == 0:
            raise ValueError("--mode=append needs --max_new_tokens=N (N >= 1): how many "
                             "rows the vocab and the embedding matrix grow by")
        if self.min_frequency < 1:
            raise ValueError(f"--min_frequency={self.min_frequency}: expected >= 1")


ExtendVocabOptions = compose(
    "ExtendVocabOptions", tool_options.CORPUS, option_groups.InitCheckpoint,
    option_groups.OutputDir, VocabExtension, tool_options.MaxSentences,
    option_groups.Overwrite, option_groups.CaseCheck,
    defaults={"do_lower_case": None},
    helps={"do_lower_case": "Lower case the input and strip accents; default: the model's "
           "case (true for a vocab without capitals, false for a cased one; true when the "
           "vocab is too small to tell).",
           "init_checkpoint": "The model folder to extend (google-research layout: "
           "vocab.txt, bert_config.json, bert_model.ckpt.*).",
           "output_dir": "The new model folder; must not exist or be empty (see "
           "--overwrite).",
           "overwrite": "Replace a non-empty --output_dir.",
           "allow_case_mismatch": "Run even when --do_lower_case does not fit the model's "
           "vocab or its released folder name (uncased / cased)."},
    checks=(tool_options.require("init_checkpoint", "output_dir"),),
    doc="Every option of bert-extend-vocab.")


def define_flags(flag_values=flags.FLAGS):
    """Defines the flags (not at import, so that other CLIs' flags never clash)."""
    command_line.define_flags(ExtendVocabOptions, __name__, flag_values)


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


def run(flag_values):
    """Runs the tool with parsed flags; returns the summary dict."""
    return extend_vocab(command_line.options_from_flags(ExtendVocabOptions, flag_values))


def run_main():
    define_flags()
    command_line.run_command(sys.modules[__name__], lambda: run(flags.FLAGS))


if __name__ == "__main__":
    run_main()
