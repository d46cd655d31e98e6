"""Text: WordPiece tokenization (Python and in-graph), vocab files, the input layout."""
