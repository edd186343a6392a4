"""The snippet of each section of docs/integrations.md for Google ADK, CrewAI, LlamaIndex and
Claude's memory tool runs as written against the local stack (the first ``python`` block of the
section, in a process of its own; CrewAI's in its virtualenv), and prints what it says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.common import unique

ROOT = Path(__file__).resolve().parents[2]
CREWAI_PYTHON = ROOT / ".venv-crewai" / "bin" / "python"
SAID = {
    "Google ADK": "Porto Book me a train to Lisbon.\n",
    "CrewAI": "Deploys go out on Fridays. 1\n",
    "LlamaIndex": "['I moved to Porto.'] ['chat-42']\n",
    "Claude's memory tool": (
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden "
        "items:\n17B\t/memories\n17B\t/memories/prefs.md\n"
    ),
}


def snippet(section: str) -> str:
    """The first ``python`` block under the ``## <section>`` heading."""
    text = (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8")
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```python\n(.*?)```", body, re.DOTALL)
    assert found, f"no python block under ## {section}"
    return found.group(1)


@pytest.mark.parametrize("section", SAID)
def test_the_docs_snippet_runs_against_the_local_stack(stack, memory, tmp_path, section):
    name = unique("snippet")
    memory.put_store("local", name, dimensions=3)
    script = tmp_path / "snippet.py"
    script.write_text(snippet(section), encoding="utf-8")
    python = CREWAI_PYTHON if section == "CrewAI" else Path(sys.executable)
    env = {
        **os.environ,
        "KIVIDB_API_URL": stack.url,
        "KIVIDB_API_KEY": stack.api_key,
        "KIVIDB_INSTANCE": "local",
        "KIVIDB_STORE": name,
    }
    try:
        done = subprocess.run(
            [str(python), str(script)],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout == SAID[section]
    finally:
        memory.delete_store("local", name)
