"""Turning any failure into one line that says what was being done and what to try.

python-chi, keystoneauth, the OpenStack clients, requests, Fabric and paramiko
each raise their own exceptions, many with multi-line messages and none
saying which provisioning step was running. ``step(...)`` wraps one step:
a ``ProvisioningError`` passes through untouched, anything else becomes a
``ProvisioningError`` naming the step (the original stays chained as
``__cause__`` for ``SERVELAB_DEBUG=1``). Nothing here imports python-chi.

``signals_raise()`` turns SIGTERM and SIGHUP into a ``Terminated`` exception while a
provisioning sequence runs, so a killed controller takes the same path as Ctrl-C
(teardown of what it created) instead of dying with the lease still held, and holds all three
(Ctrl-C too) once the caller's stop has begun; a signal the process inherited as ignored
(``nohup``) stays ignored. ``Terminated`` is a BaseException,
as KeyboardInterrupt is: no library's ``except Exception`` turns a stop into an error to retry.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import FrameType

from provisioning import messages as msg
from servelab.core.console import say
from servelab.core.notices import SaidPlainly

MAX_DETAIL = 300


class ProvisioningError(SaidPlainly, RuntimeError):
    """A provisioning step cannot go on; the message says what to do about it.

    Defined here, near the bottom of the package (this module imports only ``messages``, which imports
    nothing of it), so that ``config`` and ``times`` both use it without importing each other both ways;
    ``provisioning.config.ProvisioningError`` is the same class. Its messages: ``provisioning.messages``."""

# what to try, by the exception's class name (the classes live in libraries not imported here)
HINTS = {
    "Unauthorized": "Chameleon refused the credentials: source a current openrc (application "
                    "credentials can expire or be deleted) or, on Chameleon's Jupyter, restart your "
                    "server (Hub Control Panel) to renew its token; check the project name too",
    "Forbidden": "the credentials may not do this in this project: check the project name",
    "MissingRequiredOptions": "the credentials in the environment are incomplete: source the whole "
                              "openrc file again",
    "OptionError": "the credentials in the environment are incomplete: source the whole openrc file again",
    "ConnectFailure": "Chameleon could not be reached: check this machine's network connection",
    "ConnectionError": "Chameleon could not be reached: check this machine's network connection",
    "ConnectTimeout": "Chameleon did not answer in time: try again in a minute",
    "AuthenticationException": "SSH refused the key: the private key of the server's key pair must be "
                               "in ~/.ssh (or named by OS_KEYPAIR_PRIVATE_KEY)",
    "NoValidConnectionsError": "SSH could not connect: check the floating IP and the security groups",
}


def one_line(text: str) -> str:
    """``text`` with its whitespace (newlines included) collapsed, so it prints as one line."""
    return " ".join(str(text).split())


def describe(exc: BaseException) -> str:
    """The exception as ``Type: first line of its message`` (a Fabric/invoke exit: the command and code)."""
    result = getattr(exc, "result", None)
    if result is not None and hasattr(result, "exited"):  # invoke.exceptions.UnexpectedExit
        return f"exit code {result.exited} from `{one_line(getattr(result, 'command', '?'))}`"
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    detail = lines[0] if lines else repr(exc)
    if len(detail) > MAX_DETAIL:
        detail = detail[:MAX_DETAIL - 1] + "…"
    return f"{type(exc).__name__}: {detail}"


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and what it wraps (``__cause__``, else ``__context__``), at any depth."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def http_status(exc: BaseException) -> int | None:
    """The HTTP status of the failure ``exc`` is or wraps, read the way each library raises it: blazarclient's
    ``kwargs["code"]`` (its ``code`` attribute is the class default, 500, whatever the answer was),
    neutronclient's ``status_code``, keystoneauth's ``http_status``, novaclient's ``code``, requests' and
    openstacksdk's ``response.status_code``; else None."""
    for item in _chain(exc):
        kwargs = getattr(item, "kwargs", None)
        found = [kwargs.get("code") if isinstance(kwargs, dict) else None, getattr(item, "status_code", None),
                 getattr(item, "http_status", None), getattr(item, "code", None),
                 getattr(getattr(item, "response", None), "status_code", None)]
        for status in found:
            if isinstance(status, int) and not isinstance(status, bool) and 400 <= status < 600:
                return status
    return None


