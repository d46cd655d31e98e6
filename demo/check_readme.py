"""Runs every bash-block command of README.md and docs/*.md, as written, on demo data.

The pages' commands name the files a user has: a released checkpoint folder
(`uncased_L-12_H-768_A-12`), a Wikipedia dump, GLUE's MRPC folder, CoNLL-2003, SQuAD
JSON. This script makes small stand-ins for them under --work_dir from what `make demo`
built (its pre-trained model, in the google-research layout, plays the released
checkpoint) and from demo/data, then runs each command with bash in --work_dir, with the
virtual environment's `bert-*` scripts first on PATH. Only two things change in a
command, and each change is printed:

* absolute output folders (`/data`, `/runs`, `/tmp`, `/models`) move under --work_dir;
* flags that ask for hardware or hours this machine does not have are overridden
  (`--num_train_steps`, `--num_gpus`; `--layers` of extract_features, since the
  stand-in model has 2 layers), appended after the command's own flags.

Pages are read in order: README.md, then the pages of docs/ in the order docs/README.md
links them, then any other docs/*.md (`pages()`); a command is printed with its page and
number (`[docs/finetuning.md 3] $ ...`). ```sh blocks are shown, not run. Commands that
need other machines (`docker`, `curl` to a server, a second worker host) are listed as
skipped, with the reason; a command identical to one run earlier (the README's examples
repeat the pages') is listed as repeated and not run again. An optional `[--flag ...]`
group is run as a second command with the group included. Exit status 1 if any command
fails.

    make demo && .venv/bin/python demo/check_readme.py      # or: make check-readme
"""

import argparse
import bz2
import csv
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from xml.sax.saxutils import escape

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA_DIR = os.path.join(REPO_ROOT, "demo", "data")
OUTPUT_ROOTS = ("data", "runs", "tmp", "models")

# Flags appended (absl keeps the last value) so that a command sized for a pod runs here.
PRETRAINING_OVERRIDES = ("--num_train_steps=4 --num_warmup_steps=1 --save_checkpoints_steps=2 "
                         "--iterations_per_loop=2 --train_batch_size=8 --max_eval_steps=2")
OVERRIDES = [
    (re.compile(r"--num_gpus=[1-9]\d*"), "--num_gpus=0"),
    (re.compile(r"--num_train_steps=\d{4,}"), PRETRAINING_OVERRIDES),
    (re.compile(r"--num_train_epochs=\d+"), "--num_train_epochs=1"),
    # The cased stand-in is the demo's uncased BERT under another name.
    (re.compile(r"--init_checkpoint=cased_L-12_H-768_A-12"),
     "--init_checkpoint=cased_L-12_H-768_A-12 --allow_case_mismatch"),
    # The stand-in checkpoint (the demo's BERT) has 2 layers, not 12.
    (re.compile(r"--layers=-1,-2,-3,-4"), "--layers=-1,-2"),
]
SKIPPED = {
    "make": "the README's own entry points (this script runs after `make demo`)",
    "docker": "needs Docker and the tensorflow/serving image",
    "curl": "needs a running TF Serving (the SavedModel is checked by saved_model_cli below)",
    "export": "a second worker host; tests/test_distribute.py runs two local workers",
    '"task":': "part of the TF_CONFIG example above",
}


DOCS_DIR = "docs"
DOCS_INDEX = os.path.join(DOCS_DIR, "README.md")


def pages(repo_root=REPO_ROOT):
    """The documentation pages whose commands run, relative to repo_root, in run order.

    README.md first (its examples make the records and the fine-tuned classifier that
    later pages read), then the docs pages in the order docs/README.md links them, then
    any other docs/*.md, sorted. docs/README.md itself comes last (an index, no commands).
    """
    docs_dir = os.path.join(repo_root, DOCS_DIR)
    found = sorted(f for f in os.listdir(docs_dir) if f.endswith(".md")) if os.path.isdir(
        docs_dir) else []
    ordered = []
    index_path = os.path.join(repo_root, DOCS_INDEX)
    if os.path.exists(index_path):
        with open(index_path, encoding="utf-8") as f:
            for target in re.findall(r"\]\(([\w.-]+\.md)(?:#[^)]*)?\)", f.read()):
                if target in found and target not in ordered and target != "README.md":
                    ordered.append(target)
    ordered += [f for f in found if f not in ordered and f != "README.md"]
    if "README.md" in found:
        ordered.append("README.md")
    return ["README.md"] + [f"{DOCS_DIR}/{name}" for name in ordered]


