"""Time to quality: ELECTRA against masked LM, from scratch, for the same budget on this
CPU, then each fine-tuned on GLUE SST-2 and MRPC with several seeds (issue 36).

One discriminator for both sides: 4 layers, hidden 256, 4 heads, intermediate 1024, the
uncased 30,522 vocab, seq 128, 20 predictions. Masked LM trains it as BERT does (no
next-sentence task); ELECTRA trains it as the discriminator, beside a generator of the
task's default size (1/4 of the width, as many layers, embeddings shared), with
`--disc_weight` x the replaced-token-detection loss. Both read the same records:
create_pretraining_data on the shared English Wikipedia text
(../shared/data/wiki/enwiki_wikiextractor_wiki_00, `--dupe_factor` masks of it), repeated
as the steps need; same batch, learning rate, warm-up share and linear decay.

The budget (`--budget_seconds`, per side) is turned into steps: first both sides train a
few loops each, alternating (masked LM, ELECTRA, masked LM, ...), in this process; a
side's seconds per step is its mean over the rounds of the loops after the first (which
traces the graph), on `--budget_clock` (wall or process CPU: both are reported). Each
side then trains its own number of steps; the discriminator encoder is written at the
`--fractions` of the steps and at the end. Reported per side: seconds of the train loop
(wall and process CPU; the whole run, graph building and checkpoints included, too),
steps, FLOPs, the eval metrics on the first `--eval_batches` batches of the training
records (ELECTRA: the generator's masked-LM accuracy, the discriminator's accuracy,
precision and recall of "replaced"), then dev accuracy per seed (and F1 for MRPC), mean
and spread. ELECTRA's encoders at the fractions are fine-tuned on `--fraction_task` with
`--fraction_seeds`: the first fraction whose score reaches masked LM's final mean gives
the compute ratio.

FLOPs are an analytic estimate: forward + backward = 6 x (weights used in matmuls) x
(tokens they are applied to), per optimizer step. The encoder's matmul weights per
token: layers x (4 H^2 + 2 H I) plus layers x 2 S H as the weight-equivalent of the
attention's two S x S products (QK^T and AV), plus E x H of an embedding projection
(ELECTRA's narrower generator reads the shared E-wide embeddings); applied to all S
tokens of each row (padding included: it is computed). The masked-LM head (H x E
transform + the tied E x V decoder) is applied to the `max_predictions_per_seq` slots;
the discriminator head (H x H + H x 1) to all S tokens. Embedding look-ups, layer norms,
softmaxes, the pooler (frozen, one row) and the optimizer update are left out.

Fine-tuning (the runner of bench/glue_finetune_check.py, whose --learning_rate,
--batch_size and --seeds are this bench's too; its --epochs and --max_seq_length are set
per task from --sst2_* / --mrpc_*): SST-2 on its first `--sst2_train_examples` training
rows, MRPC on all of them (`--mrpc_train_examples` 0), dev always whole.

    .venv/bin/python bench/electra_time_to_quality.py --work_dir=/tmp/electra_ttq \\
        --budget_seconds=720 --seeds=1,2,3

Writes `<work_dir>/results.json` and `<work_dir>/results.md` (after every stage, so a run
cut short keeps what it finished; `--resume` with the same flags then reads the
pre-training from there and does only the fine-tuning that is missing). Not part of the
test suite. The 2026-11-27 run and what it found: docs/benchmarks.md, "ELECTRA against
masked LM, same budget".
"""

import json
import math
import os
import pathlib
import shutil
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from absl import app, flags, logging  # noqa: E402

import continued_pretraining_check  # noqa: E402
import glue_finetune_check  # noqa: E402  (defines the fine-tuning recipe flags)
import seed_summary  # noqa: E402
from bert_tf.configs import BertConfig  # noqa: E402
from bert_tf.runs import driver  # noqa: E402
from bert_tf.tasks.pretraining import task as pretraining  # noqa: E402
from bert_tf.tasks.pretraining.options import PretrainingOptions  # noqa: E402
from bert_tf.tasks.electra import task as electra_task  # noqa: E402
from bert_tf.tasks.electra.options import ElectraOptions  # noqa: E402
from bert_tf.train import distribute, step_hook  # noqa: E402
from bert_tf.weights import checkpoints  # noqa: E402

