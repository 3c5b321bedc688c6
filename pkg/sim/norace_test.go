//go:build !race

package sim_test

const raceSeeds = defaultSeeds
