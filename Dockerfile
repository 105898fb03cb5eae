# batchor as a container image, built from this checkout (never from a registry name: PyPI's
# `batchor` is another project):
#   docker build -t batchor:0.2.0 .
#   docker run --rm -v "$PWD:/job" -e OPENAI_API_KEY batchor:0.2.0 plan specs/reviews.yaml
# examples/deploy/ runs it with PostgreSQL (compose, Kubernetes); docs/guides/deploy.md explains.

# Build the wheel in a stage of its own: the image gets the package, not the source tree.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY batchor ./batchor
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /dist .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=build /dist /dist
RUN pip install --no-cache-dir /dist/*.whl \
    && rm -rf /dist \
    && groupadd --gid 10001 batchor \
    && useradd --create-home --uid 10001 --gid 10001 batchor \
    && install -d -o 10001 -g 10001 /job
# The job folder (specs, data, outputs, .batchor/ state) is mounted or copied here.
WORKDIR /job
# The user batchor, by number: Kubernetes' runAsNonRoot can verify a numeric user.
USER 10001:10001
ENTRYPOINT ["batchor"]
CMD ["--help"]
