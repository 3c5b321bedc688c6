package observer

import (
	"bytes"
	"cmp"
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/services/observer/internal/history"
)

//go:embed web
var embedded embed.FS

// webFS holds page.html and static/ (the stylesheet and the script).
var webFS, _ = fs.Sub(embedded, "web")

var pageTemplate = template.Must(template.New("page.html").Funcs(template.FuncMap{
	"clock": func(t time.Time) string { return t.UTC().Format("15:04:05.000") },
	"full":  func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
}).ParseFS(webFS, "page.html"))

// Shown on the page per cluster: the timeline covers the last
// timelineLeaderships, the table the last tableLeaderships.
const (
	timelineLeaderships = 30
	tableLeaderships    = 10
	pageSplitBrains     = 5
)

// clusterView is what the page shows of one cluster.
type clusterView struct {
	Name    string
	Current *history.Leadership
	// LeaderlessSince is set when the latest leadership has ended.
	LeaderlessSince time.Time
	Segments        []segment
	Rows            []row
	SplitBrains     []history.SplitBrain
	// Faulty are the members proven to have lied, with their proofs.
	Faulty []faultyView
	// Nodes key the colours of the timeline: each node that leads in it,
	// by ID, with its hue.
	Nodes       []nodeKey
	Leaderships int
	// Flaps counts the flaps among the leaderships the history holds.
	Flaps int
	// Start and Now bound the timeline.
	Start, Now time.Time
	// Dynamic is set for a cluster with dynamic membership: one that
	// has had members. Members are those present now, by ID;
	// MemberEvents the last joins and leaves, newest first.
	Dynamic      bool
	Members      []memberView
	MemberEvents []history.MemberEvent
}

// faultyView is a faulty member as the page shows it: what it said
// twice, differently, and the signatures that prove it said both.
type faultyView struct {
	Member uint64
	At     time.Time
	// What says in words what the two statements contradict.
	What string
	// First and Second describe the statements; FirstSig and SecondSig
	// are their signatures in base64.
	First, Second       string
	FirstSig, SecondSig string
	// Proof is the evidence's JSON, for checking it elsewhere.
	Proof string
}

func newFaultyView(f history.Faulty) faultyView {
	a, b := f.Evidence.First.Statement, f.Evidence.Second.Statement
	v := faultyView{Member: f.Member, At: f.At,
		First: describe(a), Second: describe(b),
		FirstSig:  base64.StdEncoding.EncodeToString(f.Evidence.First.Signature),
		SecondSig: base64.StdEncoding.EncodeToString(f.Evidence.Second.Signature)}
	switch a.Kind {
	case certify.KindVote:
		v.What = fmt.Sprintf("voted for two leaders in term %d", a.Term)
	case certify.KindRelay:
		v.What = fmt.Sprintf("relayed two values of order %d of term %d", a.Order, a.Term)
	default:
		v.What = "signed two contradicting statements"
	}
	if proof, err := json.Marshal(f.Evidence); err == nil {
		v.Proof = string(proof)
	}
	return v
}

// describe renders a statement for the page.
func describe(s certify.Statement) string {
	switch s.Kind {
	case certify.KindVote:
		return fmt.Sprintf("vote of member %d for leader %d in term %d", s.Member, s.Leader, s.Term)
	case certify.KindRelay:
		return fmt.Sprintf("relay by member %d of order %d of term %d along %v, value sha256 %x", s.Member, s.Order, s.Term, s.Path, s.Digest[:8])
	}
	return fmt.Sprintf("%s of member %d in term %d", s.Kind, s.Member, s.Term)
}

// nodeKey is one node's colour in a timeline's key.
type nodeKey struct {
	ID  uint64
	Hue int
}

// segment is one stretch of a timeline: a leadership or a gap.
type segment struct {
	// Kind is lead, gap (a known leaderless gap) or unknown (the
	// observer did not see how the previous leadership ended).
	Kind string
	// Grow is its length in seconds, the flex-grow of its box.
	Grow  float64
	Hue   int
	Label string
	Title string
	Split bool
	// Flap marks a leadership the leader before it took back within a
	// second (history.Cluster.Flap).
	Flap bool
}

// row is one leadership in the table.
type row struct {
	history.Leadership
	Duration string
	// Gap is how long the cluster had no leader before it; GapUnknown
	// when the observer did not see the previous leadership end.
	Gap        string
	GapUnknown bool
	Split      bool
	Flap       bool
}

