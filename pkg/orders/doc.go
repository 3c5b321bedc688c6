// Package orders runs the generals' agreement on a byzantine leader's
// orders over NATS: the leader issues a value (an order, a configuration),
// the members relay it with oral messages, OM(f) of package generals, and
// every honest member decides the same value, the leader's own when the
// leader is honest (IC1 and IC2), with up to f = ⌊(N−1)/3⌋ members lying
// with their own keys. It runs beside a node of the byzantine algorithm,
// on the node's NATS connection or its own, and depends on no node
// internals.
//
// The agreement itself is agreement.Machine (package orders/agreement),
// pure and deterministic, which the simulator runs too; a Service is its
// NATS edge: the subscription, the signatures of whole messages, the
// leaders it follows, its clock, and what it publishes.
//
// # Who may issue
//
// Issue succeeds only on the member that the newest certified
// announcement names as leader: Run follows the cluster's leader with
// leader.Watch and WithKeys (or Config.Leaders), so the member's own
// announcement, with the certificate a quorum of the members signed for
// its term, is what lets it issue. An application that learned it leads
// passes its announcement to IssueAs, which checks the certificate and
// spares the wait for Run's own watch. The order is identified by (cluster,
// term, seq), seq counting the orders of the term from 1. The leader's
// messages carry its certificate, and a member opens an order only on a
// message signed by the leader that a valid certificate names for the
// order's term: a member that was not elected cannot issue, since it
// holds no certificate of its own, and an honest member signs votes for
// one leader per term, so no two members are certified for one term.
//
// A leader that was superseded without hearing of it yet still issues
// in its own term, and the members still agree on that order: the term
// is the fencing token (leader.NewCertifiedFence) by which an
// application orders what two leaders issued.
//
// # The messages
//
// Every member broadcasts its oral messages on protocol.OrderSubject, as
// protocol.OrderMessage: the sender, the relays it sends at once (the
// recipient, the path of member IDs, the value, the relay's signature)
// and the leader's certificate on the leader's own messages. Each
// message is signed with the sender's member key (signing.Signer), and
// a receiver takes the verified signer for the sender, which the paths
// must end at (A2 of package generals): a member can lie about what
// reached it but not speak for another. Messages with a bad or missing
// signature, of another cluster, or malformed are dropped and counted
// (Stats.Rejected). The messages wait for the service's goroutine in a
// bounded inbox of which each member may fill 1/N: a message past its
// sender's share is dropped (Stats.Dropped) before its signature is
// checked, so that a member flooding the others costs them little and
// drops only its own messages.
//
// Each relay is also a signed statement of its sender,
// certify.Relay(cluster, term, seq, path, value): one signature covers
// every relay of a message with the same path and value. A relay to this
// member whose signature is not its sender's is dropped and counted
// (Stats.Rejected), so every lie that counts is signed.
//
// # Evidence
//
// Every member sees every relay, whoever it is addressed to. Two relays
// of one member along one path of an order with different values, both
// signed by it, are proof that it lied (certify.Contradicts; no honest
// member signs both). The member that finds them logs them, counts them
// (Stats.Evidence) and broadcasts them as a protocol.TypeBzEvidence
// message on the cluster's evidence subject, signed with its key, once
// per liar and order: the observer checks the proof against the keys and
// records the liar as faulty. The nodes' transports drop these messages
// (they carry no freshness fields; the node's replay guard knows the
// member's node, not its orders service), so a node does not stop
// counting on a member for lying about orders.
//
// Each member decides when every path has arrived or the last round's
// deadline has passed, and publishes its decision on
// protocol.DecidedSubject, signed (protocol.Decision). An application
// believes a decision only once f+1 members signed the same value, so
// that at least one honest member decided it: leader.Orders does that.
//
// # Rounds and bounds
//
// A member opens an order when the leader's message reaches it, and
// round L of the order ends Config.Round × L later (A1 and A3 of package
// generals: the caller ends rounds on deadlines): a round must outlast
// the delivery of a message and of its relays, a few heartbeat intervals
// by default. An honest member's message that arrives after its round
// ended counts as the default value, so its sender then spends one of the
// f faults. Time comes from Config.Clock, which tests replace.
//
// Orders open in increasing (term, seq): a member refuses an order no
// greater than the greatest it opened, so a replayed order is not run
// again (the leader publishes its orders in order, on one connection,
// and NATS keeps a publisher's order). At most Config.MaxOrders orders
// of the newest certified term are under way on a member, and as many of
// older terms (a superseded leader cannot take the current leader's
// slots); a leader refuses to issue more (ErrBusy)
// within the time the members need to decide them. Messages of an order
// a member has not opened yet (a relay that overtook the leader's
// message) wait in a bounded buffer until it opens or their rounds would
// have ended. Every value is at most generals.MaxValueSize bytes of
// UTF-8, every message at most protocol.MaxOrderMessage bytes, every
// path and member checked before use.
//
// A second message to this member along one path with another value (a
// member that lied to this one, generals.ErrEquivocation) is logged and
// counted (Stats.Equivocations); the first value stays.
//
// # What is not guaranteed
//
// The agreement holds among the members that keep the round deadlines:
// a member partitioned away for a round acts as a traitor for that order.
// Decisions are published once, at most-once over core NATS: a consumer
// that is disconnected when an order is decided does not see it.
//
// A Service keeps, in Config.StateFile, the greatest order it took part
// in, written before any message of that order leaves, and takes part in
// none up to it after a restart. Without it (Config.Ephemeral, which only
// tests may use) a member whose service restarts forgets which orders it
// took part in, and opens again an order whose leader's message reaches
// it again (a liar's replay). Relaying along its own paths a second time,
// it may then sign another value than before (what a liar tells it now),
// which is evidence against it; and a leader restarted within its term
// numbers its orders from 1 again, which the members take for replays.
// So New refuses a Config with neither.
package orders

import ()
