# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 8. Tear down
#
# On Chameleon, copy your work from the node first; then stop every stack this lab started and delete
# the server and the lease. (The original lab leaves that to the lease's end; giving the node back
# early frees it for someone else.) On `local` and `docker` the Chameleon part runs in plan mode.
#
# Only what the lab **created** is deleted: notebooks 01 and 02 recorded it in
# `results/chameleon-state.json`, with the project they charged (this notebook uses the same one).
# A lease that notebook 01 reserved ahead (`lease_start`) is the lab's own: it goes once it has
# started, and is kept only while it still waits for its start. What they found and reused
# (adopted), such as a lease you reserved ahead in the GUI or the slot your instructor reserved
# for you, is kept; set `delete_adopted = True` to delete it too (do, when the slot was for this
# lab alone). Whatever stays is printed with until when it holds its node and the one command
# that deletes it.
#
# A stop during the set-up (notebook 01's or 02's interrupt button, or a `kill` of the instructor's run)
# acts at once: the SSH session of the command on the node is closed, and the lease, the server and its
# floating IP stay, recorded in the state file (even one Chameleon was still making at that instant),
# until this notebook deletes them (or 01 and 02, run again, go on with them).
#
# This notebook runs in Chameleon's Jupyter (the hub), never in the node's: there it stops in one line
# after its parameters. With `target` left unset (or `local`, `docker`) it only shows what it would do.
# While the state file records a live lease or server, it refuses that in one line at its first
# Chameleon cell, naming them: set `target = "chameleon"` and run it again, or they keep their node
# until the lease ends.

# %% [markdown]
# ## The lab's code in this kernel
# As in notebook 01: the lab's code on the import path and, in Chameleon's Jupyter, the python-chi
# version the lab is tested with (a second run only checks). There, set `target = "chameleon"`.

# %%
import sys
from pathlib import Path

if (Path.cwd().parent / "servelab").is_dir():  # the kernel starts in notebooks/: the lab is one folder up
    sys.path.insert(0, str(Path.cwd().parent))
try:
    from servelab.lab import bootstrap
except ModuleNotFoundError:
    raise ModuleNotFoundError(f"the lab's code is neither installed here nor around {Path.cwd()}: "
                              "open this notebook in notebooks/ of a copy (git clone) of the lab") from None
bootstrap.ensure()

# %% tags=["parameters"]
target = None  # local | docker | chameleon; None: $SERVELAB_TARGET (docker in the node's Jupyter) or local
preset = "quick"
project = None  # None: $CHI_PROJECT, else the project notebooks 01 and 02 used (the state file)
site = None
lease_name = None  # as in notebook 01; None: serve_system_<your user name>
lease_id = None  # the lease used in notebooks 01 and 02; None: $CHI_LEASE_ID, else found by lease_name
delete_adopted = False  # True: also delete what the lab adopted (a lease reserved ahead in the GUI)
fetch_first = True  # False: tear down without copying the node's work (the node cannot be reached)

# %%
import provisioning
from servelab.lab import common, params

P = params.resolve(target, preset, project=project, site=site, lease_name=lease_name, lease_id=lease_id,
                   delete_adopted=delete_adopted, fetch_first=fetch_first)
P

# %% [markdown]
# ## Where this notebook runs
# The teardown runs in Chameleon's Jupyter (the hub), where notebooks 01 and 02 ran and recorded what they
# made. The node's Jupyter has no such record, and `target` left unset there means `docker`: this notebook
# would stop the node's stacks, delete nothing and pass, while the node stays reserved. There, the next
# cell stops it in one line that says where to run it instead.

# %%
provisioning.not_in_the_nodes_jupyter(P.target, P.target_from)

# %% [markdown]
# ## Your work from the node, first
# The node's notebooks ran on the node: their measurements are in `results/` there, and the
# notebooks you saved are in `notebooks/` there. Deleting the server deletes both, so this cell copies
# them here first, into `results/from-node/` (`results/`, and everything saved under `notebooks/` at any
# depth, as on the node; never Jupyter's checkpoints), in at most five minutes, and says what it copied.
# If it fails, nothing has been deleted: run it again, or download them from the node's Jupyter (File →
# Download), before you go on.
#
# When the node cannot be reached at all (its server in ERROR, SSH refused, its floating IP released),
# no copy can succeed, and the failure stops this notebook before the teardown. Set `fetch_first = False`
# in the parameters cell and run it again: it then says that nothing is copied and goes on to delete
# the server and the lease, and what was on the node goes with them.

# %%
config = provisioning.configure(project=P.project, site=P.site, lease_name=P.lease_name, lease_id=P.lease_id)
fetched = provisioning.fetch_work(config, plan_only=P.plan, skip=not P.fetch_first)

# %% [markdown]
# ## Your hand-in
# One file for your instructor, from the work just copied: your executed notebooks, your answers, your
# predictions and checks (the run's exercise records) and the run's report, with your user name. The
# line below says where it is: download it (File → Download) and hand it in.

# %%
from servelab.lab import handin

submission = handin.hand_in(fetched)

# %% [markdown]
# ## Stop, then delete

# %%
common.stop_stacks(P)

# %%
provisioning.teardown(config, plan_only=P.plan, delete_adopted=P.delete_adopted)

# %% [markdown]
# A floating IP stays allocated to the project until someone releases it, bound or not, and the project
# has a quota of them. The teardown above released the one this lab allocated for you; a run stopped before
# its teardown leaves its own behind. The next cell lists the IPs this lab allocated for your server that
# are bound to no server, with the line that releases one. The project's other unbound IPs are only
# counted: a classmate's (between two of their steps), your instructor's, or one a reservation holds are
# not yours to release, and `release-ip` refuses them.

# %%
provisioning.unbound_ips(config, plan_only=P.plan)

# %% [markdown]
# ## What this run measured
# Every measurement was stored as data (on Chameleon, the node's, copied above): the table lists each
# experiment's rows and the notebooks that wrote them. Run this notebook last, after the optional ones (the
# headless run does), and it lists them all; the headless run then draws one report (`report.html`)
# from the same files.

# %%
common.results_overview(fetched.results if fetched is not None else None)
