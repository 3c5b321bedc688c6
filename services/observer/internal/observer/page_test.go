package observer

import (
	"fmt"
	"io"
	"net/http"
	"slices"
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
		if e.name == "summary" {
			continue // the summary of the leaders, sent again after changes
		}
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
		if err := pageTemplate.Execute(&b, pageView{Clusters: []clusterView{newClusterView("p", c, t0.Add(time.Minute))}}); err != nil {
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

// sections returns the names of the clusters whose sections page holds,
// in order.
func sections(page string) []string {
	var out []string
	for _, part := range strings.Split(page, `<section class="cluster" id="cluster-`)[1:] {
		out = append(out, part[:strings.IndexByte(part, '"')])
	}
	return out
}

// With a thousand clusters the page shows one page of them at a time, in
// natural order, with a search box, the paging and the summary of the
// leaders per member; the search and the member filter select them.
func TestPageWithThousandsOfClusters(t *testing.T) {
	a := shards(t, 1000) // "lonely", shard-0 … shard-999
	page := a.get(t, "/")
	got := sections(page)
	if len(got) != pageClusters || got[0] != "lonely" || got[1] != "shard-0" || got[11] != "shard-10" {
		t.Fatalf("GET / shows %d sections %v, want the first %d in natural order", len(got), got, pageClusters)
	}
	for _, want := range []string{
		`<form method="get" action="/" role="search">`, `name="q" value=""`,
		"1–20 of 1001 clusters", "page 1 of 51", `<a href="/?page=2" rel="next">next ›</a>`, `<span class="off">‹ previous</span>`,
		`<section id="summary" class="summary">`, "<strong>1001 clusters</strong>: 990 with a leader",
		`<a class="none" href="/?leader=none">11 without</a>`,
		`data-member="1" data-clusters="200"`, `data-member="3" data-clusters="190"`, `href="/?leader=3"`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("GET / lacks %q", want)
		}
	}
	if len(page) > 1<<20 {
		t.Errorf("GET / is %d bytes with 1001 clusters: the page renders more than a page of them", len(page))
	}

	for _, tc := range []struct {
		query string
		first []string
		n     int
		has   []string
	}{
		{"page=2", []string{"shard-19", "shard-20"}, 20, []string{"21–40 of 1001 clusters", `<a href="/" rel="prev">`, `<a href="/?page=3" rel="next">`}},
		{"page=51", []string{"shard-999"}, 1, []string{"1001–1001 of 1001 clusters", "page 51 of 51", `<span class="off">next ›</span>`}},
		{"page=900", []string{"shard-999"}, 1, []string{"page 51 of 51"}},
		{"page=nonsense", []string{"lonely"}, 20, []string{"page 1 of 51"}},
		{"q=shard-99", []string{"shard-99", "shard-990"}, 11, []string{`value="shard-99"`, "1–11 of 11 clusters", `<a href="/">all clusters</a>`}},
		{"q=SHARD-99&page=2", []string{"shard-99"}, 11, []string{"1–11 of 11 clusters"}},
		{"q=1&page=2", []string{"shard-101", "shard-102"}, 20, []string{`<a href="/?page=3&amp;q=1" rel="next">`}},
		{"leader=3", []string{"shard-2", "shard-12"}, 20, []string{"1–20 of 190 clusters", `type="hidden" name="leader" value="3"`}},
		{"leader=none", []string{"lonely", "shard-7", "shard-107"}, 11, []string{"1–11 of 11 clusters"}},
		{"q=nothing", nil, 0, []string{"No cluster matches “nothing”.", "no cluster"}},
	} {
		page := a.get(t, "/?"+tc.query)
		got := sections(page)
		if len(got) != tc.n || !slices.Equal(got[:len(tc.first)], tc.first) {
			t.Errorf("GET /?%s shows %d sections %v, want %d from %v", tc.query, len(got), got, tc.n, tc.first)
		}
		for _, want := range tc.has {
			if !strings.Contains(page, want) {
				t.Errorf("GET /?%s lacks %q", tc.query, want)
			}
		}
	}
}

// A handful of clusters look as they did: every one shown, no search box
// and no paging; the summary shows from two clusters on.
func TestPageWithAHandfulOfClusters(t *testing.T) {
	a := newAPI(t, &fakeClock{now: t0.Add(time.Minute)})
	a.apply(t, "bully", leaderRecord(3, 1, t0))
	page := a.get(t, "/")
	if got := sections(page); fmt.Sprint(got) != "[bully]" {
		t.Errorf("GET / with one cluster shows %v", got)
	}
	if !strings.Contains(page, `<section id="summary" class="summary" hidden>`) {
		t.Error("GET / with one cluster shows the summary")
	}
	for _, name := range []string{"paxos", "ring"} {
		a.apply(t, name, leaderRecord(5, 1, t0))
	}
	page = a.get(t, "/")
	if got := sections(page); fmt.Sprint(got) != "[bully paxos ring]" {
		t.Errorf("GET / with three clusters shows %v", got)
	}
	for _, unwanted := range []string{"<form", `class="paging"`} {
		if strings.Contains(page, unwanted) {
			t.Errorf("GET / with three clusters has %q: a search or paging for a handful", unwanted)
		}
	}
	for _, want := range []string{"<strong>3 clusters</strong>: 3 with a leader; the clusters each member leads:", `data-member="3" data-clusters="1"`, `data-member="5" data-clusters="2"`} {
		if !strings.Contains(page, want) {
			t.Errorf("GET / with three clusters lacks %q", want)
		}
	}
}

// The page's stream sends the sections of the browser's page only (same
// search), then those of its clusters that change, and the summary
// again after changes.
func TestPageEventStreamFollowsItsPage(t *testing.T) {
	a := shards(t, 1000)
	a.addr = strings.TrimPrefix(a.srv.URL, "http://")
	s := openEvents(t, &running{Observer: a.Observer}, nil, "/events?q=shard-99", nil)
	var got []string
	for len(got) < 11 {
		e := s.event(t)
		if e.name != "cluster" {
			t.Fatalf("event %s before the page's sections", e.name)
		}
		got = append(got, sections(e.data)...)
	}
	if got[0] != "shard-99" || got[1] != "shard-990" || got[10] != "shard-999" {
		t.Errorf("the stream's first sections: %v, want shard-99 and shard-990 to shard-999", got)
	}
	change := func(name string, leader uint64) {
		kept, err := a.store.Apply(name, leaderRecord(leader, 2, t0.Add(time.Minute)))
		if err != nil {
			t.Fatal(err)
		}
		a.changed(name, kept)
	}
	change("shard-5", 2)   // not on the page
	change("shard-990", 4) // on it
	summary := false
	for {
		e := s.event(t)
		if e.name == "summary" {
			summary = true
			if !strings.Contains(e.data, `id="summary"`) {
				t.Errorf("summary event %.200q, want the summary section", e.data)
			}
			continue
		}
		if sec := sections(e.data); fmt.Sprint(sec) != "[shard-990]" || !strings.Contains(e.data, `data-leader="4" data-term="2"`) {
			t.Fatalf("after the changes: section %v %.100q, want shard-990 led by 4 in term 2 (shard-5 is not on the page)", sec, e.data)
		}
		break
	}
	if !summary {
		t.Error("no summary event before the changed section")
	}
}
