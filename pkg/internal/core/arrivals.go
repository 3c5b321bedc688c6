package core

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
type Arrivals struct {
	gaps [arrivalWindow]int
	n    int // gaps recorded, at most arrivalWindow
	next int // where the next gap goes
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
)

// Add records a gap of gap ticks between two arrivals from the leader.
func (a *Arrivals) Add(gap int) {
	a.gaps[a.next] = min(max(gap, 0), maxGap)
	a.next = (a.next + 1) % arrivalWindow
	a.n = min(a.n+1, arrivalWindow)
}

// Reset forgets every gap: the leader changed.
func (a *Arrivals) Reset() { a.n, a.next = 0, 0 }

// Bound is mean + k·σ of the recorded gaps, rounded up, plus one tick
// (arrivals are read in whole ticks): how long a follower should expect
// to wait for its leader's next message at most. It is 0 while fewer
// than arrivalMin gaps are recorded. Callers bound it below by the
// configured leader time-out and above by its multiple.
func (a *Arrivals) Bound() int {
	if a.n < arrivalMin {
		return 0
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
	return int((sum+arrivalSigmas*isqrtCeil(v)+n-1)/n) + 1
}

// Limit is a leader time-out that follows the arrivals: Bound, never
// below base nor above election.MaxLeaderTimeoutFactor times base.
func (a *Arrivals) Limit(base int) int {
	return min(maxTimeoutFactor*base, max(base, a.Bound()))
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
