"""``python -m tools.sam_aliases``, in the SAM CLI's virtualenv (``make validate``): template.yaml
as SAM transforms it, checked for SnapStart behind aliases (docs/deploy.md, "Cold starts").

SnapStart applies to published versions only, so whatever invokes a function must invoke its
alias ``live``, never the function itself (``$LATEST``, which has no snapshot). This transforms
the template with SAM's own translator (``samtranslator``, as ``sam deploy`` does; code and
layer locations stand in for ``sam build``'s) and checks that every function has SnapStart from
the ``SnapStart`` parameter, a version and the alias, and that every API Gateway integration and
authorizer, every invoke permission and every schedule target names an alias. Exit 1 with the
findings otherwise.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PARAMETERS = {"ControlRedisUrl": "redis://x", "SubnetIds": "subnet-1", "SecurityGroupIds": "sg-1"}


class _NoManagedPolicies:
    """The translator's loader of AWS managed policy names: the template names none by name."""

    def load(self) -> dict[str, str]:
        return {}


def transformed() -> dict[str, Any]:
    """template.yaml transformed by SAM (us-east-1), with S3 locations for code and layer."""
    from samtranslator.translator.transform import transform
    from samtranslator.yaml_helper import yaml_parse

    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    template = yaml_parse((ROOT / "template.yaml").read_text(encoding="utf-8"))
    for name, resource in template["Resources"].items():
        if resource["Type"] == "AWS::Serverless::Function":
            resource["Properties"]["CodeUri"] = f"s3://bucket/{name}"
        elif resource["Type"] == "AWS::Serverless::LayerVersion":
            resource["Properties"]["ContentUri"] = f"s3://bucket/{name}"
    done: dict[str, Any] = transform(template, PARAMETERS, _NoManagedPolicies())
    return done


def findings(template: dict[str, Any]) -> list[str]:
    """What does not invoke an alias, or lacks SnapStart, in a transformed template."""
    resources: dict[str, Any] = template["Resources"]

    def of_type(kind: str) -> dict[str, Any]:
        return {k: v for k, v in resources.items() if v["Type"] == kind}

    functions = of_type("AWS::Lambda::Function")
    aliases = of_type("AWS::Lambda::Alias")
    found = []
    for name, function in functions.items():
        if function["Properties"].get("SnapStart") != {"ApplyOn": {"Ref": "SnapStart"}}:
            found.append(f"{name}: no SnapStart from the SnapStart parameter")
        if f"{name}Aliaslive" not in aliases:
            found.append(f"{name}: no alias live")
    for name, permission in of_type("AWS::Lambda::Permission").items():
        if "Aliaslive" not in json.dumps(permission["Properties"]["FunctionName"]):
            found.append(f"{name}: permits invoking a function, not its alias")
    for name, api in of_type("AWS::ApiGatewayV2::Api").items():
        body = json.dumps(api["Properties"])
        targets = set(re.findall(r"functions/\$\{([A-Za-z0-9.]+)\}/invocations", body))
        found += [f"{name}: {t} is invoked, not an alias" for t in targets if "Alias" not in t]
        if not targets:
            found.append(f"{name}: no integration found")
    for name, schedule in of_type("AWS::Scheduler::Schedule").items():
        if "Aliaslive" not in json.dumps(schedule["Properties"]["Target"]["Arn"]):
            found.append(f"{name}: its target is a function, not its alias")
    return found


def main() -> int:
    """Print the findings (none: a line saying so); 1 when there are any."""
    found = findings(transformed())
    for finding in found:
        print(finding)
    if not found:
        print("template.yaml: every function has SnapStart and is invoked through its alias")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
