# syntax=docker/dockerfile:1
# scheduler-service: the stateless gRPC decision service.
# Build from the repository root (the whole workspace is the context):
#   docker build -f deploy/docker/scheduler-service.Dockerfile -t ghcr.io/placement/scheduler-service:0.1.0 .

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
# The registry and target caches survive between builds (BuildKit); the binary is copied out of
# the cached target directory because cache mounts are not part of the image.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p scheduler-service --bin scheduler-service \
    && install -D -m 0755 target/release/scheduler-service /out/scheduler-service

# glibc and libgcc, no shell; runs as uid/gid 65532 ("nonroot").
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/scheduler-service /usr/local/bin/scheduler-service
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/scheduler-service"]
# In a pod, listen on all addresses (the defaults are for a workstation).
CMD ["--listen=0.0.0.0:50051", "--metrics-listen=0.0.0.0:9464"]
EXPOSE 50051 9464
