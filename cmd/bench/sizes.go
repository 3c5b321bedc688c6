package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/baton-election/baton/pkg/protocol"
)

// defaultSizes is -sizes by default: the crash-tolerant algorithms at 5,
// 25 and 101 nodes, byzantine at 4, 7 and 25 (f = 1, 2 and 8 liars
// tolerated).
const defaultSizes = "5,25,101;byzantine=4,7,25"

// Cluster sizes accepted by -sizes.
const (
	minSize = 2
	maxSize = 1000
)

// parseSizes reads -sizes: lists separated by semicolons, each either
// "n,n,…", the sizes of every algorithm without a list of its own, or
// "algorithm=n,n,…", that algorithm's. It returns, for each algorithm of
// algorithms, its sizes in ascending order. A list for an algorithm that
// is not measured is an error if explicit is set (the user wrote it),
// and ignored otherwise (the default names byzantine).
func parseSizes(spec string, algorithms []protocol.Algorithm, explicit bool) (map[protocol.Algorithm][]int, error) {
	var every []int
	everySet := false
	own := map[protocol.Algorithm][]int{}
	if strings.Trim(spec, "; ") == "" {
		return nil, errors.New("-sizes names no size")
	}
	for group := range strings.SplitSeq(spec, ";") {
		group = strings.TrimSpace(group)
		if group == "" {
			continue
		}
		name, list, named := strings.Cut(group, "=")
		sizes, err := parseSizeList(list, group, named)
		if err != nil {
			return nil, err
		}
		if !named {
			if everySet {
				return nil, fmt.Errorf("-sizes: two lists without an algorithm, %q and %q; name the algorithm of one (algorithm=n,n,…)", joinSizes(every), group)
			}
			every, everySet = sizes, true
			continue
		}
		alg := protocol.Algorithm(strings.TrimSpace(name))
		if !slices.Contains(protocol.Algorithms, alg) {
			return nil, fmt.Errorf("-sizes: %q in %q is not one of %v", alg, group, protocol.Algorithms)
		}
		if _, dup := own[alg]; dup {
			return nil, fmt.Errorf("-sizes: two lists for %s", alg)
		}
		if explicit && !slices.Contains(algorithms, alg) {
			return nil, fmt.Errorf("-sizes: %q names %s, which -algorithms %v does not measure", group, alg, algorithms)
		}
		own[alg] = sizes
	}
	plan := make(map[protocol.Algorithm][]int, len(algorithms))
	for _, alg := range algorithms {
		sizes, ok := own[alg]
		if !ok {
			sizes = every
		}
		if len(sizes) == 0 {
			return nil, fmt.Errorf("-sizes: no sizes for %s: give a list without an algorithm, or %s=n,n,…", alg, alg)
		}
		// Below 4 members byzantine tolerates no liar, and its nodes refuse
		// to run.
		if alg == protocol.Byzantine && sizes[0] < 4 {
			return nil, fmt.Errorf("-sizes: byzantine at %d nodes tolerates no liar, and the nodes refuse it: give byzantine=n,n,… from 4", sizes[0])
		}
		plan[alg] = sizes
	}
	return plan, nil
}

// parseSizeList reads "n,n,…" of group, in ascending order.
func parseSizeList(list, group string, named bool) ([]int, error) {
	if !named {
		list = group
	}
	var sizes []int
	for s := range strings.SplitSeq(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < minSize || n > maxSize {
			return nil, fmt.Errorf("-sizes: %q in %q is not a cluster size from %d to %d", s, group, minSize, maxSize)
		}
		if slices.Contains(sizes, n) {
			return nil, fmt.Errorf("-sizes: %d twice in %q", n, group)
		}
		sizes = append(sizes, n)
	}
	if len(sizes) == 0 {
		return nil, fmt.Errorf("-sizes: %q names no size", group)
	}
	slices.Sort(sizes)
	return sizes, nil
}

// allSizes is every size of plan, in ascending order, once.
func allSizes(plan map[protocol.Algorithm][]int) []int {
	var all []int
	for _, sizes := range plan {
		for _, n := range sizes {
			if !slices.Contains(all, n) {
				all = append(all, n)
			}
		}
	}
	slices.Sort(all)
	return all
}

// planned is one cluster the benchmark measures: an algorithm at a size.
type planned struct {
	algorithm protocol.Algorithm
	n         int
}

// columns lists the clusters of plan in the order they are measured, which
// is the order of their columns in the table: by size, then in the order
// of algorithms.
func columns(algorithms []protocol.Algorithm, plan map[protocol.Algorithm][]int) []planned {
	var out []planned
	for _, n := range allSizes(plan) {
		for _, alg := range algorithms {
			if slices.Contains(plan[alg], n) {
				out = append(out, planned{alg, n})
			}
		}
	}
	return out
}

// roundsAt is how many rounds of each failover a cluster of n nodes gets
// from preset: the rounds of the largest size of preset not above n, or
// of its smallest if n is below them all (so 4 and 7 nodes get 5's).
func roundsAt(preset map[int]int, n int) int {
	best, smallest := 0, 0
	for size := range preset {
		if size <= n && size > best {
			best = size
		}
		if smallest == 0 || size < smallest {
			smallest = size
		}
	}
	if best == 0 {
		best = smallest
	}
	return preset[best]
}

// planText says which algorithm is measured at which sizes, for the
// output: "bully, ring and paxos at 5, 25 and 101 nodes; byzantine at 4,
// 7 and 25 nodes".
func planText(algorithms []protocol.Algorithm, plan map[protocol.Algorithm][]int) string {
	var parts []string
	done := map[protocol.Algorithm]bool{}
	for _, alg := range algorithms {
		if done[alg] {
			continue
		}
		var same []string
		for _, other := range algorithms {
			if !done[other] && slices.Equal(plan[other], plan[alg]) {
				done[other] = true
				same = append(same, string(other))
			}
		}
		parts = append(parts, fmt.Sprintf("%s at %s nodes", andList(same), andList(sizeStrings(plan[alg]))))
	}
	return strings.Join(parts, "; ")
}

// roundsText says how many rounds each size gets: "5 rounds at 4, 5 and 7
// nodes, 3 at 25, 2 at 101".
func roundsText(rounds map[int]int) string {
	var sizes []int
	for n := range rounds {
		sizes = append(sizes, n)
	}
	slices.Sort(sizes)
	var parts []string
	for i := 0; i < len(sizes); {
		r := rounds[sizes[i]]
		var at []int
		for ; i < len(sizes) && rounds[sizes[i]] == r; i++ {
			at = append(at, sizes[i])
		}
		unit := ""
		if len(parts) == 0 {
			unit = " rounds"
			if r == 1 {
				unit = " round"
			}
		}
		parts = append(parts, fmt.Sprintf("%d%s at %s", r, unit, andList(sizeStrings(at))))
	}
	if len(parts) > 0 {
		parts[0] += " nodes"
	}
	return strings.Join(parts, ", ")
}

func sizeStrings(sizes []int) []string {
	s := make([]string, len(sizes))
	for i, n := range sizes {
		s[i] = strconv.Itoa(n)
	}
	return s
}

func joinSizes(sizes []int) string { return strings.Join(sizeStrings(sizes), ",") }

// andList joins "a", "b" and "c" as "a, b and c".
func andList(items []string) string {
	switch len(items) {
	case 0:
		return ""
	case 1:
		return items[0]
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}
