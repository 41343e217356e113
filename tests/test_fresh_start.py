"""A small model's attempt whose check fails again is undone, and the task begun again from its
opening, sampled (rule fresh_start, lmagent/loop/attempts.py).

Seen on held-out Exercism exercises: told its solution failed its tests, the 1.5B model wrote
the same reply again, then said nothing was wrong, then "I cannot reproduce the issue", until
the run ended not verified. An independent new try, its history holding only the task, is what
such a model does better.
"""

from __future__ import annotations

import pytest

from lmagent.checkpoints.steps import Checkpoints
from lmagent.loop.attempts import FRESH_TEMPERATURE, NOTHING_RAN, RESTARTS, failures
from lmagent.loop.restore import restore_session
from lmagent.loop.run import NO_PROGRESS_STEPS, RULES
from lmagent.loop.verify import Check
from lmagent.sessions.store import SessionStore
from tests.conftest import wait_for
from tests.scripted_llm import text
from tests.test_race import GUARD, SWAPPER, _host_state
from tests.test_sandbox_restore_race import CANARY, Survivor, swappers
from tests.test_small_model_actions import (
    ADD_BUG,
    FIXED,
    LEAP,
    LEAP_TEST,
    STILL_WRONG,
    TEST_CALC,
    calc_project,
    embedded_run,
    last_message,
)
from tests.test_small_models import embedded_config, llama_cpp, run

pytest_plugins = ["tests.sandbox_fixtures"]

TIMES_WRONG = "calc.py\n```python\ndef add(a, b):\n    return a * b\n```"
DONE = text("Fixed.\nTASK_COMPLETE")
TASK = "Fix the bug in calc.py."


LOOPED_REQUESTS = 1 + 2 * 4  # a call run five times: each repeat is asked for again once
LAST_WORSE = 2 * RESTARTS - 1  # closest_then_worse's last write: wrong_add(LAST_WORSE)


def wrong_add(n: int) -> str:
    """A reply writing calc.py's add wrong (`wrong_line(n)`), `n` telling it from the others."""
    return f"calc.py\n```python\ndef add(a, b):\n    {wrong_line(n)}\n```"


def wrong_line(n: int) -> str:
    return f"return a - b + {100 + n}"  # add(2, 3) is never 5


def statuses(events: list[dict]) -> list[str]:
    return [e["message"] for e in events if e["type"] == "status"]


def began_again(events: list[dict]) -> list[str]:
    return [line for line in statuses(events) if "attempt undone, task begun again" in line]


def test_a_check_failing_again_undoes_the_attempt_and_begins_the_task_again(workspace):
    calc_project(workspace)
    steps = [text(STILL_WRONG), text(TIMES_WRONG), text(FIXED), DONE]
    result, requests, events = embedded_run(workspace, steps, task=TASK)
    assert result.status == "completed" and "a + b" in (workspace / "calc.py").read_text()
    assert requests[2]["messages"] == requests[0]["messages"]  # the opening, the attempt gone
    history = SessionStore(workspace).open(result.session_id).history
    note = next(m["content"] for m in history if m.get("note") == "again")
    assert note.startswith("[An earlier attempt at this task was undone: its check kept failing")
    assert "(calc.py)" in note and "1 failed" in note  # the transcript says why
    temperatures = [r["temperature"] for r in requests]
    assert temperatures == [0.0, 0.0, FRESH_TEMPERATURE, 0.0]  # the new attempt's first, sampled
    assert len(began_again(events)) == 1


def test_a_failing_change_proposed_again_begins_the_task_again(workspace):
    """The 1.5B model sent its failing solution again three times (not saved: it had failed),
    then said it was done: the first time already, the attempt is undone, and the repeat is
    not asked for again first (the new attempt is sampled)."""
    calc_project(workspace)
    steps = [text(STILL_WRONG)] * 2 + [text(FIXED), DONE]
    result, requests, events = embedded_run(workspace, steps, task=TASK)
    assert result.status == "completed" and len(began_again(events)) == 1
    assert requests[2]["messages"] == requests[0]["messages"]
    assert requests[2]["temperature"] == FRESH_TEMPERATURE
    assert not any("asking again" in line for line in statuses(events))
    assert "the reply repeats one that failed; not asked again" in statuses(events)


