"""Several seeds as one run (`--seeds`, `--num_seeds`): each seed a run folder
`output_dir/seed-N`, a summary across them, the best seed marked (`runs`)."""
