// Package browser tests the observer's page in a real headless browser
// (Chromium, driven with chromedp), against the observer binary built
// from services/observer. It lives in the e2e module so that chromedp
// stays out of the root module's requirements.
package browser

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/protocol"
)

const waitTimeout = 15 * time.Second

// chromium returns the path of a Chromium or Chrome binary, or "".
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	return ""
}

// startObserver runs the observer binary bin against natsURL until the
// test ends and returns its HTTP address once it is healthy.
func startObserver(t *testing.T, bin, natsURL string) string {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "NATS_URL="+natsURL, "HTTP_ADDR=127.0.0.1:0", "OBSERVER_DATA="+t.TempDir(),
		"OBSERVER_LEADER_TIMEOUT=1h", "OBSERVER_SPLIT_GRACE=100ms")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var waitErr error
	addr := make(chan string, 1)
	go func() {
		// Find the listen address in the log, then drain the rest.
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line struct {
				Msg  string `json:"msg"`
				HTTP string `json:"http"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "observer running" {
				addr <- line.HTTP
				break
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		waitErr = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	var a string
	select {
	case a = <-addr:
	case <-done:
		t.Fatalf("observer exited: %v", waitErr)
	case <-time.After(waitTimeout):
		t.Fatal("observer did not start")
	}
	batontest.CheckFor(t, waitTimeout, func() error {
		resp, err := http.Get("http://" + a + "/healthz")
		if err != nil {
			return fmt.Errorf("observer not healthy: %w", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("observer not healthy: %s", resp.Status)
		}
		return nil
	})
	return a
}

// waitRecorded waits until the observer at addr has recorded n
// leaderships of cluster.
func waitRecorded(t *testing.T, addr, cluster string, n int) {
	t.Helper()
	batontest.CheckFor(t, waitTimeout, func() error {
		var hist []json.RawMessage
		resp, err := http.Get("http://" + addr + "/api/clusters/" + cluster + "/history")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			if err := json.NewDecoder(resp.Body).Decode(&hist); err != nil {
				return err
			}
		}
		if len(hist) < n {
			return fmt.Errorf("history of %s has %d leaderships, want %d", cluster, len(hist), n)
		}
		return nil
	})
}

func announce(t *testing.T, nc *nats.Conn, cluster string, leader, term uint64, at time.Time) {
	t.Helper()
	b, err := protocol.EncodeAnnouncement(protocol.Announcement{Cluster: cluster, Leader: leader, Term: term, Algorithm: protocol.Bully, At: protocol.Timestamp{Time: at}})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish(protocol.LeaderSubject(cluster), b); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// broadcast publishes a heartbeat or resign of node from with term.
func broadcast(t *testing.T, nc *nats.Conn, cluster string, typ protocol.Type, from, term uint64) {
	t.Helper()
	m := protocol.Message{Type: typ, From: from, Term: term}
	b, err := protocol.Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Publish(protocol.SubjectFor(cluster, m), b); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// The page in a real headless browser: it shows the current leader, then
// follows a resign, a takeover and a split brain without a reload. The
// screenshot is kept in $OBSERVER_SCREENSHOT_DIR (default: the test's
// temporary directory). Without Chromium the test skips, unless
// CI_BROWSER_REQUIRED=1 (as in CI), where it fails.
func TestPageInBrowser(t *testing.T) {
	browser := chromium()
	if browser == "" {
		if os.Getenv("CI_BROWSER_REQUIRED") == "1" {
			t.Fatal("chromium not found and CI_BROWSER_REQUIRED=1")
		}
		t.Skip("chromium not found: skipping the browser test (apt-get install chromium)")
	}
	bin := batontest.BuildBinary(t, "github.com/baton-election/baton/services/observer")
	url := batontest.StartNATS(t, batontest.WithJetStream())
	nc := batontest.Connect(t, url)
	addr := startObserver(t, bin, url)
	c := "default"
	start := time.Now().Add(-2 * time.Second)
	announce(t, nc, c, 3, 1, start)
	waitRecorded(t, addr, c, 1)

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.WindowSize(1200, 800))...)
	defer cancelAlloc()
	ctx, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("browser: %s: %v", what, err)
		}
	}

	run("load the page and see node 3 lead",
		chromedp.Navigate("http://"+addr+"/"),
		chromedp.WaitVisible(`#cluster-default .current[data-leader="3"][data-term="1"]`),
		chromedp.WaitVisible(`#live[data-state="live"]`),
	)

	// Node 3 leaves; node 5 takes over after a gap.
	broadcast(t, nc, c, protocol.TypeResign, 3, 1)
	run("see the cluster leaderless", chromedp.WaitVisible(`#cluster-default .current.none`))
	announce(t, nc, c, 5, 2, time.Now())
	run("see node 5 lead", chromedp.WaitVisible(`#cluster-default .current[data-leader="5"][data-term="2"]`))

	// Nodes 2 and 4 both claim term 4: split brain, marked on the page.
	announce(t, nc, c, 4, 4, time.Now())
	announce(t, nc, c, 2, 4, time.Now())
	run("see the split brain", chromedp.WaitVisible(`#cluster-default .seg.split`))
	announce(t, nc, c, 5, 5, time.Now())
	run("see node 5 lead again", chromedp.WaitVisible(`#cluster-default .current[data-leader="5"][data-term="5"]`))

	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("browser: take a screenshot: %v", err)
	}
	dir := os.Getenv("OBSERVER_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "observer-page.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
