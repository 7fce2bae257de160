"""Built-in toolsets (``builtin:`` tool sources)."""
