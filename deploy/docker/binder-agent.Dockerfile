# syntax=docker/dockerfile:1
# binder-agent: the in-cluster binder (run with `binder-agent run`).
# Build from the repository root (the whole workspace is the context):
#   docker build -f deploy/docker/binder-agent.Dockerfile -t ghcr.io/placement/binder-agent:0.1.0 .

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
# The registry and target caches survive between builds (BuildKit); the binary is copied out of
# the cached target directory because cache mounts are not part of the image.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p binder-agent --bin binder-agent \
    && install -D -m 0755 target/release/binder-agent /out/binder-agent

# glibc and libgcc, no shell; runs as uid/gid 65532 ("nonroot").
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/binder-agent /usr/local/bin/binder-agent
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/binder-agent"]
CMD ["run"]
EXPOSE 10251
