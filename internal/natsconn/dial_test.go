package natsconn_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/internal/natsconn"
)

// logBuffer is a log destination safe for concurrent use.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// keyOptions authenticate as the nkey user of a new key, and the key's
// public half.
func keyOptions(t *testing.T) ([]nats.Option, string) {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	public, _ := kp.PublicKey()
	return []nats.Option{nats.Nkey(public, kp.Sign)}, public
}

// A server that lists no nkey users refuses the member key before any
// credential is sent: Dial says why, once, and connects with the other
// credentials instead.
func TestDialWithoutNkeyUsers(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithUser("node", "pw"))
	keyOpts, _ := keyOptions(t)
	var logs logBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, withKey, err := natsconn.Dial(ctx, url, []nats.Option{nats.UserInfo("node", "pw")}, keyOpts, logs.logger())
	if err != nil {
		t.Fatalf("Dial: %v (log %s)", err, logs.String())
	}
	defer nc.Close()
	if withKey || !nc.IsConnected() {
		t.Errorf("connected %v with the key %v, want connected without it", nc.IsConnected(), withKey)
	}
	out := logs.String()
	if n := strings.Count(out, nats.ErrNkeysNotSupported.Error()); n != 1 {
		t.Errorf("log names %q %d times, want once:\n%s", nats.ErrNkeysNotSupported, n, out)
	}
	if !strings.Contains(out, "lists no nkey users") {
		t.Errorf("log does not say why the key is not used:\n%s", out)
	}
	// Without other credentials, it connects without any.
	open := batontest.StartNATS(t)
	nc2, withKey, err := natsconn.Dial(ctx, open, nil, keyOpts, logs.logger())
	if err != nil || withKey {
		t.Fatalf("Dial without other credentials: %v, with key %v", err, withKey)
	}
	nc2.Close()
}

// A server that lists the key is connected to with it.
func TestDialWithNkeyUser(t *testing.T) {
	signers, keys := batontest.MemberKeys(t, 1)
	url := batontest.StartNATS(t, batontest.WithAccounts(), batontest.WithMemberUsers(keys))
	var logs logBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nc, withKey, err := natsconn.Dial(ctx, url, nil, batontest.AsMember("c", signers[1]), logs.logger())
	if err != nil || !withKey {
		t.Fatalf("Dial: %v, with key %v (log %s)", err, withKey, logs.String())
	}
	nc.Close()
}

// Every failed attempt is logged with its reason: the server's refusal
// of the credentials, or no server at all. Dial keeps trying until its
// context ends.
func TestDialLogsEveryFailedAttempt(t *testing.T) {
	url := batontest.StartNATS(t, batontest.WithUser("node", "pw"))
	var logs logBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, _, err := natsconn.Dial(ctx, url, []nats.Option{nats.UserInfo("node", "wrong")}, nil, logs.logger())
		done <- err
	}()
	batontest.CheckFor(t, 10*time.Second, func() error {
		if n := strings.Count(logs.String(), "NATS connection attempt failed"); n < 3 {
			return fmt.Errorf("%d failed attempts logged", n)
		}
		return nil
	})
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("Dial after its context ended: %v, want %v", err, context.Canceled)
	}
	out := logs.String()
	if !strings.Contains(strings.ToLower(out), "authorization violation") {
		t.Errorf("log does not give the server's reason:\n%s", out)
	}
	if n := strings.Count(out, "level=WARN msg=\"NATS connection attempt failed\""); n != 1 {
		t.Errorf("%d attempts with the same reason logged at warn, want the first only:\n%s", n, out)
	}

	// Nobody listening: the reason is the dial's.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "nats://" + ln.Addr().String()
	ln.Close()
	var logs2 logBuffer
	short, cancel2 := context.WithTimeout(context.Background(), time.Second)
	defer cancel2()
	if _, _, err := natsconn.Dial(short, dead, nil, nil, logs2.logger()); err != context.DeadlineExceeded {
		t.Errorf("Dial to nobody: %v, want %v", err, context.DeadlineExceeded)
	}
	if !strings.Contains(logs2.String(), "NATS connection attempt failed") {
		t.Errorf("no failed attempt logged:\n%s", logs2.String())
	}
}