SHARED = REPO.parent / "shared" / "data"
VOCAB_SIZE = 30522
SIDES = ("mlm", "electra")
TITLES = {"mlm": "masked LM", "electra": "ELECTRA"}

flags.DEFINE_string("work_dir", "/tmp/bert_tf_electra_time_to_quality", "Work folder.")
flags.DEFINE_string("text", str(SHARED / "wiki" / "enwiki_wikiextractor_wiki_00"),
                    "Pre-training text (WikiExtractor output).")
flags.DEFINE_string("vocab_file", str(SHARED / "checkpoints" / "uncased_L-6_H-384_A-12" /
                                      "vocab.txt"), "The uncased 30,522-token vocab.")
flags.DEFINE_integer("dupe_factor", 5, "create_pretraining_data's masks of the text.")
flags.DEFINE_float("budget_seconds", 600.0, "Pre-training budget per side, in seconds of "
                   "--budget_clock, for the train loop.")
flags.DEFINE_enum("budget_clock", "wall", ["wall", "cpu"], "The clock the budget and the "
                  "calibration count: wall seconds, or this process's CPU seconds.")
flags.DEFINE_integer("calibration_loops", 3, "Loops of --steps_per_loop steps a side "
                     "trains in a calibration round (the first is not timed).")
flags.DEFINE_integer("calibration_rounds", 2, "Alternating rounds of calibration.")
flags.DEFINE_integer("steps_per_loop", 10, "Pre-training steps per loop.")
flags.DEFINE_integer("pretrain_batch_size", 32, "Pre-training batch size (both sides).")
flags.DEFINE_float("pretrain_learning_rate", 1e-3, "Pre-training peak learning rate.")
flags.DEFINE_float("warmup_fraction", 0.1, "Warm-up share of the pre-training steps.")
flags.DEFINE_float("generator_hidden_size", None, "ELECTRA generator width fraction "
                   "(default: the task's, 1/4 here).")
flags.DEFINE_float("disc_weight", 50.0, "ELECTRA's replaced-token-detection loss weight.")
flags.DEFINE_float("temperature", 1.0, "ELECTRA's sampling temperature.")
flags.DEFINE_integer("eval_batches", 20, "Batches of 32 training records scored after "
                     "pre-training (diagnostics).")
flags.DEFINE_list("tasks", ["SST-2", "MRPC"], "GLUE tasks to fine-tune on.")
flags.DEFINE_integer("sst2_train_examples", 8000, "SST-2 training rows (0: all).")
flags.DEFINE_integer("sst2_max_seq_length", 64, "SST-2 max_seq_length.")
flags.DEFINE_float("sst2_epochs", 2.0, "SST-2 epochs.")
flags.DEFINE_integer("mrpc_train_examples", 0, "MRPC training rows (0: all).")
flags.DEFINE_integer("mrpc_max_seq_length", 128, "MRPC max_seq_length.")
flags.DEFINE_float("mrpc_epochs", 3.0, "MRPC epochs.")
flags.DEFINE_list("fractions", ["0.25", "0.5", "0.75"], "Fractions of ELECTRA's steps "
                  "whose discriminator is fine-tuned too (empty: none).")
flags.DEFINE_string("fraction_task", "SST-2", "The task the fractions are fine-tuned on.")
flags.DEFINE_string("fraction_seeds", "1", "Seeds of the fractions' fine-tuning.")
flags.DEFINE_bool("resume", False, "Read the pre-training and the finished fine-tuning "
                  "from <work_dir>/results.json and do only what is missing (same flags).")
FLAGS = flags.FLAGS


def discriminator_config():
    return BertConfig(vocab_size=VOCAB_SIZE, hidden_size=256, num_hidden_layers=4,
                      num_attention_heads=4, intermediate_size=1024)


# ---------------------------------------------------------------------------- FLOPs

def encoder_weights_per_token(config, seq_length):
    """Matmul weights (and the attention's weight-equivalents) one token goes through."""
    hidden, layers = config.hidden_size, config.num_hidden_layers
    per_layer = 4 * hidden * hidden + 2 * hidden * config.intermediate_size
    attention = 2 * seq_length * hidden
    projection = (config.embedding_width * hidden
                  if config.embedding_width != hidden else 0)
    return layers * (per_layer + attention) + projection


