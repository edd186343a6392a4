"""Wiring by what each function needs: a function loads only the layer's modules it uses.

Each check runs in a fresh interpreter (``python -c``), as a new Lambda container does, and
counts the modules of ``agent_memory`` in ``sys.modules``."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent

COUNT = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("handler", {path!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
if {invoke!r}:
    class Context:
        function_name = "authorizer"
        memory_limit_in_mb = 128
        invoked_function_arn = "arn:aws:lambda:us-east-1:000000000000:function:authorizer"
        aws_request_id = "req"
    event = {{"headers": {{"authorization": "Bearer kvm_0123456789abcdef0123"}}}}
    answer = module.lambda_handler(event, Context())
    assert answer["isAuthorized"] is True, answer
layer = sorted(name for name in sys.modules if name.startswith("agent_memory"))
print(json.dumps({{"layer": layer, "numpy": "numpy" in sys.modules,
                  "xray": "aws_xray_sdk" in sys.modules}}))
"""


def _loaded(handler: str, *, invoke: bool = False) -> dict:
    path = str(ROOT / "functions" / handler / f"{handler}.py")
    done = subprocess.run(
        [sys.executable, "-c", COUNT.format(path=path, invoke=invoke)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "KIVIDB_CONTROL_URL": "redis://127.0.0.1:1/0"},
    )
    return json.loads(done.stdout)


def test_importing_the_authorizer_loads_at_most_eleven_modules_of_the_layer_and_no_numpy():
    loaded = _loaded("authorizer")
    # ten, and the SnapStart hooks (edge.snapstart, registered when edge.runtime is imported)
    assert len(loaded["layer"]) <= 11, loaded["layer"]
    assert not loaded["numpy"] and not loaded["xray"]
    packages = {name.split(".")[1] for name in loaded["layer"] if name.count(".") >= 2}
    assert packages <= {"edge"}, packages


@pytest.mark.parametrize("handler", ["add_events", "get_session", "put_store", "list_stores"])
def test_a_function_of_working_memory_or_stores_loads_no_search_index(handler):
    loaded = _loaded(handler)
    assert not loaded["numpy"]
    assert not [name for name in loaded["layer"] if name.startswith("agent_memory.search")]


def test_the_authorizer_answering_loads_the_control_plane_keys_and_a_client_only():
    # The control database is unreachable here (port 1): the answer is "cannot reach the
    # database", and the modules loaded to get it are those of any authorization.
    loaded = _loaded("authorizer", invoke=True)
    assert not loaded["numpy"] and not loaded["xray"]
    packages = {name.split(".")[1] for name in loaded["layer"] if name.count(".") >= 2}
    assert packages <= {"edge", "control", "database"}, packages
    assert "agent_memory.control.instances" not in loaded["layer"]
