"""Entity-level chunk evaluation exactly as CoNLL's `conlleval.pl` (2004-01-26 version).

Input lines hold whitespace-separated fields whose last two are the gold and the
predicted tag (`token ... gold predicted`); blank lines (or lines whose first field is
`-X-`) separate sentences. Tags are `B-TYPE`, `I-TYPE`, `E-TYPE`, `O` (and the `[` / `]`
single-token chunks of the original), so IOB1, IOB2 and IOE files are all read with the
script's own chunk start/end rules, stray `I-` tags included.

Command line, same options and report as the Perl script::

    python -m bert_tf.tasks.ner.conlleval [-l] [-r] [-d DELIM] [-o OTAG] < FILE

`-d '\t'` (the shell passes a backslash and a `t`) splits on tabs, as in the Perl script.

Library use::

    counts = evaluate_lines(open("predictions.txt"))
    print(format_report(counts), end="")
    counts.overall()  # -> ChunkScore(precision, recall, f1) in percent
"""

import dataclasses
import re
import sys
from typing import Iterable, Sequence

BOUNDARY = "-X-"
_TYPED_TAG = re.compile(r"^([^-]*)-(.*)$")


@dataclasses.dataclass(frozen=True)
class ChunkScore:
    """Precision, recall and F1 (FB1), all in percent."""
    precision: float
    recall: float
    f1: float


@dataclasses.dataclass
class ChunkCounts:
    """The counters of conlleval.pl after reading a whole file."""
    token_count: int = 0
    correct_tags: int = 0
    found_correct: int = 0
    found_guessed: int = 0
    correct_chunks: int = 0
    found_correct_by_type: dict = dataclasses.field(default_factory=dict)
    found_guessed_by_type: dict = dataclasses.field(default_factory=dict)
    correct_chunks_by_type: dict = dataclasses.field(default_factory=dict)

    @property
    def accuracy(self) -> float:
        """Token accuracy in percent (0 when no tokens)."""
        return 100.0 * self.correct_tags / self.token_count if self.token_count else 0.0

    def overall(self) -> ChunkScore:
        """Overall entity-level scores, computed as the Perl script does."""
        return _score(self.correct_chunks, self.found_guessed, self.found_correct)

    def by_type(self, chunk_type: str) -> ChunkScore:
        """Scores for one chunk type (e.g. `PER`)."""
        return _score(self.correct_chunks_by_type.get(chunk_type, 0),
                      self.found_guessed_by_type.get(chunk_type, 0),
                      self.found_correct_by_type.get(chunk_type, 0))

    def sorted_types(self) -> list:
        """Chunk types in the report order of conlleval.pl (duplicate quirk included)."""
        keys = sorted(list(self.found_correct_by_type) + list(self.found_guessed_by_type))
        types, last = [], None
        for key in keys:
            if not last or last != key:  # Perl: not($lastType) or $lastType ne $i
                types.append(key)
            last = key
        return types


def _score(correct: int, guessed: int, gold: int) -> ChunkScore:
    precision = 100.0 * correct / guessed if guessed > 0 else 0.0
    recall = 100.0 * correct / gold if gold > 0 else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return ChunkScore(precision, recall, f1)


def end_of_chunk(prev_tag: str, tag: str, prev_type: str, chunk_type: str) -> bool:
    """True when a chunk ended between the previous and the current word."""
    pair = (prev_tag, tag)
    if pair in {("B", "B"), ("B", "O"), ("I", "B"), ("I", "O"),
                ("E", "E"), ("E", "I"), ("E", "O")}:
        return True
    if prev_tag not in ("O", ".") and prev_type != chunk_type:
        return True
    return prev_tag in ("]", "[")


def start_of_chunk(prev_tag: str, tag: str, prev_type: str, chunk_type: str) -> bool:
    """True when a chunk started between the previous and the current word."""
    pair = (prev_tag, tag)
    if pair in {("B", "B"), ("I", "B"), ("O", "B"), ("O", "I"),
                ("E", "E"), ("E", "I"), ("O", "E")}:
        return True
    if tag not in ("O", ".") and prev_type != chunk_type:
        return True
    return tag in ("[", "]")


def _split_tag(tag: str):
    match = _TYPED_TAG.match(tag)
    return (match.group(1), match.group(2)) if match else (tag, "")


def _increment(table: dict, key: str) -> None:
    table[key] = table.get(key, 0) + 1


