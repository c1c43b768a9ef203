# blastrate service image: slim Python 3.11, pinned dependencies, non-root, health-checked.
#
#   docker build -t blastrate .
#   docker run --rm -p 8000:8000 blastrate
#
# Limits are set with BLASTRATE_* environment variables (see app/settings.py), e.g.
#   docker run -e BLASTRATE_SOLVE_TIMEOUT_S=30 -p 8000:8000 blastrate

# -- build: install the package and its pinned dependencies into a virtualenv ------------
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/blastrate
WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY srn/ srn/
COPY host/ host/
COPY queues/ queues/
COPY transport/ transport/
COPY datamover/ datamover/
COPY planning/ planning/
COPY app/ app/
RUN /opt/blastrate/bin/pip install -c constraints.txt .

# -- runtime: the virtualenv only, run as an unprivileged user ---------------------------
FROM python:3.11-slim
# One BLAS thread per process: the models' dense matrices are small, and BLAS threads
# would only contend with the server's workers (see scripts/_venv.sh).
ENV PATH=/opt/blastrate/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    OPENBLAS_NUM_THREADS=1 \
    OMP_NUM_THREADS=1 \
    NUMBA_CACHE_DIR=/tmp/numba-cache
COPY --from=build /opt/blastrate /opt/blastrate
# SuiteSparse's AMD ordering for the engine's sparse LU (srn/_ordering.py): without it the
# route falls back to SuperLU's own order, with the same answers in about twice the time.
RUN apt-get update \
    && (apt-cache show libamd3 >/dev/null 2>&1 && amd=libamd3 || amd=libamd2; \
        apt-get install -y --no-install-recommends "$amd") \
    && rm -rf /var/lib/apt/lists/*
RUN useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin blastrate
USER blastrate
WORKDIR /tmp
EXPOSE 8000
# Liveness through the real HTTP stack; the stdlib client keeps the image free of curl.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status == 200 else 1)"]
CMD ["blastrate", "serve", "--host", "0.0.0.0", "--port", "8000"]