def masked_lm_head_weights(config):
    """Per predicted slot: the H -> E transform and the tied E x V decoder."""
    return config.hidden_size * config.embedding_width + config.embedding_width * \
        config.vocab_size


def step_flops(side, config, generator, batch, seq_length, predictions):
    """{part: FLOPs of one optimizer step (forward + backward)} of a side."""
    def model(cfg, head_per_slot, head_per_token=0):
        per_row = seq_length * (encoder_weights_per_token(cfg, seq_length) + head_per_token)
        per_row += predictions * head_per_slot
        return 6 * batch * per_row
    if side == "mlm":
        return {"discriminator": model(config, masked_lm_head_weights(config))}
    hidden = config.hidden_size
    return {"generator": model(generator, masked_lm_head_weights(generator)),
            "discriminator": model(config, 0, hidden * hidden + hidden)}


# ---------------------------------------------------------------------- pre-training

class Clock(step_hook.StepHook):
    """Wall and process-CPU time at the start and after every loop of steps; writes the
    encoder (a BERT folder) at the steps of `save_at` {step: folder}."""

    def __init__(self, save_at=None, vocab_file=None):
        self.save_at = save_at or {}
        self.vocab_file = vocab_file
        self.marks = []

    def begin(self, step):
        self.marks.append((step, time.time(), time.process_time()))
        return False

    def after_steps(self, step, model):
        self.marks.append((step, time.time(), time.process_time()))
        if step in self.save_at:
            folder = pathlib.Path(self.save_at[step])
            checkpoints.save_google_checkpoint(model.encoder, str(folder / "bert_model.ckpt"),
                                               write_config=True)
            shutil.copyfile(self.vocab_file, folder / "vocab.txt")
        return False

    def per_step(self, skip=1):
        """(wall, cpu) seconds per step over the loops after the first `skip`."""
        (step0, wall0, cpu0), (step1, wall1, cpu1) = self.marks[skip], self.marks[-1]
        return (wall1 - wall0) / (step1 - step0), (cpu1 - cpu0) / (step1 - step0)


def with_clock(task_class):
    class Clocked(task_class):
        clock = None

        def hooks(self):
            return super().hooks() + [self.clock]
    return Clocked


CLOCKED = {"mlm": with_clock(pretraining.PretrainingTask),
           "electra": with_clock(electra_task.ElectraTask)}


def side_options(side, records, output_dir, num_steps, do_eval=False):
    common = dict(
        bert_config=discriminator_config(), input_file=records, output_dir=str(output_dir),
        vocab_file=FLAGS.vocab_file, do_train=True, do_eval=do_eval, max_seq_length=128,
        max_predictions_per_seq=20, next_sentence=False,
        train_batch_size=FLAGS.pretrain_batch_size, eval_batch_size=32,
        learning_rate=FLAGS.pretrain_learning_rate, num_train_steps=num_steps,
        num_warmup_steps=int(FLAGS.warmup_fraction * num_steps),
        save_checkpoints_steps=num_steps, keep_checkpoint_max=1,
        steps_per_loop=FLAGS.steps_per_loop, max_eval_steps=FLAGS.eval_batches, seed=1)
    if side == "mlm":
        return PretrainingOptions(**common)
    return ElectraOptions(
        **common, generator_hidden_size=FLAGS.generator_hidden_size,
        disc_weight=FLAGS.disc_weight, temperature=FLAGS.temperature)


def train_side(side, records, output_dir, num_steps, save_at=None, do_eval=False):
    """(clock, outcome, whole-run wall s, whole-run CPU s)."""
    keras.backend.clear_session()
    task = CLOCKED[side](side_options(side, records, output_dir, num_steps, do_eval))
    task.clock = Clock(save_at, FLAGS.vocab_file)
    wall, cpu = time.time(), time.process_time()
    outcome = driver.execute(task, distribute.get_strategy("one_device"))
    return task.clock, outcome, time.time() - wall, time.process_time() - cpu


