"""The command-line tools: absl flags and `main` of every runner (thin root scripts call them)."""
