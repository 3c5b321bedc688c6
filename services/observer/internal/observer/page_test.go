package observer

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/services/observer/internal/history"
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

// The page says what it shows: the legend's leadership swatch shows a
// colour per node, as the bars do; counts agree with their number ("1
// leadership", "2 leaderships"); and a gap or an end the observer did not
// see says why it is unknown.
func TestPageSaysWhatItShows(t *testing.T) {
	c := &history.Cluster{Leaderships: []history.Leadership{
		{Term: 1, Leader: 3, Algorithm: "paxos", StartedAt: t0, EndedAt: t0.Add(time.Second), EndReason: history.EndUnobserved},
	}}
	render := func(c *history.Cluster) string {
		var b strings.Builder
		if err := pageTemplate.Execute(&b, []clusterView{newClusterView("p", c, t0.Add(time.Minute))}); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	page := render(c)
	for _, want := range []string{`class="key nodes"`, "a colour per node", "1 leadership recorded",
		`title="the observer was not watching when this leadership ended`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page with one unobserved leadership lacks %q", want)
		}
	}
	c.Leaderships = append(c.Leaderships, history.Leadership{Term: 2, Leader: 5, Algorithm: "paxos", StartedAt: t0.Add(3 * time.Second)})
	page = render(c)
	for _, want := range []string{"2 leaderships recorded", `<abbr title="the observer did not see how the previous leadership ended`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page with a leadership after an unobserved end lacks %q", want)
		}
	}
	// Under the timeline, each node that leads in it is keyed with the
	// colour of its bars.
	for _, id := range []uint64{3, 5} {
		bar := fmt.Sprintf(`--hue:%d" title="node %d,`, hue(id), id)
		key := fmt.Sprintf(`<span class="key" style="--hue:%d"></span> node %d</span>`, hue(id), id)
		if !strings.Contains(page, bar) || !strings.Contains(page, key) {
			t.Errorf("node %d: the page lacks its bar %q or its key %q in the same colour", id, bar, key)
		}
	}
	if strings.Contains(page, "<td>?</td>") {
		t.Error("the page shows a bare ? for an unknown gap")
	}
}
