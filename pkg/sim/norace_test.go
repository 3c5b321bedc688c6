//go:build !race

package sim_test

const raceSeeds = defaultSeeds

const raceByzantineSeeds = 200

const raceChurnSeeds = churnSeeds

const raceBzChurnSeeds = bzChurnSeeds
