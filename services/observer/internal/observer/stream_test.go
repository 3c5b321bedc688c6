package observer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/services/observer/internal/history"
)

// sseEvent is one message of an event stream as a client parses it; a
// message of comments only has no name.
type sseEvent struct {
	id, name, data string
	comments       []string
}

// eventData holds the fields of every event's JSON data.
type eventData struct {
	Cluster          string              `json:"cluster"`
	Term             uint64              `json:"term"`
	Leader           uint64              `json:"leader"`
	EndedAt          *protocol.Timestamp `json:"ended_at"`
	EndReason        *history.EndReason  `json:"end_reason"`
	GapBeforeSeconds *float64            `json:"gap_before_seconds"`
	SplitBrain       bool                `json:"split_brain"`
	AfterTerm        uint64              `json:"after_term"`
	BeforeTerm       *uint64             `json:"before_term"`
	Seconds          float64             `json:"seconds"`
	Reason           string              `json:"reason"`
	Leaders          []history.Acting    `json:"leaders"`
	Missed           *uint64             `json:"missed"`
}

func (e sseEvent) decode(t *testing.T) eventData {
	t.Helper()
	var d eventData
	if err := json.Unmarshal([]byte(e.data), &d); err != nil {
		t.Fatalf("event %s: data %q is not JSON: %v", e.name, e.data, err)
	}
	return d
}

// seq is the sequence number in the event's id.
func (e sseEvent) seq(t *testing.T) uint64 {
	t.Helper()
	_, n, _ := strings.Cut(e.id, "-")
	seq, err := strconv.ParseUint(n, 10, 64)
	if err != nil {
		t.Fatalf("event %s: id %q does not end in a sequence number", e.name, e.id)
	}
	return seq
}

// stream is a client of GET /api/events, reading with the deadline of its
// request.
type stream struct {
	resp *http.Response
	r    *bufio.Reader
}

// openStream opens GET /api/events with query (e.g. "?cluster=x") and
// header, on client (nil: the default one), for at most waitTimeout.
func openStream(t *testing.T, o *running, client *http.Client, query string, header http.Header) *stream {
	t.Helper()
	return openEvents(t, o, client, "/api/events"+query, header)
}

// openEvents opens the event stream at path.
func openEvents(t *testing.T, o *running, client *http.Client, path string, header http.Header) *stream {
	t.Helper()
	if client == nil {
		client = http.DefaultClient
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+o.Addr()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET %s: %v", path, err)
	}
	t.Cleanup(func() {
		cancel()
		resp.Body.Close()
	})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET %s = %s, %q; want 200, text/event-stream", path, resp.Status, resp.Header.Get("Content-Type"))
	}
	return &stream{resp: resp, r: bufio.NewReader(resp.Body)}
}

// next reads one message: event fields up to a blank line.
func (s *stream) next(t *testing.T) sseEvent {
	t.Helper()
	var e sseEvent
	var data []string
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the event stream: %v", err)
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			if e.name != "" || len(data) > 0 || len(e.comments) > 0 {
				e.data = strings.Join(data, "\n")
				return e
			}
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "":
			e.comments = append(e.comments, value)
		case "id":
			e.id = value
		case "event":
			e.name = value
		case "data":
			data = append(data, value)
		}
	}
}

// event reads up to the next event, skipping comments.
func (s *stream) event(t *testing.T) sseEvent {
	t.Helper()
	for {
		if e := s.next(t); e.name != "" {
			return e
		}
	}
}

