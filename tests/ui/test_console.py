"""The console over plain HTTP: sign-in, sessions, headers, CSRF, every page, and the
rules (a page shows only what its subject may read through the API)."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from html import escape as html_escape

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.db.tables import casbin_rule, facts, path_tags
from app.embeddings.fake import FakeEmbedder
from app.runtime import Runtime
from app.ui.headers import HEADERS
from app.ui.pages import SESSION_COOKIE
from app.ui.sessions import Sessions
from app.usecases.memory import NewFact
from tests.conftest import TEST_WIDTH, Actor, FakeClock
from tests.ui.conftest import Browser

PAGES = ["/ui", "/ui/paths/", "/ui/paths/memory", "/ui/facts/1", "/ui/search?q=x", "/ui/policies"]


def count(rt: Runtime, table) -> int:
    with rt.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def store(actor: Callable[[str], Actor], subject: str, path: str, content: str, **tags: str):
    return actor(subject).memory.store(subject, NewFact(path, content, tags))


def assert_console_headers(response) -> None:
    for name, value in HEADERS.items():
        assert response.headers.get(name) == value, (name, response.headers)
    csp = response.headers["Content-Security-Policy"]
    assert "'unsafe-inline'" not in csp and "'unsafe-eval'" not in csp
    assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp


# --- signing in --------------------------------------------------------------


@pytest.mark.parametrize("url", [*PAGES, "/ui/export", "/ui/paths/a/b?cursor=x"])
def test_every_page_redirects_to_sign_in_without_a_session(
    browser: Callable[..., Browser], url: str
) -> None:
    response = browser().get(url)
    assert response.status_code == 303
    assert response.headers["location"] == "/ui/login"
    assert_console_headers(response)


def test_a_post_without_a_session_writes_nothing(
    browser: Callable[..., Browser], actor: Callable[[str], Actor], rt: Runtime
) -> None:
    fact = store(actor, "default", "/notes", "keep me")
    before = count(rt, facts)
    person = browser()
    for url in (f"/ui/facts/{fact.id}/supersede", f"/ui/facts/{fact.id}/delete"):
        response = person.post(url, {"content": "changed", "csrf": "made-up"}, csrf=False)
        assert response.status_code == 303 and response.headers["location"] == "/ui/login"
    assert count(rt, facts) == before
    assert actor("default").memory.get("default", fact.id, peek=True).deleted_at is None


def test_sign_in_sets_a_strict_http_only_cookie_no_longer_than_the_token(
    browser: Callable[..., Browser], token: Callable[..., str]
) -> None:
    person = browser()
    form = person.get("/ui/login")
    assert form.status_code == 200 and 'name="token"' in form.text
    assert_console_headers(form)
    secret = token("default", hours=0.5)
    done = person.post("/ui/login", {"token": secret})
    assert done.status_code == 303 and done.headers["location"] == "/ui"
    cookie = next(
        c for c in done.headers.get_list("set-cookie") if c.startswith(SESSION_COOKIE + "=")
    )
    attrs = {part.strip().split("=")[0].lower(): part for part in cookie.split(";")}
    assert "httponly" in attrs and "secure" not in attrs  # plain http here
    assert attrs["samesite"].strip().lower() == "samesite=strict"
    assert attrs["path"].strip() == "Path=/ui"
    max_age = int(attrs["max-age"].split("=")[1])
    assert 0 < max_age <= 1800
    # The token is never in the cookie, a URL or a page after sign-in.
    assert secret not in cookie and secret not in done.headers.get("location", "")
    for url in PAGES:
        page = person.get(url)
        assert secret not in page.text


def test_the_cookie_is_secure_under_https(app: FastAPI, token: Callable[..., str]) -> None:
    with TestClient(app, base_url="https://testserver") as client:
        form = client.get("/ui/login")
        csrf = re.search(r'name="csrf" value="([^"]+)"', form.text).group(1)
        done = client.post(
            "/ui/login", data={"token": token("default"), "csrf": csrf}, follow_redirects=False
        )
    assert done.status_code == 303
    cookie = next(c for c in done.headers.get_list("set-cookie") if c.startswith(SESSION_COOKIE))
    assert "secure" in cookie.lower()


@pytest.mark.parametrize("bad", ["", "not-a-jwt", "expired", "role", "wrong-key"])
def test_sign_in_refuses_what_the_api_refuses(
    browser: Callable[..., Browser], token: Callable[..., str], bad: str, settings
) -> None:
    import jwt

    values = {
        "": "",
        "not-a-jwt": "a.b.c",
        "expired": token("default", hours=1, ago_hours=2),
        "role": token("admin"),  # a role's name is never a subject
        "wrong-key": jwt.encode({"sub": "default", "exp": 4_000_000_000}, "x" * 32, "HS256"),
    }
    person = browser()
    person.get("/ui/login")
    response = person.post("/ui/login", {"token": values[bad]})
    assert response.status_code == 401
    # The API's own words: one for every refusal, but an expiry, which says so.
    words = "the bearer token has expired" if bad == "expired" else "invalid or missing bearer"
    assert words in response.text
    assert SESSION_COOKIE not in response.headers.get("set-cookie", "")
    assert person.get("/ui").status_code == 303


def test_sign_in_without_its_csrf_token_is_refused(
    browser: Callable[..., Browser], token: Callable[..., str]
) -> None:
    person = browser()
    person.get("/ui/login")
    response = person.post("/ui/login", {"token": token("default")}, csrf=False)
    assert response.status_code == 403
    assert person.get("/ui").status_code == 303


@pytest.mark.parametrize(
    "headers",
    [
        # A page on another port of the same host: same site, so cookies (which ignore
        # ports) and SameSite=Strict let its forged form through; its origin does not.
        {"Origin": "http://testserver:8421", "Sec-Fetch-Site": "same-site"},
        {"Sec-Fetch-Site": "same-site"},
        {"Origin": "http://testserver:8421"},
        {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
        {"Origin": "null"},
    ],
)
def test_a_sign_in_posted_from_another_origin_is_refused(
    browser: Callable[..., Browser], token: Callable[..., str], headers: dict[str, str]
) -> None:
    """A forced sign-in: another origin plants its own login cookie and posts its own
    token, and the victim's console would silently be the attacker's."""
    person = browser()
    person.get("/ui/login")
    form = {"token": token("alice"), "csrf": person.csrf}
    forced = person.client.post("/ui/login", data=form, headers=headers, follow_redirects=False)
    assert forced.status_code == 403 and "origin" in forced.text
    assert SESSION_COOKIE not in forced.headers.get("set-cookie", "")
    assert person.get("/ui").status_code == 303
    # The console's own page posts from its own origin, as a browser says it.
    own = {"Origin": "http://testserver", "Sec-Fetch-Site": "same-origin"}
    done = person.client.post("/ui/login", data=form, headers=own, follow_redirects=False)
    assert done.status_code == 303 and person.get("/ui").status_code == 200


def test_every_console_post_from_another_origin_is_refused(
    browser: Callable[..., Browser], rt: Runtime
) -> None:
    person = browser("default")
    person.get("/ui/policies")
    before = count(rt, casbin_rule)
    line = {"line": "p, mallory, path:/*, read, allow", "csrf": person.csrf}
    forged = person.client.post(
        "/ui/policies/add",
        data=line,
        headers={"Origin": "http://testserver:8421", "Sec-Fetch-Site": "same-site"},
        follow_redirects=False,
    )
    assert forged.status_code == 403 and count(rt, casbin_rule) == before


def test_signing_in_as_someone_else_ends_the_first_session(
    browser: Callable[..., Browser], token: Callable[..., str]
) -> None:
    person = browser("default")
    first = person.client.cookies.get(SESSION_COOKIE)
    person.get("/ui/login")
    assert person.post("/ui/login", {"token": token("alice")}).status_code == 303
    assert person.client.cookies.get(SESSION_COOKIE) != first
    assert 'title="signed in as">alice<' in person.get("/ui").text
    # The first session, replayed, opens nothing any more.
    replay = browser()
    replay.client.cookies.set(SESSION_COOKIE, first, path="/ui")
    assert replay.get("/ui").status_code == 303


def test_logout_ends_the_session(browser: Callable[..., Browser]) -> None:
    person = browser("default")
    kept = person.client.cookies.get(SESSION_COOKIE)
    assert person.post("/ui/logout").status_code == 303
    # The old cookie, replayed, no longer opens anything.
    person.client.cookies.set(SESSION_COOKIE, kept, path="/ui")
    assert person.get("/ui").status_code == 303


def test_a_session_ends_when_its_token_expires(
    app: FastAPI, browser: Callable[..., Browser]
) -> None:
    clock = FakeClock(start=dt.datetime.now(dt.UTC).timestamp())
    app.state.ui_sessions = Sessions(clock=clock)
    person = browser("default")  # a one-hour token
    clock.advance(seconds=3590)
    assert person.get("/ui").status_code == 200
    clock.advance(seconds=20)
    response = person.get("/ui")
    assert response.status_code == 303 and response.headers["location"] == "/ui/login"


# --- headers and static files ------------------------------------------------


def test_every_console_response_carries_the_headers(
    browser: Callable[..., Browser], actor: Callable[[str], Actor]
) -> None:
    store(actor, "default", "/notes", "hello")
    person = browser("default")
    for url in [*PAGES, "/ui/static/console.css", "/ui/static/console.js", "/ui/facts/999"]:
        response = person.get(url)
        assert response.status_code in (200, 404), (url, response.status_code)
        assert_console_headers(response)
    assert person.get("/ui/facts/999").status_code == 404
    assert person.get("/ui/static/console.js").headers["content-type"].startswith("text/javascript")
    # No inline script on any page: every <script> has a src of our own.
    page = person.get("/ui").text
    assert re.findall(r"<script[^>]*>", page) == ['<script src="/ui/static/console.js" defer>']
    assert "no-store" in person.get("/ui").headers["cache-control"]


def test_the_api_still_refuses_form_bodies(browser: Callable[..., Browser], settings) -> None:
    response = browser().client.post("/v1/facts", data={"path": "/a", "content": "x"})
    assert response.status_code == 415


# --- the pages ---------------------------------------------------------------


def test_overview_shows_counts_and_lists(
    browser: Callable[..., Browser], actor: Callable[[str], Actor], clock: FakeClock
) -> None:
    old = store(actor, "default", "/notes/old", "an old note about copper")
    clock.advance(days=5)
    new = store(actor, "default", "/notes/new", "a new note about violins")
    page = browser("default").get("/ui")
    assert page.status_code == 200
    visible = actor("default").memory.overview("default")
    assert visible.facts >= 2
    assert f'data-stat="facts">{visible.facts}<' in page.text
    assert f'data-stat="pending">{visible.pending_embeddings}<' in page.text
    assert actor("default").memory.backend in page.text and "64-d" in page.text
    # One pass gives what the listings give: the count, strongest first, weakest first.
    mem = actor("default").memory
    assert visible.facts == mem.describe_path("default", "/").subtree_fact_count
    listed = mem.list_facts("default", sort="strength", limit=8).facts
    assert [f.id for f in visible.strongest] == [f.id for f in listed]
    # Weakest first, and the five days older note is weaker than the new one.
    assert old.id in [f.id for f in visible.fading] and visible.strongest[0].id == new.id
    assert [f.strength for f in visible.fading] == sorted(f.strength for f in visible.fading)
    assert visible.recent[0].id == new.id
    assert f"/ui/facts/{old.id}" in page.text and f"/ui/facts/{new.id}" in page.text
    assert "Export (JSON Lines)" in page.text  # default is an admin


def test_tree_shows_children_tags_with_origin_and_pages_of_facts(
    browser: Callable[..., Browser], actor: Callable[[str], Actor]
) -> None:
    mem = actor("default").memory
    mem.set_path_tags("default", "/proj", {"team": "blue"})
    ids = [store(actor, "default", "/proj/alpha", f"fact number {i}").id for i in range(30)]
    store(actor, "default", "/proj/alpha/deep", "below")
    person = browser("default")
    top = person.get("/ui/paths/proj")
    assert top.status_code == 200
    assert 'href="/ui/paths/proj/alpha"' in top.text and ">31<" in top.text
    node = person.get("/ui/paths/proj/alpha")
    assert "team=blue" in node.text and 'href="/ui/paths/proj">/proj</a>' in node.text
    assert f"/ui/facts/{ids[-1]}" in node.text and f"/ui/facts/{ids[0]}" not in node.text
    following = re.search(r'rel="next" href="([^"]+)"', node.text).group(1)
    second = person.get(following.replace("&amp;", "&"))
    assert second.status_code == 200 and f"/ui/facts/{ids[0]}" in second.text
    assert person.get("/ui/paths/no/such/node").status_code == 404
    # Nearest wins: a nearer node setting the key is its origin.
    mem.set_path_tags("default", "/proj/alpha", {"team": "red"})
    store(actor, "default", "/proj/alpha/deep/er", "further below")
    assert mem.tag_origins("default", "/proj/alpha/deep/er") == {"team": "/proj/alpha"}
    deep = person.get("/ui/paths/proj/alpha/deep/er").text
    assert re.search(r'team=red</code></td><td><a href="/ui/paths/proj/alpha">', deep)


def test_viewing_a_fact_is_a_peek_and_draws_its_curve(
    browser: Callable[..., Browser], actor: Callable[[str], Actor], clock: FakeClock
) -> None:
    fact = store(actor, "default", "/notes", "see [[/notes]] and [[/hidden/x]]", topic="x")
    actor("default").memory.recall("default", fact.id)
    clock.advance(days=2)
    page = browser("default").get(f"/ui/facts/{fact.id}")
    assert page.status_code == 200
    after = actor("default").memory.get("default", fact.id, peek=True)
    assert after.recall_count == 1  # the page counted no recall
    assert '<svg class="curve"' in page.text and 'class="past"' in page.text
    assert "recall 1" in page.text and "under 0.5" in page.text and "under 0.1" in page.text
    assert page.text.count('class="crossing"') == 2
    assert '<a class="link" href="/ui/paths/notes">[[/notes]]</a>' in page.text
    assert "[[/hidden/x]]" in page.text and 'href="/ui/paths/hidden' not in page.text
    assert "topic=x" in page.text and "owner=default" in page.text


def test_recall_supersede_and_delete_from_the_fact_page(
    browser: Callable[..., Browser], actor: Callable[[str], Actor], rt: Runtime
) -> None:
    fact = store(actor, "default", "/notes", "the boiler is in the cellar")
    person = browser("default")
    person.get(f"/ui/facts/{fact.id}")
    assert person.post(f"/ui/facts/{fact.id}/recall").status_code == 303
    assert actor("default").memory.get("default", fact.id, peek=True).recall_count == 1
    done = person.post(f"/ui/facts/{fact.id}/supersede", {"content": "it is in the attic"})
    assert done.status_code == 303
    new_id = int(done.headers["location"].rsplit("/", 1)[1])
    page = person.get(f"/ui/facts/{new_id}")
    assert "in the attic" in page.text and f'href="/ui/facts/{fact.id}"' in page.text
    # A second supersede of the old fact: the API's 409, shown as it is.
    again = person.post(f"/ui/facts/{fact.id}/supersede", {"content": "third"})
    assert again.status_code == 409 and "already superseded" in again.text
    # A delete asks first, and the asking changes nothing.
    asked = person.post(f"/ui/facts/{new_id}/delete")
    assert asked.status_code == 200 and f"Delete fact #{new_id}?" in asked.text
    assert "in the attic" in asked.text and 'name="confirm" value="yes"' in asked.text
    assert actor("default").memory.get("default", new_id, peek=True).deleted_at is None
    assert person.post(f"/ui/facts/{new_id}/delete", {"confirm": "yes"}).status_code == 303
    assert "deleted" in person.get(f"/ui/facts/{new_id}").text


def test_path_tags_are_set_and_removed_and_refusals_shown(
    browser: Callable[..., Browser], actor: Callable[[str], Actor], rt: Runtime
) -> None:
    store(actor, "default", "/shelf", "a book")
    person = browser("default")
    person.get("/ui/paths/shelf")
    assert person.post("/ui/paths/shelf/tags", {"key": "room", "value": "study"}).status_code == 303
    assert "room=study" in person.get("/ui/paths/shelf").text
    refused = person.post("/ui/paths/shelf/tags", {"key": "owner", "value": "me"})
    assert refused.status_code == 422 and "owner" in refused.text
    assert person.post("/ui/paths/shelf/untag", {"key": "room"}).status_code == 303
    assert "room=study" not in person.get("/ui/paths/shelf").text


def test_search_shows_the_three_modes_with_scores(
    browser: Callable[..., Browser], actor: Callable[[str], Actor]
) -> None:
    fact = store(actor, "default", "/notes", "the harbor lantern is blue")
    page = browser("default").get("/ui/search?q=lantern&mode=keyword&min_strength=0.1")
    assert page.status_code == 200
    for mode in ("keyword", "semantic", "hybrid"):
        assert f'data-mode="{mode}"' in page.text
    assert f"/ui/facts/{fact.id}" in page.text and "score=" in page.text
    # No model in these tests: semantic shows the API's 503, the others still answer.
    assert "503" in page.text
    assert actor("default").memory.get("default", fact.id, peek=True).recall_count == 0
    bad = browser("default").get("/ui/search?q=lantern&min_strength=2")
    assert bad.status_code == 422 and "min_strength" in bad.text


def test_a_search_the_api_refuses_is_refused_on_the_page(
    browser: Callable[..., Browser], actor: Callable[[str], Actor]
) -> None:
    """A query over the API's length and an unknown mode: the console page says what is
    wrong (not a bare problem document, not hybrid's results in silence)."""
    store(actor, "default", "/notes", "the harbor lantern is blue")
    long = browser("default").get("/ui/search", params={"q": "x" * 5000})
    assert long.status_code == 422
    assert long.headers["content-type"].startswith("text/html")
    assert "longer than 4000 characters" in long.text and 'data-mode="' not in long.text
    mode = browser("default").get("/ui/search", params={"q": "lantern", "mode": "bogus"})
    assert mode.status_code == 422
    assert "mode must be one of keyword, semantic, hybrid" in mode.text
    assert 'data-mode="' not in mode.text


def test_a_time_span_beyond_any_date_is_a_page_like_any_other(
    browser: Callable[..., Browser], actor: Callable[[str], Actor], rt: Runtime
) -> None:
    rt.embedder = FakeEmbedder(TEST_WIDTH)
    store(actor, "default", "/notes", "the plan for the garden")
    for q in ("what happened 3000000 days ago", "the plan on December 31st 9999"):
        page = browser("default").get("/ui/search", params={"q": q, "mode": "hybrid"})
        assert page.status_code == 200, page.text[-500:]


def test_policies_page_lists_adds_removes_and_sees_as(
    browser: Callable[..., Browser], actor: Callable[[str], Actor], rt: Runtime, two_subjects
) -> None:
    secret = store(actor, "alice", "/alice/notes", "alice keeps the spare key under the mat")
    person = browser("default")
    page = person.get("/ui/policies")
    assert page.status_code == 200 and "p, alice, path:/alice/*, read, allow" in page.text
    line = "p, carol, path:/carol/*, read, allow"
    assert person.post("/ui/policies/add", {"line": line}).status_code == 303
    assert line in person.get("/ui/policies").text
    bad = person.post("/ui/policies/add", {"line": "p, carol, nowhere, read, allow"})
    assert bad.status_code == 422
    asked = person.post("/ui/policies/remove", {"line": line})
    assert asked.status_code == 200 and "Remove this policy line?" in asked.text
    assert line in person.get("/ui/policies").text  # asking removed nothing
    done = person.post("/ui/policies/remove", {"line": line, "confirm": "yes"})
    assert done.status_code == 303
    assert line not in person.get("/ui/policies").text
    missing = person.post("/ui/policies/remove", {"line": line})
    assert missing.status_code == 404 and "no such policy" in missing.text

    seen = person.get("/ui/policies?see_subject=alice&see_path=/alice")
    assert 'data-right="read">read: yes' in seen.text
    assert 'data-right="tag">tag: yes' in seen.text
    assert f"/ui/facts/{secret.id}" in seen.text
    as_bob = person.get("/ui/policies?see_subject=bob&see_path=/alice")
    assert 'data-right="read">read: no' in as_bob.text
    assert f"/ui/facts/{secret.id}" not in as_bob.text
    assert "does not exist for it" in as_bob.text


def test_an_issued_token_is_shown_once_and_works(
    browser: Callable[..., Browser], app: FastAPI, two_subjects
) -> None:
    person = browser("default")
    person.get("/ui/tokens")
    page = person.post("/ui/tokens", {"subject": "alice", "expires": "2h"})
    assert page.status_code == 200
    issued = re.search(r'class="token"[^>]*>([^<]+)</textarea>', page.text).group(1)
    with TestClient(app) as api:
        who = api.get("/v1/whoami", headers={"Authorization": f"Bearer {issued}"})
    assert who.status_code == 200 and who.json()["subject"] == "alice"
    assert "No policy line names" not in page.text
    assert issued not in person.get("/ui/tokens").text
    person.get("/ui/tokens")
    stranger = person.post("/ui/tokens", {"subject": "stranger", "expires": "1h"})
    assert "No policy line names stranger" in stranger.text
    refused = person.post("/ui/tokens", {"subject": "admin", "expires": "2h"})
    assert refused.status_code == 422


def test_a_subject_outside_admin_cannot_issue_tokens_or_change_policies(
    browser: Callable[..., Browser], rt: Runtime, two_subjects
) -> None:
    """The access page's forms, posted by a signed-in subject without the admin role
    (with its own valid CSRF token): each one refused as the API refuses it, nothing
    written, no token on the page."""
    alice = browser("alice")
    assert alice.get("/ui/policies").status_code == 403
    alice.get("/ui")  # a page of its own, for a valid CSRF token
    rules = count(rt, casbin_rule)
    line = "p, alice, path:/*, read, allow"
    for url, form in (
        ("/ui/policies/add", {"line": line}),
        ("/ui/policies/remove", {"line": "p, alice, path:/alice/*, read, allow"}),
        ("/ui/tokens", {"subject": "bob", "expires": "2h"}),
    ):
        refused = alice.post(url, form)
        assert refused.status_code == 403, url
        assert "admin role" in refused.text
        assert 'class="token"' not in refused.text
    assert count(rt, casbin_rule) == rules


def test_export_downloads_json_lines_for_admin_only(
    browser: Callable[..., Browser], actor: Callable[[str], Actor], two_subjects
) -> None:
    store(actor, "default", "/notes", "exported")
    response = browser("default").get("/ui/export")
    assert response.status_code == 200
    assert "attachment" in response.headers["content-disposition"]
    records = [json.loads(line) for line in response.text.splitlines()]
    assert any("exported" in json.dumps(r) for r in records)
    assert browser("alice").get("/ui/export").status_code == 403


# --- CSRF --------------------------------------------------------------------


def test_a_post_without_the_csrf_token_is_a_403_and_writes_nothing(
    browser: Callable[..., Browser], actor: Callable[[str], Actor], rt: Runtime
) -> None:
    fact = store(actor, "default", "/notes", "stays as it is")
    person, other = browser("default"), browser("default")
    person.get("/ui")
    other.get("/ui")
    before = (count(rt, facts), count(rt, casbin_rule), count(rt, path_tags))
    attempts = [
        (f"/ui/facts/{fact.id}/supersede", {"content": "changed"}),
        (f"/ui/facts/{fact.id}/delete", {}),
        (f"/ui/facts/{fact.id}/recall", {}),
        ("/ui/paths/notes/tags", {"key": "k", "value": "v"}),
        ("/ui/policies/add", {"line": "p, eve, path:/*, read, allow"}),
        ("/ui/policies/remove", {"line": "g, default, admin", "confirm": "yes"}),
        ("/ui/tokens", {"subject": "eve"}),
        ("/ui/facts/new", {"path": "/notes", "content": "forged", "confirm": "yes"}),
        (f"/ui/facts/{fact.id}/tags", {"tags": "kind=forged"}),
        (f"/ui/facts/{fact.id}/delete", {"confirm": "yes"}),
        ("/ui/logout", {}),
    ]
    for url, data in attempts:
        assert person.post(url, data, csrf=False).status_code == 403, url
        # Another session's token is no better.
        assert person.post(url, {**data, "csrf": other.csrf}, csrf=False).status_code == 403
    assert (count(rt, facts), count(rt, casbin_rule), count(rt, path_tags)) == before
    kept = actor("default").memory.get("default", fact.id, peek=True)
    assert kept.deleted_at is None and kept.recall_count == 0
    assert person.get("/ui").status_code == 200  # the logout was refused too


# --- attacker-written text ---------------------------------------------------

PAYLOADS = [
    "<script>window.pwned=1</script>",
    '<img src=x onerror="window.pwned=1">',
    '[click](javascript:window.pwned=1) <a href="javascript:window.pwned=1">x</a>',
    '[[/x" onmouseover="window.pwned=1]] and [[/notes" onmouseover="window.pwned=1]]',
]


def assert_inert(html: str) -> None:
    assert "<script>window" not in html
    assert "<img src=x" not in html and "<img" not in html
    assert 'href="javascript:' not in html.lower()
    assert not re.search(r"<[^>]*\sonmouseover=", html)
    assert not re.search(r"<[^>]*\sonerror=", html)


def test_payloads_render_as_text_on_every_page(
    browser: Callable[..., Browser], actor: Callable[[str], Actor]
) -> None:
    mem = actor("default").memory
    ids = [store(actor, "default", "/notes", text).id for text in PAYLOADS]
    mem.set_path_tags("default", "/notes", {"note": "<script>alert(1)</script>"})
    person = browser("default")
    pages = [f"/ui/facts/{i}" for i in ids] + [
        "/ui",
        "/ui/paths/notes",
        "/ui/search?q=pwned&mode=keyword",
        "/ui/search?q=%3Cscript%3E&under=%22%3E%3Cscript%3E",
        "/ui/policies?see_subject=default&see_path=/notes",
    ]
    for url in pages:
        response = person.get(url)
        assert response.status_code in (200, 422), url
        assert_inert(response.text)
    fact_page = person.get(f"/ui/facts/{ids[0]}").text
    assert "&lt;script&gt;window.pwned=1&lt;/script&gt;" in fact_page
    assert "&lt;script&gt;" in person.get("/ui/paths/notes").text


# --- two subjects ------------------------------------------------------------


def test_a_second_subject_sees_none_of_the_first_subjects_facts(
    browser: Callable[..., Browser], actor: Callable[[str], Actor], two_subjects
) -> None:
    word = "zanzibarquux"
    mem = actor("alice").memory
    first = store(actor, "alice", "/alice/diary", f"alice's secret {word}", mood="calm")
    second = mem.store(
        "alice", NewFact("/alice/diary", f"corrected {word}", {}, supersedes_id=first.id)
    )
    mem.set_path_tags("alice", "/alice/diary", {"shelf": "private"})
    own = store(actor, "bob", "/bob/notes", "bob's own note")
    bob = browser("bob")
    pages = [
        "/ui",
        "/ui/paths/",
        "/ui/paths/alice",
        "/ui/paths/alice/diary",
        f"/ui/facts/{first.id}",
        f"/ui/facts/{second.id}",
        "/ui/search?q=secret",
        "/ui/search?q=secret&under=/alice",
        "/ui/policies",
        "/ui/policies?see_subject=alice&see_path=/alice",
        "/ui/export",
    ]
    for url in pages:
        response = bob.get(url)
        text = response.text
        # A 404 names the path that was asked for, as the API's does; nothing else.
        asked = url.removeprefix("/ui/paths")
        text = text.replace(f"path {asked} not found", "").replace('value="/alice"', "")
        assert word not in text and "/alice" not in text, url
        assert "shelf=private" not in text and "mood=calm" not in text, url
        assert f"/ui/facts/{first.id}" not in text and f"/ui/facts/{second.id}" not in text
    assert bob.get(f"/ui/facts/{first.id}").status_code == 404
    assert bob.get("/ui/paths/alice").status_code == 404
    assert bob.get("/ui/policies").status_code == 403
    # Bob's changes to alice's facts are refused as the API refuses them (404: not there).
    bob.get("/ui")
    assert bob.post(f"/ui/facts/{second.id}/delete").status_code == 404
    assert bob.post(f"/ui/facts/{second.id}/supersede", {"content": "x"}).status_code == 404
    assert mem.get("alice", second.id, peek=True).deleted_at is None
    # And bob's own world is there.
    assert f"/ui/facts/{own.id}" in bob.get("/ui").text
    assert 'data-stat="facts">' in bob.get("/ui").text
    overview = actor("bob").memory.overview("bob")
    assert overview.database_bytes is None  # the file's size grows with alice's facts
    assert overview.facts == actor("bob").memory.describe_path("bob", "/").subtree_fact_count
    assert first.id not in {f.id for f in overview.strongest + overview.fading + overview.recent}
    assert second.id not in {f.id for f in overview.strongest + overview.fading}


def test_embornal_ui_prints_a_one_time_link_that_signs_in_once(
    settings, monkeypatch: pytest.MonkeyPatch, browser: Callable[..., Browser], rt: Runtime
) -> None:
    from typer.testing import CliRunner

    from app import cli
    from tests.conftest import TEST_WIDTH

    monkeypatch.setenv("EMBORNAL_HOME", str(settings.dirs.config_dir))
    monkeypatch.setenv("EMBORNAL_EMBEDDING__MODEL", "none")
    monkeypatch.setenv("EMBORNAL_EMBEDDING__WIDTH", str(TEST_WIDTH))
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.setattr(cli.state, "settings", None)
    result = CliRunner().invoke(cli.app, ["ui"])
    assert result.exit_code == 0, result.output
    (link,) = re.findall(r"http://\S+", result.stdout)
    assert link.startswith("http://127.0.0.1:8420/ui/login?code=")
    # A code, not a token: nothing in the link is a JWT, and no browser was opened here.
    code = link.split("code=", 1)[1]
    assert code.count(".") == 0 and len(code) >= 40
    assert "opened in your browser" not in result.stdout
    person = browser()
    # The link's page posts the code itself (console.js); opening it uses nothing up.
    page = person.get(f"/ui/login?code={code}")
    assert page.status_code == 200 and "data-autosubmit" in page.text
    assert page.text.count(code) == 1  # only in the form's hidden field
    signed = person.post("/ui/login", {"code": code})
    assert signed.status_code == 303 and signed.headers["location"] == "/ui"
    cookie = person.client.cookies.get(SESSION_COOKIE)
    session = person.client.app.state.ui_sessions.get(cookie)
    assert session.subject == "default"
    assert person.get("/ui").status_code == 200
    # The session runs on a token of its own, recorded (so revoking it ends the session).
    labels = {t.label: t for t in actor_tokens(rt)}
    assert "console sign-in link" in labels
    # Once only: a second browser with the same link is refused.
    other = browser()
    other.get(f"/ui/login?code={code}")
    again = other.post("/ui/login", {"code": code})
    assert again.status_code == 401 and "used already or has expired" in again.text
    assert SESSION_COOKIE not in other.client.cookies


def actor_tokens(rt: Runtime):
    from app.usecases.memory import Memory

    return Memory(rt).list_tokens("default")


def test_backup_downloads_a_consistent_copy_for_admin_only(
    browser: Callable[..., Browser], actor: Callable[[str], Actor], two_subjects, tmp_path
) -> None:
    import sqlite3

    store(actor, "default", "/notes", "backed up")
    response = browser("default").get("/ui/backup")
    assert response.status_code == 200
    assert "attachment" in response.headers["content-disposition"]
    copy = tmp_path / "copy.db"
    copy.write_bytes(response.content)
    with sqlite3.connect(copy) as db:
        contents = [row[0] for row in db.execute("SELECT content FROM facts")]
    assert "backed up" in contents
    refused = browser("alice").get("/ui/backup")
    assert refused.status_code == 403 and "admin" in refused.text


@pytest.mark.parametrize("name", ["al%00ice", "al%1Bice", "ali%E2%80%8Bce", "a%20b"])
def test_see_as_refuses_a_name_no_subject_can_have(
    browser: Callable[..., Browser], name: str
) -> None:
    page = browser("default").get(f"/ui/policies?see_subject={name}&see_path=/")
    assert page.status_code == 200
    assert "subject contains" in page.text and 'data-right="read"' not in page.text


def test_the_slash_redirect_never_names_the_host_it_was_asked_for(
    app: FastAPI,
) -> None:
    with TestClient(app) as client:
        for url, where in (("/ui/", "/ui"), ("/ui/?q=1", "/ui?q=1"), ("/ui/search/", "/ui/search")):
            moved = client.get(url, headers={"Host": "evil.example"}, follow_redirects=False)
            assert moved.status_code in (307, 308), (url, moved.status_code)
            assert moved.headers["location"] == where
        # A path that would read as another host once relative is no redirect at all.
        far = client.get("//evil.example/", follow_redirects=False)
        assert "evil.example" not in far.headers.get("location", "")


def test_see_as_a_role_name_says_why_it_is_refused(browser: Callable[..., Browser]) -> None:
    page = browser("default").get("/ui/policies?see_subject=admin&see_path=/")
    assert page.status_code == 200
    assert "is a role name" in page.text


def test_a_refused_change_shows_the_apis_own_problem(
    browser: Callable[..., Browser],
    actor: Callable[[str], Actor],
    app: FastAPI,
    token: Callable[..., str],
    two_subjects,
    rt: Runtime,
) -> None:
    # Public, so bob may read it; not bob's to change.
    shared = store(actor, "alice", "/alice/board", "the meeting is at ten", visibility="public")
    bob = browser("bob")
    page = bob.get(f"/ui/facts/{shared.id}")
    assert page.status_code == 200 and "the meeting is at ten" in page.text
    # The page offers no change the rules refuse...
    assert 'id="supersede"' not in page.text and 'id="delete"' not in page.text
    before = count(rt, facts)
    # ...and a forged form meets the API's refusal, word for word.
    with TestClient(app) as api:
        headers = {"Authorization": f"Bearer {token('bob')}"}
        refused = api.post(
            "/v1/facts",
            headers=headers,
            json={"path": "/alice/board", "content": "at noon", "supersedes_id": shared.id},
        ).json()
        deleted = api.delete(f"/v1/facts/{shared.id}", headers=headers).json()
    console = bob.post(f"/ui/facts/{shared.id}/supersede", {"content": "at noon"})
    assert console.status_code == refused["status"] == 403
    assert html_escape(refused["detail"]) in console.text
    console = bob.post(f"/ui/facts/{shared.id}/delete")
    assert console.status_code == deleted["status"] == 403
    assert html_escape(deleted["detail"]) in console.text
    assert count(rt, facts) == before


def test_the_last_admin_line_cannot_be_removed_from_the_access_page(
    browser: Callable[..., Browser],
) -> None:
    person = browser("default")
    person.get("/ui/policies")
    refused = person.post("/ui/policies/remove", {"line": "g, default, admin"})
    assert refused.status_code == 409
    assert "add another admin first" in refused.text
    page = person.get("/ui/policies")
    assert page.status_code == 200 and "g, default, admin" in page.text
