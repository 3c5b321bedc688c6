package observer

import (
	"fmt"

	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/pkg/signing"
	"github.com/baton-election/baton/services/observer/internal/history"
)

// byzantine reports whether cluster runs the byzantine algorithm, as the
// observer's own configuration states it: its keys file in
// OBSERVER_KEYS_DIR says "#: algorithm byzantine"
// (signing.MemberKeys.Algorithm). Never from a message.
func (o *Observer) byzantine(cluster string) bool {
	return o.cfg.Keys[cluster].Algorithm() == protocol.Byzantine
}

// checkLive checks a live heartbeat, Paxos proposal or resign of cluster,
// already read (signed by its sender, with keys): in a byzantine cluster
// a heartbeat or proposal is signed by its sender alone, which proves
// nothing of a leadership (a byzantine leader is alive through its
// certified rounds), and it is refused as uncertified; then it must be
// valid for the cluster's members, with keys, and its term within the
// protocol's bounds, without.
func (o *Observer) checkLive(cluster, kind string, msg protocol.Message) error {
	if kind != protocol.KindResign && o.byzantine(cluster) {
		return fmt.Errorf("%w: a %s signed by its sender alone, in byzantine cluster %s", protocol.ErrUncertified, msg.Type, cluster)
	}
	return o.checkMessage(cluster, msg)
}

// checkMessage checks what a live message of cluster names: with keys,
// members only and every field in the protocol's bounds
// (protocol.Validate); without, its term at most protocol.MaxTerm.
func (o *Observer) checkMessage(cluster string, msg protocol.Message) error {
	if keys := o.cfg.Keys[cluster]; keys != nil {
		return validateWith(keys, msg)
	}
	if msg.Term > protocol.MaxTerm {
		return &protocol.ValidationError{Reason: protocol.ReasonInvalidField, Detail: fmt.Sprintf("term %d above the ceiling %d", msg.Term, protocol.MaxTerm)}
	}
	return nil
}

// checkLiveAnnouncement checks a leader announcement of cluster heard
// live, already read: in a byzantine cluster, whatever algorithm it
// names, it is a sign of its leader only with the certificate of that
// leader in that term, valid under the cluster's keys.
func (o *Observer) checkLiveAnnouncement(cluster string, a protocol.Announcement) error {
	if !o.byzantine(cluster) {
		return nil
	}
	if a.Certificate == nil {
		return fmt.Errorf("%w: an announcement of byzantine cluster %s without its certificate", protocol.ErrUncertified, cluster)
	}
	return o.checkRenewal(cluster, protocol.Message{From: a.Leader, Term: a.Term, Cert: a.Certificate})
}

// apply writes recs to cluster's history and counts the split brains,
// faulty members and member events the caps dropped to make room for them
// (observer_history_records_dropped_total). Only the owner goroutine
// writes, so the count before and after belongs to this write.
func (o *Observer) apply(cluster string, recs ...history.Record) ([]history.Record, error) {
	before := o.capped(cluster)
	kept, err := o.store.Apply(cluster, recs...)
	if err != nil {
		return nil, err
	}
	o.countDropped(cluster, before, kept)
	return kept, nil
}

// cappedCounts are a cluster's split brains, faulty members and member
// events, which the history caps.
type cappedCounts struct{ splits, faulty, members int }

func (o *Observer) capped(cluster string) cappedCounts {
	var c cappedCounts
	o.store.Read(cluster, func(h *history.Cluster) {
		c = cappedCounts{len(h.SplitBrains), len(h.Faulty), len(h.Membership)}
	})
	return c
}

// countDropped counts what the caps dropped from cluster's history to
// keep kept, written after the history held before.
func (o *Observer) countDropped(cluster string, before cappedCounts, kept []history.Record) {
	splits, faulty, members := before.splits, before.faulty, before.members
	for _, r := range kept {
		switch r.Kind {
		case history.KindSplit:
			splits++
		case history.KindFaulty:
			faulty++
		case history.KindMember:
			members++
		}
	}
	if n := splits - history.MaxSplitBrains; n > 0 {
		o.metrics.dropped.WithLabelValues(cluster, string(history.KindSplit)).Add(float64(n))
	}
	if n := faulty - history.MaxFaulty; n > 0 {
		o.metrics.dropped.WithLabelValues(cluster, string(history.KindFaulty)).Add(float64(n))
	}
	if n := members - history.MaxMembership; n > 0 {
		o.metrics.dropped.WithLabelValues(cluster, string(history.KindMember)).Add(float64(n))
	}
}

// validateWith checks msg's fields and members with keys: the members
// listed, or with member credentials any ID of dynamic membership (the
// keys know only the members heard so far, and a certificate names
// members the observer may not have heard).
func validateWith(keys *signing.MemberKeys, msg protocol.Message) error {
	if keys.Authority() {
		return protocol.ValidateFor(msg, protocol.DynamicMember)
	}
	return protocol.Validate(msg, keys.IDs())
}
