# syntax=docker/dockerfile:1
# kube-py-scheduler image: build a wheel in one stage, install it into a clean slim image.

ARG PYTHON_VERSION=3.11.7

FROM python:${PYTHON_VERSION}-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY scheduler ./scheduler
RUN pip install --no-cache-dir --upgrade pip build \
 && python -m build --wheel --outdir /dist \
 && pip wheel --no-cache-dir --wheel-dir /dist /dist/*.whl

FROM python:${PYTHON_VERSION}-slim-bookworm
LABEL org.opencontainers.image.title="kube-py-scheduler" \
      org.opencontainers.image.description="A secondary Kubernetes scheduler with kube-scheduler semantics, gang scheduling and an embedded sandbox API server" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="0.1.0"
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /dist /tmp/dist
RUN pip install --no-cache-dir --no-index --find-links=/tmp/dist kube-py-scheduler \
 && rm -rf /tmp/dist \
 && groupadd --system --gid 10001 scheduler \
 && useradd --system --uid 10001 --gid scheduler --no-create-home --shell /usr/sbin/nologin scheduler
USER 10001:10001
EXPOSE 10259
ENTRYPOINT ["kube-py-scheduler"]
CMD ["run"]
