"""The control plane: organizations, API keys, database instances and their ownership."""
