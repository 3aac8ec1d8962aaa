"""The console in a real browser: Debian's chromium-headless-shell driven by Playwright,
against a real `embornal serve` (with the offline model, so all three search modes
answer).

Each page is opened as a person would: typing, clicking, pressing keys. The XSS
payloads would set `window.pwned`; it must stay unset, and the page must log no
console error (a script blocked by the CSP would log one). Screenshots of the main
pages (1280x800) go to a temporary directory, or to docs/ with
EMBORNAL_UI_SCREENSHOTS=docs (how the pictures of README.md and docs/console.md are made).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.ops.live import ROOT, LiveServer, run_cli

pytestmark = pytest.mark.slow  # starts a server and a browser

CHROMIUM = "/usr/bin/chromium-headless-shell"
VIEWPORT = {"width": 1280, "height": 800}
SECRET_WORD = "quillfeather"

PAYLOADS = {
    "script": "<script>window.pwned = 'script'</script> a plain note",
    "img": "<img src=x onerror=\"window.pwned = 'img'\"> an image that is not one",
    "javascript": "[[javascript:window.pwned='link']] and <a href=\"javascript:window.pwned="
    "'a'\">click me</a>",
    "link": "[[/x\" onmouseover=\"window.pwned='hover']] hover over this [[/home/kitchen]]",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium-headless-shell")
    live = LiveServer(tmp_path_factory.mktemp("console") / "home", model="minilm-l6").start()
    try:
        seed(live)
        yield live
    finally:
        live.stop()


@pytest.fixture(scope="module")
def ids(server: LiveServer) -> dict[str, int]:
    return server.ids  # type: ignore[attr-defined, no-any-return]


def seed(live: LiveServer) -> None:
    """A small household memory, alice's own corner, and the payloads."""
    facts = [
        ("/home/kitchen", "The spare key hangs on the hook behind the pantry door."),
        ("/home/kitchen", "The dishwasher filter is cleaned on the first Sunday of the month."),
        ("/home/garden", "Tomatoes go in after the last frost, usually mid May."),
        ("/home/garden", "The rain barrel overflows into the lavender bed; move the hose."),
        ("/home/car", "Winter tyres are in the garage loft, marked with chalk."),
        ("/work/acme", "The Acme invoices are due on the 5th; see [[/home/kitchen]] for the key."),
        ("/work/acme", "Acme's VPN drops at midnight for backups."),
    ]
    live.ids = {}  # type: ignore[attr-defined]
    with live.client() as client:
        for line in (
            "p, alice, path:/alice/*, read, allow",
            "p, alice, path:/alice/*, write, allow",
            "p, alice, path:/alice/*, tag, allow",
            "p, bob, path:/bob/*, read, allow",
            "p, bob, path:/bob/*, write, allow",
        ):
            assert client.post("/v1/policies", json={"line": line}).status_code == 201
        for path, content in facts:
            made = client.post("/v1/facts", json={"path": path, "content": content})
            assert made.status_code == 201, made.text
        key = client.post(
            "/v1/facts",
            json={"path": "/home/keys", "content": "The garage code is 4-1-7-9.", "tags": {}},
        ).json()
        client.post(f"/v1/facts/{key['id']}/recall")
        live.ids["key"] = key["id"]  # type: ignore[attr-defined]
        for name, content in PAYLOADS.items():
            made = client.post("/v1/facts", json={"path": "/lab/xss", "content": content})
            assert made.status_code == 201, made.text
            live.ids[name] = made.json()["id"]  # type: ignore[attr-defined]
    # A fact with a past, as an import brings one (times and recall state kept): stored
    # 20 days ago, recalled three times, the latest 4 days ago.
    now, day = time.time(), 86_400
    history = [
        {"type": "embornal-export", "version": 1, "embedding_width": 384},
        {"type": "path", "path": "/home/plants", "created_at": now - 20 * day, "tags": {}},
        {
            "type": "fact",
            "id": 1,
            "path": "/home/plants",
            "content": "The fig by the window wants water every 9 days; see [[/home/garden]].",
            "owner": "default",
            "created_at": now - 20 * day,
            "last_recall_at": now - 4 * day,
            "recall_count": 3,
            "stability_days": 9.0,
        },
        {"type": "end", "paths": 1, "facts": 1, "policies": 0},
    ]
    export = live.home / "fig.jsonl"
    export.write_text("".join(json.dumps(line) + "\n" for line in history))
    run_cli(live.home, live.model, "memory", "import", str(export))
    with live.client() as client:
        (fig,) = client.get("/v1/facts", params={"under": "/home/plants"}).json()["facts"]
        live.ids["fig"] = fig["id"]  # type: ignore[attr-defined]
    alice = run_cli(live.home, live.model, "token", "issue", "--subject", "alice").strip()
    with httpx.Client(
        base_url=live.base_url, headers={"Authorization": f"Bearer {alice}"}, timeout=30
    ) as client:
        made = client.post(
            "/v1/facts",
            json={"path": "/alice/diary", "content": f"alice hides the {SECRET_WORD} in a book"},
        )
        assert made.status_code == 201, made.text
        live.ids["alice"] = made.json()["id"]  # type: ignore[attr-defined]
    live.alice_token = alice  # type: ignore[attr-defined]
    live.bob_token = run_cli(  # type: ignore[attr-defined]
        live.home, live.model, "token", "issue", "--subject", "bob"
    ).strip()


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser
        browser.close()


