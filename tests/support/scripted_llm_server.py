"""A SCRIPTED OpenAI-compatible server, for tests and demos: it answers from a script, not from a model.

It serves POST /v1/chat/completions and GET /v1/models over real HTTP, so the real openai SDK talks to it. The
stage of a request is read from the marker that every ksci system prompt starts with ("[ksci stage: writer]").
The script maps each stage to a list of answers, served in order (each once, unless "repeat" is set):

    {"options": {"refuse_response_format": false},
     "writer": [{"match": "Plan title", "content": "```cuda ...```"},
                {"status": 429}, {"sleep": 5.0, "content": "late"}, {"content": "cut", "finish_reason": "length"}],
     "designer": [{"json": {"avenues": [...], "plans": [...]}}]}

Answer keys: content (text) or json (an object sent as its JSON text); finish_reason (default "stop"); status (an
HTTP error status instead of an answer); sleep (seconds to wait first, e.g. longer than the client's timeout);
match (a substring, or a list of substrings, that the request's messages must all contain for this answer to be
chosen); repeat (never used up).
Misbehaviour, one way each (tests/test_llm_faults.py): headers (extra response headers, e.g. Retry-After); raw
(a body sent as it is, e.g. HTML or broken JSON, with content_type); usage (replaces the made-up usage numbers);
model (the model name answered); trickle (seconds between the body's bytes, sent one at a time).
With options.refuse_response_format, a request that carries response_format gets a 400 naming it, like endpoints
without structured output. With options.echo_key, every answer (its text, its model name and an error's message)
carries the request's bearer key and basic-auth credentials, as a careless proxy or a model asked to could. Token counts in `usage` are len(text) / 4, rounded up: made up, not a tokenizer's.

    PYTHONPATH=tests python -m support.scripted_llm_server --script FILE --port 8000
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

_STAGE = re.compile(r"\[ksci stage: (\w+)\]")


class ScriptedLlmServer:
    """The server in a background thread: `with ScriptedLlmServer(script) as server: server.base_url`."""

    def __init__(self, script: dict, host: str = "127.0.0.1", port: int = 0) -> None:
        self.script = {stage: list(answers) for stage, answers in script.items() if stage != "options"}
        self.options = dict(script.get("options", {}))
        self.used: dict[str, set[int]] = {stage: set() for stage in self.script}
        self.requests: list[dict] = []  # what was asked, for tests: stage, chosen answer, status
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer((host, port), _handler(self))
        self.httpd.daemon_threads = True
        self.thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> ScriptedLlmServer:
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="scripted-llm-server", daemon=True)
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> ScriptedLlmServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def count(self, stage: str | None = None) -> int:
        with self.lock:
            return sum(1 for r in self.requests if stage is None or r["stage"] == stage)

    def choose(self, request: dict) -> tuple[int, dict | str]:
        """(HTTP status, body) for one chat completion request."""
        return self.respond(request)[:2]

    def respond(self, request: dict) -> tuple[int, dict | str, dict]:
        """(HTTP status, body, the scripted answer: its headers, content_type, trickle) for one request."""
        messages = request.get("messages") or []
        text = "\n".join(str(m.get("content", "")) for m in messages)
        found = _STAGE.search(text)
        stage = found.group(1) if found else "unknown"
        with self.lock:
            if request.get("response_format") and self.options.get("refuse_response_format"):
                self.requests.append({"stage": stage, "answer": None, "status": 400})
                refusal = _error("response_format json_schema is not supported by this server", "invalid_request")
                return 400, refusal, {}
            index, answer = self._next(stage, text)
            self.requests.append({"stage": stage, "answer": index, "status": answer.get("status", 200)})
        if self.options.get("echo_key") and request.get("_auth"):
            echoed = f" (you sent {request['_auth']})"
            answer = {**answer, "content": answer.get("content", json.dumps(answer.get("json"))) + echoed}
            answer["model"] = f"{answer.get('model', 'scripted')}{echoed}"
            answer.pop("json", None)
        if answer.get("sleep"):
            time.sleep(float(answer["sleep"]))
        status = int(answer.get("status", 200))
        if status != 200:
            return status, _error(answer.get("content", f"scripted error {status}"), "scripted"), answer
        if "raw" in answer:
            return 200, answer["raw"], answer
        content = answer["content"] if "content" in answer else json.dumps(answer.get("json"))
        prompt_tokens = math.ceil(len(text) / 4)
        completion_tokens = math.ceil(len(content) / 4)
        body = {
            "id": f"scripted-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": answer.get("model", request.get("model", "scripted")),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": answer.get("finish_reason", "stop"),
                }
            ],
            "usage": answer.get(
                "usage",
                {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            ),
        }
        return 200, body, answer

    def _next(self, stage: str, text: str) -> tuple[int | None, dict]:
        for index, answer in enumerate(self.script.get(stage, [])):
            if index in self.used[stage]:
                continue
            needles = answer.get("match") or []
            if any(needle not in text for needle in ([needles] if isinstance(needles, str) else needles)):
                continue
            if not answer.get("repeat"):
                self.used[stage].add(index)
            return index, answer
        return None, {"status": 400, "content": f"scripted server: no scripted answer left for stage {stage!r}"}


class PromptKeepingServer(ScriptedLlmServer):
    """The scripted server, also keeping the text of every prompt it was sent: the lineage keeps only a prompt's
    hash (llm_calls.prompt_sha256), and tests and the scripted demo read what the LLM was told."""

    def __init__(self, script: dict, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__(script, host, port)
        self.prompts: list[str] = []

    def respond(self, request: dict) -> tuple[int, dict | str, dict]:
        text = "\n".join(str(m.get("content", "")) for m in request.get("messages") or [])
        with self.lock:
            self.prompts.append(text)
        return super().respond(request)

    def prompt_of(self, stage: str) -> str:
        """The first prompt sent to `stage`."""
        return next(p for p in self.prompts if f"[ksci stage: {stage}]" in p)

    def write_prompts(self, folder: Path) -> None:
        """One file per prompt, in the order they came: 000.txt, 001.txt, ..."""
        folder.mkdir(parents=True, exist_ok=True)
        for number, prompt in enumerate(self.prompts):
            (folder / f"{number:03d}.txt").write_text(prompt)


def _credentials(header: str) -> str:
    """What the client authenticated with: a bearer key, or basic auth's user:password."""
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "basic":
        return base64.b64decode(value).decode(errors="replace")
    return value


