//go:build !race

package byzantine

const underRace = false