class _Evaluator:
    """Line-by-line state machine of conlleval.pl."""

    def __init__(self, delimiter=None, raw=False, outside_tag="O"):
        self.delimiter, self.raw, self.outside_tag = delimiter, raw, outside_tag
        self.counts = ChunkCounts()
        self.num_features = -1
        self.in_correct = False
        self.last_correct, self.last_correct_type = "O", ""
        self.last_guessed, self.last_guessed_type = "O", ""

    def _fields(self, line: str, line_number: int) -> list:
        if self.delimiter is None:
            fields = line.split()
        else:
            fields = line.split(self.delimiter)
            while fields and fields[-1] == "":  # Perl's split drops trailing empties
                fields.pop()
        if self.num_features < 0:
            self.num_features = len(fields) - 1
        elif self.num_features != len(fields) - 1 and fields:
            raise ValueError(
                f"line {line_number}: unexpected number of features: {len(fields)} "
                f"({self.num_features + 1} expected)")
        if not fields or fields[0] == BOUNDARY:
            fields = [BOUNDARY, "O", "O"]
        if len(fields) < 2:
            raise ValueError(f"line {line_number}: unexpected number of features in line "
                             f"{line!r}: need at least a gold and a predicted tag")
        if self.raw:
            for index in (-1, -2):
                if fields[index] == self.outside_tag:
                    fields[index] = "O"
                if fields[index] != "O":
                    fields[index] = "B-" + fields[index]
        return fields

    def add_line(self, line: str, line_number: int = 0) -> None:
        """Feeds one input line (without its newline)."""
        fields = self._fields(line, line_number)
        guessed, guessed_type = _split_tag(fields[-1])
        correct, correct_type = _split_tag(fields[-2])
        first_item = fields[0]
        if first_item == BOUNDARY:
            guessed = "O"
        self._update(correct, correct_type, guessed, guessed_type, first_item == BOUNDARY)

    def _update(self, correct, correct_type, guessed, guessed_type, is_boundary):
        counts = self.counts
        gold_end = end_of_chunk(self.last_correct, correct, self.last_correct_type, correct_type)
        guess_end = end_of_chunk(self.last_guessed, guessed, self.last_guessed_type,
                                 guessed_type)
        if self.in_correct:
            if gold_end and guess_end and self.last_guessed_type == self.last_correct_type:
                self.in_correct = False
                counts.correct_chunks += 1
                _increment(counts.correct_chunks_by_type, self.last_correct_type)
            elif gold_end != guess_end or guessed_type != correct_type:
                self.in_correct = False
        gold_start = start_of_chunk(self.last_correct, correct, self.last_correct_type,
                                    correct_type)
        guess_start = start_of_chunk(self.last_guessed, guessed, self.last_guessed_type,
                                     guessed_type)
        if gold_start and guess_start and guessed_type == correct_type:
            self.in_correct = True
        if gold_start:
            counts.found_correct += 1
            _increment(counts.found_correct_by_type, correct_type)
        if guess_start:
            counts.found_guessed += 1
            _increment(counts.found_guessed_by_type, guessed_type)
        if not is_boundary:
            if correct == guessed and guessed_type == correct_type:
                counts.correct_tags += 1
            counts.token_count += 1
        self.last_guessed, self.last_correct = guessed, correct
        self.last_guessed_type, self.last_correct_type = guessed_type, correct_type

    def finish(self) -> ChunkCounts:
        """Closes the last chunk and returns the counts."""
        if self.in_correct:
            self.counts.correct_chunks += 1
            _increment(self.counts.correct_chunks_by_type, self.last_correct_type)
            self.in_correct = False
        return self.counts


def evaluate_lines(lines: Iterable[str], delimiter=None, raw=False,
                   outside_tag="O") -> ChunkCounts:
    """Evaluates `token ... gold predicted` lines as conlleval.pl does.

    Args:
      lines: input lines (newlines and a trailing carriage return are stripped).
      delimiter: field separator; None splits on any whitespace.
      raw: the `-r` option: tags carry no B-/I- prefix, every token is its own chunk.
      outside_tag: the `-o` option: the tag that means outside any chunk.

    Raises:
      ValueError: naming the line, when the field count changes or is below two.
    """
    evaluator = _Evaluator(delimiter, raw, outside_tag)
    for line_number, line in enumerate(lines, start=1):
        evaluator.add_line(line.rstrip("\n").rstrip("\r"), line_number)
    return evaluator.finish()


def evaluate_sequences(gold: Sequence[Sequence[str]],
                       predicted: Sequence[Sequence[str]]) -> ChunkCounts:
    """Evaluates sentences of gold and predicted tags (a blank line between sentences)."""
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted")
    evaluator = _Evaluator()
    for index, (gold_tags, predicted_tags) in enumerate(zip(gold, predicted)):
        if len(gold_tags) != len(predicted_tags):
            raise ValueError(f"sentence {index}: {len(gold_tags)} gold tags but "
                             f"{len(predicted_tags)} predicted")
        for gold_tag, predicted_tag in zip(gold_tags, predicted_tags):
            evaluator.add_line(f"w {gold_tag} {predicted_tag}")
        evaluator.add_line("")
    return evaluator.finish()


