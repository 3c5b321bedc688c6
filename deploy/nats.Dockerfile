# The NATS server image: cmd/natsd, which is nats-server (the
# github.com/nats-io/nats-server/v2 module pinned in go.mod: the same
# command line, configuration file and signals) and also runs the server's
# check of member credentials in-process when NATS_CALLOUT_ISSUER_SEED_FILE,
# NATS_CALLOUT_USER_SEED_FILE and NATS_CALLOUT_AUTHORITIES_DIR are set
# (docs/configuration.md). A static binary (CGO_ENABLED=0, see
# Taskfile.yml) on an empty base, so it builds without any registry. The
# official image (nats:2-alpine or nats:2) takes the same configuration
# file and flags, but without the check no member connects with its
# credential. The configuration
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
