package sim_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/baton-election/baton/pkg/byzantine"
	"github.com/baton-election/baton/pkg/certify"
	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/sim"
)

// byzantineCluster returns a cluster of members 1..n running the
// byzantine algorithm, with the members' keys and signers.
func byzantineCluster(t *testing.T, n int, traitors []uint64, trace *strings.Builder) (*sim.Cluster, map[uint64]certify.Signer) {
	t.Helper()
	var ids []uint64
	for id := uint64(1); id <= uint64(n); id++ {
		ids = append(ids, id)
	}
	keys, signers, err := sim.MemberKeys(ids)
	if err != nil {
		t.Fatal(err)
	}
	cfg := sim.Config{
		Members: ids, Timing: election.DefaultLeaseTiming(n), Leases: true, Keys: keys, Traitors: traitors,
		Factory: func(cfg election.Config) (election.Machine, error) {
			return byzantineSpec.Factory(cfg, sim.ByzantineCluster, signers[cfg.ID], keys)
		},
		Rand: rand.New(rand.NewPCG(1, 2)), Network: sim.Quiet(sim.TMax),
	}
	if trace != nil {
		cfg.Trace = trace
	}
	c, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c, signers
}

func signed(t *testing.T, s certify.Signer, st certify.Statement) certify.SignedStatement {
	t.Helper()
	ss, err := certify.Sign(s, st)
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

// The cluster finds two valid certificates of one term that name
// different leaders. No f traitors can make them; all of 1..4 signing
// both (as here, with every key at hand) can.
func TestTwoCertifiedLeadersCaught(t *testing.T) {
	var trace strings.Builder
	c, signers := byzantineCluster(t, 4, []uint64{4}, &trace)
	cert := func(term, leader uint64) *certify.Certificate {
		var votes []certify.SignedStatement
		for id := uint64(1); id <= 4; id++ {
			votes = append(votes, signed(t, signers[id], certify.Vote(sim.ByzantineCluster, id, term, leader)))
		}
		cc, err := certify.NewCertificate(votes)
		if err != nil {
			t.Fatal(err)
		}
		return &cc
	}
	// Term 5 is led by 4 of 1..4 (index (5−1) mod 4 = 0).
	for _, leader := range []uint64{4, 3} {
		m := protocol.Message{Type: protocol.TypeBzStatus, From: 4, To: 1, Term: 5, Cert: cert(5, leader), Candidate: leader}
		if err := c.Inject(m); err != nil {
			t.Fatalf("inject %v: %v", m, err)
		}
		if leader == 4 && c.Err() != nil {
			t.Fatalf("one certificate of term 5: %v", c.Err())
		}
	}
	if err := c.Err(); !errors.Is(err, sim.ErrInvariant) || !strings.Contains(err.Error(), "two certified leaders in term 5") {
		t.Fatalf("err = %v, want two certified leaders in term 5\n%s", err, trace.String())
	}
}

// A certificate that does not verify (one member's votes, near the
// ceiling) is no certificate: the cluster does not count it.
func TestForgedCertificateIgnored(t *testing.T) {
	c, signers := byzantineCluster(t, 4, []uint64{4}, nil)
	for _, id := range []uint64{1, 2, 3} {
		c.Start(id)
	}
	c.Run(100)
	term := protocol.MaxTerm - 3 // led by 4 of 1..4
	v := signed(t, signers[4], certify.Vote(sim.ByzantineCluster, 4, term, 4))
	cert, err := certify.NewCertificate([]certify.SignedStatement{v})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Inject(protocol.Message{Type: protocol.TypeBzPropose, From: 4, Term: term, Seq: 1, Cert: &cert}); err != nil {
		t.Fatal(err)
	}
	c.Run(100)
	if err := c.Err(); err != nil {
		t.Fatalf("a forged certificate: %v", err)
	}
	for _, id := range []uint64{1, 2, 3} {
		if st, _ := c.Status(id); st.Term >= term {
			t.Errorf("node %d took the forged term: %+v", id, st)
		}
	}
}

// A running member that convicts an honest member breaks an invariant:
// evidence framing member 2 (possible here only because the test holds
// 2's key) is injected by the traitor 4.
func TestHonestConvictionCaught(t *testing.T) {
	var trace strings.Builder
	c, signers := byzantineCluster(t, 4, []uint64{4}, &trace)
	for _, id := range []uint64{1, 2, 3} {
		c.Start(id)
	}
	c.Run(50)
	if err := c.Err(); err != nil {
		t.Fatal(err)
	}
	e := certify.Evidence{
		First:  signed(t, signers[2], certify.Vote(sim.ByzantineCluster, 2, 1, 3)),
		Second: signed(t, signers[2], certify.Vote(sim.ByzantineCluster, 2, 1, 1)),
	}
	if err := c.Inject(protocol.Message{Type: protocol.TypeBzEvidence, From: 4, Evidence: &e}); err != nil {
		t.Fatal(err)
	}
	c.Run(10)
	if err := c.Err(); !errors.Is(err, sim.ErrInvariant) || !strings.Contains(err.Error(), "convicted 2, an honest member") {
		t.Fatalf("err = %v, want a conviction of the honest member 2\n%s", err, trace.String())
	}
}

// mute is a machine whose messages are lost: nobody is ever certified.
type mute struct{ election.Machine }

func (m mute) Ready() election.Ready {
	r := m.Machine.Ready()
	r.Messages = nil
	return r
}

// The liveness check of the byzantine runs fails when no leader is
// certified.
func TestByzantineLivenessCaught(t *testing.T) {
	spec := byzantineSpec
	spec.Factory = func(cfg election.Config, cluster string, s certify.Signer, keys certify.Members) (election.Machine, error) {
		m, err := byzantineSpec.Factory(cfg, cluster, s, keys)
		return mute{m}, err
	}
	res := sim.RunByzantine(1, spec, 4, nil)
	if res.Err == nil || !strings.Contains(res.Err.Error(), "no certified leader") {
		t.Fatalf("err = %v, want no certified leader", res.Err)
	}
}

// A seed replays its run event for event; another seed runs differently.
func TestByzantineDeterministic(t *testing.T) {
	run := func(seed uint64) string {
		var trace strings.Builder
		res := sim.RunByzantine(seed, byzantineSpec, 7, &trace)
		if res.Err != nil {
			t.Fatalf("seed %d: %v", seed, res.Err)
		}
		return trace.String()
	}
	a, b, other := run(3), run(3), run(4)
	if a != b {
		t.Errorf("two runs of seed 3 differ")
	}
	if a == other {
		t.Errorf("seeds 3 and 4 ran the same: the seed decides nothing")
	}
}

// Every lie a traitor tells is a valid message of its own; among many,
// it equivocates (different broadcasts of one kind and term to different
// members), votes for two leaders in one term, claims near-ceiling terms
// answers members differently, and shows a real time-out certificate it
// assembled from what it saw.
func TestTraitorLies(t *testing.T) {
	ids := []uint64{2, 5, 9, 11}
	keys, signers, err := sim.MemberKeys(ids)
	if err != nil {
		t.Fatal(err)
	}
	shadow, err := byzantine.New(byzantine.Config{
		Config:  election.Config{ID: 11, Members: ids, Timing: election.DefaultLeaseTiming(4)},
		Cluster: sim.ByzantineCluster, Signer: signers[11], Keys: keys,
	})
	if err != nil {
		t.Fatal(err)
	}
	tr := sim.NewTraitor(sim.TraitorConfig{ID: 11, Signer: signers[11], Cluster: sim.ByzantineCluster, Members: ids,
		Accomplices: []uint64{11}, Shadow: shadow, Rand: rand.New(rand.NewPCG(5, 6))})
	// Members 2 and 5 give term 3 up: with its own, a quorum of 3.
	for _, id := range []uint64{2, 5} {
		to := signed(t, signers[id], certify.Timeout(sim.ByzantineCluster, id, 3))
		tr.Receive(protocol.Message{Type: protocol.TypeBzTimeout, From: id, Term: 3, Statement: &to})
	}
	assembled := false
	votes := map[uint64]map[uint64]bool{} // term → leaders voted for
	statusTerms := map[uint64]map[uint64]bool{}
	ceiling := false
	for range 2000 {
		for _, lie := range tr.Tick() {
			m := lie.Message
			if m.From != 11 {
				t.Fatalf("a lie from %d: %v", m.From, m)
			}
			if err := protocol.Validate(m, ids); err != nil {
				t.Fatalf("invalid lie %v: %v", m, err)
			}
			if s := m.Statement; s != nil && s.Verify(keys) != nil {
				t.Fatalf("a lie with a bad signature: %v", m)
			}
			switch m.Type {
			case protocol.TypeBzVote:
				if votes[m.Term] == nil {
					votes[m.Term] = map[uint64]bool{}
				}
				votes[m.Term][m.Statement.Statement.Leader] = true
			case protocol.TypeBzStatus:
				if statusTerms[m.To] == nil {
					statusTerms[m.To] = map[uint64]bool{}
				}
				statusTerms[m.To][m.Term] = true
				if m.TC != nil && m.TC.Term == 3 {
					if err := certify.VerifyTimeoutCertificate(keys, *m.TC, certify.Quorum(4)); err != nil {
						t.Fatalf("an assembled time-out certificate does not verify: %v", err)
					}
					assembled = true
				}
			}
			if m.Term > protocol.MaxTerm/2 || m.Statement != nil && m.Statement.Statement.Term > protocol.MaxTerm/2 {
				ceiling = true
			}
		}
	}
	twice := false
	for _, leaders := range votes {
		twice = twice || len(leaders) > 1
	}
	if !twice {
		t.Error("no two votes of one term for different leaders")
	}
	if !assembled {
		t.Error("no time-out certificate assembled from the time-outs it saw")
	}
	if !ceiling {
		t.Error("no near-ceiling term")
	}
	if len(statusTerms) < 3 {
		t.Errorf("statuses to %d members, want all 3", len(statusTerms))
	}
	if tr.Invalid() > 0 {
		t.Logf("%d lies dropped as invalid", tr.Invalid())
	}
}

// A member whose term goes back across a restart breaks an invariant of
// a certifying algorithm: here its disk is lost (a member without
// storage counts as one of the f that may lie, so the runs never do
// this).
func TestTermBackAcrossRestartCaught(t *testing.T) {
	var trace strings.Builder
	c, _ := byzantineCluster(t, 4, nil, &trace)
	for _, id := range []uint64{1, 2, 3, 4} {
		c.Start(id)
	}
	c.Run(100)
	c.Crash(4)
	c.Run(150)
	if st, _ := c.Status(3); st.Term < 2 || c.Err() != nil {
		t.Fatalf("after 4 crashed: %+v, %v\n%s", st, c.Err(), trace.String())
	}
	c.Crash(3)
	c.WipeDisk(3)
	c.Start(3)
	c.Run(5)
	if err := c.Err(); !errors.Is(err, sim.ErrInvariant) || !strings.Contains(err.Error(), "it accepted before") {
		t.Fatalf("err = %v, want the term of 3 gone back", err)
	}
}
