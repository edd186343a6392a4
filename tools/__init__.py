"""Command-line tools: admin, replay."""
