"""``mkg-hook --client NAME EVENT``: the one command a harness runs for every lifecycle event.

Standard library only, and it always exits 0: a hook must never break or slow the agent.

It reads the payload, scrubs ``<private>`` spans and credentials from it, cuts what is over the
payload's budget (with markers, see :mod:`mkg_core.payload`), appends it to the durable local
spool within the event's deadline (else to the overflow journal; a corrupt spool is moved aside)
and makes sure the worker is running.
Events that answer the harness (SessionStart, UserPromptSubmit) then ask the worker over its
socket and wait at most a deadline; past it they print nothing. Anything that goes wrong is one
line on stderr, never a non-zero exit.

No-op when ``MKG_DISABLED`` is set, inside MKG's own LLM subprocesses (``MKG_IN_EXTRACTION``),
and in a project that holds a ``.mkg-disable`` file (in its folder or any parent).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import time

from . import degraded, runtime
from .eventnames import (
    ANSWERING_EVENTS,
    EVENT_NAMES,
    TOOL_ANSWERING_EVENTS,
    canonical_event_name,
    context_output,
    tool_key,
)
from .payload import DENSE_STRINGS, Budget, clip_identifiers, cut_nesting, is_dense, reduce_dense, sanitize
from .spool import SpoolError, env_hints, event_id, open_spool, quarantine, utc_timestamp, write_overflow

TYPE_CHECKING = False  # typing itself is too slow to import here
if TYPE_CHECKING:
    from typing import BinaryIO, TextIO

#: The most a hook reads from stdin; a larger payload is not recorded (and says so).
MAX_PAYLOAD_BYTES = 64 * 1024 * 1024
#: A file that turns MKG off for the folder that holds it and everything below.
DISABLE_FILE = ".mkg-disable"
#: How long an answering event waits for the worker, in seconds, and the variable that sets it.
ANSWER_DEADLINES = {
    "SessionStart": ("MKG_HOOK_DEADLINE_SESSION_START", 2.0),
    "UserPromptSubmit": ("MKG_HOOK_DEADLINE_PROMPT", 1.5),
    "PostToolUse": ("MKG_HOOK_DEADLINE_TOOL", 1.5),
    "PostToolUseFailure": ("MKG_HOOK_DEADLINE_TOOL", 1.5),
}
#: How long any other event's hook may take to spool it, and the variable that sets it.
CAPTURE_DEADLINE = ("MKG_HOOK_DEADLINE_CAPTURE", 1.0)
#: Time kept back from the deadline for writing the overflow journal when the spool is slow.
OVERFLOW_RESERVE = 0.05
#: A file each hook appends one JSON line to: when each step ended (seconds from the process
#: start), the CPU time used and the time spent waiting for a CPU. Tells a busy machine from slow work.
TRACE_VARIABLE = "MKG_HOOK_TRACE"
_TRUE = {"1", "true", "yes", "on"}

USAGE = """\
usage: mkg-hook [--client NAME] EVENT < payload.json

Record one lifecycle event of an agent harness in MKG's local spool (the worker moves it into
Neo4j), and print the memory to inject for SessionStart and UserPromptSubmit, and the known fix
when a query tool's call failed (PostToolUse, PostToolUseFailure). Always exits 0.

  --client NAME   the harness that sent the event (claude, codex, ...); default $MKG_CLIENT
  EVENT           the event name (SessionStart, PostToolUse, ...); the payload's
                  hook_event_name wins when it is one of MKG's event names

