package observer

import (
	"cmp"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The page with thousands of clusters: it shows the timelines of one
// page of pageClusters at a time, in natural order of their names, those
// a search selects (GET /?q=shard-1&page=2, leader=ID for the clusters a
// member leads, leader=none for those without a leader), under a summary
// of the leaders per member. Its event stream (GET /events, with the same
// query) sends the sections of that page only, and the summary again
// after changes. A deployment of a page of clusters or fewer sees no
// search box and no paging: the page looks as it did.

// pageClusters is how many clusters the page shows at a time.
const pageClusters = 20

// pageMembers is how many members the summary shows, those that lead
// the most clusters first; the rest are counted.
const pageMembers = 64

// summaryEvery is how often, at most, the page's stream sends the
// summary again.
const summaryEvery = time.Second

// pageSelection is what a request of the page selects.
type pageSelection struct {
	q clusterQuery
	// query and leader are the parameters as given, for the form and
	// the links.
	query, leader string
	// page counts from 1; pages is how many there are (at least 1).
	page, pages int
	// total counts the clusters the search selects; all, every cluster.
	total, all int
	// names are the clusters on the page, in natural order.
	names []string
}

// pageSelection parses the page's query leniently (the page is for
// people: a bad value selects the first page, or every cluster) and
// selects the clusters of the page.
func (o *Observer) pageSelection(v url.Values) pageSelection {
	sel := pageSelection{page: 1}
	sel.query = strings.TrimSpace(v.Get("q"))
	if len(sel.query) > maxClusterName {
		sel.query = sel.query[:maxClusterName]
	}
	sel.q.q = strings.ToLower(sel.query)
	switch l := v.Get("leader"); {
	case l == "none":
		sel.q.leaderless, sel.leader = true, l
	case l != "":
		if id, err := strconv.ParseUint(l, 10, 64); err == nil && id > 0 {
			sel.q.leader, sel.leader = id, l
		}
	}
	if p, err := strconv.Atoi(v.Get("page")); err == nil && p > 1 {
		sel.page = p
	}
	selected := o.selectClusters(sel.q)
	sel.total, sel.all = len(selected), o.store.Count()
	sel.pages = max(1, (sel.total+pageClusters-1)/pageClusters)
	sel.page = min(sel.page, sel.pages)
	from := (sel.page - 1) * pageClusters
	for _, e := range selected[from:min(from+pageClusters, len(selected))] {
		sel.names = append(sel.names, e.name)
	}
	return sel
}

// searched reports whether the page selects fewer than every cluster.
func (sel pageSelection) searched() bool {
	return sel.q.q != "" || sel.q.leader != 0 || sel.q.leaderless
}

// open reports whether the page shows every cluster its search selects
// and has room for more: a cluster that appears meanwhile joins it.
func (sel pageSelection) open() bool {
	return sel.pages == 1 && sel.q.leader == 0 && !sel.q.leaderless && len(sel.names) < pageClusters
}

// link is the page's address with page p (and the same search).
func (sel pageSelection) link(p int) string {
	v := url.Values{}
	if sel.query != "" {
		v.Set("q", sel.query)
	}
	if sel.leader != "" {
		v.Set("leader", sel.leader)
	}
	if p > 1 {
		v.Set("page", strconv.Itoa(p))
	}
	if len(v) == 0 {
		return "/"
	}
	return "/?" + v.Encode()
}

// pageView is what the page shows.
type pageView struct {
	Summary  summaryView
	Clusters []clusterView
	// Paged is set when the search box and the paging show: there are
	// more clusters than a page, or a search is under way.
	Paged bool
	// Query and Leader are the search, as given.
	Query, Leader string
	// Total counts the clusters the search selects; From and To number
	// those on this page, from 1.
	Total, From, To int
	Page, Pages     int
	// Prev and Next link to the pages around; empty at the ends.
	Prev, Next string
	// All links to the page without a search.
	All string
}

// summaryView is the summary block of the page.
type summaryView struct {
	// Show is false with fewer than two clusters: there is nothing to
	// sum up.
	Show bool
	// Without counts the clusters without a leader now: leaderless or
	// never led.
	Clusters, WithLeader, Without int
	// Members lead the most clusters, at most pageMembers, by ID;
	// MoreMembers counts the others that lead some.
	Members     []memberBar
	MoreMembers int
}

// memberBar is a member in the summary: how many clusters it leads, its
// share of those with a leader, and its colour in the timelines.
type memberBar struct {
	ID       uint64
	Clusters int
	Hue      int
	Percent  float64
}

// view returns what the page shows of sel, with the summary s; the
// clusters' sections are the caller's.
func (sel pageSelection) view(s summary) pageView {
	v := pageView{
		Paged: sel.all > pageClusters || sel.searched(),
		Query: sel.query, Leader: sel.leader,
		Total: sel.total, Page: sel.page, Pages: sel.pages,
		All: "/",
	}
	if len(sel.names) > 0 {
		v.From = (sel.page-1)*pageClusters + 1
		v.To = v.From + len(sel.names) - 1
	}
	if sel.page > 1 {
		v.Prev = sel.link(sel.page - 1)
	}
	if sel.page < sel.pages {
		v.Next = sel.link(sel.page + 1)
	}
	sv := summaryView{Show: s.Clusters > 1, Clusters: s.Clusters, WithLeader: s.WithLeader, Without: s.Leaderless + s.NeverLed}
	members := s.Members()
	if len(members) > pageMembers {
		slices.SortStableFunc(members, func(a, b memberCount) int { return cmp.Compare(b.Clusters, a.Clusters) })
		sv.MoreMembers = len(members) - pageMembers
		members = members[:pageMembers]
		slices.SortFunc(members, func(a, b memberCount) int { return cmp.Compare(a.ID, b.ID) })
	}
	for _, m := range members {
		sv.Members = append(sv.Members, memberBar{ID: m.ID, Clusters: m.Clusters, Hue: hue(m.ID), Percent: 100 * float64(m.Clusters) / float64(max(1, s.WithLeader))})
	}
	v.Summary = sv
	return v
}
