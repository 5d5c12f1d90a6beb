# syntax=docker/dockerfile:1
#
# policyd's image: `policyd run` on a slim Python, as a non-root user, holding only the
# runtime dependencies (deploy/requirements.txt, every version and wheel pinned by
# sha256) and policyd. docs/image.md says how to build, run and scan it.
#
#   docker build -t ghcr.io/policyd/policyd:0.1.0 .
#
# The ENTRYPOINT is exactly the command of deploy/deployment.yaml, and the image's
# Python is the minor version the tests run on; tests/integration/test_deploy.py checks
# both and runs that command from a `pip install .` of this repository. Pin the base
# image by digest (python:3.11.14-slim-bookworm@sha256:...) when publishing.
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN python -m venv /opt/policyd
# Dependencies first (this layer is reused until requirements.txt changes). Wheels
# only: the slim image has no compiler, and nothing here should need one.
# Every wheel is checked against the sha256 deploy/requirements.txt pins for it.
COPY deploy/requirements.txt deploy/build-requirements.txt /tmp/
RUN /opt/policyd/bin/pip install --require-hashes --only-binary=:all: --no-deps \
      -r /tmp/requirements.txt
# Then policyd itself, built with a pinned setuptools and no further resolution (its
# dependencies are all pinned above; `pip check` proves nothing is missing).
WORKDIR /src
COPY pyproject.toml README.md ./
COPY policyd ./policyd
RUN /opt/policyd/bin/pip install --require-hashes --only-binary=:all: --no-deps \
      -r /tmp/build-requirements.txt \
 && /opt/policyd/bin/pip install --no-deps --no-build-isolation . \
 && /opt/policyd/bin/pip check \
 && /opt/policyd/bin/pip uninstall --yes setuptools pip

FROM ${PYTHON_IMAGE}
# A fixed numeric uid/gid (65532, distroless's "nonroot"), the Deployment's runAsUser:
# the kubelet can verify runAsNonRoot from the number alone.
RUN groupadd --system --gid 65532 policyd \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin policyd
COPY --from=build /opt/policyd /opt/policyd
# Bytecode was compiled at install time; the root filesystem is read-only at run time.
ENV PATH=/opt/policyd/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 65532:65532
# What it serves: `policyd run`'s secure port (10259, kube-scheduler's) and, run as
# `policyd webhook` (deploy/webhook/), the webhook's (9443). The plain-HTTP metrics
# port is off unless --metrics-bind-address asks for it.
EXPOSE 10259 9443
ENTRYPOINT ["policyd", "run"]
CMD ["--config=/etc/policyd/profile.yaml"]
