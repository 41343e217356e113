"""A small model's repeats: a reply that does what an earlier one did, with no file changed
since, gives what it gave then. With greedy sampling (a small model's default) the same
context gives the same reply, and a repeat that enters the history is copied again, however
the model is told; so a repeated action is asked for again, sampled warm ("resample"), one
that failed before is not run again ("not_run_again"), and the reply after a repeat is
sampled ("sample_after_repeat"). Rules by name: lmagent.loop.policy.RULES."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable

from lmagent.llm.client import BEGAN_THE_SAME, SAME_START, Reply
from lmagent.llm.toolcalls import FormatError
from lmagent.loop.history import RESULT_TAG
from lmagent.loop.policy import Nudges
from lmagent.loop.prompts import COMPLETE_LINE, SAID_AGAIN, WAIT_START, not_run_again

UNSTICK_TEMPERATURE = 1.0  # for the reply after one that repeated an earlier one
RESAMPLES = 2  # a small model's reply that repeats an earlier one is asked for again this often
CONTINUED = ("\\", "|", "&&", "||", "{", "(", "do", "then", "else")  # a shell line goes on

Said = tuple[str, str]  # what a reply does, and the files as they were


class Repeats:
    """The replies of one run and what they did, with the files before and after them.

    `text_calls` says whether the model calls tools as text (a small one) now; `files` is the
    workspace's files as the last checkpoint saw them; `calls_in` the calls a reply written as
    text makes (raises FormatError)."""

    def __init__(
        self,
        rules: frozenset[str],
        nudges: Nudges,
        temperature: float,
        text_calls: Callable[[], bool],
        files: Callable[[], str],
        calls_in: Callable[[Reply], list[dict]],
    ):
        self.rules = rules
        self.nudges = nudges
        self.samples_cold = temperature < UNSTICK_TEMPERATURE
        self.text_calls = text_calls
        self.files = files
        self.calls_in = calls_in
        self.replies: set[Said] = set()  # (reply, files before or after it)
        self.failed: dict[Said, str] = {}  # (reply, files before or after): error
        self.unstick = False  # the last reply repeated an earlier one: sample the next
        self.texts: list[str] = []  # the replies of the run, as written
        self.failed_texts: list[str] = []  # those whose actions failed (a write: its check)

    def small(self) -> bool:
        """The rules apply: a model calling tools as text, sampled cold."""
        return self.text_calls() and self.samples_cold

    def resampled(
        self,
        reply: Reply,
        again: Callable[[float, list[str]], Reply],
        begins_again: Callable[[], bool],
    ) -> Reply:
        """A small model's action that repeats an earlier reply with no file changed since,
        asked for again (`again`) at UNSTICK_TEMPERATURE (up to RESAMPLES times) before it is
        taken. A repeat that enters the history is copied again by the model, however it is
        told; asked again, the prompt is the same, so the server reads all of it from its
        cache. (Running a test again after a fix is no repeat; a repeated TASK_COMPLETE or
        WAIT stands: it is how a model insists it is done, or waits. Any other reply said again
        word for word, an answer or a BLOCKED, is asked for again too: told not to give up
        before trying, the 1.5B model said the same BLOCKED twice in 3 of 16 Exercism runs,
        and the run ended with nothing tried; told nothing was done, it answered "17" again
        where the task asked for count.txt.) A sample that writes tool results itself is made up
        (at 1.0 a 1.5B model wrote "results" and BLOCKED in one of ten samples) and is not
        taken; when no sample does something new, the reply runs as it was. A sample that is
        the reply word for word is not asked for again: the model is sure of it (a 1.5B model
        gave one 182-token reply three times, a quarter of its tokens in some runs); nor is one
        that began as the reply or an earlier one of the run did, stopped early
        (client.SAME_START: at 1.0 the 1.5B model wrote the same reply again in 8 of 15
        samples; another, repeating a reply's actions in other words, was sampled back into
        the words of the first, twice). Nor is an action that failed before when not running
        it again `begins_again` the task (lmagent.loop.attempts): the new attempt is sampled
        from the task alone, and each sample asked for here cost the 1.5B model about 25 s on
        2 cores of a 240 s Exercism run."""
        reply = self.stand_in_copied(reply)
        began = reply.finish_reason == BEGAN_THE_SAME  # stopped early: see `unlike`
        if began:
            reply = self.began_as(reply)
        if "resample" not in self.rules or not (self.small() and (began or self.repeats(reply))):
            return reply
        if self.error_before(reply) and begins_again():
            self.nudges.status("the reply repeats one that failed; not asked again")
            return reply
        for _ in range(RESAMPLES):
            self.nudges.status("the reply repeats an earlier one; asking again")
            sample = again(UNSTICK_TEMPERATURE, [reply.content, *self.texts])
            same = sample.finish_reason == BEGAN_THE_SAME or _said(sample) == _said(reply)
            if same:  # word for word: the model is sure of it
                break
            if not (self.repeats(sample) or RESULT_TAG in sample.content):
                return sample
        self.nudges.status("no new reply; taking the repeated one")
        return reply

    def stand_in_copied(self, reply: Reply) -> Reply:
        """A reply that is only the stand-in the history holds for a repeated one (SAID_AGAIN)
        is the last reply again: the 1.5B model, shown it three times in its history, wrote it
        as its answer, and the run ended "completed" with every test failing."""
        if reply.content.strip() != SAID_AGAIN or not self.texts:
            return reply
        return dataclasses.replace(reply, content=self.texts[-1])

    def unlike(self) -> list[str]:
        """The earlier replies of the run a small model's next reply is stopped at
        client.SAME_START characters for beginning as, word for word ("stop_repeat"): those
        that begin with words, not a block, and those whose actions failed. Told its change
        failed its check, the 1.5B model wrote the same 300-400-token reply again, greedy,
        twice in two of its first held-out runs; in 15 held-out runs every reply that was not a
        repeat differed from the earlier ones within 149 characters. One beginning with a
        block that worked is left alone: a file rewritten whole, changed near its end, begins
        as it did before. One whose write failed its check is not: in the kept held-out runs,
        of 220 writes answering a write whose check failed, 125 were it word for word, each
        generated in full (in one A/B, a quarter of what the model wrote); one other began
        with the same 200 characters, and failed its check too."""
        if "stop_repeat" not in self.rules or not self.small():
            return []
        worded = [text for text in self.texts if "```" not in text[:SAME_START]]
        return worded + [text for text in self.failed_texts if text not in worded]

    def began_as(self, reply: Reply) -> Reply:
        """A reply stopped early for beginning as an earlier one did: taken as that one (with
        greedy sampling the same start goes on the same way), to be asked for again."""
        start = reply.content[:SAME_START]  # fewer when the client trimmed a space at its end
        earlier = next((text for text in self.texts if text.startswith(start)), "")
        self.nudges.status("the reply began as an earlier one did; stopped there")
        return dataclasses.replace(reply, content=earlier or reply.content, finish_reason="stop")

    def fails_again(self, reply: Reply, message: dict) -> bool:
        """For a small model (text calls, cold sampling), actions that failed before, with no
        file changed since, are not run again (True): they would fail the same way, and a
        failure repeated in the history is copied again (a 1.5B model ran `python3 app.py Ann
        --shout` five times, its parser refusing --shout each time). The model is told so,
        with the error, as a nudge: after MAX_NUDGES in a row the run ends blocked. The history
        keeps the repeat as SAID_AGAIN, not word for word: each copy in it makes the next one
        likelier."""
        error = self.error_before(reply)
        if not error:
            return False
        self.nudges.append({**message, "content": SAID_AGAIN})
        self.nudges.status("not run: it failed before, and nothing has changed since")
        calls = self.actions_of(reply)
        name, arguments = (calls[0]["name"], calls[0]["arguments"]) if len(calls) == 1 else ("", {})
        command = str(arguments.get("command", "")) if isinstance(arguments, dict) else ""
        stuck = "the model keeps repeating actions that fail"
        self.nudges.push(not_run_again(name, command, error), stuck)
        return True

    def error_before(self, reply: Reply) -> str:
        """The error a small model's actions met before, with no file changed since (rule
        not_run_again): `fails_again` does not run them. Blank when they did not fail."""
        if "not_run_again" not in self.rules or not self.small():
            return ""
        return self.failed.get(self.said(reply), "")

    def repeats(self, reply: Reply) -> bool:
        """A reply the same as an earlier one, with no file changed since: one with calls, or
        one without (an answer, BLOCKED) that is no TASK_COMPLETE or WAIT, which stand. A call
        that cannot be read is a format error, told as one, not a repeat."""
        try:
            calls = self.calls_in(reply)
        except FormatError:
            return False
        ending = COMPLETE_LINE.search(reply.content) or WAIT_START.search(reply.content)
        if not calls and (ending or not reply.content.strip()):
            return False
        return self.said(reply) in self.replies

    def actions_of(self, reply: Reply) -> list[dict]:
        """The calls a reply written as text makes; none when it makes none or is malformed."""
        with contextlib.suppress(FormatError):
            return [{"name": c["name"], "arguments": c["arguments"]} for c in self.calls_in(reply)]
        return []

    def notice(self, reply: Reply) -> str:
        """A reply the same as an earlier one in this run, with no file changed since, makes the
        next one sampled: with greedy sampling (a small model's default) the same context gives
        the same reply, so a model that repeats a failing step after being told would repeat it
        forever. Returns what the reply does, to be remembered once it has run."""
        said = self.said(reply)
        self.unstick = said in self.replies
        self.texts.append(reply.content)
        return said[0]

    def said(self, reply: Reply) -> Said:
        """What a reply does, with the files as they are: the same reply after a change is
        no repeat (a test run again after a fix). Written as text, a reply that acts is its
        actions: the same command with other words around it is a repeat."""
        actions = self.actions_of(reply) if self.text_calls() else []
        return (json.dumps(actions, sort_keys=True) if actions else _said(reply)), self.files()

    def remember(self, said: str, before: str, ran: list[dict], error: str) -> None:
        """A step's reply (`said`, from `notice`) and the calls of it that `ran`, with the files
        as it found and left them, and the first `error` they met: the same reply again, with
        the files as it found or left them, is a repeat."""
        after = self.files()
        self.replies |= {(said, before)} | {(done, after) for done in {said, *_parts(ran)}}
        if ran and error:
            self.failed |= {(said, before): error, (said, after): error}
            self.failed_texts += self.texts[-1:]

    def next_temperature(self) -> float | None:
        """UNSTICK_TEMPERATURE after a repeated reply, when LLM_TEMPERATURE is lower."""
        warm = "sample_after_repeat" in self.rules and self.unstick and self.samples_cold
        return UNSTICK_TEMPERATURE if warm else None


def _said(reply: Reply) -> str:
    """What a reply says and calls, to compare it with another."""
    return reply.content.strip() + json.dumps(reply.tool_calls or [], sort_keys=True)


def _parts(calls: list[dict]) -> list[str]:
    """What each call that ran did alone, and each line of a shell command of several, as
    `said` writes a reply of only that: a failed `python3 hello.py` run again alone, after
    `echo "Hello, world!" > hello.py` and it in one command, with nothing changed since, is a
    repeat (a 1.5B model then ran it five times)."""
    parts = [[call] for call in calls]
    for call in calls:
        arguments = call["arguments"] if isinstance(call["arguments"], dict) else {}
        if call["name"] == "shell" and isinstance(arguments.get("command"), str):
            lines = _command_lines(arguments["command"])
            parts += [[{"name": "shell", "arguments": {"command": line}}] for line in lines]
    return [json.dumps(part, sort_keys=True) for part in parts]


def _command_lines(command: str) -> list[str]:
    """The lines of a command of several that are each a command; none when they are not (a
    here-document, a continued line, quotes across lines)."""
    lines = [line.strip() for line in command.splitlines() if line.strip()]
    continued = any(line.endswith(CONTINUED) for line in lines)
    quoted = any(line.count('"') % 2 or line.count("'") % 2 for line in lines)
    return lines if len(lines) > 1 and "<<" not in command and not (continued or quoted) else []
