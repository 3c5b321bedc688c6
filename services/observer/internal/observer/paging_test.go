package observer

import (
	"math/rand/v2"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// referencePage is the paging rule written plainly: filter every item,
// then cut one page without splitting a term. page must do the same
// while it reads only what the page needs.
func referencePage(hq historyQuery, now time.Time, l list) (out []int, more bool) {
	for k := range l.n {
		start, end, ok := l.item(k)
		if end.IsZero() {
			end = now
		}
		t := l.term(k)
		if !ok || t <= hq.afterTerm || t >= hq.beforeTerm ||
			(!hq.since.IsZero() && end.Before(hq.since)) || (!hq.until.IsZero() && start.After(hq.until)) {
			continue
		}
		out = append(out, k)
	}
	if len(out) <= hq.limit {
		return out, false
	}
	sameTerm := func(i int) bool { return i > 0 && i < len(out) && l.term(out[i-1]) == l.term(out[i]) }
	if hq.fromEnd {
		cut := len(out) - hq.limit
		for sameTerm(cut) {
			cut++
		}
		if cut == len(out) {
			cut = len(out) - hq.limit
			for sameTerm(cut) {
				cut--
			}
		}
		return out[cut:], cut > 0
	}
	cut := hq.limit
	for sameTerm(cut) {
		cut--
	}
	if cut == 0 {
		cut = hq.limit
		for sameTerm(cut) {
			cut++
		}
	}
	return out[:cut], cut < len(out)
}

// page cuts the same pages as the plain rule, on lists with runs of one
// term, holes and items that last, under random queries.
func TestPageMatchesThePlainRule(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	now := t0.Add(time.Hour)
	for round := range 3000 {
		n := rng.IntN(30)
		terms := make([]uint64, n)
		starts := make([]time.Time, n)
		ends := make([]time.Time, n)
		holes := make([]bool, n)
		term := uint64(rng.IntN(3))
		for k := range n {
			if rng.IntN(3) > 0 {
				term += uint64(1 + rng.IntN(2))
			}
			terms[k] = term
			starts[k] = t0.Add(time.Duration(rng.IntN(60)) * time.Second)
			if rng.IntN(5) > 0 {
				ends[k] = starts[k].Add(time.Duration(rng.IntN(10)) * time.Second)
			}
			holes[k] = rng.IntN(6) == 0
		}
		l := list{
			n:    n,
			term: func(k int) uint64 { return terms[k] },
			item: func(k int) (time.Time, time.Time, bool) { return starts[k], ends[k], !holes[k] },
		}
		q := url.Values{}
		if rng.IntN(2) == 0 {
			q.Set("after_term", strconv.Itoa(rng.IntN(int(term)+2)))
		}
		if rng.IntN(2) == 0 {
			q.Set("before_term", strconv.Itoa(rng.IntN(int(term)+3)))
		}
		if rng.IntN(3) == 0 {
			q.Set("since", t0.Add(time.Duration(rng.IntN(70))*time.Second).Format(time.RFC3339))
		}
		if rng.IntN(3) == 0 {
			q.Set("until", t0.Add(time.Duration(60+rng.IntN(10))*time.Second).Format(time.RFC3339))
		}
		switch rng.IntN(3) {
		case 0:
			q.Set("limit", strconv.Itoa(1+rng.IntN(5)))
		case 1:
			q.Set("last", strconv.Itoa(1+rng.IntN(5)))
		}
		hq, err := parseHistoryQuery(q)
		if err != nil {
			continue
		}
		r := httptest.NewRequest("GET", "/list?"+q.Encode(), nil)
		got, link := page(r, hq, now, l)
		want, more := referencePage(hq, now, l)
		if !slices.Equal(got, want) || (link != "") != more {
			t.Fatalf("round %d: terms %v holes %v, query %s: page %v, link %q; want %v, more %v",
				round, terms, holes, q.Encode(), got, link, want, more)
		}
		if more {
			param, bound := "after_term", terms[want[len(want)-1]]
			if hq.fromEnd {
				param, bound = "before_term", terms[want[0]]
			}
			target, _, _ := strings.Cut(strings.TrimPrefix(link, "<"), ">")
			if u, err := url.Parse(target); err != nil || u.Query().Get(param) != strconv.FormatUint(bound, 10) {
				t.Fatalf("round %d: query %s: link %q, want %s=%d", round, q.Encode(), link, param, bound)
			}
		}
	}
}
