"""conlleval against hand-computed counts for tricky chunk sequences."""

import subprocess
import sys

import pytest

from bert_tf.tasks.ner import conlleval

# token gold predicted; chunks worked out by hand in the comments.
MIXED = """\
w1 B-PER B-PER
w2 I-PER I-PER
w3 O O
w4 B-LOC B-ORG
w5 I-LOC I-ORG

w6 I-MISC B-MISC
w7 O O
w8 B-PER B-PER
w9 O I-PER
"""
# gold chunks: PER(w1-2) LOC(w4-5) MISC(w6: stray I- starts a chunk) PER(w8)      -> 4
# guessed:     PER(w1-2) ORG(w4-5) MISC(w6)                         PER(w8-9)    -> 4
# correct:     PER(w1-2), MISC(w6)                                               -> 2
# tags equal on w1 w2 w3 w7 w8                                                   -> 5/9
MIXED_REPORT = (
    "processed 9 tokens with 4 phrases; found: 4 phrases; correct: 2.\n"
    "accuracy:  55.56%; precision:  50.00%; recall:  50.00%; FB1:  50.00\n"
    "              LOC: precision:   0.00%; recall:   0.00%; FB1:   0.00  0\n"
    "             MISC: precision: 100.00%; recall: 100.00%; FB1: 100.00  1\n"
    "              ORG: precision:   0.00%; recall:   0.00%; FB1:   0.00  1\n"
    "              PER: precision:  50.00%; recall:  50.00%; FB1:  50.00  2\n")


def lines_of(text):
    return text.splitlines(keepends=True)


def test_report_matches_hand_computed_values():
    counts = conlleval.evaluate_lines(lines_of(MIXED))
    assert (counts.token_count, counts.found_correct, counts.found_guessed,
            counts.correct_chunks, counts.correct_tags) == (9, 4, 4, 2, 5)
    assert conlleval.format_report(counts) == MIXED_REPORT


def test_iob1_gold_and_iob2_prediction_give_the_same_chunks():
    # IOB1: I-PER I-PER is one chunk, B-PER after I-PER starts a second one; I-LOC after O
    # starts a chunk. IOB2 writes the same three chunks with B- on every start.
    gold = ["I-PER", "I-PER", "B-PER", "O", "I-LOC"]
    predicted = ["B-PER", "I-PER", "B-PER", "O", "B-LOC"]
    counts = conlleval.evaluate_sequences([gold], [predicted])
    assert (counts.found_correct, counts.found_guessed, counts.correct_chunks) == (3, 3, 3)
    assert counts.overall().f1 == 100.0
    # Token accuracy still compares the raw tags: only w2, w3, w4 agree.
    assert counts.correct_tags == 3


@pytest.mark.parametrize("gold, predicted, expected", [
    # Type change inside an I- run ends one chunk and starts another.
    (["I-PER", "I-LOC"], ["B-PER", "B-LOC"], (2, 2, 2)),
    # Prediction stops one token early: boundary differs, nothing correct.
    (["B-PER", "I-PER"], ["B-PER", "O"], (1, 1, 0)),
    # Prediction runs one token long.
    (["B-PER", "O"], ["B-PER", "I-PER"], (1, 1, 0)),
    # B-X B-X: two single-token chunks; predicting one two-token chunk is wrong twice.
    (["B-PER", "B-PER"], ["B-PER", "I-PER"], (2, 1, 0)),
    # Same span, wrong type.
    (["B-ORG", "I-ORG"], ["B-LOC", "I-LOC"], (1, 1, 0)),
    # I- of another type right after B-: a new chunk starts (stray I-).
    (["B-PER", "I-LOC"], ["B-PER", "B-LOC"], (2, 2, 2)),
    # IOE: E-X E-X are two chunks.
    (["E-PER", "E-PER"], ["E-PER", "E-PER"], (2, 2, 2)),
])
def test_chunk_rules(gold, predicted, expected):
    counts = conlleval.evaluate_sequences([gold], [predicted])
    assert (counts.found_correct, counts.found_guessed, counts.correct_chunks) == expected


def test_sentence_break_ends_a_chunk():
    # I-PER on the first token of the next sentence starts a new chunk.
    counts = conlleval.evaluate_lines(lines_of("a B-PER B-PER\n\nb I-PER I-PER\n"))
    assert (counts.found_correct, counts.correct_chunks, counts.token_count) == (2, 2, 2)
    # Without the break it is one chunk.
    counts = conlleval.evaluate_lines(lines_of("a B-PER B-PER\nb I-PER I-PER\n"))
    assert (counts.found_correct, counts.correct_chunks) == (1, 1)


def test_boundary_token_lines_are_not_counted():
    counts = conlleval.evaluate_lines(lines_of("a B-PER B-PER\n-X- O O\nb O O\n"))
    assert counts.token_count == 2 and counts.found_correct == 1


