package observer

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/protocol"
)

// chromium returns the path of a Chromium or Chrome binary, or "".
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	return ""
}

// The page in a real headless browser: it shows the current leader, then
// follows a resign, a takeover and a split brain without a reload. The
// screenshot is kept in $OBSERVER_SCREENSHOT_DIR (default: the test's
// temporary directory).
func TestPageInBrowser(t *testing.T) {
	browser := chromium()
	if browser == "" {
		if os.Getenv("CI_BROWSER_REQUIRED") == "1" {
			t.Fatal("chromium not found and CI_BROWSER_REQUIRED=1")
		}
		t.Skip("chromium not found: skipping the browser test (apt-get install chromium)")
	}
	url := batontest.StartNATS(t, batontest.WithJetStream())
	nc := batontest.Connect(t, url)
	o := startObserver(t, testConfig(url, t.TempDir()), nil)
	c := "default"
	start := time.Now().Add(-2 * time.Second)
	announce(t, nc, announcement(c, 3, 1, start))
	o.waitFor(t, "term 1", func() bool { return o.leaderships(c) == 1 })

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
		chromedp.Navigate("http://"+o.Addr()+"/"),
		chromedp.WaitVisible(`#cluster-default .current[data-leader="3"][data-term="1"]`),
		chromedp.WaitVisible(`#live[data-state="live"]`),
	)

	// Node 3 leaves; node 5 takes over after a gap.
	broadcast(t, nc, c, protocol.TypeResign, 3, 1)
	run("see the cluster leaderless", chromedp.WaitVisible(`#cluster-default .current.none`))
	announce(t, nc, announcement(c, 5, 2, time.Now()))
	run("see node 5 lead", chromedp.WaitVisible(`#cluster-default .current[data-leader="5"][data-term="2"]`))

	// Nodes 2 and 4 both claim term 4: split brain, marked on the page.
	announce(t, nc, announcement(c, 4, 4, time.Now()))
	announce(t, nc, announcement(c, 2, 4, time.Now()))
	run("see the split brain", chromedp.WaitVisible(`#cluster-default .seg.split`))
	announce(t, nc, announcement(c, 5, 5, time.Now()))
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
