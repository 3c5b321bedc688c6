package observer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/services/observer/internal/history"
)

// The events of GET /api/events, by their SSE event names.
const (
	// eventLeadershipStart: a leadership was recorded; data is the
	// leadership as the history renders it, with its cluster.
	eventLeadershipStart = "leadership_start"
	// eventLeadershipEnd: a leadership ended (superseded, resign, silent,
	// unobserved).
	eventLeadershipEnd = "leadership_end"
	// eventLeadershipResume: a leadership ended by silence was heard
	// again and lasts after all.
	eventLeadershipResume = "leadership_resume"
	// eventGap: a known leaderless gap closed, as the gaps list renders
	// it; sent just before the leadership_start that closes it.
	eventGap = "gap"
	// eventFlap: a leadership became a flap (its leader's predecessor
	// took back office within a second); data is that leadership, with
	// its cluster. Sent just after the leadership_start that reverses it.
	eventFlap = "flap"
	// eventSplitBrain: two nodes acted as leader at once.
	eventSplitBrain = "split_brain"
	// eventFaultyMember: a member was proven to have lied; data is the
	// record GET /api/clusters/{cluster}/faulty lists, with the cluster.
	eventFaultyMember = "faulty_member"
	// eventResync: this stream lost events; the client must read the
	// state again from the other endpoints.
	eventResync = "resync"
)

// streamEventNames are the names of the events published to the feed.
var streamEventNames = []string{eventLeadershipStart, eventLeadershipEnd, eventLeadershipResume, eventGap, eventFlap, eventSplitBrain, eventFaultyMember}

// Why a stream gets a resync event.
const (
	// resyncBehind: the client fell behind the feed's buffer.
	resyncBehind = "behind"
	// resyncUnknownID: the client resumed from a Last-Event-ID that this
	// process did not issue (another run of the observer, or garbage).
	resyncUnknownID = "unknown_id"
)

// Defaults of the event streams.
const (
	// feedSize is how many events the feed keeps for streams that lag.
	feedSize = 1024
	// streamKeepAlive is how often an idle stream gets a comment.
	streamKeepAlive = 15 * time.Second
	// streamWriteTimeout is how long one write to a stream may block
	// before the client is disconnected.
	streamWriteTimeout = 10 * time.Second
	// streamRetry is the reconnection delay the stream suggests to
	// EventSource clients, in milliseconds.
	streamRetry = 1000
	// streamBatch is how many events a stream takes from the feed at a
	// time, bounding what it buffers.
	streamBatch = 64
	// streamLifetime is the longest an event stream stays open: then it
	// ends, and the client reconnects (EventSource does by itself, with
	// Last-Event-ID), so that streams turn over under the limit.
	streamLifetime = time.Hour
	// streamRetryAfter is the Retry-After of a stream refused because
	// the limit is reached, in seconds.
	streamRetryAfter = 5
)

// streamEvent is one event of the API's event stream, its data rendered
// once as one line of JSON.
type streamEvent struct {
	seq     uint64 // set by the feed
	cluster string
	name    string
	data    []byte
}

// leadershipEventJSON is the data of leadership_start, leadership_end and
// leadership_resume: a leadership as the history renders it, and its
// cluster.
type leadershipEventJSON struct {
	Cluster string `json:"cluster"`
	leadershipJSON
}

type gapEventJSON struct {
	Cluster string `json:"cluster"`
	gapJSON
}

type splitBrainEventJSON struct {
	Cluster string `json:"cluster"`
	splitBrainJSON
}

type faultyEventJSON struct {
	Cluster string `json:"cluster"`
	faultyJSON
}

type resyncJSON struct {
	Reason string `json:"reason"`
	// Missed is how many events (of every cluster) the stream skipped;
	// null when unknown.
	Missed *uint64 `json:"missed"`
}