Environment: MKG_DISABLED=1 turns capture off; MKG_WORKER_AUTOSTART=0 leaves starting the
worker to you (`mkg worker`); MKG_HOOK_DEADLINE_SESSION_START (default 2.0),
MKG_HOOK_DEADLINE_PROMPT (default 1.5) and MKG_HOOK_DEADLINE_TOOL (default 1.5, query tools
only) bound how long answering events take in all, MKG_HOOK_DEADLINE_CAPTURE (default 1.0) the
others, in seconds. A spool that cannot be written in time (locked by another process) sends the
event to the overflow journal, which the worker imports. MKG_HOOK_TRACE=FILE appends each hook's
step times, CPU time and time spent waiting for a CPU to FILE (one JSON line per hook).
"""


class Skip(Exception):
    """The event is not recorded; the message says why (one line on stderr)."""


#: When each step of the running hook ended (``time.monotonic()``), for ``MKG_HOOK_TRACE``.
_steps: list[tuple[str, float]] = []


def _step(name: str) -> None:
    _steps.append((name, time.monotonic()))


def main(
    argv: list[str] | None = None,
    *,
    stdin: BinaryIO | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    environ: dict[str, str] | None = None,
    started: float | None = None,
) -> int:
    """Run one hook; ``started`` is when its deadline begins (``time.monotonic()``, default now)."""
    started = time.monotonic() if started is None else started
    # A harness may start the hook with a standard stream closed (Python then has None for it).
    err = stderr or sys.stderr or io.StringIO()
    env = os.environ if environ is None else environ
    _steps.clear()
    _step("ready")
    try:
        _run(
            sys.argv[1:] if argv is None else argv,
            stdin or (sys.stdin.buffer if sys.stdin is not None else io.BytesIO()),
            stdout or sys.stdout or io.StringIO(),
            err,
            env,
            started,
        )
    except Skip as exc:
        _say(err, str(exc))
    except BaseException as exc:  # the agent must never see a failure
        _say(err, f"internal error ({type(exc).__name__}: {exc}); the event was not recorded")
    if env.get(TRACE_VARIABLE):
        _trace(env[TRACE_VARIABLE], started)
    return 0


def _run(
    argv: list[str],
    stdin: BinaryIO,
    stdout: TextIO,
    stderr: TextIO,
    env: dict[str, str] | os._Environ[str],
    started: float,
) -> None:
    client, event_arg, wants_help = _parse_args(argv)
    if wants_help:
        stdout.write(USAGE)
        return
    data = _read(stdin, env)
    if data is None:
        return
    _step("read")
    payload, dense = _decode(data)
    clipped = clip_identifiers(payload)
    budget = Budget.for_raw(data)
    truncated: list[str] = []
    _step("decoded")
    clean = sanitize(payload, truncated, budget=budget)
    _step("scrubbed")
    assert isinstance(clean, dict)
    session_id, event = _identify(clean, event_arg)
    if _disabled_here(clean):
        return
    client = (client or env.get("MKG_CLIENT") or "").strip().lower() or "auto"
    deadline = started + _deadline(event, env)

    received_ns = time.time_ns()
    received_at = utc_timestamp(received_ns)
    record: dict[str, object] = {
        "payload": clean,
        "argv_event": event_arg,
        "cwd": _cwd(),
        "env": env_hints(env),
        "payload_bytes": len(data),
        "truncated": truncated,
    }
    if clipped:
        record["clipped_ids"] = clipped
    if budget.repaired:
        record["repaired"] = ["lone surrogate escapes replaced by U+FFFD"]
    if dense:
        truncated.insert(
            0, f"$ (over {DENSE_STRINGS:,} strings: only its start and last top-level fields read)"
        )
    paths = runtime.Paths.from_env(env)
    digest = hashlib.sha256(data).hexdigest()
    entry: dict[str, object] = {
        "event_id": event_id(client, session_id, event, received_at, digest),
        "client": client,
        "event": event,
        "session_id": session_id,
        "received_at": received_at,
        "record": record,
    }
    seq = _spool(paths, entry, received_ns, deadline, stderr)
    _step("spooled")
    if truncated:
        shown = ", ".join(truncated[:3]) + (f" and {len(truncated) - 3} more" if len(truncated) > 3 else "")
        _say(stderr, f"oversized payload fields truncated ({shown}); the event was recorded")
    starting = _start_worker(paths, env, stderr)
    _step("worker")
    if seq is not None and (
        event in ANSWERING_EVENTS
        or (event in TOOL_ANSWERING_EVENTS and _answers_for(paths, clean.get("tool_name")))
    ):
        unanswered = _answer(paths, seq, deadline, stdout, starting=starting)
        if unanswered and event == "SessionStart" and degraded.first_time(paths.root, session_id):
            named = clean.get("hook_event_name")
            native = named if isinstance(named, str) and named.strip() else event
            stdout.write(context_output(native, degraded.notice(unanswered)) + "\n")


def _read(stdin: BinaryIO, env: dict[str, str] | os._Environ[str]) -> bytes | None:
    """The payload, or None when this hook records nothing (inside extraction, or disabled)."""
    if env.get("MKG_IN_EXTRACTION"):
        _drain(stdin)
        return None
    data = stdin.read(MAX_PAYLOAD_BYTES + 1)
    if (env.get("MKG_DISABLED") or "").strip().lower() in _TRUE:
        return None
    if len(data) > MAX_PAYLOAD_BYTES:
        _drain(stdin)
        raise Skip(
            f"payload larger than {MAX_PAYLOAD_BYTES // (1024 * 1024)} MiB; the event was not recorded"
        )
    return data


def _identify(clean: dict[str, object], event_arg: str | None) -> tuple[str, str]:
    """The session id and MKG's event name, or Skip saying which is missing."""
    session_id = clean.get("session_id")
    if isinstance(session_id, int) and not isinstance(session_id, bool):
        session_id = str(session_id)
    if not isinstance(session_id, str) or not session_id.strip():
        raise Skip("the payload has no session_id; the event was not recorded")
    named = clean.get("hook_event_name")
    event = canonical_event_name(named) if isinstance(named, str) and named.strip() else None
    if event_arg and event not in EVENT_NAMES:
        # A harness whose events have other names (Gemini CLI's BeforeAgent) passes MKG's as EVENT.
        event = canonical_event_name(event_arg)
    if event is None:
        raise Skip("no valid event name (give EVENT or send hook_event_name); the event was not recorded")
    return session_id.strip(), event


