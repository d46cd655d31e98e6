r"""Train, evaluate, predict or export any registered task: `bert-train --task=NAME`.

The tasks are those of `bert_tf.runs.registry` (`bert-train --help` lists them). Each
takes the flags of its own command (`bert-train --task=squad --help` lists them; the
per-task commands such as bert-run-squad take the same). Example:

    bert-train --task=classification --task_name=MRPC --data_dir=glue/MRPC \
      --init_checkpoint=uncased_L-12_H-768_A-12 --output_dir=/tmp/mrpc \
      --do_train --do_eval

Every run writes `output_dir/config.json`; `bert-train --config=/tmp/mrpc/config.json`
reruns it (its task is named in the file), with flags given on the command line
overriding the file's values.
"""

import json
import sys

from absl import flags

from bert_tf.commands import command_line
from bert_tf.runs import registry


def _flag_value(argv, name):
    """The value of `--name=V` or `--name V` in `argv`, or None."""
    for index, arg in enumerate(argv):
        if arg.startswith(f"--{name}="):
            return arg.split("=", 1)[1]
        if arg == f"--{name}" and index + 1 < len(argv):
            return argv[index + 1]
    return None


def task_name(argv) -> str:
    """The task `argv` names: `--task`, else the "command" of its `--config` file.

    Raises:
      ValueError: when neither names one, listing the tasks.
    """
    name = _flag_value(argv, "task")
    config_file = _flag_value(argv, "config")
    if name is None and config_file:
        try:
            with open(config_file, encoding="utf-8") as file:
                name = json.load(file).get("command")
        except (OSError, ValueError, AttributeError) as error:
            raise ValueError(f"--config={config_file}: cannot read its task ({error}); "
                             "pass --task too") from None
    if not name:
        raise ValueError(f"--task is required: one of {', '.join(registry.names())} "
                         "(or --config=<a run's config.json>)")
    return name


def define_task_flag(entry):
    """`--task`, set to `entry`'s name, its help listing every task."""
    flags.DEFINE_enum("task", entry.name, registry.names(),
                      "The task to run: " + "; ".join(
                          f"{task}: {registry.get(task).summary}"
                          for task in registry.names()) + ".")


def define_flags(name):
    """Defines `--task` (set to `name`) and the flags of task `name` (what `--help`
    lists; the README check reads them); returns its entry.

    Raises:
      ValueError: for a name that is not a task.
    """
    entry = registry.get(name)
    define_task_flag(entry)
    command_line.define_flags(entry.options_class, __name__)
    return entry


def task_entry(program: str, doc: str):
    """The registry entry of the task the command line names; `--help` without a task
    prints `doc` and the tasks, an unknown task exits naming it (`program: error: ...`)."""
    try:
        return registry.get(task_name(sys.argv[1:]))
    except ValueError as error:
        if {"--help", "-h", "--helpfull"} & set(sys.argv):
            print(doc + "\nTasks:\n" + "".join(
                f"  {name}: {registry.get(name).summary}\n" for name in registry.names()))
            sys.exit(0)
        sys.exit(f"{program}: error: {error}")


def run_main():
    """Defines the named task's flags, then runs it."""
    entry = task_entry("bert-train", __doc__)
    define_task_flag(entry)
    # Its options' flags are defined by the command, which also finds required flags
    # in a --config file.
    command_line.command(__name__, entry.options_class,
                         lambda options: registry.run(entry.name, options),
                         entry.required)()


if __name__ == "__main__":
    run_main()