PERMANENT_STATUS = (401, 403, 404)  # refused credentials, no right, gone: trying again changes nothing
PERMANENT_CLASSES = ("Unauthorized", "Forbidden", "NotFound", "EndpointNotFound", "AuthorizationFailure")
TRANSIENT_STATUS = (408, 429, 500, 502, 503, 504)
TRANSIENT_CLASSES = ("ConnectionError", "ConnectFailure", "ConnectTimeout", "RetriableConnectionFailure",
                     "SSLError", "Timeout", "ReadTimeout", "ServiceUnavailable", "GatewayTimeout",
                     "BadGateway", "InternalServerError", "ConnectionFailed")  # the last: neutronclient's


def _class_names(exc: BaseException) -> set[str]:
    return {cls.__name__ for item in _chain(exc) for cls in type(item).__mro__}


def permanent(exc: BaseException) -> bool:
    """A failure that trying again cannot mend: the credentials refused (401/403) or the thing gone (404)."""
    return http_status(exc) in PERMANENT_STATUS or bool(_class_names(exc) & set(PERMANENT_CLASSES))


def gone(exc: BaseException) -> bool:
    """The failure says the thing asked about does not exist (404, ``NotFound``)."""
    return http_status(exc) == 404 or "NotFound" in _class_names(exc)


def transient(exc: BaseException) -> bool:
    """A failure that may pass by itself: the connection dropped or timed out, or the service answered
    408, 429 or 5xx. Anything else (a quota, a refused request, a bug) is not tried again."""
    if permanent(exc) or stop_in(exc) is not None:
        return False
    status = http_status(exc)
    if status is not None:
        return status in TRANSIENT_STATUS
    return (any(isinstance(item, OSError) for item in _chain(exc))
            or bool(_class_names(exc) & set(TRANSIENT_CLASSES)))


def hint_for(exc: BaseException, hints: Mapping[str, str] | None = None) -> str:
    """What to try for this kind of failure ('' when nothing specific is known); ``hints`` (by class
    name) come before ``HINTS``."""
    table = {**HINTS, **(hints or {})}
    for cls in type(exc).__mro__:
        if cls.__name__ in table:
            return table[cls.__name__]
    by_status = {401: "Unauthorized", 403: "Forbidden"}.get(http_status(exc) or 0)  # blazarclient's one class
    return table[by_status] if by_status else ""