// The stream carries one event per start, end, gap and split brain, in the
// order recorded, with increasing ids; ?cluster= keeps one cluster's.
func TestEventStream(t *testing.T) {
	nc, clock, o := startWithFakeClock(t)
	all := openStream(t, o, nil, "", nil)
	one := openStream(t, o, nil, "?cluster=default", nil)
	c := "default"

	var seen []sseEvent // every event of all, in order
	read := func(n int) []sseEvent {
		t.Helper()
		var got []sseEvent
		for range n {
			e := all.event(t)
			if len(seen) > 0 && e.seq(t) <= seen[len(seen)-1].seq(t) {
				t.Errorf("event id %s after %s: ids must increase", e.id, seen[len(seen)-1].id)
			}
			seen = append(seen, e)
			got = append(got, e)
		}
		return got
	}

	announce(t, nc, announcement(c, 1, 1, t0))
	e := read(1)[0]
	if d := e.decode(t); e.name != eventLeadershipStart || d.Cluster != c || d.Term != 1 || d.Leader != 1 || d.EndedAt != nil {
		t.Errorf("first event = %s %s, want leadership_start of term 1, leader 1, lasting", e.name, e.data)
	}
	announce(t, nc, announcement("other", 7, 3, t0))
	if e := read(1)[0]; e.name != eventLeadershipStart || e.decode(t).Cluster != "other" {
		t.Errorf("event = %s %s, want the other cluster's leadership_start", e.name, e.data)
	}
	o.waitFor(t, "both announcements heard live", func() bool { return o.liveCount("leader") == 2 })

	// A resign, then a leader 0.5 s later: the end, the gap, the start.
	broadcast(t, nc, c, protocol.TypeHeartbeat, 1, 1)
	o.waitFor(t, "1's heartbeat", func() bool { return o.liveCount("heartbeat") == 1 })
	clock.Set(t0.Add(time.Second))
	broadcast(t, nc, c, protocol.TypeResign, 1, 1)
	e = read(1)[0]
	if d := e.decode(t); e.name != eventLeadershipEnd || d.Term != 1 || d.EndReason == nil || *d.EndReason != history.EndResign || d.EndedAt == nil || !d.EndedAt.Equal(t0.Add(time.Second)) {
		t.Errorf("event = %s %s, want leadership_end of term 1 by resign at t0+1s", e.name, e.data)
	}
	clock.Set(t0.Add(1500 * time.Millisecond))
	announce(t, nc, announcement(c, 2, 2, t0.Add(1500*time.Millisecond)))
	got := read(2)
	if d := got[0].decode(t); got[0].name != eventGap || d.AfterTerm != 1 || d.BeforeTerm == nil || *d.BeforeTerm != 2 || d.Seconds != 0.5 {
		t.Errorf("event = %s %s, want a gap of 0.5 s from term 1 to 2", got[0].name, got[0].data)
	}
	if d := got[1].decode(t); got[1].name != eventLeadershipStart || d.Term != 2 || d.GapBeforeSeconds == nil || *d.GapBeforeSeconds != 0.5 {
		t.Errorf("event = %s %s, want leadership_start of term 2 after 0.5 s", got[1].name, got[1].data)
	}
	o.waitFor(t, "2's announcement heard live", func() bool { return o.liveCount("leader") == 3 })

	// Two nodes announce term 6 while 2 is heard: 2 is superseded, term
	// 6 starts, and a split brain, which comes from the live path and so
	// may come before or after the others.
	announce(t, nc, announcement(c, 4, 6, t0.Add(1500*time.Millisecond)))
	announce(t, nc, announcement(c, 5, 6, t0.Add(1500*time.Millisecond)))
	got = read(3)
	names := make([]string, len(got))
	for i, e := range got {
		names[i] = e.name
	}
	split := slices.Index(names, eventSplitBrain)
	if split < 0 {
		t.Fatalf("events = %v, want a split_brain among them", names)
	}
	if d := got[split].decode(t); d.Reason != history.SplitSameTerm || len(d.Leaders) != 2 || d.Leaders[0].Term != 6 || d.Leaders[1].Term != 6 {
		t.Errorf("split_brain = %s, want same_term of two leaders of term 6", got[split].data)
	}
	rest := slices.Delete(slices.Clone(got), split, split+1)
	if rest[0].name != eventLeadershipEnd || rest[0].decode(t).Term != 2 || *rest[0].decode(t).EndReason != history.EndSuperseded {
		t.Errorf("event = %s %s, want leadership_end of term 2, superseded", rest[0].name, rest[0].data)
	}
	if rest[1].name != eventLeadershipStart || rest[1].decode(t).Term != 6 {
		t.Errorf("event = %s %s, want leadership_start of term 6", rest[1].name, rest[1].data)
	}

	// The filtered stream has the same events of its cluster, with the
	// same ids, and none of the other.
	var want []sseEvent
	for _, e := range seen {
		if e.decode(t).Cluster == c {
			want = append(want, e)
		}
	}
	for i, w := range want {
		e := one.event(t)
		if e.id != w.id || e.name != w.name || e.data != w.data {
			t.Errorf("filtered event %d = %s %s %s, want %s %s %s", i, e.id, e.name, e.data, w.id, w.name, w.data)
		}
	}
	if n := counter(o.metrics.events.WithLabelValues(eventLeadershipStart)); n != 4 {
		t.Errorf("observer_events_total{event=leadership_start} = %v, want 4", n)
	}
}

