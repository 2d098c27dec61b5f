// Package metrics is the one place where fedfailover registers its Prometheus
// metrics with controller-runtime's registry, so they are served on the
// manager's /metrics endpoint next to controller-runtime's own.
//
// Every metric name starts with "fedfailover_". Each area of the operator
// declares its collectors in a file of its own here (members.go, ...) and
// lists them in that file's init through mustRegister; per-cluster series are
// labelled "cluster" so DeleteCluster can drop them all when a member leaves.
package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Namespace prefixes every fedfailover metric name.
const Namespace = "fedfailover"

// ClusterLabel is the label naming a member cluster.
const ClusterLabel = "cluster"

// MemberLabel names a member cluster too, in the series of one member's
// part in a multi-member figure (fedfailover_failover_shortfall_replicas:
// what the failure of that member would leave); DeleteCluster drops it
// like ClusterLabel.
const MemberLabel = "member"

var (
	mu sync.Mutex
	// perCluster are the vectors with a ClusterLabel, for DeleteCluster.
	perCluster []deletable
)

type deletable interface {
	DeletePartialMatch(prometheus.Labels) int
}

// mustRegister registers collectors with controller-runtime's registry and
// remembers those labelled by cluster. Call it from init functions only.
func mustRegister(cs ...prometheus.Collector) {
	mu.Lock()
	defer mu.Unlock()
	metrics.Registry.MustRegister(cs...)
	for _, c := range cs {
		if d, ok := c.(deletable); ok {
			perCluster = append(perCluster, d)
		}
	}
}

// DeleteCluster removes every series of the member cluster, e.g. after unjoin,
// so a departed member does not linger in dashboards.
func DeleteCluster(cluster string) {
	mu.Lock()
	defer mu.Unlock()
	for _, d := range perCluster {
		d.DeletePartialMatch(prometheus.Labels{ClusterLabel: cluster})
		d.DeletePartialMatch(prometheus.Labels{MemberLabel: cluster})
	}
}
