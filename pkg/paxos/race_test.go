//go:build race

package paxos

// raceEnabled: the race detector slows the random runs tenfold; they run
// fewer seeds under it.
const raceEnabled = true
