"""Headless Chromium driven over the DevTools protocol, for tests that click through a web UI (the Prefect UI).

Chromium (tests/browser.py's flags) listens on a loopback port that it picks and writes to DevToolsActivePort in
its profile; one page is driven over a websocket (the `websockets` package, already a dependency of Prefect).
Clicks are mouse events at the element's centre, as a user's are, not a script's element.click().
"""

from __future__ import annotations

import itertools
import json
import subprocess
import time
import urllib.request
from pathlib import Path

from browser import FLAGS
from websockets.sync.client import connect

START_TIMEOUT_S = 60
REPLY_TIMEOUT_S = 60

# The centre of the last visible, enabled element matching `selector` whose text is `text`, or null; null too while
# something else lies on top of that centre (an overlay, or a row that has not finished moving into place).
_FIND = """(() => {
  const found = [...document.querySelectorAll(%(selector)s)]
    .filter(e => e.textContent.trim() === %(text)s && e.offsetParent !== null && !e.disabled);
  if (!found.length) return null;
  const element = found[found.length - 1];
  const box = element.getBoundingClientRect();
  const centre = {x: box.x + box.width / 2, y: box.y + box.height / 2};
  const top = document.elementFromPoint(centre.x, centre.y);
  return top && element.contains(top) ? centre : null;
})()"""


class Page:
    """One Chromium page: open a URL, wait for something on it, click a button by its text."""

    def __init__(self, profile: Path, size: tuple[int, int] = (1400, 1000)):
        profile.mkdir(parents=True, exist_ok=True)
        command = ["chromium", *FLAGS, f"--user-data-dir={profile}", f"--window-size={size[0]},{size[1]}"]
        command += ["--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "about:blank"]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._ids = itertools.count(1)
        try:
            port = _devtools_port(profile / "DevToolsActivePort", self.process)
            targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10))
            page = next(t for t in targets if t["type"] == "page")
            self.socket = connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=10)
        except BaseException:
            self.process.kill()
            self.process.wait(timeout=30)
            raise

    def send(self, method: str, **params) -> dict:
        """One DevTools command and its result (events that arrive meanwhile are dropped)."""
        message_id = next(self._ids)
        self.socket.send(json.dumps({"id": message_id, "method": method, "params": params}))
        while True:
            reply = json.loads(self.socket.recv(timeout=REPLY_TIMEOUT_S))
            if reply.get("id") == message_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply["result"]

    def open(self, url: str) -> None:
        self.send("Page.navigate", url=url)

    def evaluate(self, expression: str):
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float, what: str):
        """The first truthy value of `expression`, looked at every 0.25 s; AssertionError after timeout_s."""
        return self.wait_for_value(lambda: self.evaluate(expression), timeout_s, what)

    def wait_for_value(self, look, timeout_s: float, what: str):
        """The first truthy value of `look()`, called every 0.25 s; AssertionError after timeout_s."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = look()
            if value:
                return value
            time.sleep(0.25)
        text = self.evaluate("document.body ? document.body.innerText : ''") or ""
        raise AssertionError(f"no {what} after {timeout_s} s; the page reads:\n{text[:3000]}")

    def click(self, text: str, selector: str = "button", timeout_s: float = 120) -> None:
        """Wait for a visible, enabled element matching `selector` that reads `text` (the last such), on top at its
        centre and at the same place in two looks 0.25 s apart, and click it there. A page that is still laying out
        (a tab's list filling in) moves its rows; a click at where a row was lands on its neighbour (CI once opened
        the flow's page, not the flow run's, so). The wait is a guard, 120 s: on a loaded CI machine the UI's tab
        list once took over 60 s to settle."""
        find = _FIND % {"selector": json.dumps(selector), "text": json.dumps(text)}
        seen: list[dict] = []

        def steady():
            seen.append(self.evaluate(find))
            return seen[-1] if seen[-1] and len(seen) > 1 and seen[-2] == seen[-1] else None

        centre = self.wait_for_value(steady, timeout_s, f"{selector} reading {text!r}, in place")
        for event in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=event, button="left", clickCount=1, **centre)

    def text(self) -> str:
        return self.evaluate("document.body.innerText") or ""

    def close(self) -> None:
        try:
            self.socket.close()
        finally:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)

    def __enter__(self) -> Page:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _devtools_port(path: Path, process: subprocess.Popen) -> int:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"chromium exited with {process.returncode} before it listened")
        lines = path.read_text().splitlines() if path.exists() else []
        if lines and lines[0].isdigit():
            return int(lines[0])
        time.sleep(0.1)
    raise RuntimeError(f"chromium wrote no {path.name} in {START_TIMEOUT_S} s")
