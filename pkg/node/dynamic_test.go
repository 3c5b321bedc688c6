package node_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/baton-election/baton/internal/batontest"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/membercreds"
	"github.com/baton-election/baton/pkg/node"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
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

// A byzantine cluster of dynamic membership: members 1 to 4 are the
// configured set, every member holds a credential of the authority;
// member 5 joins with its own, is added by the members' certified
// decision and, the highest, leads; when it leaves it is removed and 4
// leads again.
func TestSeamByzantineDynamic(t *testing.T) {
	authority, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	authorityPub, _ := authority.PublicKey()
	checker, err := membercreds.NewChecker("seam", authorityPub)
	if err != nil {
		t.Fatal(err)
	}
	signers, _ := batontest.MemberKeys(t, 1, 2, 3, 4, 5)
	set := map[uint64]*signing.Signer{}
	var lines strings.Builder
	for id := uint64(1); id <= 5; id++ {
		token, err := membercreds.Issue(authority, "seam", id, signers[id].PublicKey(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if set[id], err = signers[id].WithCredential(token); err != nil {
			t.Fatal(err)
		}
		if id <= 4 {
			fmt.Fprintf(&lines, "%d %s\n", id, signers[id].PublicKey())
		}
	}
	path := filepath.Join(t.TempDir(), "members")
	if err := os.WriteFile(path, []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	genesis, err := signing.ReadMemberKeysFile(path)
	if err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		s := newSim(t, protocol.Byzantine, 1, 2, 3, 4, 5)
		s.keys = func(id uint64) (*signing.Signer, *signing.MemberKeys, *signing.MemberKeys) {
			return set[id], checker.Keys(), genesis
		}
		byz := func(c *node.Config) {
			dynamic()(c)
			c.Election.Timing.LeaseTicks = 40
			c.Election.Timing.LeaderLeaseTicks = election.LeaderLease(40, election.DefaultMaxDrift)
		}
		ch := s.observer()
		for _, id := range []uint64{1, 2, 3, 4} {
			s.add(id, byz).run()
		}
		s.await("led by 4 with members 1 to 4", func(st protocol.Status) bool {
			return leads(st, 4) && slices.Equal(st.Members, []uint64{1, 2, 3, 4})
		})
		s.add(5, byz).run()
		s.await("led by 5 with members 1 to 5", func(st protocol.Status) bool {
			return leads(st, 5) && slices.Equal(st.Members, []uint64{1, 2, 3, 4, 5})
		})
		// A reader that holds the authority's key and the configured
		// members follows the set to 5's certificate.
		sets, err := signing.NewMemberSets("seam", genesis)
		if err != nil {
			t.Fatal(err)
		}
		reader := checker.Keys().WithMemberSets(sets)
		a := awaitLeader(t, ch, 5)
		if a.Certificate == nil || a.Certificate.Version < 1 || len(a.Steps) == 0 {
			t.Fatalf("announcement of 5: %+v, want a certificate of a later member set and the changes", a)
		}
		if err := signing.VerifyAnnouncementOf(reader, protocol.Byzantine, a); err != nil {
			t.Fatalf("a reader of the configured members and the authority refuses 5's announcement: %v", err)
		}
		if err := s.nodes[5].stop(); err != nil {
			t.Fatal(err)
		}
		delete(s.nodes, 5)
		s.await("led by 4 with members 1 to 4 after 5 left", func(st protocol.Status) bool {
			return leads(st, 4) && slices.Equal(st.Members, []uint64{1, 2, 3, 4})
		})
	})
}
