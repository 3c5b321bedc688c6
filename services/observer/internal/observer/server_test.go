package observer

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-election/baton/internal/batontest"
)

// The HTTP server closes a keep-alive connection that stays idle for its
// idle time-out.
func TestIdleConnectionIsClosed(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	o := startObserver(t, testConfig(url, t.TempDir()), nil, func(o *Observer) { o.httpTimeouts.idle = 100 * time.Millisecond })
	conn, err := net.Dial("tcp", o.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "GET /healthz HTTP/1.1\r\nHost: observer\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.Close {
		t.Fatal("the server closed the connection after its answer; want it kept alive")
	}
	conn.SetReadDeadline(time.Now().Add(waitTimeout))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("reading the idle keep-alive connection: %v; want EOF, the server closing it after its idle time-out", err)
	}
}

// The server's read and write time-outs do not cut the event streams,
// which outlive them.
func TestEventStreamsOutliveTheServerTimeouts(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithJetStream())
	const timeout = 300 * time.Millisecond
	o := startObserver(t, testConfig(url, t.TempDir()), nil, func(o *Observer) {
		o.httpTimeouts = httpTimeouts{readHeader: timeout, read: timeout, write: timeout, idle: timeout}
		o.streamKeepAlive = 20 * time.Millisecond
	})
	api := openStream(t, o, nil, "", nil)
	page := openEvents(t, o, nil, "/events", nil)
	// Keep-alives come no faster than one per 20 ms: 40 of them take
	// longer than every time-out.
	for _, s := range []*stream{api, page} {
		for n := 0; n < 40; {
			if e := s.next(t); slices.ContainsFunc(e.comments, func(c string) bool { return strings.HasPrefix(c, "keep") }) {
				n++
			}
		}
	}
	o.feed.publish(streamEvent{cluster: "a", name: eventLeadershipStart, data: []byte(`{"cluster":"a"}`)})
	if e := api.event(t); e.decode(t).Cluster != "a" {
		t.Errorf("event after the time-outs = %s %s, want the one published", e.name, e.data)
	}
}
