"""``python -m local``: the local stack (what ``make run`` starts).

Environment: ``PORT`` (default 3000), ``REDIS_URL``, ``KIVIDB_API_KEY``, ``KIVIDB_LOCAL_DIR``
(default ``.local``), ``KIVIDB_WORKERS`` (worker processes, default 2), ``KIVIDB_LAZY_INIT``
(``1``: import a function on its first request instead of at worker start).

Background work: the launcher process runs the local scheduler loop (``local/scheduler.py``), a
daemon thread that invokes the template's ``BackgroundFunction`` when a session's extraction is
due, as EventBridge Scheduler does in AWS. The functions run with ``KIVIDB_SCHEDULER=local``.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "layers" / "core"))
# As template.yaml sets for every function; it must be set before numpy is first imported.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import uvicorn  # noqa: E402
from uvicorn.supervisors import Multiprocess  # noqa: E402

from local.bootstrap import INSTANCE_ID, bootstrap, secret_key, start_database  # noqa: E402
from local.scheduler import start_scheduler_loop  # noqa: E402
from local.server import PARAMETERS_ENV, SCHEDULER_ENV  # noqa: E402
from local.template import read_http_api  # noqa: E402


def main() -> None:
    port = int(os.environ.get("PORT", "3000"))
    workers = int(os.environ.get("KIVIDB_WORKERS", "2"))
    local_dir = Path(os.environ.get("KIVIDB_LOCAL_DIR", ROOT / ".local")).resolve()
    try:  # before anything starts: a second stack on a taken port must not touch the data
        sock = listen(port)
    except OSError as exc:
        print(
            f"local stack: cannot listen on 127.0.0.1:{port} ({exc.strerror}); is another "
            "stack running? Stop it, or choose another port with PORT=...",
            file=sys.stderr,
        )
        raise SystemExit(2) from None
    database = start_database(local_dir)
    loop = None
    try:
        api_key, origin = bootstrap(database.url, local_dir, os.environ.get("KIVIDB_API_KEY"))
        # Provider API keys are encrypted with the key file .local/secret.key here (made on the
        # first start); AWS uses KMS (KIVIDB_KMS_KEY_ID, which stays unset locally).
        secret_key(local_dir)
        os.environ["KIVIDB_SECRET_KEY_FILE"] = str(local_dir / "secret.key")
        os.environ.pop("KIVIDB_SECRET_KEY", None)
        parameters = {
            "ControlRedisUrl": database.url,
            "SubnetIds": "",
            "SecurityGroupIds": "",
            "LogRetentionDays": "30",
            "LogLevel": os.environ.get("LOG_LEVEL", "WARN"),
        }
        os.environ[PARAMETERS_ENV] = json.dumps(parameters)
        os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
        # The functions' environment, here too: the background function runs in this process
        # (the workers inherit it, and set the same again in local.server.create_app).
        api = read_http_api(ROOT / "template.yaml", parameters)
        os.environ.update(api.environment)
        os.environ[SCHEDULER_ENV] = "local"
        scheduler = "none (the template has no BackgroundFunction)"
        if api.background is not None:
            loop = start_scheduler_loop(database.url, api.background)
            scheduler = f"local loop in this process, invokes {api.background.logical_id}"
        base = f"http://127.0.0.1:{port}"
        endpoints = (
            "custom model endpoints may be http:// and private (KIVIDB_ALLOW_PRIVATE_ENDPOINTS=1)"
            if os.environ.get("KIVIDB_ALLOW_PRIVATE_ENDPOINTS", "").lower()
            in ("1", "true", "yes", "on")
            else "custom model endpoints must be public https:// (KIVIDB_ALLOW_PRIVATE_ENDPOINTS=1 "
            "allows loopback servers)"
        )
        print(
            f"KiviDB agent memory, local stack\n"
            f"  API:       {base}  (routes from template.yaml, {workers} worker processes)\n"
            f"  database:  {database.url}  ({database.description})\n"
            f"  instance:  {INSTANCE_ID}  (organization local)\n"
            f"  API key:   {api_key}  ({origin})\n"
            f"  scheduler: {scheduler}\n"
            f"  endpoints: {endpoints}\n"
            f"  try:       curl -H 'Authorization: Bearer {api_key}' {base}/agent-memory",
            flush=True,
        )
        config = uvicorn.Config(
            "local.server:create_app",
            factory=True,
            host="127.0.0.1",
            port=port,
            workers=workers,
            http="httptools",
            access_log=os.environ.get("KIVIDB_ACCESS_LOG") == "1",
            log_level="warning",
        )
        if workers > 1:
            Multiprocess(config, sockets=[sock]).run()
        else:
            uvicorn.Server(config).run(sockets=[sock])
    finally:
        if loop is not None:
            loop.stop()
        database.stop()


def listen(port: int) -> socket.socket:
    """The listening socket, made with IPPROTO_TCP so that asyncio sets TCP_NODELAY on every
    accepted connection. uvicorn's own multi-worker socket omits the protocol, and then Nagle's
    algorithm and delayed ACKs add about 40 ms to every request on a kept-alive connection."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.set_inheritable(True)
    return sock


if __name__ == "__main__":
    main()
