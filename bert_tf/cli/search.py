r"""Hyperparameter search of any task on Optuna: `bert-search --task=NAME --search=FILE`.

Takes the flags of `bert-train --task=NAME` (the trials' common options) and those of the
search. Each trial is a run folder `output_dir/trial-N` with its config.json; at the end
the table of trials is printed and written to `output_dir/search_results.json`, and
`output_dir/best_trial` links to the best one (`best_trial.json` names it). Example:

    bert-search --task=classification --task_name=MRPC --data_dir=glue/MRPC \
      --init_checkpoint=uncased_L-12_H-768_A-12 --output_dir=/tmp/mrpc_search \
      --do_train --do_eval --eval_every_steps=100 --search=space.json --trials=20

space.json: {"learning_rate": {"low": 1e-5, "high": 1e-4, "log": true},
             "num_train_epochs": {"choices": [2, 3, 4]}, "seed": {"choices": [1, 2, 3]}}

The study is kept in sqlite:///<output_dir>/search.db; with --search_storage=
postgresql://... (or mysql://...), machines started with the same command run the trials
of one study together. Needs the `search` extra (optuna).
"""


from bert_tf.commands import command_line
from bert_tf.cli import train
from bert_tf.runs import registry
from bert_tf.runs.search import options as search_options

DOCS_TASK = "classification"  # whose flags the documentation's examples use
RUN_SEARCH = "bert_tf.runs.search.study:run_search"  # loaded when it runs


def define_flags(name=DOCS_TASK):
    """Defines `--task` (set to `name`), the flags of task `name` and the search's (what
    `--help` lists; the README check reads them); returns the task's entry."""
    entry = registry.get(name)
    train.define_task_flag(entry)
    command_line.define_flags(search_options.with_search(entry.options_class), __name__)
    return entry


def run(entry, options) -> dict:
    """Splits the parsed options into the task's and the search's; runs the search (its
    code, which imports TensorFlow, loads now: `command_line.load`)."""
    task_options, search = search_options.split(options, entry.options_class)
    return command_line.load(RUN_SEARCH)(entry.name, task_options, search)


def run_main():
    """Defines the named task's flags and the search's, then runs the search."""
    entry = train.task_entry("bert-search", __doc__)
    train.define_task_flag(entry)
    command_line.command(__name__, search_options.with_search(entry.options_class),
                         lambda options: run(entry, options),
                         tuple(entry.required) + ("search",))()


if __name__ == "__main__":
    run_main()
