// Package clusterlist reads the contract's list of clusters
// (ELECTION_CLUSTERS): names separated by commas, each possibly with one
// range {a..b} of decimal numbers, so that "shard-{0..255}" is the 256
// names shard-0 to shard-255.
package clusterlist

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/baton-election/baton/pkg/protocol"
)

// Max bounds the names one list may give.
const Max = 16384

// ErrList is wrapped by every error of Expand.
var ErrList = errors.New("cluster list")

// Expand returns the names that list gives, in its order, each checked
// with protocol.ValidateCluster: an empty list, an empty item, a range
// that runs backwards or is not decimal, more than one range in a name,
// a name given twice, or more than Max names is an error.
func Expand(list string) ([]string, error) {
	var names []string
	seen := make(map[string]bool)
	for _, item := range strings.Split(list, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			return nil, fmt.Errorf("%w: an empty name in %q", ErrList, list)
		}
		expanded, err := expand(item, Max-len(names))
		if err != nil {
			return nil, err
		}
		for _, name := range expanded {
			if seen[name] {
				return nil, fmt.Errorf("%w: %q is given twice", ErrList, name)
			}
			seen[name] = true
			names = append(names, name)
		}
	}
	return names, nil
}

// expand returns the names of one item, at most room of them.
func expand(item string, room int) ([]string, error) {
	open := strings.IndexByte(item, '{')
	if open < 0 {
		if strings.ContainsAny(item, "}") {
			return nil, fmt.Errorf("%w: %q: a '}' without '{'", ErrList, item)
		}
		if err := protocol.ValidateCluster(item); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrList, err)
		}
		if room < 1 {
			return nil, fmt.Errorf("%w: more than %d names", ErrList, Max)
		}
		return []string{item}, nil
	}
	end := strings.IndexByte(item[open:], '}')
	if end < 0 {
		return nil, fmt.Errorf("%w: %q: a '{' without '}'", ErrList, item)
	}
	end += open
	prefix, body, suffix := item[:open], item[open+1:end], item[end+1:]
	if strings.ContainsAny(suffix, "{}") {
		return nil, fmt.Errorf("%w: %q: one range per name", ErrList, item)
	}
	lo, hi, ok := strings.Cut(body, "..")
	if !ok {
		return nil, fmt.Errorf("%w: %q: a range is {a..b}", ErrList, item)
	}
	a, errA := number(lo)
	b, errB := number(hi)
	switch {
	case errA != nil || errB != nil:
		return nil, fmt.Errorf("%w: %q: a range's bounds are decimal numbers", ErrList, item)
	case a > b:
		return nil, fmt.Errorf("%w: %q: the range runs backwards", ErrList, item)
	case b-a >= uint64(room):
		return nil, fmt.Errorf("%w: %q: more than %d names", ErrList, item, Max)
	}
	names := make([]string, 0, b-a+1)
	for i := a; i <= b; i++ {
		name := prefix + strconv.FormatUint(i, 10) + suffix
		if err := protocol.ValidateCluster(name); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrList, err)
		}
		names = append(names, name)
	}
	return names, nil
}

// number reads a decimal bound of at most 9 digits.
func number(s string) (uint64, error) {
	if s == "" || len(s) > 9 || strings.Trim(s, "0123456789") != "" {
		return 0, errors.New("not a number")
	}
	return strconv.ParseUint(s, 10, 64)
}
