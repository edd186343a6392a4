"""template.yaml wiring as the local stack reads it: routes, handlers, authorizer, samples."""

import json
from pathlib import Path

import pytest

from local.template import load_template, read_http_api
from tests.conftest import ROOT

PARAMETERS = {
    "ControlRedisUrl": "redis://127.0.0.1:1/0",
    "SubnetIds": "",
    "SecurityGroupIds": "",
    "LogRetentionDays": "30",
    "LogLevel": "INFO",
}

EXPECTED_ROUTES = {
    "GET /agent-memory",
    "GET /instances/{instance_id}/agent-memory",
    "PUT /instances/{instance_id}/agent-memory/{store}",
    "GET /instances/{instance_id}/agent-memory/{store}",
    "DELETE /instances/{instance_id}/agent-memory/{store}",
    "POST /instances/{instance_id}/agent-memory/{store}/sessions/{session_id}/events",
    "GET /instances/{instance_id}/agent-memory/{store}/sessions",
    "GET /instances/{instance_id}/agent-memory/{store}/sessions/{session_id}",
    "DELETE /instances/{instance_id}/agent-memory/{store}/sessions/{session_id}",
    "POST /instances/{instance_id}/agent-memory/{store}/sessions/{session_id}/extract",
    "POST /instances/{instance_id}/agent-memory/{store}/recall",
    "POST /instances/{instance_id}/agent-memory/{store}/memories",
    "GET /instances/{instance_id}/agent-memory/{store}/memories",
    "POST /instances/{instance_id}/agent-memory/{store}/memories/search",
    "GET /instances/{instance_id}/agent-memory/{store}/memories/{memory_id}",
    "PATCH /instances/{instance_id}/agent-memory/{store}/memories/{memory_id}",
    "DELETE /instances/{instance_id}/agent-memory/{store}/memories/{memory_id}",
    "DELETE /instances/{instance_id}/agent-memory/{store}/actors/{actor_id}/memories",
}


@pytest.fixture(scope="module")
def api():
    return read_http_api(ROOT / "template.yaml", PARAMETERS)


def test_every_route_of_the_contract_has_one_function(api):
    keys = [route.route_key for route in api.routes]
    assert set(keys) == EXPECTED_ROUTES
    assert len(keys) == len(set(keys))
    functions = [route.function.logical_id for route in api.routes]
    assert len(functions) == len(set(functions)), "one function per route"


def test_handler_modules_exist_and_are_uniquely_named(api):
    modules = [route.function.handler.split(".")[0] for route in api.routes]
    assert len(modules) == len(set(modules))
    for route in api.routes:
        module = route.function.handler.split(".")[0]
        assert (route.function.code_dir / f"{module}.py").is_file()


def test_the_default_authorizer_is_the_authorizer_function(api):
    assert api.authorizer is not None
    assert api.authorizer.logical_id == "AuthorizerFunction"


def test_every_function_has_a_sample_event_that_matches_its_route(api):
    for route in api.routes:
        module = route.function.handler.split(".")[0]
        event = json.loads((ROOT / "events" / f"{module}.json").read_text())
        assert event["routeKey"] == route.route_key
        assert route.match(event["requestContext"]["http"]["method"], event["rawPath"]) is not None
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


def test_only_the_store_writer_makes_data_keys_and_only_provider_callers_decrypt():
    template = load_template(Path(ROOT / "template.yaml"))
    grants = _kms_grants(template)
    decrypting = {
        "RecallFunction",
        "AddMemoryFunction",
        "SearchMemoriesFunction",
        "UpdateMemoryFunction",
    }
    if "BackgroundFunction" in template["Resources"]:
        decrypting.add("BackgroundFunction")
    expected = {"PutStoreFunction": {"kms:GenerateDataKey"}}
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
    ":function:${AWS::StackName}-background"
}
ARMING_FUNCTIONS = {"AddEventsFunction", "BackgroundFunction", "ExtractSessionFunction"}


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
    assert BACKGROUND_ARN["!Sub"].endswith(":function:" + props["FunctionName"]["!Sub"])


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
        sids = {"ExtractSessionFunction": "StartExtractionNow",
                "AddEventsFunction": "StartSummarizationNow"}  # fmt: skip
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
