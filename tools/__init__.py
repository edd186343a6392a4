"""Command-line tools: admin, replay, transfer, install (the virtualenv behind make), and the
progress every long-running one shows (progress)."""