// An idle stream gets comments, so that proxies and clients can tell it
// is alive; HEAD answers the headers without a stream.
func TestEventStreamKeepAliveAndHead(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	o := startObserver(t, testConfig(url, t.TempDir()), nil, func(o *Observer) { o.streamKeepAlive = 20 * time.Millisecond })
	s := openStream(t, o, nil, "", nil)
	if first := s.next(t); first.name != "" || len(first.comments) == 0 {
		t.Fatalf("first message = %+v, want a comment", first)
	}
	if e := s.next(t); e.name != "" || !slices.Contains(e.comments, "keep-alive") {
		t.Errorf("message on an idle stream = %+v, want the keep-alive comment", e)
	}

	req, err := http.NewRequest(http.MethodHead, "http://"+o.Addr()+"/api/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Errorf("HEAD /api/events = %s %q, want 200 text/event-stream", resp.Status, resp.Header.Get("Content-Type"))
	}
}

// A client that resumes with a Last-Event-ID gets the events after it
// while the feed keeps them, and a resync when it lost some or the ID is
// not this run's; the stream goes on with new events after a resync.
func TestEventStreamResume(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	o := startObserver(t, testConfig(url, t.TempDir()), nil, func(o *Observer) { o.feed = newFeed(4, "run") })
	publish := func(cluster string) {
		o.feed.publish(streamEvent{cluster: cluster, name: eventLeadershipStart, data: []byte(`{"cluster":"` + cluster + `"}`)})
	}
	for range 6 {
		publish("a")
	}
	header := func(id string) http.Header { return http.Header{"Last-Event-Id": {id}} }

	s := openStream(t, o, nil, "", header("run-3"))
	for _, want := range []string{"run-4", "run-5", "run-6"} {
		if e := s.event(t); e.id != want || e.name != eventLeadershipStart {
			t.Errorf("resumed after run-3: event %s %s, want %s", e.id, e.name, want)
		}
	}

	s = openStream(t, o, nil, "", header("run-1"))
	e := s.event(t)
	if d := e.decode(t); e.name != eventResync || d.Reason != resyncBehind || d.Missed == nil || *d.Missed != 1 || e.id != "run-6" {
		t.Errorf("resumed after run-1 with 4 kept of 6: %s %s %s, want resync behind, 1 missed, id run-6", e.id, e.name, e.data)
	}
	publish("b")
	if e := s.event(t); e.id != "run-7" || e.decode(t).Cluster != "b" {
		t.Errorf("after the resync: %s %s, want the new event run-7", e.id, e.data)
	}

	for _, id := range []string{"other-3", "run-99", "run-x", "garbage"} {
		s := openStream(t, o, nil, "", header(id))
		e := s.event(t)
		if d := e.decode(t); e.name != eventResync || d.Reason != resyncUnknownID || d.Missed != nil || e.id != "run-7" {
			t.Errorf("resumed after %s: %s %s %s, want resync unknown_id, missed null, id run-7", id, e.id, e.name, e.data)
		}
	}
	if n := counter(o.metrics.resyncs.WithLabelValues(resyncUnknownID)); n != 4 {
		t.Errorf("observer_event_stream_resyncs_total{reason=unknown_id} = %v, want 4", n)
	}
}

