package lab

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// apiURL is the loopback URL of an API server.
func apiURL(port int) string { return fmt.Sprintf("https://127.0.0.1:%d", port) }

// writeKubeconfigs writes one kubeconfig per cluster (used by its own
// components) and a merged one with a context per cluster for users,
// kubefedctl and tests. Credentials are embedded so the files stand alone.
func writeKubeconfigs(st *State) error {
	merged := clientcmdapi.NewConfig()
	all := st.Clusters
	if st.Management != nil {
		all = append(append([]*ClusterState(nil), all...), st.Management)
	}
	for _, c := range all {
		cfg, err := clusterKubeconfig(c)
		if err != nil {
			return err
		}
		if err := clientcmd.WriteToFile(*cfg, c.Kubeconfig); err != nil {
			return fmt.Errorf("write kubeconfig %s: %w", c.Kubeconfig, err)
		}
		merged.Clusters[c.Name] = cfg.Clusters[c.Name]
		merged.AuthInfos[c.Name] = cfg.AuthInfos[c.Name]
		merged.Contexts[c.Name] = cfg.Contexts[c.Name]
	}
	merged.CurrentContext = HostName
	return clientcmd.WriteToFile(*merged, st.Kubeconfig)
}

func clusterKubeconfig(c *ClusterState) (*clientcmdapi.Config, error) {
	read := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(c.Dir, name)) }
	ca, err := read(fileCA)
	if err != nil {
		return nil, err
	}
	cert, err := read(fileAdminCert)
	if err != nil {
		return nil, err
	}
	key, err := read(fileAdminKey)
	if err != nil {
		return nil, err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[c.Name] = &clientcmdapi.Cluster{Server: apiURL(c.APIPort), CertificateAuthorityData: ca}
	cfg.AuthInfos[c.Name] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: c.Name}
	cfg.CurrentContext = c.Name
	return cfg, nil
}

// restConfig builds a client config for cluster c from its PKI files.
func restConfig(c *ClusterState) (*rest.Config, error) {
	cfg, err := clusterKubeconfig(c)
	if err != nil {
		return nil, err
	}
	rc, err := clientcmd.NewDefaultClientConfig(*cfg, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, err
	}
	// The lab drives many objects quickly; client-side throttling only slows it.
	rc.QPS, rc.Burst = 200, 400
	return rc, nil
}