def all_commands(repo_root=REPO_ROOT):
    """(page, command) for every bash command of every page, in run order."""
    return [(page, command) for page in pages(repo_root)
            for command in readme_commands(os.path.join(repo_root, page))]


# A ```python block right after this line runs too (as `python -` in --work_dir).
RUN_PYTHON = "<!-- check-readme: run -->"


def readme_commands(readme_path):
    """A page's bash commands, continuation lines joined, comments dropped, and its
    marked Python examples (`RUN_PYTHON`) as `python -` commands, in page order."""
    with open(readme_path, encoding="utf-8") as f:
        text = f.read()
    commands = []
    pattern = rf"({re.escape(RUN_PYTHON)}\n)?```(bash|python)\n(.*?)```"
    for marked, language, block in re.findall(pattern, text, flags=re.S):
        if language == "python":
            if marked:
                commands.append(f"python - <<'PYTHON'\n{block}PYTHON")
            continue
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            line = line.split(" #")[0].strip()
            if line and not line.startswith("#"):
                commands.append(re.sub(r"\s+", " ", line))
    return commands


def variants(command):
    """The command without its `[...]` option group, then (if any) with it.

    The second variant writes to `<output_dir>_options`: a run directory records its
    settings and refuses a run with others (SQuAD v1.1 vs v2.0, say).
    """
    group = re.search(r"\s\[(--[^\]]+)\]", command)
    if not group:
        return [command]
    with_options = re.sub(r"(--output_dir=\S+)", r"\1_options",
                          command.replace(group.group(0), " " + group.group(1)))
    return [command.replace(group.group(0), ""), with_options]


def adapt(command, work_dir):
    """Moves absolute output folders under work_dir and applies OVERRIDES."""
    roots = "|".join(OUTPUT_ROOTS)
    adapted = re.sub(rf"(?<=[=\s'\"])/({roots})/", lambda m: f"{work_dir}/{m.group(1)}/",
                     command)
    adapted = re.sub(r"gs://bucket/", f"{work_dir}/data/", adapted)
    overrides = []
    for pattern, replacement in OVERRIDES:
        if pattern.search(adapted):
            overrides.append(replacement)
            adapted = pattern.sub("", adapted)
    return " ".join([adapted.strip(), *overrides]), overrides


def write_fixtures(demo_dir, work_dir):
    """Stand-ins for the files the README's commands read."""
    pretraining = os.path.join(demo_dir, "pretraining")
    for name in ("uncased_L-12_H-768_A-12", "cased_L-12_H-768_A-12",
                 "uncased_L-6_H-384_A-12"):  # the last: the sentence-embedding model's
        folder = os.path.join(work_dir, name)
        os.makedirs(folder, exist_ok=True)
        for file_name in os.listdir(pretraining):
            if file_name.startswith("bert_model.ckpt") or file_name == "bert_config.json":
                shutil.copy(os.path.join(pretraining, file_name), folder)
        shutil.copy(os.path.join(demo_dir, "vocab.txt"), folder)
    shutil.copy(os.path.join(pretraining, "bert_config.json"), work_dir)
    documents = _corpus_documents()
    _write_wiki_dump(documents[:60], os.path.join(work_dir,
                                                  "enwiki-latest-pages-articles1.xml.bz2"))
    _write_mrpc(os.path.join(work_dir, "glue_data", "MRPC"))
    _write_conll(documents, os.path.join(work_dir, "conll2003"))
    _write_squad(documents[:12], os.path.join(work_dir, "train-v1.1.json"), v2=False)
    _write_squad(documents[12:18], os.path.join(work_dir, "dev-v1.1.json"), v2=False)
    _write_squad(documents[12:18], os.path.join(work_dir, "dev-v2.0.json"), v2=True)
    _write_swag(documents, os.path.join(work_dir, "swagaf", "data"))
    _write_sentence_data(documents, work_dir)
    # The export examples start from a fine-tuned single-sentence classifier's output_dir
    # (/tmp/sst2): the demo's review classifier (labels negative, positive) plays it.
    shutil.copytree(os.path.join(demo_dir, "classifier"),
                    os.path.join(work_dir, "tmp", "sst2"), dirs_exist_ok=True)
    # docs/writing_a_task.md runs its example task module from the work folder.
    examples = os.path.join(REPO_ROOT, DOCS_DIR, "examples")
    for name in sorted(os.listdir(examples)) if os.path.isdir(examples) else []:
        shutil.copy(os.path.join(examples, name), work_dir)
    if os.path.isdir(examples):  # and finetuning.md's --config=docs/examples/...json
        shutil.copytree(examples, os.path.join(work_dir, DOCS_DIR, "examples"),
                        dirs_exist_ok=True)
    # bert-build-vocab's example reads a one-sentence-per-line corpus.
    shutil.copy(os.path.join(DATA_DIR, "corpus.txt"), os.path.join(work_dir, "corpus.txt"))
    with open(os.path.join(work_dir, "input.txt"), "w", encoding="utf-8") as f:
        f.write("Orcas is a town on the river.\nThe soup was cold. ||| The staff were kind.\n")


