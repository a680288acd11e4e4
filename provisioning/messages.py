"""Every one-line message provisioning raises or prints when something fails, is refused or is tried again.

Each is a ``Message``: its ``text`` (a ``str.format`` template whose fields are named, and which says what to
do) and ``when`` (what leads to it, in a few words). Calling one fills it in and collapses it to one line:
``raise ProvisioningError(LEASE_GONE(lease=..., error=...))``. ``catalog()`` lists them all, in the order
below, for the class-day runbook (``docs/guides/runbook.md``); a test holds every ``ProvisioningError`` of
the package to this module (``tests/unit/provisioning/test_messages.py``). Progress lines ("Creating
lease ...") stay where they are printed. This module imports nothing of the package.
Reasons: docs/decisions/2026-12-01-class-day-fourth-pass.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Message:
    """One message: ``text``, a template of named fields; ``when``, what leads to it."""

    text: str
    when: str

    def __call__(self, **fields: Any) -> str:
        return " ".join(self.text.format(**fields).split())


M = Message

# -------------------------------------------------------------------------------- settings (config, times)
CODE_SOURCE_UNKNOWN = M("code_source={value!r}: choose one of {choices}", "an unknown code_source")
NODE_COUNT = M("node_count={value}: reserve at least one node", "node_count below 1")
DURATION_NOT_POSITIVE = M(
    "duration={value}: a lease needs a positive duration", "a zero or negative duration")
DURATION_TOO_LONG = M("duration={value}: Chameleon leases last at most 7 days", "a duration over 7 days")
LEASE_WAIT_NEGATIVE = M("lease_wait_minutes={value}: give 0 or more minutes", "a negative lease_wait_minutes")
NO_PROJECT = M(
    "no Chameleon project given: pass project=... (--project) or set CHI_PROJECT (e.g. "
    "CHI_PROJECT=CHI-123456); it is never asked for interactively", "no project anywhere")
NOT_A_WHOLE_NUMBER = M("{name}={text!r} is not a whole number", "a setting that must be a number")
UNKNOWN_SETTINGS = M("unknown provisioning setting(s): {names}", "a misspelt setting")
LEASE_START_NOT_A_TIME = M(
    "lease_start={text!r} is not a time: use ISO 8601 (e.g. 2026-11-24 09:00 in {site}'s time zone, {zone}, "
    "or 2026-11-24T15:00Z), +2h from now, or leave it empty to start now", "lease_start unreadable")
LEASE_START_PAST = M(
    "lease_start {start} is in the past: give a later time (CHI_LEASE_START) or leave it empty to start now",
    "lease_start more than lease_timeout_s ago")
STATE_FILE_UNREADABLE = M(
    "{path} is not a provisioning state file ({error}): move it away and check the GUI for leftover leases, "
    "servers and floating IPs", "a damaged chameleon-state.json")
PYTHON_CHI_MISSING = M(
    "python-chi could not be imported ({error}): pip install python-chi python-blazarclient",
    "python-chi or blazarclient not installed")
STEP_FAILED = M("{what} failed ({error}){advice}", "any library's failure in a step, with what to try")

# ---------------------------------------------------------------------------------- credentials and checks
NO_CREDENTIALS = M(
    "no Chameleon credentials in the environment (no OS_AUTH_TYPE, OS_APPLICATION_CREDENTIAL_ID/_SECRET or "
    "OS_USERNAME/OS_PASSWORD): {how}", "no openrc sourced, not on the hub")
NO_AUTH_TYPE = M(
    "OS_AUTH_TYPE is not set although {present} is (python-chi would then try {default}): source the whole "
    "openrc file, not single variables, or {how}", "a partly sourced openrc")
AUTH_TYPE_NOT_V3 = M(
    "OS_AUTH_TYPE={auth_type}: python-chi reads credentials only for v3 auth plugins; set "
    "OS_AUTH_TYPE=v3{suggested} (an application credential's openrc uses v3applicationcredential)",
    "a v2-style OS_AUTH_TYPE")
CREDENTIALS_INCOMPLETE = M(
    "OS_AUTH_TYPE={auth_type} needs {missing}, which the environment lacks: source the whole openrc file "
    "again, or {how}", "an openrc missing variables")
SCOPED_APPLICATION_CREDENTIAL = M(
    "{scoped} {verb} set with application credentials: Keystone refuses any project scope with them (their "
    "project is fixed when they are made): unset {names} (the openrc of an application credential sets "
    "neither) and give the lab the project as CHI_PROJECT=...", "OS_PROJECT_NAME/ID with an app credential")
GIT_NEEDS_REPO_URL = M(
    "code_source='git' needs the lab's repository URL: pass repo_url=... or set SERVELAB_REPO_URL (or use "
    "code_source='upload', the default, to send this {what})", "code_source='git' without repo_url")
NOT_THE_LABS_FOLDER = M(
    "code_source='upload' sends the lab's folder, but {root} has no {missing}: run from the lab's folder (a "
    "clone, a Trovi import or an unpacked zip), or use code_source='git' with repo_url / SERVELAB_REPO_URL",
    "02 run outside the lab's folder")
UNKNOWN_SITE = M(
    "site {site!r} is not a Chameleon site (known: {known}): set site=... or CHI_SITE; the lab's P100 nodes "
    "are at CHI@TACC", "a misspelt site")
NOT_YOUR_PROJECT = M(
    "project {project} is not one of yours (yours: {yours}): set project=... or CHI_PROJECT to one of them",
    "a project the user is not in")
CREDENTIAL_OTHER_PROJECT = M(
    "the application credential is for project {theirs}, not {project}: set project={theirs} (CHI_PROJECT), "
    "or create an application credential in {project} ({gui} at {site}, tick {unrestricted}) and source its "
    "openrc", "an application credential of another project")
CREDENTIAL_RESTRICTED = M(
    "the application credential is restricted (the GUI's default), and Chameleon can make no lease with it: "
    "Blazar asks Keystone for a trust for every lease, which Keystone refuses to restricted application "
    "credentials; create one in {site}'s GUI ({gui}) with {unrestricted} ticked, in project {project}, and "
    "source its openrc", "a restricted application credential")
NO_SUCH_IMAGE = M(
    "image {image!r} does not exist at {site}: use CC-Ubuntu24.04-CUDA (the lab's default, with the NVIDIA "
    "driver) or a name from the GUI (Compute → Images)", "a misspelt image")
NO_SUCH_KEY_PAIR = M(
    "key pair {key!r} does not exist at {site} (there: {there}): create or import it ({gui}), or set "
    "key_name=... / CHI_KEY_NAME to one of those", "a key_name not at the site")
NO_KEY_PAIR = M(
    "no key pair for the server{found}: set key_name=... or CHI_KEY_NAME to the name of your key pair at "
    "{site} ({gui}); only on Chameleon's Jupyter does python-chi have a default one",
    "off the hub without key_name")
NO_PRIVATE_KEY = M(
    "the SSH private key {path} (OS_KEYPAIR_PRIVATE_KEY) does not exist: point it at the private key of the "
    "server's key pair, or unset it to use ~/.ssh and the SSH agent", "OS_KEYPAIR_PRIVATE_KEY names no file")

# ----------------------------------------------------------------------------------------------- the lease
LEASE_ENDED_BY_ID = M(
    "lease {lease_id} ({name}) has ended ({status}): give the id of a live lease (GUI: Reservations → "
    "Leases) or leave lease_id / CHI_LEASE_ID empty", "lease_id of an ended lease")
TWO_LEASES_ONE_NAME = M(
    "{count} live leases are named {name!r}: delete the extra ones in the GUI (Reservations → Leases) or "
    "choose another lease_name / CHI_LEASE_NAME", "two live leases with the lab's name")
NO_LEASE_WITH_ID = M(
    "no lease with id {lease_id} in project {project} at {site}: check the id (GUI: Reservations → Leases) "
    "or leave lease_id / CHI_LEASE_ID empty to create one", "a wrong lease_id")
LEASE_IN_ERROR = M(
    "lease {name} exists and is in ERROR: delete it (provisioning teardown with delete_adopted, or the GUI) "
    "and run this step again, or choose another lease_name / CHI_LEASE_NAME",
    "the lab's lease in ERROR before the wait")
LEASE_NOT_MADE = M(
    "could not create lease {name} ({error}): most often no {node_type} node is free at {site} {when}; "
    "check the host calendar in the GUI (Reservations → Leases → Host Calendar), then try a shorter "
    "duration, another start time (lease_start / CHI_LEASE_START), or another site",
    "Blazar refused the lease (no node free, mostly)")
LEASE_MADE_ANYWAY = M(
    "Lease {name} was made although Blazar's answer was lost ({error}): using it",
    "printed: the create failed after Blazar made the lease")
LEASE_GONE = M(
    "lease {name} is gone ({error}): it was deleted (in the GUI, or by a teardown) while the lab waited for "
    "it; run this step again to create a new one", "the lease deleted during its wait")
LEASE_STATUS_REFUSED = M(
    "reading lease {name}'s status failed ({error}): {advice}; then run this step again (the lease is "
    "reused)", "Blazar refused the status read (401/403)")
LEASE_STATUS_NOT_READ_AHEAD = M(
    "Reading lease {name}'s status failed ({error}): not read again now, since it starts later than this "
    "step waits", "printed: a far-ahead slot's one read failed")
LEASE_STATUS_UNREADABLE = M(
    "lease {name}'s status could not be read until the wait's end (the last error: {error}): check it in "
    "the GUI (GUI: Reservations → Leases; it is kept) and run this step again",
    "Blazar failing for the whole lease wait")
LEASE_STATUS_RETRY = M(
    "Reading lease {name}'s status failed ({error}); trying again every {every} s until the wait's end: the "
    "lease is kept meanwhile", "printed: a transient Blazar error in the wait")
LEASE_NOT_ACTIVE = M(
    "lease {name} is {status}, not ACTIVE: if it is ERROR, delete it (teardown, or the GUI) and create it "
    "again, possibly at another time or site", "the lease went to ERROR or ended")
LEASE_STILL_PENDING = M(
    "lease {name} is still {status} after waiting up to {wait} past its start time: check it in the GUI "
    "(GUI: Reservations → Leases; it is kept) and run this step again",
    "Blazar did not start the lease in time")
LEASE_LATER = M(
    "Lease {name} starts {start}, in {left}: more than the {minutes} min this step waits, so it is kept "
    "reserved; run this step again after it starts", "a lease starting beyond the wait")
NO_NODE_RESERVATION = M(
    "lease {name} has no node reservation: delete it and create it again",
    "a lease made in the GUI without a host")

# ------------------------------------------------------------------------------------------------ the server
SERVER_GONE_DURING_BOOT = M(
    "server {server} is gone ({error}): it was deleted while the lab waited for it to boot; run this step "
    "again to launch a new one (the lease is reused)", "the server deleted during the boot wait")
SERVER_WAIT_REFUSED = M(
    "Chameleon refused the credentials while waiting for server {server} ({error}): {hint}; then run this "
    "step again (the server is reused)", "401/403 during the boot wait")
BOOT_TIMED_OUT = M(
    "server {server} did not become ACTIVE within {limit} ({why}; {error}): {again}",
    "the boot outlasted its wait")
BOOT_WAIT_HOPELESS = M(
    "waiting for server {server} failed ({error}): trying again would not mend it; check the server in the "
    "GUI (Compute → Instances) and run this step again (the server is reused)",
    "an error no retry mends (two servers with the lab's name)")
SERVER_STATUS_UNREADABLE = M(
    "server {server}'s status could not be read until the wait's end ({limit}, {why}; the last error: "
    "{error}): check the server in the GUI (Compute → Instances) and run this step again (the server is "
    "reused)", "Nova failing for the whole boot wait")
SERVER_STATUS_RETRY = M(
    "Reading server {server}'s status failed ({error}); trying again every {every} s for up to {left} more: "
    "the boot goes on meanwhile", "printed: a transient Nova error")
SERVER_NOT_ACTIVE = M(
    "server {server} is {status}, not ACTIVE: delete it (teardown with keep_lease=True, or the GUI: Compute "
    "→ Instances) and launch it again", "the server booted into ERROR")
SERVER_IN_ERROR = M(
    "server {server} exists but is in ERROR; it is not reused. Delete it (the GUI: Compute → Instances → "
    "Delete, or provisioning teardown with keep_lease=True, and delete_adopted=True when this lab did not "
    "create it) and run this step again", "the lab's server in ERROR")
NO_SSH = M(
    "SSH on {address}:22 did not answer within {limit} s ({error}); check that the project's security "
    "groups allow SSH and that the server booted (GUI console)", "port 22 closed after the boot")

# ------------------------------------------------------------------------------------------- floating IPs
FIP_HINT = (
    "check the project's floating IP quota in the GUI (Network → Floating IPs): release ones you no longer "
    "use, or name a free one with floating_ip / CHI_FLOATING_IP, and run this step again (the lease and "
    "server are reused)")
GIVEN_IP_HINT = M(
    "give a free floating IP of project {project} (GUI: Network → Floating IPs) or leave floating_ip / "
    "CHI_FLOATING_IP empty to allocate one for this run", "(the hint below)")
GIVEN_IP_BOUND = M(
    "floating IP {address} is already in use (bound to port {port}, another server's, possibly another "
    "student's): {hint}", "floating_ip names a bound IP")
FIP_RETRY = M(
    "{What} failed ({error}); trying again in {every} s (attempt {attempt} of {attempts})",
    "printed: a transient Neutron error while allocating or associating")
FIP_LOST_ANSWER = M(
    "Floating IP {address} was allocated by a try that failed: using it",
    "printed: an allocation's answer was lost, or a cut run's allocation is taken up")
NO_PORT_FOR_IP = M(
    "server {server} has no network port to bind floating IP {address} to: check the project's floating IP "
    "quota in the GUI (Network → Floating IPs): release ones you no longer use, or name a free one with "
    "floating_ip / CHI_FLOATING_IP, and run this step again (the lease and server are reused)",
    "a server without a port")
NO_IP_ATTACHED = M(
    "no floating IP was attached to server {server}: check the project's floating IP quota in the GUI "
    "(Network → Floating IPs): release ones you no longer use, or name a free one with floating_ip / "
    "CHI_FLOATING_IP, and run this step again (the lease and server are reused)", "Neutron bound nothing")
IP_RECORD_BOUND_ELSEWHERE = M(
    "floating IP {address} is recorded without its id and is bound to port {port} now: Neutron hands a "
    "released address out again, so it may be another server's; not released (release it in the GUI, "
    "Network → Floating IPs, if it is yours)", "printed by the teardown: a stale record's address is in use")
IP_RECORD_FOR_OTHER_SERVER = M(
    "floating IP {address} is recorded without its id and its Neutron description names server {other}: not "
    "released (it may be a classmate's)",
    "printed by the teardown: a stale record's address is a classmate's")
RELEASE_IP_NEEDS_ADDRESS = M(
    "release-ip needs --floating-ip ADDRESS (08 lists the unbound ones)", "release-ip without an address")
RELEASE_IP_BOUND = M(
    "floating IP {address} is bound to a server (port {port}): delete that server's run first (its teardown "
    "releases the IP it allocated)", "release-ip of a bound IP")
RELEASE_IP_HELD = M(
    "floating IP {address} is held by reservation {reservation} (a lease's floating IP reservation): "
    "releasing it takes it from that lease", "(release-ip's reason)")
RELEASE_IP_NOT_YOURS = M(
    "floating IP {address} was not allocated by this lab for server {server} ({whose}): it may be a "
    "classmate's between two steps or one an instructor keeps", "(release-ip's reason)")
RELEASE_IP_REFUSED = M(
    "{why}: not released; add --force (force=True) to release it anyway",
    "release-ip of an IP that is not this server's")
UNBOUND_NOT_LISTED = M(
    "Could not list project {project}'s floating IPs ({error})",
    "printed by 08: Neutron did not answer the listing")

# ----------------------------------------------------------------------------------- the node and its work
NO_JUPYTER_LINE = M(
    "`./lab jupyter` finished without printing its 'jupyter: <url>' line: run `{command}` in the code "
    "directory on the node (ssh cc@{address}) to see why", "./lab jupyter failed on the node")
MANIFEST_LEAVES_FOLDER = M(
    "{manifest} lists {line!r}, which is outside the lab's folder: restore the file from the lab's "
    "repository", "a tampered lab-files.txt")
NOT_A_CLONE_NOR_A_COPY = M(
    "{root} is neither a git clone of the lab nor a copy with its file list ({manifest}), so what belongs "
    "to the lab is not known and nothing is uploaded: clone the lab, or use code_source='git' with repo_url "
    "/ SERVELAB_REPO_URL", "02 in a folder without either")
LOCAL_SETTINGS_STAY = M(
    "{settings} is not sent to the node: it is not one of the lab's files (git ls-files, or {manifest} "
    "without git), so it is this machine's, and its settings would change the node's measurements; if it "
    "holds the class's image registry, commit it and run `git ls-files > {manifest}`",
    "printed by 02: an untracked docker/.env")
UPLOAD_FAILED = M("uploading {name} to the node failed{tries} ({error})", "SSH refused the upload to the end")
UPLOAD_RETRY = M(
    "[upload] {name}: attempt {attempt} of {attempts} failed ({error}); trying again in {every} s (the node "
    "may still be setting up SSH)", "printed: the node's SSH not ready yet")
NODE_COMMAND_HUNG = M(
    "`{command}` did not finish on the node within {limit} s: log in (ssh {user}@<floating IP>) to see what "
    "it waits for, then run launch again", "a node command past its timeout")
NODE_COMMAND_FAILED = M(
    "`{command}` failed on the node with exit code {code}: its output above says why; fix that and run "
    "launch again (the lease and the server are reused)", "a node command failed")
NODE_COMMAND_UNREACHABLE = M(
    "running `{command}` on the node failed ({error})", "SSH failed during a command")
FETCH_FAILED = M(
    "copying {what} from the node failed ({error}): nothing was deleted; run it again (the node keeps them "
    "until its teardown), or copy them in the node's Jupyter (File → Download); when the node cannot be "
    "reached (server in ERROR, SSH refused), {skip} tears down without them",
    "08's fetch of the student's work failed")
NO_SERVER_TO_CONNECT = M(
    "no server named {server}: run the server set-up step (provisioning.launch) first",
    "connect() before launch")
NO_IP_TO_CONNECT = M(
    "server {server} has no floating IP: run provisioning.launch again", "a server without IP")
PLAN_MODE_WITH_LIVE_NODE = M(
    "plan mode copies and deletes nothing, but {path} records live {named}: they hold their reservation (a "
    "started lease its node, charged to the project) until the lease ends; set target = \"chameleon\" in "
    "the parameters cell and run this notebook again", "08 on the hub with target unset")
IN_THE_NODES_JUPYTER = M(
    "this is the node's Jupyter (target docker, from $SERVELAB_TARGET): the teardown runs in Chameleon's "
    "Jupyter (the hub), where notebooks 01 and 02 ran and recorded the lease and the server: open "
    "notebooks/08_teardown.ipynb there, set target = \"chameleon\" and run it; nothing was copied, stopped "
    "or deleted here (on a Docker host of your own, set target = \"docker\" to stop its stacks)",
    "08 run in the node's Jupyter")

# ------------------------------------------------------------------------------------------- the teardown
TEARDOWN_STEP_FAILED = M(
    "{what} failed ({error}{hint}){delete}", "printed by the teardown: one resource failed")
TEARDOWN_DELETE_LINE = M(
    "; it is not deleted: run the teardown again, or, from the lab's folder: {command}",
    "(the end of the line above when a command deletes it)")
TEARDOWN_STATUS_UNREAD = M(
    "Teardown: reading lease {name}'s status failed ({error}; tried {attempts} times): going on as if it "
    "were live", "printed: Blazar busy at the end of class")
TEARDOWN_INCOMPLETE = M(
    "teardown incomplete: {errors}: run teardown again, or delete what is left by hand (GUI: Compute → "
    "Instances, Network → Floating IPs, Reservations → Leases)", "something could not be deleted")
SIGNAL_DURING = M("{signal} received during {during}: finishing it first", "printed: a second stop signal")


def catalog() -> list[tuple[str, Message]]:
    """Every message of this module, by name, in the order above."""
    return [(name, value) for name, value in globals().items() if isinstance(value, Message)]
