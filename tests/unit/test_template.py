"""template.yaml wiring as the local stack reads it: routes, handlers, authorizer, samples."""

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from local.template import load_template, read_http_api
from tests.support.common import ROOT
from tests.support.template import PARAMETERS

EXPECTED_ROUTES = {
    "GET /agent-memory",
    "GET /instances/{instance_id}/agent-memory/{store}/actors/{actor_id}/profile",
    "PATCH /instances/{instance_id}/agent-memory/{store}/actors/{actor_id}/profile",
    "GET /instances/{instance_id}/agent-memory/{store}/actors/{actor_id}/profile/history",
    "POST /instances/{instance_id}/agent-memory/{store}/actors/{actor_id}/consolidate",
    "GET /instances/{instance_id}/agent-memory/{store}/consolidations",
    "GET /instances/{instance_id}/agent-memory/{store}/consolidations/{consolidation_id}",
    "POST /instances/{instance_id}/agent-memory/{store}/consolidations/{consolidation_id}/apply",
    "POST /instances/{instance_id}/agent-memory/{store}/consolidations/{consolidation_id}/discard",
    "POST /instances/{instance_id}/agent-memory/{store}/consolidations/{consolidation_id}/revert",
    "POST /instances/{instance_id}/agent-memory/{store}/memories/{memory_id}/restore",
    "GET /instances/{instance_id}/agent-memory/{store}/export/profiles",
    "POST /instances/{instance_id}/agent-memory/{store}/import/profiles",
    "GET /instances/{instance_id}/agent-memory",
    "PUT /instances/{instance_id}/agent-memory/{store}",
    "GET /instances/{instance_id}/agent-memory/{store}",
    "DELETE /instances/{instance_id}/agent-memory/{store}",
    "POST /instances/{instance_id}/agent-memory/{store}/sessions/{session_id}/events",
    "GET /instances/{instance_id}/agent-memory/{store}/sessions",
    "GET /instances/{instance_id}/agent-memory/{store}/sessions/{session_id}",
    "DELETE /instances/{instance_id}/agent-memory/{store}/sessions/{session_id}",
    "POST /instances/{instance_id}/agent-memory/{store}/sessions/{session_id}/extract",
    "POST /instances/{instance_id}/agent-memory/{store}/sessions/{session_id}/pop",
    "POST /keys",
    "GET /keys",
    "DELETE /keys/{key_id}",
    "PUT /instances/{instance_id}/agent-memory/{store}/keyed-memories",
    "GET /instances/{instance_id}/agent-memory/{store}/keyed-memories",
    "DELETE /instances/{instance_id}/agent-memory/{store}/keyed-memories",
    "POST /instances/{instance_id}/agent-memory/{store}/keyed-memories/search",
    "POST /instances/{instance_id}/agent-memory/{store}/keyed-memories/namespaces",
    "POST /instances/{instance_id}/agent-memory/{store}/recall",
    "POST /instances/{instance_id}/agent-memory/{store}/memories",
    "GET /instances/{instance_id}/agent-memory/{store}/memories",
    "POST /instances/{instance_id}/agent-memory/{store}/memories/search",
    "GET /instances/{instance_id}/agent-memory/{store}/memories/{memory_id}",
    "PATCH /instances/{instance_id}/agent-memory/{store}/memories/{memory_id}",
    "DELETE /instances/{instance_id}/agent-memory/{store}/memories/{memory_id}",
    "DELETE /instances/{instance_id}/agent-memory/{store}/actors/{actor_id}/memories",
    "GET /instances/{instance_id}/agent-memory/{store}/export/sessions",
    "GET /instances/{instance_id}/agent-memory/{store}/export/sessions/{session_id}",
    "PUT /instances/{instance_id}/agent-memory/{store}/import/sessions/{session_id}",
    "GET /instances/{instance_id}/agent-memory/{store}/export/memories",
    "POST /instances/{instance_id}/agent-memory/{store}/import/memories",
    "GET /instances/{instance_id}/agent-memory/{store}/usage",
    "GET /usage",
    "POST /instances/{instance_id}/agent-memory/{store}/webhooks/secret",
    "GET /instances/{instance_id}/agent-memory/{store}/webhooks/deliveries",
    "GET /console",
    "GET /console/{proxy+}",
    "POST /mcp",
    "GET /mcp",
    "DELETE /mcp",
}
# The console's page and its files: one function, both routes without the authorizer.
CONSOLE_ROUTES = {"GET /console", "GET /console/{proxy+}"}
# The remote MCP server: one function answering POST (and GET, DELETE with 405) at /mcp.
MCP_ROUTES = {"POST /mcp", "GET /mcp", "DELETE /mcp"}


