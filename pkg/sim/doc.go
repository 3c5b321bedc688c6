// Package sim is a deterministic simulator for election machines: it runs
// the real state machines (anything that implements election.Machine) on a
// fake clock and a fake network, with every random choice drawn from one
// seeded *rand.Rand, so that a seed replays a run event for event.
//
// # The cluster
//
// A Cluster holds one machine per member. Each Tick first delivers, in the
// order they were sent, every copy of a message that is due, and then ticks
// every running node in ID order; no map is iterated where order matters.
// A message with To == 0 is sent as one copy to every other member, and
// each copy faces the network on its own: it is delayed by a number of
// ticks drawn from [MinDelay, MaxDelay] (so copies overtake each other),
// lost with probability Loss, or delivered twice with probability
// Duplicate. Nodes crash (their machine is dropped; copies that reach them
// are dropped too), restart (a brand-new machine with the same ID, then
// Start, since a restarted node has lost its state), resign (Resign, then
// the process is gone), and are partitioned into groups that cannot reach
// each other until the partition heals. When a point-to-point copy finds
// its receiver down, the transport may tell the sender, one tick later,
// that the receiver is unreachable (NATS reports that no one listens).
//
// After every step (a delivery, a tick, a start, a resignation) the cluster
// checks the invariants that the step could have broken:
//
//   - no two different nodes ever claim the same term (Ready().Claimed,
//     across all nodes and incarnations);
//   - the term a node accepts (Status().Term) never goes backwards within
//     one incarnation;
//   - a node's leader is a member or 0 (undefined);
//   - at most one node is ever in role Leader with any one term, a node in
//     role Leader leads itself, and a claim leaves its node leading with
//     the claimed term;
//   - every message a machine sends is from itself and passes
//     protocol.Validate;
//   - no more than MaxInFlight copies are in flight (machines that
//     multiply messages without end are caught as a message storm).
//
// # Random runs
//
// RunSeed builds a cluster of 1 to MaxMembers members with random distinct
// IDs from 1 to 30 and the production timing, election.DefaultTiming
// (ticks of 10 ms; t_max is TMax = 2 ticks). A run has two phases:
//
//   - a fault phase of up to 300 ticks: nodes start at random times within
//     the first LeaderTimeoutTicks, then crash, restart, resign and are
//     partitioned at random, while copies are delayed by up to
//     MaxFaultDelay ticks, lost and duplicated, at rates drawn per seed;
//   - a quiet phase: partitions heal, no copy is lost or duplicated, every
//     delay is within t_max; each crashed node either restarts at its start
//     or stays down for good, and at least one node runs.
//
// Liveness: within B ticks after the quiet phase starts, every running node
// must agree that the highest running ID leads, with one term everywhere,
// that node in role Leader and no other, and this must hold to the end of
// the run (which lasts 2·(LeaderTimeoutTicks + CoordinatorTicks) beyond B,
// long enough for any time-out to have fired again). The bound is
//
//	B = MaxFaultDelay + LeaderTimeoutTicks + 2·CoordinatorTicks + 2·AnswerTicks + 4·t_max
//
// ticks (with the default timing, 64 ticks for one member, 124 for seven:
// 0.64 s to 1.24 s). Its terms, in the order they can be spent:
//
//   - MaxFaultDelay: after it, no copy from the fault phase is in flight;
//   - LeaderTimeoutTicks: a node that still follows a dead leader suspects
//     it and starts an election;
//   - CoordinatorTicks: an election already running with a dead or
//     outdated candidate (a Bully candidate answered by a node that then
//     died, a ring round whose candidate died) runs out and starts again;
//   - CoordinatorTicks: the election that the highest live ID then runs
//     completes: for Bully, T for Answers that do not come, for the ring, a
//     round that passes each member at most twice, t_max per live hop and
//     T per dead successor skipped;
//   - 2·AnswerTicks + 4·t_max: the new leader's claim reaches every node,
//     a node that knows a newer term answers Stale, and the leader claims
//     a newer term, which reaches every node (twice T for a Bully leader
//     that must run its election again after stepping down).
//
// The bound is checked, not proved: the random runs test it, and they log
// the least margin they saw.
//
// # Replaying
//
// A failing random run is replayed with tracing on, and the test prints its
// seed and its full trace: every delivery, drop, loss, crash, restart,
// resignation, partition, claim and status change, tick by tick. The same
// seed always gives the same run; SIM_SEED=N runs seed N alone and prints
// its trace, and SIM_SEEDS=N runs seeds 1 to N instead of the default
// 10,000 per algorithm (about 3 s per algorithm, 18 s under -race, on two
// cores; -short runs 200).
package sim
