"""GourmetGram's container image, checked without Docker (CI has no engine).

The image must hold the same code the local target runs, install from the
shared pins, carry no torch, and serve only local assets.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from servelab.core.paths import REPO_ROOT
from servelab.targets.services import FLASK_APP, FLASK_CONFIG

APP_DIR = REPO_ROOT / "flask_app"
DOCKERFILE = APP_DIR / "Dockerfile"
VENV_BIN = Path(sys.executable).parent


def requirement_names(path: Path) -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in path.read_text().splitlines())
    return [re.split(r"[\[<>=~!; ]", line, maxsplit=1)[0].lower() for line in lines if line]


def constraint_pins() -> dict[str, str]:
    pins = {}
    for line in (REPO_ROOT / "constraints.txt").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==", 1)
            pins[name.strip().lower()] = version.strip()
    return pins


def test_dockerfile_is_hadolint_clean() -> None:
    result = subprocess.run([str(VENV_BIN / "hadolint"), str(DOCKERFILE)], capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


def test_dockerfile_copies_existing_paths_allowed_by_its_dockerignore() -> None:
    sources = []
    for line in DOCKERFILE.read_text().splitlines():
        if line.startswith("COPY "):
            sources += line.split()[1:-1]
    assert sources, "the Dockerfile copies nothing"
    allowed = {line[1:].strip("/") for line in (APP_DIR / "Dockerfile.dockerignore").read_text().splitlines()
               if line.startswith("!")}
    for source in sources:
        assert (REPO_ROOT / source).exists(), f"COPY {source}: no such path in the repository"
        assert source.split("/")[0].strip("/") in allowed, f"COPY {source} is excluded by the dockerignore"


def test_dockerfile_serves_the_app_the_lab_runs() -> None:
    text = DOCKERFILE.read_text()
    assert "gunicorn" in text and f'"{FLASK_APP}"' in text
    assert f'"-c", "{FLASK_CONFIG}"' in text, "settings and the port checked before any worker starts"
    assert "-c constraints.txt" in text


def test_requirements_are_pinned_and_torch_free() -> None:
    names = requirement_names(APP_DIR / "requirements.txt")
    pins = constraint_pins()
    assert not {"torch", "torchvision"} & set(names)
    assert {"flask", "gunicorn", "tritonclient"} <= set(names)
    missing = [name for name in names if name not in pins]
    assert not missing, f"not pinned in constraints.txt: {missing}"


def test_app_runs_every_backend_path_without_torch(tmp_path: Path) -> None:
    """Import the app with torch made unimportable and preprocess like the ONNX path does."""
    code = f"""
import sys
sys.modules["torch"] = None
sys.modules["torchvision"] = None
from flask_app.app import TEST_IMAGE, create_app
from flask_app.backends import TITLES, make_backend
from flask_app.settings import Settings
from servelab.core.preprocess import preprocess_bytes
for backend in ("fastapi", "triton", "triton_onnx"):
    settings = Settings(backend=backend, instance_path={str(tmp_path)!r})
    page = create_app(settings).test_client().get("/")
    assert page.status_code == 200, (backend, page.status_code, page.get_data(as_text=True)[-500:])
    assert TITLES[backend] in page.get_data(as_text=True), backend
    make_backend(settings)
assert preprocess_bytes(TEST_IMAGE.read_bytes()).shape == (3, 224, 224)
print("ok")
"""
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]


def test_page_assets_are_all_local() -> None:
    for path in [*(APP_DIR / "templates").iterdir(), *(APP_DIR / "static").glob("*.[cj]s*")]:
        text = path.read_text()
        assert not re.search(r"https?://|//cdn|@import", text), f"{path.name} refers to an outside resource"


def test_setup_provides_chromium_and_playwright_from_debian_and_pypi() -> None:
    """The browser test's Chromium is Debian's package and its driver the PyPI wheel; nothing else."""
    setup = (REPO_ROOT / "scripts" / "setup.sh").read_text()
    packages = re.search(r"DEBIAN_PACKAGES=\(([^)]*)\)", setup)
    assert packages and "chromium" in packages.group(1).split()
    assert "playwright" in requirement_names(REPO_ROOT / "requirements" / "lab.txt")
    assert "playwright" in constraint_pins()
    assert "playwright install" not in setup, "browsers must come from Debian, not Playwright's CDN"