@pytest.fixture(scope="module")
def api():
    return read_http_api(ROOT / "template.yaml", PARAMETERS)


def test_every_route_of_the_contract_has_one_function(api):
    keys = [route.route_key for route in api.routes]
    assert set(keys) == EXPECTED_ROUTES
    assert len(keys) == len(set(keys))
    functions = [route.function.logical_id for route in api.routes]
    console = [
        f for f, r in zip(functions, api.routes, strict=True) if r.route_key in CONSOLE_ROUTES
    ]
    assert console == ["ConsoleFunction", "ConsoleFunction"]
    mcp = {f for f, r in zip(functions, api.routes, strict=True) if r.route_key in MCP_ROUTES}
    assert mcp == {"McpFunction"}
    others = [f for f in functions if f not in ("ConsoleFunction", "McpFunction")]
    assert len(others) == len(set(others)), "one function per API route"


def test_only_the_console_routes_are_served_without_the_authorizer(api):
    open_routes = {route.route_key for route in api.routes if not route.authorized}
    assert open_routes == CONSOLE_ROUTES
    route, params = api.find("GET", "/console/app-ABCDEFGH.js")
    assert (route.route_key, params) == ("GET /console/{proxy+}", {"proxy": "app-ABCDEFGH.js"})
    route, params = api.find("GET", "/console/a/b/../c")
    assert (route.route_key, params) == ("GET /console/{proxy+}", {"proxy": "a/b/../c"})
    assert api.find("GET", "/console")[0].route_key == "GET /console"
    assert api.find("GET", "/console/") is None  # a greedy parameter is never empty
    assert api.find("POST", "/console") is None


def test_handler_modules_exist_and_are_uniquely_named(api):
    modules = {
        route.function.logical_id: route.function.handler.split(".")[0] for route in api.routes
    }
    assert len(modules) == len(set(modules.values()))
    for route in api.routes:
        module = route.function.handler.split(".")[0]
        assert (route.function.code_dir / f"{module}.py").is_file()


def test_the_default_authorizer_is_the_authorizer_function(api):
    assert api.authorizer is not None
    assert api.authorizer.logical_id == "AuthorizerFunction"


def test_every_function_has_a_sample_event_that_matches_its_route(api):
    for route in api.routes:
        # events/<module>.json, or events/<module>_<what>.json for a function of two routes
        module = route.function.handler.split(".")[0]
        samples = [
            json.loads(path.read_text())
            for path in (ROOT / "events").glob(f"{module}*.json")
            if path.stem == module or path.stem.startswith(f"{module}_")
        ]
        (event,) = [e for e in samples if e["routeKey"] == route.route_key]
        assert route.match(event["requestContext"]["http"]["method"], event["rawPath"]) is not None
        if not route.authorized:
            assert "authorizer" not in event["requestContext"]
    assert (ROOT / "events" / "authorizer.json").is_file()


def test_more_literal_segments_win(api):
    route, params = api.find("GET", "/instances/db/agent-memory/s/sessions")
    assert route.path.endswith("/sessions")
    assert params == {"instance_id": "db", "store": "s"}
    route, params = api.find("GET", "/instances/db/agent-memory/s/sessions/a:b@c")
    assert params["session_id"] == "a:b@c"
    assert api.find("GET", "/nowhere") is None
    assert api.find("PATCH", "/agent-memory") is None


def test_environment_resolves_parameters(api):
    assert api.environment["KIVIDB_CONTROL_URL"] == PARAMETERS["ControlRedisUrl"]
    assert api.environment["POWERTOOLS_SERVICE_NAME"] == "agent-memory"