def calibrate(records, work):
    """{side: {"wall": s/step, "cpu": s/step, "rounds": [...]}} from alternating runs."""
    steps = FLAGS.calibration_loops * FLAGS.steps_per_loop
    rounds = {side: [] for side in SIDES}
    for round_index in range(FLAGS.calibration_rounds):
        for side in SIDES:
            folder = work / "calibration" / f"{side}_{round_index}"
            shutil.rmtree(folder, ignore_errors=True)
            clock = train_side(side, records, folder, steps)[0]
            wall, cpu = clock.per_step()
            rounds[side].append({"wall": wall, "cpu": cpu})
            print(f"calibration round {round_index + 1}, {TITLES[side]}: {wall:.3f} s/step "
                  f"wall, {cpu:.3f} s/step CPU", flush=True)
            shutil.rmtree(folder, ignore_errors=True)
    return {side: {"wall": float(np.mean([r["wall"] for r in rounds[side]])),
                   "cpu": float(np.mean([r["cpu"] for r in rounds[side]])),
                   "rounds": rounds[side]} for side in SIDES}


def pretrain(side, records, work, num_steps, fractions):
    """Trains a side for num_steps; returns its record (folders, seconds, FLOPs, eval)."""
    output_dir = work / "pretrain" / side
    if output_dir.exists():
        sys.exit(f"{output_dir} exists: use a fresh --work_dir (records are reused)")
    loop = FLAGS.steps_per_loop
    save_at, labels = {}, {}  # step -> folder; step -> the fraction asked for
    for fraction in sorted(set(fractions) | {1.0}):
        step = max(loop, int(round(fraction * num_steps / loop)) * loop)
        save_at[step] = str(work / "pretrain" / f"{side}_encoder_{fraction:.2f}")
        labels[step] = f"{fraction:.2f}"  # the step is rounded to whole loops
    clock, outcome, wall, cpu = train_side(side, records, output_dir, num_steps, save_at,
                                           do_eval=True)
    (_, wall0, cpu0), (_, wall1, cpu1) = clock.marks[0], clock.marks[-1]
    config = discriminator_config()
    generator = (electra_task.resolve_generator_config(
        side_options(side, records, output_dir, num_steps), config)
        if side == "electra" else None)
    flops = step_flops(side, config, generator, FLAGS.pretrain_batch_size, 128, 20)
    evaluation = {key: float(value) for key, value in outcome.results.items()
                  if isinstance(value, (int, float, np.floating, np.integer))}
    record = {
        "steps": outcome.runner.global_step, "loop_wall_s": wall1 - wall0,
        "loop_cpu_s": cpu1 - cpu0, "run_wall_s": wall, "run_cpu_s": cpu,
        "flops_per_step": flops, "flops": {k: v * num_steps for k, v in flops.items()},
        "flops_total": sum(flops.values()) * num_steps,
        "timeline": [list(mark) for mark in clock.marks],
        "encoders": {labels[step]: folder for step, folder in save_at.items()},
        "fraction_steps": {labels[step]: step for step in save_at},
        "eval": evaluation,
        "last_losses": outcome.runner.train_result.losses,
        "generator_config": generator.to_dict() if generator else None,
    }
    print(f"{TITLES[side]}: {record['steps']} steps, train loop {record['loop_wall_s']:.0f} s "
          f"wall / {record['loop_cpu_s']:.0f} s CPU (whole run {wall:.0f} / {cpu:.0f}); "
          f"{record['flops_total']:.3g} FLOPs; eval {evaluation}", flush=True)
    if side == "electra":
        check_exported_discriminator(output_dir, save_at[num_steps])
    return record


def check_exported_discriminator(output_dir, our_folder):
    """The task's bert_model.ckpt must hold the discriminator our hook wrote at the end."""
    theirs = tf.train.load_checkpoint(str(output_dir / "bert_model.ckpt"))
    ours = tf.train.load_checkpoint(str(pathlib.Path(our_folder) / "bert_model.ckpt"))
    names = sorted(theirs.get_variable_to_shape_map())
    differing = [name for name in names if not np.array_equal(theirs.get_tensor(name),
                                                              ours.get_tensor(name))]
    print(f"ELECTRA's bert_model.ckpt: {len(names)} tensors, {len(differing)} differ from "
          f"the encoder at the last step{': ' + ', '.join(differing[:5]) if differing else ''}",
          flush=True)


