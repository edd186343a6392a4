"""Consolidation: runs that merge, correct and retire an actor's memories, kept for review
or applied, and their undo."""
