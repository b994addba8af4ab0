"""Planning in pure Python (no torch at import): the prefix tree, width groups, row chunks."""
