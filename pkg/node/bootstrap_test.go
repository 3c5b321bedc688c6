package node

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/internal/core"
	"github.com/baton-election/baton/pkg/protocol"
)

// source is a TermSource with fixed answers; a zero answer with wait set
// blocks until the context ends.
type source struct {
	leader, last protocol.Announcement
	wait         bool
}

func (s source) answer(ctx context.Context, a protocol.Announcement) (protocol.Announcement, error) {
	if a.Leader == 0 && a.Term == 0 {
		if s.wait {
			<-ctx.Done()
			return protocol.Announcement{}, ctx.Err()
		}
		return protocol.Announcement{}, errors.New("nothing")
	}
	return a, nil
}

func (s source) Leader(ctx context.Context) (protocol.Announcement, error) {
	return s.answer(ctx, s.leader)
}

func (s source) LastAnnounced(ctx context.Context) (protocol.Announcement, error) {
	return s.answer(ctx, s.last)
}

// Learn asks for the leader and the stream at once, and returns what it
// learned within its time-out, with an error for what it did not.
func TestLearn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		both := source{leader: protocol.Announcement{Leader: 3, Term: 7}, last: protocol.Announcement{Leader: 2, Term: 9}}
		if got, err := Learn(t.Context(), both, time.Second); err != nil || got != (Learned{Leader: 3, Term: 7, Last: 9}) {
			t.Errorf("Learn with both: %+v, %v; want leader 3 at 7, last 9, no error", got, err)
		}
		start := time.Now()
		silent := source{leader: protocol.Announcement{Leader: 3, Term: 7}, wait: true}
		got, err := Learn(t.Context(), silent, 500*time.Millisecond)
		if err == nil || got != (Learned{Leader: 3, Term: 7}) {
			t.Errorf("Learn without a stream: %+v, %v; want leader 3 at 7 and an error", got, err)
		}
		if waited := time.Since(start); waited != 500*time.Millisecond {
			t.Errorf("Learn without a stream waited %v, want its time-out, 500ms", waited)
		}
		if got.MaxTerm() != 7 {
			t.Errorf("MaxTerm: %d, want 7", got.MaxTerm())
		}
	})
}

// Bootstrap starts from the highest term stored or learned, bounded by
// what one member may move the terms (core.TermBurst), follows a live
// leader other than itself, and takes an incarnation above the stored
// one whatever the clock says.
func TestBootstrap(t *testing.T) {
	now := time.Unix(1000, 0)
	saved := election.HardState{Term: 4, MaxTerm: 5}
	for _, tc := range []struct {
		name      string
		learned   Learned
		id        uint64
		savedInc  uint64
		wantMax   uint64
		wantFound election.Leadership
		wantInc   uint64
	}{
		{"nothing learned", Learned{}, 1, 0, 5, election.Leadership{}, uint64(now.UnixNano())},
		{"a leader above", Learned{Leader: 3, Term: 9}, 1, 0, 9, election.Leadership{Leader: 3, Term: 9}, uint64(now.UnixNano())},
		{"itself", Learned{Leader: 1, Term: 9}, 1, 0, 9, election.Leadership{}, uint64(now.UnixNano())},
		{"the stream above", Learned{Last: 12}, 1, 0, 12, election.Leadership{}, uint64(now.UnixNano())},
		{"a leader beyond the burst", Learned{Leader: 3, Term: 5 + core.TermBurst + 1}, 1, 0, 5, election.Leadership{}, uint64(now.UnixNano())},
		{"a stream beyond the burst", Learned{Last: 1 << 60}, 1, 0, 5 + core.TermBurst, election.Leadership{}, uint64(now.UnixNano())},
		{"a clock behind the stored incarnation", Learned{}, 1, uint64(now.UnixNano()) + 10, 5, election.Leadership{}, uint64(now.UnixNano()) + 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := Bootstrap(saved, tc.savedInc, tc.learned, tc.id, now)
			if st.State.Term != saved.Term || st.State.MaxTerm != tc.wantMax || st.Found != tc.wantFound || st.Incarnation != tc.wantInc || !st.At.Equal(now) {
				t.Errorf("got %+v, want term %d, max term %d, found %+v, incarnation %d at %v",
					st, saved.Term, tc.wantMax, tc.wantFound, tc.wantInc, now)
			}
		})
	}
}