@contextmanager
def step(what: str, hint: str = "", hints: Mapping[str, str] | None = None) -> Iterator[None]:
    """Run one step; any failure but a ProvisioningError becomes one naming ``what`` (and a hint: by the
    exception's class from ``hints``, else ``HINTS``, else ``hint``)."""
    try:
        yield
    except ProvisioningError:
        raise
    except Exception as exc:  # python-chi, keystoneauth, novaclient, requests, Fabric, ...
        advice = hint_for(exc, hints) or hint
        raise ProvisioningError(msg.STEP_FAILED(what=what, error=describe(exc),
                                                advice=f": {advice}" if advice else "")) from exc


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived; raised where the program was, so that the stop takes the clean-up path.

    A BaseException, as KeyboardInterrupt is: a stop is no error, and no ``except Exception`` may turn it
    into one. python-chi 1.2.10's ``Server.refresh`` wraps every Exception as ``ResourceError("Could not
    refresh server: ...")``, which the boot wait tries again: a SIGTERM there used to be swallowed, and
    the run went on to launch the node (docs/decisions/2026-11-28-class-day-third-pass.md)."""


def stop_in(exc: BaseException) -> BaseException | None:
    """The stop (``Terminated``, ``KeyboardInterrupt``) that ``exc`` is or wraps (its ``__cause__`` or
    ``__context__``, at any depth), else None: a retry loop re-raises it instead of trying again."""
    return next((item for item in _chain(exc) if isinstance(item, Terminated | KeyboardInterrupt)), None)


class SignalGuard:
    """Installed by ``signals_raise``: every SIGTERM/SIGHUP raises ``Terminated`` (SIGINT
    ``KeyboardInterrupt``) until the caller says the stop has begun (``begin_stop``); from then on, inside
    ``deferred()`` (a teardown), and for ``UNWINDING_S`` after a raise, a signal only prints, at every
    instant until the teardown ends: a second Ctrl-C must not skip it. The one exception is a ``cuttable``
    section (the stop's fetch, which a later signal may cut short to reach the teardown sooner). A closed
    SSH session sends SIGHUP and SIGTERM in quick succession: the second must not land in the clean-up the
    first is unwinding through (the SSH channel's close, which ends invoke's reader threads). A signal whose
    exception never reached the caller (a library caught it) is no stop under way: the next one, later than
    that, raises again (docs/decisions/2026-12-01-class-day-fourth-pass.md)."""

    UNWINDING_S = 5.0  # a raised stop reaches the caller's handler in far less than this

    def __init__(self) -> None:
        self.received: list[str] = []
        self._defer = ""
        self._stopping = ""
        self._cuttable = ""
        self._raised_at: float | None = None

    @property
    def stopping(self) -> bool:
        """A stop has begun (``begin_stop``): later signals only print."""
        return bool(self._stopping)

    def begin_stop(self, what: str = "the stop") -> None:
        """The caller holds the stop (it caught the ``Terminated`` or is on its way to the teardown)."""
        self._stopping = self._stopping or what

    def handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        self.received.append(name)
        unwinding = self._raised_at is not None and time.monotonic() - self._raised_at < self.UNWINDING_S
        stopping = "" if self._cuttable else self._stopping
        during = self._defer or stopping or ("the stop" if unwinding else "")
        if during:
            say(msg.SIGNAL_DURING(signal=name, during=during))  # the terminal may be gone
            return
        self._raised_at = time.monotonic()
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Terminated(f"stopped by {name}")

    @contextmanager
    def cuttable(self, what: str) -> Iterator[None]:
        """Inside, during a stop, a later signal (past ``UNWINDING_S``) raises again, so that the caller's
        ``except`` around this block can cut ``what`` short; elsewhere during the stop it only prints."""
        self._cuttable = what
        try:
            yield
        finally:
            self._cuttable = ""

    @contextmanager
    def deferred(self, what: str) -> Iterator[None]:
        """Signals only print while ``what`` (a teardown) runs: it must not be cut short. Ctrl-C
        (SIGINT) too: pressed twice during a long server delete, it would skip the lease's."""
        self._defer = what
        previous = None
        if threading.current_thread() is threading.main_thread() and not _ignored(signal.SIGINT):
            previous = signal.signal(signal.SIGINT, self.handle)
        try:
            yield
        finally:
            self._defer = ""
            if previous is not None:
                signal.signal(signal.SIGINT, previous)


def _ignored(sig: int) -> bool:
    """The process was started with ``sig`` ignored (``nohup`` ignores SIGHUP; a background job of a
    shell without job control, SIGINT): whoever started it asked for that, and it stays so."""
    return signal.getsignal(sig) is signal.SIG_IGN


@contextmanager
def signals_raise() -> Iterator[SignalGuard]:
    """SIGTERM and SIGHUP raise ``Terminated`` inside, SIGINT ``KeyboardInterrupt`` (as Python's own handler
    does), until the caller's ``begin_stop``; the previous handlers come back after.

    A signal inherited as ignored stays ignored: ``nohup ./lab run --target chameleon &`` must outlive
    its terminal (docs/decisions/2026-11-25-chameleon-robustness.md). Only the main thread can install
    handlers; elsewhere nothing changes (the guard records nothing).
    """
    guard = SignalGuard()
    stops = (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None), signal.SIGINT)
    wanted = [sig for sig in stops if sig and not _ignored(sig)]
    previous: dict[int, object] = {}
    try:
        if threading.current_thread() is threading.main_thread():
            for sig in wanted:
                previous[sig] = signal.signal(sig, guard.handle)
        yield guard
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]  # what signal.signal returned
