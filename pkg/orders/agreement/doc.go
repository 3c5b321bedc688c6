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
// on its inputs alone. Ready then says what to do, in order: broadcast
// Messages, publish Decisions, log Events.
//
// # The rules
//
// An order is identified by (term, seq): the term of the leader that
// issued it, and its number among that leader's orders from 1. A member
// opens an order on the first message of the leader that a valid
// certificate names for the order's term, signed by that leader (the
// caller checked the signature, the machine the certificate); the orders
// open in increasing (term, seq), and one no greater than the greatest
// opened or issued is stale (a replay is not run again). Round L of an order
// ends Config.Round × L after it opened; a path that has not arrived by
// then counts as the default. At most Config.MaxOrders orders are under
// way (undecided); a leader issues at most that many within the rounds
// of an order (ErrBusy). Messages of an order not opened yet wait, at
// most 64 and a share of them per sender, until it opens or their rounds
// would have ended.
//
// # Bounds
//
// Members: generals.MinMembers to generals.MaxMembers. Every message is
// checked (protocol.ValidateOrderMessage, its cluster, its sender a
// member) and every path (members of the cluster, starting at the
// order's leader, at most f+1 long, the recipient outside it) before
// use. The machine follows at most 2·MaxOrders orders, each until its
// last round ends, at most 8 certified leaders, at most 64 early
// messages.
package agreement
