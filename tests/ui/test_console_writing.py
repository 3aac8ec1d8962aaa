"""The console as a place to write: a new fact with its `similar` facts shown first,
a fact's tags changed (a supersede), destructive changes confirmed, tokens listed and
revoked, and the activity record with its filters."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable

import jwt
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.db.tables import facts
from app.embeddings.fake import FakeEmbedder
from app.runtime import Runtime
from app.usecases.memory import Memory, NewFact
from tests.conftest import TEST_WIDTH, Actor
from tests.ui.conftest import Browser
from tests.ui.test_console import count, store

BACKUP = "the staging database is backed up every night at two"
AGAIN = "every night at two the staging database is backed up"


@pytest.fixture
def model(rt: Runtime) -> None:
    rt.embedder = FakeEmbedder(TEST_WIDTH)


def fact_id_of(response) -> int:
    assert response.status_code == 303, response.text
    return int(response.headers["location"].rsplit("/", 1)[1])


# --- a new fact ----------------------------------------------------------------------


def test_a_new_fact_shows_its_similar_facts_before_anything_is_stored(
    browser: Callable[..., Browser], actor: Callable[[str], Actor], rt: Runtime, model
) -> None:
    first = store(actor, "default", "/ops", BACKUP)
    person = browser("default")
    form = person.get("/ui/facts/new?path=/ops")
    assert form.status_code == 200 and 'value="/ops"' in form.text
    before = count(rt, facts)
    shown = person.post("/ui/facts/new", {"path": "/ops", "content": AGAIN, "tags": "kind=ops"})
    assert shown.status_code == 200
    assert f'data-similar="{first.id}"' in shown.text and "Store anyway" in shown.text
    assert BACKUP in shown.text  # what the similar fact says, to decide by
    assert count(rt, facts) == before  # the first POST stores nothing
    # The person keeps both...
    kept = fact_id_of(
        person.post(
            "/ui/facts/new",
            {"path": "/ops", "content": AGAIN, "tags": "kind=ops", "confirm": "yes"},
        )
    )
    mem = actor("default").memory
    assert mem.get("default", kept, peek=True).tags == {"kind": "ops", "owner": "default"}
    # ...or, from the same hint, supersedes the similar fact instead of repeating it.
    person.get("/ui/facts/new")
    corrected = fact_id_of(
        person.post(
            "/ui/facts/new",
            {
                "path": "/ops",
                "content": AGAIN + " (UTC)",
                "supersedes_id": str(kept),
                "confirm": "yes",
            },
        )
    )
    new = mem.get("default", corrected, peek=True)
    assert new.supersedes_id == kept and new.tags == {"kind": "ops", "owner": "default"}
    # With nothing similar, the fact is stored at once.
    plain = person.post("/ui/facts/new", {"path": "/garden", "content": "plant the garlic"})
    assert mem.get("default", fact_id_of(plain), peek=True).path == "/garden"


def test_a_new_fact_the_memory_refuses_keeps_what_was_typed(
    browser: Callable[..., Browser], rt: Runtime, two_subjects
) -> None:
    person = browser("alice")
    person.get("/ui/facts/new")
    before = count(rt, facts)
    bad = person.post("/ui/facts/new", {"path": "/Bad Path!", "content": "kept text"})
    assert bad.status_code == 422 and "kept text" in bad.text and "Bad Path!" in bad.text
    refused = person.post("/ui/facts/new", {"path": "/bob/x", "content": "not mine"})
    assert refused.status_code == 403 and "may not write" in refused.text
    tags = person.post("/ui/facts/new", {"path": "/alice/x", "content": "c", "tags": "lonely"})
    assert tags.status_code == 422 and "key=value" in tags.text
    owner = person.post("/ui/facts/new", {"path": "/alice/x", "content": "c", "tags": "owner=me"})
    assert owner.status_code == 422
    assert count(rt, facts) == before


# --- a fact's tags ---------------------------------------------------------------------


def test_changing_a_facts_tags_supersedes_it_and_a_correction_keeps_them(
    browser: Callable[..., Browser], actor: Callable[[str], Actor]
) -> None:
    card = store(actor, "default", "/cards", "fireball deals 3", kind="power")
    person = browser("default")
    page = person.get(f"/ui/facts/{card.id}")
    assert 'id="retag"' in page.text and 'value="kind=power"' in page.text
    # A correction from the fact page keeps its tags (it used to drop kind=power).
    corrected = fact_id_of(
        person.post(f"/ui/facts/{card.id}/supersede", {"content": "fireball deals 4"})
    )
    mem = actor("default").memory
    assert mem.get("default", corrected, peek=True).tags == {"kind": "power", "owner": "default"}
    person.get(f"/ui/facts/{corrected}")
    retagged = fact_id_of(
        person.post(f"/ui/facts/{corrected}/tags", {"tags": "kind=spell, school=fire"})
    )
    new = mem.get("default", retagged, peek=True)
    assert new.tags == {"kind": "spell", "owner": "default", "school": "fire"}
    assert new.content == "fireball deals 4" and new.supersedes_id == corrected
    assert mem.get("default", corrected, peek=True).superseded is True
    # The page of the new fact says who did it, and through what.
    page = person.get(f"/ui/facts/{retagged}")
    assert "by <a" in page.text and "over the console" in page.text
    assert f'superseding <a href="/ui/facts/{corrected}">' in page.text


# --- tokens ---------------------------------------------------------------------------


def test_tokens_are_listed_issued_and_revoked_with_a_confirmation(
    browser: Callable[..., Browser], app: FastAPI, two_subjects
) -> None:
    admin = browser("default")
    admin.get("/ui/tokens")
    page = admin.post("/ui/tokens", {"subject": "alice", "expires": "2h", "label": "kitchen"})
    token = re.search(r'class="token"[^>]*>([^<]+)</textarea>', page.text).group(1)
    jti = re.search(r'data-jti="([^"]+)"', page.text).group(1)
    assert "kitchen" in page.text
    headers = {"Authorization": f"Bearer {token}"}
    with TestClient(app) as api:
        assert api.get("/v1/whoami", headers=headers).status_code == 200
        asked = admin.post("/ui/tokens/revoke", {"jti": jti})
        assert asked.status_code == 200 and "Revoke this token?" in asked.text
        assert "alice" in asked.text and "kitchen" in asked.text
        assert api.get("/v1/whoami", headers=headers).status_code == 200  # asking revokes nothing
        assert admin.post("/ui/tokens/revoke", {"jti": jti, "confirm": "yes"}).status_code == 303
        assert api.get("/v1/whoami", headers=headers).status_code == 401
    listed = admin.get("/ui/tokens")
    assert re.search(rf'data-jti="{jti}" class="revoked"', listed.text)


def test_a_subject_sees_and_revokes_only_its_own_tokens(
    browser: Callable[..., Browser], rt: Runtime, two_subjects
) -> None:
    memory = Memory(rt)
    bobs = memory.issue_token("default", "bob", dt.timedelta(hours=1))
    alice = browser("alice")
    page = alice.get("/ui/tokens")
    assert page.status_code == 200 and bobs.record.jti not in page.text
    assert 'name="subject"' not in page.text  # she issues for herself only
    mine = alice.post("/ui/tokens", {"expires": "1d", "label": "phone"})
    assert mine.status_code == 200 and "Token for alice" in mine.text
    refused = alice.post("/ui/tokens", {"subject": "bob", "expires": "1h"})
    assert refused.status_code == 403
    alice.get("/ui/tokens")
    assert alice.post("/ui/tokens/revoke", {"jti": bobs.record.jti}).status_code == 404
    forced = alice.post("/ui/tokens/revoke", {"jti": bobs.record.jti, "confirm": "yes"})
    assert forced.status_code == 404
    assert memory.list_tokens("default")[-1].status == "active"


def test_revoking_the_token_of_ones_own_session_ends_it(
    browser: Callable[..., Browser], rt: Runtime
) -> None:
    person = browser("default")
    assert person.get("/ui/tokens").status_code == 200
    session = person.client.app.state.ui_sessions.get(person.client.cookies.get("embornal_session"))
    jti = jwt.decode(session.token, options={"verify_signature": False})["jti"]
    assert person.post("/ui/tokens/revoke", {"jti": jti, "confirm": "yes"}).status_code == 303
    assert person.get("/ui").headers["location"] == "/ui/login"


def test_a_revoke_without_its_csrf_token_revokes_nothing(
    browser: Callable[..., Browser], rt: Runtime
) -> None:
    issued = Memory(rt).sign_token("default", dt.timedelta(hours=1))
    person = browser("default")
    person.get("/ui/tokens")
    for form in ({"jti": issued.record.jti}, {"jti": issued.record.jti, "confirm": "yes"}):
        assert person.post("/ui/tokens/revoke", form, csrf=False).status_code == 403
    assert Memory(rt).token_revoked(issued.record.jti) is False


# --- activity ---------------------------------------------------------------------------


def test_the_activity_page_filters_and_shows_a_subject_its_own(
    browser: Callable[..., Browser], actor: Callable[[str], Actor], two_subjects
) -> None:
    alice_fact = store(actor, "alice", "/alice/notes", "alice's secret recipe")
    bob_fact = store(actor, "bob", "/bob/notes", "bob's list")
    admin = browser("default")
    everything = admin.get("/ui/activity")
    assert f"/ui/facts/{alice_fact.id}" in everything.text
    assert f"/ui/facts/{bob_fact.id}" in everything.text
    only_bob = admin.get("/ui/activity?subject=bob")
    assert f"/ui/facts/{bob_fact.id}" in only_bob.text
    assert f"/ui/facts/{alice_fact.id}" not in only_bob.text
    stores = admin.get("/ui/activity?action=delete")
    assert "No changes match." in stores.text
    since = admin.get("/ui/activity?since=2999-01-01T00:00")  # a datetime-local input's value
    assert since.status_code == 200 and "No changes match." in since.text
    bad = admin.get("/ui/activity?since=soon")
    assert bad.status_code == 422 and "since must be" in bad.text
    alice = browser("alice")
    own = alice.get("/ui/activity")
    assert f"/ui/facts/{alice_fact.id}" in own.text and f"/ui/facts/{bob_fact.id}" not in own.text
    assert "secret recipe" not in own.text
    peeking = alice.get("/ui/activity?subject=bob")
    assert peeking.status_code == 403 and f"/ui/facts/{bob_fact.id}" not in peeking.text


def test_activity_pages_continue(
    browser: Callable[..., Browser], actor: Callable[[str], Actor]
) -> None:
    for n in range(30):
        actor("default").memory.store("default", NewFact("/many", f"fact {n}"))
    admin = browser("default")
    first = admin.get("/ui/activity?subject=default")
    more = re.search(r'<a rel="next" href="([^"]+)"', first.text).group(1)
    second = admin.get(more.replace("&amp;", "&"))
    assert second.status_code == 200 and second.text.count('data-action="store"') == 5


def test_an_id_beyond_any_fact_is_a_404_at_every_step(browser: Callable[..., Browser]) -> None:
    person = browser("default")
    person.get("/ui")
    huge = 2**70
    for url, form in (
        (f"/ui/facts/{huge}/delete", {}),
        (f"/ui/facts/{huge}/delete", {"confirm": "yes"}),
        (f"/ui/facts/{huge}/tags", {"tags": "k=v"}),
        (f"/ui/facts/{huge}/supersede", {"content": "x"}),
    ):
        assert person.post(url, form).status_code == 404, (url, form)
    new = person.post("/ui/facts/new", {"path": "/x", "content": "y", "supersedes_id": str(huge)})
    assert new.status_code == 404
