//go:build race

package sim_test

// raceSeeds is defaultSeeds under the race detector, which slows the
// simulator tenfold without finding more in a single-goroutine run: the
// README's test command (with -race) runs this slice, plain go test the
// full default.
const raceSeeds = 300

// raceByzantineSeeds is how many seeds of each size TestRandomByzantine
// runs under the race detector.
const raceByzantineSeeds = 20

// raceChurnSeeds is how many seeds of each churn mode the churn tests run
// under the race detector.
const raceChurnSeeds = 30

// raceBzChurnSeeds is how many seeds TestRandomByzantineChurn runs under
// the race detector.
const raceBzChurnSeeds = 15
