"""What most tests use: the project's folder, unique names, the mark for the real datasets."""

import uuid
from pathlib import Path

import pytest

from tools.replay import DEFAULT_FILES

ROOT = Path(__file__).resolve().parent.parent.parent


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


needs_data = pytest.mark.skipif(
    not all(path.is_file() for path in DEFAULT_FILES.values()),
    reason="the LoCoMo / MemoryBank files are not in $KIVIDB_DATA_DIR (default ../shared/data)",
)
"""For tests that replay the real datasets, which are never copied into the project."""
