package observer

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-election/baton/internal/batontest"
)

// refused checks that GET path is refused for the stream limit: 503 with
// Retry-After, and a JSON error under /api/.
func refused(t *testing.T, o *running, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+o.Addr()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("GET %s with every stream slot taken = %s, Retry-After %q; want 503 with Retry-After", path, resp.Status, resp.Header.Get("Retry-After"))
	}
	body, _ := io.ReadAll(resp.Body)
	if strings.HasPrefix(path, "/api/") {
		var e errorJSON
		if err := json.Unmarshal(body, &e); err != nil || !strings.Contains(e.Error, "too many event streams") || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("GET %s refused with %q %s, want a JSON error about too many event streams", path, resp.Header.Get("Content-Type"), body)
		}
	}
}

// openSlots is how many event streams hold a slot.
func (r *running) openSlots() int { return len(r.streamSlots) }

// At most MaxStreams event streams are open at once, GET /api/events and
// the page's GET /events together: one more is refused with 503 and
// Retry-After, and the slot of a client that leaves is free again.
func TestEventStreamLimit(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	cfg := testConfig(url, t.TempDir())
	cfg.MaxStreams = 2
	o := startObserver(t, cfg, nil)
	api := openStream(t, o, nil, "", nil)
	openEvents(t, o, nil, "/events", nil)
	refused(t, o, "/api/events")
	refused(t, o, "/events")

	api.resp.Body.Close() // the client leaves
	o.waitFor(t, "the slot of the client that left", func() bool { return o.openSlots() == 1 })
	s := openStream(t, o, nil, "?cluster=a", nil)
	if e := s.next(t); len(e.comments) == 0 {
		t.Errorf("first message of a stream in the freed slot = %+v, want the opening comment", e)
	}
	refused(t, o, "/api/events")
}

// A stream ends once it has lasted its lifetime, and frees its slot; the
// client reconnects (EventSource does by itself).
func TestEventStreamEndsAfterItsLifetime(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	o := startObserver(t, testConfig(url, t.TempDir()), nil, func(o *Observer) { o.streamLifetime = 100 * time.Millisecond })
	for _, path := range []string{"/api/events", "/events"} {
		s := openEvents(t, o, nil, path, nil)
		// Ends well before the request's own deadline (waitTimeout),
		// which would make this an error.
		if _, err := io.ReadAll(s.r); err != nil {
			t.Fatalf("GET %s: reading to the end: %v; want the stream ended by the server after its lifetime", path, err)
		}
	}
	o.waitFor(t, "the slots freed", func() bool { return o.openSlots() == 0 })
}
