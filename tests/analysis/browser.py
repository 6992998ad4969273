"""Debian's Chromium, headless, driven over the DevTools protocol (websocket-client): load a page,
evaluate JavaScript, move the mouse, and collect every console error, uncaught exception, log
error (a blocked script, a refused request) and JavaScript dialog the page caused."""
from __future__ import annotations

import itertools
import json
import subprocess
import time
import urllib.request

from tests.support import require_module, require_tool

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-port=0", "--window-size=1400,1000"]
PROBLEMS = {"Runtime.exceptionThrown", "Page.javascriptDialogOpening"}


class Browser:
    def __init__(self, tmp_path):
        websocket = require_module("websocket")
        profile = tmp_path / "chromium-profile"
        port_file = profile / "DevToolsActivePort"
        port_file.unlink(missing_ok=True)   # a profile used before holds its old port
        self.ws = None
        self.log = open(tmp_path / "chromium.log", "wb")
        self.proc = subprocess.Popen([require_tool("chromium"), *FLAGS,
                                      f"--user-data-dir={profile}", "about:blank"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        try:
            self._connect(websocket, port_file)
        except BaseException:
            self.close()
            raise
        self.ids = itertools.count(1)
        self.events = []
        for domain in ("Runtime", "Log", "Page"):
            self.send(f"{domain}.enable")

    def _connect(self, websocket, port_file):
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("chromium did not open its DevTools port: see chromium.log")
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            page = next(p for p in json.load(r) if p["type"] == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=60,
                                              suppress_origin=True)

    def send(self, method, **params):
        mid = next(self.ids)
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == mid:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self._event(msg)

    def _event(self, msg):
        self.events.append(msg)
        if msg.get("method") == "Page.javascriptDialogOpening":   # never leave the page blocked
            self.ws.send(json.dumps({"id": next(self.ids), "method":
                                     "Page.handleJavaScriptDialog", "params": {"accept": True}}))

    def load(self, url, timeout=60):
        """Navigate and wait for the load event."""
        self.events.clear()
        self.send("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == "Page.loadEventFired" for e in self.events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not load")
            self._event(json.loads(self.ws.recv()))

    def eval(self, expression):
        """The value of a JavaScript expression (promises awaited)."""
        r = self.send("Runtime.evaluate", expression=expression, returnByValue=True,
                      awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_for(self, expression, timeout=60):
        deadline = time.monotonic() + timeout
        while not (value := self.eval(expression)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"never true: {expression}")
            time.sleep(0.05)
        return value

    def mouse(self, x, y):
        self.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)

    def problems(self):
        """Console errors and warnings, exceptions, log errors and dialogs so far."""
        out = []
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m in PROBLEMS or (m == "Runtime.consoleAPICalled"
                                 and p.get("type") in ("error", "warning", "assert")) \
                    or (m == "Log.entryAdded" and p["entry"]["level"] in ("error", "warning")):
                out.append(e)
        return out

    def close(self):
        if self.ws is not None:
            self.ws.close()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