// smallBufferClient is an HTTP client whose connections have a small
// receive buffer, so that a client that does not read soon stops the
// server's writes.
func smallBufferClient(t *testing.T) *http.Client {
	dialer := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		c.Control(func(fd uintptr) { err = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return err
	}}
	tr := &http.Transport{DialContext: dialer.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// flood publishes n events of 4 KiB to the feed, more than any socket
// buffers hold.
func flood(o *running, n int) {
	data := []byte(`{"cluster":"flood","pad":"` + strings.Repeat("x", 4096) + `"}`)
	for range n {
		o.feed.publish(streamEvent{cluster: "flood", name: eventLeadershipStart, data: data})
	}
}

// A client that stops reading never blocks the observer: the feed goes on
// (and the observer records), and the client, once it reads again, gets
// a resync for what it lost, then the new events.
func TestSlowStreamGetsResync(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	nc := batontest.Connect(t, url)
	o := startObserver(t, testConfig(url, t.TempDir()), nil, func(o *Observer) { o.feed = newFeed(16, "run") })
	s := openStream(t, o, smallBufferClient(t), "", nil)

	flood(o, 5000) // 20 MB: the handler blocks on the unread socket
	announce(t, nc, announcement("default", 3, 1, t0))
	o.waitFor(t, "the announcement recorded while a stream is stalled", func() bool { return o.leaderships("default") == 1 })

	resynced := false
	for !resynced {
		e := s.event(t)
		if e.name == eventResync {
			d := e.decode(t)
			if d.Reason != resyncBehind || d.Missed == nil || *d.Missed == 0 {
				t.Errorf("resync %s, want reason behind and a count of missed events", e.data)
			}
			resynced = true
		}
	}
	o.feed.publish(streamEvent{cluster: "marker", name: eventSplitBrain, data: []byte(`{"cluster":"marker"}`)})
	for {
		if e := s.event(t); e.decode(t).Cluster == "marker" {
			break
		}
	}
	if n := counter(o.metrics.resyncs.WithLabelValues(resyncBehind)); n < 1 {
		t.Errorf("observer_event_stream_resyncs_total{reason=behind} = %v, want at least 1", n)
	}
}

// A client that does not take a write within the write time-out is
// disconnected, and its handler ends.
func TestStalledStreamIsDisconnected(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	o := startObserver(t, testConfig(url, t.TempDir()), nil, func(o *Observer) {
		o.streamWriteTimeout = 200 * time.Millisecond
		o.feed = newFeed(8192, "run") // the whole flood: the stream never falls behind
	})
	openStream(t, o, smallBufferClient(t), "", nil)
	if n := gauge(t, o, "observer_event_streams"); n != 1 {
		t.Fatalf("observer_event_streams = %v with one client, want 1", n)
	}
	start := time.Now()
	flood(o, 5000)
	o.waitFor(t, "the stalled stream to be closed", func() bool { return gauge(t, o, "observer_event_streams") == 0 })
	// Well before the client's own deadline would have closed it.
	if d := time.Since(start); d > waitTimeout/2 {
		t.Errorf("the stalled stream was closed after %v, not by the write time-out", d)
	}
}

// gauge reads one unlabelled series from /metrics.
func gauge(t *testing.T, o *running, name string) float64 {
	t.Helper()
	for line := range strings.Lines(scrape(t, o)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}

// The feed keeps its last events for the streams: readers take them at
// their own pace, and one that falls behind learns how many it lost.
func TestFeed(t *testing.T) {
	f := newFeed(3, "r")
	events, missed, head, wake := f.since(0, 10)
	if len(events) != 0 || missed != 0 || head != 0 {
		t.Fatalf("empty feed: since(0) = %v, %d, %d", events, missed, head)
	}
	f.publish(streamEvent{name: "a"}, streamEvent{name: "b"})
	select {
	case <-wake:
	default:
		t.Fatal("publish did not wake the readers")
	}
	events, _, head, _ = f.since(0, 10)
	if len(events) != 2 || events[0].seq != 1 || events[1].name != "b" || head != 2 {
		t.Fatalf("since(0) = %+v, head %d; want a, b", events, head)
	}
	f.publish(streamEvent{name: "c"}, streamEvent{name: "d"}, streamEvent{name: "e"})
	if events, missed, head, _ := f.since(1, 10); len(events) != 0 || missed != 1 || head != 5 {
		t.Errorf("since(1) with 3 of 5 kept = %d events, %d missed, head %d; want 0, 1, 5", len(events), missed, head)
	}
	if events, missed, _, _ := f.since(2, 10); len(events) != 3 || missed != 0 || events[0].name != "c" {
		t.Errorf("since(2) = %+v, %d missed; want c, d, e", events, missed)
	}
	if events, _, head, _ := f.since(2, 2); len(events) != 2 || events[1].name != "d" || head != 5 {
		t.Errorf("since(2) by 2 = %+v, head %d; want c, d and head 5", events, head)
	}
	for _, tc := range []struct {
		id     string
		cursor uint64
		ok     bool
	}{
		{"", 5, true}, {"r-2", 2, true}, {"r-5", 5, true}, {"r-0", 0, true},
		{"r-6", 5, false}, {"x-2", 5, false}, {"r-", 5, false}, {"r", 5, false},
	} {
		if cursor, ok := f.resume(tc.id); cursor != tc.cursor || ok != tc.ok {
			t.Errorf("resume(%q) = %d, %v; want %d, %v", tc.id, cursor, ok, tc.cursor, tc.ok)
		}
	}
}

// The events of a batch of records, in the order written; a gap only when
// it is known and not zero; a flap after the start that makes it.
func TestStreamEventsOfRecords(t *testing.T) {
	c := &history.Cluster{}
	at := func(ms int) protocol.Timestamp {
		return protocol.Timestamp{Time: t0.Add(time.Duration(ms) * time.Millisecond)}
	}
	step := func(recs ...history.Record) []string {
		var names []string
		for _, e := range streamEvents("c", c.Apply(recs...), c) {
			if !json.Valid(e.data) || !bytes.Contains(e.data, []byte(`"cluster":"c"`)) {
				t.Errorf("event %s: data %s lacks the cluster", e.name, e.data)
			}
			names = append(names, e.name)
		}
		return names
	}
	for i, tc := range []struct {
		recs []history.Record
		want []string
	}{
		{[]history.Record{{Kind: history.KindLeader, Term: 1, Leader: 3, At: at(0)}}, []string{eventLeadershipStart}},
		{[]history.Record{{Kind: history.KindEnd, Term: 1, At: at(100), Reason: string(history.EndSilent)}}, []string{eventLeadershipEnd}},
		{[]history.Record{{Kind: history.KindResume, Term: 1, At: at(150)}}, []string{eventLeadershipResume}},
		{[]history.Record{{Kind: history.KindEnd, Term: 1, At: at(200), Reason: string(history.EndSilent)}, {Kind: history.KindLeader, Term: 2, Leader: 4, At: at(300)}},
			[]string{eventLeadershipEnd, eventGap, eventLeadershipStart}},
		{[]history.Record{{Kind: history.KindEnd, Term: 2, At: at(400), Reason: string(history.EndSuperseded)}, {Kind: history.KindLeader, Term: 3, Leader: 5, At: at(400)}},
			[]string{eventLeadershipEnd, eventLeadershipStart}}, // no gap
		{[]history.Record{{Kind: history.KindEnd, Term: 3, At: at(500), Reason: string(history.EndUnobserved)}, {Kind: history.KindLeader, Term: 4, Leader: 5, At: at(600)}},
			[]string{eventLeadershipEnd, eventLeadershipStart}}, // gap unknown
		{[]history.Record{{Kind: history.KindSplit, At: at(700), Reason: history.SplitSameTerm, Leaders: []history.Acting{{Leader: 5, Term: 4}, {Leader: 6, Term: 4}}}},
			[]string{eventSplitBrain}},
		{[]history.Record{{Kind: history.KindLeader, Term: 4, Leader: 6, At: at(700)}}, nil}, // a duplicate is not kept
		// 6 takes over from 5, and 5 takes back 0.1 s later: term 5 is a
		// flap, said after the start that reverses it.
		{[]history.Record{{Kind: history.KindEnd, Term: 4, At: at(800), Reason: string(history.EndSuperseded)}, {Kind: history.KindLeader, Term: 5, Leader: 6, At: at(800)}},
			[]string{eventLeadershipEnd, eventLeadershipStart}},
		{[]history.Record{{Kind: history.KindEnd, Term: 5, At: at(900), Reason: string(history.EndSuperseded)}, {Kind: history.KindLeader, Term: 6, Leader: 5, At: at(900)}},
			[]string{eventLeadershipEnd, eventLeadershipStart, eventFlap}},
	} {
		if got := step(tc.recs...); !slices.Equal(got, tc.want) {
			t.Errorf("batch %d: events %v, want %v", i, got, tc.want)
		}
	}
}
