package core

import "github.com/baton-election/baton/pkg/election"

// Arrivals follows how far apart a leader's messages arrive at a
// follower, in ticks, over its last arrivalWindow gaps, so that the
// leader time-out can follow what the network and the hosts do now
// instead of a constant: on a quiet host the gaps are the heartbeat
// interval, a tick or two apart, and the time-out stays the configured
// one; when heartbeats arrive irregularly (a busy host, a congested
// server) the gaps spread, and the time-out grows with them (Bound).
// It is the adaptive failure detector of the literature in its simplest
// form, mean + k·σ of the inter-arrival times, as HotStuff's view time-out
// and a phi-accrual detector's threshold both are. Integer arithmetic
// only: the machines are deterministic.
//
// The window of 32 gaps forgets a stall within seconds, while a busy
// host stalls again and again, every ten or twenty seconds, each time for
// as long as before (docs/fault-model.md, "Busy hosts"). So Arrivals
// also keeps the longest recent gap (the peak), which falls back by a
// 32nd every peakDecay ticks of shorter arrivals, and bounds the time-out
// below by
// one and a half peaks: a follower that saw its leader's messages pause
// for a second expects it again for the next minutes, while on a quiet
// host the peak is a heartbeat interval and changes nothing. The peak is
// the host's, not the leadership's: Reset keeps it.
type Arrivals struct {
	gaps [arrivalWindow]int
	n    int // gaps recorded, at most arrivalWindow
	next int // where the next gap goes
	peak int // the longest recent gap, decaying
	calm int // ticks of shorter arrivals since the peak last rose or fell
	// The last message Heard: its leader (0: none to measure from) and
	// the tick it arrived in.
	from uint64
	at   int
}

const (
	// arrivalWindow is how many of the latest gaps Arrivals keeps.
	arrivalWindow = 32
	// arrivalMin is how many gaps Arrivals needs before it bounds
	// anything: fewer say little about the spread.
	arrivalMin = 8
	// arrivalSigmas is k in mean + k·σ: the margin, in standard
	// deviations of the gaps, above their mean before a leader counts
	// as silent. 4σ: with gaps spread as a normal law's, one heartbeat in
	// about 30,000 arrives later than that while its leader lives.
	arrivalSigmas = 4
	// maxGap bounds a recorded gap: a gap of more than this many ticks
	// is recorded as this many.
	maxGap = 1 << 16
	// peakDecay is how many ticks of arrivals shorter than the peak
	// lower it by a 32nd (at least a tick), whatever the heartbeat
	// interval: with 10 ms ticks, a 32nd every 6.4 s. One and a half
	// peaks then cover a stall as long as the peak for about 80 s (the
	// busiest hosts measured stalled again within one to two minutes),
	// and a peak of three seconds falls back to a leader time-out of
	// 200 ms in about nine minutes of quiet.
	peakDecay = 640
)

// Add records a gap of gap ticks between two arrivals from the leader.
func (a *Arrivals) Add(gap int) {
	gap = min(max(gap, 0), maxGap)
	a.gaps[a.next] = gap
	a.next = (a.next + 1) % arrivalWindow
	a.n = min(a.n+1, arrivalWindow)
	if gap >= a.peak {
		a.peak, a.calm = gap, 0
		return
	}
	for a.calm += gap; a.calm >= peakDecay && a.peak > 0; a.calm -= peakDecay {
		a.peak -= max(1, a.peak/32)
	}
}

// Heard counts a message of leader from that arrived in tick at: the gap
// since the last message Heard, also when the follower timed the leader
// out meanwhile and the leader came back under a new ballot or term. A
// suspicion that the same leader's next message disproves is the stall
// the time-out must learn most: forgotten with the term, it would fire
// again at the next one. The gaps start again (Reset) after another
// leader's message, after Forget, and after a gap beyond the longest
// adaptive time-out over base (a pause no time-out should wait out).
func (a *Arrivals) Heard(from uint64, at, base int) {
	gap := at - a.at
	switch {
	case a.from != from || gap > election.MaxAdaptiveTimeoutFactor*base:
		a.Reset()
	case gap > 0:
		a.Add(gap)
	}
	a.from, a.at = from, max(a.at, at)
}

// Forget makes the next message Heard start the gaps again, whoever
// sends it, if the last one came from leader from (0: whoever sent it):
// the leader left, resigned, or another one (the follower itself) led
// meanwhile.
func (a *Arrivals) Forget(from uint64) {
	if from == 0 || from == a.from {
		a.from = 0
	}
}

// Reset forgets the gaps: the leader changed. It keeps the peak, which
// says how the host stalls, whoever leads.
func (a *Arrivals) Reset() { a.n, a.next = 0, 0 }

// Bound is how long a follower should expect to wait for its leader's
// next message at most: mean + k·σ of the recorded gaps, rounded up, plus
// one tick (arrivals are read in whole ticks), and at least one and a
// half times the peak. The first part is 0 while fewer than arrivalMin
// gaps are recorded. Callers bound it below by the configured leader
// time-out and above by its multiple.
func (a *Arrivals) Bound() int {
	peak := a.peak + a.peak/2
	if a.n < arrivalMin {
		return peak
	}
	var sum, sq int64
	for _, g := range a.gaps[:a.n] {
		sum += int64(g)
		sq += int64(g) * int64(g)
	}
	n := int64(a.n)
	// Variance times n², exactly: n·Σg² − (Σg)² (at most 32·32·2^32).
	v := n*sq - sum*sum
	// mean + kσ = (Σg + k·√v) / n, rounded up.
	return max(peak, int((sum+arrivalSigmas*isqrtCeil(v)+n-1)/n)+1)
}

// Limit is a leader time-out that follows the arrivals: Bound, never
// below base nor above election.MaxAdaptiveTimeoutFactor times base.
func (a *Arrivals) Limit(base int) int {
	return min(election.MaxAdaptiveTimeoutFactor*base, max(base, a.Bound()))
}

// isqrtCeil is ⌈√v⌉ for v ≥ 0 (0 for v < 0).
func isqrtCeil(v int64) int64 {
	if v <= 0 {
		return 0
	}
	r := int64(0)
	for bit := int64(1) << 31; bit > 0; bit >>= 1 {
		if c := r + bit; c*c <= v {
			r = c
		}
	}
	if r*r < v {
		r++
	}
	return r
}