def _error(message: str, kind: str) -> dict:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


def _handler(server: ScriptedLlmServer):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})
            else:
                self._send(404, _error("not found", "not_found"))

        def do_POST(self) -> None:  # noqa: N802
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, _error("not found", "not_found"))
                return
            length = int(self.headers.get("Content-Length", 0))
            try:
                request = json.loads(self.rfile.read(length) or b"{}")
            except json.JSONDecodeError:
                self._send(400, _error("request body is not JSON", "invalid_request"))
                return
            request["_auth"] = _credentials(self.headers.get("Authorization", ""))
            status, body, answer = server.respond(request)
            self._send(status, body, answer)

        def _send(self, status: int, body: dict | str, answer: dict | None = None) -> None:
            answer = answer or {}
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", answer.get("content_type", "application/json"))
                for name, value in answer.get("headers", {}).items():
                    self.send_header(name, str(value))
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if answer.get("trickle"):
                    for byte in data:  # one byte at a time, `trickle` seconds apart
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                        time.sleep(float(answer["trickle"]))
                else:
                    self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a scripted sleep past its timeout)

        def log_message(self, format: str, *args) -> None:  # noqa: A002
            pass  # quiet: tests count requests through server.requests

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve scripted answers as an OpenAI-compatible endpoint.")
    parser.add_argument("--script", required=True, type=Path, help="JSON script: {stage: [answers]}")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    server = ScriptedLlmServer(json.loads(args.script.read_text()), args.host, args.port)
    print(f"scripted LLM server (not a model) at {server.base_url}", flush=True)
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
