// Package generals implements the Byzantine generals' agreement with oral
// messages, Lamport, Shostak and Pease's OM(m) ("The Byzantine Generals
// Problem", 1982), as a pure, deterministic state machine: no I/O, no
// goroutines, no clock. The caller carries the messages and tells each
// machine when a round's deadline has passed.
//
// The rules, from the paper: a leader (the commander) and
// followers (the lieutenants); the leader issues a value; the followers
// relay it to the rest; traitors may send wrong values; N ≥ 3f+1. What
// OM(m) guarantees when at most m of the N ≥ 3m+1 members are traitors:
//
//   - IC1: every loyal lieutenant decides the same value;
//   - IC2: if the commander is loyal, every loyal lieutenant decides the
//     value it issued.
//
// New runs OM(m) with m = f = ⌊(N−1)/3⌋ (Faults), the most traitors N
// members can tolerate; with fewer than 3f+1 members no algorithm of oral
// messages can keep both. Among three, OM(1) breaks IC2 when the commander
// issues A and a traitor lieutenant tells the other it received B: the
// loyal lieutenant holds A and B, no majority, and decides the default.
// No rule does better: had the commander lied instead, sending A to one
// lieutenant and B to the other, each would see what a lieutenant sees
// here, so keeping IC2 here would break IC1 there.
//
// # The algorithm as paths
//
// Every message carries a path: the commander, then the lieutenants that
// relayed it, all distinct; the last is the sender. A message (p, v)
// means "p's last member says that v reached it along p". Round L carries
// the paths of L members, L = 1 … m+1:
//
//   - The commander sends ([c], v) to every lieutenant (Issue) and decides v.
//   - A lieutenant q that receives (p, v) with fewer than m+1 members
//     relays (p+q, v) to every member outside p and q (Receive). A path
//     that has not arrived by its round's end counts as the default value
//     and is relayed as such (EndRound), as Lamport's lieutenants relay
//     RETREAT when they receive nothing.
//   - Once every path has a value (all arrived, or the last round ended),
//     q decides resolve([c]), where resolve(p) is the value received along
//     p when p has m+1 members (OM(0)), and otherwise the majority of the
//     value received along p and of resolve(p+j) for every lieutenant j
//     outside p and q (OM(m−|p|+1) whose commander is p's last member).
//
// Majority means more than half of the values; when no value has that
// (a tie, or values all different) the result is Config.Default, the
// RETREAT of the paper. The decision does not depend on the order in
// which a round's messages arrive, except that of two values a traitor
// sends along one path the first to arrive is kept.
//
// # What the caller provides
//
// The paper's assumptions, which the algorithm does not check:
//
//   - A1, every message a loyal member sends arrives in its round: the
//     caller ends round L (EndRound) only after the deadline by which
//     loyal messages of that round arrive. A loyal member's message that
//     arrives after its round has ended (ErrLate) counts as the default,
//     so its sender has then acted as a traitor and spends one of the m
//     faults the guarantees allow.
//   - A2, the receiver knows the sender: Receive takes the sender from the
//     transport (an authenticated connection or a signature) and refuses
//     a path that does not end at it (ErrSender), so a traitor can lie
//     about what reached it but not speak for another member.
//   - A3, the absence of a message can be detected: the round deadlines.
//
// Every member index, path and value is checked before use: N from
// MinMembers to MaxMembers, paths of 1 … m+1 distinct members in range
// that start at the commander and leave out the receiver, values of at
// most MaxValueSize bytes. A second message along one path with another
// value is refused with ErrEquivocation (proof that the path's last member
// lied; the first value stays); an identical copy is ignored.
//
// # Message counts
//
// With every message sent, OM(m) sends (N−1) + (N−1)(N−2) + … +
// (N−1)(N−2)…(N−m−1) messages (MessageCount), about N^(m+1), and each
// lieutenant keeps one value per path it receives:
//
//	 N   m   messages   values per lieutenant
//	 4   1          9       3
//	 5   1         16       4
//	 6   1         25       5
//	 7   2        156      26
//	 8   2        259      37
//	 9   2        400      50
//	10   3      3,609     401
//	11   3      5,860     586
//	12   3      9,031     821
//	13   4    108,384   9,032
//	16   5  3,999,675 266,645
//
// Since m grows with N, so does the exponent: MaxMembers is 12, the
// largest N before the count jumps more than tenfold. A larger cluster
// would run the agreement among a committee of at most 12 of its members.
//
// # Tests
//
// Every lie of one traitor among four members (whichever member commands,
// whichever lies, each of its messages A, B, the default, withheld or too
// late, delivered in order and reversed: 2,824 combinations) keeps IC1 and
// IC2; the same search among three finds the counterexample above; f
// random traitors at N = 7 and N = 10 (600 seeds, their messages shuffled,
// some forged) keep both and agree with OM(m) written as the paper's
// recursion.
package generals
