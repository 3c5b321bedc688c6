# The lying member's image, for the end-to-end tests only: a static binary
# (e2e/liar, CGO_ENABLED=0) on an empty base, as deploy/node.Dockerfile.
# Build context: a directory with the binaries in bin/.
FROM scratch
COPY bin/liar /liar
COPY bin/healthcheck /healthcheck
ENV HTTP_ADDR=:8080
EXPOSE 8080
ENTRYPOINT ["/liar"]