class Person:
    """One browser context (its own cookies) and the errors its pages logged."""

    def __init__(self, context: Any, base_url: str) -> None:
        self.context = context
        self.base = base_url
        self.page = context.new_page()
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

    def go(self, path: str) -> Any:
        return self.page.goto(self.base + path)

    def follow(self, target: Any) -> None:
        """Click what loads another page (a link, a form's button) and wait until that
        page has loaded: Playwright's click returns before the navigation it starts, so a
        check made right after would read the page before it (on a busy machine, it
        did), and a form that posts back to its own URL leaves `wait_for_url` nothing to
        wait for."""
        clicked = self.page.locator(target) if isinstance(target, str) else target
        with self.page.expect_navigation():
            clicked.click()

    def sign_in(self, token: str) -> None:
        self.go("/ui/login")
        self.page.fill("textarea[name=token]", token)
        self.follow("button[type=submit]")
        self.page.wait_for_url(self.base + "/ui")

    def pwned(self) -> Any:
        return self.page.evaluate("() => window.pwned")


@pytest.fixture
def person(chromium: Any, server: LiveServer) -> Callable[[], Person]:
    made: list[Any] = []

    def make() -> Person:
        context = chromium.new_context(viewport=VIEWPORT, color_scheme="light")
        made.append(context)
        return Person(context, server.base_url)

    yield make  # type: ignore[misc]
    for context in made:
        context.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Callable[[Any, str], Path]:
    into = os.environ.get("EMBORNAL_UI_SCREENSHOTS")
    folder = ROOT / into if into else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)

    def take(page: Any, name: str) -> Path:
        target = folder / f"console-{name}.png"
        page.screenshot(path=str(target), full_page=False)
        assert target.stat().st_size > 10_000  # a rendered page, not a blank one
        return target

    return take


def test_sign_in_overview_and_logout(
    person: Callable[[], Person], server: LiveServer, shots: Callable[..., Path]
) -> None:
    me = person()
    me.go("/ui")
    assert me.page.url == server.base_url + "/ui/login"  # redirected
    shots(me.page, "login")
    me.sign_in(server.token)
    assert me.page.locator("[data-stat=facts]").inner_text().isdigit()
    assert me.page.locator("text=The fig by the window").count() >= 1
    assert me.page.locator("text=Export (JSON Lines)").count() == 1
    # The session cookie is out of the page's reach.
    assert "embornal_session" not in me.page.evaluate("() => document.cookie")
    assert server.token not in me.page.content()
    shots(me.page, "overview")
    # Nor in any line the server logged (it logs each request once).
    assert server.token not in server.logs()
    me.follow("text=Sign out")
    me.page.wait_for_url(server.base_url + "/ui/login")
    me.go("/ui")
    assert me.page.url == server.base_url + "/ui/login"
    assert me.errors == []


