"""Benchmark: create_pretraining_data on Beam's DirectRunner against the local tool.

In one run, on the same text (the English dump slice as one-sentence-per-line text, and
the same text repeated --repeat times; untimed preparation as in
bench/pretraining_data_bench.py), with max_seq_length 128, dupe_factor 5, seed 12345:

* local: `python -m data_prep.create_pretraining_data --num_workers=N`
* beam:  `python -m data_prep.beam_pipeline --runner=DirectRunner
          --direct_num_workers=N --direct_running_mode=multi_processing` (defaults:
          chunks reshuffled over the workers, --num_output_shards shards)
* beam-streaming: the same with `--noreshuffle_chunks --num_output_shards=0` (chunks
          built where they are read, one shard per bundle: no step holds the corpus)

Both commands are timed whole (Python, TensorFlow and Beam start-up included). Printed
per run: instances, wall seconds, instances/s, CPU seconds of the process tree, the
peak RSS of the launcher process (for Beam: the DirectRunner, which also holds the data
between stages in memory) and of the largest other process (Beam: the SDK workers),
sampled every 20 ms; then Beam's rate as a fraction of the local tool's.

  .venv/bin/python bench/beam_bench.py --workers=2 --repeat=10
"""

import argparse
import json
import pathlib
import resource
import subprocess
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import machine  # noqa: E402
import pretraining_data_bench as local_bench  # noqa: E402  (the sibling benchmark)

REPO = local_bench.REPO
SHARED = local_bench.SHARED
COMMON_FLAGS = ["--do_lower_case", "--max_seq_length=128", "--max_predictions_per_seq=20",
                "--dupe_factor=5", "--masked_lm_prob=0.15", "--random_seed=12345"]


def _children(pid):
    """Children started by any thread of `pid` (Beam starts its workers from a thread)."""
    children = []
    for task in pathlib.Path(f"/proc/{pid}/task").glob("*"):
        try:
            children.extend(int(c) for c in (task / "children").read_text().split())
        except OSError:
            pass
    return children


def _tree_pids(root):
    pids, stack = [], [root]
    while stack:
        pid = stack.pop()
        pids.append(pid)
        stack.extend(_children(pid))
    return pids


def run_measured(command, stats_file):
    """Runs `command`; returns wall s, CPU s, peak RSS (MB) of the root and of the others."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.time()
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    peaks = {}
    while process.poll() is None:
        for pid in _tree_pids(process.pid):
            peaks[pid] = max(peaks.get(pid, 0), local_bench._rss_kb(pid))  # pylint: disable=protected-access
        time.sleep(0.02)
    wall = time.time() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    stderr = process.stderr.read()
    if process.returncode != 0:
        raise RuntimeError(f"{command[2]} failed:\n{stderr[-3000:]}")
    with open(stats_file, encoding="utf-8") as f:
        stats = json.load(f)
    others = [kb for pid, kb in peaks.items() if pid != process.pid]
    return {"instances": stats["instances"], "wall_s": round(wall, 2),
            "instances_per_s": round(stats["instances"] / wall),
            "cpu_s": round(cpu, 2), "instances_per_cpu_s": round(stats["instances"] / cpu),
            "peak_rss_launcher_mb": round(peaks.get(process.pid, 0) / 1024),
            "peak_rss_largest_other_mb": round(max(others, default=0) / 1024),
            "processes": len(peaks)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dump", default=str(SHARED / "wiki" / "enwiki-sample-pages-articles.xml.bz2"))
    parser.add_argument("--vocab_file", default=str(
        SHARED / "checkpoints" / "uncased_L-6_H-384_A-12" / "vocab.txt"))
    parser.add_argument("--work_dir", default="/tmp/bert_tf_beam_bench")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--num_output_shards", type=int, default=4)
    parser.add_argument("--with_dump", action="store_true",
                        help="also run both on the XML dump itself (wikitext parsing and "
                             "sentence splitting: the per-core rate of a whole Wikipedia)")
    args = parser.parse_args()
    print(machine.describe(), flush=True)
    work = pathlib.Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    text = work / "enwiki_sample.txt"
    local_bench.make_text(pathlib.Path(args.dump), text)
    inputs = [(text, "x1")]
    if args.repeat > 1:
        repeated = work / f"enwiki_sample_x{args.repeat}.txt"
        if not repeated.exists():
            repeated.write_text(text.read_text(encoding="utf-8") * args.repeat, encoding="utf-8")
        inputs.append((repeated, f"x{args.repeat}"))
    if args.with_dump:
        inputs.append((pathlib.Path(args.dump), "dump"))
    results = []
    for input_file, label in inputs:
        for tool in ("local", "beam", "beam-streaming"):
            output = work / f"{tool}_{label}.tfrecord"
            flags = [f"--input_file={input_file}", f"--output_file={output}",
                     f"--vocab_file={args.vocab_file}",
                     f"--num_output_shards={args.num_output_shards}"] + COMMON_FLAGS
            if tool == "local":
                command = ["-m", "data_prep.create_pretraining_data",
                           f"--num_workers={args.workers}"]
            else:
                command = ["-m", "data_prep.beam_pipeline", "--runner=DirectRunner",
                           f"--direct_num_workers={args.workers}",
                           "--direct_running_mode=multi_processing"]
            if tool == "beam-streaming":
                command += ["--noreshuffle_chunks"]
                flags = [f for f in flags if not f.startswith("--num_output_shards")]
                flags.append("--num_output_shards=0")
            figures = run_measured([sys.executable] + command + flags, f"{output}.stats.json")
            figures.update(input=label, tool=tool, workers=args.workers)
            results.append(figures)
            print(json.dumps(figures), flush=True)
    print("\n| input | tool | workers | instances | wall s | instances/s | CPU s "
          "| instances/CPU-s | peak RSS launcher MB | peak RSS largest other process MB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(f"| {r['input']} | {r['tool']} | {r['workers']} | {r['instances']} | "
              f"{r['wall_s']} | {r['instances_per_s']} | {r['cpu_s']} | "
              f"{r['instances_per_cpu_s']} | "
              f"{r['peak_rss_launcher_mb']} | {r['peak_rss_largest_other_mb']} |")
    for _, label in inputs:
        local = next(r for r in results if r["input"] == label and r["tool"] == "local")
        for tool in ("beam", "beam-streaming"):
            beam = next(r for r in results if r["input"] == label and r["tool"] == tool)
            print(f"{label}: {tool} / local instances/s = {beam['instances_per_s']} / "
                  f"{local['instances_per_s']} = "
                  f"{beam['instances_per_s'] / local['instances_per_s']:.2f}; per CPU-s "
                  f"{beam['instances_per_cpu_s'] / local['instances_per_cpu_s']:.2f} "
                  f"(same instance count: {beam['instances'] == local['instances']})")


if __name__ == "__main__":
    main()