def _start_worker(paths: runtime.Paths, env: dict[str, str] | os._Environ[str], stderr: TextIO) -> bool:
    """Start a worker if none runs (unless autostart is off); True if one was started now."""
    autostart = (env.get("MKG_WORKER_AUTOSTART") or "1").strip().lower() not in ("0", "false", "no", "off")
    if runtime.worker_pid(paths) is not None or not autostart:
        return False
    try:
        runtime.spawn_worker(paths, env)
    except OSError as exc:
        _say(stderr, f"could not start the worker ({exc}); the event waits in the spool")
        return False
    return True


def _deadline(event: str, env: dict[str, str] | os._Environ[str]) -> float:
    """Seconds this event's hook may take in all (spooling, and waiting for an answer)."""
    variable, default = ANSWER_DEADLINES.get(event, CAPTURE_DEADLINE)
    try:
        return max(float(env.get(variable) or default), 0.0)
    except ValueError:
        return default


def _spool(
    paths: runtime.Paths, entry: dict[str, object], received_ns: int, deadline: float, stderr: TextIO
) -> int | None:
    """Append the event to the spool within the deadline; return its row, or None when it went to
    the overflow journal. A corrupt spool is moved aside and a new one started."""
    fields = {key: entry[key] for key in ("event_id", "client", "event", "session_id", "received_at")}
    record = entry["record"]
    assert isinstance(record, dict)
    for attempt in (1, 2):
        wait = max(deadline - time.monotonic() - OVERFLOW_RESERVE, 0.001)
        try:
            spool, aside = open_spool(paths.spool, timeout=wait)
            if aside:
                _say(stderr, f"the spool was corrupt: moved it to {aside} and started a new one")
            with spool:
                seq, _ = spool.append(record=record, **{k: str(v) for k, v in fields.items()})
                return seq
        except SpoolError as exc:
            if exc.corrupt and attempt == 1:
                quarantine(paths.spool)  # found corrupt while writing: move it aside, try once more
                continue
            reason = str(exc)
            break
        except OSError as exc:  # the state folder itself (not private, not writable)
            raise Skip(f"{exc}; the event was not recorded") from None
    try:
        write_overflow(paths.root, received_ns, entry)
    except OSError as exc:
        raise Skip(f"{reason}; the overflow journal failed too ({exc}); the event was not recorded") from None
    _say(stderr, f"{reason}; the event waits in the overflow journal")
    return None


def _answers_for(paths: runtime.Paths, tool_name: object) -> bool:
    """Whether the worker answers results of this tool (it lists the query tools it knows), however
    the harness spells an MCP tool (``mcp__meta-knowledge-graph__x``, ``mcp_meta-knowledge-graph_x``)."""
    key = tool_key(tool_name) if isinstance(tool_name, str) else None
    if key is None:
        return False
    keys = runtime.answering_tools(paths)
    return key in keys or any(key.endswith("_" + known) for known in keys)


def _answer(
    paths: runtime.Paths,
    seq: int,
    deadline: float,
    stdout: TextIO,
    *,
    starting: bool,
) -> str | None:
    """Ask the worker what to inject; print it, or nothing once the deadline has passed. None when
    the worker answered (with memory or with nothing to say); else why it did not."""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0.005:
            return degraded.WORKER_STARTING if starting else degraded.WORKER_SLOW
        answer = runtime.request(paths, {"op": "answer", "seq": seq, "deadline": remaining}, remaining)
        if answer is not None:
            text = answer.get("stdout")
            if isinstance(text, str) and text and time.monotonic() < deadline:
                stdout.write(text if text.endswith("\n") else text + "\n")
            return None
        alive = runtime.worker_pid(paths) is not None
        if alive and os.path.exists(paths.socket):
            return degraded.WORKER_SLOW  # the worker is up but did not answer in time
        if not alive and not starting:
            return degraded.WORKER_STOPPED  # no worker, and none coming: nobody will answer
        time.sleep(min(0.05, max(deadline - time.monotonic(), 0)))  # a starting worker: try again