def test_browse_the_tree_and_set_a_path_tag(
    person: Callable[[], Person], server: LiveServer, shots: Callable[..., Path]
) -> None:
    me = person()
    me.sign_in(server.token)
    me.follow("nav >> text=Tree")
    me.follow("a[href='/ui/paths/home']")
    me.follow("a[href='/ui/paths/home/kitchen']")
    assert me.page.locator("h1").inner_text() == "/home/kitchen"
    assert me.page.locator("text=The dishwasher filter").count() == 1
    me.page.fill("#set-tag input[name=key]", "room")
    me.page.fill("#set-tag input[name=value]", "kitchen")
    me.follow("#set-tag button")
    me.page.wait_for_url(server.base_url + "/ui/paths/home/kitchen")
    assert me.page.locator(".tagtable >> text=room=kitchen").count() == 1
    # Inherited below, with where it comes from.
    me.go("/ui/paths/home")
    me.page.fill("#set-tag input[name=key]", "house")
    me.page.fill("#set-tag input[name=value]", "main")
    me.follow("#set-tag button")
    me.go("/ui/paths/home/kitchen")
    row = me.page.locator("tr.inherited", has_text="house=main")
    assert row.locator("a[href='/ui/paths/home']").count() == 1
    shots(me.page, "tree")
    assert me.errors == []


def test_a_fact_shows_its_curve_and_a_correction_makes_a_chain(
    person: Callable[[], Person],
    server: LiveServer,
    ids: dict[str, int],
    shots: Callable[..., Path],
) -> None:
    me = person()
    me.sign_in(server.token)
    me.go(f"/ui/facts/{ids['key']}")
    svg = me.page.locator("svg.curve")
    assert svg.count() == 1
    assert len(svg.locator("polyline.ahead").get_attribute("points").split()) > 10
    assert svg.locator("circle.crossing").count() == 2
    assert svg.locator("text.mark-label", has_text="recall 1").count() == 1
    box = svg.bounding_box()
    assert box and box["width"] > 300 and box["height"] > 100  # drawn, not collapsed
    # The imported fact has a past: its decay since the latest recall is drawn solid.
    me.go(f"/ui/facts/{ids['fig']}")
    assert len(me.page.locator("svg.curve polyline.past").get_attribute("points").split()) > 10
    assert me.page.locator("svg.curve text.mark-label", has_text="recall 3").count() == 1
    assert me.page.locator("#content a.link").get_attribute("href") == "/ui/paths/home/garden"
    shots(me.page, "fact")
    me.go(f"/ui/facts/{ids['key']}")
    with server.client() as api:
        before = api.get(f"/v1/facts/{ids['key']}", params={"peek": True}).json()
    assert before["recall_count"] == 1  # the page was a peek
    me.page.fill("#supersede textarea", "The garage code changed to 8-2-6-0.")
    me.follow("#supersede button")
    me.page.wait_for_url(re.compile(r".*/ui/facts/\d+$"))
    chain = me.page.locator("ol.chain > li")
    assert chain.count() == 2
    assert chain.nth(1).get_attribute("aria-current") == "true"
    assert "8-2-6-0" in me.page.locator("#content").inner_text()
    me.follow(f"ol.chain a[href='/ui/facts/{ids['key']}']")
    assert me.page.locator(".badge", has_text="superseded").count() == 1
    assert me.errors == []


def test_search_in_three_modes_from_the_slash_key(
    person: Callable[[], Person], server: LiveServer, shots: Callable[..., Path]
) -> None:
    me = person()
    me.sign_in(server.token)
    me.page.keyboard.press("/")
    assert me.page.evaluate("() => document.activeElement.name") == "q"
    me.page.keyboard.type("where is the spare key")
    me.page.keyboard.press("Enter")
    me.page.wait_for_url(re.compile(r".*/ui/search\?q=.*"))
    for mode in ("keyword", "semantic", "hybrid"):
        column = me.page.locator(f"section.mode[data-mode={mode}]")
        assert column.locator("ol.results > li").count() >= 1, mode
        assert column.locator(".scores code").count() >= 1, mode
    semantic = me.page.locator("section.mode[data-mode=semantic]")
    assert "cosine" in semantic.locator(".scores").first.inner_text()
    shots(me.page, "search")
    assert me.errors == []


