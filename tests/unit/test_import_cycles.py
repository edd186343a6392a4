"""``tools.import_cycles``: the layer has no import circle, and the check finds one in a
package made here, also when it hides behind ``TYPE_CHECKING`` or inside a function."""

import textwrap

import pytest

from tools.import_cycles import circles


def test_the_layer_has_no_import_circle():
    assert circles("agent_memory") == []


@pytest.mark.parametrize(
    "import_b",
    [
        "from circular_pkg import b\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from circular_pkg import b\n",
        "def f():\n    from circular_pkg import b\n    return b\n",
    ],
    ids=["top", "type-checking", "in-a-function"],
)
def test_a_circle_is_found_wherever_its_import_hides(tmp_path, monkeypatch, import_b):
    package = tmp_path / "circular_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text(textwrap.dedent(import_b))
    (package / "b.py").write_text("from circular_pkg import a\n")
    (package / "c.py").write_text("from circular_pkg import a\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert circles("circular_pkg") == [["circular_pkg.a", "circular_pkg.b"]]
