"""Redis-protocol databases: connections and clients, Lua scripts, every key, partitioned
reads."""