# ------------------------------------------------------------------------ fine-tuning

def task_recipe(task):
    key = task.lower().replace("-", "")
    return dict(examples=getattr(FLAGS, f"{key}_train_examples"),
                max_seq_length=getattr(FLAGS, f"{key}_max_seq_length"),
                epochs=getattr(FLAGS, f"{key}_epochs"))


def finetune(task, checkpoint, seeds, work):
    """[{seed, accuracy, f1?, seconds}] of fine-tuning `checkpoint` on `task`."""
    recipe = task_recipe(task)
    FLAGS.task, FLAGS.max_seq_length, FLAGS.epochs = (task, recipe["max_seq_length"],
                                                      recipe["epochs"])
    work.mkdir(parents=True, exist_ok=True)
    data_dir = str(SHARED / "glue" / task)
    if recipe["examples"]:
        data_dir = seed_summary.first_glue_rows(data_dir, task, recipe["examples"],
                                                 str(work))
    rows = []
    for seed in seeds:
        keras.backend.clear_session()
        cpu = time.process_time()
        results = glue_finetune_check.run_seed(seed, data_dir, str(work), checkpoint)
        row = {"seed": seed, "accuracy": 100 * float(results["eval_accuracy"]),
               "wall_s": results["seconds"], "cpu_s": time.process_time() - cpu,
               "steps": int(results["global_step"])}
        if "eval_f1" in results:
            row["f1"] = 100 * float(results["eval_f1"])
        rows.append(row)
        print(f"  {task} seed {seed}: accuracy {row['accuracy']:.2f}"
              + (f", F1 {row['f1']:.2f}" if "f1" in row else "")
              + f" ({row['steps']} steps, {row['wall_s']:.0f} s)", flush=True)
    return rows


# ---------------------------------------------------------------------------- report

def stats(values):
    values = np.asarray(values, dtype=float)
    return {"mean": float(values.mean()), "sd": float(values.std()),
            "min": float(values.min()), "max": float(values.max()),
            "spread": float(values.max() - values.min())}


def summarize(results):
    """Means, spreads, the target's verdict and the compute ratio, into `results`."""
    finals = results.get("finetune", {})
    verdict = {}
    for task in FLAGS.tasks:
        for metric in ("accuracy", "f1"):
            sides = {side: finals.get(side, {}).get(task) for side in SIDES}
            if not all(sides.values()) or metric not in sides["mlm"][0]:
                continue
            summary = {side: stats([row[metric] for row in rows])
                       for side, rows in sides.items()}
            gap = summary["electra"]["mean"] - summary["mlm"]["mean"]
            spread = max(summary[side]["spread"] for side in SIDES)
            verdict[f"{task} {metric}"] = dict(summary, gap=gap, largest_spread=spread,
                                               electra_ahead_beyond_spread=gap > spread)
    results["summary"] = verdict
    key = f"{FLAGS.fraction_task} accuracy"
    fractions = results.get("fractions")
    if fractions and key in verdict:
        target = verdict[key]["mlm"]["mean"]
        steps = results["pretraining"]["electra"]
        ladder = sorted((steps["fraction_steps"][f] / steps["steps"],
                         float(np.mean([r["accuracy"] for r in rows])))
                        for f, rows in fractions.items())
        seeds = {row["seed"] for row in fractions[next(iter(fractions))]}
        final = [row["accuracy"] for row in finals["electra"][FLAGS.fraction_task]
                 if row["seed"] in seeds]
        ladder.append((1.0, float(np.mean(final))))
        reached = next((f for f, score in ladder if score >= target), None)
        pre = results["pretraining"]
        ratio = None
        if reached is not None:
            ratio = {clock: reached * pre["electra"][f"loop_{clock}_s"] /
                     pre["mlm"][f"loop_{clock}_s"] for clock in ("wall", "cpu")}
            ratio["flops"] = reached * pre["electra"]["flops_total"] / pre["mlm"]["flops_total"]
        results["compute_ratio"] = {
            "task": FLAGS.fraction_task, "mlm_final_mean": target,
            "electra_by_fraction": ladder, "first_fraction_reaching": reached,
            "electra_over_mlm": ratio}