def test_hyphenated_types_and_untyped_tags():
    # Everything after the first hyphen is the type (2004 version of the script).
    counts = conlleval.evaluate_lines(lines_of("a B-ORG-X B-ORG-X\nb I-ORG-X I-ORG\n"))
    assert counts.found_correct_by_type == {"ORG-X": 1}
    assert counts.found_guessed_by_type == {"ORG-X": 1, "ORG": 1}
    assert counts.correct_chunks == 0


def test_raw_mode_makes_every_tag_a_chunk():
    counts = conlleval.evaluate_lines(lines_of("a PER PER\nb PER PER\nc x LOC\n"),
                                      raw=True, outside_tag="x")
    assert (counts.found_correct, counts.found_guessed, counts.correct_chunks) == (2, 3, 2)


def test_no_chunks_and_empty_input():
    counts = conlleval.evaluate_lines(lines_of("a O O\n"))
    assert conlleval.format_report(counts) == (
        "processed 1 tokens with 0 phrases; found: 0 phrases; correct: 0.\n"
        "accuracy: 100.00%; precision:   0.00%; recall:   0.00%; FB1:   0.00\n")
    assert conlleval.format_report(conlleval.evaluate_lines([])) == (
        "processed 0 tokens with 0 phrases; found: 0 phrases; correct: 0.\n")


def test_bad_lines_name_the_line():
    with pytest.raises(ValueError, match="line 2: unexpected number of features: 4"):
        conlleval.evaluate_lines(lines_of("a O O\nb c O O\n"))
    with pytest.raises(ValueError, match="line 1: .*at least a gold and a predicted tag"):
        conlleval.evaluate_lines(lines_of("O\n"))
    with pytest.raises(ValueError, match="sentence 0: 2 gold tags but 1 predicted"):
        conlleval.evaluate_sequences([["O", "O"]], [["O"]])


def test_command_line_prints_the_report(tmp_path):
    path = tmp_path / "output.txt"
    path.write_text(MIXED)
    with path.open() as stdin:
        result = subprocess.run([sys.executable, "-m", "bert_tf.tasks.ner.conlleval"],
                                stdin=stdin, capture_output=True, text=True, check=True)
    assert result.stdout == MIXED_REPORT
    with path.open() as stdin:
        latex = subprocess.run([sys.executable, "-m", "bert_tf.tasks.ner.conlleval", "-l"],
                               stdin=stdin, capture_output=True, text=True, check=True)
    assert "Overall &   50.00\\% &  50.00\\% &  50.00 \\\\\\hline" in latex.stdout
    bad = tmp_path / "bad.txt"
    bad.write_text("a O O\nb O\n")
    with bad.open() as stdin:
        result = subprocess.run([sys.executable, "-m", "bert_tf.tasks.ner.conlleval"],
                                stdin=stdin, capture_output=True, text=True)
    assert result.returncode == 1 and "line 2" in result.stderr


# Tab-separated, with a space inside a token: only a tab delimiter reads it right.
TABBED = "New York\tB-LOC\tB-LOC\nis\tO\tO\nbig\tO\tB-MISC\n"


@pytest.mark.parametrize("delimiter", ["\\t", "\\\\t", "\t"])
def test_command_line_tab_delimiter_as_the_shell_passes_it(tmp_path, delimiter):
    """issue 26: `-d '\\t'` (a backslash and a t from the shell, the conlleval.pl idiom)
    failed: the line was split on the two characters."""
    path = tmp_path / "tabbed.txt"
    path.write_text(TABBED)
    with path.open() as stdin:
        result = subprocess.run(
            [sys.executable, "-m", "bert_tf.tasks.ner.conlleval", "-d", delimiter],
            stdin=stdin, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == (
        "processed 3 tokens with 1 phrases; found: 2 phrases; correct: 1.")


@pytest.mark.parametrize("text, delimiter", [
    ("\\t", "\t"), ("\\\\t", "\t"), ("\\x1f", "\x1f"), ("\\|", "|"), ("\\\\", "\\"),
    (";", ";"), (" ", " "), ("a\\tb", "a\tb")])
def test_delimiter_escapes(text, delimiter):
    assert conlleval.decode_delimiter(text) == delimiter


def test_unknown_delimiter_escape_is_refused_naming_it(tmp_path):
    with pytest.raises(ValueError, match=r"-d '\\s': unknown escape \\s"):
        conlleval.decode_delimiter("\\s")
    result = subprocess.run([sys.executable, "-m", "bert_tf.tasks.ner.conlleval", "-d", ""],
                            input=TABBED, capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stderr.strip() == "conlleval: -d '': expected a delimiter such as ' ' or '\\t'"