def test_admin_sees_as_another_subject(
    person: Callable[[], Person],
    server: LiveServer,
    ids: dict[str, int],
    shots: Callable[..., Path],
) -> None:
    me = person()
    me.sign_in(server.token)
    me.follow("nav >> text=Access")
    me.page.fill("#see-as input[name=see_subject]", "alice")
    me.page.fill("#see-as input[name=see_path]", "/alice")
    me.follow("#see-as button")
    rights = {
        li.get_attribute("data-right"): li.get_attribute("class")
        for li in me.page.locator(".rights li").all()
    }
    assert rights == {"read": "yes", "write": "yes", "delete": "no", "tag": "yes"}
    assert me.page.locator(f".seen a[href='/ui/facts/{ids['alice']}']").count() == 1
    shots(me.page, "access")
    me.page.fill("#see-as input[name=see_subject]", "bob")
    me.follow("#see-as button")
    assert me.page.locator(".rights li.yes").count() == 0
    assert me.page.locator(f".seen a[href='/ui/facts/{ids['alice']}']").count() == 0
    assert me.errors == []


def test_payloads_render_as_text_and_run_nothing(
    person: Callable[[], Person], server: LiveServer, ids: dict[str, int]
) -> None:
    me = person()
    me.sign_in(server.token)
    pages = [f"/ui/facts/{ids[name]}" for name in PAYLOADS] + [
        "/ui",
        "/ui/paths/lab/xss",
        "/ui/search?q=window+pwned&mode=keyword",
    ]
    for url in pages:
        me.go(url)
        # Hover and click everything a payload might have turned into a handler or link.
        for element in me.page.locator("#content, .snippet, a.link").all()[:20]:
            element.hover()
        assert me.pwned() is None, url
        assert me.page.locator("img").count() == 0, url
        hrefs = me.page.eval_on_selector_all("a", "els => els.map(e => e.href)")
        assert not any(h.lower().startswith("javascript:") for h in hrefs), url
    me.go(f"/ui/facts/{ids['script']}")
    assert "<script>window.pwned = 'script'</script>" in me.page.locator("#content").inner_text()
    me.go(f"/ui/facts/{ids['link']}")
    links = me.page.locator("#content a")
    assert [links.nth(i).get_attribute("href") for i in range(links.count())] == [
        "/ui/paths/home/kitchen"
    ]
    assert me.errors == [], me.errors


def test_a_form_without_its_csrf_token_is_refused(
    person: Callable[[], Person], server: LiveServer, ids: dict[str, int]
) -> None:
    me = person()
    me.sign_in(server.token)
    me.go(f"/ui/facts/{ids['img']}")
    me.page.evaluate("() => document.querySelector('#delete input[name=csrf]').remove()")
    with me.page.expect_navigation() as navigation:
        me.page.click("#delete button")
    assert navigation.value.status == 403
    assert "CSRF" in me.page.content()
    with server.client() as api:
        fact = api.get(f"/v1/facts/{ids['img']}", params={"peek": True}).json()
    assert fact["deleted_at"] is None


def test_a_second_subject_sees_none_of_alices_facts(
    person: Callable[[], Person], server: LiveServer, ids: dict[str, int]
) -> None:
    bob = person()
    bob.sign_in(server.bob_token)  # type: ignore[attr-defined]
    for url in (
        "/ui",
        "/ui/paths/",
        "/ui/paths/alice/diary",
        f"/ui/facts/{ids['alice']}",
        f"/ui/search?q={SECRET_WORD}",
        "/ui/search?q=hides+book",
    ):
        response = bob.go(url)
        # innerText: what the page shows (a search box holds the query bob typed).
        assert SECRET_WORD not in bob.page.inner_text("body"), url
        assert bob.page.locator(f"a[href='/ui/facts/{ids['alice']}']").count() == 0, url
        if "alice" in url:
            assert response.status == 404
    assert bob.page.locator("nav >> text=Access").count() == 0
    assert bob.go("/ui/policies").status == 403
    # alice, on her own page, sees it.
    alice = person()
    alice.sign_in(server.alice_token)  # type: ignore[attr-defined]
    alice.go(f"/ui/facts/{ids['alice']}")
    assert SECRET_WORD in alice.page.locator("#content").inner_text()


