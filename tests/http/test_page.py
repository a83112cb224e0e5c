"""The page at `/`, in a real headless browser (Debian's chromium through chromedriver).

The page talks to a keyed façade in front of the default stack's core (the key typed into the
page, sent as a bearer token) and to the VLM stack's façade: a reply streams, a reasoning item
and a tool call show, an image reaches the VLM, and a refused key reads as a sentence. Each test
leaves a screenshot under the run's artifacts (`build/test-artifacts/page/`, or
$MLX_RESPONSES_TEST_ARTIFACTS). The browser tests skip without chromium, chromedriver or
selenium (tools/setup.sh installs them where it can); the checks of what the page is made of
run everywhere.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mlx_responses.http_facade.app import start_facade
from mlx_responses.http_facade.config import FacadeSettings

from tests.support.stack import Stack
from tests.support.tools import WEATHER

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "http_facade" / "page"
KEY = "sk-page"
ARTIFACTS = Path(os.environ.get("MLX_RESPONSES_TEST_ARTIFACTS", ROOT / "build" / "test-artifacts"))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
WAIT_S = 60
# The only paths the page asks for: the public API.
PUBLIC_API = {"/v1/models", "/v1/responses", "/metrics"}


# --- what the page is made of (no browser) ---------------------------------------------------
def test_the_page_calls_only_the_public_api_and_loads_nothing_from_elsewhere() -> None:
    script = (PAGE / "app.js").read_text()
    assert set(re.findall(r'call\("([^"]+)"', script)) == PUBLIC_API
    assert "fetch(" in script and script.count("fetch(") == 1  # every request goes via call()
    assert "innerHTML" not in script  # model output is shown as text
    html = (PAGE / "index.html").read_text()
    for url in re.findall(r'(?:src|href)="([^"]+)"', html):
        assert url.startswith(("/page/", "#")), url
    assert "<script>" not in html  # no inline script (the CSP forbids it)


@pytest.fixture(scope="module")
def keyed(stack: Stack) -> Iterator[str]:
    """A façade with an API key, and the core's metrics, in front of the default core."""
    assert stack.core is not None
    settings = FacadeSettings(host="127.0.0.1", port=0, api_keys=(KEY,))
    runner, port = stack.run(start_facade(stack.grpc_address, settings, stack.core.metrics.render))
    yield f"http://127.0.0.1:{port}"
    stack.run(runner.cleanup())


