package node_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/protocol"
)

// GET /status answers with an ETag; with ?wait= and that ETag in
// If-None-Match it waits for a change, answering 304 if none comes, at
// once if the ETag is another, 400 for a bad wait, and the new status as
// soon as the node's changes.
func TestStatusWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSim(t, protocol.Bully, 3, 7)
		m := s.add(7, nil)
		h := m.Handler()
		get := func(path, etag string) (*httptest.ResponseRecorder, protocol.Status) {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			if etag != "" {
				req.Header.Set("If-None-Match", etag)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			var st protocol.Status
			if rec.Code == http.StatusOK && path != "/healthz" {
				if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
					t.Errorf("%s: %v", path, err)
				}
			}
			return rec, st
		}
		rec, st := get("/status", "")
		etag := rec.Header().Get("ETag")
		if etag == "" || etag != st.ETag() {
			t.Fatalf("ETag %q, want %q", etag, st.ETag())
		}
		start := time.Now()
		if rec, _ := get("/status?wait=30ms", etag); rec.Code != http.StatusNotModified || time.Since(start) != 30*time.Millisecond {
			t.Errorf("wait with no change: got %d after %v, want 304 after 30ms", rec.Code, time.Since(start))
		}
		if rec, _ := get("/status?wait=30ms", `"other"`); rec.Code != http.StatusOK {
			t.Errorf("wait with another ETag: got %d, want 200 at once", rec.Code)
		}
		for _, bad := range []string{"x", "-1s", "6m"} {
			if rec, _ := get("/status?wait="+bad, etag); rec.Code != http.StatusBadRequest {
				t.Errorf("wait=%s: got %d, want 400", bad, rec.Code)
			}
		}
		// A long wait returns when the node, started now, leads.
		waited := make(chan protocol.Status, 1)
		go func() {
			_, st := get("/status?wait=5m", etag)
			waited <- st
		}()
		synctest.Wait()
		m.run()
		select {
		case st := <-waited:
			if st.ETag() == etag {
				t.Errorf("the wait returned the same status %+v", st)
			}
		case <-time.After(node.MaxStatusWait):
			t.Fatal("the wait did not return when the status changed")
		}
		if rec, _ := get("/healthz", ""); rec.Code != http.StatusOK {
			t.Errorf("/healthz of a running node: %d, want 200", rec.Code)
		}
	})
}
