package lab

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"k8s.io/client-go/rest"
)

// What a member's own control plane does at rest, for the scale
// benchmark's rig (Options.Profiling): a CPU profile of each component and
// the API server's request counters. The default lab serves no profiles.

// profilingFlag is the Kubernetes components' --profiling.
func profilingFlag(on bool) string { return "--profiling=" + strconv.FormatBool(on) }

// ComponentProfile fetches a CPU profile over seconds from component of
// cluster: CompAPIServer, CompKCM and CompScheduler serve it with the
// cluster's admin credentials, CompEtcd over plain HTTP (shared or not).
// It needs Options.Profiling.
func (l *Lab) ComponentProfile(ctx context.Context, cluster, component string, seconds int) ([]byte, error) {
	if !l.opts.Profiling {
		return nil, fmt.Errorf("the lab serves no profiles: start it with Options.Profiling")
	}
	c, err := l.clusterState(cluster)
	if err != nil {
		return nil, err
	}
	path := fmt.Sprintf("/debug/pprof/profile?seconds=%d", seconds)
	if component == CompEtcd {
		return getBody(ctx, http.DefaultClient, fmt.Sprintf("http://127.0.0.1:%d%s", c.EtcdPort, path))
	}
	port := map[string]int{CompAPIServer: c.APIPort, CompKCM: c.KCMPort, CompScheduler: c.SchedulerPort}[component]
	if port == 0 {
		return nil, fmt.Errorf("no profile of component %q", component)
	}
	hc, err := adminClient(c)
	if err != nil {
		return nil, err
	}
	return getBody(ctx, hc, fmt.Sprintf("https://127.0.0.1:%d%s", port, path))
}

// APIServerMetrics returns the /metrics text of cluster's API server.
func (l *Lab) APIServerMetrics(ctx context.Context, cluster string) (string, error) {
	c, err := l.clusterState(cluster)
	if err != nil {
		return "", err
	}
	hc, err := adminClient(c)
	if err != nil {
		return "", err
	}
	b, err := getBody(ctx, hc, apiURL(c.APIPort)+"/metrics")
	return string(b), err
}

// adminClient is an HTTP client with cluster c's admin client certificate
// that does not check the server's certificate: the controller-manager's
// and scheduler's serving certificates are self-signed, and every
// component listens on loopback only.
func adminClient(c *ClusterState) (*http.Client, error) {
	rc, err := restConfig(c)
	if err != nil {
		return nil, err
	}
	tc, err := rest.TLSConfigFor(rc)
	if err != nil {
		return nil, err
	}
	tc.RootCAs, tc.InsecureSkipVerify = nil, true //nolint:gosec // loopback lab component, self-signed
	return &http.Client{Transport: &http.Transport{TLSClientConfig: tc}}, nil
}

// getBody GETs url with hc and returns the body of a 200 answer.
func getBody(ctx context.Context, hc *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %d %.200s", url, resp.StatusCode, body)
	}
	return body, nil
}
