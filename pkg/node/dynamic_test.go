package node_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/protocol"
)

// dynamic makes a node of a sim run with dynamic membership: it knows
// only itself at start.
func dynamic(voters ...uint64) func(*node.Config) {
	return func(cfg *node.Config) {
		timing := seamTiming
		timing.PresenceTicks = 20
		cfg.Election = election.Config{ID: cfg.Election.ID, Members: []uint64{cfg.Election.ID}, Timing: timing, Dynamic: true, Voters: voters}
	}
}

// await polls the nodes' /status on the bubble's clock until ok holds
// for every running node.
func (s *sim) await(what string, ok func(st protocol.Status) bool) {
	s.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		synctest.Wait()
		var bad error
		for id, m := range s.nodes {
			if m.cancel == nil {
				continue
			}
			if st, err := statusPage(m); err != nil || !ok(st) {
				bad = fmt.Errorf("node %d: %+v (%v)", id, st, err)
				break
			}
		}
		if bad == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("not %s: %v", what, bad)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func leads(st protocol.Status, id uint64) bool { return st.Leader != nil && *st.Leader == id }

// Members join and leave a Bully cluster of dynamic membership: /status
// lists those present, and the highest present leads.
func TestSeamDynamicMembers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSim(t, protocol.Bully, 1, 2, 3)
		for _, id := range []uint64{1, 2} {
			s.add(id, dynamic()).run()
		}
		s.await("led by 2 with members 1, 2", func(st protocol.Status) bool {
			return leads(st, 2) && slices.Equal(st.Members, []uint64{1, 2})
		})
		s.add(3, dynamic()).run()
		s.await("led by 3 with members 1, 2, 3", func(st protocol.Status) bool {
			return leads(st, 3) && slices.Equal(st.Members, []uint64{1, 2, 3})
		})
		if err := s.nodes[3].stop(); err != nil {
			t.Fatal(err)
		}
		delete(s.nodes, 3)
		s.await("led by 2 with members 1, 2 after 3 left", func(st protocol.Status) bool {
			return leads(st, 2) && slices.Equal(st.Members, []uint64{1, 2})
		})
	})
}

// POST /voters on the leader of a Paxos cluster of dynamic membership
// moves the voters through the joint configuration; a follower refuses.
func TestSeamChangeVoters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSim(t, protocol.Paxos, 1, 2, 3, 4)
		for _, id := range s.members {
			s.add(id, dynamic(1, 2, 3)).run()
		}
		s.await("led by 4", func(st protocol.Status) bool { return leads(st, 4) && st.Voters != nil })
		post := func(id uint64, query string) int {
			rec := httptest.NewRecorder()
			s.nodes[id].Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/voters?"+query, nil))
			return rec.Code
		}
		if code := post(3, "ids=2,3,4"); code != http.StatusConflict {
			t.Fatalf("POST /voters on a follower: %d, want 409", code)
		}
		if code := post(4, "ids=2,x"); code != http.StatusBadRequest {
			t.Fatalf("POST /voters with a bad ID: %d, want 400", code)
		}
		if code := post(4, "ids=2,3,4"); code != http.StatusAccepted {
			t.Fatalf("POST /voters on the leader: %d, want 202", code)
		}
		s.await("on voters 2, 3, 4", func(st protocol.Status) bool {
			return leads(st, 4) && st.Voters != nil && st.Voters.Version == 2 && slices.Equal(st.Voters.Voters, []uint64{2, 3, 4}) && !st.Voters.Joint()
		})
	})
}
