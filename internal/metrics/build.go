package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fedfailover/fedfailover/internal/version"
)

// BuildInfo is always 1; its labels say which build of the manager serves
// the metrics (internal/version): version, revision and Go version. A plain
// Gauge with constant labels, so DeleteCluster never touches it.
var BuildInfo = prometheus.NewGauge(prometheus.GaugeOpts{
	Namespace: Namespace,
	Name:      "build_info",
	Help:      "Always 1; the labels say which build of fedfailover serves these metrics (version, revision, go).",
	ConstLabels: func() prometheus.Labels {
		i := version.Get()
		return prometheus.Labels{"version": i.Version, "revision": i.Revision, "go": i.GoVersion}
	}(),
})

func init() {
	BuildInfo.Set(1)
	mustRegister(BuildInfo)
}
