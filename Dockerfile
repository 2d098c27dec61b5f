# syntax=docker/dockerfile:1
# The fedfailover manager: a static binary on distroless, running as non-root.
#   docker build -t ghcr.io/fedfailover/fedfailover:0.1.0 .

FROM golang:1.26 AS builder
ARG TARGETOS=linux
ARG TARGETARCH
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
    go build -trimpath -ldflags="-s -w" -o /out/manager ./cmd/manager

FROM gcr.io/distroless/static:nonroot
COPY --from=builder /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
