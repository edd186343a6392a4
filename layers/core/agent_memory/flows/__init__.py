"""Use cases: one function per thing a route (or a background run) does, each owning its scope
check, quota reservation, steps, usage counts, webhook events and metrics."""
