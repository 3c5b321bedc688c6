package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/internal/natsconf"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// statusOf reads GET /status?cluster=c of the node at base.
func statusOf(base, cluster string) (protocol.Status, int, error) {
	resp, err := http.Get(base + "/status?cluster=" + cluster)
	if err != nil {
		return protocol.Status{}, 0, err
	}
	defer resp.Body.Close()
	var st protocol.Status
	if resp.StatusCode != http.StatusOK {
		return st, resp.StatusCode, nil
	}
	return st, resp.StatusCode, json.NewDecoder(resp.Body).Decode(&st)
}

// agreed waits until every node at bases names one leader, among alive,
// in each election of clusters, and returns the leaders.
func agreed(t *testing.T, bases map[uint64]string, clusters []string, alive ...uint64) map[string]uint64 {
	t.Helper()
	leaders := make(map[string]uint64)
	batontest.CheckFor(t, 20*time.Second, func() error {
		clear(leaders)
		for _, c := range clusters {
			for id, base := range bases {
				st, code, err := statusOf(base, c)
				switch {
				case err != nil || code != http.StatusOK:
					return fmt.Errorf("node %d, %s: %d %v", id, c, code, err)
				case st.Cluster != c || st.Leader == nil:
					return fmt.Errorf("node %d, %s: %+v", id, c, st)
				case leaders[c] != 0 && leaders[c] != *st.Leader:
					return fmt.Errorf("%s: node %d names %d, another %d", c, id, *st.Leader, leaders[c])
				}
				leaders[c] = *st.Leader
			}
			found := false
			for _, id := range alive {
				found = found || leaders[c] == id
			}
			if !found {
				return fmt.Errorf("%s: leader %d is not among %v", c, leaders[c], alive)
			}
		}
		return nil
	})
	return leaders
}

// TestBinaryManyElections runs three node processes, each in 24 elections
// over one connection (ELECTION_CLUSTERS with a range): each election
// elects the member of highest rank (spread by default with several
// elections, so each member leads some), /status?cluster= answers for
// each, and a process killed with SIGKILL has each election it led
// led again by one of the others.
func TestBinaryManyElections(t *testing.T) {
	bin := batontest.BuildBinary(t, ".")
	url := batontest.StartNATS(t, batontest.WithAccounts())
	var clusters []string
	for i := range 24 {
		clusters = append(clusters, fmt.Sprintf("shard-%d", i))
	}
	bases := make(map[uint64]string)
	cmds := make(map[uint64]*exec.Cmd)
	for id := uint64(1); id <= 3; id++ {
		cmds[id], bases[id] = startBinary(t, bin, map[string]string{
			"NATS_URL": url, "NATS_USER": natsconf.NodeUser, "NATS_PASSWORD": natsconf.LocalPasswords.Node,
			"NODE_ID": fmt.Sprint(id), "NODE_PEERS": "1,2,3", "ELECTION_CLUSTERS": "shard-{0..23}",
			"HTTP_ADDR": "127.0.0.1:0", "ELECTION_DATA": t.TempDir(),
		})
	}
	leaders := agreed(t, bases, clusters, 1, 2, 3)
	led := make(map[uint64]int)
	for _, l := range leaders {
		led[l]++
	}
	for id := uint64(1); id <= 3; id++ {
		if led[id] == 0 {
			t.Errorf("member %d leads none of %d elections (leaders per member %v): the rank does not spread them", id, len(clusters), led)
		}
	}
	for _, c := range clusters {
		rank := election.Spread(c)
		if want := rank.Highest([]uint64{1, 2, 3}); leaders[c] != want {
			t.Errorf("%s: led by %d, but %d ranks highest", c, leaders[c], want)
		}
	}
	if st, code, _ := statusOf(bases[1], "shard-99"); code != http.StatusNotFound {
		t.Errorf("/status?cluster= of an election the node is not in: %d %+v, want 404", code, st)
	}
	resp, err := http.Get(bases[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("election_is_leader %d\n", led[1]); !strings.Contains(string(metrics), want) {
		t.Errorf("/metrics of member 1 lacks %q", strings.TrimSpace(want))
	}

	// The process of the member leading the most dies without a word.
	victim := uint64(1)
	for id := uint64(2); id <= 3; id++ {
		if led[id] > led[victim] {
			victim = id
		}
	}
	if err := cmds[victim].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmds[victim].Wait()
	delete(bases, victim)
	var alive []uint64
	for id := range bases {
		alive = append(alive, id)
	}
	after := agreed(t, bases, clusters, alive...)
	for c, l := range leaders {
		if l != victim && after[c] != l {
			t.Errorf("%s: led by %d, which stayed, but now by %d", c, l, after[c])
		}
	}
}

// A process of several elections that hangs, its connection open (SIGSTOP),
// has its beats stop: the other processes tell each of their elections that
// it is down, and every election it led is led again by one of them,
// without waiting for each election's own (backstop) time-out.
func TestBinaryManyElectionsHang(t *testing.T) {
	bin := batontest.BuildBinary(t, ".")
	url := batontest.StartNATS(t, batontest.WithAccounts())
	var clusters []string
	for i := range 16 {
		clusters = append(clusters, fmt.Sprintf("shard-%d", i))
	}
	bases := make(map[uint64]string)
	cmds := make(map[uint64]*exec.Cmd)
	for id := uint64(1); id <= 3; id++ {
		cmds[id], bases[id] = startBinary(t, bin, map[string]string{
			"NATS_URL": url, "NATS_USER": natsconf.NodeUser, "NATS_PASSWORD": natsconf.LocalPasswords.Node,
			"NODE_ID": fmt.Sprint(id), "NODE_PEERS": "1,2,3", "ELECTION_CLUSTERS": "shard-{0..15}",
			"HTTP_ADDR": "127.0.0.1:0", "ELECTION_DATA": t.TempDir(),
		})
	}
	leaders := agreed(t, bases, clusters, 1, 2, 3)
	led := make(map[uint64]int)
	for _, l := range leaders {
		led[l]++
	}
	victim := uint64(1)
	for id := uint64(2); id <= 3; id++ {
		if led[id] > led[victim] {
			victim = id
		}
	}
	if err := cmds[victim].Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmds[victim].Process.Signal(syscall.SIGCONT) })
	delete(bases, victim)
	var alive []uint64
	for id := range bases {
		alive = append(alive, id)
	}
	after := agreed(t, bases, clusters, alive...)
	for c, l := range leaders {
		if l != victim && after[c] != l {
			t.Errorf("%s: led by %d, which stayed, but now by %d", c, l, after[c])
		}
	}
	for _, id := range alive {
		metrics := scrape(t, bases[id])
		if v := metricValue(metrics, "election_beats_lost_total"); v < 1 {
			t.Errorf("member %d: election_beats_lost_total %v, want at least 1", id, v)
		}
		if v := metricValue(metrics, `election_suspicions_total{reason="beats_lost"}`); v < 1 && led[victim] > 0 {
			t.Errorf("member %d followed member %d in %d elections, and gave up on none for its beats", id, victim, led[victim])
		}
	}
}

// scrape reads GET /metrics of the node at base.
func scrape(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// metricValue is the value of series (its name and labels as exposed) in
// a Prometheus text exposition, or -1.
func metricValue(text, series string) float64 {
	for line := range strings.SplitSeq(text, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil {
				return f
			}
		}
	}
	return -1
}
