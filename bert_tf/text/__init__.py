"""Text: WordPiece tokenization (Python and in-graph), vocab files, packing."""
