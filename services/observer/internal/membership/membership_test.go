package membership

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 21, 22, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

const timeout = 4 * time.Second

// ids returns the IDs Members lists for cluster.
func ids(tr *Tracker, cluster string) []uint64 {
	var out []uint64
	for _, m := range tr.Members(cluster) {
		out = append(out, m.ID)
	}
	return out
}

func join(t *testing.T, tr *Tracker, cluster string, id uint64, now time.Time) {
	t.Helper()
	ch, joined, err := tr.Presence(cluster, id, now)
	if err != nil || !joined {
		t.Fatalf("presence of %d in %s at %v: joined %v, %v; want a join", id, cluster, now, joined, err)
	}
	if want := (Change{Member: id, Event: Joined, Reason: ReasonPresence, At: now}); ch != want {
		t.Fatalf("join %+v, want %+v", ch, want)
	}
}

// A member joins with its first presence and is listed by ID with when it
// joined and when it was last heard; another presence or any broadcast
// refreshes it without a second join.
func TestJoinAndRefresh(t *testing.T) {
	tr := New(timeout)
	join(t, tr, "a", 7, at(0))
	join(t, tr, "a", 3, at(100))
	if _, joined, err := tr.Presence("a", 7, at(1000)); joined || err != nil {
		t.Fatalf("a second presence of 7: joined %v, %v; want a refresh", joined, err)
	}
	if !tr.Heard("a", 3, at(1500)) {
		t.Fatal("a heartbeat of member 3 did not refresh it")
	}
	want := []Member{{ID: 3, Since: at(100), LastSeen: at(1500)}, {ID: 7, Since: at(0), LastSeen: at(1000)}}
	if got := tr.Members("a"); !slices.Equal(got, want) {
		t.Errorf("members %+v, want %+v", got, want)
	}
	if n := tr.Present("a"); n != 2 {
		t.Errorf("Present %d, want 2", n)
	}
	// A broadcast of a node that never sent a presence (a static
	// cluster's) makes no member.
	if tr.Heard("a", 9, at(1600)) || tr.Heard("static", 1, at(1600)) {
		t.Error("a broadcast without a presence made a member")
	}
	if tr.Follows("static") || tr.Members("static") != nil {
		t.Error("a cluster without presence is followed")
	}
}

// A resign makes a present member leave at once; a resign of one that is
// not present changes nothing.
func TestResign(t *testing.T) {
	tr := New(timeout)
	join(t, tr, "a", 7, at(0))
	join(t, tr, "a", 8, at(0))
	ch, left := tr.Resigned("a", 7, at(500))
	if want := (Change{Member: 7, Event: Left, Reason: ReasonResign, At: at(500)}); !left || ch != want {
		t.Fatalf("resign: %+v %v, want %+v", ch, left, want)
	}
	if _, left := tr.Resigned("a", 7, at(600)); left {
		t.Error("a second resign made the member leave again")
	}
	if got := ids(tr, "a"); !slices.Equal(got, []uint64{8}) {
		t.Errorf("members %v after the resign, want [8]", got)
	}
	// It may come back: a new join.
	join(t, tr, "a", 7, at(700))
}

// The close of a member's connection makes it leave, unless the server
// reported a newer connection of it opened: the late close of the old
// connection of a member that reconnected is no leave.
func TestDisconnect(t *testing.T) {
	tr := New(timeout)
	join(t, tr, "a", 7, at(0))
	tr.Connected("a", 7, at(-50))
	tr.Connected("a", 7, at(900)) // it reconnected
	if _, left := tr.Disconnected("a", 7, at(-50), at(1000)); left {
		t.Fatal("the close of the old connection made the member leave")
	}
	ch, left := tr.Disconnected("a", 7, at(900), at(2000))
	if want := (Change{Member: 7, Event: Left, Reason: ReasonDisconnected, At: at(2000)}); !left || ch != want {
		t.Fatalf("disconnect: %+v %v, want %+v", ch, left, want)
	}
	if _, left := tr.Disconnected("a", 8, at(0), at(2000)); left {
		t.Error("the close of a stranger's connection made a leave")
	}
	if tr.Follows("a") {
		t.Error("a cluster whose members all left is still followed")
	}
}