def test_globals_declare_runtime_architecture_and_layer():
    template = load_template(Path(ROOT / "template.yaml"))
    function = template["Globals"]["Function"]
    assert function["Runtime"] == "python3.12"
    assert function["Architectures"] == ["arm64"]
    assert function["Layers"] == [{"!Ref": "CoreLayer"}]
    for name, resource in template["Resources"].items():
        if resource["Type"] == "AWS::Serverless::Function":
            group = template["Resources"][f"{name}LogGroup"]
            assert group["Properties"]["RetentionInDays"] == {"!Ref": "LogRetentionDays"}


# --- Provider API keys under KMS: which function may do what with the key ---

KMS_KEY = "ProviderKeysKey"
PURPOSE = {"kms:EncryptionContext:purpose": "kividb-provider-api-key"}


def _kms_grants(template):
    """``{function logical id: {kms action}}`` from each function's ``Policies`` (inline
    statements and ``!Ref``-ed managed policies of the template), every such statement checked
    to name the one key and the encryption-context condition."""
    resources = template["Resources"]
    grants = {}
    for name, resource in resources.items():
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        statements = []
        for policy in resource["Properties"].get("Policies") or []:
            if isinstance(policy, dict) and "!Ref" in policy:
                managed = resources[policy["!Ref"]]
                assert managed["Type"] == "AWS::IAM::ManagedPolicy"
                statements += managed["Properties"]["PolicyDocument"]["Statement"]
            elif isinstance(policy, dict) and "Statement" in policy:
                statements += policy["Statement"]
        for statement in statements:
            actions = statement["Action"]
            actions = [actions] if isinstance(actions, str) else actions
            kms = {action for action in actions if action.lower().startswith("kms:")}
            if not kms:
                continue
            assert statement.get("Resource") == {"!GetAtt": f"{KMS_KEY}.Arn"}, name
            assert statement.get("Condition") == {"StringEquals": PURPOSE}, name
            grants.setdefault(name, set()).update(kms)
    return grants


def test_template_takes_no_fernet_key_and_points_functions_at_the_kms_key():
    template = load_template(Path(ROOT / "template.yaml"))
    assert "SecretKey" not in template["Parameters"]
    variables = template["Globals"]["Function"]["Environment"]["Variables"]
    assert "KIVIDB_SECRET_KEY" not in variables
    assert variables["KIVIDB_KMS_KEY_ID"] == {"!GetAtt": f"{KMS_KEY}.Arn"}
    key = template["Resources"][KMS_KEY]
    assert key["Type"] == "AWS::KMS::Key"
    assert key["Properties"]["KeySpec"] == "SYMMETRIC_DEFAULT"
    assert key["Properties"]["EnableKeyRotation"] is True
    (statement,) = key["Properties"]["KeyPolicy"]["Statement"]
    assert statement["Principal"] == {
        "AWS": {"!Sub": "arn:${AWS::Partition}:iam::${AWS::AccountId}:root"}
    }
    aliases = [r for r in template["Resources"].values() if r["Type"] == "AWS::KMS::Alias"]
    assert [a["Properties"]["TargetKeyId"] for a in aliases] == [{"!Ref": KMS_KEY}]


def test_the_local_stack_leaves_the_kms_key_unset(api):
    assert "KIVIDB_KMS_KEY_ID" not in api.environment
    assert "KIVIDB_SECRET_KEY" not in api.environment


def test_only_the_store_writers_make_data_keys_and_only_provider_callers_decrypt():
    template = load_template(Path(ROOT / "template.yaml"))
    grants = _kms_grants(template)
    decrypting = {
        "DeliverWebhooksFunction",
        "RecallFunction",
        "AddMemoryFunction",
        "SearchMemoriesFunction",
        "UpdateMemoryFunction",
        "PutKeyedMemoryFunction",
        "SearchKeyedMemoriesFunction",
        "ApplyConsolidationFunction",
    }
    if "BackgroundFunction" in template["Resources"]:
        decrypting.add("BackgroundFunction")
    expected = {
        "PutStoreFunction": {"kms:GenerateDataKey"},
        "RotateWebhookSecretFunction": {"kms:GenerateDataKey"},
    }
    expected.update({name: {"kms:Decrypt"} for name in decrypting})
    assert grants == expected


