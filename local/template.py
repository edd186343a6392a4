"""Read ``template.yaml`` the way API Gateway and Lambda would use it.

Only what routing needs is read: each ``AWS::Serverless::Function`` with an ``HttpApi`` event
(method, path, code folder, handler, and ``Auth: {Authorizer: NONE}`` for a route served
without the authorizer), the HTTP API's default Lambda authorizer, the background
function (``BackgroundFunction``, which EventBridge Scheduler invokes; the local scheduler loop
invokes it here), and the ``Globals`` environment with ``!Ref`` parameters resolved from values
the local stack supplies.
Route precedence follows API Gateway HTTP APIs: the most specific match wins, so a route with
more literal segments beats one with more parameters
(https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-develop-routes.html).
"""

from __future__ import annotations

import importlib.util
import re
from collections import ChainMap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import yaml

Handler = Callable[[dict[str, Any], Any], Any]

BACKGROUND_FUNCTION = "BackgroundFunction"


class _CfnLoader(yaml.SafeLoader):
    """SafeLoader that keeps CloudFormation short-form tags as ``{"!Tag": value}``."""


def _tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    return {"!" + suffix: value}


_CfnLoader.add_multi_constructor("!", _tag)


def load_template(path: Path) -> dict[str, Any]:
    """``template.yaml`` as a dict, CloudFormation tags kept as ``{"!Ref": ...}`` and the like."""
    with path.open(encoding="utf-8") as handle:
        doc = yaml.load(handle, Loader=_CfnLoader)  # noqa: S506 - SafeLoader subclass
    if not isinstance(doc, dict):
        raise ValueError(f"{path} is not a template")
    return doc


@dataclass
class Function:
    """A function as the template declares it; ``load`` imports a fresh copy of its module.

    ``timeout_seconds`` and ``memory_mb`` are the function's own ``Timeout`` and ``MemorySize``
    (``None`` when it takes the ``Globals`` value)."""

    logical_id: str
    code_dir: Path
    handler: str
    timeout_seconds: float | None = None
    memory_mb: int | None = None
    _module: ModuleType | None = field(default=None, repr=False)

    def module(self) -> ModuleType:
        """The handler's module, imported once per ``Function`` (one warm container)."""
        if self._module is None:
            module_name = self.handler.rpartition(".")[0]
            source = self.code_dir / f"{module_name}.py"
            spec = importlib.util.spec_from_file_location(
                f"_fn_{self.logical_id}_{module_name}", source
            )
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot load {source}")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            self._module = module
        return self._module

    def load(self) -> Handler:
        """The declared handler callable (``module.attr`` of ``Handler``)."""
        handler: Handler = getattr(self.module(), self.handler.rpartition(".")[2])
        return handler


@dataclass
class Route:
    """One ``HttpApi`` event of a function: method, path template and its compiled pattern.

    ``authorized`` is False for an event with ``Auth: {Authorizer: NONE}``, which API Gateway
    serves without calling the default authorizer."""

    method: str
    path: str
    function: Function
    pattern: re.Pattern[str]
    literal_segments: int
    authorized: bool = True

    @property
    def route_key(self) -> str:
        """``"<METHOD> <path template>"``, as payload 2.0 events name the route."""
        return f"{self.method} {self.path}"

    def match(self, method: str, path: str) -> dict[str, str] | None:
        """The path parameters when ``method`` and the raw ``path`` match, else None."""
        if self.method not in (method, "ANY"):
            return None
        found = self.pattern.fullmatch(path)
        return None if found is None else found.groupdict()


def _compile(path: str) -> tuple[re.Pattern[str], int]:
    parts, literals = [], 0
    for segment in path.strip("/").split("/"):
        greedy = re.fullmatch(r"\{(\w+)\+\}", segment)
        param = re.fullmatch(r"\{(\w+)\}", segment)
        if greedy:
            parts.append(f"(?P<{greedy.group(1)}>.+)")
        elif param:
            parts.append(f"(?P<{param.group(1)}>[^/]+)")
        else:
            parts.append(re.escape(segment))
            literals += 1
    return re.compile("/" + "/".join(parts)), literals