def test_the_browser_is_the_debian_one() -> None:
    # `playwright install` cannot download here: the tests must use the system browser.
    assert shutil.which("chromium-headless-shell") == CHROMIUM


def test_a_phone_and_dark_mode_fit_without_sideways_scrolling(
    chromium: Any, server: LiveServer, ids: dict[str, int], shots: Callable[..., Path]
) -> None:
    context = chromium.new_context(
        viewport={"width": 390, "height": 844}, color_scheme="dark", device_scale_factor=1
    )
    try:
        me = Person(context, server.base_url)
        me.sign_in(server.token)
        for url in ("/ui", "/ui/paths/home/kitchen", f"/ui/facts/{ids['key']}", "/ui/search?q=key"):
            me.go(url)
            wide = me.page.evaluate("() => document.documentElement.scrollWidth")
            assert wide <= 390, (url, wide)
        background = me.page.evaluate("() => getComputedStyle(document.body).backgroundColor")
        assert background == "rgb(18, 20, 22)"  # the dark palette, from the system setting
        me.go(f"/ui/facts/{ids['key']}")
        shots(me.page, "phone-dark")
        assert me.errors == []
    finally:
        context.close()


# --- writing, confirming, tokens, activity (issue 32) -----------------------------------


def test_store_a_fact_from_the_form_seeing_similar_facts_first(
    person: Callable[[], Person], server: LiveServer, shots: Callable[..., Path]
) -> None:
    me = person()
    me.sign_in(server.token)
    me.follow("header >> text=New fact")
    me.page.wait_for_url(server.base_url + "/ui/facts/new")
    me.page.fill("#nf-path", "/home/kitchen")
    me.page.fill("#nf-content", "The spare key hangs on a hook behind the pantry door.")
    me.page.fill("#nf-tags", "kind=key")
    me.follow("#new-fact button[type=submit]")
    # Nothing is stored yet: the memory names the fact this one repeats.
    similar = me.page.locator("#similar li")
    assert similar.count() >= 1
    assert "The spare key hangs on the hook" in me.page.locator("#similar").inner_text()
    assert me.page.locator("#new-fact button", has_text="Store anyway").count() == 1
    shots(me.page, "new-fact")
    with server.client() as api:
        before = len(api.get("/v1/facts", params={"under": "/home/kitchen"}).json()["facts"])
    me.follow(me.page.locator("#new-fact button", has_text="Store anyway"))
    me.page.wait_for_url(re.compile(r".*/ui/facts/\d+$"))
    assert "hangs on a hook" in me.page.locator("#content").inner_text()
    assert me.page.locator(".props code.tag", has_text="kind=key").count() >= 1
    assert me.page.locator(".changes li", has_text="over the console").count() == 1
    with server.client() as api:
        after = len(api.get("/v1/facts", params={"under": "/home/kitchen"}).json()["facts"])
    assert after == before + 1
    assert me.errors == []


def test_change_a_facts_tags_supersedes_it(
    person: Callable[[], Person], server: LiveServer
) -> None:
    with server.client() as api:
        card = api.post(
            "/v1/facts",
            json={
                "path": "/games/cards",
                "content": "Fireball deals three damage.",
                "tags": {"kind": "power"},
            },
        ).json()
    me = person()
    me.sign_in(server.token)
    me.go(f"/ui/facts/{card['id']}")
    assert me.page.input_value("#new-tags") == "kind=power"
    me.page.fill("#new-tags", "kind=spell school=fire")
    me.follow("#retag button")
    me.page.wait_for_url(re.compile(r".*/ui/facts/\d+$"))
    new_id = int(me.page.url.rsplit("/", 1)[1])
    assert new_id != card["id"]
    own = me.page.locator(".props div", has_text="Own tags").inner_text()
    assert "kind=spell" in own and "school=fire" in own and "kind=power" not in own
    chain = me.page.locator("ol.chain > li")
    assert chain.count() == 2 and chain.nth(1).get_attribute("aria-current") == "true"
    me.follow(f"ol.chain a[href='/ui/facts/{card['id']}']")
    assert me.page.locator("h1 .badge", has_text="superseded").count() == 1
    assert me.errors == []


