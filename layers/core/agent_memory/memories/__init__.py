"""Long-term memory: the write path, reads, stored records and scripts, transfer, and recall."""
