"""The parameters the tests read template.yaml with (as `sam deploy` would pass them)."""

PARAMETERS = {
    "ControlRedisUrl": "redis://127.0.0.1:1/0",
    "SubnetIds": "",
    "SecurityGroupIds": "",
    "LogRetentionDays": "30",
    "LogLevel": "INFO",
}