// A member not heard for the time-out while listening leaves silent, at
// the moment the time-out ran out; Next says when that is, and moves with
// every refresh.
func TestSilence(t *testing.T) {
	tr := New(timeout)
	listening := at(-10000)
	join(t, tr, "a", 7, at(0))
	join(t, tr, "b", 1, at(500))
	if next := tr.Next(at(500), listening); !next.Equal(at(4000)) {
		t.Fatalf("Next %v, want %v", next, at(4000))
	}
	tr.Heard("a", 7, at(3000))
	if got := tr.Expire(at(3999), listening); got != nil {
		t.Fatalf("Expire before any time-out: %+v", got)
	}
	if next := tr.Next(at(3999), listening); !next.Equal(at(4500)) {
		t.Fatalf("Next %v after the refresh, want %v", next, at(4500))
	}
	got := tr.Expire(at(4500), listening)
	want := []Expired{{Cluster: "b", Changes: []Change{{Member: 1, Event: Left, Reason: ReasonSilent, At: at(4500)}}}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Expire at the time-out: %+v, want %+v", got, want)
	}
	if got := tr.Expire(at(6999), listening); got != nil {
		t.Errorf("member 7, heard at 3 s, left before 7 s: %+v", got)
	}
	if got := tr.Expire(at(7000), listening); len(got) != 1 || got[0].Changes[0].Member != 7 {
		t.Errorf("member 7 still present at 7 s: %+v", got)
	}
	if next := tr.Next(at(7000), listening); !next.IsZero() {
		t.Errorf("Next %v with no member, want zero", next)
	}
}

// Silence counts only while the caller listens: nobody leaves while it
// does not, and a member heard before it listened again has the whole
// time-out from then.
func TestSilenceOnlyWhileListening(t *testing.T) {
	tr := New(timeout)
	join(t, tr, "a", 7, at(0))
	if got := tr.Expire(at(60000), time.Time{}); got != nil {
		t.Fatalf("a member left while the observer did not listen: %+v", got)
	}
	if next := tr.Next(at(60000), time.Time{}); !next.Equal(at(64000)) {
		t.Errorf("Next %v while not listening, want a time-out from now", next)
	}
	listening := at(59000)
	if got := tr.Expire(at(62999), listening); got != nil {
		t.Fatalf("a member left before a time-out of listening: %+v", got)
	}
	if got := tr.Expire(at(63000), listening); len(got) != 1 {
		t.Fatalf("Expire a time-out after listening again: %+v, want member 7 silent", got)
	}
}

// A member restored after a restart is not listed until heard; heard
// again it is listed with its old Since and no new join; not heard within
// a time-out of listening, it leaves silent.
func TestRestore(t *testing.T) {
	tr := New(timeout)
	if err := tr.Restore("a", 7, at(-60000)); err != nil {
		t.Fatal(err)
	}
	if err := tr.Restore("a", 8, at(-50000)); err != nil {
		t.Fatal(err)
	}
	if got := tr.Members("a"); len(got) != 0 || tr.Present("a") != 0 || !tr.Follows("a") {
		t.Fatalf("restored members listed before they are heard: %+v", got)
	}
	if _, joined, err := tr.Presence("a", 7, at(100)); joined || err != nil {
		t.Fatalf("presence of a restored member: joined %v, %v; want a refresh", joined, err)
	}
	if want := []Member{{ID: 7, Since: at(-60000), LastSeen: at(100)}}; !slices.Equal(tr.Members("a"), want) {
		t.Fatalf("members %+v, want %+v", tr.Members("a"), want)
	}
	listening := at(0)
	got := tr.Expire(at(4000), listening)
	if len(got) != 1 || len(got[0].Changes) != 1 || got[0].Changes[0] != (Change{Member: 8, Event: Left, Reason: ReasonSilent, At: at(4000)}) {
		t.Fatalf("Expire: %+v, want the restored member not heard silent", got)
	}
	if n := tr.Present("a"); n != 1 {
		t.Errorf("Present %d, want 1", n)
	}
}

// At most MaxMembers per cluster and MaxClusters clusters: one more join
// is refused, the members present stay, and a cluster whose members all
// left frees its place.
func TestBounds(t *testing.T) {
	tr := New(timeout)
	for id := uint64(1); id <= MaxMembers; id++ {
		join(t, tr, "a", id, at(0))
	}
	if _, joined, err := tr.Presence("a", MaxMembers+1, at(1)); joined || !errors.Is(err, ErrTooManyMembers) {
		t.Fatalf("member %d: joined %v, %v; want ErrTooManyMembers", MaxMembers+1, joined, err)
	}
	if _, joined, err := tr.Presence("a", 1, at(2)); joined || err != nil {
		t.Fatalf("a present member refused at the bound: joined %v, %v", joined, err)
	}
	if err := tr.Restore("a", MaxMembers+2, at(0)); !errors.Is(err, ErrTooManyMembers) {
		t.Fatalf("Restore beyond the bound: %v", err)
	}
	if n := tr.Present("a"); n != MaxMembers {
		t.Fatalf("Present %d, want %d", n, MaxMembers)
	}
	for i := 1; i < MaxClusters; i++ {
		join(t, tr, fmt.Sprint("c", i), 1, at(0))
	}
	if _, _, err := tr.Presence("one-more", 1, at(0)); !errors.Is(err, ErrTooManyClusters) {
		t.Fatalf("cluster %d: %v, want ErrTooManyClusters", MaxClusters+1, err)
	}
	tr.Resigned("c1", 1, at(10))
	join(t, tr, "one-more", 1, at(20))
}