// Class is the row's class attribute: split, flap, both or none.
func (r row) Class() string {
	var classes []string
	if r.Split {
		classes = append(classes, "split")
	}
	if r.Flap {
		classes = append(classes, "flap")
	}
	return strings.Join(classes, " ")
}

// EndWhy explains the leadership's end reason in words, for the page.
func (r row) EndWhy() string {
	switch r.EndReason {
	case history.EndUnobserved:
		return "the observer was not watching when this leadership ended (it was down, or cut off from NATS): it ended before the next was announced"
	case history.EndSilent:
		return "the leader fell silent: no heartbeat for the failure-detection window"
	case history.EndResign:
		return "the leader left cleanly and handed over"
	case history.EndSuperseded:
		return "a newer term was announced"
	}
	return ""
}

func hue(leader uint64) int { return int(leader * 67 % 360) }

func short(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

func newClusterView(name string, c *history.Cluster, now time.Time) clusterView {
	v := clusterView{Name: name, Leaderships: len(c.Leaderships), Flaps: c.Flaps(), Now: now}
	if cur, ok := c.Current(); ok {
		v.Current = &cur
	} else if l, ok := c.Latest(); ok {
		v.LeaderlessSince = l.EndedAt
	}
	end := func(l history.Leadership) time.Time {
		if l.Ended() {
			return l.EndedAt
		}
		return now
	}
	first := max(0, len(c.Leaderships)-timelineLeaderships)
	if first < len(c.Leaderships) {
		v.Start = c.Leaderships[first].StartedAt
	}
	for i := first; i < len(c.Leaderships); i++ {
		l := c.Leaderships[i]
		if i > first {
			if gap, known := c.GapBefore(i); !known {
				v.Segments = append(v.Segments, segment{Kind: "unknown", Title: "the observer did not see how the previous leadership ended"})
			} else if gap > 0 {
				v.Segments = append(v.Segments, segment{Kind: "gap", Grow: gap.Seconds(), Title: "no leader for " + short(gap)})
			}
		}
		d := max(0, end(l).Sub(l.StartedAt))
		split := c.SplitBrainOf(l)
		title := fmt.Sprintf("node %d, term %d (%s), %s for %s", l.Leader, l.Term, l.Algorithm, l.StartedAt.UTC().Format(time.RFC3339Nano), short(d))
		if split {
			title += " — split brain"
		}
		flap := c.Flap(i)
		if flap {
			back := c.Leaderships[i+1]
			title += fmt.Sprintf(" — taken back by node %d after %s: a flap", back.Leader, short(max(0, back.StartedAt.Sub(l.StartedAt))))
		}
		v.Segments = append(v.Segments, segment{Kind: "lead", Grow: d.Seconds(), Hue: hue(l.Leader), Label: fmt.Sprintf("n%d · t%d", l.Leader, l.Term), Title: title, Split: split, Flap: flap})
		if !slices.ContainsFunc(v.Nodes, func(k nodeKey) bool { return k.ID == l.Leader }) {
			v.Nodes = append(v.Nodes, nodeKey{ID: l.Leader, Hue: hue(l.Leader)})
		}
	}
	slices.SortFunc(v.Nodes, func(a, b nodeKey) int { return cmp.Compare(a.ID, b.ID) })
	if !v.LeaderlessSince.IsZero() {
		if l, _ := c.Latest(); l.EndReason != history.EndUnobserved {
			d := max(0, now.Sub(l.EndedAt))
			v.Segments = append(v.Segments, segment{Kind: "gap", Grow: d.Seconds(), Title: "no leader for " + short(d) + " so far"})
		}
	}
	for i := len(c.Leaderships) - 1; i >= max(0, len(c.Leaderships)-tableLeaderships); i-- {
		l := c.Leaderships[i]
		r := row{Leadership: l, Duration: short(max(0, end(l).Sub(l.StartedAt))), Split: c.SplitBrainOf(l), Flap: c.Flap(i)}
		if i > 0 {
			if gap, known := c.GapBefore(i); known {
				r.Gap = short(gap)
			} else {
				r.GapUnknown = true
			}
		}
		v.Rows = append(v.Rows, r)
	}
	for i := len(c.SplitBrains) - 1; i >= max(0, len(c.SplitBrains)-pageSplitBrains); i-- {
		v.SplitBrains = append(v.SplitBrains, c.SplitBrains[i])
	}
	for _, f := range c.Faulty {
		v.Faulty = append(v.Faulty, newFaultyView(f))
	}
	return v
}

// clusterView returns what the page shows of cluster name, read in place
// under the store's lock: the view copies only the last leaderships,
// split brains and member events it shows, and the members present.
func (o *Observer) clusterView(name string, now time.Time) (clusterView, bool) {
	o.membersMu.RLock()
	members := o.members.Members(name)
	o.membersMu.RUnlock()
	var v clusterView
	ok := o.store.Read(name, func(c *history.Cluster) {
		v = newClusterView(name, c, now)
		addMembers(&v, c, members)
	})
	return v, ok
}

// page renders the page: the summary of the leaders, and the timelines
// of one page of clusters (pageClusters), those the search selects.
func (o *Observer) page(w http.ResponseWriter, r *http.Request) {
	now := o.now()
	sel := o.pageSelection(r.URL.Query())
	v := sel.view(o.summarize())
	for _, name := range sel.names {
		if cv, ok := o.clusterView(name, now); ok {
			v.Clusters = append(v.Clusters, cv)
		}
	}
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, v); err != nil {
		o.log.Error("render page", "err", err)
		http.Error(w, "cannot render the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(buf.Bytes())
}

// events streams server-sent events for the page: on connect, and each
// time a cluster changes, an event "cluster" whose data is the cluster's
// section of the page, rendered here. Updates coalesce: a slow browser
// gets the latest state of each cluster, never a backlog. It shares the
// event streams' limit and lifetime.
func (o *Observer) events(w http.ResponseWriter, r *http.Request) {
	release, ok := o.takeStreamSlot(w, r)
	if !ok {
		return
	}
	defer release()
	setStreamHeaders(w)
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK)
		return
	}
	ctx, cancel := o.streamContext(r)
	defer cancel()
	sub := o.hub.subscribe()
	defer o.hub.unsubscribe(sub)
	s := newStreamWriter(w, o.streamWriteTimeout)
	send := func(names []string) error {
		now := o.now()
		for _, name := range names {
			v, ok := o.clusterView(name, now)
			if !ok {
				continue
			}
			var section bytes.Buffer
			if err := pageTemplate.ExecuteTemplate(&section, "cluster", v); err != nil {
				o.log.Error("render cluster", "cluster", name, "err", err)
				continue
			}
			s.event("", "cluster", section.Bytes())
		}
		return s.flush()
	}
	// Only the clusters of the browser's page: the first page, or the
	// one its search and page number select.
	sel := o.pageSelection(r.URL.Query())
	shown := make(map[string]bool, len(sel.names))
	for _, name := range sel.names {
		shown[name] = true
	}
	// The summary is sent again after changes, at most once a
	// summaryEvery: counting costs a pass over every cluster.
	var summarized time.Time
	summaryDue := false
	sendSummary := func() {
		var b bytes.Buffer
		if err := pageTemplate.ExecuteTemplate(&b, "summary", sel.view(o.summarize()).Summary); err != nil {
			o.log.Error("render summary", "err", err)
			return
		}
		s.event("", "summary", b.Bytes())
		summarized, summaryDue = o.now(), false
	}
	summaryTick := time.NewTicker(summaryEvery)
	defer summaryTick.Stop()
	// The comment sends the headers even when no cluster is known yet.
	s.comment("baton observer page")
	if send(sel.names) != nil {
		return
	}
	keepalive := time.NewTicker(o.streamKeepAlive)
	defer keepalive.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sub.signal:
			var names []string
			for _, name := range sub.take() {
				if !shown[name] && sel.open() && sel.q.matches(name, history.Leadership{}, false) {
					// A page that shows every cluster shows a new one
					// too, at its end.
					sel.names = append(sel.names, name)
					shown[name] = true
				}
				if shown[name] {
					names = append(names, name)
				}
			}
			summaryDue = true
			if o.now().Sub(summarized) >= summaryEvery {
				sendSummary()
			}
			if send(names) != nil {
				return
			}
		case <-summaryTick.C:
			if summaryDue {
				sendSummary()
				if s.flush() != nil {
					return
				}
			}
		case <-keepalive.C:
			s.comment("keepalive")
			if s.flush() != nil {
				return
			}
		}
	}
}
