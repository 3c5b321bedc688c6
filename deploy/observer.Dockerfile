# The observer image: a static binary built by the Go toolchain (CGO_ENABLED=0,
# see Taskfile.yml) on an empty base, so it builds without any registry.
# Build context: the repository root, with the binaries in bin/.
FROM scratch
COPY bin/observer /observer
COPY bin/healthcheck /healthcheck
ENV HTTP_ADDR=:8080 OBSERVER_DATA=/data
VOLUME /data
EXPOSE 8080
HEALTHCHECK --interval=5s --timeout=2s --start-period=5s --retries=3 CMD ["/healthcheck", "http://127.0.0.1:8080/healthz"]
ENTRYPOINT ["/observer"]
