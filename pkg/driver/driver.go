// Package driver is the contract between an election.Machine and whatever
// runs it: the node service over NATS (pkg/node) and the simulator
// (pkg/sim) both drive their machines through it, so that the rules below
// are written once.
//
// A Driver is pure: it does no I/O, starts no goroutines and reads no
// clock. Times come in as arguments: the monotonic time of each event
// (when a message arrived, when the caller woke up) and the wall time that
// dates the messages. What it gives back is a Ready, to be carried out in
// its order: store State, then show Status, send Messages, announce
// Claimed.
//
// The rules:
//
//   - Time becomes ticks: tick k of the machine ends at Start's time plus
//     k ticks. Before an event the machine gets every tick that fell due
//     up to the event's time (Advance), and a message is handed over with
//     the tick in which it arrived (election.StepAt), also when it is
//     handed over before ticks that fell due before it arrived (Settle).
//     A machine that implements election.Skipper gets the ticks before
//     its deadline in one call (unless Config.Observe watches each).
//   - Stale ticks are dropped: after a stall (a paused process, a long
//     garbage collection) the machine gets every tick it missed, but the
//     messages of ticks more than election.StaleTicks before the last do
//     not leave. They would be out of date and repeated by those of the
//     last ticks (a heartbeat every interval of the stall, a campaign at
//     every time-out that fell in it); dropping them is the same to the
//     cluster as losing them, which the algorithms tolerate. A wake-up a
//     tick or two late is no stall.
//   - Batching: the machine's Readies accumulate until the caller takes
//     them (Ready): the newest hard state, every message in order, the
//     newest claim, every event. One write of the state serves them all.
//   - Storing before sending: Ready.State must be on stable storage
//     before anything else of the same Ready is shown or sent.
//   - Stamping: each message leaves with this incarnation, its number and
//     the wall time it was taken at (protocol.Stamp).
//   - A claim is announced only while the machine still leads with it.
//
// The shape follows go.etcd.io/raft's RawNode: feed events, take a Ready,
// carry it out, feed the next events.
package driver

import (
	"errors"
	"fmt"
	"time"

	"github.com/baton-election/baton/pkg/election"
	"github.com/baton-election/baton/pkg/protocol"
)

// Config configures a Driver.
type Config struct {
	// Tick is the duration of one tick of the machine's clock; positive.
	Tick time.Duration
	// Incarnation identifies this run of the node; the messages are
	// stamped with it. Positive.
	Incarnation uint64
	// Observe, if not nil, sees what each call of the machine produced,
	// before it is merged into the pending Ready: the simulator checks its
	// invariants there, step by step. The runtime leaves it nil.
	Observe func(Step)
}

// Step is what one call of the machine produced, for Config.Observe.
type Step struct {
	// Tick tells that the call was a Tick.
	Tick bool
	// Stale tells that the Ready's messages will not be sent: they belong
	// to a tick more than election.StaleTicks before the last one due.
	Stale bool
	// Ready is what the machine returned, unstamped.
	Ready election.Ready
	// Status is the machine's status after the call.
	Status election.SoftState
}

// Ready is what the machine wants done since the last Ready, merged, for
// the caller to carry out in this order: store State; show Status and
// record Events; send Messages; announce Claimed.
type Ready struct {
	// State, when not nil, is the newest hard state: it must be on stable
	// storage before anything else of this Ready leaves the process.
	State *election.HardState
	// Status is the machine's status now.
	Status election.SoftState
	// Events are what happened, in order.
	Events []election.Event
	// Messages are to be sent in order, stamped. To == 0 is every other
	// member.
	Messages []protocol.Message
	// Stale are the messages dropped as out of date after a stall, for the
	// logs.
	Stale []protocol.Message
	// Claimed is the newest term the machine claimed, if it still leads
	// with it: the caller announces it. 0 otherwise. A claim whose lease
	// lapsed before the caller heard of it is kept while the machine
	// stays in that term, and reported once it leads in it again (a
	// byzantine leader keeps its term when a quorum's grants lapse and
	// come back, and claims it only once).
	Claimed uint64
}

// ErrConfig is wrapped by the errors of New.
var ErrConfig = errors.New("driver: invalid configuration")

// Driver drives one machine. It is not safe for concurrent use: it belongs
// to the goroutine that owns the machine.
type Driver struct {
	m     election.Machine
	cfg   Config
	stamp *protocol.Stamp
	base  time.Time // the end of the machine's tick 0
	done  int       // ticks given to the machine

	pending Ready
	claimed uint64
	held    uint64 // a claim not reported yet: its term's lease lapsed first
}

// New returns a driver of m. It calls nothing of m.
func New(m election.Machine, cfg Config) (*Driver, error) {
	switch {
	case m == nil:
		return nil, fmt.Errorf("%w: no machine", ErrConfig)
	case cfg.Tick <= 0:
		return nil, fmt.Errorf("%w: tick %v must be positive", ErrConfig, cfg.Tick)
	case cfg.Incarnation == 0:
		return nil, fmt.Errorf("%w: the incarnation must be positive", ErrConfig)
	}
	return &Driver{m: m, cfg: cfg, stamp: protocol.NewStamp(cfg.Incarnation)}, nil
}

// Start starts the machine; its clock starts at now.
func (d *Driver) Start(now time.Time) {
	d.base, d.done = now, 0
	d.m.Start()
	d.collect(false, false)
}

// Incarnation is the incarnation the messages are stamped with.
func (d *Driver) Incarnation() uint64 { return d.cfg.Incarnation }

