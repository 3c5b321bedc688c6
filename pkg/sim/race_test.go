//go:build race

package sim_test

// raceSeeds is defaultSeeds under the race detector, which slows the
// simulator tenfold without finding more in a single-goroutine run: the
// README's test command (with -race) runs this slice, plain go test the
// full default.
const raceSeeds = 300