@dataclass
class HttpApi:
    """Routes, the authorizer, the background function and the function environment of one
    template."""

    routes: list[Route]
    authorizer: Function | None
    environment: dict[str, str]
    background: Function | None = None
    scheduled: list[Function] = field(default_factory=list)
    """Functions an EventBridge schedule invokes (an event of ``Type: ScheduleV2`` or
    ``Schedule``), which the local stack invokes on its own loop (``local.scheduler``)."""

    def functions(self) -> list[Function]:
        """Every function the API can invoke (the routes' and the authorizer), once each."""
        found = {id(r.function): r.function for r in self.routes}
        if self.authorizer is not None:
            found[id(self.authorizer)] = self.authorizer
        return list(found.values())

    def find(self, method: str, path: str) -> tuple[Route, dict[str, str]] | None:
        """The route for ``method`` and raw ``path`` and its path parameters, or None (routes
        are kept most specific first, as API Gateway chooses)."""
        for route in self.routes:
            params = route.match(method, path)
            if params is not None:
                return route, params
        return None


def _resolve(value: Any, parameters: dict[str, str]) -> str | None:
    """A ``Globals`` variable's local value: ``!Ref`` a parameter from ``parameters``; ``None``
    for ``!GetAtt`` of a stack resource that the local stack does not have (the KMS key of
    ``KIVIDB_KMS_KEY_ID``), so that the variable stays unset here."""
    if isinstance(value, dict) and ("!GetAtt" in value or "Fn::GetAtt" in value):
        return None
    if isinstance(value, dict) and "!Ref" in value:
        return parameters[value["!Ref"]]
    if isinstance(value, dict) and "Ref" in value:
        return parameters[value["Ref"]]
    return str(value)


def _number(value: Any, parameters: dict[str, str]) -> float | None:
    resolved = None if value is None else _resolve(value, parameters)
    return float(resolved) if resolved else None


def _integer(value: Any, parameters: dict[str, str]) -> int | None:
    number = _number(value, parameters)
    return int(number) if number is not None else None


def read_http_api(template_path: Path, parameters: dict[str, str]) -> HttpApi:
    """Build the routing table of ``template_path``. ``parameters`` gives ``!Ref``-ed template
    parameters their local values; one it does not give takes the template's ``Default`` (a
    parameter with neither is a ``KeyError`` when referenced)."""
    template = load_template(template_path)
    defaults = {
        name: str(spec["Default"])
        for name, spec in (template.get("Parameters") or {}).items()
        if isinstance(spec, dict) and "Default" in spec
    }
    parameters = cast(dict[str, str], ChainMap(parameters, defaults))
    root = template_path.parent
    resources: dict[str, Any] = template.get("Resources", {})
    functions: dict[str, Function] = {}
    routes: list[Route] = []
    scheduled: list[Function] = []
    for logical_id, resource in resources.items():
        if resource.get("Type") != "AWS::Serverless::Function":
            continue
        props = resource.get("Properties", {})
        function = Function(
            logical_id,
            root / props["CodeUri"],
            props["Handler"],
            timeout_seconds=_number(props.get("Timeout"), parameters),
            memory_mb=_integer(props.get("MemorySize"), parameters),
        )
        functions[logical_id] = function
        for event in (props.get("Events") or {}).values():
            if event.get("Type") in ("Schedule", "ScheduleV2"):
                scheduled.append(function)
            if event.get("Type") != "HttpApi":
                continue
            method = str(event["Properties"]["Method"]).upper()
            path = event["Properties"]["Path"]
            pattern, literals = _compile(path)
            auth = event["Properties"].get("Auth") or {}
            authorized = auth.get("Authorizer") != "NONE"
            routes.append(Route(method, path, function, pattern, literals, authorized))
    routes.sort(key=lambda r: (-r.literal_segments, r.path.count("+"), -len(r.path)))

    authorizer = None
    for resource in resources.values():
        if resource.get("Type") != "AWS::Serverless::HttpApi":
            continue
        auth = resource.get("Properties", {}).get("Auth", {})
        default = auth.get("DefaultAuthorizer")
        if default:
            # ``!Ref Function.Alias`` (its alias, as template.yaml names it) or
            # ``!GetAtt Function.Arn``: the function is what the dot follows.
            arn = auth["Authorizers"][default]["FunctionArn"]
            target = arn.get("!Ref") or arn["!GetAtt"]
            target_id = target.split(".")[0] if isinstance(target, str) else target[0]
            authorizer = functions[target_id]

    variables = (
        template.get("Globals", {}).get("Function", {}).get("Environment", {}).get("Variables", {})
    )
    resolved = {name: _resolve(value, parameters) for name, value in variables.items()}
    environment = {name: value for name, value in resolved.items() if value is not None}
    return HttpApi(routes, authorizer, environment, functions.get(BACKGROUND_FUNCTION), scheduled)