def test_no_other_policy_of_the_template_grants_kms_actions():
    template = load_template(Path(ROOT / "template.yaml"))
    allowed = {"EncryptProviderKeysPolicy", "DecryptProviderKeysPolicy", KMS_KEY}
    for name, resource in template["Resources"].items():
        if name in allowed:
            continue
        text = json.dumps(resource.get("Properties", {})).lower()
        assert '"kms:' not in text, f"{name} mentions a KMS action"


# --- background work: EventBridge Scheduler wiring ------------------------------------------

BACKGROUND_ARN = {
    "!Sub": "arn:${AWS::Partition}:lambda:${AWS::Region}:${AWS::AccountId}"
    ":function:${AWS::StackName}-background:live"
}
ARMING_FUNCTIONS = {
    "AddEventsFunction",
    "AddMemoryFunction",
    "ConsolidateActorFunction",
    "BackgroundFunction",
    "ExtractSessionFunction",
    "ImportSessionFunction",
}


@pytest.fixture(scope="module")
def resources():
    return load_template(Path(ROOT / "template.yaml"))["Resources"]


def _statements(document):
    statements = document["Statement"]
    return statements if isinstance(statements, list) else [statements]


def _as_list(value):
    return value if isinstance(value, list) else [value]


def test_the_background_function_is_found_with_its_own_timeout_and_memory(api):
    assert api.background is not None
    assert api.background.logical_id == "BackgroundFunction"
    assert api.background.handler == "background.lambda_handler"
    assert (api.background.timeout_seconds, api.background.memory_mb) == (300.0, 1024)
    assert (api.background.code_dir / "background.py").is_file()
    assert api.background not in [route.function for route in api.routes]


def test_the_background_arn_everyone_uses_is_the_background_functions_name(resources):
    props = resources["BackgroundFunction"]["Properties"]
    assert props["FunctionName"] == {"!Sub": "${AWS::StackName}-background"}
    assert "Events" not in props
    # its alias (Globals' AutoPublishAlias), whose published versions SnapStart snapshots
    alias = load_template(Path(ROOT / "template.yaml"))["Globals"]["Function"]["AutoPublishAlias"]
    name = props["FunctionName"]["!Sub"]
    assert BACKGROUND_ARN["!Sub"].endswith(f":function:{name}:{alias}")


def test_the_scheduler_role_may_only_invoke_the_background_function(resources):
    role = resources["ExtractionSchedulerRole"]["Properties"]
    (trust,) = _statements(role["AssumeRolePolicyDocument"])
    assert trust["Principal"] == {"Service": "scheduler.amazonaws.com"}
    assert trust["Action"] == "sts:AssumeRole"
    assert trust["Condition"]["StringEquals"]["aws:SourceAccount"] == {"!Ref": "AWS::AccountId"}
    assert trust["Condition"]["StringEquals"]["aws:SourceArn"] == {
        "!GetAtt": "ExtractionScheduleGroup.Arn"
    }
    assert "ManagedPolicyArns" not in role
    granted = [s for p in role["Policies"] for s in _statements(p["PolicyDocument"])]
    assert granted == [
        {"Effect": "Allow", "Action": "lambda:InvokeFunction", "Resource": BACKGROUND_ARN}
    ]


def test_arming_may_only_touch_the_groups_schedules_and_pass_the_scheduler_role(resources):
    policy = resources["ArmExtractionSchedulesPolicy"]
    assert policy["Type"] == "AWS::IAM::ManagedPolicy"
    statements = {s["Sid"]: s for s in _statements(policy["Properties"]["PolicyDocument"])}
    assert set(statements) == {"ArmExtractionSchedules", "PassSchedulerRole"}
    arm = statements["ArmExtractionSchedules"]
    assert sorted(_as_list(arm["Action"])) == [
        "scheduler:CreateSchedule",
        "scheduler:UpdateSchedule",
    ]
    assert arm["Resource"] == {
        "!Sub": "arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}"
        ":schedule/${ExtractionScheduleGroup}/*"
    }
    assert "Condition" not in arm
    pass_role = statements["PassSchedulerRole"]
    assert pass_role["Action"] == "iam:PassRole"
    assert pass_role["Resource"] == {"!GetAtt": "ExtractionSchedulerRole.Arn"}
    assert pass_role["Condition"] == {
        "StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}
    }
    assert all(s["Effect"] == "Allow" for s in statements.values())


