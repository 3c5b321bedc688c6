package e2e

import (
	"os"
	"strings"
	"testing"
)

// TestMain sets testcontainers up for machines where no image can be
// pulled, before any of its code reads its configuration, unless the
// environment says otherwise:
//
//   - the reaper (Ryuk) is off, since its image would have to be pulled;
//     every test removes its own containers and network in t.Cleanup;
//   - with a local Docker socket (DOCKER_HOST unset or unix://), the
//     containers' published ports are reached on 127.0.0.1, instead of a
//     host that testcontainers may derive from the environment wrongly.
func TestMain(m *testing.M) {
	setDefault("TESTCONTAINERS_RYUK_DISABLED", "true")
	if host := os.Getenv("DOCKER_HOST"); host == "" || strings.HasPrefix(host, "unix://") {
		setDefault("TESTCONTAINERS_HOST_OVERRIDE", "127.0.0.1")
	}
	os.Exit(m.Run())
}

func setDefault(key, value string) {
	if _, ok := os.LookupEnv(key); !ok {
		os.Setenv(key, value)
	}
}
