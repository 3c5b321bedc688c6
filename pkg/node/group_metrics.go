package node

import (
	"net/http"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// metricsHandler serves GET /metrics from reg.
func metricsHandler(reg prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// groupGatherer gathers a group's metrics: each series of the elections
// summed over them (their counters, histograms and gauges such as
// election_is_leader, which becomes the number of elections this member
// leads), so that what a scrape carries does not grow with the number of
// elections; election_connection_events is the largest of them, and
// election_term, one number per election, is left to each election's
// /status. The group's own collectors follow.
type groupGatherer struct{ g *Group }

// perElection are the families a sum would not mean anything for.
var perElection = map[string]bool{"election_term": true}

// maxed are the families whose elections' values are combined by their
// maximum.
var maxed = map[string]bool{"election_connection_events": true}

func (gg groupGatherer) Gather() ([]*dto.MetricFamily, error) {
	families := make(map[string]*dto.MetricFamily)
	for _, c := range gg.g.Clusters() {
		n := gg.g.Node(c)
		if n == nil {
			continue // removed meanwhile
		}
		got, err := n.metrics.registry.Gather()
		if err != nil {
			return nil, err
		}
		for _, f := range got {
			if perElection[f.GetName()] {
				continue
			}
			into := families[f.GetName()]
			if into == nil {
				families[f.GetName()] = proto.Clone(f).(*dto.MetricFamily)
				continue
			}
			for _, m := range f.Metric {
				addMetric(into, m)
			}
		}
	}
	own, err := gg.g.registry.Gather()
	if err != nil {
		return nil, err
	}
	out := make([]*dto.MetricFamily, 0, len(families)+len(own))
	for _, f := range families {
		out = append(out, f)
	}
	out = append(out, own...)
	slices.SortFunc(out, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out, nil
}

// addMetric adds m to the series of f with the same labels, or appends it.
func addMetric(f *dto.MetricFamily, m *dto.Metric) {
	for _, have := range f.Metric {
		if !sameLabels(have.Label, m.Label) {
			continue
		}
		switch {
		case have.Counter != nil && m.Counter != nil:
			have.Counter.Value = proto.Float64(have.Counter.GetValue() + m.Counter.GetValue())
		case have.Gauge != nil && m.Gauge != nil && maxed[f.GetName()]:
			have.Gauge.Value = proto.Float64(max(have.Gauge.GetValue(), m.Gauge.GetValue()))
		case have.Gauge != nil && m.Gauge != nil:
			have.Gauge.Value = proto.Float64(have.Gauge.GetValue() + m.Gauge.GetValue())
		case have.Histogram != nil && m.Histogram != nil:
			addHistogram(have.Histogram, m.Histogram)
		}
		return
	}
	f.Metric = append(f.Metric, proto.Clone(m).(*dto.Metric))
}

// addHistogram adds h's observations to into; the elections' histograms
// share their buckets.
func addHistogram(into, h *dto.Histogram) {
	into.SampleCount = proto.Uint64(into.GetSampleCount() + h.GetSampleCount())
	into.SampleSum = proto.Float64(into.GetSampleSum() + h.GetSampleSum())
	for i, b := range into.Bucket {
		if i < len(h.Bucket) && h.Bucket[i].GetUpperBound() == b.GetUpperBound() {
			b.CumulativeCount = proto.Uint64(b.GetCumulativeCount() + h.Bucket[i].GetCumulativeCount())
		}
	}
}

func sameLabels(a, b []*dto.LabelPair) bool {
	return slices.EqualFunc(a, b, func(x, y *dto.LabelPair) bool {
		return x.GetName() == y.GetName() && x.GetValue() == y.GetValue()
	})
}
