package observer

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/baton-election/baton/pkg/protocol"
	"github.com/baton-election/baton/services/observer/internal/history"
)

// A deployment may run thousands of elections (one node process in each
// of ELECTION_CLUSTERS=shard-{0..999}): GET /api/leaders pages through
// the clusters and their current leaders, searchable by name, and
// GET /api/summary counts them and the clusters each member leads. Both
// read every cluster's latest leadership in one pass under the store's
// read lock, and copy only that.

// Bounds of GET /api/leaders.
const (
	// defaultLeadersLimit is a page's size without limit.
	defaultLeadersLimit = 100
	// maxLeadersLimit is the largest page.
	maxLeadersLimit = 500
	// maxOffset bounds offset, well above any number of clusters.
	maxOffset = 1 << 30
)

// naturalCompare orders cluster names as people do: runs of digits by
// their value, the rest byte by byte, so that shard-2 comes before
// shard-10. Of two runs of one value, the one with fewer leading zeros
// comes first: only equal names compare equal.
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digitRun(a), digitRun(b)
		if da == 0 || db == 0 {
			if a[0] != b[0] {
				return cmp.Compare(a[0], b[0])
			}
			a, b = a[1:], b[1:]
			continue
		}
		na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
		if c := cmp.Compare(len(na), len(nb)); c != 0 {
			return c
		}
		if c := strings.Compare(na, nb); c != 0 {
			return c
		}
		if c := cmp.Compare(da, db); c != 0 {
			return c
		}
		a, b = a[da:], b[db:]
	}
	return cmp.Compare(len(a), len(b))
}

