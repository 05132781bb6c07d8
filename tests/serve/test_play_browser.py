"""The play page in a real browser (Playwright driving Debian's Chromium) against the real
server on a socket: the canvas updates, movement keys change the view, a typed prompt changes
the look, and a G-buffer view opens beside the frame."""

import shutil

import pytest

from servers import running
from test_play_web import SIZE, factory  # noqa: F401  (the module fixture)

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if shutil.os.path.exists("/usr/bin/chromium") else None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (make test installs it as root)")


@pytest.fixture(scope="module")
def server(factory):  # noqa: F811
    from alaya.engine.interactive import InteractiveConfig, InteractiveStream
    from alaya.serve.web import WebConfig, create_app
    app = create_app(factory, lambda: InteractiveStream(seed=0, config=InteractiveConfig(size=SIZE)),
                     WebConfig(fps=15.0, stats_every=2))
    with running(app) as port:
        yield f"http://127.0.0.1:{port}/"


def canvas_pixels(page) -> list[int]:
    return page.evaluate("""() => { const c = document.getElementById('screen');
        return Array.from(c.getContext('2d').getImageData(0, 0, c.width, c.height).data); }""")


def wait_frames(page, more: int, timeout_s: float = 30.0) -> None:
    start = page.evaluate("window.alaya.frames")
    page.wait_for_function(f"window.alaya.frames >= {start + more}", timeout=timeout_s * 1000)


def differs(a, b) -> float:
    return sum(abs(x - y) for x, y in zip(a, b)) / max(len(a), 1)


def test_play_page_in_chromium(server):
    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        try:
            page = browser.new_page()
            page.goto(server)
            wait_frames(page, 3)
            first = canvas_pixels(page)
            wait_frames(page, 2)
            assert page.evaluate("window.alaya.connected") is True
            # movement keys change the view
            page.locator("#screen").click()
            still = canvas_pixels(page)
            page.keyboard.down("w")
            wait_frames(page, 8)
            page.keyboard.up("w")
            page.keyboard.press("ArrowLeft")
            wait_frames(page, 4)
            moved = canvas_pixels(page)
            assert differs(moved, still) > 1.0
            # a typed prompt changes the look
            before_prompt = canvas_pixels(page)
            page.fill("#prompt", "a moonlit night with a full moon")
            page.press("#prompt", "Enter")
            page.wait_for_function("(window.alaya.stats.prompt || '').includes('moonlit')", timeout=30000)
            wait_frames(page, 3)
            assert page.evaluate("window.alaya.lastError") == ""
            assert differs(canvas_pixels(page), before_prompt) > 1.0
            # a G-buffer channel beside the frame
            page.select_option("#channel", "normal")
            page.wait_for_function("document.getElementById('screen').width === 2 * document.getElementById("
                                   "'screen').height", timeout=30000)
            assert len(first) == 4 * 32 * 32
        finally:
            browser.close()


def launch(pw):
    return pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=[
        "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"])


def test_page_at_1280x720_side_by_side(server, tmp_path):
    """At 1280x720 with a G-buffer view beside the frame, every control is in the window; a
    crosshair marks the generated frame's centre (what F pushes); the frame is scaled smoothly.
    The screenshot goes to $ALAYA_SCREENSHOTS (else the test's folder)."""
    import os

    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            page.goto(server)
            wait_frames(page, 2)
            page.select_option("#channel", "depth")
            page.wait_for_function("document.getElementById('screen').width === 2 * document.getElementById("
                                   "'screen').height", timeout=30000)
            wait_frames(page, 2)
            shot = os.environ.get("ALAYA_SCREENSHOTS") or str(tmp_path)
            page.screenshot(path=f"{shot}/play_1280x720_side_by_side.png")
            for selector in ("#prompt", "#channel", "#reset", "#styles button >> nth=-1", "#actions button >> nth=-1",
                             "#promptForm button", "#error"):
                box = page.locator(selector).bounding_box()
                assert box is not None, selector
                assert box["x"] >= 0 and box["y"] >= 0 and box["x"] + box["width"] <= 1280 \
                    and box["y"] + box["height"] <= 720, (selector, box)
            canvas = page.locator("#screen").bounding_box()
            assert canvas["x"] + canvas["width"] <= 1280 and canvas["y"] + canvas["height"] <= 720
            assert abs(canvas["width"] - 2 * canvas["height"]) < 2
            cross = page.locator("#crosshair").bounding_box()
            assert cross is not None and page.locator("#crosshair").is_visible()
            centre = (cross["x"] + cross["width"] / 2, cross["y"] + cross["height"] / 2)
            assert abs(centre[0] - (canvas["x"] + canvas["width"] / 4)) < 2     # the generated half's centre
            assert abs(centre[1] - (canvas["y"] + canvas["height"] / 2)) < 2
            rendering = page.evaluate("getComputedStyle(document.getElementById('screen')).imageRendering")
            assert rendering not in ("pixelated", "crisp-edges"), rendering
            page.select_option("#channel", "none")                              # back to one frame
            page.wait_for_function("document.getElementById('screen').width === document.getElementById("
                                   "'screen').height", timeout=30000)
            canvas, cross = page.locator("#screen").bounding_box(), page.locator("#crosshair").bounding_box()
            assert abs(cross["x"] + cross["width"] / 2 - (canvas["x"] + canvas["width"] / 2)) < 2
        finally:
            browser.close()


def test_the_page_says_why_the_server_refused_it(factory):  # noqa: F811
    """A page without the token: the server's reason, not "disconnected: 1006"."""
    from playwright.sync_api import sync_playwright

    from alaya.engine.interactive import InteractiveConfig, InteractiveStream
    from alaya.serve.web import WebConfig, create_app
    app = create_app(factory, lambda: InteractiveStream(seed=0, config=InteractiveConfig(size=SIZE)),
                     WebConfig(fps=15.0, token="s3cret"))
    with running(app) as port, sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{port}/")
            page.wait_for_function("window.alaya.closed !== null", timeout=30000)
            assert page.evaluate("window.alaya.closed") == "a valid token is required"
            assert "?token=" in page.locator("#error").inner_text()
            assert "a valid token is required" in page.locator("#overlay").inner_text()
        finally:
            browser.close()