def _corpus_documents():
    with open(os.path.join(DATA_DIR, "corpus.txt"), encoding="utf-8") as f:
        return [block.split("\n") for block in f.read().strip().split("\n\n")]


def _write_wiki_dump(documents, path):
    pages = []
    for index, sentences in enumerate(documents):
        title = escape(sentences[0].split()[0])
        text = escape("'''" + sentences[0] + "''' " + " ".join(sentences[1:]))
        pages.append(f"<page><title>{title} {index}</title><ns>0</ns><id>{index + 1}</id>"
                     f"<revision><text>{text}</text></revision></page>")
    xml = ('<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" xml:lang="en">'
           "<siteinfo><dbname>enwiki</dbname></siteinfo>" + "".join(pages) + "</mediawiki>")
    with bz2.open(path, "wt", encoding="utf-8") as f:
        f.write(xml)


def _write_mrpc(folder):
    """MRPC layout: label 1 when both reviews have the same sentiment."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(DATA_DIR, "reviews", "train.tsv"), encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))[:160]
    partners = random.Random(0).sample(rows, len(rows))
    pairs = list(zip(rows[0::2], partners[0::2]))
    splits = {"train.tsv": pairs[:48], "dev.tsv": pairs[48:64], "test.tsv": pairs[64:80]}
    for name, split in splits.items():
        first = "Index" if name == "test.tsv" else "Quality"
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.write(f"{first}\t#1 ID\t#2 ID\t#1 String\t#2 String\n")
            for index, (a, b) in enumerate(split):
                value = index if name == "test.tsv" else int(a["label"] == b["label"])
                f.write(f"{value}\t{2 * index}\t{2 * index + 1}\t{a['sentence']}\t"
                        f"{b['sentence']}\n")


def _write_conll(documents, folder):
    """CoNLL-2003 IOB1 columns; capitalised words inside a sentence are I-LOC."""
    os.makedirs(folder, exist_ok=True)
    splits = {"eng.train": documents[:30], "eng.testa": documents[30:36],
              "eng.testb": documents[36:42]}
    for name, split in splits.items():
        lines = ["-DOCSTART- -X- -X- O", ""]
        for sentences in split:
            for sentence in sentences[:4]:
                for position, word in enumerate(re.findall(r"\w+|[^\w\s]", sentence)):
                    tag = "I-LOC" if position and word[0].isupper() else "O"
                    lines.append(f"{word} NN I-NP {tag}")
                lines.append("")
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")


def _write_squad(documents, path, v2):
    """Questions whose answer is the first number of the paragraph."""
    paragraphs = []
    for index, sentences in enumerate(documents):
        context = " ".join(sentences[:5])
        number = re.search(r"\d[\d,]*", context)
        qas = []
        if number:
            qas.append({"id": f"q{index}", "question": f"Which year or number is given for "
                        f"{sentences[0].split()[0]}?",
                        "answers": [{"text": number.group(0), "answer_start": number.start()}]})
            if v2:
                qas[-1]["is_impossible"] = False
        if v2:
            qas.append({"id": f"q{index}_none", "question": "What colour is the moon?",
                        "answers": [], "is_impossible": True})
        paragraphs.append({"context": context, "qas": qas})
    data = {"version": "v2.0" if v2 else "1.1",
            "data": [{"title": "demo", "paragraphs": paragraphs}]}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(data, f)


def _write_sentence_data(documents, work_dir):
    """STS-B's folder (pairs scored 0 .. 5: 5 for a sentence and itself cut short, down
    to 0 for sentences of other documents), question-answer pairs, a text file and a
    BEIR folder (queries: a document's first words; relevant: that document)."""
    sentences = [(index, s) for index, doc in enumerate(documents) for s in doc if s.strip()]
    rng = random.Random(1)
    folder = os.path.join(work_dir, "glue_data", "STS-B")
    os.makedirs(folder, exist_ok=True)
    for name, rows in (("train.tsv", sentences[:96]), ("dev.tsv", sentences[96:128])):
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.write("index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\t"
                    "sentence1\tsentence2\tscore\n")
            for row, (doc, text) in enumerate(rows):
                other_doc, other = rng.choice(sentences)
                pair, score = ((" ".join(text.split()[:-2]) or text, 5.0) if row % 2 else
                               (other, 1.0 if other_doc == doc else 0.0))
                f.write(f"{row}\tmain\tdemo\t2026\t{row}\tnone\tnone\t{text}\t{pair}\t"
                        f"{score}\n")
    with open(os.path.join(work_dir, "qa_pairs.jsonl"), "w", encoding="utf-8") as f:
        for doc in documents[:40]:
            f.write(json.dumps({"question": " ".join(doc[0].split()[:6]) + "?",
                                "answer": doc[0]}) + "\n")
    with open(os.path.join(work_dir, "texts.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(text for _, text in sentences[:20]) + "\n")
    beir = os.path.join(work_dir, "beir", "scifact")
    os.makedirs(os.path.join(beir, "qrels"), exist_ok=True)
    with open(os.path.join(beir, "corpus.jsonl"), "w", encoding="utf-8") as corpus, \
            open(os.path.join(beir, "queries.jsonl"), "w", encoding="utf-8") as queries, \
            open(os.path.join(beir, "qrels", "test.tsv"), "w", encoding="utf-8") as qrels:
        qrels.write("query-id\tcorpus-id\tscore\n")
        for index, doc in enumerate(documents[:30]):
            corpus.write(json.dumps({"_id": f"d{index}", "title": "",
                                     "text": " ".join(doc[:3])}) + "\n")
            queries.write(json.dumps({"_id": f"q{index}",
                                      "text": " ".join(doc[0].split()[:5])}) + "\n")
            qrels.write(f"q{index}\td{index}\t1\n")


def _write_swag(documents, folder):
    """SWAG's CSV layout: a sentence's first half, its next word, and four endings, the
    rest of that sentence among the rests of three others (the test file unlabelled)."""
    os.makedirs(folder, exist_ok=True)
    sentences = [words for sentences in documents for words in map(str.split, sentences)
                 if len(words) > 5]
    rng = random.Random(0)
    splits = {"train.csv": sentences[:48], "val.csv": sentences[48:64],
              "test.csv": sentences[64:72]}
    for name, split in splits.items():
        with open(os.path.join(folder, name), "w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["video-id", "fold-ind", "startphrase", "sent1", "sent2",
                             "gold-source", "ending0", "ending1", "ending2", "ending3"]
                            + ([] if name == "test.csv" else ["label"]))
            for index, words in enumerate(split):
                middle = len(words) // 2
                others = rng.sample([other for other in sentences if other is not words], 3)
                endings = [" ".join(other[len(other) // 2 + 1:]) for other in others]
                label = rng.randrange(4)
                endings.insert(label, " ".join(words[middle + 1:]))
                sent1 = " ".join(words[:middle])
                writer.writerow([f"demo-{index}", index, f"{sent1} {words[middle]}", sent1,
                                 words[middle], "gen", *endings]
                                + ([] if name == "test.csv" else [label]))


def after_command(command, work_dir):
    """Hands what one command made to a later command that expects it elsewhere."""
    if "bert-run-squad" in command and "--version_2_with_negative" in command:
        # `squad_eval dev-v2.0.json predictions.json --na-prob-file null_odds.json`
        for name in ("predictions.json", "null_odds.json"):
            shutil.copy(os.path.join(work_dir, "tmp", "squad_options", name), work_dir)
    if "bert-create-pretraining-data" in command:
        # The single-CPU example reads records/wiki.tfrecord.
        os.makedirs(os.path.join(work_dir, "records"), exist_ok=True)
        shard = sorted(f for f in os.listdir(os.path.join(work_dir, "data"))
                       if f.startswith("wiki128.tfrecord-"))[0]
        shutil.copy(os.path.join(work_dir, "data", shard),
                    os.path.join(work_dir, "records", "wiki.tfrecord"))


def run_all(commands, work_dir, log_dir):
    """Runs (page, command) pairs in order; returns (status, page, command) per run.

    status: "ok", "failed", "skipped" (needs another machine) or "repeated" (the same
    command ran earlier, from this page or another; it is not run twice).
    """
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep
               + os.environ.get("PATH", ""), TF_CPP_MIN_LOG_LEVEL="2")
    results = []
    seen = {}  # command -> its label, e.g. "[README.md 4]"
    numbers = {}
    current_page = None
    for page, original in commands:
        if page != current_page:
            current_page = page
            count = sum(1 for p, _ in commands if p == page)
            print(f"\n== {page}: {count} command{'s' if count != 1 else ''}", flush=True)
        numbers[page] = number = numbers.get(page, 0) + 1
        label = f"[{page} {number}]"
        skip = SKIPPED.get(original.split()[0])
        if skip:
            print(f"\n{label} skipped ({skip}):\n  $ {original}", flush=True)
            results.append(("skipped", page, original))
            continue
        if original in seen:
            print(f"\n{label} repeated: the same as {seen[original]}, not run again:\n"
                  f"  $ {original}", flush=True)
            results.append(("repeated", page, original))
            continue
        seen[original] = label
        for variant in variants(original):
            command, overrides = adapt(variant, work_dir)
            print(f"\n{label} $ {variant}", flush=True)
            if overrides:
                print(f"  overridden here: {' '.join(overrides)}", flush=True)
            slug = re.sub(r"[^\w.-]+", "_", page.replace(".md", ""))
            log_path = os.path.join(log_dir, f"{slug}_{number:02d}.log")
            start = time.time()
            with open(log_path, "a", encoding="utf-8") as log:
                log.write(f"$ {command}\n")
                log.flush()
                code = subprocess.run(["bash", "-c", command], cwd=work_dir, env=env,
                                      stdout=log, stderr=subprocess.STDOUT).returncode
            status = "ok" if code == 0 else f"FAILED (exit {code}; see {log_path})"
            print(f"  {status} in {time.time() - start:.0f} s", flush=True)
            if code == 0:
                after_command(variant, work_dir)
            results.append(("ok" if code == 0 else "failed", page, variant))
    return results


STATUSES = ("ok", "failed", "skipped", "repeated")


def summary(results, page_names):
    """Lines of counts per page and in all, e.g. `docs/serving.md: 4 ran, 0 failed, ...`."""
    def line(name, rows):
        counts = {status: sum(1 for r in rows if r[0] == status) for status in STATUSES}
        return (f"{name}: {counts['ok']} ran, {counts['failed']} failed, "
                f"{counts['skipped']} skipped, {counts['repeated']} repeated")
    lines = [line(page, [r for r in results if r[1] == page]) for page in page_names]
    lines.append(line(f"all {len(page_names)} pages", results))
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo_dir", default=os.path.join(REPO_ROOT, "demo_output"),
                        help="output of `make demo` (its pre-trained model and vocab)")
    parser.add_argument("--work_dir", default=os.path.join(REPO_ROOT, "demo_output",
                                                           "readme_check"))
    args = parser.parse_args()
    demo_dir, work_dir = os.path.abspath(args.demo_dir), os.path.abspath(args.work_dir)
    if not os.path.exists(os.path.join(demo_dir, "pretraining", "bert_model.ckpt.index")):
        sys.exit(f"check_readme: {demo_dir}/pretraining/bert_model.ckpt.* not found; run "
                 "`make demo` first (or pass --demo_dir).")
    shutil.rmtree(work_dir, ignore_errors=True)
    log_dir = os.path.join(work_dir, "logs")
    os.makedirs(log_dir)
    for root in OUTPUT_ROOTS:  # the folders a user's commands write into
        os.makedirs(os.path.join(work_dir, root), exist_ok=True)
    write_fixtures(demo_dir, work_dir)
    page_names = pages()
    print(f"Pages: {', '.join(page_names)}")
    results = run_all(all_commands(), work_dir, log_dir)
    print()
    for text in summary(results, page_names):
        print(text)
    print(f"work folder {work_dir}")
    failed = [(page, command) for status, page, command in results if status == "failed"]
    for page, command in failed:
        print(f"  failed ({page}): {command}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
