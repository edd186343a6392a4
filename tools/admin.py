"""Administer the control plane: organizations, API keys and database instances.

Usage (``KIVIDB_CONTROL_URL`` or ``--control-url`` names the control database)::

    python -m tools.admin create-org ORG [--name NAME]
    python -m tools.admin issue-key ORG            # prints the key once; only its hash is kept
    python -m tools.admin issue-key ORG --access read --store INSTANCE/STORE --actor A \\
        --expires-at 2027-01-01T00:00:00Z          # a scoped key (docs/keys.md)
    python -m tools.admin list-keys ORG
    python -m tools.admin set-limits ORG [--key KEY_ID] [--requests-per-second N] [--burst N]
                                     [--messages-per-day N] [--memories-per-day N]
                                     [--model-tokens-per-day N]
    python -m tools.admin revoke-key ORG KEY_ID
    python -m tools.admin register-instance ORG INSTANCE_ID URL [--adopt-existing-data]
                                                [--allow-unreachable]
    python -m tools.admin list-instances ORG
    python -m tools.admin remove-instance ORG INSTANCE_ID   # the data in the database stays
    python -m tools.admin delete-org ORG           # its keys (revoked at once) and instances

Exit status 0 on success, 1 on a refused request (``<code>: <message>`` on stderr: a missing
organization or instance, a database another organization has, ...), 2 on bad usage.
Instance URLs can hold passwords, so the tool prints them with every credential masked
(``agent_memory.database.urls.mask_url``: the user part's password, ``password=`` and
``ssl_password=`` query options, and anything else that may hold a piece of one).

A database belongs to one organization: ``register-instance`` refuses one that another
organization has registered (compared by normalized address, and by an ownership marker the
tool writes in the database when it can reach it), and one that already holds agent-memory data
not known to be ORG's (``control.ownership.refuse_foreign_data``: left by another
organization, or with no marker saying whose it is) unless ``--adopt-existing-data`` says ORG
may have that data. A database that cannot be reached is refused too, since its ownership
marker cannot be written, unless ``--allow-unreachable`` says to register it anyway: its first
use then writes the marker, or refuses the database if another registration's marker (or data
of an unknown owner) is there. A database an instance leaves (removed, re-pointed, or its
organization deleted) stays reserved for that organization for ``--release-hold`` seconds (default
``$KIVIDB_INSTANCE_CACHE_SECONDS``, else 30: the time warm functions may still use a cached
instance record).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from agent_memory.clock import SystemClock
from agent_memory.control.instances import DEFAULT_RELEASE_HOLD_SECONDS
from agent_memory.control.ownership import MarkerRelease, refuse_foreign_data
from agent_memory.control.plane import ControlPlane
from agent_memory.database.client import redis_client
from agent_memory.database.urls import mask_url
from agent_memory.errors import AgentMemoryError, ValidationFailed


def shown(text: str) -> str:
    """``text`` as one stretch of a terminal line: every character that is not printable (a
    newline, a tab, an escape, a bidirectional override...) written as its Python escape
    (``\\n``, ``\\x1b``, ``\\u202e``), so text a caller chose, such as a key's name, can
    neither start a line of its own nor move the cursor or recolour what follows (issue 32:
    a name with a newline and an escape sequence forged an admin key's line)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tools.admin", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--control-url", default=os.environ.get("KIVIDB_CONTROL_URL"))
    parser.add_argument(
        "--release-hold",
        type=float,
        metavar="SECONDS",
        default=float(
            os.environ.get("KIVIDB_INSTANCE_CACHE_SECONDS", DEFAULT_RELEASE_HOLD_SECONDS)
        ),
        help="how long a released database stays reserved for its organization",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    create = commands.add_parser("create-org", help="create an organization")
    create.add_argument("org")
    create.add_argument("--name")
    issue = commands.add_parser(
        "issue-key",
        help="issue an API key: the organization's admin key, or one limited by the options",
    )
    issue.add_argument("org")
    issue.add_argument("--name")
    issue.add_argument("--access", choices=["read", "write"], help="a scoped key: read or write")
    issue.add_argument("--instance", action="append", help="limit to this instance (repeat)")
    issue.add_argument(
        "--store", action="append", metavar="INSTANCE/STORE", help="limit to this store (repeat)"
    )
    issue.add_argument("--actor", action="append", help="limit to this actor (repeat)")
    issue.add_argument("--expires-at", help="ISO 8601 time after which the key is refused")
    commands.add_parser("list-keys", help="list an organization's key ids").add_argument("org")
    limits = commands.add_parser(
        "set-limits", help="set an organization's limits (or one key's, with --key)"
    )
    limits.add_argument("org")
    limits.add_argument("--key", dest="key_id", help="the key id whose own limits to set")
    limits.add_argument("--requests-per-second", type=float)
    limits.add_argument("--burst", type=int)
    limits.add_argument("--messages-per-day", type=int)
    limits.add_argument("--memories-per-day", type=int)
    limits.add_argument("--model-tokens-per-day", type=int)
    revoke = commands.add_parser("revoke-key", help="revoke an API key at once")
    revoke.add_argument("org")
    revoke.add_argument("key_id")
    register = commands.add_parser("register-instance", help="register a database instance")
    register.add_argument("org")
    register.add_argument("instance_id")
    register.add_argument("url")
    register.add_argument(
        "--adopt-existing-data",
        action="store_true",
        help="register a database that already holds agent-memory data not known to be ORG's",
    )
    register.add_argument(
        "--allow-unreachable",
        action="store_true",
        help="register a database that cannot be reached now (its first use writes the "
        "ownership marker, or refuses the database if another registration holds it)",
    )
    commands.add_parser("list-instances", help="list an organization's instances").add_argument(
        "org"
    )
    remove = commands.add_parser(
        "remove-instance", help="unregister an instance (its data stays in the database)"
    )
    remove.add_argument("org")
    remove.add_argument("instance_id")
    commands.add_parser(
        "delete-org", help="delete an organization, its API keys and its instances"
    ).add_argument("org")
    return parser


def _create_org(control: ControlPlane, args: argparse.Namespace) -> None:
    created = control.create_organization(args.org, args.name)
    print(f"organization {args.org} {'created' if created else 'already exists'}")


def _issue_key(control: ControlPlane, args: argparse.Namespace) -> None:
    limits = (args.instance, args.store, args.actor, args.expires_at, args.name)
    if args.access is None and any(v is not None for v in limits):
        raise ValueError("a scoped key needs --access read or --access write")
    if args.access is None:
        key_id, api_key = control.issue_api_key(args.org)
    else:
        from agent_memory.control.key_models import KeyCreate

        stores = []
        for given in args.store or []:
            instance, slash, store = given.partition("/")
            if not slash:
                raise ValueError(f"--store takes INSTANCE/STORE, not {given!r}")
            stores.append({"instance_id": instance, "store": store})
        body = KeyCreate.model_validate(
            {
                "name": args.name,
                "access": args.access,
                "instances": args.instance,
                "stores": stores or None,
                "actors": args.actor,
                "expires_at": args.expires_at,
            },
            strict=False,
        )
        created = control.create_api_key(args.org, body)
        key_id, api_key = created.key_id, created.api_key
    print(f"key id:  {key_id}\nAPI key: {api_key}\n(shown once; only its hash is kept)")


def _list_keys(control: ControlPlane, args: argparse.Namespace) -> None:
    for info in control.list_api_keys(args.org):
        scope = shown(info.scope.to_text()) if info.scope is not None else "admin"
        name = f"\t{shown(info.name)}" if info.name else ""
        print(f"{info.key_id}\tcreated {info.created_at.isoformat()}\t{scope}{name}")


def _set_limits(control: ControlPlane, args: argparse.Namespace) -> None:
    from agent_memory.control.limits import LimitStore, limits_from

    given = {
        "requests_per_second": args.requests_per_second,
        "burst": args.burst,
        "messages_per_day": args.messages_per_day,
        "memories_per_day": args.memories_per_day,
        "model_tokens_per_day": args.model_tokens_per_day,
    }
    try:  # before anything is read: bad usage (exit 2, naming the field) changes nothing
        limits = limits_from(given)
    except ValidationFailed as exc:
        raise ValueError(exc.message) from None
    control.organizations.require(args.org)
    if args.key_id is not None and args.key_id not in control.api_keys.hashes(args.org):
        from agent_memory.errors import KeyNotFound

        raise KeyNotFound(args.org, args.key_id)
    store = LimitStore(control.database.redis, SystemClock())
    now = store.set(args.org, limits, args.key_id)
    who = f"key {args.key_id} of {args.org}" if args.key_id else args.org
    said = ", ".join(f"{k}={v}" for k, v in now.model_dump(exclude_none=True).items())
    print(f"limits of {who}: {said or 'the defaults'}")


def _revoke_key(control: ControlPlane, args: argparse.Namespace) -> None:
    control.revoke_api_key(args.org, args.key_id)
    print(f"revoked {args.key_id}")


def _list_instances(control: ControlPlane, args: argparse.Namespace) -> None:
    for instance in control.list_instances(args.org):
        print(f"{instance.instance_id}\t{shown(mask_url(instance.url))}")


def _remove_instance(control: ControlPlane, args: argparse.Namespace) -> None:
    removal = control.remove_instance(args.org, args.instance_id)
    print(
        f"instance {removal.instance_id} removed from {args.org}; its data stays in "
        f"{mask_url(removal.url)} (nothing was deleted there: empty it before "
        "another organization registers it)"
    )
    _after_release(args)
    _marker_note(removal.marker)


def _delete_org(control: ControlPlane, args: argparse.Namespace) -> None:
    deleted = control.delete_organization(args.org)
    print(
        f"organization {args.org} deleted: {deleted.keys_revoked} API key(s) revoked "
        f"(refused from the next request), {len(deleted.removed)} instance(s) removed"
    )
    for removal in deleted.removed:
        print(f"  {removal.instance_id}: its data stays in {mask_url(removal.url)}")
        _marker_note(removal.marker, indent="    ")
    if deleted.removed:
        print(
            "(nothing was deleted in the databases: empty them before another "
            "organization registers them)"
        )
        _after_release(args)


def main(argv: list[str] | None = None) -> int:
    """Run one command (``--help`` lists them); 0 when done, 1 on a refusal (printed as
    ``<code>: <message>``), 2 on bad arguments."""
    args = _parser().parse_args(argv)
    if not args.control_url:
        print("Set KIVIDB_CONTROL_URL or pass --control-url.", file=sys.stderr)
        return 2
    if args.release_hold < 0:
        print("--release-hold must be 0 or more seconds.", file=sys.stderr)
        return 2
    try:
        control = ControlPlane(
            redis_client(args.control_url), SystemClock(), release_hold_seconds=args.release_hold
        )
        COMMANDS[args.command](control, args)
    except AgentMemoryError as exc:
        print(f"{exc.code}: {shown(exc.message)}", file=sys.stderr)
        return 1
    except ValueError as exc:  # a scoped key's options (pydantic's errors are ValueErrors too)
        lines = str(exc).split("\n")  # pydantic's own lines stay lines
        print("validation_error: " + "\n".join(shown(line) for line in lines), file=sys.stderr)
        return 2
    return 0


def _registered(control: ControlPlane, args: argparse.Namespace) -> None:
    if not args.adopt_existing_data:
        refuse_foreign_data(args.org, args.url, is_current=control.marker_is_current)
    registration = control.register_instance(
        args.org, args.instance_id, args.url, allow_unreachable=args.allow_unreachable
    )
    for warning in registration.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    # The URL as stored (masked) says how the functions connect, TLS included; the address
    # (control.ownership.database_address) is only the database's identity, always spelled
    # redis://.
    url = mask_url(args.url)
    if registration.created:
        print(
            f"instance {args.instance_id} registered for {args.org} at {url} (compared with "
            f"other registrations by its address, {registration.address}, which leaves out "
            "TLS and credentials)"
        )
    elif registration.released:
        print(
            f"instance {args.instance_id} of {args.org} re-pointed to {url}; its previous "
            f"database (address {registration.released}) is released (its data stays there)"
        )
        _after_release(args)
        _marker_note(registration.released_marker or "released", database="previous database")
    else:
        print(
            f"instance {args.instance_id} of {args.org} is at {url}: the same database as "
            f"before (address {registration.address}), its URL now as given"
        )
    if not registration.marked:
        print(
            "note: the database could not be reached (or refused the URL's credentials or the "
            "script), so no ownership marker of this instance is in it yet: the first use that "
            "reaches it writes one, or refuses the database (every request to the instance then "
            "answers 404) if another registration's marker, or agent-memory data of an unknown "
            "owner, is there."
        )


def _after_release(args: argparse.Namespace) -> None:
    """What a release means for warm functions and for other organizations."""
    print(
        f"Warm functions may still serve the released database to {args.org} for their "
        "instance cache time (KIVIDB_INSTANCE_CACHE_SECONDS, 30 s unless set); it stays "
        f"reserved for {args.org} for {args.release_hold:g} s, so no other organization can "
        "register it before."
    )


def _marker_note(marker: MarkerRelease, *, database: str = "database", indent: str = "") -> None:
    """Say what became of the released database's ownership marker when it is not released."""
    if marker == "absent":
        print(
            f"{indent}note: the {database} holds no ownership marker of this instance (it was "
            "registered without one, or another registration replaced it), so there was none "
            "to release."
        )
    elif marker == "unreached":
        print(
            f"{indent}note: the {database} could not be reached (or refused the URL's "
            "credentials or the script), so an ownership marker of this instance "
            "(kividb:mem:@owner) may still be in it; the next registration of that database "
            "replaces it."
        )


COMMANDS: dict[str, Callable[[ControlPlane, argparse.Namespace], None]] = {
    "create-org": _create_org,
    "issue-key": _issue_key,
    "list-keys": _list_keys,
    "revoke-key": _revoke_key,
    "set-limits": _set_limits,
    "register-instance": _registered,
    "list-instances": _list_instances,
    "remove-instance": _remove_instance,
    "delete-org": _delete_org,
}
"""What each command of ``_parser`` does."""


if __name__ == "__main__":
    sys.exit(main())
