"""`embornal token issue|list|revoke` and `embornal activity`: the owner's view from
the command line, on the same records as the API."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient
from typer.testing import Result

from app.errors import EmbornalError
from app.settings import Settings
from tests.cli.conftest import Invoke


def refusal(result: Result) -> str:
    """The one line a refused command prints (main() prints the error's detail)."""
    assert isinstance(result.exception, EmbornalError), result.output
    return result.exception.detail


def test_issue_list_and_revoke_a_token(
    cli_env: Settings, invoke: Invoke, client: TestClient
) -> None:
    issued = invoke("token", "issue", "--subject", "default", "--label", "nas agent", "--json")
    assert issued.exit_code == 0, issued.output
    made = json.loads(issued.stdout)
    assert made["label"] == "nas agent" and made["jti"]
    headers = {"Authorization": f"Bearer {made['token']}"}
    assert client.get("/v1/whoami", headers=headers).status_code == 200
    listed = invoke("token", "list")
    assert listed.exit_code == 0
    (line,) = [row for row in listed.stdout.splitlines() if made["jti"] in row]
    assert "default" in line and "active" in line and "nas agent" in line
    assert made["token"] not in listed.stdout
    as_json = json.loads(invoke("token", "list", "--json").stdout)
    assert [t["jti"] for t in as_json["tokens"]] == [made["jti"]]
    revoked = invoke("token", "revoke", made["jti"])
    assert revoked.exit_code == 0 and f"revoked {made['jti']} of default" in revoked.stdout
    # The running app reads the list's version on every request (the default).
    assert client.app.state.runtime.revocations.max_age == 0.0
    assert client.get("/v1/whoami", headers=headers).status_code == 401
    assert "already revoked" in refusal(invoke("token", "revoke", made["jti"]))
    assert "revoked" in invoke("token", "list").stdout
    unknown = invoke("token", "revoke", "idp-token-1")
    assert unknown.exit_code == 0 and "not issued here" in unknown.stdout


def test_activity_lists_changes_with_filters(cli_env: Settings, invoke: Invoke) -> None:
    assert invoke("memory", "store", "/garden", "tomatoes after the frost").exit_code == 0
    assert invoke("memory", "store", "/house", "the boiler is in the cellar").exit_code == 0
    assert invoke("policy", "add", "p, alice, path:/alice/*, read, allow").exit_code == 0
    everything = invoke("activity")
    assert everything.exit_code == 0, everything.output
    lines = everything.stdout.splitlines()
    assert len(lines) == 3
    assert "policy_add" in lines[0] and "p, alice, path:/alice/*, read, allow" in lines[0]
    assert "default" in lines[1] and "cli" in lines[1] and "/house" in lines[1]
    assert "tomatoes" not in everything.stdout  # never the content
    garden = invoke("activity", "--under", "/garden", "--action", "store")
    assert len(garden.stdout.splitlines()) == 1 and "/garden" in garden.stdout
    assert "no activity matches" in invoke("activity", "--subject", "alice").stdout
    future = invoke("activity", "--since", "2999-01-01T00:00:00Z")
    assert "no activity matches" in future.stdout
    assert "--action must be" in refusal(invoke("activity", "--action", "explode"))
    assert "since must be an RFC 3339" in refusal(invoke("activity", "--since", "yesterday"))
    data = json.loads(invoke("activity", "--json", "--limit", "1").stdout)
    assert data["entries"][0]["action"] == "policy_add" and data["next_cursor"]


def test_ui_opens_the_browser_only_where_one_can_run(
    cli_env: Settings, invoke: Invoke, monkeypatch
) -> None:
    import webbrowser

    opened: list[str] = []
    monkeypatch.setattr(webbrowser, "open", lambda url: opened.append(url) or True)
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    headless = invoke("ui")
    assert headless.exit_code == 0 and opened == []
    monkeypatch.setenv("DISPLAY", ":0")
    shown = invoke("ui")
    assert shown.exit_code == 0 and "opened in your browser" in shown.stdout
    (url,) = opened
    assert url.startswith("http://127.0.0.1:8420/ui/login?code=") and url in shown.stdout
    assert invoke("ui", "--no-open").exit_code == 0 and len(opened) == 1
    assert (
        "http://127.0.0.1:9000/ui/login?code=" in invoke("ui", "--no-open", "--port", "9000").stdout
    )
    # Behind a proxy the link names http.public_url.
    monkeypatch.setenv("EMBORNAL_HTTP__PUBLIC_URL", "https://memory.example.org")
    assert "https://memory.example.org/ui/login?code=" in invoke("ui", "--no-open").stdout


def test_a_token_id_never_reads_as_an_option(invoke: Invoke, cli_env: Settings) -> None:
    """A jti that began with '-' (base64url's 1 in 64) was an unknown option to
    `token revoke` (a flaky live test found it): the memory's ids are hex; an identity
    provider's odd one is revoked after `--`."""
    from app.auth.tokens import new_jti

    assert all(len(j) == 32 and j.isalnum() for j in (new_jti() for _ in range(2000)))
    odd = invoke("token", "revoke", "--", "-_kMLQ8BaRv3YMJLvdS7Fw")
    assert odd.exit_code == 0, odd.output
    assert "-_kMLQ8BaRv3YMJLvdS7Fw" in invoke("token", "list", "--all").stdout