// streamEvents returns the events of kept, the records just written to
// cluster's history, which is now c: in order, each end, the gap it
// closed, the start after it and the flap that start made, and each split
// brain.
func streamEvents(cluster string, kept []history.Record, c *history.Cluster) []streamEvent {
	var events []streamEvent
	add := func(name string, v any) {
		data, err := json.Marshal(v)
		if err != nil {
			return // the types above always encode
		}
		events = append(events, streamEvent{cluster: cluster, name: name, data: data})
	}
	for _, r := range kept {
		switch r.Kind {
		case history.KindLeader, history.KindEnd, history.KindResume:
			i, ok := c.Index(r.Term)
			if !ok {
				continue // compacted away at once: an old term
			}
			name := eventLeadershipStart
			switch r.Kind {
			case history.KindEnd:
				name = eventLeadershipEnd
			case history.KindResume:
				name = eventLeadershipResume
			case history.KindLeader:
				if gap, known := c.GapBefore(i); known && gap > 0 {
					prev, l := c.Leaderships[i-1], c.Leaderships[i]
					add(eventGap, gapEventJSON{Cluster: cluster, gapJSON: gapJSON{
						AfterTerm: prev.Term, BeforeTerm: &l.Term,
						From: protocol.Timestamp{Time: prev.EndedAt}, To: &protocol.Timestamp{Time: l.StartedAt},
						Seconds: gap.Seconds(),
					}})
				}
			}
			add(name, leadershipEventJSON{Cluster: cluster, leadershipJSON: leadershipView(c, i)})
			if r.Kind == history.KindLeader {
				for _, j := range c.NewFlaps(i) {
					add(eventFlap, leadershipEventJSON{Cluster: cluster, leadershipJSON: leadershipView(c, j)})
				}
			}
		case history.KindSplit:
			add(eventSplitBrain, splitBrainEventJSON{Cluster: cluster, splitBrainJSON: splitBrainJSON{At: r.At, Reason: r.Reason, Leaders: r.Leaders}})
		case history.KindFaulty:
			add(eventFaultyMember, faultyEventJSON{Cluster: cluster, faultyJSON: faultyJSON{Member: r.Member, At: r.At, Evidence: r.Evidence}})
		}
	}
	return events
}

// feed keeps the last events for the event streams. publish never
// blocks: each stream reads at its own pace from its cursor, the sequence
// number of the last event it took, and one that falls more than the
// feed's size behind has lost events. Memory is bounded by the size,
// whatever the number of streams.
type feed struct {
	// run prefixes the event IDs of this process, so that a client that
	// resumes with an ID of another run is told it lost events.
	run string

	mu   sync.Mutex
	ring []streamEvent
	head uint64 // sequence number of the last event; 0 before any
	// wake is closed by the next publish.
	wake chan struct{}
}

func newFeed(size int, run string) *feed {
	return &feed{run: run, ring: make([]streamEvent, size), wake: make(chan struct{})}
}

// publish appends events and wakes every stream.
func (f *feed) publish(events ...streamEvent) {
	if len(events) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range events {
		f.head++
		e.seq = f.head
		f.ring[f.head%uint64(len(f.ring))] = e
	}
	close(f.wake)
	f.wake = make(chan struct{})
}

// since returns at most max events after cursor, oldest first, and a
// channel closed at the next publish. If some of them are no longer kept,
// it returns none and how many were lost; head is the last sequence
// number.
func (f *feed) since(cursor uint64, max int) (events []streamEvent, missed, head uint64, wake <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	size := uint64(len(f.ring))
	if f.head > size && cursor < f.head-size {
		return nil, f.head - size - cursor, f.head, f.wake
	}
	for seq := cursor + 1; seq <= f.head && len(events) < max; seq++ {
		events = append(events, f.ring[seq%size])
	}
	return events, 0, f.head, f.wake
}

// id is the SSE id of the event with sequence number seq.
func (f *feed) id(seq uint64) string { return f.run + "-" + strconv.FormatUint(seq, 10) }

// resume returns the cursor of a stream that starts with Last-Event-ID
// lastID: the head for a new stream (""), the ID's sequence number for
// one this process issued, and the head and false for any other.
func (f *feed) resume(lastID string) (uint64, bool) {
	f.mu.Lock()
	head := f.head
	f.mu.Unlock()
	if lastID == "" {
		return head, true
	}
	run, seq, ok := strings.Cut(lastID, "-")
	n, err := strconv.ParseUint(seq, 10, 64)
	if !ok || run != f.run || err != nil || n > head {
		return head, false
	}
	return n, true
}

// setStreamHeaders sets the headers of a server-sent event stream.
func setStreamHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // no buffering in a proxy in front
}

// takeStreamSlot takes one of the Config.MaxStreams slots of the event
// streams for the request, or refuses it: 503 with Retry-After, a JSON
// error under /api/ and plain text elsewhere. The caller gives the slot
// back with release once its stream ends.
func (o *Observer) takeStreamSlot(w http.ResponseWriter, r *http.Request) (release func(), ok bool) {
	select {
	case o.streamSlots <- struct{}{}:
		return func() { <-o.streamSlots }, true
	default:
	}
	o.metrics.streamsRefused.Inc()
	w.Header().Set("Retry-After", strconv.Itoa(streamRetryAfter))
	const format = "too many event streams open (OBSERVER_MAX_STREAMS is %d); retry later"
	if strings.HasPrefix(r.URL.Path, "/api/") {
		writeError(w, http.StatusServiceUnavailable, format, cap(o.streamSlots))
	} else {
		http.Error(w, fmt.Sprintf(format, cap(o.streamSlots)), http.StatusServiceUnavailable)
	}
	return nil, false
}