@pytest.mark.parametrize(
    "finish", ["TASK_COMPLETE", "A leap year is divisible by 4."], ids=["bare", "answer"]
)
def test_a_finish_with_nothing_done_while_the_tests_fail_begins_the_task_again(workspace, finish):
    """The 1.5B model spent its first reply to an Exercism exercise listing the tests that
    would fail (no code), then answered "nothing has been done yet" with TASK_COMPLETE: the
    run ended with half its time left. A new attempt, sampled, writes the code."""
    (workspace / "test_leap.py").write_text(LEAP_TEST)
    listing = "1. **test_2000**: expected True, actual None"
    steps = [text(listing), text(finish), text("leap.py\n```python\n" + LEAP + "```"), DONE]
    result, requests, events = embedded_run(workspace, steps, task="Make leap.py pass its tests.")
    assert last_message(requests[1]).startswith("Nothing has been done yet")
    assert requests[2]["messages"] == requests[0]["messages"]
    assert requests[2]["temperature"] == FRESH_TEMPERATURE
    assert result.status == "completed" and len(began_again(events)) == 1


def test_a_finish_with_nothing_done_ends_blocked_once_no_attempt_is_left(workspace):
    (workspace / "test_leap.py").write_text(LEAP_TEST)
    replies = [(f"{n}. test_2000 fails", "TASK_COMPLETE") for n in range(RESTARTS + 1)]
    steps = [text(reply) for pair in replies for reply in pair]
    result, requests, events = embedded_run(workspace, steps, task="Make leap.py pass its tests.")
    assert result.status == "blocked" and result.message.startswith("nothing done")
    assert len(requests) == 2 * (RESTARTS + 1) and len(began_again(events)) == RESTARTS


def test_the_new_attempt_begins_with_the_files_as_they_were(workspace):
    """The new attempt's edit finds the text the attempt undone had replaced: the files went
    back before the next reply was asked for."""
    calc_project(workspace)
    edit = "```bash\nsed -i 's/a - b/a + b/' calc.py\n```"
    steps = [text(STILL_WRONG), text(TIMES_WRONG), text(edit), DONE]
    result, _, _ = embedded_run(workspace, steps, task=TASK)
    assert result.status == "completed"
    assert (workspace / "calc.py").read_text() == ADD_BUG.replace("a - b", "a + b")


def test_the_attempt_undone_is_a_step_that_can_itself_be_undone(workspace):
    """Nothing is lost: the undoing is recorded like `--undo`'s restore, and restoring to
    before it brings the attempt's files back."""
    calc_project(workspace)
    steps = [text(STILL_WRONG), text(TIMES_WRONG), text(FIXED), DONE]
    result, _, _ = embedded_run(workspace, steps, task=TASK)
    steps = Checkpoints(workspace).steps(result.session_id)
    undone = [s for s in steps if s.get("kind") == "restore"]
    assert len(undone) == 1 and undone[0]["changed"] == ["calc.py"]
    restore_session(workspace, result.session_id, undone[0]["step"])
    assert (workspace / "calc.py").read_text() == "def add(a, b):\n    return a * b\n"


def two_function_project(workspace) -> None:
    """calc.py with `add` and `mul` both wrong, and a test of each."""
    (workspace / "calc.py").write_text(ADD_BUG + "\n\ndef mul(a, b):\n    return a + b\n")
    tests = TEST_CALC + "\n\ndef test_mul():\n    from calc import mul\n    assert mul(2, 3) == 6\n"
    (workspace / "test_calc.py").write_text(tests)


BOTH_WRONG = "calc.py\n```python\ndef add(a, b):\n    return b - a\n```"
MUL_FIXED = "calc.py\n```python\ndef mul(a, b):\n    return a * b\n```"
NOT_PYTHON = "calc.py\n```python\ndef add(a, b:\n    return a + b\n```"  # calc no longer imports


def test_a_check_failing_with_fewer_failures_is_progress_and_goes_on(workspace):
    two_function_project(workspace)
    steps = [text(BOTH_WRONG), text(FIXED), text(MUL_FIXED), DONE]
    result, requests, events = embedded_run(workspace, steps, task="Make the tests pass.")
    assert "2 failed" in last_message(requests[1]) and "1 failed" in last_message(requests[2])
    assert result.status == "completed" and began_again(events) == []