def test_delete_asks_first_and_cancel_keeps_the_fact(
    person: Callable[[], Person], server: LiveServer, shots: Callable[..., Path]
) -> None:
    with server.client() as api:
        doomed = api.post(
            "/v1/facts",
            json={"path": "/home/car", "content": "The car wash token is in the glovebox."},
        ).json()
    me = person()
    me.sign_in(server.token)
    me.go(f"/ui/facts/{doomed['id']}")
    me.follow("#delete button")
    assert me.page.locator("h1", has_text=f"Delete fact #{doomed['id']}?").count() == 1
    assert "glovebox" in me.page.locator(".confirm").inner_text()
    shots(me.page, "confirm-delete")
    me.follow("text=Cancel")
    me.page.wait_for_url(server.base_url + f"/ui/facts/{doomed['id']}")
    with server.client() as api:
        assert api.get(f"/v1/facts/{doomed['id']}", params={"peek": True}).status_code == 200
    me.follow("#delete button")
    me.follow(me.page.locator("#confirm button", has_text="Delete"))
    me.page.wait_for_url(server.base_url + f"/ui/facts/{doomed['id']}")
    assert me.page.locator("h1 .badge.bad", has_text="deleted").count() == 1
    with server.client() as api:
        assert api.get(f"/v1/facts/{doomed['id']}").status_code == 404
    assert me.errors == []


def test_revoke_a_token_and_its_next_api_call_is_refused(
    person: Callable[[], Person], server: LiveServer, shots: Callable[..., Path]
) -> None:
    me = person()
    me.sign_in(server.token)
    me.follow("nav >> text=Tokens")
    me.page.fill("#issue-token input[name=subject]", "bob")
    me.page.fill("#issue-token input[name=label]", "bob's garden agent")
    me.page.fill("#issue-token input[name=expires]", "7d")
    me.follow("#issue-token button")
    token = me.page.input_value("textarea.token")
    bob = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=server.base_url, headers=bob) as api:
        assert api.get("/v1/whoami").json()["subject"] == "bob"
    me.go("/ui/tokens")
    row = me.page.locator("tr", has_text="bob's garden agent")
    assert row.locator(".badge", has_text="active").count() == 1
    shots(me.page, "tokens")
    me.follow(row.locator("button", has_text="revoke"))
    assert me.page.locator("h1", has_text="Revoke this token?").count() == 1
    assert "bob's garden agent" in me.page.locator(".confirm").inner_text()
    me.follow(me.page.locator("#confirm button", has_text="Revoke"))
    me.page.wait_for_url(server.base_url + "/ui/tokens")
    row = me.page.locator("tr", has_text="bob's garden agent")
    assert row.locator(".badge", has_text="revoked").count() == 1
    with httpx.Client(base_url=server.base_url, headers=bob) as api:
        refused = api.get("/v1/whoami")
    assert refused.status_code == 401
    assert me.errors == []


def test_the_activity_page_filtered_by_subject(
    person: Callable[[], Person],
    server: LiveServer,
    ids: dict[str, int],
    shots: Callable[..., Path],
) -> None:
    me = person()
    me.sign_in(server.token)
    me.follow("nav >> text=Activity")
    assert me.page.locator("ol.activity > li").count() >= 5
    me.page.fill("#activity-filters input[name=subject]", "alice")
    me.follow("#activity-filters button")
    me.page.wait_for_url(re.compile(r".*/ui/activity\?subject=alice.*"))
    rows = me.page.locator("ol.activity > li")
    assert rows.count() >= 1
    assert {rows.nth(i).get_attribute("data-subject") for i in range(rows.count())} == {"alice"}
    assert rows.locator(f"a[href='/ui/facts/{ids['alice']}']").count() == 1
    assert SECRET_WORD not in me.page.inner_text("main")  # what changed, never the content
    me.page.select_option("#activity-filters select[name=action]", "store")
    me.follow("#activity-filters button")
    assert me.page.locator("ol.activity > li[data-action=store]").count() == rows.count()
    me.go("/ui/activity")
    shots(me.page, "activity")
    # Alice, signed in herself, sees her own changes and cannot ask for others'.
    alice = person()
    alice.sign_in(server.alice_token)  # type: ignore[attr-defined]
    alice.go("/ui/activity")
    subjects = alice.page.locator("ol.activity > li")
    assert {subjects.nth(i).get_attribute("data-subject") for i in range(subjects.count())} == {
        "alice"
    }
    assert me.errors == [] and alice.errors == []
    assert alice.go("/ui/activity?subject=default").status == 403


