package localcluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/baton-election/baton/pkg/protocol"
)

// NewHTTPClient returns a client for polling nodes on this machine: short
// timeouts and kept-alive connections, so polling every few milliseconds is
// cheap.
func NewHTTPClient() *http.Client {
	return &http.Client{
		Timeout: 500 * time.Millisecond,
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 200 * time.Millisecond}).DialContext,
			MaxIdleConnsPerHost: 2,
			IdleConnTimeout:     30 * time.Second,
		},
	}
}

func get(ctx context.Context, c *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("localcluster: GET %s: %s", url, resp.Status)
	}
	return body, nil
}

// FetchStatus asks the node at addr (host:port) for its /status.
func FetchStatus(ctx context.Context, c *http.Client, addr string) (protocol.Status, error) {
	var s protocol.Status
	body, err := get(ctx, c, "http://"+addr+"/status")
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(body, &s); err != nil {
		return s, fmt.Errorf("localcluster: status of %s: %w", addr, err)
	}
	return s, nil
}

// Metrics holds the samples of a Prometheus text exposition, keyed by
// series: the metric name followed by its labels as exposed, e.g.
// `election_messages_sent_total{type="election"}`.
type Metrics map[string]float64

// Sum adds up every series of the metric name, whatever its labels.
func (m Metrics) Sum(name string) float64 {
	var total float64
	for series, v := range m {
		if series == name || strings.HasPrefix(series, name+"{") {
			total += v
		}
	}
	return total
}

// FetchMetrics reads the node's /metrics.
func FetchMetrics(ctx context.Context, c *http.Client, addr string) (Metrics, error) {
	body, err := get(ctx, c, "http://"+addr+"/metrics")
	if err != nil {
		return nil, err
	}
	return ParseMetrics(string(body)), nil
}

// ParseMetrics parses the Prometheus text format far enough for counters
// and gauges: every "series value [timestamp]" line; comments and lines it
// cannot read are skipped.
func ParseMetrics(text string) Metrics {
	m := Metrics{}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		// The value follows the series, after the closing brace if the
		// series has labels (label values may contain spaces).
		rest := line
		series := ""
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				continue
			}
			series, rest = line[:j+1], line[j+1:]
		} else {
			i := strings.IndexAny(line, " \t")
			if i < 0 {
				continue
			}
			series, rest = line[:i], line[i:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		m[series] = v
	}
	return m
}

// GetJSON fetches url and decodes its JSON answer into v.
func GetJSON(ctx context.Context, c *http.Client, url string, v any) error {
	body, err := get(ctx, c, url)
	if err != nil {
		return err
	}
	return json.Unmarshal(body, v)
}

// NewWatchClient returns a client for WatchStatus: no overall time-out,
// since each request may wait for a change for a long time.
func NewWatchClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 200 * time.Millisecond}).DialContext,
			MaxIdleConnsPerHost: 2,
			IdleConnTimeout:     time.Minute,
		},
	}
}

// watchWait is how long one request of WatchStatus waits for a change.
const watchWait = 30 * time.Second

// WatchStatus follows the /status of the node at addr until ctx ends, with
// long polls (GET /status?wait= and If-None-Match): it calls each with
// every status the node reports, the first one at once, and with ok false
// each time the node cannot be reached (it is down or restarting); it then
// tries again after 1 ms, then twice as long each time up to maxRetry. It
// returns ctx's error.
func WatchStatus(ctx context.Context, c *http.Client, addr string, maxRetry time.Duration, each func(s protocol.Status, ok bool)) error {
	etag := ""
	down := false
	retry := time.Millisecond
	for ctx.Err() == nil {
		s, tag, err := waitStatus(ctx, c, addr, etag)
		switch {
		case err != nil:
			if ctx.Err() != nil {
				break
			}
			if !down {
				down, retry = true, time.Millisecond
				each(protocol.Status{}, false)
			}
			etag = ""
			timer := time.NewTimer(retry)
			retry = min(2*retry, maxRetry)
			select {
			case <-ctx.Done():
			case <-timer.C:
			}
			timer.Stop()
		case tag != etag:
			etag, down = tag, false
			each(s, true)
		}
	}
	return ctx.Err()
}

// waitStatus asks for the node's status, waiting for it to differ from
// etag when etag is not empty; it returns the status and its ETag (etag
// itself when the wait passed with no change).
func waitStatus(ctx context.Context, c *http.Client, addr, etag string) (protocol.Status, string, error) {
	var s protocol.Status
	url := "http://" + addr + "/status"
	if etag != "" {
		url += "?wait=" + watchWait.String()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return s, "", err
	}
	if etag != "" {
		req.Header.Set("If-None-Match", etag)
	}
	resp, err := c.Do(req)
	if err != nil {
		return s, "", err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNotModified:
		return s, etag, nil
	case http.StatusOK:
	default:
		return s, "", fmt.Errorf("localcluster: GET %s: %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return s, "", err
	}
	if err := json.Unmarshal(body, &s); err != nil {
		return s, "", fmt.Errorf("localcluster: status of %s: %w", addr, err)
	}
	return s, resp.Header.Get("ETag"), nil
}