// digitRun is the length of the run of digits s starts with.
func digitRun(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

// clusterQuery selects clusters: a substring of the name (any case),
// and optionally the current leader.
type clusterQuery struct {
	// q is lower case; empty matches every name.
	q string
	// leader, if set, keeps the clusters it leads now; leaderless keeps
	// those without a current leader.
	leader     uint64
	leaderless bool
}

// matches reports whether a cluster named name whose latest leadership
// is l (ok: it has one) is selected.
func (cq clusterQuery) matches(name string, l history.Leadership, ok bool) bool {
	if cq.q != "" && !containsFold(name, cq.q) {
		return false
	}
	leading := ok && !l.Ended()
	switch {
	case cq.leaderless:
		return !leading
	case cq.leader != 0:
		return leading && l.Leader == cq.leader
	}
	return true
}

// containsFold reports whether s holds the lower-case ASCII substr, in
// any case. Cluster names are ASCII.
func containsFold(s, substr string) bool {
	if len(substr) > len(s) {
		return false
	}
	for i := 0; i+len(substr) <= len(s); i++ {
		j := 0
		for j < len(substr) && lower(s[i+j]) == substr[j] {
			j++
		}
		if j == len(substr) {
			return true
		}
	}
	return false
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// clusterEntry is a cluster and its latest leadership, if any.
type clusterEntry struct {
	name   string
	latest history.Leadership
	has    bool
}

// leading reports whether the cluster has a leader now.
func (e clusterEntry) leading() bool { return e.has && !e.latest.Ended() }

// selectClusters returns the clusters cq selects, in natural order of
// their names, with their latest leaderships.
func (o *Observer) selectClusters(cq clusterQuery) []clusterEntry {
	var out []clusterEntry
	o.store.Each(func(name string, c *history.Cluster) {
		l, ok := c.Latest()
		if cq.matches(name, l, ok) {
			out = append(out, clusterEntry{name: name, latest: l, has: ok})
		}
	})
	slices.SortFunc(out, func(a, b clusterEntry) int { return naturalCompare(a.name, b.name) })
	return out
}

// summary counts the clusters and the leaders.
type summary struct {
	// Clusters have a history; WithLeader a leader now; Leaderless had
	// one, whose leadership ended; NeverLed have a history without
	// leaderships (split brains or member events only).
	Clusters, WithLeader, Leaderless, NeverLed int
	// PerMember counts the clusters each member leads now.
	PerMember map[uint64]int
}

// Members returns the members that lead a cluster now, by ID.
func (s summary) Members() []memberCount {
	out := make([]memberCount, 0, len(s.PerMember))
	for id, n := range s.PerMember {
		out = append(out, memberCount{ID: id, Clusters: n})
	}
	slices.SortFunc(out, func(a, b memberCount) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// memberCount is how many clusters a member leads.
type memberCount struct {
	ID       uint64
	Clusters int
}

// summarize counts every cluster in one pass.
func (o *Observer) summarize() summary {
	s := summary{PerMember: map[uint64]int{}}
	o.store.Each(func(_ string, c *history.Cluster) {
		s.Clusters++
		l, ok := c.Latest()
		switch {
		case !ok:
			s.NeverLed++
		case l.Ended():
			s.Leaderless++
		default:
			s.WithLeader++
			s.PerMember[l.Leader]++
		}
	})
	return s
}

// clusterLeaderJSON is a cluster and its current leadership, as
// GET /api/leaders lists it.
type clusterLeaderJSON struct {
	Name string `json:"name"`
	// Leader, Term, Algorithm and Since are the current leadership's;
	// null without a leader now.
	Leader    *uint64             `json:"leader"`
	Term      *uint64             `json:"term"`
	Algorithm *protocol.Algorithm `json:"algorithm"`
	Since     *protocol.Timestamp `json:"since"`
	// LeaderlessSince is when the latest leadership ended, while the
	// cluster has no leader; null otherwise.
	LeaderlessSince *protocol.Timestamp `json:"leaderless_since"`
}

func clusterLeaderView(e clusterEntry) clusterLeaderJSON {
	v := clusterLeaderJSON{Name: e.name}
	l := e.latest
	switch {
	case e.leading():
		v.Leader, v.Term, v.Algorithm = &l.Leader, &l.Term, &l.Algorithm
		v.Since = &protocol.Timestamp{Time: l.StartedAt}
	case e.has:
		v.LeaderlessSince = &protocol.Timestamp{Time: l.EndedAt}
	}
	return v
}

// leadersJSON is a page of GET /api/leaders.
type leadersJSON struct {
	// Total counts the clusters that match, over every page.
	Total    int                 `json:"total"`
	Offset   int                 `json:"offset"`
	Limit    int                 `json:"limit"`
	Clusters []clusterLeaderJSON `json:"clusters"`
}

// listingQuery is a parsed request for a page of clusters.
type listingQuery struct {
	clusterQuery
	offset, limit int
}

// parseListingQuery parses q, offset, limit and leader, with a page of
// defaultLimit (at most maxLimit) when limit is not given.
func parseListingQuery(v url.Values, defaultLimit, maxLimit int) (listingQuery, error) {
	lq := listingQuery{limit: defaultLimit}
	q := v.Get("q")
	if len(q) > maxClusterName {
		return lq, fmt.Errorf("q: %q is longer than a cluster name (%d bytes)", clip(q), maxClusterName)
	}
	lq.q = strings.ToLower(strings.TrimSpace(q))
	if s := v.Get("offset"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 || n > maxOffset {
			return lq, fmt.Errorf("offset: %q must be an integer from 0 to %d", clip(s), maxOffset)
		}
		lq.offset = n
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxLimit {
			return lq, fmt.Errorf("limit: %q must be an integer from 1 to %d", clip(s), maxLimit)
		}
		lq.limit = n
	}
	switch s := v.Get("leader"); s {
	case "":
	case "none":
		lq.leaderless = true
	default:
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n == 0 {
			return lq, fmt.Errorf("leader: %q must be a member ID (a positive integer) or none", clip(s))
		}
		lq.leader = n
	}
	return lq, nil
}

// page cuts the page lq asks for out of all.
func (lq listingQuery) page(all []clusterEntry) []clusterEntry {
	from := min(lq.offset, len(all))
	return all[from:min(from+lq.limit, len(all))]
}

// apiLeaders lists the clusters with their current leaders, a page at a
// time, in natural order of their names. Parameters: q (a part of the
// name, any case), leader (a member ID: the clusters it leads now; none:
// those without a leader), offset (from 0), limit (1 to 500, 100 if not
// given). A page with more after it has a Link header to the next.
func (o *Observer) apiLeaders(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	if !checkParams(w, v, "q", "leader", "offset", "limit") {
		return
	}
	lq, err := parseListingQuery(v, defaultLeadersLimit, maxLeadersLimit)
	if err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	all := o.selectClusters(lq.clusterQuery)
	page := lq.page(all)
	out := leadersJSON{Total: len(all), Offset: lq.offset, Limit: lq.limit, Clusters: make([]clusterLeaderJSON, 0, len(page))}
	for _, e := range page {
		out.Clusters = append(out.Clusters, clusterLeaderView(e))
	}
	if next := lq.offset + len(page); len(page) > 0 && next < len(all) {
		params := url.Values{}
		for k, vs := range v {
			params[k] = vs
		}
		params.Set("offset", strconv.Itoa(next))
		params.Set("limit", strconv.Itoa(lq.limit))
		w.Header().Set("Link", fmt.Sprintf("<%s?%s>; rel=\"next\"", r.URL.Path, params.Encode()))
	}
	writeJSON(w, http.StatusOK, out)
}

// summaryJSON is GET /api/summary.
type summaryJSON struct {
	// Clusters have a history: WithLeader have a leader now, Leaderless
	// had one whose leadership ended, NeverLed have none recorded.
	Clusters   int `json:"clusters"`
	WithLeader int `json:"with_leader"`
	Leaderless int `json:"leaderless"`
	NeverLed   int `json:"never_led"`
	// LeadersPerMember counts the clusters each member (by ID) leads now.
	LeadersPerMember map[string]int `json:"leaders_per_member"`
	// Followed and MaxClusters are the clusters the observer follows
	// (with a history, or only heard live so far) and its bound,
	// OBSERVER_MAX_CLUSTERS.
	Followed    int `json:"followed"`
	MaxClusters int `json:"max_clusters"`
	// At is when the summary was taken, on the observer's clock.
	At protocol.Timestamp `json:"at"`
}

// apiSummary counts the clusters, those with a leader, and the clusters
// each member leads: how the leaderships are spread.
func (o *Observer) apiSummary(w http.ResponseWriter, r *http.Request) {
	if !checkParams(w, r.URL.Query()) {
		return
	}
	s := o.summarize()
	out := summaryJSON{
		Clusters: s.Clusters, WithLeader: s.WithLeader, Leaderless: s.Leaderless, NeverLed: s.NeverLed,
		LeadersPerMember: make(map[string]int, len(s.PerMember)),
		Followed:         max(o.clustersFollowed(), s.Clusters), MaxClusters: o.cfg.MaxClusters,
		At: protocol.Timestamp{Time: o.now()},
	}
	for id, n := range s.PerMember {
		out.LeadersPerMember[strconv.FormatUint(id, 10)] = n
	}
	writeJSON(w, http.StatusOK, out)
}