def test_only_the_functions_that_arm_schedules_get_the_policy_and_the_environment(resources):
    for name, resource in resources.items():
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        props = resource["Properties"]
        policies = props.get("Policies", [])
        arms = {"!Ref": "ArmExtractionSchedulesPolicy"} in policies
        assert arms == (name in ARMING_FUNCTIONS), name
        variables = props.get("Environment", {}).get("Variables", {})
        if name in ARMING_FUNCTIONS:
            assert variables == {
                "KIVIDB_SCHEDULE_GROUP": {"!Ref": "ExtractionScheduleGroup"},
                "KIVIDB_BACKGROUND_FUNCTION_ARN": BACKGROUND_ARN,
                "KIVIDB_SCHEDULER_ROLE_ARN": {"!GetAtt": "ExtractionSchedulerRole.Arn"},
            }, name
        else:
            assert not any(v.startswith("KIVIDB_SCHEDULE") for v in variables), name


def test_only_the_extract_and_events_routes_may_invoke_the_background_function(resources):
    for name, resource in resources.items():
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        inline = [
            s
            for p in resource["Properties"].get("Policies", [])
            if isinstance(p, dict) and "Statement" in p
            for s in _statements(p)
        ]
        invokes = [s for s in inline if "lambda:InvokeFunction" in _as_list(s["Action"])]
        # POST .../extract starts extraction now; an append that outgrows summarize_after
        # starts summarization now. Both only the background function.
        sids = {
            "ExtractSessionFunction": "StartExtractionNow",
            "AddEventsFunction": "StartSummarizationNow",
            "ConsolidateActorFunction": "StartConsolidationNow",
        }
        if name in sids:
            assert invokes == [
                {
                    "Sid": sids[name],
                    "Effect": "Allow",
                    "Action": "lambda:InvokeFunction",
                    "Resource": BACKGROUND_ARN,
                }
            ], name
        else:
            assert invokes == [], name


# --- docs/deploy.md says what the template declares ---------------------------------------

DEPLOY_DOC = ROOT / "docs" / "deploy.md"


def _doc_section(title: str, level: str = "##") -> str:
    """The text under the heading ``title`` of docs/deploy.md, up to the next heading of the
    same or a higher level."""
    text = DEPLOY_DOC.read_text(encoding="utf-8")
    start = text.index(f"\n{level} {title}\n")
    ends = [
        found.start()
        for prefix in ("\n## ", f"\n{level} ")
        if (found := re.compile(re.escape(prefix)).search(text, start + 1)) is not None
    ]
    return text[start : min(ends, default=len(text))]


def _table_rows(section: str) -> list[list[str]]:
    """Cells of the markdown table rows of ``section``, header and separator rows left out."""
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in section.splitlines()
        if line.startswith("|")
    ]
    return [row for row in rows[2:] if not set("".join(row)) <= {"-", ":"}]


@pytest.fixture(scope="module")
def template():
    return load_template(Path(ROOT / "template.yaml"))


def _functions(template):
    return {
        name: resource
        for name, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
    }


def test_the_deploy_doc_counts_each_resource_type_the_template_declares(template):
    declared = Counter(resource["Type"] for resource in template["Resources"].values())
    creates = _doc_section("What the stack creates").split("\n### ")[0]
    counted = {}
    for row in _table_rows(creates):
        found = re.search(r"`(AWS::[A-Za-z0-9:]+)`", row[0])
        if found:
            counted[found.group(1)] = int(row[1])
    assert counted == dict(declared)  # every type has its row, with the template's count
    (sam_roles,) = [row for row in _table_rows(creates) if "made by SAM" in row[0]]
    assert int(sam_roles[1]) == declared["AWS::Serverless::Function"]  # one role per function
    routes = sum(1 for f in _functions(template).values() if f["Properties"].get("Events"))
    stated = {int(n) for n in re.findall(r"\b(\d+) route functions", DEPLOY_DOC.read_text())}
    # 36 API routes (18, 5 of export and import, pop, 5 of keyed memories, 3 of keys, 2 of
    # usage, 2 of webhooks), the console's and the MCP server's; and the scheduled delivery
    assert stated == {routes - 1} == {50}


