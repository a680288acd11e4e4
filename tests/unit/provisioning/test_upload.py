"""What 02 uploads to the node: the lab's own files only, packed reproducibly.

* In a git clone, the files git tracks; without git (a Trovi import lands at the top of the hub's
  work folder, beside ``.ssh`` and the rest of the hub), the files the lab's manifest lists. A stand-in
  hub folder holding a private key, a shell history and another project proves none of them leaves.
* The manifest is ``git ls-files`` written out: a test fails when the two drift.
* Two packs of the same folder are the same bytes, so the node's "already holds this upload" check
  matches; the node's unpack keeping newer files is tested with node_setup.sh (test_node_setup.py).
"""

from __future__ import annotations

import hashlib
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

import provisioning
from provisioning import ProvisioningError, from_env
from provisioning.node import MANIFEST, NODE_SETUP_SCRIPT, checkout_files, checkout_tarball
from servelab.core.paths import REPO_ROOT

LEASE = "serve_system_alice"
SERVER = "node-serve-system-alice"
LAB_FILES = {"lab": "#!/usr/bin/env bash\necho lab\n", "provisioning/node_setup.sh": "main\n",
             "servelab/x.py": "x = 1\n", "notebooks/03_fastapi.ipynb": "{}\n", ".gitignore": "artifacts/\n"}
BUILT = {"artifacts/food11.onnx": "onnx"}  # gitignored, built here: sent as well
# what else a hub's work folder holds: none of it is the lab's
HUB_PRIVATE = {".ssh/id_rsa": "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n", ".ssh/config": "Host *\n",
               ".bash_history": "export OS_APPLICATION_CREDENTIAL_SECRET=s3cret\n",
               "my-thesis/data.csv": "private\n", "my-thesis/notes.md": "private\n",
               "servelab/secret.py": "token = 'mine'\n",  # inside the lab's folders, but not the lab's
               ".local/share/jupyter/runtime/kernel.json": "{\"key\": \"k\"}\n"}
SENT = sorted([*LAB_FILES, *BUILT])


def write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def trovi_hub(tmp_path: Path) -> Path:
    """The hub's work folder after a Trovi import: the lab unpacked at its top (no .git, the lab's
    script no longer executable), the lab's manifest with it, and the hub's own files around."""
    root = tmp_path / "work"
    write(root, {**LAB_FILES, **BUILT, **HUB_PRIVATE})
    (root / "lab").chmod(0o644)
    write(root, {MANIFEST: "".join(f"{rel}\n" for rel in sorted([*LAB_FILES, MANIFEST]))})
    return root


def sent_from(root: Path, fake_chi, tmp_path: Path) -> list[str]:
    """Run 02's launch (upload mode) against the stand-in; the names in the tarball it uploaded."""
    fake_chi.lease.add_existing(LEASE, "ACTIVE")
    fake_chi.server.add_existing(SERVER, "ACTIVE", fip=True)
    cfg = from_env(env={}, project="CHI-231095")  # upload: the default
    provisioning.launch(cfg, chi=fake_chi.api, workdir=tmp_path / "upload", root=root)
    uploads = [args for name, args, _ in fake_chi.rec.calls if name == "Server.upload"]
    assert uploads == [(str(NODE_SETUP_SCRIPT), "node_setup.sh"),
                       (str(tmp_path / "upload" / "serve-system-lab.tar.gz"), "serve-system-lab.tar.gz")]
    with tarfile.open(tmp_path / "upload" / "serve-system-lab.tar.gz") as tar:
        assert tar.getmember("lab").mode & 0o111 == 0o111  # executable again on the node
        return sorted(tar.getnames())


def test_a_trovi_import_at_the_top_of_the_hub_sends_the_labs_files_only(fake_chi, student,
                                                                        tmp_path: Path) -> None:
    root = trovi_hub(tmp_path)
    assert [p.as_posix() for p in checkout_files(root)] == sorted([*SENT, MANIFEST])
    names = sent_from(root, fake_chi, tmp_path)
    assert names == sorted([*SENT, MANIFEST])
    leaked = [name for name in names
              if name in HUB_PRIVATE or name.startswith((".ssh", ".bash", ".local", "my-thesis"))]
    assert leaked == []


def test_a_copy_without_git_or_manifest_is_refused_before_anything_is_created(fake_chi, student,
                                                                              tmp_path: Path) -> None:
    root = trovi_hub(tmp_path)
    (root / MANIFEST).unlink()
    cfg = from_env(env={}, project="CHI-231095")
    with pytest.raises(ProvisioningError) as caught:
        provisioning.launch(cfg, chi=fake_chi.api, root=root)
    assert str(caught.value) == (
        f"{root} is neither a git clone of the lab nor a copy with its file list ({MANIFEST}), so what "
        "belongs to the lab is not known and nothing is uploaded: clone the lab, or use code_source='git' "
        "with repo_url / SERVELAB_REPO_URL")
    assert fake_chi.rec.calls == []  # a local check: before any python-chi call


def test_a_manifest_line_leaving_the_folder_is_refused(tmp_path: Path) -> None:
    root = trovi_hub(tmp_path)
    (root / MANIFEST).write_text("lab\n../.ssh/id_rsa\n")
    with pytest.raises(ProvisioningError, match=r"lists '\.\./\.ssh/id_rsa', which is outside the lab's"):
        checkout_files(root)


