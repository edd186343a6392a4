"""Working memory: sessions of messages, their summaries and state, export and import."""