def test_the_deploy_doc_lists_every_function_with_its_trigger_memory_and_timeout(template):
    functions = _functions(template)
    rows = {row[0].strip("`"): row for row in _table_rows(_doc_section("The functions", "###"))}
    assert set(rows) == set(functions)
    defaults = template["Globals"]["Function"]
    search_default = template["Parameters"]["SearchMemorySize"]["Default"]
    for name, function in functions.items():
        props = function["Properties"]
        trigger, sizes = rows[name][1], rows[name][2]
        events = props.get("Events", {}).values()
        routes = [
            f"`{event['Properties']['Method']} {event['Properties']['Path']}`"
            for event in events
            if event["Type"] == "HttpApi"
        ]
        if routes:
            assert trigger == " and ".join(routes), name
        for event in events:
            if event["Type"] == "ScheduleV2":
                assert f"`{event['Properties']['ScheduleExpression']}`" in trigger, name
        memory = props.get("MemorySize", defaults["MemorySize"])
        if memory == {"!Ref": "SearchMemorySize"}:
            assert sizes.startswith(f"`SearchMemorySize` ({search_default:,} MB), "), name
        else:
            assert sizes.startswith(f"{memory:,} MB, "), name
        assert f", {props.get('Timeout', defaults['Timeout'])} s" in sizes, name


# The functions that reach no database: the MCP server (its tool calls go to the API's public
# endpoint) and the console (static files). Outside the VPC they need no NAT gateway for what
# they do call, and take no elastic network interface of the subnets.
OUTSIDE_THE_VPC = {"ConsoleFunction", "McpFunction"}


def test_only_the_functions_that_reach_a_database_run_in_the_vpc(template):
    assert template["Globals"]["Function"]["VpcConfig"] == {
        "SubnetIds": {"!Ref": "SubnetIds"},
        "SecurityGroupIds": {"!Ref": "SecurityGroupIds"},
    }
    outside = {
        name
        for name, function in _functions(template).items()
        if function["Properties"].get("VpcConfig") == {"!Ref": "AWS::NoValue"}
    }
    assert outside == OUTSIDE_THE_VPC
    text = DEPLOY_DOC.read_text(encoding="utf-8")
    assert "all in the VPC but `ConsoleFunction` and `McpFunction`" in text
    assert "Every function but `ConsoleFunction` and `McpFunction` runs in the VPC" in text
    rows = {row[0].strip("`"): row for row in _table_rows(_doc_section("The functions", "###"))}
    for name in OUTSIDE_THE_VPC:
        assert "Not in the VPC (`VpcConfig: !Ref AWS::NoValue`)" in rows[name][3], name


def test_the_deploy_doc_gives_every_parameter_with_its_default(template):
    rows = {row[0].strip("`"): row for row in _table_rows(_doc_section("Parameters"))}
    assert set(rows) == set(template["Parameters"])
    for name, parameter in template["Parameters"].items():
        default = parameter.get("Default")
        shown = {None: "none (required)", "": "empty"}.get(default, str(default))
        assert rows[name][2] == shown, name
        assert rows[name][3] == ("yes" if parameter.get("NoEcho") else "no"), name


def test_the_guided_deploy_asks_for_the_parameters_in_template_order(template):
    prompts = [row[0] for row in _table_rows(_doc_section("Guided (interactive)", "###"))]
    asked = [p.removeprefix("Parameter ") for p in prompts if p.startswith("Parameter ")]
    assert asked == list(template["Parameters"])


