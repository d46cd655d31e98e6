"""Benchmark of create_pretraining_data: instances/s and peak RSS, side by side with the original.

The English Wikipedia dump slice is turned into one-sentence-per-line text first
(untimed, cached in --work_dir); then the CLI runs as a subprocess on that text and on
the text repeated --repeat times, with max_seq_length 128 and dupe_factor 5.

With --original (google-research/bert's create_pretraining_data.py run unchanged by
../shared/bench/run_original_cpd.py), only the repeated text is used: the original
runs first, then this tool at each --workers, both timed the same way (whole command),
and the ratio of instances/s is printed:

  .venv/bin/python bench/pretraining_data_bench.py --original --repeat=4 --workers=2

Reported per run: instances, wall seconds of the whole command (Python and TensorFlow
start-up included) and instances/s on it, the in-run rate the tool logs, the CPU
seconds of the whole process tree and instances per CPU second (steadier than wall time
on a shared machine), the peak RSS of
the largest process and the peak of the summed RSS of the whole process tree (sampled
every 20 ms; the sum counts pages shared between processes more than once).

  .venv/bin/python bench/pretraining_data_bench.py --workers=1,2 --repeat=10
"""

import argparse
import json
import os
import pathlib
import re
import resource
import subprocess
import sys
import tempfile
import time

import machine

REPO = pathlib.Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
ORIGINAL = REPO.parent / "shared" / "bench" / "run_original_cpd.py"
COMMON_FLAGS = ["--do_lower_case", "--max_seq_length=128", "--max_predictions_per_seq=20",
                "--dupe_factor=5", "--masked_lm_prob=0.15", "--random_seed=12345"]


def _children(pid):
    try:
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as f:
            return [int(c) for c in f.read().split()]
    except OSError:
        return []


def _rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _tree_rss_kb(root):
    """(sum, max) of VmRSS over `root` and all its descendants."""
    total, largest, stack = 0, 0, [root]
    while stack:
        pid = stack.pop()
        rss = _rss_kb(pid)
        total += rss
        largest = max(largest, rss)
        stack.extend(_children(pid))
    return total, largest


def make_text(dump, text_path):
    """Dump -> one sentence per line, blank line between documents (untimed)."""
    sys.path.insert(0, str(REPO))
    from data_prep import wikipedia  # pylint: disable=import-outside-toplevel
    if text_path.exists():
        return
    temp = text_path.with_suffix(".tmp")
    with open(temp, "w", encoding="utf-8") as out:
        for sentences in wikipedia.iter_documents(str(dump)):
            out.write("\n".join(sentences) + "\n\n")
    os.replace(temp, text_path)


def timed_command(command, cwd=REPO):
    """Runs `command`; returns (wall s, CPU s of the tree, peak largest KB, peak sum KB, stderr)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryFile("w+", encoding="utf-8") as log:  # a pipe could fill and block
        start = time.time()
        process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=log)
        peak_sum = peak_max = 0
        while process.poll() is None:
            total, largest = _tree_rss_kb(process.pid)
            peak_sum, peak_max = max(peak_sum, total), max(peak_max, largest)
            time.sleep(0.02)
        wall = time.time() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        log.seek(0)
        stderr = log.read()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if process.returncode != 0:
        raise RuntimeError(f"{command[1]} failed:\n{stderr[-3000:]}")
    return wall, cpu, peak_max, peak_sum, stderr


def _figures(label, workers, instances, wall, cpu, peak_max, peak_sum):
    return {"tool": label, "workers": workers, "instances": instances,
            "wall_s": round(wall, 2), "instances_per_s": round(instances / wall),
            "cpu_s": round(cpu, 2), "instances_per_cpu_s": round(instances / cpu),
            "peak_rss_largest_process_mb": round(peak_max / 1024),
            "peak_rss_process_tree_sum_mb": round(peak_sum / 1024)}


def run_once(input_file, output, vocab, workers, extra, repo=REPO, label="bert_tf"):
    """Runs the CLI of the checkout `repo`; returns a dict of figures."""
    command = [sys.executable, "-m", "data_prep.create_pretraining_data",
               f"--input_file={input_file}", f"--output_file={output}",
               f"--vocab_file={vocab}", f"--num_workers={workers}"] + COMMON_FLAGS + extra
    wall, cpu, peak_max, peak_sum, _ = timed_command(command, cwd=repo)
    with open(output + ".stats.json", encoding="utf-8") as f:
        stats = json.load(f)
    figures = _figures(label, workers, stats["instances"], wall, cpu, peak_max, peak_sum)
    figures["in_run_instances_per_s"] = round(stats["instances_per_second"])
    return figures


def run_original(script, input_file, output, vocab):
    """Runs google-research/bert's create_pretraining_data.py; returns a dict of figures."""
    command = [sys.executable, str(script), f"--input_file={input_file}",
               f"--output_file={output}", f"--vocab_file={vocab}"] + COMMON_FLAGS
    wall, cpu, peak_max, peak_sum, stderr = timed_command(command)
    written = re.findall(r"Wrote (\d+) total instances", stderr)
    if not written:
        raise RuntimeError(f"the original did not report its instances:\n{stderr[-3000:]}")
    figures = _figures("original", 1, int(written[-1]), wall, cpu, peak_max, peak_sum)
    figures["in_run_instances_per_s"] = ""
    return figures


