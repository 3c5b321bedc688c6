//go:build race

package byzantine

// underRace: the race detector slows the single-goroutine harness about
// tenfold without finding more in it; the README's test command (with
// -race) runs a slice of the seeds, plain go test all of them.
const underRace = true
