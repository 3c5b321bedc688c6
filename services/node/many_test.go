package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
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

// manyRun is three node processes, each in the same elections over one
// connection (ELECTION_CLUSTERS with a range), once every election has
// an agreed leader.
type manyRun struct {
	clusters []string
	bases    map[uint64]string
	cmds     map[uint64]*exec.Cmd
	leaders  map[string]uint64 // by election
	led      map[uint64]int    // elections led, by member
}

// startMany starts three node processes in elections shard-0 to
// shard-(n-1) and waits until each election has one leader.
func startMany(t *testing.T, n int) *manyRun {
	t.Helper()
	bin := batontest.BuildBinary(t, ".")
	url := batontest.StartNATS(t, batontest.WithAccounts())
	r := &manyRun{bases: make(map[uint64]string), cmds: make(map[uint64]*exec.Cmd), led: make(map[uint64]int)}
	for i := range n {
		r.clusters = append(r.clusters, fmt.Sprintf("shard-%d", i))
	}
	for id := uint64(1); id <= 3; id++ {
		r.cmds[id], r.bases[id] = startBinary(t, bin, map[string]string{
			"NATS_URL": url, "NATS_USER": natsconf.NodeUser, "NATS_PASSWORD": natsconf.LocalPasswords.Node,
			"NODE_ID": fmt.Sprint(id), "NODE_PEERS": "1,2,3", "ELECTION_CLUSTERS": fmt.Sprintf("shard-{0..%d}", n-1),
			"HTTP_ADDR": "127.0.0.1:0", "ELECTION_DATA": t.TempDir(),
		})
	}
	r.leaders = agreed(t, r.bases, r.clusters, 1, 2, 3)
	for _, l := range r.leaders {
		r.led[l]++
	}
	return r
}

// busiest is the member that leads the most elections.
func (r *manyRun) busiest() uint64 {
	victim := uint64(1)
	for id := uint64(2); id <= 3; id++ {
		if r.led[id] > r.led[victim] {
			victim = id
		}
	}
	return victim
}

// ledAgain waits until the processes other than victim's agree on a
// leader among them in every election, and checks that the elections
// victim did not lead kept their leaders.
func (r *manyRun) ledAgain(t *testing.T, victim uint64) {
	t.Helper()
	delete(r.bases, victim)
	var alive []uint64
	for id := range r.bases {
		alive = append(alive, id)
	}
	after := agreed(t, r.bases, r.clusters, alive...)
	for c, l := range r.leaders {
		if l != victim && after[c] != l {
			t.Errorf("%s: led by %d, which stayed, but now by %d", c, l, after[c])
		}
	}
}

// TestBinaryManyElections runs three node processes, each in 24 elections
// over one connection (ELECTION_CLUSTERS with a range): each election
// elects the member of highest rank (spread by default with several
// elections, so each member leads some), /status?cluster= answers for
// each, and a process killed with SIGKILL has each election it led
// led again by one of the others.
func TestBinaryManyElections(t *testing.T) {
	r := startMany(t, 24)
	for id := uint64(1); id <= 3; id++ {
		if r.led[id] == 0 {
			t.Errorf("member %d leads none of %d elections (leaders per member %v): the rank does not spread them", id, len(r.clusters), r.led)
		}
	}
	for _, c := range r.clusters {
		rank := election.Spread(c)
		if want := rank.Highest([]uint64{1, 2, 3}); r.leaders[c] != want {
			t.Errorf("%s: led by %d, but %d ranks highest", c, r.leaders[c], want)
		}
	}
	if st, code, _ := statusOf(r.bases[1], "shard-99"); code != http.StatusNotFound {
		t.Errorf("/status?cluster= of an election the node is not in: %d %+v, want 404", code, st)
	}
	if want := fmt.Sprintf("election_is_leader %d\n", r.led[1]); !strings.Contains(scrape(t, r.bases[1]), want) {
		t.Errorf("/metrics of member 1 lacks %q", strings.TrimSpace(want))
	}

	// The process of the member leading the most dies without a word.
	victim := r.busiest()
	if err := r.cmds[victim].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r.cmds[victim].Wait()
	r.ledAgain(t, victim)
}

// A process of several elections that hangs, its connection open (SIGSTOP),
// has its beats stop: the other processes tell each of their elections that
// it is down, and every election it led is led again by one of them,
// without waiting for each election's own (backstop) time-out.
func TestBinaryManyElectionsHang(t *testing.T) {
	r := startMany(t, 16)
	victim := r.busiest()
	// A process's hang is found by its beats once the others follow
	// them: the elections may agree before its first beat reaches them.
	batontest.CheckFor(t, 10*time.Second, func() error {
		for id, base := range r.bases {
			if n := metricValue(scrape(t, base), "election_beats_followed"); n != 2 {
				return fmt.Errorf("member %d follows the beats of %v members, want 2", id, n)
			}
		}
		return nil
	})
	if err := r.cmds[victim].Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.cmds[victim].Process.Signal(syscall.SIGCONT) })
	bases := maps.Clone(r.bases)
	r.ledAgain(t, victim)
	for id := range r.bases {
		metrics := scrape(t, r.bases[id])
		if v := metricValue(metrics, "election_beats_lost_total"); v < 1 {
			t.Errorf("member %d: election_beats_lost_total %v, want at least 1", id, v)
		}
		if v := metricValue(metrics, `election_suspicions_total{reason="beats_lost"}`); v < 1 && r.led[victim] > 0 {
			t.Errorf("member %d followed member %d in %d elections, and gave up on none for its beats", id, victim, r.led[victim])
		}
	}

	// Resumed, it takes back the elections in which it ranks highest,
	// and every process agrees on every leader again.
	if err := r.cmds[victim].Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	after := agreed(t, bases, r.clusters, 1, 2, 3)
	for _, c := range r.clusters {
		if after[c] != r.leaders[c] {
			t.Errorf("%s: led by %d after member %d resumed, but %d ranks highest", c, after[c], victim, r.leaders[c])
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