def test_the_deploy_doc_says_what_each_layer_dependency_is_for():
    required = [
        line.split("==")[0].strip()
        for line in (ROOT / "layers" / "core" / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    described = " ".join(row[0] for row in _table_rows(_doc_section("Build")))
    assert [name for name in required if f"`{name}`" not in described] == []


def test_the_deploy_doc_describes_every_admin_subcommand():
    from tools.admin import _parser

    (choices,) = re.findall(r"\{([a-z,-]+)\}", _parser().format_usage())
    described = {
        row[0].split()[0].strip("`")
        for row in _table_rows(_doc_section("Bootstrap the control plane"))
    }
    assert set(choices.split(",")) <= described


def test_every_link_inside_the_deploy_doc_names_one_of_its_headings():
    text = DEPLOY_DOC.read_text(encoding="utf-8")
    anchors = {
        re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        for heading in re.findall(r"(?m)^#+ (.+)$", text)
    }
    assert set(re.findall(r"\]\(#([^)]+)\)", text)) - anchors == set()


def test_only_the_provider_callers_may_call_bedrock_and_only_the_named_models():
    template = load_template(Path(ROOT / "template.yaml"))
    resources = template["Resources"]
    policy = resources["InvokeBedrockModelsPolicy"]
    assert policy["Condition"] == "CallsBedrock"
    assert template["Parameters"]["BedrockModelIds"]["Default"] == ""
    statements = {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
    invoke = statements["InvokeNamedModels"]
    assert invoke["Action"] == "bedrock:InvokeModel" and invoke["Resource"] != "*"
    assert "BedrockModelIds" in json.dumps(invoke["Resource"])
    assert statements["RerankWithNamedModels"]["Action"] == "bedrock:Rerank"
    attached = {
        name
        for name, resource in resources.items()
        if "InvokeBedrockModelsPolicy" in json.dumps(resource.get("Properties", {}).get("Policies"))
    }
    callers = {
        "RecallFunction",
        "AddMemoryFunction",
        "SearchMemoriesFunction",
        "UpdateMemoryFunction",
        "PutKeyedMemoryFunction",
        "SearchKeyedMemoriesFunction",
        "BackgroundFunction",
        "ApplyConsolidationFunction",
    }
    assert attached == callers


# --- SnapStart (docs/deploy.md#cold-starts): every function, behind its alias ---

SNAPSTART_RUNTIMES = {"python3.12", "python3.13"}
"""Python runtimes SnapStart takes (Python 3.12 and later; AWS Lambda's SnapStart guide)."""


def test_every_function_publishes_versions_behind_the_alias_with_snapstart(template):
    globals_ = template["Globals"]["Function"]
    assert globals_["AutoPublishAlias"] == "live"
    assert globals_["SnapStart"] == {"ApplyOn": {"!Ref": "SnapStart"}}
    assert globals_["Runtime"] in SNAPSTART_RUNTIMES
    parameter = template["Parameters"]["SnapStart"]
    assert parameter["Default"] == "PublishedVersions"
    assert parameter["AllowedValues"] == ["PublishedVersions", "None"]
    layer = template["Resources"]["CoreLayer"]["Properties"]
    assert layer["PublishLambdaVersion"] is True
    assert set(layer["CompatibleRuntimes"]) <= SNAPSTART_RUNTIMES
    for name, function in _functions(template).items():
        props = function["Properties"]
        # A new version at each change of any property, the layer's version among them
        # (cfn-lint refuses this one in Globals, so each function says it).
        assert props.get("AutoPublishAliasAllProperties") is True, name
        # Nothing a function sets of its own takes SnapStart or the alias away from it, and
        # nothing SnapStart refuses (provisioned concurrency, EFS, ephemeral storage over
        # 512 MB) is set.
        for taken in ("AutoPublishAlias", "SnapStart", "Runtime"):
            assert taken not in props, (name, taken)
        for refused in ("ProvisionedConcurrencyConfig", "FileSystemConfigs"):
            assert refused not in props, (name, refused)
        assert props.get("EphemeralStorage", {}).get("Size", 512) <= 512, name


def test_api_gateway_calls_the_authorizers_alias(template):
    http_api = template["Resources"]["HttpApi"]["Properties"]
    authorizer = http_api["Auth"]["Authorizers"]["ApiKeyAuthorizer"]
    assert authorizer["FunctionArn"] == {"!Ref": "AuthorizerFunction.Alias"}
    assert authorizer["EnableFunctionDefaultPermissions"] is True  # SAM's permission: the alias


def test_every_invocation_of_the_background_function_names_its_alias(template):
    text = (ROOT / "template.yaml").read_text(encoding="utf-8")
    named = re.findall(r"function:\$\{AWS::StackName\}-background[^\"]*", text)
    assert named and set(named) == {"function:${AWS::StackName}-background:live"}
