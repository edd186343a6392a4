"""Administer the control plane: organizations, API keys and database instances.

Usage (``KIVIDB_CONTROL_URL`` or ``--control-url`` names the control database)::

    python -m tools.admin create-org ORG [--name NAME]
    python -m tools.admin issue-key ORG            # prints the key once; only its hash is kept
    python -m tools.admin list-keys ORG
    python -m tools.admin revoke-key ORG KEY_ID
    python -m tools.admin register-instance ORG INSTANCE_ID URL
    python -m tools.admin list-instances ORG

Exit status 0 on success, 1 on a refused request (message on stderr), 2 on bad usage.
Instance URLs can hold passwords, so ``list-instances`` prints them with the password masked.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "layers" / "core"))

from agent_memory.clock import SystemClock
from agent_memory.control import ControlPlane
from agent_memory.db import redis_client
from agent_memory.errors import AgentMemoryError


def mask_password(url: str) -> str:
    """``redis://user:secret@host`` -> ``redis://user:***@host``; other URLs unchanged."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    netloc = f"{user}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tools.admin", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--control-url", default=os.environ.get("KIVIDB_CONTROL_URL"))
    commands = parser.add_subparsers(dest="command", required=True)
    create = commands.add_parser("create-org", help="create an organization")
    create.add_argument("org")
    create.add_argument("--name")
    commands.add_parser("issue-key", help="issue an API key").add_argument("org")
    commands.add_parser("list-keys", help="list an organization's key ids").add_argument("org")
    revoke = commands.add_parser("revoke-key", help="revoke an API key at once")
    revoke.add_argument("org")
    revoke.add_argument("key_id")
    register = commands.add_parser("register-instance", help="register a database instance")
    register.add_argument("org")
    register.add_argument("instance_id")
    register.add_argument("url")
    commands.add_parser("list-instances", help="list an organization's instances").add_argument(
        "org"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not args.control_url:
        print("Set KIVIDB_CONTROL_URL or pass --control-url.", file=sys.stderr)
        return 2
    control = ControlPlane(redis_client(args.control_url), SystemClock())
    try:
        if args.command == "create-org":
            created = control.create_organization(args.org, args.name)
            print(f"organization {args.org} {'created' if created else 'already exists'}")
        elif args.command == "issue-key":
            key_id, api_key = control.issue_api_key(args.org)
            print(f"key id:  {key_id}\nAPI key: {api_key}\n(shown once; only its hash is kept)")
        elif args.command == "list-keys":
            for info in control.list_api_keys(args.org):
                print(f"{info.key_id}\tcreated {info.created_at.isoformat()}")
        elif args.command == "revoke-key":
            control.revoke_api_key(args.org, args.key_id)
            print(f"revoked {args.key_id}")
        elif args.command == "register-instance":
            control.register_instance(args.org, args.instance_id, args.url)
            print(f"instance {args.instance_id} registered for {args.org}")
        elif args.command == "list-instances":
            for instance in control.instances(args.org):
                print(f"{instance.instance_id}\t{mask_password(instance.url)}")
    except AgentMemoryError as exc:
        print(f"{exc.code}: {exc.message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
