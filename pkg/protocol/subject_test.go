package protocol

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSubjects(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{LeaderSubject("default"), "election.default.leader"},
		{QuerySubject("prod-eu"), "election.prod-eu.query"},
		{InboxSubject("a_b", 12), "election.a_b.node.12"},
		{SubjectFor("c", Message{Type: TypeElection, From: 1}), "election.c.election"},
		{SubjectFor("c", Message{Type: TypeCoordinator, From: 1}), "election.c.coordinator"},
		{SubjectFor("c", Message{Type: TypeHeartbeat, From: 1}), "election.c.heartbeat"},
		{SubjectFor("c", Message{Type: TypeResign, From: 1}), "election.c.resign"},
		{SubjectFor("c", Message{Type: TypeAnswer, From: 1, To: 4}), "election.c.node.4"},
		{SubjectFor("c", Message{Type: TypeElection, From: 1, To: 4, Candidate: 4}), "election.c.node.4"},
		{SubjectFor("c", Message{Type: TypePrepare, From: 1, Term: 3}), "election.c.prepare"},
		{SubjectFor("c", Message{Type: TypePropose, From: 1, Term: 3}), "election.c.propose"},
		{SubjectFor("c", Message{Type: TypePromise, From: 1, To: 4, Term: 3}), "election.c.node.4"},
		{SubjectFor("c", Message{Type: TypeBzEvidence, From: 1}), "election.c.bz_evidence"},
		{SubjectFor("c", Message{Type: TypeBzVote, From: 1, Term: 3}), "election.c.bz_vote"},
		{SubjectFor("c", Message{Type: TypeBzStatus, From: 1, To: 4, Term: 3}), "election.c.node.4"},
		{BroadcastSubject("c", TypeBzAck), ""},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got subject %q, want %q", tt.got, tt.want)
		}
	}
	for _, s := range append(BroadcastSubjects("c"), LeaderSubject("c"), InboxSubject("c", 1), QuerySubject("c")) {
		if c, err := ClusterOf(s); err != nil || c != "c" {
			t.Errorf("ClusterOf(%q) = %q, %v; want \"c\", nil", s, c, err)
		}
	}
}

func TestValidateCluster(t *testing.T) {
	for _, ok := range []string{"default", "A-z_09", "x"} {
		if err := ValidateCluster(ok); err != nil {
			t.Errorf("ValidateCluster(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"", "a.b", "a*", ">", "a b", "é"} {
		if err := ValidateCluster(bad); !errors.Is(err, ErrClusterName) {
			t.Errorf("ValidateCluster(%q) = %v, want ErrClusterName", bad, err)
		}
	}
}

func TestCheckRoute(t *testing.T) {
	hb := Message{Type: TypeHeartbeat, From: 5, Term: 5}
	if err := CheckRoute("c", "election.c.heartbeat", hb); err != nil {
		t.Errorf("heartbeat on its subject: %v", err)
	}
	answer := Message{Type: TypeAnswer, From: 5, To: 2}
	wrong := []struct {
		subject string
		msg     Message
	}{
		{"election.c.coordinator", hb},   // wrong broadcast subject
		{"election.other.heartbeat", hb}, // other cluster
		{"election.c.node.3", answer},    // another node's inbox
		{"election.c.answer", answer},    // point-to-point type on a broadcast subject
	}
	for _, w := range wrong {
		if err := CheckRoute("c", w.subject, w.msg); ReasonOf(err) != ReasonWrongSubject || err == nil {
			t.Errorf("CheckRoute(%q, %v) = %v, want %s", w.subject, w.msg, err, ReasonWrongSubject)
		}
	}
}

func TestAnnouncement(t *testing.T) {
	at := time.Date(2026, 11, 21, 22, 0, 0, 123456789, time.FixedZone("x", 3600))
	data, err := EncodeAnnouncement(Announcement{Cluster: "default", Leader: 5, Term: 12, Algorithm: Bully, At: Timestamp{at}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"cluster":"default","leader":5,"term":12,"algorithm":"bully","at":"2026-11-21T21:00:00.123456789Z"}`
	if string(data) != want {
		t.Errorf("got %s, want %s", data, want)
	}
	// Whole seconds still carry nine digits.
	data, _ = json.Marshal(Timestamp{time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)})
	if string(data) != `"2026-01-02T03:04:05.000000000Z"` {
		t.Errorf("whole second: got %s", data)
	}
	a, err := DecodeAnnouncement([]byte(`{"cluster":"default","leader":5,"term":12,"algorithm":"ring","at":"2026-11-21T21:00:00.123456789Z","extra":[1]}`))
	if err != nil {
		t.Fatalf("DecodeAnnouncement with an unknown field: %v", err)
	}
	if a.Leader != 5 || a.Term != 12 || a.Algorithm != Ring || !a.At.Equal(at) {
		t.Errorf("decoded %+v", a)
	}
	for _, bad := range []string{
		`nope`,
		`{"cluster":"a.b","leader":5,"term":12,"at":"2026-11-21T21:00:00Z"}`,
		`{"cluster":"c","term":12,"at":"2026-11-21T21:00:00Z"}`,
		`{"cluster":"c","leader":5,"at":"2026-11-21T21:00:00Z"}`,
		`{"cluster":"c","leader":5,"term":12}`,
		`{"cluster":"c","leader":5,"term":12,"at":"yesterday"}`,
		`{"cluster":"c","leader":5,"term":12,"at":"2026-11-21T21:00:00Z","pad":"` + strings.Repeat("x", MaxPayload) + `"}`,
	} {
		if _, err := DecodeAnnouncement([]byte(bad)); !errors.Is(err, ErrAnnouncement) {
			t.Errorf("DecodeAnnouncement(%.60s) = %v, want ErrAnnouncement", bad, err)
		}
	}
}

func TestConnectionName(t *testing.T) {
	name := ConnectionName("prod-eu", 12)
	if name != "baton-node prod-eu/12" {
		t.Errorf("ConnectionName: got %q", name)
	}
	if c, id, ok := ParseConnectionName(name); !ok || c != "prod-eu" || id != 12 {
		t.Errorf("ParseConnectionName(%q) = %q, %d, %v", name, c, id, ok)
	}
	for _, bad := range []string{"", "baton-node ", "baton-node c/", "baton-node c/0", "baton-node c/x", "baton-node a.b/3", "other c/3", "baton-node c/18446744073709551616"} {
		if _, _, ok := ParseConnectionName(bad); ok {
			t.Errorf("ParseConnectionName(%q): ok, want refused", bad)
		}
	}
}

func TestMemberUser(t *testing.T) {
	const key = "UATDRDH3U7URFCT34LEE5UAAJW7UWE72SEXB5ASN3YC4LDKLQWEVRPL2"
	if got := MemberUser("Prod", 7, key); got != "baton Prod 7 "+key {
		t.Errorf("MemberUser: got %q", got)
	}
}
