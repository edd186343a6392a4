"""The Lambda handlers as template.yaml wires them, called with events/*.json samples."""

import json

from local.server import LambdaContext
from local.template import read_http_api
from tests.support.common import ROOT
from tests.support.template import PARAMETERS

API = read_http_api(ROOT / "template.yaml", PARAMETERS)
HANDLERS = {r.function.handler.split(".")[0]: r.function for r in API.routes}


def sample(name: str) -> dict:
    return json.loads((ROOT / "events" / f"{name}.json").read_text())


def build(name, tenant, store="demo", *, body=None, query=None, org=None, session=None):
    """The sample event of ``name``, re-pointed at ``tenant``'s instance and ``store``."""
    event = sample(name)
    path = event["rawPath"].replace("/instances/local/", f"/instances/{tenant.instance_id}/")
    path = path.replace("/agent-memory/demo", f"/agent-memory/{store}")
    if session is not None:
        path = path.replace("/demo-session", f"/{session}")
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["requestContext"]["authorizer"]["lambda"]["org_id"] = org or tenant.org_id
    if body is not None:
        event["body"] = body if isinstance(body, str) else json.dumps(body)
    if query is not None:
        event["rawQueryString"] = query
        event["queryStringParameters"] = dict(p.split("=", 1) for p in query.split("&"))
    return event


def invoke(name, event):
    answer = HANDLERS[name].load()(event, LambdaContext(name))
    body = json.loads(answer["body"]) if answer.get("body") else None
    return answer["statusCode"], body, answer.get("headers", {})
