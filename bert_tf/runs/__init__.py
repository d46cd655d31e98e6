"""What runs any task and names none: the `Task` shape (`task`), the one train / eval /
predict / export (`driver`), a run's context and config.json (`run_context`,
`run_config`), the shared options (`option_groups`, `options`), the tasks by name
(`registry`: each task's options and class loaded by their "module:Class" names),
bert-export-model's body (`export_checkpoint`, `export_settings`), bert-extract-features'
(`feature_extraction`), the data helpers tasks share (`text_files`, `column_roles`,
`class_weights`), and the groups of runs of any task (`seeds/`, `search/`).

Sits between serving and the task folders (tests/test_layout.py): the tasks import it,
it imports no task module.
"""