def markdown(results):
    pre = results.get("pretraining", {})
    lines = ["| | masked LM | ELECTRA |", "|---|---|---|"]
    if pre:
        calibration = results["calibration"]

        def row(label, fn):
            lines.append(f"| {label} | " + " | ".join(
                fn(side) if side in pre else "" for side in SIDES) + " |")
        row("calibrated s/step (wall / CPU)",
            lambda s: f"{calibration[s]['wall']:.3f} / {calibration[s]['cpu']:.3f}")
        row("pre-training steps", lambda s: str(pre[s]["steps"]))
        row("train loop s (wall / CPU)",
            lambda s: f"{pre[s]['loop_wall_s']:.0f} / {pre[s]['loop_cpu_s']:.0f}")
        row("whole run s (wall / CPU)",
            lambda s: f"{pre[s]['run_wall_s']:.0f} / {pre[s]['run_cpu_s']:.0f}")
        row("FLOPs (generator + discriminator)", lambda s: " + ".join(
            f"{pre[s]['flops'][part]:.3g}" for part in ("generator", "discriminator")
            if part in pre[s]['flops']) + f" = {pre[s]['flops_total']:.3g}")
        row("eval on training records", lambda s: ", ".join(
            f"{k.replace('discriminator_', 'disc ')} {v:.3f}"
            for k, v in sorted(pre[s]["eval"].items()) if k != "global_step"))
    for task, rows_by_side in sorted(_by_task(results.get("finetune", {})).items()):
        for metric in ("accuracy", "f1"):
            if metric not in next(iter(rows_by_side.values()))[0]:
                continue
            cells = []
            for side in SIDES:
                rows = rows_by_side.get(side)
                if not rows:
                    cells.append("")
                    continue
                values = [r[metric] for r in rows]
                s = stats(values)
                cells.append(f"{s['mean']:.2f} sd {s['sd']:.2f} [{s['min']:.2f}, "
                             f"{s['max']:.2f}] ({', '.join(f'{v:.2f}' for v in values)})")
            lines.append(f"| {task} dev {metric}, seeds {_seeds(rows_by_side)} | "
                         + " | ".join(cells) + " |")
            seconds = [np.mean([r["wall_s"] for r in rows_by_side[s]]) if s in rows_by_side
                       else None for s in SIDES]
        lines.append(f"| {task} fine-tuning s a seed (wall) | " + " | ".join(
            f"{v:.0f}" if v is not None else "" for v in seconds) + " |")
    text = "\n".join(lines) + "\n"
    for name, item in results.get("summary", {}).items():
        text += (f"\n{name}: ELECTRA - masked LM = {item['gap']:+.2f}; largest seed spread "
                 f"(max - min) {item['largest_spread']:.2f}: ELECTRA "
                 f"{'ahead beyond' if item['electra_ahead_beyond_spread'] else 'NOT ahead beyond'}"
                 " the spread")
    ratio = results.get("compute_ratio")
    if ratio:
        text += (f"\n\nCompute ratio on {ratio['task']} (masked LM's final mean "
                 f"{ratio['mlm_final_mean']:.2f}); ELECTRA by fraction of its budget: "
                 + ", ".join(f"{f:.2f}: {v:.2f}" for f, v in ratio["electra_by_fraction"]))
        if ratio["first_fraction_reaching"] is None:
            text += "; ELECTRA does not reach it within its budget"
        else:
            r = ratio["electra_over_mlm"]
            text += (f"; first reached at {ratio['first_fraction_reaching']:.2f}: ELECTRA / "
                     f"masked LM = {r['wall']:.2f} (wall), {r['cpu']:.2f} (CPU), "
                     f"{r['flops']:.2f} (FLOPs)")
    return text + "\n"


def _by_task(finetune_results):
    by_task = {}
    for side, tasks in finetune_results.items():
        for task, rows in tasks.items():
            by_task.setdefault(task, {})[side] = rows
    return by_task