// Status is the machine's status.
func (d *Driver) Status() election.SoftState { return d.m.Status() }

// Ticks is how many ticks the machine has been given.
func (d *Driver) Ticks() int { return d.done }

// TickOf is the machine's tick in which t falls.
func (d *Driver) TickOf(t time.Time) int { return int(t.Sub(d.base) / d.cfg.Tick) }

// At is the time at which the machine's tick k ends (SoftState.LeaseUntil is
// such a tick).
func (d *Driver) At(k int) time.Time { return d.base.Add(time.Duration(k) * d.cfg.Tick) }

// Deadline is the machine's next deadline (election.Machine.Due) as a
// tick: a caller with nothing else to do may wait until At(Deadline()).
func (d *Driver) Deadline() int { return d.done + d.m.Due() }

// Advance gives the machine every tick that fell due up to now (none if
// now is earlier than the last); those more than election.StaleTicks
// before the last send nothing.
//
// A machine that implements election.Skipper gets the ticks before its
// deadline in one call, unless Config.Observe watches every tick: an
// idle machine's cost is then per deadline, not per tick.
func (d *Driver) Advance(now time.Time) { d.advanceTo(d.TickOf(now)) }

func (d *Driver) advanceTo(last int) {
	skipper, skips := d.m.(election.Skipper)
	skips = skips && d.cfg.Observe == nil
	for d.done < last {
		if skips {
			if n := min(last-d.done, d.m.Due()-1); n > 0 {
				skipper.Skip(n) // nothing to collect: no effect
				d.done += n
				continue
			}
		}
		d.done++
		d.m.Tick()
		d.collect(true, d.done+election.StaleTicks <= last)
	}
}

// Settle prepares the machine for the events that arrived before its
// deadline but are handed over only now (a message still unread in the
// socket when the deadline came): it gives the ticks before the
// deadline's, and the caller then hands over those events with their own
// times of arrival (Step), and Advances. A leader's deadlines are its own
// heartbeats and lease, never the silence of others: Settle does nothing
// for it and returns false.
func (d *Driver) Settle() bool {
	if d.m.Status().Role == election.Leader {
		return false
	}
	d.advanceTo(d.Deadline() - 1)
	return true
}

// Step hands the machine a message that arrived at arrived, with the tick
// it arrived in (election.StepAt). It does not advance the clock: callers
// Advance to arrived first, except after Settle.
func (d *Driver) Step(m protocol.Message, arrived time.Time) {
	election.StepAt(d.m, m, d.TickOf(arrived))
	d.collect(false, false)
}

// Unreachable tells the machine that a peer cannot be reached.
func (d *Driver) Unreachable(id uint64) {
	d.m.Unreachable(id)
	d.collect(false, false)
}

// PeerDown tells the machine that a peer's connection closed.
func (d *Driver) PeerDown(id uint64) {
	d.m.PeerDown(id)
	d.collect(false, false)
}

// Reassert makes a leading machine claim again now, if it can
// (election.Reasserter).
func (d *Driver) Reassert() {
	if r, ok := d.m.(election.Reasserter); ok {
		r.Reassert()
		d.collect(false, false)
	}
}

// Machine is the machine the driver drives.
func (d *Driver) Machine() election.Machine { return d.m }

// Do runs op on the machine, as an event: what it makes the machine do
// is in the next Ready.
func (d *Driver) Do(op func(election.Machine) error) error {
	err := op(d.m)
	d.collect(false, false)
	return err
}

// Resign makes the machine leave; its last messages are in the next Ready.
func (d *Driver) Resign() {
	d.m.Resign()
	d.collect(false, false)
}

// collect merges the machine's Ready into the pending one.
func (d *Driver) collect(tick, stale bool) {
	rd := d.m.Ready()
	if d.cfg.Observe != nil {
		d.cfg.Observe(Step{Tick: tick, Stale: stale, Ready: rd, Status: d.m.Status()})
	}
	p := &d.pending
	if rd.State != nil {
		p.State = rd.State
	}
	if stale {
		p.Stale = append(p.Stale, rd.Messages...)
	} else {
		p.Messages = append(p.Messages, rd.Messages...)
	}
	if rd.Claimed != 0 {
		d.claimed = rd.Claimed
	}
	p.Events = append(p.Events, rd.Events...)
}

// HasReady reports whether the pending Ready holds anything to store,
// send, announce or record.
func (d *Driver) HasReady() bool {
	p := &d.pending
	return p.State != nil || len(p.Messages) > 0 || len(p.Stale) > 0 || len(p.Events) > 0 || d.claimed != 0
}

// Ready returns and clears what the machine wants done, with its messages
// stamped as sent at wall (the wall clock, which dates them). Its slices
// are reused: they are valid until the next call of the driver.
func (d *Driver) Ready(wall time.Time) Ready {
	rd := d.pending
	d.pending = Ready{Events: rd.Events[:0], Messages: rd.Messages[:0], Stale: rd.Stale[:0]}
	rd.Status = d.m.Status()
	for i := range rd.Messages {
		d.stamp.Apply(&rd.Messages[i], wall)
	}
	if d.claimed != 0 {
		d.held, d.claimed = d.claimed, 0
	}
	if d.held != 0 && rd.Status.Term != d.held {
		d.held = 0 // its term is over: never announced
	}
	if d.held != 0 && rd.Status.Role == election.Leader {
		rd.Claimed, d.held = d.held, 0
	}
	return rd
}
