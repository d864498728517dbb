# latent-node container image: a static, non-root binary on distroless.
#
#   docker build \
#     --build-arg VERSION="$(git describe --tags --always --dirty)" \
#     --build-arg COMMIT="$(git rev-parse HEAD)" \
#     --build-arg DATE="$(git log -1 --format=%cI)" \
#     -t latent-node .
#   docker run --rm -p 8080:8080 -v latent-data:/var/lib/latent-node \
#     -v "$PWD/node.toml:/etc/latent-node/node.toml:ro" latent-node
#
# podman build takes the same arguments.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# `make dist`'s flags (no cgo, no paths, no build id, no VCS stamp) plus -s -w
# (no symbol table or DWARF: a smaller image); the version, commit and date
# come from the build arguments (an empty version prints as "(devel)").
ARG VERSION=""
ARG COMMIT=""
ARG DATE=""
# production.toml listens on loopback (TLS in front on the host); inside a
# container the engine publishes the port, so the image's copy listens on the
# container's interfaces. Its key hashes are placeholders: mount your own
# node.toml. The build fails if `latent-node check` refuses the copy.
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
      -ldflags "-s -w -buildid= -X main.version=${VERSION} -X main.commit=${COMMIT} -X main.date=${DATE}" \
      -o /out/latent-node ./cmd/latent-node \
 && mkdir -p /out/data /out/etc \
 && sed 's/^listen = "127.0.0.1:8080"/listen = "0.0.0.0:8080"/' deploy/config/production.toml > /out/etc/node.toml \
 && grep -q '^listen = "0.0.0.0:8080"' /out/etc/node.toml \
 && /out/latent-node check --config /out/etc/node.toml

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/latent-node /latent-node
COPY --from=build /out/etc/node.toml /etc/latent-node/node.toml
COPY --from=build --chown=65532:65532 /out/data /var/lib/latent-node
COPY LICENSE /LICENSE
USER 65532:65532
EXPOSE 8080
VOLUME /var/lib/latent-node
ENTRYPOINT ["/latent-node"]
CMD ["serve", "--config", "/etc/latent-node/node.toml"]