def _seeds(rows_by_side):
    return ",".join(str(r["seed"]) for r in next(iter(rows_by_side.values())))


def save(results, work):
    summarize(results)
    (work / "results.json").write_text(json.dumps(results, indent=1, default=float))
    (work / "results.md").write_text(markdown(results))


# ------------------------------------------------------------------------------ main

def make_records(work):
    shutil.copyfile(FLAGS.text, work / "wiki.wiki")
    vocab_dir = pathlib.Path(FLAGS.vocab_file).parent
    path, count = continued_pretraining_check.make_instances(
        work, vocab_dir, "wiki", FLAGS.dupe_factor)
    return path, count


def main(argv):
    del argv
    logging.set_verbosity(logging.WARNING)
    seeds = seed_summary.parse_seeds(FLAGS.seeds)
    fraction_seeds = seed_summary.parse_seeds(FLAGS.fraction_seeds)
    fractions = [float(f) for f in FLAGS.fractions if f.strip()]
    if any(not 0 < f < 1 for f in fractions):
        sys.exit(f"--fractions must lie in (0, 1), got {FLAGS.fractions}")
    work = pathlib.Path(FLAGS.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    started = time.time()
    results_file = work / "results.json"
    if FLAGS.resume and results_file.exists():
        results = json.loads(results_file.read_text())
        if len(results.get("pretraining", {})) != len(SIDES):
            sys.exit(f"--resume: {results_file} has no finished pre-training of both sides")
        print(f"--resume: pre-training and finished fine-tuning read from {results_file}",
              flush=True)
    else:
        results = pretrain_both(work, fractions)
    finetune_all(results, work, seeds, fractions, fraction_seeds)
    results["total_wall_s"] = time.time() - started + results.get("total_wall_s", 0.0)
    save(results, work)
    print(markdown(results), flush=True)


def pretrain_both(work, fractions):
    """Records, calibration and both sides' pre-training; returns the results so far."""
    records, count = make_records(work)
    results = {"flags": {flag.name: flag.value for module, module_flags
                         in FLAGS.flags_by_module_dict().items()
                         if module.endswith(("electra_time_to_quality.py",
                                             "glue_finetune_check", "seed_summary"))
                         for flag in module_flags},
               "records": {"path": records, "instances": count},
               "machine": {"cpus": os.cpu_count(), "load_at_start": os.getloadavg()}}
    print(f"records: {count} instances in {records}", flush=True)
    results["calibration"] = calibrate(records, work)
    results["pretraining"] = {}
    for side in SIDES:
        per_step = results["calibration"][side][FLAGS.budget_clock]
        loops = max(len(fractions) + 1, int(FLAGS.budget_seconds / per_step
                                            / FLAGS.steps_per_loop))
        results["pretraining"][side] = pretrain(side, records, work,
                                                loops * FLAGS.steps_per_loop, fractions)
        save(results, work)
    return results


def finetune_all(results, work, seeds, fractions, fraction_seeds):
    """The final encoders on every task, then ELECTRA's fractions; what `results`
    already holds (a resumed run) is not done again."""
    results.setdefault("finetune", {side: {} for side in SIDES})
    for task in FLAGS.tasks:
        for side in SIDES:
            if len(results["finetune"][side].get(task, [])) == len(seeds):
                continue
            print(f"fine-tuning {TITLES[side]} on {task}", flush=True)
            folder = results["pretraining"][side]["encoders"]["1.00"]
            results["finetune"][side][task] = finetune(
                task, folder, seeds, work / "finetune" / f"{side}_1.00" / task)
            save(results, work)
    if fractions:
        results.setdefault("fractions", {})
        for fraction in fractions:
            label = f"{fraction:.2f}"
            if len(results["fractions"].get(label, [])) == len(fraction_seeds):
                continue
            folder = results["pretraining"]["electra"]["encoders"][label]
            print(f"fine-tuning ELECTRA at {label} of its steps on {FLAGS.fraction_task}",
                  flush=True)
            results["fractions"][label] = finetune(
                FLAGS.fraction_task, folder, fraction_seeds,
                work / "finetune" / f"electra_{label}" / FLAGS.fraction_task)
            save(results, work)


if __name__ == "__main__":
    app.run(main)