def test_a_new_attempt_doing_no_better_than_the_run_is_begun_again_at_its_first_check(workspace):
    """A new attempt's write answering its failed check passed once in 70 on held-out
    exercises, its first write 7 times in 86: a new attempt whose first check fails as much as
    the run's best is not repaired; the next one begins at once."""
    calc_project(workspace)
    steps = [text(STILL_WRONG), text(TIMES_WRONG), text(wrong_add(0)), text(FIXED), DONE]
    result, requests, events = embedded_run(workspace, steps, task=TASK)
    assert result.status == "completed" and len(began_again(events)) == 2
    assert requests[3]["messages"] == requests[0]["messages"]
    temperatures = [r["temperature"] for r in requests]
    assert temperatures == [0.0, 0.0, FRESH_TEMPERATURE, FRESH_TEMPERATURE, 0.0]


def test_a_new_attempt_doing_better_than_the_run_goes_on(workspace):
    two_function_project(workspace)
    steps = [text(BOTH_WRONG), text(wrong_add(0)), text(FIXED), text(MUL_FIXED), DONE]
    result, requests, events = embedded_run(workspace, steps, task="Make the tests pass.")
    assert requests[2]["messages"] == requests[0]["messages"]  # begun again after 2 and 2
    assert "1 failed" in last_message(requests[3])  # the new attempt's first check: repaired
    assert result.status == "completed" and len(began_again(events)) == 1


def test_a_write_that_breaks_the_module_is_no_progress(workspace):
    """A module that no longer imports fails its tests' run with "1 error": fewer than the
    two failing before, but no test ran. The attempt is begun again, not repaired."""
    two_function_project(workspace)
    steps = [text(BOTH_WRONG), text(NOT_PYTHON), text(FIXED), text(MUL_FIXED), DONE]
    result, requests, events = embedded_run(workspace, steps, task="Make the tests pass.")
    assert result.status == "completed" and len(began_again(events)) == 1
    assert requests[2]["messages"] == requests[0]["messages"]
    assert "(1 error in" in began_again(events)[0]


NOWHERE = {  # how an attempt is said to have gone nowhere: its replies
    "no progress": [f"```bash\ncat missing{n}.txt\n```" for n in range(NO_PROGRESS_STEPS)],
    "stuck in a loop": ["```bash\npython3 calc.py\n```"] * LOOPED_REQUESTS,
}


@pytest.mark.parametrize("ending", NOWHERE)
def test_an_attempt_going_nowhere_while_the_check_fails_is_begun_again(workspace, ending):
    """Steps without progress, or a call repeated, after a failing check: a new attempt, not
    the run's end (the 1.5B model's new attempt ran its module five times, told each time that
    nothing would change, and the run ended blocked with half its time left)."""
    calc_project(workspace)
    nowhere = NOWHERE[ending]
    steps = [text(STILL_WRONG), *[text(reply) for reply in nowhere], text(FIXED), DONE]
    result, requests, events = embedded_run(workspace, steps, task=TASK)
    assert result.status == "completed"
    assert began_again(events) and began_again(events)[0].startswith(ending)
    assert requests[1 + len(nowhere)]["messages"] == requests[0]["messages"]


def test_the_task_is_begun_again_at_most_restarts_times_then_ends_not_verified(workspace):
    calc_project(workspace)
    steps = [text(wrong_add(n)) for n in range(2 * (RESTARTS + 1))]
    steps += [text("Done.\nTASK_COMPLETE")] * 3  # refused, said again, asked again
    result, requests, events = embedded_run(workspace, steps, task=TASK)
    assert len(began_again(events)) == RESTARTS
    assert result.status == "blocked" and result.message.startswith("not verified: python3 -m")
    assert len(requests) == len(steps)


def test_a_run_ending_unfinished_leaves_the_files_of_its_closest_check(workspace):
    """A third attempt whose writes broke every test was what the user was left with, though
    the first had fixed one function: the files go back to the check that failed least, as a
    step that can itself be undone."""
    steps = closest_then_worse(workspace) + [text("Done.\nTASK_COMPLETE")] * 3
    result, _, events = embedded_run(workspace, steps, task="Make the tests pass.")
    assert len(began_again(events)) == RESTARTS and result.status == "blocked"
    assert "(2 failed in" in result.message.split(";")[0]  # the last check
    assert "left as they were at the check that failed least (1 failed, 1 passed" in result.message
    assert "calc.py put back" in result.message and "--undo" in result.message
    kept = (workspace / "calc.py").read_text()
    assert "return a + b" in kept and "def mul(a, b):\n    return a + b" in kept
    last = Checkpoints(workspace).steps(result.session_id)[-1]
    assert last.get("kind") == "restore" and last["changed"] == ["calc.py"]
    restore_session(workspace, result.session_id, last["step"])  # --undo
    assert wrong_line(LAST_WORSE) in (workspace / "calc.py").read_text()


