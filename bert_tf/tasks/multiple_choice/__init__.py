"""Multiple choice (SWAG, and questions with choices in JSONL): bert-run-multiple-choice."""