def _parse_args(argv: list[str]) -> tuple[str | None, str | None, bool]:
    client = event = None
    args = iter(argv)
    for arg in args:
        if arg in ("-h", "--help"):
            return None, None, True
        if arg == "--client":
            client = next(args, None)
        elif arg.startswith("--client="):
            client = arg.split("=", 1)[1]
        elif arg.startswith("-"):
            raise Skip(f"unknown option {arg[:40]!r} (see mkg-hook --help); the event was not recorded")
        elif event is None:
            event = arg
    return client, event, False


def _decode(data: bytes) -> tuple[dict[str, object], bool]:
    """The payload, and whether it was too dense to parse whole (see :func:`reduce_dense`)."""
    if not data.strip():
        raise Skip("empty payload on stdin; the event was not recorded")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise Skip("payload is not UTF-8 text; the event was not recorded") from None
    dense = is_dense(text)
    try:
        if dense:  # too many strings to parse within the hook's time: keep its ends
            try:
                payload = _loads(reduce_dense(text))
            except ValueError:  # the fields after the cut did not read back: keep the start only
                payload = _loads(reduce_dense(text, tail=False))
        else:
            payload = _loads(text)
    except RecursionError:
        raise Skip("payload is nested too deeply; the event was not recorded") from None
    except ValueError as exc:
        raise Skip(f"payload is not valid JSON ({str(exc)[:120]}); the event was not recorded") from None
    if not isinstance(payload, dict):
        kind = "an array" if isinstance(payload, list) else type(payload).__name__
        raise Skip(f"payload must be a JSON object, got {kind}; the event was not recorded")
    return payload, dense


def _loads(text: str) -> object:
    try:
        return json.loads(text)
    except RecursionError:  # deeper than the parser goes: cut the deep values, keep the event
        return json.loads(cut_nesting(text))


def _disabled_here(payload: dict[str, object]) -> bool:
    """True when the event's folder, or one above it, holds a ``.mkg-disable`` file."""
    folder = payload.get("cwd")
    if not isinstance(folder, str) or not folder.strip():
        folder = _cwd()
    if not folder:
        return False
    folder = os.path.abspath(os.path.expanduser(folder))
    while True:
        if os.path.exists(os.path.join(folder, DISABLE_FILE)):
            return True
        parent = os.path.dirname(folder)
        if parent == folder:
            return False
        folder = parent


def _cwd() -> str:
    try:
        return os.getcwd()
    except OSError:
        return ""


def _drain(stdin: BinaryIO) -> None:
    """Read and discard what the harness still writes, so it never sees a broken pipe."""
    try:
        while stdin.read(1024 * 1024):
            pass
    except (OSError, ValueError):
        pass


def _trace(path: str, started: float) -> None:
    """Append this hook's steps to ``path`` (see :data:`TRACE_VARIABLE`); never fails the hook."""
    _step("done")
    try:
        with open("/proc/self/schedstat", "rb") as stat:
            waited = int(stat.read().split()[1]) / 1e9  # nanoseconds spent runnable, not running
    except (OSError, ValueError, IndexError):
        waited = None
    times = os.times()
    line = {
        "pid": os.getpid(),
        "argv": sys.argv[1:],
        "steps": {name: round(at - started, 4) for name, at in _steps},
        "cpu_s": round(times.user + times.system, 3),
        "cpu_wait_s": waited,
    }
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(line) + "\n")
    except OSError:
        pass


def _say(stderr: TextIO, message: str) -> None:
    try:
        stderr.write(f"mkg-hook: {' '.join(message.split())}\n")
        stderr.flush()
    except Exception:  # a closed or broken stream: the hook still exits 0
        pass


def process_started() -> float:
    """When this process was started, on the ``time.monotonic()`` clock: a hook's deadline counts
    from the harness starting it, so the time Python takes to start (long on a busy machine) is
    spent from it too. Now, where the start cannot be read (no ``/proc``)."""
    now = time.monotonic()
    try:
        with open("/proc/self/stat", "rb") as stat, open("/proc/uptime", "rb") as uptime:
            ticks = int(stat.read().rsplit(b")", 1)[1].split()[19])
            booted_for = float(uptime.read().split()[0])
        elapsed = booted_for - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return now
    return now - elapsed if 0 <= elapsed < 60 else now


def run() -> None:
    sys.exit(main(started=process_started()))


if __name__ == "__main__":
    run()
