# syntax=docker/dockerfile:1
# The fedfailover manager image for those building with a container daemon.
# `make image` builds the same image without one (hack/tools/image): a
# static binary on an empty base with the user 65532, entrypoint /manager.
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg VERSION=v0.1.0 --build-arg REVISION=$(git rev-parse HEAD) \
#     -t registry.example.com/fedfailover:0.1.0 .

FROM golang:1.26 AS builder
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=dev
ARG REVISION=unknown
WORKDIR /src

# Dependencies first, so they stay cached while the code changes.
COPY go.mod go.sum ./
RUN go mod download

# Only the packages the manager is built from.
COPY api/ api/
COPY cmd/manager/ cmd/manager/
COPY controllers/ controllers/
COPY internal/ internal/

RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags="-s -w \
      -X github.com/fedfailover/fedfailover/internal/version.version=${VERSION} \
      -X github.com/fedfailover/fedfailover/internal/version.revision=${REVISION}" \
    -o /out/manager ./cmd/manager

# The rest of the root filesystem `make image` writes: the user 65532 and
# its home, a world-writable /tmp.
RUN mkdir -p /out/rootfs/etc /out/rootfs/home/nonroot /out/rootfs/tmp && \
    printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >/out/rootfs/etc/passwd && \
    printf 'root:x:0:\nnonroot:x:65532:\n' >/out/rootfs/etc/group && \
    chown 65532:65532 /out/rootfs/home/nonroot && chmod 700 /out/rootfs/home/nonroot && chmod 1777 /out/rootfs/tmp

FROM scratch
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title=fedfailover \
      org.opencontainers.image.source=https://github.com/fedfailover/fedfailover \
      org.opencontainers.image.licenses=Apache-2.0 \
      org.opencontainers.image.version=${VERSION} \
      org.opencontainers.image.revision=${REVISION}
COPY --from=builder /out/rootfs/ /
COPY --from=builder /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
