"""Search over one actor's memories in memory: vectors, BM25 keywords, filters and fusion."""