def closest_then_worse(workspace) -> list[dict]:
    """Two functions wrong and their tests in `workspace`; replies that fix one (twice, the
    attempt then undone), then RESTARTS attempts of writes that fix neither, the last of them
    `wrong_add(LAST_WORSE)`."""
    (workspace / "calc.py").write_text(ADD_BUG + "\n\ndef mul(a, b):\n    return a + b\n")
    tests = TEST_CALC + "\n\ndef test_mul():\n    from calc import mul\n    assert mul(2, 3) == 6\n"
    (workspace / "test_calc.py").write_text(tests)
    closest = "calc.py\n```python\ndef add(a, b):\n    return a + b\n```"
    also_one = "calc.py\n```python\ndef add(a, b):\n    return b + a\n```"
    both = [wrong_add(n) for n in range(LAST_WORSE + 1)]
    return [text(reply) for reply in [closest, also_one, *both]]


def test_a_run_whose_last_check_was_its_closest_keeps_its_files(workspace):
    calc_project(workspace)
    wrong = [wrong_add(n) for n in range(2 * (RESTARTS + 1))]
    steps = [text(reply) for reply in wrong] + [text("Done.\nTASK_COMPLETE")] * 3
    result, _, _ = embedded_run(workspace, steps, task=TASK)
    assert result.status == "blocked" and "failed least" not in result.message
    assert wrong_line(2 * RESTARTS + 1) in (workspace / "calc.py").read_text()


def test_without_the_rule_the_attempt_goes_on(workspace):
    calc_project(workspace)
    steps = [text(STILL_WRONG), text(TIMES_WRONG), text(FIXED), DONE]
    result, requests, events = embedded_run(
        workspace, steps, task=TASK, rules=RULES - {"fresh_start"}
    )
    assert result.status == "completed" and began_again(events) == []
    assert "a * b" in str(requests[2]["messages"])  # the attempt is still in its history


def test_a_passing_check_ends_the_chance_of_beginning_again(workspace):
    """A model that breaks what worked is shown that; its work is not undone."""
    calc_project(workspace)
    steps = [text(FIXED), text(STILL_WRONG), text(TIMES_WRONG), text(FIXED), DONE]
    result, _, events = embedded_run(workspace, steps, task=TASK)
    assert result.status == "completed" and began_again(events) == []


def test_a_model_sampled_warm_keeps_its_last_files(workspace):
    """Leaving the closest files is the small model's rule too (text calls, sampled cold)."""
    steps = closest_then_worse(workspace) + [text("Done.\nTASK_COMPLETE")] * 6
    with llama_cpp(steps) as llm:
        config = embedded_config(workspace, llm, llm_temperature=1.0)
        result = run(config, "Make the tests pass.", [])
    assert result.status == "blocked" and "failed least" not in result.message
    assert wrong_line(LAST_WORSE) in (workspace / "calc.py").read_text()


def test_a_model_sampled_warm_is_never_begun_again(workspace):
    """The rule is a small model's (text calls, sampled cold): one sampled warm already gives
    a new reply each time."""
    calc_project(workspace)
    steps = [text(STILL_WRONG), text(TIMES_WRONG), text(FIXED), DONE]
    with llama_cpp(steps) as llm:
        events: list[dict] = []
        config = embedded_config(workspace, llm, llm_temperature=1.0)
        result = run(config, TASK, events)
    assert began_again(events) == [] and result.status == "completed"


