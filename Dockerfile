# syntax=docker/dockerfile:1
#
# Images for the worker and the reference API (cmd/demoapi), one build
# stage for both and one target each:
#
#   docker build --target worker  -t idemhttp-worker .
#   docker build --target demoapi -t idemhttp-demoapi .
#
# docker-compose.yml builds both. The binaries are static (CGO_ENABLED=0) and
# run as an unprivileged user on debian-slim, whose bash also serves the
# compose health check.

ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ENV CGO_ENABLED=0
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags="-s -w" -o /out/worker ./worker && \
    go build -trimpath -ldflags="-s -w" -o /out/demoapi ./cmd/demoapi

FROM debian:12-slim AS runtime
# CA certificates for HTTPS APIs and Temporal Cloud.
COPY --from=build /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
USER 65532:65532

FROM runtime AS demoapi
COPY --from=build /out/demoapi /usr/local/bin/demoapi
EXPOSE 8081
CMD ["demoapi", "--addr", ":8081"]

FROM runtime AS worker
COPY --from=build /out/worker /usr/local/bin/worker
CMD ["worker"]
