package localcluster

import "testing"

func TestParseMetrics(t *testing.T) {
	text := `# HELP election_messages_sent_total Messages sent, by type.
# TYPE election_messages_sent_total counter
election_messages_sent_total{type="election"} 3
election_messages_sent_total{type="heartbeat"} 120
election_messages_sent_total{type="odd label, with space"} 2 1700000000000
election_elections_started_total 4
election_term 1.2e+01
not_a_number{x="1"} NaNx
`
	m := ParseMetrics(text)
	tests := []struct {
		name string
		want float64
	}{
		{"election_messages_sent_total", 125},
		{"election_elections_started_total", 4},
		{"election_term", 12},
		{"election_leader_changes_total", 0},
		{"not_a_number", 0},
	}
	for _, tt := range tests {
		if got := m.Sum(tt.name); got != tt.want {
			t.Errorf("Sum(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
	if got, want := m[`election_messages_sent_total{type="heartbeat"}`], 120.0; got != want {
		t.Errorf("heartbeat series = %v, want %v", got, want)
	}
}