def print_table(results):
    print("\n| tool | input | workers | instances | wall s | instances/s | in-run inst/s | CPU s "
          "| inst/CPU-s | peak RSS largest MB | peak RSS tree sum MB | x original |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    original = next((r for r in results if r["tool"] == "original"), None)
    for r in results:
        ratio = (f"{r['instances_per_s'] / original['instances_per_s']:.1f}x"
                 if original else "")
        print(f"| {r['tool']} | {r['input']} | {r['workers']} | {r['instances']} | "
              f"{r['wall_s']} | {r['instances_per_s']} | {r['in_run_instances_per_s']} | "
              f"{r['cpu_s']} | {r['instances_per_cpu_s']} | "
              f"{r['peak_rss_largest_process_mb']} | {r['peak_rss_process_tree_sum_mb']} | "
              f"{ratio} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dump", default=str(SHARED / "wiki" / "enwiki-sample-pages-articles.xml.bz2"))
    parser.add_argument("--vocab_file", default=str(SHARED / "checkpoints" / "uncased_L-6_H-384_A-12" / "vocab.txt"))
    parser.add_argument("--work_dir", default="/tmp/bert_tf_pretraining_data_bench")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--original", nargs="?", const=str(ORIGINAL), default=None,
                        help="run the original create_pretraining_data (this script, or "
                             "../shared/bench/run_original_cpd.py when no value is given) "
                             "on the repeated text first, and print the ratio")
    parser.add_argument("--other_checkout", default=None,
                        help="also run the tool of another checkout of bert_tf (e.g. an "
                             "earlier commit, from `git archive`), after this one's")
    parser.add_argument("--extra_flags", default="", help="more CLI flags, space-separated")
    args = parser.parse_args()
    print(machine.describe(), flush=True)
    work = pathlib.Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    text = work / "enwiki_sample.txt"
    make_text(pathlib.Path(args.dump), text)
    repeated = work / f"enwiki_sample_x{args.repeat}.txt"
    if not repeated.exists():
        content = text.read_text(encoding="utf-8")
        repeated.write_text(content * args.repeat, encoding="utf-8")
    print(f"text: {text} ({text.stat().st_size / 1e6:.1f} MB), repeated x{args.repeat}: "
          f"{repeated.stat().st_size / 1e6:.1f} MB; load average before: "
          f"{os.getloadavg()[0]:.2f}", flush=True)
    extra = args.extra_flags.split()
    results = []
    inputs = ((text, "x1"), (repeated, f"x{args.repeat}"))
    if args.original:
        inputs = inputs[1:]
        figures = run_original(args.original, str(repeated),
                               str(work / f"original_x{args.repeat}.tfrecord"), args.vocab_file)
        figures["input"] = f"x{args.repeat}"
        results.append(figures)
        print(json.dumps(figures), flush=True)
    for input_file, label in inputs:
        for workers in (int(w) for w in args.workers.split(",")):
            figures = run_once(str(input_file), str(work / f"out_{label}_{workers}.tfrecord"),
                               args.vocab_file, workers, extra)
            figures["input"] = label
            results.append(figures)
            print(json.dumps(figures), flush=True)
            if args.other_checkout:
                figures = run_once(str(input_file), str(work / f"other_{label}_{workers}.tfrecord"),
                                   args.vocab_file, workers, extra, repo=args.other_checkout,
                                   label="bert_tf (other checkout)")
                figures["input"] = label
                results.append(figures)
                print(json.dumps(figures), flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print_table(results)


if __name__ == "__main__":
    main()