def test_a_symlink_in_the_labs_place_is_not_followed(tmp_path: Path) -> None:
    """A listed file replaced by a link (to the hub's key, say) is not sent."""
    root = trovi_hub(tmp_path)
    (root / "servelab" / "x.py").unlink()
    (root / "servelab" / "x.py").symlink_to(root / ".ssh" / "id_rsa")
    assert "servelab/x.py" not in [p.as_posix() for p in checkout_files(root)]


def test_a_clone_sends_what_git_tracks_not_what_lies_around(fake_chi, student, tmp_path: Path) -> None:
    """A clone: the tracked files (changed ones with their current content) and the built artefacts; an
    untracked file (a key copied in, a note) stays, even one that git does not ignore."""
    root = tmp_path / "clone"
    write(root, {**LAB_FILES, **BUILT, ".ssh/id_rsa": "secret\n", "servelab/new_idea.py": "y = 2\n"})
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", *LAB_FILES], cwd=root, check=True)
    (root / "servelab" / "x.py").write_text("x = 2  # changed, not committed\n")
    assert [p.as_posix() for p in checkout_files(root)] == SENT
    names = sent_from(root, fake_chi, tmp_path)
    assert names == SENT


def test_the_manifest_is_git_ls_files() -> None:
    """provisioning/lab-files.txt ships with the lab for copies without git; it must list exactly what
    git tracks. When this fails, write it again from the lab's folder:
    git ls-files > provisioning/lab-files.txt"""
    listed = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("not a git clone: the manifest is what this copy has")
    tracked = listed.stdout.splitlines()
    manifest = (REPO_ROOT / MANIFEST).read_text().splitlines()
    only_manifest, only_git = sorted(set(manifest) - set(tracked)), sorted(set(tracked) - set(manifest))
    assert manifest == tracked, (
        f"{MANIFEST} differs from `git ls-files` (only in the manifest: {only_manifest}; only in git: "
        f"{only_git}): run `git ls-files > {MANIFEST}` and commit it")


def test_two_packs_of_the_same_folder_are_the_same_bytes(tmp_path: Path) -> None:
    """gzip writes the time it packs into its header unless told not to: then the node's check
    "already holds this upload" (a sha256 of the tarball) never matched, and every re-run of 02 unpacked
    again. The pack is reproducible now; a change to a file changes it."""
    root = trovi_hub(tmp_path)

    def digest(name: str) -> str:
        return hashlib.sha256(checkout_tarball(tmp_path / name, root).read_bytes()).hexdigest()

    first = digest("a.tar.gz")
    time.sleep(1.1)  # gzip's header holds whole seconds
    assert digest("b.tar.gz") == first
    (root / "servelab" / "x.py").write_text("x = 3\n")
    assert digest("c.tar.gz") != first


def test_only_the_labs_files_go_not_this_machines_compose_settings(fake_chi, student, tmp_path: Path,
                                                                   capsys) -> None:
    """Issue 53, finding 12: ``docker/.env`` went with every upload, listed or not (issue 42's rule, for a
    class registry committed after the file list was written); an untracked one of the hub's or a laptop's
    (MAX_BATCH, FLASK_PORT, SERVELAB_LLM, ...) then changed the node's measurements. Only the lab's own
    files go, and the built artefacts; a ``docker/.env`` that is not one of them stays, said in one line."""
    root = trovi_hub(tmp_path)
    write(root, {"docker/.env": "MAX_BATCH=4\nFLASK_PORT=5001\n"})
    assert "docker/.env" not in (root / MANIFEST).read_text()
    sent = sent_from(root, fake_chi, tmp_path)
    assert "docker/.env" not in sent and sent == sorted([*SENT, MANIFEST])
    assert ("docker/.env is not sent to the node: it is not one of the lab's files (git ls-files, or "
            "provisioning/lab-files.txt without git), so it is this machine's, and its settings would change "
            "the node's measurements; if it holds the class's image registry, commit it and run "
            "`git ls-files > provisioning/lab-files.txt`") in capsys.readouterr().out


def test_the_class_registry_goes_once_the_lab_lists_it(fake_chi, student, tmp_path: Path, capsys) -> None:
    """The instructor's registry step commits ``docker/.env`` and writes the list again: then it goes."""
    root = trovi_hub(tmp_path)
    write(root, {"docker/.env": "SERVELAB_IMAGE_REGISTRY=registry.example.org/course\n"})
    write(root, {MANIFEST: (root / MANIFEST).read_text() + "docker/.env\n"})
    assert "docker/.env" in sent_from(root, fake_chi, tmp_path)
    assert "is not sent to the node" not in capsys.readouterr().out


def test_an_untracked_compose_settings_file_of_a_clone_stays(tmp_path: Path) -> None:
    """In a git clone, what git tracks goes: an untracked ``docker/.env`` (gitignored or not) stays."""
    from provisioning.node import local_settings_note

    root = tmp_path / "clone"
    write(root, {**LAB_FILES, "docker/.env": "MAX_BATCH=4\n"})
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", *LAB_FILES], check=True)
    assert Path("docker/.env") not in checkout_files(root)
    assert local_settings_note(root).startswith("docker/.env is not sent to the node")
    subprocess.run(["git", "-C", str(root), "add", "docker/.env"], check=True)
    assert Path("docker/.env") in checkout_files(root) and local_settings_note(root) == ""
