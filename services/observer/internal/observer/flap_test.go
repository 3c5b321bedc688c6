package observer

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/services/observer/internal/history"
)

// A leadership taken back by the leader before it within a second is a
// flap: the history marks it ("flap": true, false on the others), the
// event stream says so when the leader comes back, and
// observer_flaps_total counts it. A slow change back is not one.
func TestFlapsInTheAPIMetricsAndStream(t *testing.T) {
	nc, clock, o := startWithFakeClock(t)
	events := openStream(t, o, nil, "?cluster=default", nil)
	c := "default"
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

	// 5 leads; 10 s later 4 takes over, and 5 takes back 0.3 s after
	// that: term 2 is a flap. 20 s later 4 takes over again and 5 takes
	// back after 1.5 s: term 4 is not one.
	for i, a := range []protocol.Announcement{
		announcement(c, 5, 1, ms(0)),
		announcement(c, 4, 2, ms(10000)),
		announcement(c, 5, 3, ms(10300)),
		announcement(c, 4, 4, ms(30000)),
		announcement(c, 5, 5, ms(31500)),
	} {
		clock.Set(a.At.Time)
		announce(t, nc, a)
		o.waitFor(t, "the announcement recorded", func() bool { return o.leaderships(c) == i+1 })
	}

	var hist []map[string]any
	o.get(t, "/api/clusters/"+c+"/history", &hist)
	var got []any
	for _, l := range hist {
		got = append(got, l["flap"])
	}
	if want := []any{false, true, false, false, false}; !slices.Equal(got, want) {
		t.Errorf("history flap fields = %v, want %v", got, want)
	}
	var cur map[string]any
	o.get(t, "/api/clusters/"+c+"/leader", &cur)
	if f, ok := cur["flap"]; !ok || f != false {
		t.Errorf("leader = %v, want \"flap\": false", cur)
	}

	// The stream: a flap event for term 2 after term 3's start, and no
	// other flap event (gaps left out: each leader was last heard at its
	// announcement, so each change has one).
	var names []string
	var flapped []uint64
	for len(names) < 8 {
		e := events.event(t)
		if e.name == eventGap {
			continue
		}
		names = append(names, e.name)
		if e.name == "flap" {
			var d map[string]any
			if err := json.Unmarshal([]byte(e.data), &d); err != nil {
				t.Fatal(err)
			}
			flapped = append(flapped, uint64(d["term"].(float64)))
			if d["flap"] != true || d["cluster"] != c || d["leader"] != 4.0 {
				t.Errorf("flap event = %s, want term 2 of leader 4, with \"flap\": true", e.data)
			}
		}
	}
	// Term 1 starts; each next start follows the end before it; the
	// flap of term 2 comes right after the start of term 3.
	want := []string{eventLeadershipStart, eventLeadershipEnd, eventLeadershipStart, eventLeadershipEnd, eventLeadershipStart, "flap", eventLeadershipEnd, eventLeadershipStart}
	if !slices.Equal(names, want) || !slices.Equal(flapped, []uint64{2}) {
		t.Errorf("events = %v (flaps of terms %v), want %v (term 2)", names, flapped, want)
	}

	metrics := scrape(t, o)
	for _, want := range []string{
		`observer_flaps_total{cluster="default"} 1`,
		`observer_events_total{event="flap"} 1`,
		`observer_leader_changes_total{cluster="default"} 5`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// The page marks a flap on the timeline and in the table, keys the mark
// in its legend, and counts the cluster's flaps.
func TestPageMarksFlaps(t *testing.T) {
	c := &history.Cluster{}
	ms := func(n int) protocol.Timestamp {
		return protocol.Timestamp{Time: t0.Add(time.Duration(n) * time.Millisecond)}
	}
	c.Apply(
		history.Record{Kind: history.KindLeader, Term: 1, Leader: 5, Algorithm: protocol.Bully, At: ms(0)},
		history.Record{Kind: history.KindEnd, Term: 1, At: ms(10000), Reason: string(history.EndSuperseded)},
		history.Record{Kind: history.KindLeader, Term: 2, Leader: 4, Algorithm: protocol.Bully, At: ms(10000)},
		history.Record{Kind: history.KindEnd, Term: 2, At: ms(10040), Reason: string(history.EndSuperseded)},
		history.Record{Kind: history.KindLeader, Term: 3, Leader: 5, Algorithm: protocol.Bully, At: ms(10040)},
	)
	var b strings.Builder
	if err := pageTemplate.Execute(&b, pageView{Clusters: []clusterView{newClusterView("bully", c, t0.Add(time.Minute))}}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		`<span class="key flap"></span>`,          // the legend's key
		`data-flaps="1"`,                          // the count, for scripts and tests
		`1 flap`,                                  // and for people
		`class="seg lead flap"`,                   // the timeline's mark
		`title="node 4, term 2`,                   // on term 2's bar
		`taken back by node 5 after 40ms: a flap`, // which says why
		`<tr class="flap" data-term="2">`,         // the table's row
		`↺ flap`,                                  // with its mark
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if n := strings.Count(page, `class="seg lead flap"`); n != 1 {
		t.Errorf("the timeline marks %d flaps, want 1 (term 2)", n)
	}
	if n := strings.Count(page, `<tr class="flap"`); n != 1 {
		t.Errorf("the table marks %d flaps, want 1 (term 2)", n)
	}
}