// streamContext returns the context of an event stream: it ends when the
// client leaves, when the server shuts down (the requests' base context
// ends first) or once the stream has lasted o.streamLifetime.
//
// The server's time-outs do not cut a stream: the read time-out bounds
// reading the request only (net/http lifts the read deadline once the
// request is read, to watch for the client hanging up), and each write
// of a stream sets a deadline of its own (streamWriter), past the
// server's write time-out.
func (o *Observer) streamContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), o.streamLifetime)
}

// streamWriter writes to one event stream, each write bounded by a
// deadline so that a client that stops reading is disconnected instead
// of holding its handler for ever.
type streamWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	buf     bytes.Buffer
}

func newStreamWriter(w http.ResponseWriter, timeout time.Duration) *streamWriter {
	return &streamWriter{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

// event buffers one event; id may be empty.
func (s *streamWriter) event(id, name string, data []byte) {
	if id != "" {
		s.buf.WriteString("id: " + id + "\n")
	}
	s.buf.WriteString("event: " + name + "\n")
	for line := range bytes.Lines(data) {
		s.buf.WriteString("data: ")
		s.buf.Write(bytes.TrimRight(line, "\n"))
		s.buf.WriteByte('\n')
	}
	s.buf.WriteByte('\n')
}

// comment buffers a comment line, which clients ignore.
func (s *streamWriter) comment(text string) {
	s.buf.WriteString(": " + text + "\n\n")
}

// flush sends what is buffered, if anything. It fails once the client is
// gone or did not take the data within the timeout.
func (s *streamWriter) flush() error {
	if s.buf.Len() == 0 {
		return nil
	}
	// Not every ResponseWriter supports deadlines; the server's does.
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	_, err := s.w.Write(s.buf.Bytes())
	s.buf.Reset()
	if err == nil {
		err = s.rc.Flush()
	}
	return err
}

// apiEvents streams the recorded changes as server-sent events with JSON
// data: leadership_start, leadership_end, leadership_resume, gap and
// split_brain, each with an id; resync when the stream lost events; a
// comment every keep-alive period while idle. ?cluster= keeps one
// cluster's events. It takes one of the Config.MaxStreams slots, or
// answers 503, and ends after streamLifetime. See docs/observer-api.md.
func (o *Observer) apiEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !checkParams(w, q, "cluster") {
		return
	}
	cluster := q.Get("cluster")
	if q.Has("cluster") && !validClusterName(w, cluster) {
		return
	}
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
	o.metrics.streams.Inc()
	defer o.metrics.streams.Dec()
	ctx, cancel := o.streamContext(r)
	defer cancel()
	s := newStreamWriter(w, o.streamWriteTimeout)
	resync := func(head uint64, reason string, missed *uint64) {
		data, _ := json.Marshal(resyncJSON{Reason: reason, Missed: missed})
		s.event(o.feed.id(head), eventResync, data)
		o.metrics.resyncs.WithLabelValues(reason).Inc()
	}

	// The cursor is taken before the headers go out: a client that has
	// the response gets every event published from then on.
	cursor, known := o.feed.resume(r.Header.Get("Last-Event-ID"))
	s.buf.WriteString("retry: " + strconv.Itoa(streamRetry) + "\n")
	s.comment("baton observer events")
	if !known {
		resync(cursor, resyncUnknownID, nil)
	}
	if s.flush() != nil {
		return
	}
	keepalive := time.NewTicker(o.streamKeepAlive)
	defer keepalive.Stop()
	for {
		events, missed, head, wake := o.feed.since(cursor, streamBatch)
		if missed > 0 {
			resync(head, resyncBehind, &missed)
			cursor = head
		}
		for _, e := range events {
			if cluster == "" || e.cluster == cluster {
				s.event(o.feed.id(e.seq), e.name, e.data)
			}
			cursor = e.seq
		}
		if s.flush() != nil {
			return
		}
		if cursor < head {
			continue // more to send: the flush above waited for the client
		}
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-keepalive.C:
			s.comment("keep-alive")
			if s.flush() != nil {
				return
			}
		}
	}
}
