"""GourmetGram in a real headless Chromium: pick a photo, submit, read the answer.

Uses Debian's chromium (installed by the lab's set-up) driven by Playwright for
Python; nothing is downloaded (``playwright install`` is never run). The page
must work with no internet, so every request it makes must go to the app.
Text from a backend (a label, an error) must show as text: the page's script
inserts the server's HTML fragment, so markup in it would become elements.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import httpx
import pytest

from servelab.targets.services import Service, start_flask

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]
PAGE_TIMEOUT_MS = 60_000
VIEWPORTS = {"desktop": {"width": 1100, "height": 900}, "phone": {"width": 375, "height": 740}}


def is_local(url: str) -> bool:
    """Requests the page may make offline: to the app itself, or to in-page data/blob URLs."""
    return url.startswith(("data:", "blob:")) or urlparse(url).hostname == "127.0.0.1"


@pytest.fixture(scope="module")
def flask(fastapi_onnx: Service, log_dir: Path,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    instance = tmp_path_factory.mktemp("browser-instance")
    service = start_flask({"PREDICT_BACKEND": "fastapi", "FASTAPI_SERVER_URL": fastapi_onnx.url,
                           "REQUEST_TIMEOUT": "30", "INSTANCE_PATH": str(instance)}, log_dir=log_dir)
    yield service
    service.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    assert CHROMIUM.is_file(), f"{CHROMIUM} is missing: the lab's set-up installs Debian's chromium package"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.mark.slow
@pytest.mark.parametrize("viewport", list(VIEWPORTS))
def test_upload_and_see_label(browser, flask: Service, fastapi_onnx: Service, fastapi_direct,
                              samples: list[Path], artifact_dir: Path, viewport: str) -> None:
    photo = samples[2]
    expected_label, expected_prob = fastapi_direct(fastapi_onnx.url, photo)
    context = browser.new_context(viewport=VIEWPORTS[viewport])
    page = context.new_page()
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    foreign: list[str] = []
    page.on("request", lambda req: None if is_local(req.url) else foreign.append(req.url))
    try:
        page.goto(flask.url + "/")
        assert page.locator("#submit").is_disabled(), "Submit must wait until a photo is chosen"
        page.set_input_files("#file-input", str(photo))
        page.wait_for_selector("#preview:not([hidden])")
        page.click("#submit")
        page.wait_for_selector("#result .card.ok")

        assert page.inner_text("#label").strip() == expected_label
        assert page.inner_text("#probability").strip() == f"{expected_prob * 100:.1f}%"
        assert page.inner_text("#backend").strip() == "FastAPI"
        assert re.fullmatch(r"\d+ ms", page.inner_text("#elapsed").strip())
        assert page.url.rstrip("/") == flask.url, "the result must appear without leaving the page"
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= VIEWPORTS[viewport]["width"], f"page scrolls sideways at {viewport} width ({width}px)"
        assert foreign == [], f"the page fetched from outside the app: {foreign}"
    finally:
        page.screenshot(path=str(artifact_dir / f"flask_gourmetgram_{viewport}.png"), full_page=True)
        context.close()


@pytest.mark.slow
def test_not_an_image_shows_message(browser, flask: Service, tmp_path: Path, artifact_dir: Path) -> None:
    fake = tmp_path / "pasta.jpg"
    fake.write_text("not really a photo\n")
    page = browser.new_page(viewport=VIEWPORTS["phone"])
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    try:
        page.goto(flask.url + "/")
        page.set_input_files("#file-input", str(fake))
        page.click("#submit")
        page.wait_for_selector("#result .card.error")
        assert "not an image" in page.inner_text("#result")
    finally:
        page.screenshot(path=str(artifact_dir / "flask_gourmetgram_not_an_image.png"), full_page=True)
        page.close()


@pytest.mark.slow
def test_drop_a_photo(browser, flask: Service, samples: list[Path]) -> None:
    """Drag and drop: a drop event carrying a file previews it and submits like a picked one."""
    page = browser.new_page(viewport=VIEWPORTS["desktop"])
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    try:
        page.goto(flask.url + "/")
        page.evaluate("""async (b64) => {
            const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
            const transfer = new DataTransfer();
            transfer.items.add(new File([bytes], "dropped.jpg", {type: "image/jpeg"}));
            const zone = document.getElementById("dropzone");
            zone.dispatchEvent(new DragEvent("dragover", {dataTransfer: transfer, bubbles: true}));
            zone.dispatchEvent(new DragEvent("drop", {dataTransfer: transfer, bubbles: true}));
        }""", base64.b64encode(samples[0].read_bytes()).decode("ascii"))
        page.wait_for_selector("#preview:not([hidden])")
        page.click("#submit")
        page.wait_for_selector("#result .card.ok")
        assert page.inner_text("#label").strip()
    finally:
        page.close()


@pytest.mark.slow
def test_too_large_is_refused_before_and_by_the_server(browser, flask: Service) -> None:
    big = b"\xff\xd8\xff\xe0" + bytes(11 * 1024 * 1024)
    page = browser.new_page(viewport=VIEWPORTS["phone"])
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    try:
        page.goto(flask.url + "/")
        page.set_input_files("#file-input", files=[{"name": "huge.jpg", "mimeType": "image/jpeg",
                                                    "buffer": big}])
        page.wait_for_selector("#result .card.error")
        assert "too large" in page.inner_text("#result")
        assert page.locator("#submit").is_disabled()
    finally:
        page.close()
    # a script that ignores the page gets the same answer from gunicorn, with the body unread
    response = httpx.post(f"{flask.url}/predict", files={"file": ("huge.jpg", big, "image/jpeg")}, timeout=60)
    assert response.status_code == 413
    assert "too large" in response.text


@pytest.mark.slow
def test_markup_from_the_backend_shows_as_text(browser, fake_fastapi, markup: dict[str, str],
                                               samples: list[Path], log_dir: Path, tmp_path: Path,
                                               artifact_dir: Path) -> None:
    """A label and an error text holding tags and a script: the page shows them literally and runs nothing."""
    flask = start_flask({"PREDICT_BACKEND": "fastapi", "FASTAPI_SERVER_URL": fake_fastapi.url,
                         "REQUEST_TIMEOUT": "10", "INSTANCE_PATH": str(tmp_path / "instance")},
                        log_dir=log_dir)
    page = browser.new_page(viewport=VIEWPORTS["desktop"])
    page.set_default_timeout(PAGE_TIMEOUT_MS)
    try:
        page.goto(flask.url + "/")
        page.set_input_files("#file-input", str(samples[0]))
        page.click("#submit")
        page.wait_for_selector("#result .card.ok")
        assert page.inner_text("#label").strip() == markup["label"]

        fake_fastapi.status, fake_fastapi.body = 500, {"detail": markup["error"]}
        page.click("#submit")
        page.wait_for_selector("#result .card.error")
        assert markup["error"] in page.inner_text("#error")

        created = page.evaluate("""() => Array.from(document.querySelectorAll(
            "#result img, #result b, #result script")).map((e) => e.outerHTML)""")
        assert created == [], f"markup from the backend became elements on the page: {created}"
        assert page.evaluate("window.__gourmetgram_injected") is None, "the backend's markup ran script"
    finally:
        page.screenshot(path=str(artifact_dir / "flask_gourmetgram_markup_as_text.png"), full_page=True)
        page.close()
        flask.stop()