def test_the_one_time_link_of_embornal_ui_signs_in_once(
    person: Callable[[], Person], server: LiveServer
) -> None:
    printed = run_cli(server.home, server.model, "ui", "--no-open", "--port", str(server.port))
    local = re.search(r"http://\S+", printed).group(0)
    assert local.startswith(server.base_url + "/ui/login?code=")
    me = person()
    me.page.goto(local)
    me.page.wait_for_url(server.base_url + "/ui")
    assert me.page.locator("[data-stat=facts]").inner_text().isdigit()
    assert me.page.locator(".who .subject").inner_text() == "default"
    # Used once: another browser with the same link stays out.
    other = person()
    other.page.goto(local)
    other.page.wait_for_load_state()
    assert other.page.url.startswith(server.base_url + "/ui/login")
    assert "used already or has expired" in other.page.inner_text("main")
    # A browser at the root is sent to the console.
    third = person()
    third.go("/")
    assert third.page.url == server.base_url + "/ui/login"
    assert me.errors == []


def test_the_new_pages_fit_a_phone(
    chromium: Any, server: LiveServer, shots: Callable[..., Path]
) -> None:
    context = chromium.new_context(
        viewport={"width": 390, "height": 844}, color_scheme="light", device_scale_factor=1
    )
    try:
        me = Person(context, server.base_url)
        me.sign_in(server.token)
        for url in ("/ui/activity", "/ui/tokens", "/ui/facts/new"):
            me.go(url)
            wide = me.page.evaluate("() => document.documentElement.scrollWidth")
            assert wide <= 390, (url, wide)
        me.go("/ui/activity")
        shots(me.page, "phone-activity")
        me.go("/ui/facts/new")
        me.page.fill("#nf-path", "/home/garden")
        me.page.fill("#nf-content", "Tomatoes go in after the last frost, mostly in mid May.")
        me.follow("#new-fact button[type=submit]")
        assert me.page.locator("#similar li").count() >= 1
        wide = me.page.evaluate("() => document.documentElement.scrollWidth")
        assert wide <= 390, wide
        shots(me.page, "phone-new-fact")
        assert me.errors == []
    finally:
        context.close()


@pytest.fixture
def other_port(server: LiveServer) -> Iterator[str]:
    """A page served on another port of the same host, as anyone on the machine (or a
    dev server, or a compromised app) can serve: it plants the sign-in form's cookie
    (cookies ignore ports, so the console receives it) and posts the form with its own
    token for that value, by itself, the moment it loads."""
    token = server.alice_token  # type: ignore[attr-defined]
    page = f"""<!doctype html><title>cats</title>
<form method="post" action="{server.base_url}/ui/login">
<input type="hidden" name="csrf" value="planted">
<input type="hidden" name="token" value="{token}">
</form><script>document.forms[0].submit()</script>""".encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header(
                "Set-Cookie", "embornal_login=planted; Path=/ui/login; SameSite=Strict"
            )
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_page_on_another_port_cannot_sign_the_console_in_as_someone_else(
    person: Callable[[], Person], server: LiveServer, other_port: str
) -> None:
    victim = person()
    victim.sign_in(server.token)
    posts: list[int] = []
    victim.page.on(
        "response",
        lambda r: (
            posts.append(r.status)
            if r.request.method == "POST" and r.url.endswith("/ui/login")
            else None
        ),
    )
    with victim.page.expect_navigation(url=re.compile(re.escape(server.base_url) + "/ui.*")):
        victim.page.goto(other_port)
    assert posts == [403]
    assert "another origin" in victim.page.content()
    victim.go("/ui")
    assert victim.page.locator(".subject").inner_text() == "default"  # still the victim's own
