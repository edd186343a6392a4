"""Background work on a session: extraction and summarization, and their scheduling."""
