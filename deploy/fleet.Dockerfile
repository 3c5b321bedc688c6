# The fleet example's image (examples/fleet, docs/fleet.md): a static
# binary built by the Go toolchain (CGO_ENABLED=0, see Taskfile.yml) on an
# empty base, as deploy/node.Dockerfile, so it builds without any registry.
# Every replica runs it unchanged: its member ID comes from its hostname
# unless NODE_ID is set, and its data from a temporary directory in the
# container unless ELECTION_DATA is set.
# Build context: the repository root, with the binaries in bin/.
FROM scratch
COPY bin/fleet /fleet
COPY bin/healthcheck /healthcheck
ENV HTTP_ADDR=:8080
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=2s --start-period=5s --retries=3 CMD ["/healthcheck", "http://127.0.0.1:8080/healthz"]
ENTRYPOINT ["/fleet"]