def test_the_page_is_open_and_the_api_behind_it_is_not(keyed: str) -> None:
    page = httpx.get(f"{keyed}/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    for path, kind in (("/page/app.js", "text/javascript"), ("/page/style.css", "text/css")):
        served = httpx.get(f"{keyed}{path}")
        assert served.status_code == 200 and served.headers["content-type"].startswith(kind)
    assert httpx.get(f"{keyed}/v1/models").status_code == 401
    assert httpx.get(f"{keyed}/page/other.js").status_code == 401  # nothing else is open


# --- in the browser --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip("chromium and chromedriver are not installed (tools/setup.sh installs them)")
    webdriver = pytest.importorskip("selenium.webdriver")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1200,900",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(CHROMEDRIVER))
    yield driver
    driver.quit()


class Page:
    """The page in the browser, with the few moves a person makes."""

    def __init__(self, driver: Any, base_url: str, name: str) -> None:
        from selenium.webdriver.common.by import By

        self.driver, self.by, self.name = driver, By, name
        driver.get(f"{base_url}/")
        driver.execute_script("localStorage.clear()")
        driver.get(f"{base_url}/")

    def record(self) -> None:
        """From now on, what the page asks the server, and how it is answered."""
        self.driver.execute_script(
            """
            window.sent = [];
            const original = window.fetch;
            window.fetch = async (url, init) => {
              const reply = await original(url, init);
              window.sent.push({url: String(url), body: init.body || null,
                auth: init.headers.Authorization || null,
                type: reply.headers.get("content-type")});
              return reply;
            };
            """
        )

    def sent(self) -> list[dict[str, Any]]:
        return list(self.driver.execute_script("return window.sent"))

    def find(self, css: str) -> Any:
        return self.driver.find_element(self.by.CSS_SELECTOR, css)

    def all(self, css: str) -> list[Any]:
        return list(self.driver.find_elements(self.by.CSS_SELECTOR, css))

    def until(self, done: Callable[[], Any], what: str) -> Any:
        from selenium.webdriver.support.ui import WebDriverWait

        try:
            return WebDriverWait(self.driver, WAIT_S).until(lambda _: done())
        except Exception:
            self.screenshot("failed")
            raise AssertionError(f"{what}; the page says: {self.find('body').text}") from None

    def key(self, key: str) -> None:
        from selenium.webdriver.common.keys import Keys

        field = self.find("#api-key")
        field.clear()
        field.send_keys(key, Keys.TAB)  # `change` fires as it loses focus

    def models(self) -> list[str]:
        return [o.get_attribute("value") for o in self.all("#model option")]

    def options(self, **values: str) -> None:
        self.find("#options summary").click()
        for name, value in values.items():
            field = self.find(f"#{name}")
            field.clear()
            field.send_keys(value)

    def say(self, text: str) -> None:
        from selenium.webdriver.common.keys import Keys

        prompt = self.find("#prompt")
        prompt.send_keys(text)
        prompt.send_keys(Keys.ENTER)  # Enter sends (the keyboard path)

    def usage(self) -> Any:
        return self.until(lambda: self.all("#log li.usage"), "no reply finished")

    def screenshot(self, label: str) -> None:
        ARTIFACTS.joinpath("page").mkdir(parents=True, exist_ok=True)
        self.driver.save_screenshot(str(ARTIFACTS / "page" / f"{self.name}-{label}.png"))


@pytest.fixture
def keyed_page(browser: Any, keyed: str, request: pytest.FixtureRequest) -> Page:
    page = Page(browser, keyed, request.node.name)
    page.key(KEY)
    page.until(page.models, "the models never listed")
    return page


def test_a_reply_streams_and_the_status_shows_the_server(keyed_page: Page, stack: Stack) -> None:
    page = keyed_page
    model = stack.settings.models[0].name
    assert page.models() == [model]
    page.record()
    page.say("Reply with: tokyo")
    page.usage()
    replies = page.all("#log li.assistant .text")
    assert [r.text for r in replies] == ["tokyo"]
    assert page.find("#error").is_displayed() is False
    # The reply came as server-sent events, asked for with the typed key.
    sent = page.sent()
    (create,) = [s for s in sent if s["url"] == "/v1/responses"]
    assert json.loads(create["body"])["stream"] is True
    assert create["type"].startswith("text/event-stream")
    assert {s["auth"] for s in sent} == {f"Bearer {KEY}"}
    assert {s["url"] for s in sent} <= PUBLIC_API
    shown = page.find("#status-list").text
    assert f"Models loaded\n{model}" in shown, shown
    page.until(lambda: "Prompt tokens from the cache" in page.find("#status-list").text, "status")
    assert "Requests waiting" in page.find("#status-list").text
    # A second turn replays the first (store: false) and reads it from the prompt cache.
    page.say("Reply with: paris")
    page.until(lambda: len(page.all("#log li.usage")) == 2, "the second reply never finished")
    assert [r.text for r in page.all("#log li.assistant .text")] == ["tokyo", "paris"]
    second = page.all("#log li.usage")[1].text
    cached = int(re.search(r"\((\d+) from the cache\)", second)[1])  # type: ignore[index]
    assert cached > 0, second
    page.screenshot("streamed")


def test_a_reasoning_item_shows(keyed_page: Page) -> None:
    page = keyed_page
    page.options()
    page.find("#thinking").click()
    page.say("Reply with: paris")
    page.usage()
    reasoning = page.all("#log li.reasoning")
    assert reasoning and reasoning[0].find_element(page.by.CSS_SELECTOR, "summary").text == (
        "Reasoning"
    )
    assert "paris" in reasoning[0].find_element(page.by.CSS_SELECTOR, "pre").text
    assert [r.text for r in page.all("#log li.assistant .text")] == ["paris"]
    page.screenshot("reasoning")


def test_a_tool_call_shows_and_its_result_goes_back(keyed_page: Page) -> None:
    page = keyed_page
    page.options(tools=json.dumps([WEATHER]))
    page.say("Use the get_weather tool with city set to paris.")
    page.usage()
    (call,) = page.all("#log li.tool-call")
    assert "Tool call: get_weather" in call.text
    arguments = call.find_element(page.by.CSS_SELECTOR, "pre.arguments").text
    assert json.loads(arguments) == {"city": "paris"}
    page.screenshot("tool-call")
    result = call.find_element(page.by.CSS_SELECTOR, ".tool-result input")
    result.send_keys("sunny")
    result.submit()
    page.until(lambda: len(page.all("#log li.usage")) == 2, "the result's reply never finished")
    assert page.all("#log li.assistant .text")[-1].text == "sunny"
    page.screenshot("tool-result")


def test_a_refused_key_reads_as_a_sentence(browser: Any, keyed: str) -> None:
    page = Page(browser, keyed, "refused-key")
    page.key("sk-wrong")
    error = page.until(
        lambda: page.find("#error").is_displayed() and page.find("#error"), "no error shown"
    )
    assert error.text.startswith("The server refused the API key (HTTP 401).")
    assert "Incorrect API key provided." in error.text
    page.screenshot("refused-key")
    page.key(KEY)
    page.until(page.models, "the right key never listed the models")
    assert not page.find("#error").is_displayed()


def test_an_image_reaches_a_vlm(browser: Any, vlm_stack: Stack, tmp_path: Path) -> None:
    from tests.http.test_vision import _image_tokens, _png_bytes

    picture = tmp_path / "blue.png"
    picture.write_bytes(_png_bytes(56, 56))
    page = Page(browser, vlm_stack.base_url, "image")
    page.until(page.models, "the models never listed")
    page.options(**{"max-tokens": "4"})
    page.find("#image").send_keys(str(picture))
    page.until(lambda: page.find("#attached").text == "Attached: blue.png", "no attachment")
    page.say("What is this?")
    note = page.usage().pop().text
    image = page.find("#log li.user img")
    assert image.get_attribute("alt") == "Image sent: blue.png"
    assert page.driver.execute_script("return arguments[0].naturalWidth", image) == 56
    prompt = int(re.match(r"(\d+) prompt tokens", note)[1])  # type: ignore[index]
    assert prompt > _image_tokens(56, 56), note  # the image's tokens were in the prompt
    assert not page.find("#error").is_displayed()
    page.screenshot("image")
