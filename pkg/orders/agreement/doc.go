// Package agreement is one member's part in the agreements on the orders
// of its cluster's certified leaders, OM(f) of package generals for each
// order, as a pure, deterministic state machine: no I/O, no goroutines,
// no clock. Package orders runs it over NATS (its subscription, the
// signatures of whole messages, its clock); the simulator (pkg/sim) runs
// the same machine on its fake network, with traitors.
//
// # Inputs and outputs
//
// The caller feeds the machine:
//
//   - Lead: the certificate of a certified leader (the cluster's
//     announcements); the newest one says whether this member may issue;
//   - Issue: a value this member, if it is that leader, issues as the
//     next order of its term;
//   - Receive: a message of another member, authenticated by the caller
//     (the message's signature is its sender's, A2 of package generals);
//   - Tick: the time has come that Next named (a round's end).
//
// Every call that needs the time takes it; the machine's output depends
// on its inputs alone. Ready then says what to do, in order: store
// Highest (the greatest order this member takes part in), broadcast
// Messages, publish Decisions and Evidence, log Events.
//
// # The rules
//
// An order is identified by (term, seq): the term of the leader that
// issued it, and its number among that leader's orders from 1. A member
// opens an order on the first message of the leader that a valid
// certificate names for the order's term, signed by that leader (the
// caller checked the signature, the machine the certificate); the orders
// open in increasing (term, seq), and one no greater than the greatest
// opened or issued, Config.Floor included, is stale. Round L of an order
// ends Config.Round × L after it opened; a path that has not arrived by
// then counts as the default. At most Config.MaxOrders orders of the
// newest certified term are under way (undecided), and at most as many
// of older terms: a leader superseded by a newer certified one (it may
// not know yet, and still issues) cannot take the current leader's
// slots. A leader issues at most MaxOrders orders within the rounds of
// an order (ErrBusy). Messages of an order not opened yet wait, at
// most 64 and a share of them per sender, until it opens or their rounds
// would have ended.
//
// # Signed relays and evidence
//
// Every relay a member sends is a signed statement of its own,
// certify.Relay(cluster, term, seq, path, value), path ending at itself:
// "this value reached me along this path". One signature covers every
// relay with the same path and value, whoever it is addressed to: an
// honest member relays one value per path, to everyone. The machine
// checks the signature of every relay it hands to its generals machine
// and drops a relay whose signature is not its sender's, so that every
// lie that counts is signed.
//
// Every member sees every relay (the messages are broadcast), whoever it
// is addressed to. For each path of an order the machine keeps the first
// relay seen along it; a second one with another value, both signed by
// the path's last member, is a certify.Evidence that it lied (the
// signatures of relays addressed to others are checked only then). The
// machine reports it once per liar and order (Ready.Evidence, Stats,
// the Convicted event). An honest member never gives such a pair: it
// takes part in an order once (Ready.Highest, kept across restarts as
// Config.Floor), and its generals machine keeps one value per path.
//
// # Bounds
//
// Members: generals.MinMembers to generals.MaxMembers. Every message is
// checked (protocol.ValidateOrderMessage, its cluster, its sender a
// member) and every path (members of the cluster, starting at the
// order's leader, at most f+1 long, the recipient outside it) before
// use. The machine follows at most 3·MaxOrders orders, each until its
// last round ends, keeps at most one relay per path of each, at most 8
// certified leaders, at most 64 early messages. The signatures it checks
// are bounded per order and sender, whatever the sender floods it with:
// a relay to this member is taken once per path, its signature checked
// then (a copy is skipped; another value along the path is checked only
// as evidence); after one relay to this member whose signature fails
// (an honest member never sends one) none of the sender's relays is
// taken in that order; at most 8 failing signatures per member and
// order are checked as evidence, and none once the member is convicted
// in the order. A member whose message carried a certificate of its own
// that did not hold has none of its certificates of terms up to that one
// checked again (unless certified already).
package agreement