@pytest.mark.parametrize(
    ("output", "counted"),
    [
        ("F.\n=== 1 failed, 1 passed in 0.01s ===", 1),
        ("FE\n3 failed, 2 errors in 0.10s", 5),
        ("E\n1 error in 0.02s", NOTHING_RAN),  # a module that no longer imports
        ("no tests ran in 0.01s", NOTHING_RAN),
        ("E.\n1 passed, 1 error in 0.02s", 1),
        ("Traceback...\nSyntaxError: invalid syntax", 1),  # failed, not counted: one
    ],
)
def test_how_badly_a_check_failed(output, counted):
    command = "python3 -m pytest -q" if "in 0." in output else "python3 calc.py"
    assert failures(Check(command, {"exit_code": 1, "output": output})) == counted
    assert failures(Check(command, {"exit_code": 0, "output": "1 passed"})) == 0


# --------------------------------------------------------------------------- attack


@pytest.fixture(params=["docker", "bwrap"])
def swapped(request, make_sandbox, sandbox_image, tmp_path):
    """(workspace, host folder, backend, the host folder's state) with a swapper alive in the
    workspace's sandbox exchanging the folder `d` with a link to the host folder."""
    workspace, host = (tmp_path / "ws").resolve(), (tmp_path / "host").resolve()
    workspace.mkdir()
    host.mkdir()
    (host / "file.txt").write_text(CANARY)
    (workspace / "d").mkdir()
    (workspace / "d" / "file.txt").write_text("mine\n")
    (workspace / "race_swapper.py").write_text(SWAPPER.read_text())
    calc_project(workspace)
    before = _host_state(host)
    survivor = Survivor(request.param, workspace, host, make_sandbox, sandbox_image)
    try:
        yield workspace, host, request.param, before
    finally:
        survivor.close()
    assert _host_state(host) == before, "undoing an attempt wrote outside the workspace"


def test_undoing_an_attempt_never_writes_through_a_link_a_sandboxed_process_swaps_in(
    swapped, sandbox_image
):
    """Attack: a process the model left in the sandbox exchanges a folder of the workspace with
    a link to a host folder in a tight loop while the attempt's files are put back. The
    sandboxed processes are stopped first; a restore that then finds files changed behind the
    run's back is refused and the run goes on with its attempt. The host folder is untouched
    either way. Run with -s to see which."""
    workspace, host, backend, before = swapped
    assert swappers(host)
    steps = [text(STILL_WRONG), text(TIMES_WRONG), text(FIXED), DONE]
    with llama_cpp(steps) as llm:
        events: list[dict] = []
        config = embedded_config(
            workspace, llm, sandbox_backend=backend, sandbox_image=sandbox_image
        )
        result = run(config, TASK, events)
    assert result.status == "completed"
    said = [line for line in statuses(events) if "begun again" in line or "begin the" in line]
    assert said and ("begun again" in said[0] or "cannot begin the task again" in said[0])
    print(f"{backend}: {said[0]}; 0 writes outside the workspace")
    wait_for(lambda: swappers(host) == [], GUARD, "the swapper to be stopped")
    assert _host_state(host) == before


def test_leaving_the_closest_files_never_writes_through_a_link_a_sandboxed_process_swaps_in(
    swapped, sandbox_image
):
    """Attack: the same swapper while a run that ends unfinished puts back the files of its
    closest check. Its sandboxed processes are stopped first; a restore that finds files changed
    behind the run's back is refused, the files left as they are. The host folder is untouched
    either way. Run with -s to see which."""
    workspace, host, backend, before = swapped
    steps = closest_then_worse(workspace) + [text("Done.\nTASK_COMPLETE")] * 8
    # the checks' counts not changed by the swapping: pytest collects only the tests
    (workspace / "pytest.ini").write_text("[pytest]\ntestpaths = test_calc.py\n")
    with llama_cpp(steps) as llm:
        events: list[dict] = []
        config = embedded_config(
            workspace, llm, sandbox_backend=backend, sandbox_image=sandbox_image
        )
        result = run(config, "Make the tests pass.", events)
    assert result.status == "blocked", result
    said = [line for line in statuses(events) if "failed least" in line or "stay as" in line]
    last = Checkpoints(workspace).steps(result.session_id)[-1]
    assert said or last.get("kind") == "restore", statuses(events)  # (one that changed nothing)
    print(f"{backend}: {(said or ['put back nothing'])[0]}; 0 writes outside the workspace")
    assert {"test_calc.py", "pytest.ini"} <= {p.name for p in workspace.iterdir()}
    wait_for(lambda: swappers(host) == [], GUARD, "the swapper to be stopped")
    assert _host_state(host) == before
