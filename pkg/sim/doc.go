// Package sim is a deterministic simulator for election machines: it runs
// the real state machines (anything that implements election.Machine) on
// fake clocks, fake disks and a fake network, with every random choice
// drawn from one seeded *rand.Rand, so that a seed replays a run event for
// event.
//
// # The cluster
//
// A Cluster holds one machine per member. Real time advances a tick at a
// time. Each Tick first advances every running node's clock by its rate
// (parts per million of real time; every clock runs true unless
// Config.Rates says otherwise) and gives its machine the ticks the clock
// completed, in ID order, and then delivers, in the order they were sent,
// every copy of a message that is due; so a machine gets the ticks due
// before a message arrives before the message. The machines are driven by
// pkg/driver, the runtime's own driver: what turns time into ticks, drops
// the messages of stale ticks, hands a message the tick it arrived in,
// stores before sending and stamps is the same code in both. No map is
// iterated where order matters.
//
// A message with To == 0 is sent as one copy to every other member, and
// each copy faces the network on its own: it is delayed by a number of
// ticks drawn from [MinDelay, MaxDelay] (so copies overtake each other),
// or with probability Long far longer, up to LongDelay; lost with
// probability Loss; or delivered twice with probability Duplicate. Every
// copy is further delayed by Network.Extra (a burst of congestion) and by
// its sender's SetSendDelay (a live node whose messages are late), and
// OnDeliver shows a test every copy handed to a machine with the tick it
// reached its receiver.
//
// Nodes crash (their machine is dropped; copies that reach them are
// dropped too) and restart: a brand-new machine with the same ID and the
// next incarnation, built from its disk, then Start. A node's disk is the
// last hard state (election.Ready's State) its machine produced, stored
// before the messages of the same Ready are sent (driver.Ready); a
// restarted node gets it back (Config.State, Restored), raised by the term
// of the last announcement, which the runtime reads from the stream before
// it starts. WipeDisk loses a disk (a new container). Nodes
// resign (Resign, then the process is gone), pause (no ticks, no
// deliveries: copies queue; the clock goes on) and resume, either as a
// paused process (Resume: first the ticks of the pause in one burst, then
// the queued copies, in order) or as a node descheduled past its deadline
// while copies wait in its socket (ResumeSettling, the runtime's settle:
// the ticks before the deadline's, then the copies, each with the tick of
// its clock in which it arrived, then the rest of the ticks), and are
// partitioned into groups that cannot reach each other until the
// partition heals. When a point-to-point copy finds its receiver down, the
// transport may tell the sender, one tick later, that the receiver is
// unreachable (NATS reports that no one listens). After many ticks at
// once (a pause), only the messages of the last tick are sent, as the
// runtime does.
//
// With dynamic membership (Config.Dynamic) the machines run with
// election.Config.Dynamic (and KeepLeader as Config.KeepLeader says), and
// Config.Members are every ID that may ever run, not a membership the
// machines share: a machine starts knowing Config.Initial at the first
// start of an initial member, itself alone at every other start, as a node
// of the runtime does, and counts as present the members it hears
// (Cluster.MembersOf shows whom). A broadcast reaches the nodes that run,
// paused or not, when it is sent. Cluster.Running lists the nodes that
// run, and Cluster.Leading tells whether they agree on one leader,
// whichever it is. Cluster.VotersOf shows the voter configuration a Paxos
// node of dynamic membership holds, and Cluster.Do runs an operation, such
// as a change of the voters, on a running node's machine through its
// driver, as the runtime's loop runs a request (driver.Do): what it makes
// the machine do is stored before its messages are sent.
//
// After every step (a delivery, a tick, a start, a resignation) the cluster
// checks the invariants that the step could have broken:
//
//   - no term is ever claimed twice, by any node in any incarnation, but
//     by a node that lost its disk (WipeDisk) since it claimed it: it knows
//     the cluster's terms from the last announcement and the live leader
//     alone, and when a partition's announcements came out of order the
//     last is below its old claim (Reclaims counts these);
//   - the term a node accepts (Status().Term) never goes backwards within
//     an incarnation, and never goes below the term on its disk when it
//     started;
//   - a node's leader is a member or 0 (undefined); with dynamic
//     membership, an ID that has run (a present or past member);
//   - at most one node is ever in role Leader with any one term, a node in
//     role Leader leads itself, and a claim leaves its node leading with
//     the claimed term;
//   - every message a machine sends is from itself and passes
//     protocol.Validate (with dynamic membership protocol.ValidateFor with
//     protocol.DynamicMember, to an initial member or an ID that has run),
//     and every hard state it stores passes HardState.Validate;
//   - no more than MaxInFlight(n) copies are in flight (machines that
//     multiply messages without end are caught as a message storm);
//   - a tick among those a machine's Due said could do nothing does
//     nothing (no message, state, claim, event or change of status): the
//     runtime sleeps through them;
//   - with leases (Config.Leases, Paxos): at no instant do two nodes report
//     leader (a node reports leader while its status says so and its own
//     clock has not reached the lease's end, LeaseUntil), and no node
//     claims on a side of a partition without a majority when the
//     partition began before its campaign (with voters that change, a
//     quorum of one of the voter configurations it held since its
//     campaign began: it counted its promises and acceptances under one).
//
// What runs beside the machines, or only some algorithms need, is checked
// by the cluster's checks (the check interface): the cluster tells each,
// in order, of every start, crash or resignation, pause or partition,
// resumption, lost disk, tick of a node's clock, message put on the
// network, step of a machine, status shown and tick of real time, and a
// check keeps what it needs per node. The certificates of an algorithm
// that certifies its leaders (Config.Keys; see Traitors) and the
// agreement on the orders (EnableOrders; see Orders) are two checks; the
// cluster calls them only through that interface.
//
// # Runs as chains of steps
//
// Each random run (RunSeed, RunHostile, RunByzantine, RunChurn,
// RunByzantineChurn) is a short chain of named steps on one run under way:
// its cluster, its seeded random source and its trace. A step does one
// thing and returns the first violation, which ends the chain and is the
// run's error: set up (draw the run's shape, build the cluster); a
// disturbed phase, each tick preceded by what disturbs it (the faults, a
// liar's lies, the traitors' lies, members joining and leaving); settle
// (heal the network, make it reliable with delays within TMax, resume
// paused nodes, start or leave down the crashed ones within what the run
// allows); in a third of the runs restart one node; then wait for the
// agreement within the run's bound, held to the end, and check what it
// cost. The steps the runs share (tick, phase, settleNetwork, bringUp,
// restartOne, await, highest, termKept, in steps.go) are written once; a
// run's own steps are beside its runner.
// A run's random choices are drawn in the order of its steps, so that a
// seed replays the run event for event.
//
// # Random runs
//
// RunSeed builds a cluster of the given size (or 1 to MaxSmall members)
// with random distinct IDs and the production timing,
// election.DefaultTiming (ticks of 10 ms; t_max is TMax = 2 ticks). With
// leases, every clock runs at its own rate within the drift bound the
// timing assumes (election.DefaultMaxDrift). A run has two phases:
//
//   - a fault phase of up to 300 ticks: nodes start at random times within
//     the first LeaderTimeoutTicks, then crash, restart, resign, pause and
//     resume, whole clusters crash and restart, and the network is
//     partitioned at random, while copies are delayed beyond t_max (up to
//     MaxFaultDelay), lost and duplicated, at rates drawn per seed;
//   - a quiet phase: partitions heal, paused nodes resume, no copy is lost
//     or duplicated, every delay is within t_max; each crashed node either
//     restarts or stays down for good, and at least one node runs (with
//     leases, a majority); in a third of the runs one running node then
//     restarts, within a leader time-out.
//
// Liveness: within B ticks after the last of those disturbances, every
// running node must agree that the highest running ID leads, with one term
// everywhere, that node reporting leader and no other, and this must hold
// to the end of the run (2·(LeaderTimeoutTicks + CoordinatorTicks) beyond
// B, long enough for any time-out to have fired again). The bound is
//
//	B = MaxFaultDelay + 16·LeaderTimeoutTicks + 2·CoordinatorTicks + 2·AnswerTicks + 4·t_max
//
// and, with leases, 3·(LeaseTicks + 2)·1.05 + CoordinatorTicks more. Its
// terms, in the order they can be spent: MaxFaultDelay, after which no
// copy from the fault phase is in flight; 16·LeaderTimeoutTicks, within
// which a node that still follows a dead leader suspects it (a node whose
// leader's messages arrived spread or late in the fault phase waits up to
// election.MaxAdaptiveTimeoutFactor time-outs); CoordinatorTicks,
// within which an election running with a dead or outdated candidate runs
// out and starts again (the deferral of a node below the highest live one,
// (r+1)·T, is at most (n+1)·T = CoordinatorTicks); CoordinatorTicks, within
// which the election the highest live ID then runs completes; and 2·T +
// 4·t_max for a claim to reach every node, a Stale reply, and a newer
// claim. With leases, a lease for the grants of a dead leader to run out,
// one for restarted acceptors to wait theirs, one for a candidate that
// backed off for a higher one that failed, each on a clock up to 5% slow,
// and the coordinator time-out of that back-off. The bound is checked, not
// proved: the random runs test it and log the least margin they saw.
//
// At the end, the agreed term must be at least every term claimed, in any
// incarnation, by a node that runs (its disk keeps them); and the messages
// sent from the start of the quiet phase to the agreement (the steady
// traffic of heartbeats and lease renewals excepted) must stay within
// twice the bound stated per election: ElectionBound for every election a
// machine reported starting since a coordinator and a leader time-out
// before the quiet phase, ClaimBound for every claim, MessageBound for
// what the faults left, and two answers to each copy still in flight or
// waiting for a paused node. The deterministic scenario tests measure the
// messages of single elections at 5, 25 and 101 members against
// MessageBound and StartBound.
//
// # Calm runs
//
// The calm runs (TestCalmBully, TestCalmRing, TestCalmPaxos) check that a
// leader that is slow but alive keeps its term. A cluster of 5 members (3
// or 7 in a fifth of the seeds) on a quiet network agrees; then, for 3000
// ticks, nothing fails but things are slow, in a mix drawn per seed: the
// leader's copies are late by 0 to 15 ticks more, a delay that changes
// every few hundred ticks, at once or a tick at a time; bursts make every
// copy 0 to 15 ticks later for 5 to 50 ticks; followers are paused for 1
// to 40 ticks and the leader for 1 to 12, each then resuming as a node
// descheduled past its deadline (ResumeSettling); then the network is
// quiet for four leader time-outs. The oracle measures, with OnDeliver,
// each follower's longest silence of the leader: the largest gap between
// the ticks its copies reached the follower, from the schedule's start
// up to the first new term, or to the end of the run when none came. When
// every follower's gap is below LeaderTimeoutTicks the leader was never
// silent for a time-out: no term may be claimed, and every running node
// must end following the same leader with the same term as before. When
// some gap reached it, the invariants must hold and the cluster must agree
// again within B. Under Paxos a leader also needs a majority's answers
// within its lease: its schedules are milder (delays of half as many
// ticks, bursts of a quarter, follower pauses of half), and a seed is
// calm only if the round trips it allowed stayed within the leader's
// lease (LeaderLeaseTicks) and no more followers than a majority spares
// went silent to the leader for a time-out. At least a third of the
// seeds must be calm (about half are), so that the oracle is tested.
// SIM_CALM_SEEDS sets the number of seeds (200 per algorithm, 50 with
// -short or -race), SIM_CALM_SEED=N replays one with
// its trace.
//
// # A member that lies
//
// RunHostile runs a cluster of 3 to MaxSmall members where one member, at
// random, does not run but lies as itself through Cluster.Inject for up to
// MaxLieTicks ticks: near-ceiling terms, incarnation jumps, resignations,
// replays of its own messages, floods, claims, and answers to what it
// receives (Cluster.Tap), on a reliable network. Every invariant above is
// checked after every step; once it falls silent the honest members must
// agree on the highest honest ID within HostileBound: B, plus the ticks
// it lied and the ticks a node's term credit takes to refill, since its
// terms may have moved some honest nodes further than others and they
// catch up at the pace the credit allows. SIM_HOSTILE_SEEDS sets the
// number of hostile seeds (200 by default, 50 with -short or -race) and
// SIM_HOSTILE_SEED=N replays one.
//
// # Traitors
//
// RunByzantine runs the byzantine algorithm (certified leaders, package
// byzantine) at 4, 7 or 10 members with everything above (the fault
// phase of RunSeed, clocks within the drift bound, leases) and up to
// f = ⌊(n−1)/3⌋ traitors, with their own keys (MemberKeys: deterministic
// per ID). A Traitor runs an honest machine of its own, fed with the
// copies that reach it (Tap), and bends its output: it withholds, and
// equivocates (one version of a broadcast to some members, another to
// the rest, InjectTo). Besides, it votes for two leaders in one term
// (split between members, or with its accomplices for a leader of
// theirs), signs time-outs at random and near the ceiling, proposes
// near-ceiling terms with proofs of its own making, replays its own
// messages and others' certificates, says hello to be timed out for, and
// sends each member a different status. Given the keys
// (Config.Keys, Config.Traitors), the cluster also checks after every
// step that no two valid certificates of one term, seen on the network
// or held by a machine, name different leaders; that no running member
// convicts an honest one; and that no node's term goes back across
// restarts. Once the network settles, the traitors lying on, a leader
// must be certified (an honest node reports leader, or a traitor holds
// a certificate of the current term that an honest node knows)
// within ElectBound = MaxFaultDelay + (f+2)·R, R =
// ByzantineRound, a leader time-out plus a lease on a slow clock and
// four delays: at most f terms in a row whose designated leaders fail,
// one to catch up, one that elects. Once they fall silent the highest
// running honest ID must lead within HighestBound (the penalty of
// PenaltyFactor leader time-outs a member waits before it times out
// again for a member that failed, plus f+3 rounds) and keep leading.
// SIM_BYZANTINE_SEEDS sets the seeds per size (200, 20 under the race
// detector), SIM_BYZANTINE_SIZE one size, SIM_BYZANTINE_SEED=N replays
// one with its trace.
//
// # Orders
//
// In the same runs the members agree on the certified leader's orders
// (EnableOrders): every honest node runs the machine of package
// orders/agreement beside its election machine, given the certificate
// its election machine holds, the ticks of its clock, and the order
// messages, which are broadcast and face the network's faults copy by
// copy, as the election's do, from a random stream of their own (the
// elections of a seed are the same with the orders as without). A node
// keeps the greatest order it took part in on its disk, across
// restarts. In the fault phase the certified leader issues an order now
// and then (at 4 and 7 members); once the network settles and a leader
// is certified, it issues a few, one after the other (3 at N = 4, 2 at
// 7, one in a third of the runs at 10: OM(3) among ten sends 3,609
// relays an order, which would make most of a run's cost). A traitor
// that is the certified leader issues different values to different
// members, and none to some; every traitor runs an honest agreement
// machine of its own and bends it (Traitor.TickOrders): it withholds,
// relays a wrong value, tells members different values along one path,
// signs a relay badly, replays messages verbatim (its own and others'),
// and keeps the honest members' signed relays to frame them. The relays
// are signed with keyed hashes per member (RelayKeys) in place of
// Ed25519, which would be most of a run's cost; a member signs with its
// own alone.
//
// After every step the cluster checks: no honest member decides an order
// twice, nor takes part in one at or below the greatest it took part in
// before; every proof of a lie an honest member finds holds and names a
// traitor, and no traitor can assemble one against an honest member. For
// an order issued after the network settled, while at most f members are
// faulty for it (traitors, honest members down when it was issued, or
// crashed, restarted, paused or cut off before they decided it): IC1, no
// two honest members decide different values; IC2, when its leader is
// honest, every honest decision is its value; and, for an honest
// leader's order of the highest term issued, every honest member that
// ran throughout decides it within OrderBound = TMax + ⌈(f+1)·R/0.95⌉ +
// 1 ticks of its issue, R = OrderRound (8 ticks, enough for a relay of
// the last round on clocks 5% apart): 20 ticks at N = 4, 29 at 7, 37 at
// 10.
//
// # Churn
//
// RunChurn runs Bully, the ring or Paxos (any factory whose machines
// implement election.Membership; Paxos with ChurnSpec.Voters, below) with
// dynamic membership: IDs from 1 to
// MaxChurnID, 1 to MaxSmall of them at start, at most MaxPresent running
// at once, with a presence interval of 25, 50 or 100 ticks drawn per
// seed. Members join (an ID that never ran, or one that ran before, with
// its disk or without) and leave (Resign; a crash, whose connection's end
// the others are told of with probability Network.Events; a hang, a pause
// longer than the member time-out, MemberTimeoutFactor presence intervals,
// after which it resumes as the runtime's loop does, handling what waited
// before the deadlines it reached late, or crashes), each at rates drawn
// per seed. On top come, for 200 to 1200 ticks, the faults of RunSeed:
// crashes and restarts with the disk, pauses, partitions, late, lost and
// duplicated copies. Then the network settles, and within ChurnBound
// (B for MaxPresent members with the coordinator wait of MaxPresent, plus
// MemberTimeoutFactor+1 presence intervals for every member nobody was
// told of to time out, on a clock up to 5% slow) every running node must
// agree on one leader, the highest running ID (with KeepLeader any running
// node), with one term at least every term a running node claimed, count
// exactly the running nodes as present (MembersOf), and keep doing so for
// 2·(leader time-out + coordinator wait) more. Then up to three members
// join, one at a time: after each the same must hold, and with KeepLeader
// the leader stays: no other node may claim (the leader may claim again,
// above a term the member that joined brought on its disk).
//
// ChurnSpec.Only runs the churn alone, one join or departure at a time on
// a reliable network, and checks the exact leader after each settle: the
// highest running ID; with KeepLeader the leader before unless it left
// (it resigned, crashed, or hung for longer than the member time-out),
// and then the highest running ID of those that stayed, kept when the
// hung leader comes back.
//
// ChurnSpec.Voters runs Paxos with voters that change. The run draws a
// voter set of 3 or 5 IDs, initial members, and gives it to every machine
// (election.Config.Voters, version 0). The voters crash, restart, resign,
// hang and are cut off as every member does, and the candidates (the
// members that do not vote) join and leave freely. In the fault phase
// the node that leads, when one does, is asked now and then, at a rate
// drawn per seed, to move the voters to 1 to 5 IDs drawn among the
// running nodes, or in a quarter of the requests among every ID, some of
// which may not run (the change then stays joint, and the leader cannot
// renew its lease, until they do): Cluster.Do runs ChangeVoters on its
// machine, so that the joint configuration is stored before it is
// proposed. A node comes back without its disk only if, in each set of
// the newest configuration a disk holds that it belongs to, a majority of
// the other voters keep that configuration on their disks (the fault
// model does not lose a majority's disks at once); otherwise it comes back
// with it (ChurnResult.Kept). Every settle (after the fault phase, after
// each join that follows it, after each event of Only) first starts
// voters of the newest configuration a running node holds until a quorum
// of it runs, taking the newest again after each start (a voter's disk
// may hold a newer one); when MaxPresent run, a node that neither votes
// nor leads resigns to make room. Besides every invariant (never two nodes
// reporting leader, one leader per term), the agreement then needs every
// running node to hold one voter configuration, not joint: a joint
// configuration that a dead leader left is completed by the next one. In
// a run of Only a fourth of the events are changes of the voters, and the
// configuration must then hold the voters asked for. The runs count the
// changes begun, refused, and begun towards voters not all running; the
// joint and the new configurations stored (one per version), and the
// changes a successor completed.
//
// The churn found three faults of the machines, each kept as a
// deterministic test: a KeepLeader member back with a term above the
// leader's took over (now it asks the leader to reclaim,
// TestChurnKeepLeaderReturn); a Paxos acceptor back without its disk
// accepted before its lease's wait (TestVotersWipedAcceptor); a Paxos
// candidate that does not vote stranded on a newer voter configuration
// it told nobody (TestVotersStrandedCandidate). Two cases run only with
// SIM_KNOWN_BUGS=1: a KeepLeader follower resumed with the ticks of its
// hang first (Resume, not the runtime's ResumeSettling) claims
// (TestChurnKeepLeaderHungFollower, "burst"), and a majority of a
// superseded voter set without state elects (TestVotersSupersededQuorum),
// a majority of those voters losing their disks, outside the fault model.
//
// SIM_CHURN_SEEDS sets the number of seeds per mode (200 by default, 50
// with -short, 30 under the race detector), SIM_CHURN_SEED=N replays one
// with its trace.
//
// # Byzantine churn
//
// RunByzantineChurn runs the byzantine algorithm with a member set that
// changes at run time (byzantine.Config.Changes): IDs from 1 to
// BzChurnPool (9), a configured set of 4 to 6 of them (version 0), and in
// three runs out of four one traitor among those (in a third of them the
// highest). The set never shrinks below BzMinMembers (4), so that f ≥ 1
// in every set and one traitor stays within it. The cluster's authority
// issues each member of the pool a credential for its own key (its
// signature over the cluster, the ID and the key, hex-encoded), which
// Admit checks; the others start later and ask to join with it. Every
// member says it is present each presence interval (25, 50 or 100 ticks,
// drawn per seed); one silent for MemberTimeoutFactor (4) of them counts
// as gone. The traitor runs an honest machine whose set changes, bent as
// a Traitor bends its own (whose lies follow the set of its term), and
// lies about the member set besides: it proposes, in its term or another,
// a pool member with a forged credential, an ID outside the set (of the
// pool or made up) with a key of its own making, or the removal of an
// honest member that runs; it accepts and commits sets at random; it
// carries forged prepared certificates (its own signature alone, or bytes
// that are not signatures, from a quorum) on changes, commits and locks;
// and it sends statuses whose steps carry forged commits.
//
// For 300 to 1000 ticks the faults of RunByzantine come with churn, at
// rates drawn per seed: members of the pool start and ask to join; honest
// members leave, by a Resign or by a crash whose connection's end is
// reported to every running member on its side; departed members come
// back with their disk. Then the network settles: crashed and departed
// members come back or stay away at random, and then away ones come
// back until the newest set an honest member adopted, and every set one
// change from it (a change in flight), holds a quorum of running honest
// members: from there every change due adds a member that runs or removes
// one that is away, and either keeps a quorum running. From the settle
// on, a running member is told of every member of its latest set that is
// away, as the transport reports a connection's end: what it missed while
// down, paused or cut off, or before its set held the member. The traitor
// lies on until a leader is certified (within ElectBound) and up to 2·R
// more, then falls silent; within ByzantineChurnBound, HighestBound for
// BzChurnPool members plus ChangeRound = 2·R for each change counted due
// (the running members the newest set lacks, the members away it holds,
// and two for a change in flight and its undoing) and a member time-out
// for a silent member to count as gone ((MemberTimeoutFactor+1)·
// PresenceTicks, on a clock up to 5% slow), every running honest member
// must hold one latest set, holding all of them and, unless it is down to
// 4 members, none that is away, and the highest of them must lead, to the
// end of the run.
//
// After every step, besides the cluster's invariants with leases, a check
// learns the sets the honest machines adopt (their steps, each verified
// against the set before it, version 0 being the configured one) and
// fails if two sets of one version are adopted, if a change adds a member
// with a key the authority issued no credential for or leaves fewer than
// 4 members (no honest member may even accept or commit to such a set),
// if two valid certificates of one term, each checked against the set of
// its version, name different leaders, or if a node's term goes back
// across restarts.
//
// Any violation, of safety or of liveness, fails a run. The runs found no
// violation of safety, and many faults of liveness in the machines'
// changes of the member set, since fixed: a term that outlived a change
// was never ended, so that the next change waited for good and a member
// the change added could not take part; a member restarted into its term
// under another set than the term's, or dropped the proof of its term;
// members held one term under different sets, or could not follow the
// others into a term proven under an earlier set; a member removed while
// down came back unaware of it; a leader kept a proposal nobody accepted
// for its whole term; a leader's Resign on hand-over was lost;
// byzantine's Due missed work of the changes; and a member that saw a
// term's leader under one set resign it granted nothing to the leader
// the term was certified for under the next set (found by the spread
// runs, below: TestByzantineChurnSpreadSeedsThatFailed).
// TestByzantineChurnSeedsThatFailed replays seeds that found them, each
// of which must now end without a violation. SIM_BZCHURN_SEEDS sets the
// number of seeds (250 by default, 50 with -short, 15 under the race
// detector), SIM_BZCHURN_SEED=N replays one with its trace.
//
// # Ranks
//
// Every check above that names "the highest" member (the highest running
// ID that must lead, the highest honest ID, the highest ID that lies)
// ranks the members by the run's rank, election.Config.Rank, which the
// cluster gives every machine (Config.Rank; Cluster.Agreement and
// Cluster.Highest rank by it). It is by ID unless the spec sets Spread
// (Spec, ByzantineSpec, ByzantineChurnSpec): the members are then ranked
// by election.Spread, the election named after the seed (SpreadRank,
// "sim-<seed>"), so that the seeds try many orders unrelated to the IDs.
// The rank draws nothing from the run's random source, so a seed's
// faults are the same either way, and a run ranked by ID is exactly the
// run it was before ranks existed. The spread variants run beside the
// others: TestRandomBullySpread, TestRandomRingSpread and
// TestRandomPaxosSpread (400 seeds of small clusters and their share of
// the larger sizes; SIM_SPREAD_SEEDS), TestChurnSpread (60 seeds of
// each churn mode; SIM_CHURN_SPREAD_SEEDS), TestRandomByzantineSpread
// (30 seeds per size; SIM_BYZANTINE_SPREAD_SEEDS) and
// TestRandomByzantineChurnSpread (20 seeds; SIM_BZCHURN_SPREAD_SEEDS);
// 20 or 5 with -short or the race detector. The variables that replay
// one seed replay it in the variant that -run selects. Seed 124 of the
// byzantine churn variant still fails liveness (see
// bzChurnSpreadSeeds).
//
// # Replaying
//
// A failing random run is replayed with tracing on, and the test prints its
// seed and the end of its trace: every delivery, drop, loss, crash,
// restart, resignation, pause, partition, claim and status change, tick by
// tick. The same seed always gives the same run. The tests run seeds of
// small clusters and a share of them at 12, 25, 51 and 101 members for
// each algorithm; SIM_SEEDS sets the number (2000 by default, 100 with
// -short; go tool task sim runs 100,000), SIM_SIZE=n runs size n alone,
// and SIM_SEED=N runs seed N alone (of SIM_SIZE, or of a small cluster)
// and prints its trace.
package sim
