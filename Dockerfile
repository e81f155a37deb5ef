# syntax=docker/dockerfile:1
# Harbormaster's container image, in two stages: a Go toolchain builds the
# binary (cgo: the PostgreSQL parser is C, so the first build compiles it
# for about 6 minutes), then a slim Debian holds only the binary, the CA
# certificates and ssh-keygen (for operators who sign inside the container).
#
#   docker build -t harbormaster .
#   docker run --rm harbormaster version
#
# deploy/README.md says how to run it (compose.yaml, the config, the keys).

FROM golang:1.26-bookworm AS build
WORKDIR /src
# The modules first, so a change to the code does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# -trimpath: no build paths in the binary. The commit harbormaster version
# prints is Go's VCS stamp, recorded because .git is in the build context
# (.dockerignore keeps it); without it the commit reads "unknown".
RUN --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=1 go build -trimpath -ldflags="-s -w" -o /out/harbormaster ./cmd/harbormaster

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates openssh-client \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /var/lib/harbormaster --create-home harbormaster
COPY --from=build /out/harbormaster /usr/local/bin/harbormaster
USER harbormaster
WORKDIR /var/lib/harbormaster
# The API and MCP (listen in the config).
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/harbormaster"]
CMD ["serve", "--config", "/etc/harbormaster/harbormaster.yaml"]
