"""The console's browser tests' harness: Debian's /usr/bin/chromium driven by Playwright, one
tab (``Console``) with what every browser test checks afterwards, and the console's build.

Every tab records the console errors it did not expect (a failed fetch's status is expected
only where a test provokes it), the requests that left 127.0.0.1 (each one is intercepted and
refused), and checks on ``close`` that the API key never appeared in a URL; ``accessible`` runs
axe-core (``console/node_modules/axe-core``) on the page; ``shot`` saves a screenshot into
``KIVIDB_CONSOLE_SCREENSHOTS`` when it is set (``make console-screenshots``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from playwright import sync_api as playwright_api
from playwright.sync_api import expect

from tests.support.common import ROOT
from tests.support.stack import Stack

CHROMIUM = Path("/usr/bin/chromium")
AXE = ROOT / "console" / "node_modules" / "axe-core" / "axe.min.js"
STATIC = ROOT / "functions" / "console" / "static"
SHOTS = os.environ.get("KIVIDB_CONSOLE_SCREENSHOTS")
# An API field name (snake_case), which a label must not be; code elements (a setting's API
# name in its legend, a profile field's own name) are left out.
FIELD_NAME = re.compile(r"\b[a-z]+(?:_[a-z]+)+\b")
LABELS = """() => [...document.querySelectorAll('main dt, main th, main label, main legend')]
  .map((e) => { const c = e.cloneNode(true); c.querySelectorAll('code').forEach((x) => x.remove());
                return c.textContent.trim(); })"""


def build_console() -> None:
    """The console's files, built from console/src when missing or older (`make console`);
    AssertionError when the build fails or the browser is missing."""
    done = subprocess.run(["make", "-s", "console"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (STATIC / "index.html").is_file() and AXE.is_file()
    assert CHROMIUM.is_file(), "the browser tests need Debian's chromium: apt-get install chromium"


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium (Debian's binary, a fresh profile, no network of its own) as a
    Playwright browser context, with axe-core added to every page."""
    profile = tempfile.mkdtemp(prefix="kividb-console-")
    with playwright_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile,
            executable_path=str(CHROMIUM),
            headless=True,
            viewport={"width": 1280, "height": 860},
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        # axe-core from console/node_modules, added the way DevTools adds scripts (not subject
        # to the page's CSP, which refuses inline and foreign scripts).
        context.add_init_script(path=str(AXE))
        context.set_default_timeout(15_000)
        try:
            yield context
        finally:
            context.close()


class Console:
    """One browser tab on the console, with what every test checks afterwards."""

    def __init__(self, context: Any, stack: Stack) -> None:
        self.stack = stack
        self.page = context.new_page()
        self.errors: list[str] = []
        self.outside: list[str] = []
        self.requests: list[str] = []
        self.expected_statuses: set[int] = set()
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda error: self.errors.append(f"page error: {error}"))
        self.page.on("dialog", lambda dialog: self.errors.append(f"dialog: {dialog.message}"))
        self.page.route("**/*", self._route)

    def _console(self, message: Any) -> None:
        if message.type != "error":
            return
        found = re.search(r"status of (\d{3})", message.text)
        if found and int(found.group(1)) in self.expected_statuses:
            return
        self.errors.append(message.text)

    def _route(self, route: Any) -> None:
        url = route.request.url
        self.requests.append(url)
        if urlsplit(url).hostname != "127.0.0.1":
            self.outside.append(url)
            route.abort()
            return
        route.continue_()

    def open(self, fragment: str = "") -> None:
        self.page.goto(f"{self.stack.url}/console{'#' + fragment if fragment else ''}")

    def sign_in(self, fragment: str = "/agent-memory", api_key: str | None = None) -> None:
        self.open(fragment)
        self.page.get_by_label("API key").fill(api_key or self.stack.api_key)
        self.page.get_by_role("button", name="Sign in").click()
        expect(self.page.get_by_role("button", name="Sign out")).to_be_visible()

    def go(self, fragment: str) -> None:
        self.page.evaluate("(hash) => { location.hash = hash; }", fragment)

    def heading(self, text: str | re.Pattern[str]) -> None:
        expect(self.page.get_by_role("heading", level=1)).to_have_text(text)

    def idle(self) -> None:
        expect(self.page.locator(".loading")).to_have_count(0)

    def accessible(self) -> None:
        """axe-core on the page as it is: no critical or serious violation."""
        self.idle()
        found = self.page.evaluate(
            """async () => (await axe.run(document, {resultTypes: ['violations']})).violations
                .map(v => ({id: v.id, impact: v.impact, help: v.help,
                            nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}))"""
        )
        bad = [v for v in found if v["impact"] in ("critical", "serious")]
        assert bad == [], json.dumps(bad, indent=1)

    def labels(self) -> tuple[list[str], list[str]]:
        """The page's labels (terms, headers, labels, legends; code left out), and those of them
        that name a field by its API name."""
        self.idle()
        labels: list[str] = self.page.evaluate(LABELS)
        return labels, [label for label in labels if FIELD_NAME.search(label)]

    def shot(self, name: str) -> None:
        self.accessible()
        if SHOTS:
            folder = ROOT / SHOTS
            folder.mkdir(parents=True, exist_ok=True)
            self.page.screenshot(path=str(folder / f"{name}.png"), full_page=True)

    def close(self) -> None:
        self.page.close()
        assert self.outside == [], f"requests left 127.0.0.1: {self.outside}"
        assert self.errors == [], f"the page logged errors: {self.errors}"
        assert not any(self.stack.api_key in url for url in self.requests), "key in a URL"
