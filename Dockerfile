# syntax=docker/dockerfile:1
# One image for the scheduler and the workers: `docker run IMAGE scheduler ...`, `IMAGE worker ...`.
#
# CPU (the scheduler, CPU-only workers; torch from PyTorch's CPU wheel index):
#   docker build -t gavel-ng:0.1.0-cpu .
# CUDA (GPU workers; torch from PyPI, whose wheels bring their CUDA libraries; the host needs
# the NVIDIA driver and the NVIDIA container toolkit):
#   docker build -t gavel-ng:0.1.0-cuda \
#       --build-arg BASE=nvidia/cuda:12.8.1-runtime-ubuntu24.04 --build-arg TORCH_INDEX= .
ARG BASE=python:3.11-slim
FROM ${BASE}

# PyTorch's wheel index for torch (empty: PyPI's default index)
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ARG TORCH_VERSION=2.13.0

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/gavel-ng \
    PATH=/opt/gavel-ng/bin:$PATH

# The python:* images bring Python 3.11; a CUDA base (Ubuntu 24.04: Python 3.12) gets it from apt.
# hadolint ignore=DL3008
RUN set -eux; \
    if ! command -v python3 >/dev/null || ! python3 -c 'import venv, ensurepip' 2>/dev/null; then \
        apt-get update; \
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
            python3 python3-venv ca-certificates; \
        rm -rf /var/lib/apt/lists/*; \
    fi; \
    python3 -c 'import sys; assert sys.version_info >= (3, 11), sys.version'; \
    python3 -m venv "$VIRTUAL_ENV"

# torch first, from its own index, in a layer of its own (the largest one, and the least changed);
# pinned by TORCH_VERSION, which hadolint cannot read
# hadolint ignore=DL3013
RUN pip install "torch==${TORCH_VERSION}" ${TORCH_INDEX:+--index-url "$TORCH_INDEX"}

WORKDIR /src
COPY pyproject.toml README.md ./
COPY gavel_ng ./gavel_ng
# this checkout, with its dependencies as pyproject.toml bounds them (torch is already pinned)
# hadolint ignore=DL3013
RUN pip install ".[worker]" \
    && python -c "import gavel_ng, torch, grpc; print('gavel_ng', gavel_ng.__version__, 'torch', torch.__version__)" \
    && rm -rf /src

RUN groupadd --gid 10001 gavel \
    && useradd --uid 10001 --gid 10001 --create-home --shell /usr/sbin/nologin gavel
USER 10001:10001
WORKDIR /home/gavel

# scheduler gRPC, worker gRPC (as the Kubernetes manifests run them), scheduler metrics
EXPOSE 50060 50061 9090
ENTRYPOINT ["gavel-ng"]
CMD ["--help"]
