package observer

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-election/baton/internal/batontest"
)

// The page's stream, without a browser: on connect a "cluster" event per
// known cluster, then one each time a cluster changes, each the HTML
// section that the page swaps in.
func TestPageEventStream(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	nc := batontest.Connect(t, url)
	o := startObserver(t, testConfig(url, t.TempDir()), nil)
	announce(t, nc, announcement("default", 3, 1, t0))
	o.waitFor(t, "term 1", func() bool { return o.leaderships("default") == 1 })

	resp, err := http.Get("http://" + o.Addr() + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), `id="cluster-default"`) || !strings.Contains(string(page), `data-term="1"`) {
		t.Errorf("GET / lacks the section of default at term 1")
	}

	s := openEvents(t, o, nil, "/events", nil)
	e := s.event(t)
	if e.name != "cluster" || !strings.Contains(e.data, `id="cluster-default"`) || !strings.Contains(e.data, `data-leader="3" data-term="1"`) {
		t.Fatalf("first page event = %s %.200q, want the section of default, node 3 at term 1", e.name, e.data)
	}
	announce(t, nc, announcement("default", 5, 2, t0.Add(time.Second)))
	// The recording of term 1 may still notify after the connection:
	// read on until the section shows term 2.
	for {
		e = s.event(t)
		if e.name != "cluster" || !strings.Contains(e.data, `id="cluster-default"`) {
			t.Fatalf("page event = %s %.200q, want a section of default", e.name, e.data)
		}
		if strings.Contains(e.data, `data-leader="5" data-term="2"`) {
			break
		}
	}
}
