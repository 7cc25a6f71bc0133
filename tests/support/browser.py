"""A real browser for the page tests: headless Chromium, driven over the DevTools protocol on a pipe.

No driver library: Chromium started with ``--remote-debugging-pipe`` reads protocol
commands (JSON, each ended by a NUL byte) on its fd 3 and writes replies and events on
its fd 4. :func:`open_page` loads a file and returns what a reviewer would look at:

- every console error and uncaught exception;
- every network request other than the page itself (a self-contained page makes none);
- what each copy button says once clicked;
- the ids of the page's sections, and its load time;
- a PNG screenshot of the whole page.

The flags are those that keep Chromium from calling home on a machine with no network
(background networking, component updates, sync), with a fresh profile each time.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--remote-debugging-pipe",
]


@dataclass
class Loaded:
    errors: list[str] = field(default_factory=list)  # console errors and uncaught exceptions
    requests: list[str] = field(default_factory=list)  # every URL requested besides the page
    section_ids: list[str] = field(default_factory=list)
    load_ms: float = 0.0
    screenshot: bytes = b""
    title: str = ""
    clicked: list[str] = field(default_factory=list)  # each copy button's text after a click


class _Pipe:
    def __init__(self, process: subprocess.Popen[bytes], to_browser: int, from_browser: int) -> None:
        self.process, self.to_browser, self.from_browser = process, to_browser, from_browser
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict] = []

    def send(self, method: str, session: str | None = None, **params: object) -> dict:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params, **({"sessionId": session} if session else {})}
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self.read()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def read(self, deadline: float = 60.0) -> dict:
        end = time.monotonic() + deadline
        while b"\0" not in self.buffer:
            if time.monotonic() > end:
                raise TimeoutError("the browser stopped answering")
            chunk = os.read(self.from_browser, 1 << 16)
            if not chunk:
                raise RuntimeError("the browser closed its pipe")
            self.buffer += chunk
        message, _, self.buffer = self.buffer.partition(b"\0")
        return json.loads(message)

    def wait_for(self, method: str, timeout: float = 60.0) -> dict:
        end = time.monotonic() + timeout
        while True:
            for event in self.events:
                if event.get("method") == method:
                    return event
            self.events.append(self.read(max(0.1, end - time.monotonic())))


def open_page(path: Path, *, width: int = 1280) -> Loaded:
    """Load ``path`` in headless Chromium and report what happened (see the module docstring)."""
    assert CHROMIUM, "chromium is not installed (make browser)"
    profile = tempfile.mkdtemp(prefix="pt2kit-chromium-")
    to_read, to_browser = os.pipe()  # the browser reads commands on its fd 3
    from_browser, to_write = os.pipe()  # and writes on its fd 4

    def fds() -> None:  # in the child: the two pipe ends become fds 3 and 4, whatever numbers they had
        import fcntl

        high_read, high_write = fcntl.fcntl(to_read, fcntl.F_DUPFD, 100), fcntl.fcntl(to_write, fcntl.F_DUPFD, 100)
        os.dup2(high_read, 3)
        os.dup2(high_write, 4)

    process = subprocess.Popen(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--window-size={width},900", "about:blank"],
        pass_fds=(3, 4, to_read, to_write), preexec_fn=fds, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    os.close(to_read)
    os.close(to_write)
    pipe = _Pipe(process, to_browser, from_browser)
    try:
        target = pipe.send("Target.createTarget", url="about:blank")["targetId"]
        session = pipe.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            pipe.send(f"{domain}.enable", session)
        url = path.resolve().as_uri()
        started = time.monotonic()
        pipe.send("Page.navigate", session, url=url)
        pipe.wait_for("Page.loadEventFired")
        loaded = Loaded(load_ms=(time.monotonic() - started) * 1000)
        time.sleep(0.2)  # late console messages
        pipe.send("Runtime.evaluate", session, expression="1")  # flushes pending events
        for event in pipe.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                loaded.errors.append(json.dumps(params.get("exceptionDetails", {}))[:500])
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                loaded.errors.append(json.dumps(params.get("args", []))[:500])
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                loaded.errors.append(params["entry"].get("text", "")[:500])
            elif method == "Network.requestWillBeSent" and params.get("request", {}).get("url") != url:
                loaded.requests.append(params["request"]["url"])
        found = pipe.send("Runtime.evaluate", session, expression="JSON.stringify([document.title, Array.from(document.querySelectorAll('section[id]')).map(s => s.id)])", returnByValue=True)
        loaded.title, loaded.section_ids = json.loads(found["result"]["value"])
        shot = pipe.send("Page.captureScreenshot", session, format="png", captureBeyondViewport=True)
        loaded.screenshot = base64.b64decode(shot["data"])
        clicks = "JSON.stringify(Array.from(document.querySelectorAll('button.copy')).map(b => { b.click(); return b.textContent; }))"
        time.sleep(0.1)
        clicked = pipe.send("Runtime.evaluate", session, expression=clicks, returnByValue=True, userGesture=True)
        time.sleep(0.2)
        after = pipe.send("Runtime.evaluate", session, expression="JSON.stringify(Array.from(document.querySelectorAll('button.copy')).map(b => b.textContent))", returnByValue=True)
        loaded.clicked = json.loads(after["result"]["value"]) if clicked else []
        return loaded
    finally:
        try:
            pipe.send("Browser.close")
        except Exception:  # noqa: BLE001 - it may be gone already
            pass
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        os.close(to_browser)
        os.close(from_browser)
        shutil.rmtree(profile, ignore_errors=True)
