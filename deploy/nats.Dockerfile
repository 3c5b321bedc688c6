# The NATS server image: nats-server built by the Go toolchain from the
# github.com/nats-io/nats-server/v2 module pinned in go.mod (CGO_ENABLED=0,
# see Taskfile.yml), on an empty base, so it builds without any registry.
# With registry access, the official image (nats:2-alpine or nats:2) takes
# the same configuration file and command-line flags. The configuration
# (deploy/nats.conf, which includes accounts.conf: internal/natsconf/accounts.conf,
# where the Go code that renders and embeds it lives) reads the users'
# passwords from NATS_*_PASSWORD in the environment.
# Build context: the repository root, with the binaries in bin/.
FROM scratch
COPY bin/nats-server /nats-server
COPY bin/healthcheck /healthcheck
COPY deploy/nats.conf /etc/nats/nats.conf
COPY internal/natsconf/accounts.conf /etc/nats/accounts.conf
EXPOSE 4222 6222 8222
VOLUME /data
HEALTHCHECK --interval=5s --timeout=2s --start-period=5s --retries=5 CMD ["/healthcheck", "http://127.0.0.1:8222/healthz"]
ENTRYPOINT ["/nats-server", "--config", "/etc/nats/nats.conf"]
