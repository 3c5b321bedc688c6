package main

import (
	"bufio"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/cmd/internal/localcluster"
	"github.com/baton-election/baton/pkg/protocol"
)

// subscriber hears every announcement on election.*.leader over one
// connection to each NATS server, so that a server restarted by a fault
// does not make it miss any: the copies of one announcement are counted
// once (by the checker). It writes each one heard, with when, to a file.
type subscriber struct {
	conns []*nats.Conn

	mu    sync.Mutex
	file  *os.File
	w     *bufio.Writer
	heard int // messages, copies included
	bad   int // messages that are not announcements
}

// subscribe connects to each of urls and calls each with every
// announcement (copies included), serially.
func subscribe(urls []string, path string, each func(protocol.Announcement, time.Time)) (*subscriber, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	s := &subscriber{file: f, w: bufio.NewWriter(f)}
	handle := func(msg *nats.Msg) {
		recv := time.Now()
		a, err := protocol.DecodeAnnouncement(msg.Data)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.heard++
		if err != nil {
			s.bad++
			return
		}
		fmt.Fprintf(s.w, "{\"recv\":%q,\"announcement\":%s}\n", recv.UTC().Format(protocol.TimeFormat), msg.Data)
		each(a, recv)
	}
	for i, url := range urls {
		nc, err := nats.Connect(url,
			localcluster.AsObserver(),
			nats.Name(fmt.Sprintf("soak-subscriber-%d", i+1)),
			nats.MaxReconnects(-1),
			nats.ReconnectWait(100*time.Millisecond),
			nats.PingInterval(time.Second),
			nats.MaxPingsOutstanding(2),
			nats.ReconnectBufSize(-1),
			// One server each: on a restart, the connection waits for
			// its own server rather than moving to another.
			nats.DontRandomize(),
			nats.IgnoreDiscoveredServers(),
		)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("subscriber: connect to %s: %w", url, err)
		}
		s.conns = append(s.conns, nc)
		sub, err := nc.Subscribe(protocol.AllLeaders, handle)
		if err != nil {
			s.close()
			return nil, fmt.Errorf("subscriber: %w", err)
		}
		// A burst of 1,000 announcements at once must not be dropped.
		if err := sub.SetPendingLimits(-1, -1); err != nil {
			s.close()
			return nil, fmt.Errorf("subscriber: %w", err)
		}
		if err := nc.Flush(); err != nil {
			s.close()
			return nil, fmt.Errorf("subscriber: %w", err)
		}
	}
	return s, nil
}

// counts are the messages heard (copies included) and those that were
// not announcements.
func (s *subscriber) counts() (heard, bad int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.heard, s.bad
}

// close closes the connections and the file.
func (s *subscriber) close() {
	for _, nc := range s.conns {
		nc.Close()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.file != nil {
		s.w.Flush()
		s.file.Close()
		s.file = nil
	}
}