def format_report(counts: ChunkCounts) -> str:
    """The plain-text report of conlleval.pl, figures with two decimals."""
    lines = [f"processed {counts.token_count} tokens with {counts.found_correct} phrases; "
             f"found: {counts.found_guessed} phrases; correct: {counts.correct_chunks}.\n"]
    if counts.token_count > 0:
        score = counts.overall()
        lines.append(f"accuracy: {counts.accuracy:6.2f}%; precision: {score.precision:6.2f}%; "
                     f"recall: {score.recall:6.2f}%; FB1: {score.f1:6.2f}\n")
    for chunk_type in counts.sorted_types():
        score = counts.by_type(chunk_type)
        guessed = counts.found_guessed_by_type.get(chunk_type, 0)
        lines.append(f"{chunk_type:>17}: precision: {score.precision:6.2f}%; "
                     f"recall: {score.recall:6.2f}%; FB1: {score.f1:6.2f}  {guessed}\n")
    return "".join(lines)


def format_latex_report(counts: ChunkCounts) -> str:
    """The `-l` LaTeX table of conlleval.pl."""
    parts = ["        & Precision &  Recall  & F$_{\\beta=1} \\\\\\hline"]
    for chunk_type in counts.sorted_types():
        score = counts.by_type(chunk_type)
        parts.append(f"\n{chunk_type:<7} &  {score.precision:6.2f}\\% & "
                     f"{score.recall:6.2f}\\% & {score.f1:6.2f} \\\\")
    parts.append("\\hline\n")
    score = counts.overall()
    parts.append(f"Overall &  {score.precision:6.2f}\\% & {score.recall:6.2f}\\% & "
                 f"{score.f1:6.2f} \\\\\\hline\n")
    return "".join(parts)


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f", "v": "\v"}
_ESCAPE = re.compile(r"\\+(x[0-9a-fA-F]{2}|.)", re.DOTALL)


def decode_delimiter(text: str) -> str:
    """The `-d` field separator, its backslash escapes decoded as conlleval.pl's regex
    split reads them: `-d '\\t'` is a tab (also `\\n \\r \\f \\v`, and `\\xHH` a code
    point), a backslash before a punctuation mark is that mark (`'\\|'` is `|`, `'\\\\'` a
    backslash). An escape doubled by one more level of quoting (`'\\\\t'`) is the same.

    Raises:
      ValueError: an empty delimiter, or a letter escape other than these (`\\s`, `\\d`:
        a field separator is a string here, not a pattern).
    """
    def decode(match):
        escape = match.group(1)
        if escape[0] == "x" and len(escape) == 3:
            return chr(int(escape[1:], 16))
        if escape in _ESCAPES:
            return _ESCAPES[escape]
        if escape.isalnum():
            raise ValueError(f"-d '{text}': unknown escape \\{escape}; expected a "
                             "delimiter such as ' ', '\\t', ';' or '\\x1f'")
        return escape

    if not text:
        raise ValueError("-d '': expected a delimiter such as ' ' or '\\t'")
    return _ESCAPE.sub(decode, text)


def _parse_args(argv: Sequence[str]) -> dict:
    options = dict(latex=False, raw=False, delimiter=None, outside_tag="O")
    args = list(argv)
    while args and args[0].startswith("-"):
        flag = args.pop(0)
        if flag == "-l":
            options["latex"] = True
        elif flag == "-r":
            options["raw"] = True
        elif flag in ("-d", "-o"):
            if not args:
                raise SystemExit(f"conlleval: {flag} requires an argument")
            value = args.pop(0)
            if flag == "-o":
                options["outside_tag"] = value
            else:
                try:
                    options["delimiter"] = decode_delimiter(value)
                except ValueError as error:
                    raise SystemExit(f"conlleval: {error}") from None
        else:
            raise SystemExit(f"conlleval: unknown argument {flag}")
    if args:
        raise SystemExit("conlleval: unexpected command line argument (input is read "
                         "from stdin: python -m bert_tf.tasks.ner.conlleval < FILE)")
    return options


def main(argv: Sequence[str] = None) -> int:
    """Command-line entry point; returns the exit status."""
    options = _parse_args(sys.argv[1:] if argv is None else argv)
    try:
        counts = evaluate_lines(sys.stdin, options["delimiter"], options["raw"],
                                options["outside_tag"])
    except ValueError as error:
        print(f"conlleval: stdin {error}", file=sys.stderr)
        return 1
    report = format_latex_report(counts) if options["latex"] else format_report(counts)
    sys.stdout.write(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
